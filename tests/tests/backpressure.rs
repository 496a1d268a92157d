//! Backpressure (issue 11 item 5, failure-semantics.md "Enclosing operation budgets"):
//! more concurrent calls than component instances wait, in order, and the wait counts
//! against each call's deadlines in turn and its budget. A call whose time runs out in the
//! queue is settled by its subscription's own policy (`deadline-exceeded`, phase `queue`)
//! or as budget expiry, never as an engine failure; nothing of it is sent.
//!
//! The tests run one at a time (`SERIAL`): the chaos run counts the process's open file
//! descriptors, which a concurrent test would disturb.

use ahp_host::{DecidedBy, Decision, EffectKind, Interceptor, Interrupt, Options, Settlement};
use ahp_tests::fault_backend::{refused_url, Behaviour, FaultBackend};
use ahp_tests::support::{
    assert_failed, assert_settled, assert_settled_in_queue, audit_lines, event, only_interceptor,
    record_json, valid_event, SYNTHETIC_REASON,
};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, Semaphore};
use tokio::task::JoinSet;

static SERIAL: Mutex<()> = Mutex::const_new(());

const BACKEND: &str = "com.example.policy";
const POLICIES: [&str; 2] = ["fail-open", "fail-closed"];
const DENY_REASON: &str = "denied by the chaos backend";
const BUDGET_REASON: &str = "Policy evaluation did not finish within the hook call budget.";
const INTERRUPTED_REASON: &str = "Policy evaluation was interrupted.";

/// A registration of one http backend at `url` with an intercept subscription per
/// `(event type, timeoutMs)`, all under `policy`.
fn registration(url: &str, policy: &str, subscriptions: &[(&str, u64)]) -> String {
    let subscriptions: Vec<Value> = subscriptions
        .iter()
        .map(|(event, timeout_ms)| {
            json!({"events": [event], "mode": "intercept", "timeoutMs": timeout_ms,
                   "failurePolicy": policy, "content": {"default": "metadata"}})
        })
        .collect();
    json!({"protocolVersion": "draft", "hooks": [{
        "id": BACKEND, "transport": {"type": "http", "url": url},
        "subscriptions": subscriptions
    }]})
    .to_string()
}

/// An interceptor of at most `max_instances` instances, auditing to `audit` if given.
async fn interceptor(
    registration: &str,
    max_instances: usize,
    audit: Option<&Path>,
) -> Interceptor {
    let options = Options {
        max_instances: Some(max_instances),
        audit_path: audit.map(Path::to_path_buf),
        ..Options::default()
    };
    Interceptor::new(registration, options)
        .await
        .expect("valid test registration")
}

/// A valid `session.start` event with id `id` (the upstream fixture's).
fn session_start(id: &str) -> String {
    let fixture = include_str!("../upstream/fixtures/draft/http/observe-session-start.valid.json");
    let mut event =
        serde_json::from_str::<Value>(fixture).expect("fixture is JSON")["params"]["event"].clone();
    event["id"] = json!(id);
    event.to_string()
}

/// The event id of an intercept request body.
fn event_id(request: &Value) -> &str {
    request["params"]["event"]["id"]
        .as_str()
        .unwrap_or_default()
}

/// The backend's own answer to event `id`: every third call is denied.
fn backend_answer(id: &str) -> Behaviour {
    match id.bytes().map(u64::from).sum::<u64>() % 3 {
        0 => Behaviour::Deny(DENY_REASON.into()),
        _ => Behaviour::NoEffect,
    }
}

