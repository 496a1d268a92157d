//! Transports injected by the harness (`Options::transports`): an in-process policy
//! engine replaces a backend's binding, and the host's failure semantics hold around it
//! as around any backend — its deadline (enforced by the host even when the transport
//! never returns), its failure classes under the subscription's policy, retries with the
//! identical bytes, interruption — while the transport stays the caller's: shutdown
//! leaves it usable and dropping the interceptor lets go of it.

use ahp_host::{
    BoxFuture, DecidedBy, Decision, EffectKind, Interceptor, Interrupt, Options, RetryPolicy,
    Settlement, Transport, TransportError, TransportReply, TransportRequest,
};
use ahp_tests::support::{
    assert_failed, assert_settled, assert_settled_at, call, event, eventually,
    only_attempt_results, only_interceptor, record_json, registration, Http,
};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BACKEND: &str = "com.example.in-process";
/// Never dialled: the injected transport replaces this binding.
const UNUSED_URL: &str = "http://127.0.0.1:9/never";
const POLICIES: [&str; 2] = ["fail-open", "fail-closed"];
/// What every transport's replies are held to (`max_body_bytes`, by default).
const MAX_BODY: usize = 1 << 20;

/// What the in-process engine does with each request, in turn (the last one repeats).
#[derive(Clone, Copy, Debug)]
enum Answer {
    Allow,
    Deny,
    /// Never answers, but notices cancellation.
    Hang,
    /// Fails as `connection-reset`.
    Reset,
    /// Says it was cancelled, though nobody cancelled it (its owner closed it).
    Closed,
    /// Got a reply it could not unframe.
    Garbled,
    /// Could not resolve the backend's name.
    Unresolved,
    /// Has a bug: panics.
    Panic,
    /// Allows, in a reply padded past the 1 MiB every transport's replies are held to.
    Huge,
    /// Allows, in a reply padded to exactly that 1 MiB, a media type beside it.
    Brimful,
    /// Unavailable: a 503 with a page of 2 MiB.
    Unavailable,
    /// Never answers, and panics when it is dropped (at the deadline).
    PanicsOnDrop,
    /// Denies, the moment the deadline passes.
    DenyAtTheDeadline,
    /// Allows (no effects), the moment the deadline passes.
    AllowAtTheDeadline,
}

/// Panics when dropped: an embedder's bug in a `Drop`.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("the in-process engine's own bug, on drop");
    }
}

struct Engine {
    answers: Vec<Answer>,
    /// Every message it was given, byte for byte, with its deadline.
    seen: Mutex<Vec<(Vec<u8>, std::time::Instant)>>,
    saw_cancellation: Arc<AtomicBool>,
}

impl Engine {
    fn new(answers: &[Answer]) -> Arc<Engine> {
        Arc::new(Engine {
            answers: answers.to_vec(),
            seen: Mutex::default(),
            saw_cancellation: Arc::default(),
        })
    }

    fn messages(&self) -> Vec<Vec<u8>> {
        let seen = self.seen.lock().unwrap();
        seen.iter().map(|(m, _)| m.clone()).collect()
    }
}

