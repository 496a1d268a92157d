//! Retries after transient failures: only when the host configuration enables them, only
//! while the original deadline remains, always with byte-identical requests, and never
//! after an explicit deny, an empty success or a response rejected for its content.

use ahp_host::{DecidedBy, Decision, Interceptor, Options, RetryPolicy};
use ahp_tests::fault_backend::{refused_url, Behaviour, FaultBackend};
use ahp_tests::support::{event, registration, Http};
use std::time::{Duration, Instant};

const ID: &str = "com.example.flaky";

async fn with_retries(reg: &str, retries: u32) -> Interceptor {
    let options = Options {
        retries: RetryPolicy {
            default: retries,
            ..Default::default()
        },
        ..Options::default()
    };
    Interceptor::new(reg, options)
        .await
        .expect("valid registration")
}

fn attempts(record: &serde_json::Value) -> Vec<serde_json::Value> {
    record["interceptors"][0]["attempts"]
        .as_array()
        .expect("attempts")
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_then_success_is_retried_with_identical_bytes() {
    let backend = FaultBackend::start(vec![Behaviour::Reset, Behaviour::NoEffect]).await;
    let hooks = with_retries(&registration(&[Http::new(ID, backend.url())]), 2).await;
    let settled = hooks
        .intercept(&event("evt_retry_1"), &["deny"], None)
        .await
        .unwrap();
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    let requests = backend.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].body, requests[1].body,
        "a retry resends the exact bytes"
    );
    let attempts = attempts(&settled.record);
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["result"], "connection-reset");
    assert_eq!(attempts[1]["result"], "accepted");
    assert_eq!(attempts[0]["requestSha256"], attempts[1]["requestSha256"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_statuses_are_retried_until_the_configured_limit() {
    let unavailable = Behaviour::Reply {
        status: 503,
        content_type: None,
        body: Vec::new(),
    };
    let backend = FaultBackend::start(vec![unavailable]).await;
    let hooks = with_retries(&registration(&[Http::new(ID, backend.url())]), 2).await;
    let settled = hooks
        .intercept(&event("evt_retry_2"), &["deny"], None)
        .await
        .unwrap();
    assert_eq!(settled.decided_by, DecidedBy::SyntheticDeny);
    assert_eq!(backend.requests().len(), 3, "one attempt and two retries");
    let bodies: Vec<_> = backend.requests().into_iter().map(|r| r.body).collect();
    assert!(bodies.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(
        settled.record["interceptors"][0]["failure"]["httpStatus"],
        503
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_retry_without_configuration() {
    let backend = FaultBackend::start(vec![Behaviour::Reset, Behaviour::NoEffect]).await;
    let hooks = with_retries(&registration(&[Http::new(ID, backend.url())]), 0).await;
    let settled = hooks
        .intercept(&event("evt_retry_3"), &["deny"], None)
        .await
        .unwrap();
    assert_eq!(settled.decided_by, DecidedBy::SyntheticDeny);
    assert_eq!(backend.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_empty_success_and_rejected_content_are_never_retried() {
    let script = [
        Behaviour::Deny("no".into()),
        Behaviour::NoEffect,
        Behaviour::Reply {
            status: 200,
            content_type: Some("application/json".into()),
            body: b"{oops".to_vec(),
        },
        Behaviour::Reply {
            status: 500,
            content_type: None,
            body: Vec::new(),
        },
    ];
    for behaviour in script {
        let backend = FaultBackend::start(vec![behaviour.clone(), Behaviour::NoEffect]).await;
        let hooks = with_retries(&registration(&[Http::new(ID, backend.url())]), 5).await;
        hooks
            .intercept(&event("evt_retry_4"), &["deny"], None)
            .await
            .unwrap();
        assert_eq!(backend.requests().len(), 1, "retried after {behaviour:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_stop_at_the_original_deadline() {
    let reg = registration(&[Http::new(ID, refused_url()).timeout_ms(200)]);
    let hooks = with_retries(&reg, 1_000).await;
    let started = Instant::now();
    let settled = hooks
        .intercept(&event("evt_retry_5"), &["deny"], None)
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(settled.decided_by, DecidedBy::SyntheticDeny);
    let attempts = attempts(&settled.record);
    // Every attempt but the last was refused; the last was refused too, or met the
    // deadline while connecting (a retry may start with only a little time left).
    let (last, earlier) = attempts.split_last().expect("at least one attempt");
    assert!(
        earlier.iter().all(|a| a["result"] == "connection-refused"),
        "{attempts:?}"
    );
    assert!(
        matches!(
            last["result"].as_str(),
            Some("connection-refused" | "deadline-exceeded")
        ),
        "{last}"
    );
    assert_eq!(
        settled.record["interceptors"][0]["failure"]["class"],
        last["result"]
    );
    assert!(attempts.len() > 2, "refusals are retried: {attempts:?}");
    assert!(
        attempts.len() < 1_000,
        "retries are bounded by the deadline"
    );
    assert!(
        elapsed < Duration::from_millis(200 + 150),
        "took {elapsed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_inside_a_budget_stop_at_the_budget() {
    let reg = registration(&[Http::new(ID, refused_url())
        .timeout_ms(5_000)
        .policy("fail-open")]);
    let hooks = with_retries(&reg, 1_000).await;
    let started = Instant::now();
    let settled = hooks
        .intercept(
            &event("evt_retry_6"),
            &["deny"],
            Some(Duration::from_millis(150)),
        )
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(150 + 150),
        "took {:?}",
        started.elapsed()
    );
    // The retries ran out of budget: whatever the last attempt saw, the call was cut short
    // by the budget or settled by the failure, never allowed by running past it.
    assert!(attempts(&settled.record).len() > 1);
    assert!(
        matches!(
            settled.decided_by,
            DecidedBy::NoObjection | DecidedBy::BudgetExpired
        ),
        "{}",
        settled.record
    );
}
