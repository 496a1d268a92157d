//! Interruption by the embedding harness: pending decision requests end at once, the call
//! settles as a denial recorded `interrupted` (never allow, even under fail-open), and
//! nothing is revived by a reply that comes later.

use ahp_host::{DecidedBy, Decision, EffectKind, Interceptor, Interrupt, Options, Settlement};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    assert_failed, assert_nothing_sent, assert_settled, assert_settled_at, assert_settled_by,
    attempt_results, audit_lines_once, call, event, interceptor, only_interceptor,
    open_fifo_once_read, record_json, registration, timed_call, Http,
};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const INTERRUPTED_REASON: &str = "Policy evaluation was interrupted.";

/// Call `id`, interrupted `after` it starts; returns the settlement and how long it took.
async fn interrupt_after(hooks: &Interceptor, id: &str, after: Duration) -> (Settlement, Duration) {
    let (settled, elapsed, _) = interrupt_when(hooks, id, tokio::time::sleep(after)).await;
    (settled, elapsed)
}

/// The call `id` on `hooks`, interrupted once `when` is done: its settlement, how long
/// it took, and when (from its start) the interruption came.
async fn interrupt_when(
    hooks: &Interceptor,
    id: &str,
    when: impl std::future::Future<Output = ()>,
) -> (Settlement, Duration, Duration) {
    let interrupt = Interrupt::new();
    let started = Instant::now();
    let event = event(id);
    let calling = hooks.intercept_with(&event, &[EffectKind::Deny], None, &interrupt);
    let trigger = async {
        when.await;
        interrupt.interrupt();
        started.elapsed()
    };
    let (settled, interrupted_at) = tokio::join!(calling, trigger);
    let settled = settled.expect("a valid event settles");
    (settled, started.elapsed(), interrupted_at)
}

fn assert_interrupted(settled: &Settlement) {
    assert_settled(
        settled,
        Decision::Deny,
        DecidedBy::Interrupted,
        Some(INTERRUPTED_REASON),
    );
}

/// A FIFO with no writer in `dir`: reading the token blocks, a real slow credential
/// provider. Writing it later releases every reader blocked on it.
fn blocking_token_file(dir: &Path) -> PathBuf {
    let fifo = dir.join("token");
    ahp_tests::support::make_fifo(&fifo);
    fifo
}