impl Transport for Engine {
    fn exchange<'a>(
        &'a self,
        request: TransportRequest<'a>,
    ) -> BoxFuture<'a, Result<TransportReply, TransportError>> {
        Box::pin(async move {
            assert_eq!(request.backend, BACKEND);
            let n = {
                let mut seen = self.seen.lock().unwrap();
                seen.push((request.message.to_vec(), request.deadline));
                seen.len()
            };
            let answer = self.answers[(n - 1).min(self.answers.len() - 1)];
            let message: Value = serde_json::from_slice(request.message).expect("JSON-RPC");
            if matches!(
                answer,
                Answer::DenyAtTheDeadline | Answer::AllowAtTheDeadline
            ) {
                // The deadline itself, not a moment after: this wait and the host's bound
                // around the exchange end on the same timer tick, and the bound polls the
                // exchange first, so the reply reaches the component. A timer never ends
                // before its instant, and the component reads the same clock, so the
                // reply cannot slip in before the deadline either. Waiting past it would
                // only be the host's `deadline-exceeded`: the reply would never arrive.
                tokio::time::sleep_until(request.deadline.into()).await;
            }
            let effects = match answer {
                Answer::Allow | Answer::AllowAtTheDeadline | Answer::Huge | Answer::Brimful => {
                    json!([])
                }
                Answer::Deny | Answer::DenyAtTheDeadline => {
                    json!([{"type": "deny", "reason": "in-process says no"}])
                }
                Answer::Reset => return Err(TransportError::ConnectionReset),
                Answer::Closed => return Err(TransportError::Cancelled),
                Answer::Garbled => return Err(TransportError::Malformed),
                Answer::Unresolved => return Err(TransportError::UnresolvedHost),
                Answer::Panic => panic!("the in-process engine's own bug"),
                Answer::Unavailable => {
                    return Ok(TransportReply {
                        status: Some(503),
                        content_type: Some("text/html".into()),
                        body: vec![b'x'; 2 * MAX_BODY],
                    })
                }
                Answer::PanicsOnDrop => {
                    let _guard = PanicsOnDrop;
                    return std::future::pending().await;
                }
                Answer::Hang => {
                    let (cancelled, seen) =
                        (request.cancelled.clone(), self.saw_cancellation.clone());
                    tokio::spawn(async move {
                        cancelled.wait().await;
                        seen.store(true, Ordering::SeqCst);
                    });
                    return std::future::pending().await;
                }
            };
            // A notification (an observe) is acknowledged as HTTP does, with no body.
            if message.get("id").is_none() && matches!(answer, Answer::Allow) {
                return Ok(TransportReply {
                    status: Some(202),
                    content_type: None,
                    body: Vec::new(),
                });
            }
            let reply = json!({"jsonrpc": "2.0", "id": message["id"],
                               "result": {"protocolVersion": "draft", "effects": effects}});
            let mut body = reply.to_string().into_bytes();
            match answer {
                Answer::Huge => body.resize(body.len() + MAX_BODY, b' '),
                Answer::Brimful => body.resize(MAX_BODY, b' '),
                _ => {}
            }
            Ok(TransportReply {
                status: Some(200),
                content_type: Some("application/json".into()),
                body,
            })
        })
    }
}

async fn interceptor_with(
    engine: &Arc<Engine>,
    policy: &str,
    timeout_ms: u64,
    retries: u32,
) -> Interceptor {
    let mut transports: HashMap<String, Arc<dyn Transport>> = HashMap::new();
    transports.insert(BACKEND.into(), engine.clone());
    let options = Options {
        transports,
        retries: RetryPolicy {
            default: retries,
            ..Default::default()
        },
        ..Options::default()
    };
    let reg = registration(&[Http::new(BACKEND, UNUSED_URL)
        .policy(policy)
        .timeout_ms(timeout_ms)]);
    Interceptor::new(&reg, options)
        .await
        .expect("valid registration")
}

/// One call, under `policy` and without retries, to an engine that answers `answer`.
async fn one_call(answer: Answer, policy: &str) -> (Arc<Engine>, Settlement) {
    let engine = Engine::new(&[answer]);
    let hooks = interceptor_with(&engine, policy, 1_000, 0).await;
    let settled = call(&hooks, &format!("evt_inproc_{answer:?}_{policy}")).await;
    (engine, settled)
}

