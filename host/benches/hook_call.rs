//! Cost of one hook call through the component against a loopback backend, next to a raw
//! keep-alive POST of the same bytes to the same backend, in the same run; then
//! throughput at concurrency 8 (decisions/s), raw and hook rounds alternating.
//!
//! `cargo bench -p ahp-host --bench hook_call` (optionally `-- N` for N calls each).
//! The current-thread harness setup is `tests/harness-bench`; the pieces both share are
//! in `loopback/`.
//!
//! Rows, one of each per round, in this order:
//! - a raw POST right after the previous round's component calls (about 27 µs of
//!   component work, more than the hook call's own POST follows: some 9 µs of its own),
//!   which that work slows, so the ratio to it is the lower one;
//! - a raw POST right after that one: the floor in the hook call's own position (it too
//!   follows a raw POST), the ratio the target is read against;
//! - the hook call;
//! - the same hook call with the backend as an in-process transport that answers at
//!   once: the component and host with the network taken out;
//! - a component call that no interceptor matches: validation, settlement and the record.

#[allow(dead_code)] // shared by the benches; this one uses a part
mod loopback;

use ahp_host::EffectKind;
use loopback::{
    connect, first_body, hook, post, print_ratio, registration, throughput, timed, Interceptors,
    Rows, CONCURRENCY, EVENT,
};
use std::net::SocketAddr;
use tokio::net::TcpListener;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .filter_map(|a| a.parse().ok())
        .next()
        .unwrap_or(5_000);
    let addr = serve().await;
    let url = format!("http://{addr}/hooks");
    let registration = registration(&url);
    let Interceptors {
        network: interceptor,
        in_process,
        idle,
    } = Interceptors::new(&registration).await;
    let request_body = first_body();
    let mut sender = connect(addr).await;

    let mut rows = Rows::new(
        vec![
            "raw POST, after component calls",
            "raw POST, after a raw POST",
            "hook call through the component",
            "hook call, in-process transport",
            "component call, no interceptor",
        ],
        n,
    );
    while rows.more() {
        let mut times = Vec::new();
        for _ in 0..2 {
            times.push(timed(post(&mut sender, addr, request_body.clone())).await.1);
        }
        times.push(timed(hook(&interceptor)).await.1);
        times.push(timed(hook(&in_process)).await.1);
        let (settled, t) = timed(idle.intercept(EVENT, &[EffectKind::Deny], None)).await;
        assert!(settled.unwrap().record.interceptors.is_empty());
        times.push(t);
        rows.record(times);
    }
    let figures = rows.report(&format!(
        "{n} calls each, interleaved, one keep-alive connection each, loopback"
    ));
    print_ratio(
        "ratio to the floor after a raw POST (the target's)",
        figures[2],
        figures[1],
    );
    print_ratio(
        "ratio to the floor after component calls",
        figures[2],
        figures[0],
    );
    throughput(&interceptor, addr, &request_body, n.max(CONCURRENCY)).await;
    interceptor.shutdown();
}

async fn serve() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(loopback::serve(listener));
    addr
}
