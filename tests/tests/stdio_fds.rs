//! No leaked file descriptors: every pipe to a stdio backend child, across persistent
//! children, their restarts after a timeout or garbage, per-event children and a launch
//! failure, is closed once the interceptor is shut down and dropped, even the stderr of
//! a backend that left a process running outside its group; and those of an exchange
//! that shutdown ended, while the interceptor is still held.
//!
//! Its own test binary with a single test, so no other test opens descriptors in this
//! process while it counts them.

use ahp_host::{Decision, EffectKind};
use ahp_tests::support::{event, interceptor, record_json};
use serde_json::json;
use std::time::{Duration, Instant};

const BACKEND: &str = env!("CARGO_BIN_EXE_stdio_backend");

/// The open descriptors of this process, by number (Linux).
fn open_fds() -> Vec<String> {
    let mut fds: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd is readable")
        .map(|entry| {
            let entry = entry.expect("a directory entry");
            let target = std::fs::read_link(entry.path())
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            format!("{} -> {target}", entry.file_name().to_string_lossy())
        })
        .collect();
    fds.sort();
    fds
}

fn hook(id: &str, args: &[&str], lifecycle: &str, timeout_ms: u64) -> serde_json::Value {
    json!({
        "id": id,
        "transport": {"type": "stdio", "command": BACKEND, "args": args, "lifecycle": lifecycle},
        "subscriptions": [{
            "events": ["tool.before"], "mode": "intercept",
            "timeoutMs": timeout_ms, "failurePolicy": "fail-open",
            "content": {"default": "metadata"}
        }]
    })
}

/// Every way a stdio backend comes and goes, in one registration.
fn registration() -> String {
    json!({"protocolVersion": "draft", "hooks": [
        hook("com.example.persistent", &["no-effect"], "persistent", 2_000),
        hook("com.example.slow", &["sleep:1000"], "persistent", 200),
        hook("com.example.garbage", &["garbage"], "persistent", 2_000),
        hook("com.example.per-event", &["no-effect"], "per_event", 2_000),
        hook("com.example.exits", &["exit-mid"], "per_event", 2_000),
        // A backend that leaves a process of its own session behind, holding its stderr
        // well past the 10 s this test waits: out of its group, no kill reaches it.
        {
            "id": "com.example.escapes",
            "transport": {"type": "stdio", "command": "/bin/sh", "lifecycle": "per_event",
                "args": ["-c", "setsid sleep 30 </dev/null >/dev/null & exec \"$0\" no-effect", BACKEND]},
            "subscriptions": [{
                "events": ["tool.before"], "mode": "intercept",
                "timeoutMs": 2_000, "failurePolicy": "fail-open",
                "content": {"default": "metadata"}
            }]
        },
        {
            "id": "com.example.missing",
            "transport": {"type": "stdio", "command": "/nonexistent/backend", "lifecycle": "persistent"},
            "subscriptions": [{
                "events": ["tool.before"], "mode": "intercept",
                "timeoutMs": 2_000, "failurePolicy": "fail-open",
                "content": {"default": "metadata"}
            }]
        }
    ]})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_leaves_no_descriptor_open() {
    // The first interceptor warms up what lives for the whole process (the engine, the
    // embedded component, the epoch ticker), so the baseline below is steady.
    let warm = interceptor(&registration()).await;
    warm.intercept(&event("evt_fd_warm"), &[EffectKind::Deny], None)
        .await
        .unwrap();
    warm.shutdown();
    drop(warm);
    let before = open_fds();

    let hooks = interceptor(&registration()).await;
    for i in 0..3 {
        let settled = hooks
            .intercept(&event(&format!("evt_fd_{i}")), &[EffectKind::Deny], None)
            .await
            .unwrap();
        assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
        let record = record_json(&settled);
        let classes: Vec<_> = record["interceptors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["failure"]["class"].clone())
            .collect();
        assert_eq!(
            classes,
            [
                json!(null),
                json!("deadline-exceeded"),
                json!("malformed-json"),
                json!(null),
                json!("abnormal-exit"),
                json!(null),
                json!("launch-failed")
            ],
            "every path ran: {}",
            settled.record
        );
    }
    let during = open_fds().len();
    assert!(
        during > before.len(),
        "the persistent children hold pipes while they run"
    );
    hooks.shutdown();
    drop(hooks);

    assert_eq!(
        closed_back_to(&before).await,
        Vec::<String>::new(),
        "descriptors left open after shutdown"
    );

    // Shut down with an exchange in flight on a persistent child, the interceptor kept:
    // the child's pipes close with the exchange, not when the interceptor is dropped.
    let slow = json!({"protocolVersion": "draft", "hooks": [
        hook("com.example.busy", &["sleep:5000"], "persistent", 10_000)
    ]})
    .to_string();
    let hooks = std::sync::Arc::new(interceptor(&slow).await);
    let calling = hooks.clone();
    let call = tokio::spawn(async move {
        calling
            .intercept(&event("evt_fd_busy"), &[EffectKind::Deny], None)
            .await
    });
    let until = Instant::now() + Duration::from_secs(10);
    while opened_since(&before).is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The request is written and the child is asleep over it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !opened_since(&before).is_empty(),
        "the child's pipes are open"
    );
    hooks.shutdown();
    let settled = call.await.expect("the call's task").expect("settled");
    assert_eq!(settled.decision, Decision::Deny, "{}", settled.record);
    assert_eq!(
        closed_back_to(&before).await,
        Vec::<String>::new(),
        "descriptors left open after a shutdown that ended an exchange, the interceptor kept"
    );
    drop(hooks);
}

/// The descriptors still open that were not at `baseline`, once they have closed or 10 s
/// have passed. Pipes close as the reaped children's handles and stderr drains drop; on a
/// loaded machine that can take a while. A leak never converges. Only a descriptor the
/// baseline did not have is a leak: one of the warm-up's that closed late is not.
async fn closed_back_to(baseline: &[String]) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(10);
    while !opened_since(baseline).is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    opened_since(baseline)
}

/// The descriptors open now that were not open at `baseline`.
fn opened_since(baseline: &[String]) -> Vec<String> {
    let mut now = open_fds();
    now.retain(|fd| !baseline.contains(fd));
    now
}
