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
    backend_thread, connect, first_body, hook, post, registration, timed, Interceptors, Rows, EVENT,
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
        network: _,
        in_process,
        idle,
    } = Interceptors::new(&registration).await;
    let body = first_body();
    let mut sender = connect(addr).await;
    let mut lines = vec![0u8; EVICTED];

    let mut rows = Rows::new(
        vec![
            "after a raw POST",
            "after spinning 10 µs",
            "after evicting 512 KiB",
            "after a component call",
            "after an in-process hook call",
        ],
        n,
    );
    while rows.more() {
        let mut times = Vec::new();
        for before in 0..5 {
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
            times.push(timed(post(&mut sender, addr, body.clone())).await.1);
        }
        rows.record(times);
    }
    rows.report(&format!(
        "the same raw POST, current-thread harness, backend on its own thread; {n} rounds"
    ));
}
