//! Interruption by the embedding harness: pending decision requests end at once, the call
//! settles as a denial recorded `interrupted` (never allow, even under fail-open), and
//! nothing is revived by a reply that comes later.

use ahp_host::{DecidedBy, Decision, Interceptor, Interrupt, Options};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{event, registration, Http};
use std::time::{Duration, Instant};

async fn interrupt_after(
    hooks: &Interceptor,
    event: &str,
    after: Duration,
) -> (ahp_host::Settlement, Duration) {
    let interrupt = Interrupt::new();
    let trigger = interrupt.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        trigger.interrupt();
    });
    let started = Instant::now();
    let settled = hooks
        .intercept_with(event, &["deny"], None, &interrupt)
        .await
        .unwrap();
    (settled, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_a_pending_delivery_denies_at_once_even_under_fail_open() {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let reg = registration(&[Http::new("com.example.slow", backend.url())
        .policy("fail-open")
        .timeout_ms(5_000)]);
    let hooks = Interceptor::new(&reg, Options::default()).await.unwrap();
    let (settled, elapsed) =
        interrupt_after(&hooks, &event("evt_int_1"), Duration::from_millis(100)).await;
    assert_eq!(settled.decision, Decision::Deny, "{}", settled.record);
    assert_eq!(settled.decided_by, DecidedBy::Interrupted);
    assert_eq!(settled.record["decidedBy"], "interrupted");
    assert_eq!(settled.record["interceptors"][0]["outcome"], "interrupted");
    assert!(
        elapsed < Duration::from_millis(100 + 150),
        "took {elapsed:?}"
    );
    assert_eq!(backend.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_a_slow_credential_acquisition_sends_nothing() {
    // A FIFO with no writer: reading the token blocks, a real slow credential provider.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("token");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let reg = serde_json::json!({
        "protocolVersion": "draft",
        "hooks": [{"id": "com.example.authed", "transport": {"type": "http", "url": backend.url()},
            "authentication": {"type": "bearer", "tokenRef": format!("file:{}", fifo.display())},
            "subscriptions": [{"events": ["tool.before"], "mode": "intercept", "timeoutMs": 5_000,
                "failurePolicy": "fail-open", "content": {"default": "metadata"}}]}]
    })
    .to_string();
    let hooks = Interceptor::new(&reg, Options::default()).await.unwrap();
    let (settled, elapsed) =
        interrupt_after(&hooks, &event("evt_int_2"), Duration::from_millis(100)).await;
    assert_eq!(
        settled.decided_by,
        DecidedBy::Interrupted,
        "{}",
        settled.record
    );
    assert_eq!(settled.decision, Decision::Deny);
    assert!(
        elapsed < Duration::from_millis(100 + 150),
        "took {elapsed:?}"
    );
    assert_eq!(
        backend.requests().len(),
        0,
        "nothing is sent without the credential"
    );
    // Release the blocked reader so its thread ends.
    std::fs::write(&fifo, "late-token").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_credential_settles_at_the_deadline_under_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("token");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    for (policy, decision) in [
        ("fail-open", Decision::Allow),
        ("fail-closed", Decision::Deny),
    ] {
        let reg = serde_json::json!({
            "protocolVersion": "draft",
            "hooks": [{"id": "com.example.authed", "transport": {"type": "http", "url": backend.url()},
                "authentication": {"type": "bearer", "tokenRef": format!("file:{}", fifo.display())},
                "subscriptions": [{"events": ["tool.before"], "mode": "intercept", "timeoutMs": 200,
                    "failurePolicy": policy, "content": {"default": "metadata"}}]}]
        })
        .to_string();
        let hooks = Interceptor::new(&reg, Options::default()).await.unwrap();
        let started = Instant::now();
        let settled = hooks
            .intercept(&event("evt_int_3"), &["deny"], None)
            .await
            .unwrap();
        let elapsed = started.elapsed();
        assert_eq!(settled.decision, decision, "{policy}: {}", settled.record);
        let failure = &settled.record["interceptors"][0]["failure"];
        assert_eq!(failure["class"], "auth-failed");
        assert_eq!(failure["phase"], "acquire-credential");
        assert!(
            elapsed >= Duration::from_millis(200) && elapsed < Duration::from_millis(200 + 150),
            "{elapsed:?}"
        );
    }
    assert_eq!(backend.requests().len(), 0);
    // Release the blocked readers so their threads end: one writer wakes every reader
    // waiting to open the FIFO.
    std::fs::write(&fifo, "late-token").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_one_call_leaves_a_concurrent_call_alone() {
    let backend = FaultBackend::start(vec![Behaviour::Delay(
        Duration::from_millis(300),
        Box::new(Behaviour::NoEffect),
    )])
    .await;
    let reg = registration(&[Http::new("com.example.shared", backend.url()).timeout_ms(2_000)]);
    let hooks = Interceptor::new(&reg, Options::default()).await.unwrap();
    let other = hooks.clone();
    let untouched = tokio::spawn(async move {
        other
            .intercept(&event("evt_int_5"), &["deny"], None)
            .await
            .unwrap()
    });
    let (interrupted, _) =
        interrupt_after(&hooks, &event("evt_int_4"), Duration::from_millis(50)).await;
    assert_eq!(interrupted.decided_by, DecidedBy::Interrupted);
    let settled = untouched.await.unwrap();
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    assert_eq!(settled.decided_by, DecidedBy::NoObjection);
}
