//! Why a hook call costs more than its parts: the same raw keep-alive POST, timed alone
//! and timed right after other work, from a current-thread harness with the backend on its
//! own thread (as `tests/harness-bench`). Rows, one of each per round, each row's time
//! being the POST's alone:
//!
//! - after a raw POST (the floor);
//! - after spinning 10 µs without touching memory (only time passes);
//! - after writing one byte in every cache line of 512 KiB (caches are evicted);
//! - after a component call that no interceptor matches (about 6 µs of work);
//! - after a hook call through an in-process transport (about 11 µs of work).
//!
//! `cargo bench -p ahp-host --bench after_component [-- N]` (N rounds, default 3000).

#[allow(dead_code)] // shared by the benches; this one uses a part
mod loopback;

use ahp_host::EffectKind;
use loopback::{
    backend_thread, connect, first_body, hook, post, registration, stats, Interceptors, EVENT,
};
use std::time::{Duration, Instant};

/// Bytes written, one per cache line, in the eviction row.
const EVICTED: usize = 512 << 10;
const CACHE_LINE: usize = 64;
const SPIN: Duration = Duration::from_micros(10);

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::args()
        .filter_map(|a| a.parse().ok())
        .next()
        .unwrap_or(3_000);
    let addr = backend_thread();
    let registration = registration(&format!("http://{addr}/hooks"));
    let Interceptors {
        network: interceptor,
        in_process,
        idle,
    } = Interceptors::new(&registration).await;
    hook(&interceptor).await;
    let body = first_body();
    let mut sender = connect(addr).await;
    let mut lines = vec![0u8; EVICTED];

    let names = [
        "after a raw POST",
        "after spinning 10 µs",
        "after evicting 512 KiB",
        "after a component call",
        "after an in-process hook call",
    ];
    let mut rows: Vec<Vec<Duration>> = names.iter().map(|_| Vec::with_capacity(n)).collect();
    for round in 0..(n + n / 10) {
        let mut times = Vec::with_capacity(names.len());
        for before in 0..names.len() {
            match before {
                0 => drop(post(&mut sender, addr, body.clone()).await),
                1 => {
                    let t = Instant::now();
                    while t.elapsed() < SPIN {}
                }
                2 => {
                    for line in lines.iter_mut().step_by(CACHE_LINE) {
                        *line = line.wrapping_add(1);
                    }
                    std::hint::black_box(&lines);
                }
                3 => drop(idle.intercept(EVENT, &[EffectKind::Deny], None).await),
                _ => hook(&in_process).await,
            }
            let t = Instant::now();
            post(&mut sender, addr, body.clone()).await;
            times.push(t.elapsed());
        }
        if round >= n / 10 {
            for (row, t) in rows.iter_mut().zip(times) {
                row.push(t);
            }
        }
    }
    println!("the same raw POST, current-thread harness, backend on its own thread; {n} rounds");
    println!("{:<32} {:>10} {:>10}", "raw POST", "median µs", "p99 µs");
    for (name, row) in names.iter().zip(rows.iter_mut()) {
        let (med, p99) = stats(row);
        println!("{name:<32} {med:>10.1} {p99:>10.1}");
    }
}
