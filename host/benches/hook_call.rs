//! Cost of one hook call through the component against a loopback backend, next to a raw
//! keep-alive POST of the same bytes to the same backend, in the same run; then
//! throughput at concurrency 8 (decisions/s), raw and hook rounds alternating.
//!
//! `cargo bench -p ahp-host --bench hook_call` (optionally `-- N` for N calls each).
//! The current-thread harness setup is `tests/harness-bench`; the pieces both share are
//! in `loopback/`.
//!
//! Rows, one of each per round, in this order:
//! - a raw POST right after the previous round's component calls (the floor the ratio
//!   has always been taken against);
//! - a raw POST right after that one: the floor with nothing else run in between;
//! - the hook call;
//! - the same hook call with the backend as an in-process transport that answers at
//!   once: the component and host with the network taken out;
//! - a component call that no interceptor matches: validation, settlement and the record.

#[allow(dead_code)] // shared by the benches; this one uses a part
mod loopback;

use ahp_host::EffectKind;
use loopback::{
    connect, first_body, hook, hook_throughput, median, post, raw_throughput, registration, stats,
    Interceptors, CONCURRENCY, EVENT, THROUGHPUT_ROUNDS,
};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
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

    // The first call goes through the component, so the raw row sends its exact bytes.
    hook(&interceptor).await;
    let request_body = first_body();
    let mut sender = connect(addr).await;

    let names = [
        "raw POST, after component calls",
        "raw POST, after a raw POST",
        "hook call through the component",
        "hook call, in-process transport",
        "component call, no interceptor",
    ];
    let mut rows: Vec<Vec<Duration>> = names.iter().map(|_| Vec::with_capacity(n)).collect();
    for round in 0..(n + n / 10) {
        let mut times = Vec::with_capacity(names.len());
        for _ in 0..2 {
            let t = Instant::now();
            post(&mut sender, addr, request_body.clone()).await;
            times.push(t.elapsed());
        }
        let t = Instant::now();
        hook(&interceptor).await;
        times.push(t.elapsed());
        let t = Instant::now();
        hook(&in_process).await;
        times.push(t.elapsed());
        let t = Instant::now();
        let settled = idle
            .intercept(EVENT, &[EffectKind::Deny], None)
            .await
            .unwrap();
        times.push(t.elapsed());
        assert!(settled.record.interceptors.is_empty());
        if round >= n / 10 {
            for (row, t) in rows.iter_mut().zip(times) {
                row.push(t);
            }
        }
    }
    let figures: Vec<(f64, f64)> = rows.iter_mut().map(|row| stats(row)).collect();
    println!("{n} calls each, interleaved, one keep-alive connection each, loopback");
    println!("{:<34} {:>10} {:>10}", "", "median µs", "p99 µs");
    for (name, (med, p99)) in names.iter().zip(&figures) {
        println!("{name:<34} {med:>10.1} {p99:>10.1}");
    }
    let hook_row = figures[2];
    for (floor, (med, p99)) in names.iter().zip(&figures).take(2) {
        println!(
            "ratio to {:<25} {:>10.2} {:>10.2}",
            floor.trim_start_matches("raw POST, "),
            hook_row.0 / med,
            hook_row.1 / p99
        );
    }

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
