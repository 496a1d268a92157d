//! Cost of one hook call through the component against a loopback backend, next to a raw
//! keep-alive POST of the same bytes to the same backend, in the same run; then
//! throughput at concurrency 8 (decisions/s), raw and hook rounds alternating.
//!
//! `cargo bench -p ahp-host --bench hook_call` (optionally `-- N` for N calls each).
//! The current-thread harness setup is `tests/harness-bench`; the pieces both share are
//! in `loopback/`.

#[allow(dead_code)] // shared by the benches; this one uses a part
mod loopback;

use ahp_host::EffectKind;
use loopback::{
    connect, first_body, hook, hook_throughput, median, post, raw_throughput, registration, stats,
    CONCURRENCY, EVENT, THROUGHPUT_ROUNDS,
};
use std::net::SocketAddr;
use std::time::Instant;
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
    let interceptor = ahp_host::Interceptor::new(&registration, ahp_host::Options::default())
        .await
        .expect("build the interceptor");
    // The same component and event with no matching interceptor: the cost of the
    // component call alone (validation, settlement, audit record), no I/O.
    let idle_registration = registration.replace("\"tool.before\"", "\"session.start\"");
    let idle = ahp_host::Interceptor::new(&idle_registration, ahp_host::Options::default())
        .await
        .expect("build the idle interceptor");

    // The first call goes through the component, so the raw row sends its exact bytes.
    hook(&interceptor).await;
    let request_body = first_body();
    let mut sender = connect(addr).await;

    let mut raw = Vec::with_capacity(n);
    let mut hooked = Vec::with_capacity(n);
    let mut alone = Vec::with_capacity(n);
    for round in 0..(n + n / 10) {
        let warmup = round < n / 10;
        let t = Instant::now();
        post(&mut sender, addr, request_body.clone()).await;
        let raw_t = t.elapsed();
        let t = Instant::now();
        hook(&interceptor).await;
        let hook_t = t.elapsed();
        let t = Instant::now();
        let settled = idle
            .intercept(EVENT, &[EffectKind::Deny], None)
            .await
            .unwrap();
        let alone_t = t.elapsed();
        assert!(settled.record.interceptors.is_empty());
        if !warmup {
            raw.push(raw_t);
            hooked.push(hook_t);
            alone.push(alone_t);
        }
    }
    let (raw_med, raw_p99) = stats(&mut raw);
    let (hook_med, hook_p99) = stats(&mut hooked);
    let (alone_med, alone_p99) = stats(&mut alone);
    println!("{n} calls each, interleaved, one keep-alive connection each, loopback");
    println!("{:<34} {:>10} {:>10}", "", "median µs", "p99 µs");
    println!(
        "{:<34} {:>10.1} {:>10.1}",
        "raw keep-alive POST (hyper)", raw_med, raw_p99
    );
    println!(
        "{:<34} {:>10.1} {:>10.1}",
        "hook call through the component", hook_med, hook_p99
    );
    println!(
        "{:<34} {:>10.2} {:>10.2}",
        "ratio",
        hook_med / raw_med,
        hook_p99 / raw_p99
    );
    println!(
        "{:<34} {:>10.1} {:>10.1}",
        "component call, no interceptor", alone_med, alone_p99
    );

    let per_round = n.max(CONCURRENCY);
    let mut connections = Vec::new();
    for _ in 0..CONCURRENCY {
        connections.push(connect(addr).await);
    }
    let (mut raw_rates, mut hook_rates) = (Vec::new(), Vec::new());
    for _ in 0..THROUGHPUT_ROUNDS {
        raw_rates.push(raw_throughput(&mut connections, addr, &request_body, per_round).await);
        hook_rates.push(hook_throughput(&interceptor, per_round).await);
    }
    println!(
        "throughput at concurrency {CONCURRENCY}, {per_round} per round, median of {THROUGHPUT_ROUNDS} alternating rounds"
    );
    println!(
        "{:<34} {:>10.0}",
        "raw keep-alive POST, requests/s",
        median(&mut raw_rates)
    );
    println!(
        "{:<34} {:>10.0}",
        "hook calls, decisions/s",
        median(&mut hook_rates)
    );
    interceptor.shutdown();
}

async fn serve() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(loopback::serve(listener));
    addr
}
