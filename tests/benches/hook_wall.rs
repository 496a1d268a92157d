//! Wall time of one `ahp hook claude-code` process — start, read the payload, load the
//! registration and component, one intercept against a loopback backend, answer, exit —
//! next to a `curl` POST of the same intercept request to the same backend (what the call
//! costs without the adapter: a process start and one HTTP exchange). Interleaved, after
//! a warm-up; median and p99 over N runs each (default 100).
//!
//! `cargo bench -p ahp-tests --bench hook_wall` (optionally `-- N`)
//!
//! Each `ahp` process reads the component's compiled code from the compile cache, which
//! the bench points at a fresh temp dir (`AHP_CACHE_DIR`) and warms with its first run,
//! so the figures are of warm processes; the bench measures the process, not a model of it.

use std::process::Stdio;
use std::time::{Duration, Instant};

use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::hook::{run_hook, write_registration};
use ahp_tests::support::{bench_count, median_p99_us};
use serde_json::json;

fn main() {
    let cache = tempfile::tempdir().expect("a temp dir for the compile cache");
    // Set before the runtime starts, while this is the process's only thread; every
    // `ahp` process the bench starts inherits it.
    std::env::set_var("AHP_CACHE_DIR", cache.path());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(bench());
}

async fn bench() {
    let n = bench_count(100);
    let warmup = (n / 10).max(3);
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = write_registration(dir.path(), &backend.url(), "fail-closed", false);
    let payload = json!({
        "session_id": "bench", "cwd": "/repo", "permission_mode": "default",
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "make test"}, "tool_use_id": "toolu_bench"
    })
    .to_string();
    // The request the adapter sends, captured once, replayed by curl; this run also
    // fills the compile cache.
    let first = run_hook("claude-code", &registration, &[], payload.as_bytes()).await;
    assert_eq!((first.code, first.stdout.as_str()), (0, ""), "{first:?}");
    let request = backend.requests()[0].body.clone();
    let body = dir.path().join("request.json");
    std::fs::write(&body, &request).expect("write the request");

    let (mut hook, mut curl) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..warmup + n {
        let started = Instant::now();
        let ran = run_hook("claude-code", &registration, &[], payload.as_bytes()).await;
        let hook_took = started.elapsed();
        assert_eq!(ran.code, 0, "{ran:?}");
        let curl_took = curl_post(&backend.url(), &body).await;
        if i >= warmup {
            hook.push(hook_took);
            curl.push(curl_took);
        }
    }
    let (hook_median, hook_p99) = median_p99_us(&mut hook);
    let (curl_median, curl_p99) = median_p99_us(&mut curl);
    println!(
        "ahp hook claude-code (process wall time, N={n}): median {:.1} ms, p99 {:.1} ms",
        hook_median / 1e3,
        hook_p99 / 1e3
    );
    println!(
        "curl POST of the same request (N={n}):          median {:.1} ms, p99 {:.1} ms",
        curl_median / 1e3,
        curl_p99 / 1e3
    );
}

/// One `curl` process POSTing `body` to `url`; its wall time.
async fn curl_post(url: &str, body: &std::path::Path) -> Duration {
    let started = Instant::now();
    let status = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-H",
            "Content-Type: application/json",
            "--data-binary",
        ])
        .arg(format!("@{}", body.display()))
        .arg(url)
        .stdout(Stdio::null())
        .status()
        .await
        .expect("run curl");
    let took = started.elapsed();
    assert!(status.success(), "curl failed: {status}");
    took
}
