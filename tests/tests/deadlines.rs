//! Deadlines end to end (failure-semantics.md "Deadlines", AHP-FAIL-002): the real
//! component against loopback backends that never answer, answer late, or trickle.
//!
//! Every deadline case asserts the failure class and phase, the policy's outcome, and that
//! the call returned no earlier than the deadline and no later than the deadline plus a
//! generous slack (a correctness bound, not a benchmark).

use ahp_host::{DecidedBy, Decision, Interceptor, Options, Settlement};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{event, interceptor, only_interceptor, registration, Http};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Scheduling slack allowed beyond a deadline before the call must have settled.
const SLACK: Duration = Duration::from_millis(150);
const SYNTHETIC_REASON: &str = "Required policy backend unavailable.";
const BUDGET_REASON: &str = "Policy evaluation did not finish within the hook call budget.";

/// Runs one call and measures it.
async fn timed(
    interceptor: &Interceptor,
    id: &str,
    budget: Option<Duration>,
) -> (Settlement, Duration) {
    let started = Instant::now();
    let settled = interceptor
        .intercept(&event(id), &["deny"], budget)
        .await
        .expect("a valid event settles");
    (settled, started.elapsed())
}

/// The single interceptor entry of a settlement record.
/// `elapsed` lies in `[deadline, deadline + SLACK)`.
fn assert_within(elapsed: Duration, deadline_ms: u64, case: &str) {
    let deadline = Duration::from_millis(deadline_ms);
    println!("{case}: settled in {elapsed:?} (deadline {deadline:?})");
    assert!(
        elapsed >= deadline,
        "{case}: settled in {elapsed:?}, before the {deadline:?} deadline"
    );
    assert!(
        elapsed < deadline + SLACK,
        "{case}: settled in {elapsed:?}, later than {deadline:?} + {SLACK:?}"
    );
}

/// Asserts a settled deadline failure under `policy`, with exactly one attempt.
fn assert_deadline_failure(
    settled: &Settlement,
    id: &str,
    policy: &str,
    timeout_ms: u64,
    phase: &str,
) {
    let record = &settled.record;
    let entry = only_interceptor(record);
    assert_eq!(record["event"]["id"], json!(id));
    assert_eq!(entry["backend"], json!("com.example.policy"));
    assert_eq!(entry["policy"], json!(policy));
    assert_eq!(entry["timeoutMs"], json!(timeout_ms));
    assert_eq!(
        entry["failure"],
        json!({"class": "deadline-exceeded", "phase": phase})
    );
    let attempts = entry["attempts"].as_array().expect("attempts is an array");
    assert_eq!(attempts.len(), 1, "a deadline is never retried: {entry}");
    assert_eq!(attempts[0]["n"], json!(1));
    assert_eq!(attempts[0]["result"], json!("deadline-exceeded"));
    match policy {
        "fail-open" => {
            assert_eq!(
                (
                    settled.decision,
                    settled.decided_by,
                    settled.reason.as_deref()
                ),
                (Decision::Allow, DecidedBy::NoObjection, None)
            );
            assert_eq!(entry["outcome"], json!("failed-open"));
            assert_eq!(record["decision"], json!("allow"));
            assert_eq!(record["decidedBy"], json!("no-objection"));
        }
        "fail-closed" => {
            assert_eq!(
                (
                    settled.decision,
                    settled.decided_by,
                    settled.reason.as_deref()
                ),
                (
                    Decision::Deny,
                    DecidedBy::SyntheticDeny,
                    Some(SYNTHETIC_REASON)
                )
            );
            assert_eq!(entry["outcome"], json!("failed-closed"));
            assert_eq!(record["decision"], json!("deny"));
            assert_eq!(record["decidedBy"], json!("synthetic-deny"));
            assert_eq!(record["reason"], json!(SYNTHETIC_REASON));
        }
        other => panic!("unknown policy {other}"),
    }
}