/// The call settled as `answer` says the backend answered.
fn assert_backend_decided(settled: &Settlement, answer: &Behaviour, case: &str) {
    match answer {
        Behaviour::Deny(reason) => assert_settled(
            settled,
            Decision::Deny,
            DecidedBy::BackendDeny,
            Some(reason.as_str()),
        ),
        _ => assert_settled(settled, Decision::Allow, DecidedBy::NoObjection, None),
    }
    let record = record_json(settled);
    assert!(
        only_interceptor(&record)["failure"].is_null(),
        "{case}: {record}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_concurrent_calls_than_instances_wait_and_get_the_backends_decisions() {
    let _serial = SERIAL.lock().await;
    const CALLS: usize = 2_000;
    let backend = FaultBackend::choosing(|request| {
        let answer = backend_answer(event_id(request));
        Behaviour::Delay(Duration::from_millis(250), Box::new(answer))
    })
    .await;
    // 2,000 calls of 250 ms on 128 instances: about 4 s of queueing, inside the timeout.
    let reg = registration(&backend.url(), "fail-closed", &[("tool.before", 20_000)]);
    let interceptor = interceptor(&reg, 128, None).await;
    let mut calls = JoinSet::new();
    for n in 0..CALLS {
        let interceptor = interceptor.clone();
        calls.spawn(async move {
            let id = format!("evt_wide_{n}");
            let settled = interceptor
                .intercept(&event(&id), &[EffectKind::Deny], None)
                .await
                .expect("a valid event settles");
            (id, settled)
        });
    }
    let mut engine_failures = 0;
    while let Some(joined) = calls.join_next().await {
        let (id, settled) = joined.expect("a call task completes");
        engine_failures += usize::from(settled.decided_by == DecidedBy::EngineFailure);
        assert_backend_decided(&settled, &backend_answer(&id), &id);
    }
    assert_eq!(engine_failures, 0);
    assert_eq!(
        backend.requests().len(),
        CALLS,
        "every call reached the backend once"
    );
    interceptor.shutdown_async().await;
}

/// Calls that wait for an instance are served first come, first served: six calls queue
/// behind one the backend holds, on an interceptor with one instance for I/O, and reach
/// the backend in the order they began waiting. On one thread, each call runs until it
/// waits before the next one starts.
#[tokio::test(flavor = "current_thread")]
async fn calls_waiting_for_an_instance_are_served_in_the_order_they_came() {
    let _serial = SERIAL.lock().await;
    const WAITING: usize = 6;
    let backend = FaultBackend::choosing(|request| match event_id(request) {
        "evt_first" => Behaviour::Delay(Duration::from_millis(300), Box::new(Behaviour::NoEffect)),
        _ => Behaviour::NoEffect,
    })
    .await;
    let reg = registration(&backend.url(), "fail-closed", &[("tool.before", 20_000)]);
    // Two instances: one for I/O, one held back for settling (lanes.rs).
    let interceptor = interceptor(&reg, 2, None).await;
    let ids: Vec<String> = std::iter::once("evt_first".to_string())
        .chain((0..WAITING).map(|n| format!("evt_waiting_{n}")))
        .collect();
    let mut calls = JoinSet::new();
    for id in &ids {
        let (interceptor, id) = (interceptor.clone(), id.clone());
        calls.spawn(async move {
            let settled = interceptor
                .intercept(&event(&id), &[EffectKind::Deny], None)
                .await
                .expect("a valid event settles");
            (id, settled)
        });
        // Lets the call run until it waits: for the backend (the first), else its turn.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    while let Some(joined) = calls.join_next().await {
        let (id, settled) = joined.expect("a call task completes");
        assert_settled(&settled, Decision::Allow, DecidedBy::NoObjection, None);
        assert!(
            only_interceptor(&record_json(&settled))["failure"].is_null(),
            "{id}"
        );
    }
    let reached: Vec<String> = backend
        .requests()
        .iter()
        .map(|r| event_id(&r.json()).to_string())
        .collect();
    assert_eq!(
        reached, ids,
        "the backend is asked in the order the calls came"
    );
    interceptor.shutdown_async().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_deadline_that_runs_out_in_the_queue_is_settled_by_its_policy_with_phase_queue() {
    let _serial = SERIAL.lock().await;
    for policy in POLICIES {
        // tool.before holds the only call instance for 1 s; session.start's first deadline
        // is 200 ms, so a session.start call behind it runs out of time in the queue.
        let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
        let reg = registration(
            &backend.url(),
            policy,
            &[("tool.before", 1_000), ("session.start", 200)],
        );
        let interceptor = interceptor(&reg, 2, None).await;
        let holder = {
            let interceptor = interceptor.clone();
            tokio::spawn(async move {
                let event = event("evt_holder");
                interceptor
                    .intercept(&event, &[EffectKind::Deny], None)
                    .await
            })
        };
        assert!(backend.wait_for_requests(1, Duration::from_secs(5)).await);

        let id = format!("evt_queued_{policy}");
        let queued = interceptor
            .intercept(&session_start(&id), &[], None)
            .await
            .expect("a valid event settles");
        assert_settled_in_queue(&queued, policy, &id);
        if policy == "fail-closed" {
            assert_eq!(queued.reason.as_deref(), Some(SYNTHETIC_REASON));
        }

        // A budget that runs out in the queue is budget expiry, nothing sent either.
        let id = format!("evt_budget_{policy}");
        let budget = Some(Duration::from_millis(100));
        let expired = interceptor
            .intercept(&session_start(&id), &[], budget)
            .await
            .expect("a valid event settles");
        assert_settled(
            &expired,
            Decision::Deny,
            DecidedBy::BudgetExpired,
            Some(BUDGET_REASON),
        );

        // An interruption ends the wait at once: interrupted, never permission.
        let interrupt = Interrupt::new();
        let trigger = interrupt.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            trigger.interrupt();
        });
        let id = format!("evt_interrupted_{policy}");
        let interrupted = interceptor
            .intercept_with(&session_start(&id), &[], None, &interrupt)
            .await
            .expect("a valid event settles");
        assert_settled(
            &interrupted,
            Decision::Deny,
            DecidedBy::Interrupted,
            Some(INTERRUPTED_REASON),
        );
        assert_eq!(
            backend.requests().len(),
            1,
            "only the holder reached the backend"
        );

        let held = holder
            .await
            .expect("the holder completes")
            .expect("settles");
        assert_failed(&held, policy, "deadline-exceeded", "holder");
        interceptor.shutdown_async().await;
    }
}

