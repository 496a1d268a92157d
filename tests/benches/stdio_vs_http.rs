//! Per-call latency of a hook call through the real component against a persistent stdio
//! backend (`src/bin/stdio_backend.rs no-effect`, one child process, one line each way)
//! next to an HTTP backend (the loopback `FaultBackend` answering no effect over one
//! keep-alive connection), interleaved in one run after a warm-up. Reports median and p99
//! in µs over N calls each (default 2000).
//!
//! `cargo bench -p ahp-tests --bench stdio_vs_http` (optionally `-- N`)
//!
//! The HTTP backend runs in this process, on the same two runtime threads as the host;
//! the stdio backend is a separate process, so its replies cost two pipe wake-ups and a
//! process switch instead.

use std::time::{Duration, Instant};

use ahp_host::{DecidedBy, Decision, EffectKind, Interceptor};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    bench_count, event, interceptor, median_p99_us, record_json, registration, Http,
};
use serde_json::json;

const STDIO_BACKEND: &str = env!("CARGO_BIN_EXE_stdio_backend");

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = bench_count(2_000);
    let warmup = (n / 10).max(50);

    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let http = interceptor(&registration(&[Http::new("dev.ahp.http", backend.url())])).await;
    let stdio = interceptor(
        &json!({
            "protocolVersion": "draft",
            "hooks": [{
                "id": "dev.ahp.stdio",
                "transport": {"type": "stdio", "command": STDIO_BACKEND,
                              "args": ["no-effect"], "lifecycle": "persistent"},
                "subscriptions": [{"events": ["tool.before"], "mode": "intercept",
                    "timeoutMs": 1000, "failurePolicy": "fail-closed",
                    "content": {"default": "metadata"}}]
            }]
        })
        .to_string(),
    )
    .await;

    let mut http_times = Vec::with_capacity(n);
    let mut stdio_times = Vec::with_capacity(n);
    for round in 0..warmup + n {
        let http_call = timed(&http, format!("evt_h{round}"));
        let stdio_call = timed(&stdio, format!("evt_s{round}"));
        // Alternate which goes first, so neither always follows the other's wake-ups.
        let (h, s) = if round % 2 == 0 {
            let h = http_call.await;
            (h, stdio_call.await)
        } else {
            let s = stdio_call.await;
            (http_call.await, s)
        };
        if round >= warmup {
            http_times.push(h);
            stdio_times.push(s);
        }
    }
    http.shutdown();
    stdio.shutdown();
    assert_eq!(backend.connections(), 1, "one keep-alive HTTP connection");

    let (http_med, http_p99) = median_p99_us(&mut http_times);
    let (stdio_med, stdio_p99) = median_p99_us(&mut stdio_times);
    println!("{n} calls each after {warmup} warm-up calls each, interleaved, no-effect replies");
    println!("{:<34} {:>10} {:>10}", "", "median µs", "p99 µs");
    println!(
        "{:<34} {:>10.1} {:>10.1}",
        "HTTP backend (keep-alive)", http_med, http_p99
    );
    println!(
        "{:<34} {:>10.1} {:>10.1}",
        "stdio backend (persistent)", stdio_med, stdio_p99
    );
    println!(
        "{:<34} {:>10.2} {:>10.2}",
        "ratio stdio / HTTP",
        stdio_med / http_med,
        stdio_p99 / http_p99
    );
}

/// One hook call, which must be an allow with no effect from its one backend.
async fn timed(hooks: &Interceptor, id: String) -> Duration {
    let event = event(&id);
    let started = Instant::now();
    let settled = hooks
        .intercept(&event, &[EffectKind::Deny], None)
        .await
        .expect("a valid event settles");
    let elapsed = started.elapsed();
    assert_eq!(
        (settled.decision, settled.decided_by),
        (Decision::Allow, DecidedBy::NoObjection),
        "{}",
        settled.record
    );
    assert_eq!(
        record_json(&settled)["interceptors"][0]["outcome"],
        "no-effect",
        "{}",
        settled.record
    );
    elapsed
}