/// A backend that reads the request and never answers, 200 ms timeout.
async fn blackhole_case(policy: &str) {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let reg = registration(&[Http::new("com.example.policy", backend.url())
        .policy(policy)
        .timeout_ms(200)]);
    let interceptor = interceptor(&reg).await;
    let id = format!("evt_blackhole_{policy}");
    let (settled, elapsed) = timed(&interceptor, &id, None).await;
    assert_deadline_failure(&settled, &id, policy, 200, "await-response");
    assert_within(elapsed, 200, &format!("blackhole {policy}"));
    assert_eq!(backend.requests().len(), 1, "the request was sent once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackhole_fail_open_allows_after_the_deadline() {
    blackhole_case("fail-open").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackhole_fail_closed_denies_after_the_deadline() {
    blackhole_case("fail-closed").await;
}

/// A backend that accepts the connection and never reads it, 200 ms timeout.
async fn accept_no_read_case(policy: &str) {
    let backend = FaultBackend::start(vec![Behaviour::AcceptNoRead]).await;
    let reg = registration(&[Http::new("com.example.policy", backend.url())
        .policy(policy)
        .timeout_ms(200)]);
    let interceptor = interceptor(&reg).await;
    let id = format!("evt_unread_{policy}");
    let (settled, elapsed) = timed(&interceptor, &id, None).await;
    assert_deadline_failure(&settled, &id, policy, 200, "await-response");
    assert_within(elapsed, 200, &format!("accept-no-read {policy}"));
    assert_eq!(backend.connections(), 1, "one connection, not retried");
    assert_eq!(
        backend.requests().len(),
        0,
        "the backend never read the request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_no_read_fail_open_allows_after_the_deadline() {
    accept_no_read_case("fail-open").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_no_read_fail_closed_denies_after_the_deadline() {
    accept_no_read_case("fail-closed").await;
}

/// A reply that comes 600 ms after a 200 ms deadline does not revive the call: the
/// settlement and the audit log stay as they were, and the next call works normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_reply_exceeds_the_deadline_and_is_never_revived() {
    let slow = Behaviour::Delay(Duration::from_millis(600), Box::new(Behaviour::NoEffect));
    let backend = FaultBackend::start(vec![slow, Behaviour::NoEffect]).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let audit = dir.path().join("audit.jsonl");
    let reg = registration(&[Http::new("com.example.policy", backend.url())
        .policy("fail-closed")
        .timeout_ms(200)]);
    let options = Options {
        audit_path: Some(audit.clone()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg, options)
        .await
        .expect("valid registration");

    let (first, elapsed) = timed(&interceptor, "evt_slow_1", None).await;
    assert_deadline_failure(&first, "evt_slow_1", "fail-closed", 200, "await-response");
    assert_within(elapsed, 200, "slow reply");

    // Long enough for the delayed reply to have been sent.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let lines = audit_lines(&audit);
    assert_eq!(
        lines,
        vec![first.record.clone()],
        "the audit log holds the one settled record"
    );
    assert_eq!(backend.requests().len(), 1);

    let (second, elapsed) = timed(&interceptor, "evt_slow_2", None).await;
    println!("after the late reply: settled in {elapsed:?}");
    assert_eq!(
        (second.decision, second.decided_by, second.reason.as_deref()),
        (Decision::Allow, DecidedBy::NoObjection, None)
    );
    let entry = only_interceptor(&second.record);
    assert_eq!(entry["outcome"], json!("no-effect"));
    assert_eq!(entry.get("failure"), None, "no failure in {entry}");
    assert_eq!(second.record["event"]["id"], json!("evt_slow_2"));
    let requests = backend.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].json()["id"], json!("evt_slow_2"));
    assert_eq!(
        audit_lines(&audit),
        vec![first.record.clone(), second.record.clone()]
    );
}

fn audit_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("the audit log exists")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each audit line is JSON"))
        .collect()
}

/// The head arrives at once but the body takes seconds: the deadline hits while reading it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickling_body_exceeds_the_deadline_while_reading() {
    let every = Duration::from_millis(50);
    let trickle = Behaviour::Trickle {
        every,
        inner: Box::new(Behaviour::NoEffect),
    };
    let backend = FaultBackend::start(vec![trickle]).await;
    let reg = registration(&[Http::new("com.example.policy", backend.url())
        .policy("fail-closed")
        .timeout_ms(300)]);
    let interceptor = interceptor(&reg).await;
    let id = "evt_trickle";
    // The body the backend trickles: one byte per 50 ms, so it needs well over a second.
    let body =
        json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "draft", "effects": []}});
    assert!(every * body.to_string().len() as u32 > Duration::from_secs(1));

    let (settled, elapsed) = timed(&interceptor, id, None).await;
    assert_deadline_failure(&settled, id, "fail-closed", 300, "read-response");
    assert_within(elapsed, 300, "trickle");
    assert_eq!(backend.requests().len(), 1);
}

/// A hook-call budget shorter than the interceptor's timeout ends the call at the budget
/// as `budget-expired` — a denial even though the subscription fails open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_shorter_than_the_timeout_denies_even_under_fail_open() {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let reg = registration(&[Http::new("com.example.policy", backend.url())
        .policy("fail-open")
        .timeout_ms(1_000)]);
    let interceptor = interceptor(&reg).await;
    let (settled, elapsed) =
        timed(&interceptor, "evt_budget", Some(Duration::from_millis(150))).await;
    assert_within(elapsed, 150, "budget");
    assert_eq!(
        (
            settled.decision,
            settled.decided_by,
            settled.reason.as_deref()
        ),
        (
            Decision::Deny,
            DecidedBy::BudgetExpired,
            Some(BUDGET_REASON)
        )
    );
    let record = &settled.record;
    assert_eq!(record["decision"], json!("deny"));
    assert_eq!(record["decidedBy"], json!("budget-expired"));
    let entry = only_interceptor(record);
    assert_eq!(entry["outcome"], json!("budget-expired"));
    assert_eq!(entry["policy"], json!("fail-open"));
    assert_eq!(
        entry["failure"],
        json!({"class": "deadline-exceeded", "phase": "await-response"})
    );
    assert_eq!(backend.requests().len(), 1);
}

/// A listener whose accept queue is full and never drained: new connections hang in the
/// TCP handshake, a real slow connect. Returns the URL and the connections that fill it.
async fn saturated_listener() -> (String, tokio::net::TcpListener, Vec<tokio::net::TcpStream>) {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let listener = socket.listen(1).expect("listen");
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    for _ in 0..64 {
        match tokio::time::timeout(
            Duration::from_millis(100),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            Ok(Ok(stream)) => held.push(stream),
            _ => return (format!("http://{addr}/hooks"), listener, held),
        }
    }
    panic!("the accept queue never filled up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_connect_settles_at_the_deadline_in_the_connect_phase() {
    let (url, _listener, _held) = saturated_listener().await;
    for policy in ["fail-open", "fail-closed"] {
        let reg = registration(&[Http::new("com.example.policy", url.clone())
            .policy(policy)
            .timeout_ms(200)]);
        let interceptor = interceptor(&reg).await;
        let id = format!("evt_slow_connect_{policy}");
        let (settled, elapsed) = timed(&interceptor, &id, None).await;
        assert_deadline_failure(&settled, &id, policy, 200, "connect");
        assert_within(elapsed, 200, &format!("slow connect {policy}"));
    }
}