/// An intercept subscription of `event`, under `policy`, for a hook of its own.
fn hook(id: &str, url: String, event: &str, timeout_ms: u64, policy: &str) -> Value {
    json!({"id": id, "transport": {"type": "http", "url": url},
           "subscriptions": [{"events": [event], "mode": "intercept",
                              "timeoutMs": timeout_ms, "failurePolicy": policy,
                              "content": {"default": "metadata"}}]})
}

/// A call that got its instance late, its first interceptor's deadline spent in the
/// queue (failed open), asks the later interceptor with what is left of that one's
/// timeout, counted from when the first deadline passed — not with a full timeout from
/// whenever the instance came free. Here the later backend's answer would be in time
/// for a full timeout (700 ms of 1,000 ms) but comes after what was left (500 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_admitted_late_gives_a_later_interceptor_what_is_left_of_its_timeout() {
    let _serial = SERIAL.lock().await;
    let held_for = Duration::from_millis(600);
    let holding = FaultBackend::start(vec![Behaviour::Delay(
        held_for,
        Box::new(Behaviour::NoEffect),
    )])
    .await;
    let first = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let later = FaultBackend::start(vec![Behaviour::Delay(
        Duration::from_millis(700),
        Box::new(Behaviour::NoEffect),
    )])
    .await;
    let reg = json!({"protocolVersion": "draft", "hooks": [
        hook("com.example.holding", holding.url(), "tool.before", 5_000, "fail-open"),
        hook("com.example.first", first.url(), "session.start", 100, "fail-open"),
        hook("com.example.later", later.url(), "session.start", 1_000, "fail-closed"),
    ]})
    .to_string();
    // One instance for calls with time left, one held back to settle.
    let interceptor = interceptor(&reg, 2, None).await;
    let holder = {
        let (interceptor, text) = (interceptor.clone(), event("evt_left_holder"));
        tokio::spawn(async move { interceptor.intercept(&text, &[], None).await })
    };
    assert!(holding.wait_for_requests(1, Duration::from_secs(5)).await);
    let started = std::time::Instant::now();
    let late = interceptor
        .intercept(&session_start("evt_left_late"), &[], None)
        .await
        .expect("a valid event settles");
    // It waited for the holder: the later backend was asked once the instance came free.
    assert!(started.elapsed() >= held_for - Duration::from_millis(100));
    assert_settled(
        &late,
        Decision::Deny,
        DecidedBy::SyntheticDeny,
        Some(SYNTHETIC_REASON),
    );
    let record = record_json(&late);
    let (first_entry, later_entry) = (&record["interceptors"][0], &record["interceptors"][1]);
    assert_eq!(
        (&first_entry["outcome"], &first_entry["failure"]),
        (
            &json!("failed-open"),
            &json!({"class": "deadline-exceeded", "phase": "queue"})
        ),
        "{record}"
    );
    assert_eq!(later_entry["outcome"], "failed-closed", "{record}");
    assert_eq!(
        later_entry["failure"]["class"], "deadline-exceeded",
        "{record}"
    );
    assert_ne!(later_entry["failure"]["phase"], "queue", "asked: {record}");
    assert_eq!((first.requests().len(), later.requests().len()), (0, 1));
    let held = holder.await.expect("completes").expect("settles");
    assert_settled(&held, Decision::Allow, DecidedBy::NoObjection, None);
    interceptor.shutdown_async().await;
}

