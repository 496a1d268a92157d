//! Deadline overshoot: how long after `timeoutMs` a call against a backend that never
//! answers (blackhole) or answers too slowly (a body trickling one byte per 50 ms)
//! settles. Reports median and max over N calls (default 20) per case.
//!
//! `cargo bench -p ahp-tests --bench overshoot` (optionally `-- N`)

use ahp_host::EffectKind;
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{bench_count, event, interceptor, record_json, registration, Http};
use std::time::{Duration, Instant};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = bench_count(20);
    println!("deadline overshoot (settlement time − timeoutMs), {n} calls per case, fail-closed");
    println!(
        "{:<12} {:>10} {:>14} {:>11}",
        "backend", "timeoutMs", "median ms", "max ms"
    );
    let trickle = Behaviour::Trickle {
        every: Duration::from_millis(50),
        inner: Box::new(Behaviour::NoEffect),
    };
    for (name, behaviour) in [("blackhole", Behaviour::Blackhole), ("trickle", trickle)] {
        for timeout_ms in [100u64, 1_000] {
            let backend = FaultBackend::start(vec![behaviour.clone()]).await;
            let hooks = interceptor(&registration(&[
                Http::new("dev.ahp.slow", backend.url()).timeout_ms(timeout_ms)
            ]))
            .await;
            let mut overshoot = Vec::with_capacity(n);
            for i in 0..n {
                let started = Instant::now();
                let settled = hooks
                    .intercept(&event(&format!("evt_{i}")), &[EffectKind::Deny], None)
                    .await
                    .expect("call");
                let elapsed = started.elapsed();
                assert_eq!(
                    record_json(&settled)["interceptors"][0]["failure"]["class"],
                    "deadline-exceeded"
                );
                overshoot.push(elapsed.as_secs_f64() * 1e3 - timeout_ms as f64);
            }
            overshoot.sort_by(f64::total_cmp);
            println!(
                "{:<12} {:>10} {:>14.3} {:>11.3}",
                name,
                timeout_ms,
                overshoot[n / 2],
                overshoot[n - 1]
            );
            hooks.shutdown();
        }
    }
}