/// Under each policy, one call to an engine that answers `answer` settles by that
/// policy with exactly `failure` recorded.
async fn assert_fails_as(answer: Answer, failure: &Value) {
    for policy in POLICIES {
        let (_engine, settled) = one_call(answer, policy).await;
        let class = failure["class"].as_str().expect("a failure class");
        let recorded = assert_failed(&settled, policy, class, policy);
        assert_eq!(&recorded, failure, "{policy}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_engine_allows_and_denies() {
    let engine = Engine::new(&[Answer::Allow, Answer::Deny]);
    let hooks = interceptor_with(&engine, "fail-closed", 1_000, 0).await;
    let allowed = call(&hooks, "evt_inproc_allow").await;
    assert_settled(&allowed, Decision::Allow, DecidedBy::NoObjection, None);
    let denied = call(&hooks, "evt_inproc_deny").await;
    assert_settled(
        &denied,
        Decision::Deny,
        DecidedBy::BackendDeny,
        Some("in-process says no"),
    );
    let messages = engine.messages();
    assert_eq!(messages.len(), 2);
    let first: Value = serde_json::from_slice(&messages[0]).unwrap();
    assert_eq!(first["method"], "hooks/intercept");
    assert_eq!(first["params"]["event"]["id"], "evt_inproc_allow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_transport_is_deadline_exceeded_at_the_deadline_under_both_policies() {
    for policy in POLICIES {
        let engine = Engine::new(&[Answer::Hang]);
        let hooks = interceptor_with(&engine, policy, 300, 0).await;
        let started = Instant::now();
        let settled = call(&hooks, &format!("evt_inproc_hang_{policy}")).await;
        assert_settled_at(started.elapsed(), Duration::from_millis(300), policy);
        let failure = assert_failed(&settled, policy, "deadline-exceeded", policy);
        assert_eq!(failure["phase"], "await-response", "{policy}: {failure}");
        // The transport was told the subscription's deadline, which starts a little
        // after the call does.
        let (_, deadline) = engine.seen.lock().unwrap()[0];
        let told = deadline.duration_since(started);
        let timeout = Duration::from_millis(300);
        assert!(
            told >= timeout && told <= started.elapsed(),
            "{policy}: deadline {told:?} after the call started"
        );
    }
}

/// An exchange the host ends at its deadline tells the transport to stop, as
/// interruption does: work the transport spawned to wait for the signal does not run on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_tells_the_transport_to_stop() {
    let engine = Engine::new(&[Answer::Hang]);
    let hooks = interceptor_with(&engine, "fail-closed", 200, 0).await;
    let settled = call(&hooks, "evt_inproc_deadline_cancels").await;
    assert_failed(&settled, "fail-closed", "deadline-exceeded", "fail-closed");
    let told = || engine.saw_cancellation.load(Ordering::SeqCst);
    assert!(eventually(Duration::from_secs(2), told).await, "never told");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_is_retried_with_identical_bytes_when_retries_are_on() {
    for policy in POLICIES {
        let (engine, settled) = one_call(Answer::Reset, policy).await;
        assert_failed(&settled, policy, "connection-reset", policy);
        assert_eq!(
            engine.messages().len(),
            1,
            "{policy}: no retries configured"
        );
    }
    let engine = Engine::new(&[Answer::Reset, Answer::Allow]);
    let hooks = interceptor_with(&engine, "fail-closed", 1_000, 2).await;
    let settled = call(&hooks, "evt_inproc_retry").await;
    assert_settled(&settled, Decision::Allow, DecidedBy::NoObjection, None);
    let messages = engine.messages();
    assert_eq!(messages.len(), 2, "one attempt and one retry");
    assert_eq!(messages[0], messages[1], "a retry resends the same bytes");
    let record = record_json(&settled);
    let attempts = only_interceptor(&record)["attempts"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(attempts, 2, "{record}");
}

/// Only the call's interruption or shutdown is `interrupted`: a transport that reports
/// cancellation on its own has failed, and the subscription's policy settles it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transport_cancelled_by_its_owner_is_a_failure_under_the_policy() {
    let lost = json!({"class": "connection-lost", "phase": "await-response"});
    assert_fails_as(Answer::Closed, &lost).await;
}

/// A transport that panics has ended abnormally, as a backend process that died: the
/// call settles under the policy (a deny under fail-closed), instead of the panic
/// unwinding into the caller's `.await` with no decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_transport_is_a_failure_under_the_policy() {
    let ended = json!({"class": "abnormal-exit", "phase": "await-response"});
    assert_fails_as(Answer::Panic, &ended).await;
}

/// A reply longer than the replies of every transport may be (1 MiB by default) is
/// `malformed-json`, detail `response-too-large`, settled by the policy, as over HTTP or
/// stdio: copied into the component, a large enough one would exhaust its memory, an
/// engine failure (a denial whatever the policy).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_reply_is_response_too_large_under_the_policy() {
    let too_large = json!({"class": "malformed-json", "phase": "read-response",
                           "detail": "response-too-large"});
    assert_fails_as(Answer::Huge, &too_large).await;
}

/// An error status is that status however long its body, as over HTTP (where the body,
/// read only for the audit's diagnostics, is cut at the cap): a 503 with a page past the
/// cap is `http-status` and retried, not a response too large, which is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_error_page_is_its_status_and_retried() {
    let engine = Engine::new(&[Answer::Unavailable]);
    let hooks = interceptor_with(&engine, "fail-closed", 1_000, 1).await;
    let settled = call(&hooks, "evt_inproc_large_503").await;
    assert_failed(&settled, "fail-closed", "http-status", "a large 503");
    let messages = engine.messages();
    assert_eq!(messages.len(), 2, "one attempt and one retry");
    assert_eq!(messages[0], messages[1], "a retry resends the same bytes");
}