/// A call whose wait for an instance outlasts every deadline of its chain ends when the
/// last one passes, each interceptor settled by its policy in phase `queue`, nothing
/// sent — however long the call holding the instance takes (here until shutdown).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_outlasts_every_deadline_of_its_chain_ends_with_the_last_one() {
    let _serial = SERIAL.lock().await;
    let holding = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let first = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let later = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    for policy in POLICIES {
        let reg = json!({"protocolVersion": "draft", "hooks": [
            hook("com.example.holding", holding.url(), "tool.before", 30_000, "fail-open"),
            hook("com.example.first", first.url(), "session.start", 200, "fail-open"),
            hook("com.example.later", later.url(), "session.start", 300, policy),
        ]})
        .to_string();
        let interceptor = interceptor(&reg, 2, None).await;
        // Counted before the holder starts: its request may arrive before this line runs.
        let holding_seen = holding.requests().len() + 1;
        let holder = {
            let (interceptor, text) = (interceptor.clone(), event("evt_outlast_holder"));
            tokio::spawn(async move { interceptor.intercept(&text, &[], None).await })
        };
        assert!(
            holding
                .wait_for_requests(holding_seen, Duration::from_secs(5))
                .await
        );
        let waited = tokio::time::timeout(
            Duration::from_secs(10),
            interceptor.intercept(&session_start("evt_outlast"), &[], None),
        )
        .await
        .expect("the wait ends by the chain's last deadline, not with the holder")
        .expect("a valid event settles");
        let record = record_json(&waited);
        let entries = record["interceptors"].as_array().expect("interceptors");
        let queued = json!({"class": "deadline-exceeded", "phase": "queue"});
        for entry in entries {
            assert_eq!(entry["failure"], queued, "{policy}: {record}");
            assert_eq!(entry["attempts"], json!([]), "{policy}: {record}");
        }
        match policy {
            "fail-open" => assert_settled(&waited, Decision::Allow, DecidedBy::NoObjection, None),
            _ => assert_settled(
                &waited,
                Decision::Deny,
                DecidedBy::SyntheticDeny,
                Some(SYNTHETIC_REASON),
            ),
        }
        assert_eq!(entries.len(), 2, "{record}");
        assert!(!holder.is_finished(), "the holder still holds the instance");
        assert_eq!((first.connections(), later.connections()), (0, 0));
        interceptor.shutdown_async().await;
        let held = holder.await.expect("completes").expect("settles");
        assert_eq!(
            held.decision,
            Decision::Deny,
            "shutdown is never permission"
        );
    }
}