/// One backend whose bearer token is read from the FIFO `fifo`.
fn fifo_registration(url: String, fifo: &Path, policy: &str, timeout_ms: u64) -> String {
    registration(&[Http::new("com.example.authed", url)
        .policy(policy)
        .timeout_ms(timeout_ms)
        .token_ref(&format!("file:{}", fifo.display()))])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_a_pending_delivery_denies_at_once_even_under_fail_open() {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let reg = registration(&[Http::new("com.example.slow", backend.url())
        .policy("fail-open")
        .timeout_ms(5_000)]);
    let hooks = interceptor(&reg).await;
    // Once the request has gone out.
    let sent = async {
        assert!(backend.wait_for_requests(1, Duration::from_secs(5)).await);
    };
    let (settled, elapsed, interrupted_at) = interrupt_when(&hooks, "evt_int_1", sent).await;
    assert_interrupted(&settled);
    assert_eq!(
        only_interceptor(&record_json(&settled))["outcome"],
        "interrupted"
    );
    assert_settled_by(elapsed, interrupted_at, "interrupted delivery");
    assert_eq!(backend.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_a_slow_credential_acquisition_sends_nothing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fifo = blocking_token_file(dir.path());
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let hooks = interceptor(&fifo_registration(backend.url(), &fifo, "fail-open", 5_000)).await;
    // Interrupted once the acquisition is blocked reading the token.
    let mut writer = None;
    let reading = async { writer = Some(open_fifo_once_read(&fifo).await) };
    let (settled, elapsed, interrupted_at) = interrupt_when(&hooks, "evt_int_2", reading).await;
    assert_interrupted(&settled);
    assert_settled_by(elapsed, interrupted_at, "interrupted acquisition");
    // Release the blocked reader, so the token arrives after all: the abandoned
    // acquisition must still send nothing. (A reader already gone fails the write.)
    let mut writer = writer.expect("the FIFO's writer");
    let _ = std::io::Write::write_all(&mut writer, b"late-token");
    drop(writer);
    assert_nothing_sent(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_credential_settles_at_the_deadline_under_the_policy() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fifo = blocking_token_file(dir.path());
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    for policy in ["fail-open", "fail-closed"] {
        let hooks = interceptor(&fifo_registration(backend.url(), &fifo, policy, 200)).await;
        let (settled, elapsed) = timed_call(&hooks, "evt_int_3", None).await;
        let failure = assert_failed(&settled, policy, "auth-failed", policy);
        assert_eq!(failure["phase"], json!("acquire-credential"), "{policy}");
        assert_settled_at(elapsed, Duration::from_millis(200), policy);
    }
    // Release the blocked readers: one writer wakes every reader waiting to open the
    // FIFO. The token arrives after both deadlines and must not be sent.
    std::fs::write(&fifo, "late-token").expect("write the token to the FIFO");
    assert_nothing_sent(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_one_call_leaves_a_concurrent_call_alone() {
    let backend = FaultBackend::start(vec![Behaviour::Delay(
        Duration::from_millis(300),
        Box::new(Behaviour::NoEffect),
    )])
    .await;
    let reg = registration(&[Http::new("com.example.shared", backend.url()).timeout_ms(2_000)]);
    let hooks = interceptor(&reg).await;
    let other = hooks.clone();
    let untouched = tokio::spawn(async move { call(&other, "evt_int_5").await });
    let (interrupted, _) = interrupt_after(&hooks, "evt_int_4", Duration::from_millis(50)).await;
    assert_interrupted(&interrupted);
    let settled = untouched.await.expect("the concurrent call task");
    assert_settled(&settled, Decision::Allow, DecidedBy::NoObjection, None);
    assert_eq!(
        only_interceptor(&record_json(&settled))["outcome"],
        "no-effect"
    );
}

/// "Cancellation of one call's wait on a shared harness auth operation does not cancel
/// unrelated callers": two calls wait on one read of a `tokenRef: file:` secret (a FIFO
/// nobody has written yet; such reads are shared process-wide), and the one that began
/// it is interrupted. It settles `interrupted` at once, having sent nothing; the other
/// goes on waiting, is handed the token the read then gets, and its request is the only
/// one the backend receives, with exactly that token.
///
/// That the second call waited on the same read, not one of its own, is checked, not
/// assumed: before the token is written, the FIFO's path is replaced by a file holding
/// another token, so a read begun after the shared one ended would send that one. (The
/// read already in flight opened the FIFO itself, and keeps it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_one_caller_waiting_on_a_shared_token_read_leaves_the_other_waiting() {
    /// How long the second call is given to reach the read in flight: nothing outside
    /// the host shows it waiting there, and it takes milliseconds. Were it later still,
    /// it would send the replacement token and fail the test by name, not hang.
    const TO_JOIN: Duration = Duration::from_secs(2);
    const TOKEN: &str = "shared-token";
    const LATE_TOKEN: &str = "token-of-a-read-of-its-own";
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fifo = blocking_token_file(dir.path());
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let reg = fifo_registration(backend.url(), &fifo, "fail-closed", 30_000);
    let hooks = interceptor(&reg).await;

    // The first call begins the read (it is blocked opening the FIFO), the second joins
    // it; then the first is interrupted.
    let (mut writer, mut second) = (None, None);
    let joined = async {
        writer = Some(open_fifo_once_read(&fifo).await);
        let hooks = hooks.clone();
        second = Some(tokio::spawn(async move {
            call(&hooks, "evt_shared_read_second").await
        }));
        tokio::time::sleep(TO_JOIN).await;
    };
    let (interrupted, elapsed, interrupted_at) =
        interrupt_when(&hooks, "evt_shared_read_first", joined).await;
    let (mut writer, second) = (
        writer.expect("the writer"),
        second.expect("the second call"),
    );
    assert_interrupted(&interrupted);
    assert_settled_by(elapsed, interrupted_at, "the interrupted call");
    let record = record_json(&interrupted);
    let entry = only_interceptor(&record);
    assert_eq!(entry["outcome"], "interrupted", "{record}");
    assert_eq!(attempt_results(entry), ["interrupted"], "{record}");
    assert!(
        !second.is_finished(),
        "the second call stopped waiting when the first was interrupted"
    );

    // From now on a new read of the path would find the replacement at once.
    let late = dir.path().join("late-token");
    std::fs::write(&late, LATE_TOKEN).expect("write the replacement token");
    std::fs::rename(&late, &fifo).expect("replace the FIFO's path");
    std::io::Write::write_all(&mut writer, TOKEN.as_bytes()).expect("write the token");
    drop(writer);

    let settled = tokio::time::timeout(Duration::from_secs(20), second)
        .await
        .expect("the second call settled once the token came")
        .expect("the second call's task");
    assert_settled(&settled, Decision::Allow, DecidedBy::NoObjection, None);
    let record = record_json(&settled);
    assert_eq!(
        only_interceptor(&record)["outcome"],
        "no-effect",
        "{record}"
    );
    let requests = backend.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(
        requests[0].json()["params"]["event"]["id"],
        "evt_shared_read_second"
    );
    let authorization = requests[0].header_values("authorization");
    assert_ne!(
        authorization,
        [format!("Bearer {LATE_TOKEN}")],
        "the second call did not wait on the shared read (not there within {TO_JOIN:?})"
    );
    assert_eq!(authorization, [format!("Bearer {TOKEN}")]);
}

/// A call whose future the harness drops before it settles (a `timeout` around
/// `intercept`) still leaves its one audit record: the backend was asked, and the log
/// says the call ended interrupted, a denial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_before_it_settles_is_recorded_interrupted() {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let reg = registration(&[Http::new("com.example.slow", backend.url()).timeout_ms(5_000)]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let audit = dir.path().join("audit.jsonl");
    let options = Options {
        audit_path: Some(audit.clone()),
        ..Options::default()
    };
    let hooks = Interceptor::new(&reg, options).await.expect("valid");
    let dropped = event("evt_dropped");
    let call = hooks.intercept(&dropped, &[EffectKind::Deny], None);
    let cut = tokio::time::timeout(Duration::from_millis(300), call).await;
    assert!(cut.is_err(), "the call was still waiting for the backend");
    assert_eq!(backend.requests().len(), 1);

    let lines = audit_lines_once(&audit, 1).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["decision"], "deny");
    assert_eq!(lines[0]["decidedBy"], "interrupted");
    assert_eq!(lines[0]["event"]["id"], "evt_dropped");
}