/// A body of exactly the cap is read, as over HTTP: its media type does not count
/// against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_of_exactly_the_cap_is_read_with_its_media_type() {
    for policy in POLICIES {
        let (_engine, settled) = one_call(Answer::Brimful, policy).await;
        assert_settled(&settled, Decision::Allow, DecidedBy::NoObjection, None);
        let record = record_json(&settled);
        assert_eq!(
            only_interceptor(&record)["outcome"],
            "no-effect",
            "{record}"
        );
    }
}

/// A reply complete only as the deadline passes is never acted on, whatever the backend
/// said (failure-semantics.md: "When the deadline expires, the harness MUST ignore any
/// later response and apply failure policy"): it reaches the component, which checks the
/// deadline again before it accepts anything, so it is `late-response`, in phase
/// `accept`, settled by the policy. Under fail-open the backend's deny does not stand,
/// under fail-closed its allow does not: a synthetic deny, never the backend's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_at_the_deadline_is_a_late_response_never_acted_on() {
    let late = json!({"class": "late-response", "phase": "accept"});
    for answer in [Answer::DenyAtTheDeadline, Answer::AllowAtTheDeadline] {
        for policy in POLICIES {
            let case = format!("{answer:?} under {policy}");
            let (engine, settled) = one_call(answer, policy).await;
            let recorded = assert_failed(&settled, policy, "late-response", &case);
            assert_eq!(recorded, late, "{case}");
            // The reply came, once and late: not the host's bound cutting off the wait.
            assert_eq!(only_attempt_results(&settled), ["late-response"], "{case}");
            assert_eq!(engine.messages().len(), 1, "{case}: not retried");
            let record = record_json(&settled).to_string();
            assert!(!record.contains("in-process says no"), "{case}: {record}");
        }
    }
}

/// A transport whose future panics as the host drops it at the deadline does not unwind
/// into the caller: the panic is caught as it is dropped, and the exchange has failed
/// as any that outlived its deadline, settled under the policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transport_panicking_as_it_is_dropped_fails_at_its_deadline_under_the_policy() {
    let deadline = json!({"class": "deadline-exceeded", "phase": "await-response"});
    assert_fails_as(Answer::PanicsOnDrop, &deadline).await;
}

/// A call its caller drops (a `timeout` around it) while such a transport is pending
/// does not unwind into the caller as the transport's future is dropped: the caller
/// goes on, and the interceptor serves the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_while_a_transport_would_panic_on_drop_leaves_the_caller_alone() {
    let engine = Engine::new(&[Answer::PanicsOnDrop, Answer::Allow]);
    let hooks = interceptor_with(&engine, "fail-closed", 10_000, 0).await;
    let request = event("evt_inproc_dropped_call");
    let calling = hooks.intercept(&request, &[EffectKind::Deny], None);
    let dropped = tokio::time::timeout(Duration::from_millis(500), calling).await;
    assert!(dropped.is_err(), "the transport never answers");
    assert_eq!(engine.messages().len(), 1, "the exchange was under way");
    let next = call(&hooks, "evt_inproc_after_dropped_call").await;
    assert_settled(&next, Decision::Allow, DecidedBy::NoObjection, None);
}

/// A reply the transport could not unframe held no JSON text: `malformed-json`, detail
/// `malformed-framing`, whatever the transport is (not a garbled HTTP answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbled_reply_is_malformed_framing_under_the_policy() {
    let framing = json!({"class": "malformed-json", "phase": "read-response",
                         "detail": "malformed-framing"});
    assert_fails_as(Answer::Garbled, &framing).await;
}