/// The settle lane holds no call doing I/O. A call whose fail-open first interceptor ran
/// out in the queue still has a later interceptor to ask; that asking must not happen on
/// the instance held back for settling, or a call whose deadline ran out behind it — here
/// a fail-closed `session.start` with no budget, which has nothing left but its synthetic
/// denial — waits there for the later backend's answer, past its own deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_call_with_a_later_interceptor_to_ask_leaves_the_settle_lane_free() {
    let _serial = SERIAL.lock().await;
    let fast = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let answer_in = Duration::from_secs(3);
    let slow = FaultBackend::start(vec![Behaviour::Delay(
        answer_in,
        Box::new(Behaviour::NoEffect),
    )])
    .await;
    let gate = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let reg = json!({"protocolVersion": "draft", "hooks": [
        hook("com.example.fast", fast.url(), "tool.before", 100, "fail-open"),
        hook("com.example.slow", slow.url(), "tool.before", 10_000, "fail-open"),
        hook("com.example.gate", gate.url(), "session.start", 100, "fail-closed"),
    ]})
    .to_string();
    // One instance for calls with time left, one held back to settle.
    let interceptor = interceptor(&reg, 2, None).await;
    let spawn = |id: &str| {
        let (interceptor, text) = (interceptor.clone(), event(id));
        tokio::spawn(async move {
            interceptor
                .intercept(&text, &[EffectKind::Deny], None)
                .await
        })
    };
    // The first call holds the call instance, asking the slow backend.
    let holder = spawn("evt_lane_holder");
    assert!(slow.wait_for_requests(1, Duration::from_secs(5)).await);
    // The second runs out of its first deadline (100 ms) in the queue, failed open.
    let late = spawn("evt_lane_late");
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The third's first deadline runs out in the queue too; it has no I/O to do.
    let started = std::time::Instant::now();
    let gated = interceptor
        .intercept(&session_start("evt_lane_gated"), &[], None)
        .await
        .expect("a valid event settles");
    let waited = started.elapsed();
    println!("evt_lane_gated: settled in {waited:?}");
    assert_settled_in_queue(&gated, "fail-closed", "evt_lane_gated");
    assert_eq!(gated.reason.as_deref(), Some(SYNTHETIC_REASON));
    // Settled at its deadline, not when an instance doing I/O came free (3 s on).
    assert!(
        waited < Duration::from_secs(1),
        "settled after {waited:?}, behind the slow backend's {answer_in:?}"
    );

    // The late call still asks the later interceptor, with what is left of its timeout
    // (from 100 ms to 10.1 s) once the holder is done (3 s).
    let late = late.await.expect("completes").expect("settles");
    assert_settled(&late, Decision::Allow, DecidedBy::NoObjection, None);
    let record = record_json(&late);
    let first = &record["interceptors"][0];
    assert_eq!(
        (&first["outcome"], &first["failure"], &first["attempts"]),
        (
            &json!("failed-open"),
            &json!({"class": "deadline-exceeded", "phase": "queue"}),
            &json!([])
        ),
        "{record}"
    );
    assert_eq!(
        record["interceptors"][1]["outcome"], "no-effect",
        "{record}"
    );
    let held = holder.await.expect("completes").expect("settles");
    assert_settled(&held, Decision::Allow, DecidedBy::NoObjection, None);
    // Each tool call asked the slow backend once; only the holder asked the fast one in
    // time, and the gated call sent nothing.
    assert_eq!(slow.requests().len(), 2);
    assert_eq!(fast.requests().len(), 1);
    assert_eq!((gate.requests().len(), gate.connections()), (0, 0));
    interceptor.shutdown_async().await;
}

