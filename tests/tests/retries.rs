//! Retries after transient failures: only when the host configuration enables them, only
//! while the original deadline remains, always with byte-identical requests, and never
//! after an explicit deny, an empty success or a response rejected for its content.

use ahp_host::{DecidedBy, Decision, Interceptor, Options, RetryPolicy};
use ahp_tests::fault_backend::{refused_url, Behaviour, FaultBackend};
use ahp_tests::support::{
    assert_failed, assert_settled, assert_settled_by, attempt_results, attempts, call, interceptor,
    only_interceptor, record_json, registration, sha256_hex, timed_call, Http,
};
use serde_json::json;
use std::time::Duration;

const ID: &str = "com.example.flaky";

/// An interceptor for `backend` with `retries` retries per exchange configured.
async fn with_retries(backend: Http<'_>, retries: u32) -> Interceptor {
    let options = Options {
        retries: RetryPolicy {
            default: retries,
            ..Default::default()
        },
        ..Options::default()
    };
    Interceptor::new(&registration(&[backend]), options)
        .await
        .expect("valid registration")
}

/// An HTTP response with `status`, no content type and no body.
fn bare_status(status: u16) -> Behaviour {
    Behaviour::Reply {
        status,
        content_type: None,
        body: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_then_success_is_retried_with_identical_bytes() {
    let backend = FaultBackend::start(vec![Behaviour::Reset, Behaviour::NoEffect]).await;
    let hooks = with_retries(Http::new(ID, backend.url()), 2).await;
    let settled = call(&hooks, "evt_retry_1").await;
    assert_settled(&settled, Decision::Allow, DecidedBy::NoObjection, None);
    let requests = backend.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].body, requests[1].body,
        "a retry resends the exact bytes"
    );
    let record = record_json(&settled);
    let entry = only_interceptor(&record);
    assert_eq!(attempt_results(entry), ["connection-reset", "accepted"]);
    // Each attempt's digest is that of the bytes the backend received.
    let sent = sha256_hex(&requests[0].body);
    for attempt in attempts(entry) {
        assert_eq!(attempt["requestSha256"], sent.as_str(), "{record}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_statuses_are_retried_until_the_configured_limit() {
    let backend = FaultBackend::start(vec![bare_status(503)]).await;
    let hooks = with_retries(Http::new(ID, backend.url()), 2).await;
    let settled = call(&hooks, "evt_retry_2").await;
    let failure = assert_failed(&settled, "fail-closed", "http-status", "503");
    assert_eq!(failure["httpStatus"], 503);
    assert_eq!(backend.requests().len(), 3, "one attempt and two retries");
    let bodies: Vec<_> = backend.requests().into_iter().map(|r| r.body).collect();
    assert!(bodies.windows(2).all(|w| w[0] == w[1]));
}

/// A backend's own retry count replaces the default for it alone; one for an id the
/// registration does not hold is refused at build, naming it, rather than configuring
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_own_retry_count_replaces_the_default_and_must_name_a_backend() {
    let backend = FaultBackend::start(vec![bare_status(503)]).await;
    let reg = registration(&[Http::new(ID, backend.url())]);
    let per_backend = |id: &str| Options {
        retries: RetryPolicy {
            default: 3,
            per_backend: [(id.to_owned(), 1)].into(),
        },
        ..Options::default()
    };
    let hooks = Interceptor::new(&reg, per_backend(ID))
        .await
        .expect("valid");
    let settled = call(&hooks, "evt_retry_own").await;
    assert_failed(&settled, "fail-closed", "http-status", "503");
    assert_eq!(
        backend.requests().len(),
        2,
        "one attempt and its own one retry"
    );
    let error = Interceptor::new(&reg, per_backend("com.example.flakey"))
        .await
        .err()
        .expect("refused");
    assert!(error.is_setup(), "{error}");
    assert!(
        error.to_string().contains("`com.example.flakey`"),
        "{error}"
    );
}

/// Options::default(): the host configuration enables no retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_retry_without_configuration() {
    let backend = FaultBackend::start(vec![Behaviour::Reset, Behaviour::NoEffect]).await;
    let hooks = interceptor(&registration(&[Http::new(ID, backend.url())])).await;
    let settled = call(&hooks, "evt_retry_3").await;
    assert_failed(&settled, "fail-closed", "connection-reset", "reset");
    assert_eq!(backend.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_empty_success_and_rejected_content_are_never_retried() {
    // Each reply, what it settles as, and what its one attempt records.
    let script = [
        (
            Behaviour::Deny("no".into()),
            DecidedBy::BackendDeny,
            "accepted",
        ),
        (Behaviour::NoEffect, DecidedBy::NoObjection, "accepted"),
        (
            Behaviour::Reply {
                status: 200,
                content_type: Some("application/json".into()),
                body: b"{oops".to_vec(),
            },
            DecidedBy::SyntheticDeny,
            "malformed-json",
        ),
        // A status rejected as such, not "temporarily unavailable" (502 to 504).
        (bare_status(500), DecidedBy::SyntheticDeny, "http-status"),
    ];
    for (behaviour, decided_by, result) in script {
        let backend = FaultBackend::start(vec![behaviour.clone(), Behaviour::NoEffect]).await;
        let hooks = with_retries(Http::new(ID, backend.url()), 5).await;
        let settled = call(&hooks, "evt_retry_4").await;
        assert_eq!(settled.decided_by, decided_by, "{behaviour:?}");
        let record = record_json(&settled);
        let entry = only_interceptor(&record);
        assert_eq!(attempt_results(entry), [result], "{behaviour:?}");
        assert_eq!(backend.requests().len(), 1, "retried after {behaviour:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_stop_at_the_original_deadline() {
    let hooks = with_retries(Http::new(ID, refused_url()).timeout_ms(200), 1_000).await;
    let (settled, elapsed) = timed_call(&hooks, "evt_retry_5", None).await;
    let record = record_json(&settled);
    let results = attempt_results(only_interceptor(&record));
    // Every attempt but the last was refused; the last was refused too, or met the
    // deadline while connecting (a retry may start with only a little time left).
    let (last, earlier) = results.split_last().expect("at least one attempt");
    assert!(
        earlier.iter().all(|&r| r == "connection-refused"),
        "{results:?}"
    );
    assert!(
        matches!(*last, "connection-refused" | "deadline-exceeded"),
        "{last}"
    );
    // The call fails as its last attempt did, or, when a backoff ended at the deadline
    // (a timer overshoots), as the deadline, where the exchange stood: no attempt began.
    let class = only_interceptor(&record)["failure"]["class"].clone();
    let failure = match class.as_str() {
        Some("deadline-exceeded") if *last == "connection-refused" => {
            assert_failed(&settled, "fail-closed", "deadline-exceeded", "refused")
        }
        _ => assert_failed(&settled, "fail-closed", last, "refused"),
    };
    assert_eq!(failure["phase"], json!("connect"), "{record}");
    assert!(results.len() > 2, "refusals are retried: {results:?}");
    assert!(results.len() < 1_000, "retries are bounded by the deadline");
    assert_settled_by(elapsed, Duration::from_millis(200), "refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_inside_a_budget_stop_at_the_budget() {
    let backend = Http::new(ID, refused_url())
        .timeout_ms(5_000)
        .policy("fail-open");
    let hooks = with_retries(backend, 1_000).await;
    let budget = Duration::from_millis(150);
    let (settled, elapsed) = timed_call(&hooks, "evt_retry_6", Some(budget)).await;
    assert_settled_by(elapsed, budget, "budget");
    // The retries ran out of budget: the call was cut short by the budget (a denial
    // whatever the policy), or settled by the refusal its policy lets through when no
    // retry fit in what was left — never allowed by the budget running out.
    let record = record_json(&settled);
    let entry = only_interceptor(&record);
    let results = attempt_results(entry);
    assert!(results.len() > 1, "{record}");
    match settled.decided_by {
        DecidedBy::NoObjection => {
            assert_failed(&settled, "fail-open", "connection-refused", "budget");
            assert_eq!(results.last(), Some(&"connection-refused"), "{record}");
        }
        DecidedBy::BudgetExpired => {
            assert_eq!(settled.decision, Decision::Deny, "{record}");
            assert_eq!(entry["outcome"], "budget-expired", "{record}");
        }
        other => panic!("{other:?}: {record}"),
    }
}