/// A name that did not resolve: `connection-refused` with its own detail, settled by the
/// policy, and retried with the same bytes when retries are on (a resolver may say "try
/// again").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unresolved_name_is_refused_with_its_detail_and_retried() {
    let unresolved = json!({"class": "connection-refused", "phase": "connect",
                            "detail": "unresolved-host"});
    assert_fails_as(Answer::Unresolved, &unresolved).await;
    let engine = Engine::new(&[Answer::Unresolved, Answer::Allow]);
    let hooks = interceptor_with(&engine, "fail-closed", 1_000, 1).await;
    let settled = call(&hooks, "evt_inproc_resolve_again").await;
    assert_settled(&settled, Decision::Allow, DecidedBy::NoObjection, None);
    let messages = engine.messages();
    assert_eq!(messages.len(), 2, "one attempt and one retry");
    assert_eq!(messages[0], messages[1], "a retry resends the same bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interruption_cancels_the_exchange_and_tells_the_transport() {
    let engine = Engine::new(&[Answer::Hang]);
    let hooks = interceptor_with(&engine, "fail-open", 10_000, 0).await;
    let interrupt = Interrupt::new();
    let trigger = interrupt.clone();
    let calling = {
        let hooks = hooks.clone();
        tokio::spawn(async move {
            hooks
                .intercept_with(
                    &event("evt_inproc_cut"),
                    &[EffectKind::Deny],
                    None,
                    &interrupt,
                )
                .await
        })
    };
    let arrived = || !engine.messages().is_empty();
    assert!(
        eventually(Duration::from_secs(5), arrived).await,
        "the message never reached the transport"
    );
    trigger.interrupt();
    let settled = calling.await.unwrap().unwrap();
    assert_eq!(settled.decision, Decision::Deny, "{}", settled.record);
    assert_eq!(settled.decided_by, DecidedBy::Interrupted);
    let told = || engine.saw_cancellation.load(Ordering::SeqCst);
    assert!(eventually(Duration::from_secs(2), told).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_leaves_an_injected_transport_to_its_owner() {
    let engine = Engine::new(&[Answer::Allow]);
    let first = interceptor_with(&engine, "fail-closed", 1_000, 0).await;
    call(&first, "evt_inproc_before_shutdown").await;
    first.shutdown_async().await;
    drop(first);
    assert_eq!(
        Arc::strong_count(&engine),
        1,
        "the interceptor let go of it"
    );
    let second = interceptor_with(&engine, "fail-closed", 1_000, 0).await;
    let settled = call(&second, "evt_inproc_after_shutdown").await;
    assert_settled(&settled, Decision::Allow, DecidedBy::NoObjection, None);
    assert_eq!(engine.messages().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transport_for_an_unknown_backend_is_refused_at_build() {
    let mut transports: HashMap<String, Arc<dyn Transport>> = HashMap::new();
    transports.insert("com.example.nobody".into(), Engine::new(&[Answer::Allow]));
    let options = Options {
        transports,
        ..Options::default()
    };
    let reg = registration(&[Http::new(BACKEND, UNUSED_URL)]);
    let error = Interceptor::new(&reg, options)
        .await
        .err()
        .expect("refused");
    assert!(error.to_string().contains("com.example.nobody"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transport_may_replace_a_stdio_binding() {
    let engine = Engine::new(&[Answer::Deny]);
    let mut transports: HashMap<String, Arc<dyn Transport>> = HashMap::new();
    transports.insert(BACKEND.into(), engine.clone());
    let options = Options {
        transports,
        ..Options::default()
    };
    // A command that does not exist: launching it would be `launch-failed`.
    let reg = json!({"protocolVersion": "draft", "hooks": [{
        "id": BACKEND,
        "transport": {"type": "stdio", "command": "/nonexistent/ahp-backend", "lifecycle": "persistent"},
        "subscriptions": [{"events": ["tool.before"], "mode": "intercept", "timeoutMs": 1000,
                           "failurePolicy": "fail-open", "content": {"default": "metadata"}}]
    }]});
    let hooks = Interceptor::new(&reg.to_string(), options).await.unwrap();
    let settled = call(&hooks, "evt_inproc_stdio").await;
    assert_settled(
        &settled,
        Decision::Deny,
        DecidedBy::BackendDeny,
        Some("in-process says no"),
    );
    assert_eq!(engine.messages().len(), 1);
}

/// One observe subscription on `tool.before`, at the in-process engine.
async fn observer_of(engine: &Arc<Engine>) -> Interceptor {
    observer_retrying(engine, 0).await
}

/// [`observer_of`], its transient failures retried `retries` times.
async fn observer_retrying(engine: &Arc<Engine>, retries: u32) -> Interceptor {
    let mut transports: HashMap<String, Arc<dyn Transport>> = HashMap::new();
    transports.insert(BACKEND.into(), engine.clone());
    let reg = json!({"protocolVersion": "draft", "hooks": [{"id": BACKEND,
        "transport": {"type": "http", "url": UNUSED_URL},
        "subscriptions": [{"events": ["tool.before"], "mode": "observe",
                           "content": {"default": "metadata"}}]}]});
    let options = Options {
        transports,
        retries: RetryPolicy {
            default: retries,
            ..Default::default()
        },
        ..Options::default()
    };
    Interceptor::new(&reg.to_string(), options)
        .await
        .expect("valid registration")
}

/// As for an interceptor, an observer's transport that reports cancellation on its own
/// has failed (`connection-lost`): only the call's interruption or shutdown is
/// `interrupted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observers_transport_cancelled_by_its_owner_is_connection_lost() {
    let engine = Engine::new(&[Answer::Closed]);
    let hooks = observer_of(&engine).await;
    let observed = hooks
        .observe(&event("evt_inproc_observer_closed"), None)
        .await
        .expect("observed");
    let observed = serde_json::to_value(&observed).expect("JSON");
    assert_eq!(
        observed["observers"][0]["result"], "connection-lost",
        "{observed}"
    );
}

/// ... and is retried like one, as an interceptor's is: the notification then goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observers_transport_cancelled_by_its_owner_is_retried() {
    let engine = Engine::new(&[Answer::Closed, Answer::Allow]);
    let hooks = observer_retrying(&engine, 1).await;
    let observed = hooks
        .observe(&event("evt_inproc_observer_retried"), None)
        .await
        .expect("observed");
    let observed = serde_json::to_value(&observed).expect("JSON");
    assert_eq!(
        observed["observers"][0]["result"], "delivered",
        "{observed}"
    );
    let messages = engine.messages();
    assert_eq!(messages.len(), 2, "one attempt and one retry");
    assert_eq!(messages[0], messages[1], "the same bytes");
}

/// An observe delivery dropped with its call (the future dropped mid-exchange) tells its
/// transport to stop, as an interceptor's exchange does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_delivery_dropped_with_its_call_tells_the_transport() {
    let engine = Engine::new(&[Answer::Hang]);
    let hooks = observer_of(&engine).await;
    let observing = tokio::spawn(async move {
        let _ = hooks
            .observe(&event("evt_inproc_observer_dropped"), None)
            .await;
    });
    // Dropped once the exchange has begun, however long that took.
    let until = Instant::now() + Duration::from_secs(5);
    while engine.messages().is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(engine.messages().len(), 1, "the exchange began");
    observing.abort();
    let told = || engine.saw_cancellation.load(Ordering::SeqCst);
    assert!(eventually(Duration::from_secs(2), told).await, "never told");
}

/// An observer's transport that panics has failed its delivery as an interceptor's has
/// (`abnormal-exit`), recorded so, not left `interrupted` as if the call had been.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observers_panicking_transport_is_a_failed_delivery() {
    let engine = Engine::new(&[Answer::Panic]);
    let hooks = observer_of(&engine).await;
    let observed = hooks
        .observe(&event("evt_inproc_observer_panic"), None)
        .await
        .expect("observed");
    let observed = serde_json::to_value(&observed).expect("JSON");
    assert_eq!(
        observed["observers"][0]["result"], "abnormal-exit",
        "{observed}"
    );
}