/// A call whose first deadline ran out in the queue, failed open, with a later
/// interceptor to ask, waits for the call instance (not on the one held back to settle:
/// see above), behind the call holding it, until that later interceptor's deadline
/// (10.2 s here). That wait still ends at once when the call is interrupted, when its
/// budget runs out, or at shutdown: the host settles it, and nothing of it is sent. Meanwhile a call with no I/O to do is
/// served on the instance held back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_call_waiting_to_ask_a_later_interceptor_ends_with_its_interruption_budget_or_shutdown(
) {
    let _serial = SERIAL.lock().await;
    let first = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let later = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let subscription = |event: &str, timeout_ms: u64| {
        json!({"events": [event], "mode": "intercept", "timeoutMs": timeout_ms,
               "failurePolicy": "fail-open", "content": {"default": "metadata"}})
    };
    let reg = json!({"protocolVersion": "draft", "hooks": [
        {"id": BACKEND, "transport": {"type": "http", "url": first.url()},
         "subscriptions": [subscription("tool.before", 10_000), subscription("session.start", 200)]},
        {"id": "com.example.later", "transport": {"type": "http", "url": later.url()},
         "subscriptions": [subscription("session.start", 10_000)]}
    ]});
    // Two instances: one for calls, one held back to settle.
    let interceptor = interceptor(&reg.to_string(), 2, None).await;
    let spawn = |event: String| {
        let interceptor = interceptor.clone();
        tokio::spawn(async move { interceptor.intercept(&event, &[], None).await })
    };
    let holder = spawn(event("evt_call_lane"));
    assert!(first.wait_for_requests(1, Duration::from_secs(5)).await);

    let interrupt = Interrupt::new();
    let trigger = interrupt.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        trigger.interrupt();
    });
    let started = std::time::Instant::now();
    let interrupted = interceptor
        .intercept_with(&session_start("evt_waits_1"), &[], None, &interrupt)
        .await
        .expect("settles");
    assert_settled(
        &interrupted,
        Decision::Deny,
        DecidedBy::Interrupted,
        Some(INTERRUPTED_REASON),
    );
    let budget = Duration::from_millis(600);
    let expired = interceptor
        .intercept(&session_start("evt_waits_2"), &[], Some(budget))
        .await
        .expect("settles");
    assert_settled(
        &expired,
        Decision::Deny,
        DecidedBy::BudgetExpired,
        Some(BUDGET_REASON),
    );
    // An observe call does no I/O in the component: the instance held back serves it.
    // (Of an event no interceptor selects: session.start is for intercept here.)
    let observed = interceptor
        .observe(
            &valid_event("turn.start", "evt_waits_observe"),
            Some(budget),
        )
        .await
        .expect("observed");
    assert!(
        !observed.budget_expired && observed.observers.is_empty() && !observed.engine_failure,
        "{observed:?}"
    );
    // All three ended long before the call instance came free (10 s).
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited {:?}",
        started.elapsed()
    );
    let waiting = spawn(session_start("evt_waits_3"));
    tokio::time::sleep(Duration::from_millis(400)).await;
    interceptor.shutdown_async().await;
    let shut = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("shutdown ends the wait")
        .expect("the task completes")
        .expect("settles");
    assert_eq!(
        (shut.decision, shut.decided_by),
        (Decision::Deny, DecidedBy::Shutdown)
    );
    // Only the holder's request: none of the waiting calls sent anything, to either.
    assert_eq!(first.requests().len(), 1);
    assert_eq!(later.requests().len(), 0);
    assert_eq!(later.connections(), 0);
    let held = holder.await.expect("completes").expect("settles");
    assert_eq!(
        held.decision,
        Decision::Deny,
        "shutdown is never permission"
    );
}

/// One kind of fault the chaos backend injects, and the failure class it must settle as.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Answers too late: `deadline-exceeded`, on a `session.start` call (100 ms timeout).
    Deadline,
    /// Nothing listens: `connection-refused`, through an interceptor of its own.
    Refused,
    /// A scripted misbehaviour of the backend.
    Serve(fn() -> Behaviour, &'static str),
}

/// A JSON-RPC response body template with this `result`.
fn result_body(result: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": "$ID$", "result": result})
        .to_string()
        .replace(r#""$ID$""#, "$ID$")
        .into_bytes()
}

/// A JSON-RPC error response body template with this code.
fn error_body(code: i64) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": "$ID$", "error": {"code": code, "message": "no"}})
        .to_string()
        .replace(r#""$ID$""#, "$ID$")
        .into_bytes()
}

fn json200(body: Vec<u8>) -> Behaviour {
    Behaviour::Reply {
        status: 200,
        content_type: Some("application/json".into()),
        body,
    }
}

/// Every failure class an HTTP backend can produce (as in `failure_matrix.rs`), one
/// injection each, but `late-response`: that needs a reply complete exactly at the
/// deadline yet handed to the component, and one over a socket cannot be timed to the
/// host's own timer (a moment later, the host's bound cuts it off as
/// `deadline-exceeded`). An injected transport's can: `injected_transports.rs`,
/// `a_reply_at_the_deadline_is_a_late_response_never_acted_on`. `launch-failed` and
/// `abnormal-exit` are stdio's.
fn faults() -> Vec<Fault> {
    vec![
        Fault::Deadline,
        Fault::Refused,
        Fault::Serve(|| Behaviour::Reset, "connection-reset"),
        Fault::Serve(|| Behaviour::Close, "connection-lost"),
        Fault::Serve(
            || Behaviour::Reply {
                status: 500,
                content_type: Some("application/json".into()),
                body: error_body(-32603),
            },
            "http-status",
        ),
        Fault::Serve(
            || Behaviour::Reply {
                status: 401,
                content_type: Some("application/json".into()),
                body: b"{}".to_vec(),
            },
            "auth-failed",
        ),
        Fault::Serve(
            || json200(b"{\"jsonrpc\":\"2.0\",\"id\":$ID$,\"result\":\"\xff\xfe\"}".to_vec()),
            "malformed-utf8",
        ),
        Fault::Serve(|| json200(b"{\"jsonrpc\":".to_vec()), "malformed-json"),
        Fault::Serve(
            || {
                let result = r#"{"protocolVersion":"draft","effects":[]}"#;
                json200(format!(r#"{{"jsonrpc":"1.0","id":$ID$,"result":{result}}}"#).into_bytes())
            },
            "malformed-jsonrpc",
        ),
        Fault::Serve(
            || {
                json200(
                    json!({"jsonrpc": "2.0", "id": "evt_someone_else", "result":
                           {"protocolVersion": "draft", "effects": []}})
                    .to_string()
                    .into_bytes(),
                )
            },
            "id-mismatch",
        ),
        Fault::Serve(|| json200(error_body(-32003)), "jsonrpc-error"),
        Fault::Serve(|| json200(error_body(-32001)), "unsupported-version"),
        Fault::Serve(|| json200(error_body(-32002)), "unsupported-event"),
        Fault::Serve(
            || json200(result_body(json!({"protocolVersion": "draft"}))),
            "missing-result-fields",
        ),
        Fault::Serve(
            || Behaviour::Effects(json!([{"type": "com.example.unknown"}])),
            "invalid-effects",
        ),
    ]
}

/// What call `n` of the chaos run meets: one in five a fault, taking turns through every
/// class; the others the backend's own answer.
fn chaos_case(n: usize, faults: &[Fault]) -> Option<Fault> {
    n.is_multiple_of(5).then(|| faults[(n / 5) % faults.len()])
}

/// The number of open file descriptors of this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd lists the open descriptors")
        .count()
}

/// Waits (bounded) until the open descriptors are back to `baseline` or fewer: closed
/// connections are released by tasks that finish after the call that dropped them.
async fn fds_return_to(baseline: usize) -> usize {
    for _ in 0..500 {
        if open_fds() <= baseline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    open_fds()
}

/// The interceptors of one policy in the chaos run.
struct Lane {
    /// Tool calls (answers and scripted faults) and the session.start deadline calls.
    backend: Interceptor,
    refused: Interceptor,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_every_decision_matches_its_class_and_policy_and_nothing_leaks() {
    let _serial = SERIAL.lock().await;
    const CALLS: usize = 10_000;
    const CONCURRENCY: usize = 64;
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("a temporary directory");

    // Warm up what lives for the whole process (the compiled component, the TLS roots),
    // then take the baseline.
    {
        let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let reg = registration(&backend.url(), "fail-closed", &[("tool.before", 1_000)]);
        let warm = interceptor(&reg, 2, None).await;
        warm.intercept(&event("evt_warm"), &[EffectKind::Deny], None)
            .await
            .expect("settles");
        warm.shutdown_async().await;
    }
    // The refused backend's port is held by one socket for the whole process.
    let _ = refused_url();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let baseline = open_fds();

    let faults = Arc::new(faults());
    // Calls alternate policies and faults take turns every fifth call: with an even number
    // of faults each would meet one policy only.
    assert!(faults.len() % 2 == 1, "{} faults", faults.len());
    let chooser_faults = faults.clone();
    let backend = FaultBackend::choosing(move |request| {
        let id = event_id(request);
        let n: usize = id
            .rsplit('_')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        match chaos_case(n, &chooser_faults) {
            Some(Fault::Serve(behaviour, _)) => behaviour(),
            // Answers long after the 100 ms deadline (and then finds the connection gone).
            Some(Fault::Deadline) => {
                Behaviour::Delay(Duration::from_millis(400), Box::new(Behaviour::NoEffect))
            }
            _ => backend_answer(id),
        }
    })
    .await;
    let mut lanes = HashMap::new();
    for policy in POLICIES {
        let audit = |name: &str| dir.path().join(format!("{policy}-{name}.jsonl"));
        let reg = registration(
            &backend.url(),
            policy,
            &[("tool.before", 5_000), ("session.start", 100)],
        );
        let refused = registration(&refused_url(), policy, &[("tool.before", 5_000)]);
        let lane = Lane {
            // Fewer instances than the calls in flight: the queue is in use throughout.
            backend: interceptor(&reg, 16, Some(&audit("backend"))).await,
            refused: interceptor(&refused, 4, Some(&audit("refused"))).await,
        };
        lanes.insert(policy, lane);
    }
    let lanes = Arc::new(lanes);

    let admission = Arc::new(Semaphore::new(CONCURRENCY));
    let mut calls = JoinSet::new();
    for n in 0..CALLS {
        let permit = admission.clone().acquire_owned().await.expect("open");
        let (lanes, faults) = (lanes.clone(), faults.clone());
        calls.spawn(async move {
            let policy = POLICIES[n % 2];
            let lane = &lanes[policy];
            let id = format!("evt_chaos_{policy}_{n}");
            let case = chaos_case(n, &faults);
            let (target, text, effects): (_, _, &[EffectKind]) = match case {
                Some(Fault::Deadline) => (&lane.backend, session_start(&id), &[]),
                Some(Fault::Refused) => (&lane.refused, event(&id), &[EffectKind::Deny]),
                _ => (&lane.backend, event(&id), &[EffectKind::Deny]),
            };
            let settled = target
                .intercept(&text, effects, None)
                .await
                .expect("a valid event settles");
            drop(permit);
            check_chaos_call(&settled, &id, policy, case);
            id
        });
    }
    let mut settled_ids = Vec::with_capacity(CALLS);
    while let Some(joined) = calls.join_next().await {
        settled_ids.push(joined.expect("each call settles as its class and policy say"));
    }
    assert_eq!(settled_ids.len(), CALLS);

    // Exactly one audit record per call, each the call's.
    let mut audited: HashMap<String, usize> = HashMap::new();
    for entry in std::fs::read_dir(dir.path()).expect("the audit directory") {
        for record in audit_lines(&entry.expect("an audit file").path()) {
            let id = record["event"]["id"]
                .as_str()
                .expect("an event id")
                .to_owned();
            *audited.entry(id).or_default() += 1;
        }
    }
    assert_eq!(audited.len(), CALLS, "a record for every call");
    assert!(audited.values().all(|&n| n == 1), "one record per call");
    assert!(settled_ids.iter().all(|id| audited.contains_key(id)));

    for lane in lanes.values() {
        lane.backend.shutdown_async().await;
        lane.refused.shutdown_async().await;
    }
    drop(lanes);
    drop(backend);
    let after = fds_return_to(baseline).await;
    assert!(
        after <= baseline,
        "descriptors leaked: {after} open, {baseline} before"
    );
}

/// Call `id` under `policy` settled as its case says: the backend's answer, or the
/// failure class settled by the policy.
fn check_chaos_call(settled: &Settlement, id: &str, policy: &str, case: Option<Fault>) {
    assert_ne!(settled.decided_by, DecidedBy::EngineFailure, "{id}");
    let class = match case {
        None => return assert_backend_decided(settled, &backend_answer(id), id),
        Some(Fault::Deadline) => "deadline-exceeded",
        Some(Fault::Refused) => "connection-refused",
        Some(Fault::Serve(_, class)) => class,
    };
    let failure = assert_failed(settled, policy, class, id);
    if matches!(case, Some(Fault::Deadline)) {
        // Out of time at the backend, or already in the queue (then nothing was sent).
        let phase = failure["phase"].as_str().unwrap_or_default();
        assert!(
            ["await-response", "queue"].contains(&phase),
            "{id}: {failure}"
        );
    }
}

#[tokio::test]
async fn fewer_than_two_instances_is_refused_naming_the_option() {
    let _serial = SERIAL.lock().await;
    let reg = registration(&refused_url(), "fail-closed", &[("tool.before", 1_000)]);
    for max_instances in [0, 1] {
        let options = Options {
            max_instances: Some(max_instances),
            ..Options::default()
        };
        let error = Interceptor::new(&reg, options)
            .await
            .err()
            .expect("refused");
        assert!(error.is_setup(), "{error}");
        assert!(error.to_string().contains("max_instances"), "{error}");
    }
}
