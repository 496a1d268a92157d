//! Observe subscriptions: `hooks/observe` notifications (no JSON-RPC id) to every
//! matching observer, exactly or by `family.*` / `*`; HTTP success is 202/204 with no
//! body; every failure is recorded and bounded by the observer deadline and the budget.

use ahp_host::{
    DecidedBy, Decision, EffectKind, HookCall, Interceptor, Interrupt, Options, RetryPolicy,
};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    assert_nothing_sent, audit_lines, audit_lines_once, event, interceptor, record_json,
    registration, settle, sha256_hex, Http,
};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn observer(id: &str, url: &str, events: &[&str]) -> Value {
    json!({"id": id, "transport": {"type": "http", "url": url},
           "subscriptions": [{"events": events, "mode": "observe", "content": {"default": "metadata"}}]})
}

fn tool_after(id: &str) -> String {
    json!({"id": id, "source": "urn:ahp:test", "type": "tool.after", "time": "2026-11-30T12:00:01Z",
           "session": {"id": "sess_obs"}, "call": {"id": "call_obs"}, "path": "native",
           "tool": {"name": "Bash", "input": {"command": "ls"}, "origin": "native"},
           "outcome": "ok", "execution": {"status": "executed"}, "items": []})
    .to_string()
}

/// Observes `event` and returns the record and how long the observe call took.
async fn observe(hooks: Vec<Value>, event: &str, budget: Option<Duration>) -> (Value, Duration) {
    observe_with(Options::default(), hooks, event, budget).await
}

async fn observe_with(
    options: Options,
    hooks: Vec<Value>,
    event: &str,
    budget: Option<Duration>,
) -> (Value, Duration) {
    let reg = json!({"protocolVersion": "draft", "hooks": hooks}).to_string();
    let interceptor = Interceptor::new(&reg, options)
        .await
        .expect("valid registration");
    let started = Instant::now();
    let observed = interceptor
        .observe(event, budget)
        .await
        .expect("valid event");
    let record = serde_json::to_value(&observed).expect("the report serializes");
    (record, started.elapsed())
}

/// Host options that retry each transient failure `retries` times.
fn retrying(retries: u32) -> Options {
    Options {
        retries: RetryPolicy {
            default: retries,
            ..RetryPolicy::default()
        },
        ..Options::default()
    }
}

/// Each observer entry's `result` in `record`, in order.
fn results(record: &Value) -> Vec<&Value> {
    let observers = record["observers"].as_array().expect("observers");
    observers.iter().map(|o| &o["result"]).collect()
}

/// A reply with `status`, no content type and no body.
fn empty_reply(status: u16) -> Behaviour {
    Behaviour::Reply {
        status,
        content_type: None,
        body: Vec::new(),
    }
}

/// A denying interceptor, then one that never answers: the deny short-circuits the
/// second, which becomes an observer of the call that hangs. Returns the denier, the
/// hanging backend and the registration.
async fn deny_then_hang() -> (FaultBackend, FaultBackend, String) {
    let denier = FaultBackend::start(vec![Behaviour::Deny("no".into())]).await;
    let hanging = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let reg = registration(&[
        Http::new("com.example.denier", denier.url()),
        Http::new("com.example.hang", hanging.url()),
    ]);
    (denier, hanging, reg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matching_observers_get_one_notification_each() {
    let exact = FaultBackend::start(vec![empty_reply(204)]).await;
    let family = FaultBackend::start(vec![empty_reply(202)]).await;
    let any = FaultBackend::start(vec![empty_reply(204)]).await;
    let other = FaultBackend::start(vec![empty_reply(204)]).await;
    let (record, _) = observe(
        vec![
            observer("com.example.exact", &exact.url(), &["tool.after"]),
            observer("com.example.family", &family.url(), &["tool.*"]),
            observer("com.example.any", &any.url(), &["*"]),
            observer("com.example.other", &other.url(), &["session.*"]),
        ],
        &tool_after("evt_obs_1"),
        None,
    )
    .await;
    assert_eq!(
        record["observers"],
        json!([
            {"backend": "com.example.exact", "result": "delivered"},
            {"backend": "com.example.family", "result": "delivered"},
            {"backend": "com.example.any", "result": "delivered"},
        ])
    );
    for backend in [&exact, &family, &any] {
        let requests = backend.requests();
        assert_eq!(requests.len(), 1);
        let message = requests[0].json();
        assert_eq!(message["method"], "hooks/observe");
        assert!(message.get("id").is_none(), "a notification has no id");
        assert_eq!(message["params"]["protocolVersion"], "draft");
        assert_eq!(message["params"]["event"]["id"], "evt_obs_1");
    }
    assert_eq!(
        other.requests().len(),
        0,
        "session.* does not match tool.after"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_failures_are_recorded_and_bounded() {
    let with_body = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let hanging = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let (record, elapsed) = observe(
        vec![
            observer("com.example.body", &with_body.url(), &["tool.after"]),
            observer("com.example.hang", &hanging.url(), &["tool.after"]),
            observer(
                "com.example.gone",
                &ahp_tests::fault_backend::refused_url(),
                &["tool.after"],
            ),
        ],
        &tool_after("evt_obs_2"),
        Some(Duration::from_millis(300)),
    )
    .await;
    assert_eq!(
        record["observers"],
        json!([
            {"backend": "com.example.body", "result": "http-status"},
            {"backend": "com.example.hang", "result": "deadline-exceeded"},
            {"backend": "com.example.gone", "result": "connection-refused"},
        ])
    );
    assert!(
        elapsed < Duration::from_millis(300 + 200),
        "observers ran past the budget: {elapsed:?}"
    );
}

/// The error lines logged on this thread while the returned guard lives.
fn capture_errors() -> (impl Drop, Arc<Mutex<Vec<u8>>>) {
    use tracing_subscriber::util::SubscriberInitExt as _;
    struct Lines(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Arc::new(Mutex::new(Vec::new()));
    let writer = lines.clone();
    let guard = tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::ERROR)
        .with_ansi(false)
        .with_writer(move || Lines(writer.clone()))
        .finish()
        .set_default();
    (guard, lines)
}

/// An observe call whose budget runs out while it waits for an instance (the runaway
/// component's `hanging-load` mode makes one that never finishes) sends nothing, and,
/// as no audit record holds it, says so in the log at error, naming the event (digest
/// §15: observer delivery failures are recorded locally).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observe_out_of_budget_before_its_instance_logs_the_event_at_error() {
    let hang = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let options = Options {
        component: Some(ahp_tests::support::runaway_component()),
        ..Options::default()
    };
    let hooks = Interceptor::new(&format!("hanging-load {}", hang.url()), options)
        .await
        .expect("the runaway component loads its hanging-load mode");
    let (guard, logs) = capture_errors();
    let budget = Some(Duration::from_millis(200));
    let observed = hooks
        .observe(&tool_after("evt_obs_unserved"), budget)
        .await
        .expect("observed");
    drop(guard);
    assert!(
        observed.budget_expired && observed.observers.is_empty(),
        "{observed:?}"
    );
    let logs = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    let line = logs.lines().find(|line| line.contains("evt_obs_unserved"));
    let line = line.unwrap_or_else(|| panic!("no line names the event: {logs:?}"));
    assert!(line.contains("ERROR") && line.contains("budget"), "{line}");
}

/// With retries enabled, a transient observer failure is retried with the same bytes;
/// without, it is recorded as it happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_observer_failure_is_retried_with_the_same_bytes_when_enabled() {
    for (retries, result, sent) in [(0, "connection-reset", 1), (2, "delivered", 3)] {
        let script = vec![Behaviour::Reset, empty_reply(502), empty_reply(204)];
        let flaky = FaultBackend::start(script).await;
        let (record, _) = observe_with(
            retrying(retries),
            vec![observer("com.example.flaky", &flaky.url(), &["tool.after"])],
            &tool_after("evt_obs_retry"),
            None,
        )
        .await;
        assert_eq!(
            record["observers"],
            json!([{"backend": "com.example.flaky", "result": result}]),
            "retries {retries}"
        );
        let bodies: Vec<Vec<u8>> = flaky.requests().into_iter().map(|r| r.body).collect();
        assert_eq!(bodies.len(), sent, "retries {retries}");
        assert!(bodies.iter().all(|b| b == &bodies[0]), "the same bytes");
    }
}

/// H5/O5: a notification's success is a 202 or a 204 with no body. A 202 that carries
/// one (a JSON-RPC reply, as if to a request) is `http-status`, never `delivered`, and
/// not retried though retries are on; an empty 202 beside it is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_202_with_a_body_is_no_delivery() {
    let with_body = FaultBackend::start(vec![Behaviour::Reply {
        status: 202,
        content_type: Some("application/json".into()),
        body: br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec(),
    }])
    .await;
    let empty = FaultBackend::start(vec![empty_reply(202)]).await;
    let (record, _) = observe_with(
        retrying(2),
        vec![
            observer("com.example.body", &with_body.url(), &["tool.after"]),
            observer("com.example.empty", &empty.url(), &["tool.after"]),
        ],
        &tool_after("evt_obs_202_body"),
        None,
    )
    .await;
    assert_eq!(
        record["observers"],
        json!([
            {"backend": "com.example.body", "result": "http-status"},
            {"backend": "com.example.empty", "result": "delivered"},
        ])
    );
    assert_eq!(with_body.requests().len(), 1, "not retried");
}

/// The resend that answers a 401 is not one of the retries, as for an interceptor: with
/// one retry allowed, 401 → (the token again) 503 → 204 is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observers_resend_after_a_401_is_not_one_of_its_retries() {
    let name = "AHP_E2E_OBSERVER_401_RETRY";
    std::env::set_var(name, "tok-observer-401-3b7e");
    let script = vec![empty_reply(401), empty_reply(503), empty_reply(204)];
    let flaky = FaultBackend::start(script).await;
    let mut hook = observer("com.example.flaky", &flaky.url(), &["tool.after"]);
    hook["authentication"] = json!({"type": "bearer", "tokenRef": format!("env:{name}")});
    let (record, _) = observe_with(retrying(1), vec![hook], &tool_after("evt_obs_401"), None).await;
    assert_eq!(
        record["observers"],
        json!([{"backend": "com.example.flaky", "result": "delivered"}])
    );
    let bodies: Vec<Vec<u8>> = flaky.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 3);
    assert!(bodies.iter().all(|b| b == &bodies[0]), "the same bytes");
}

/// The decision is handed out before the call's owned observer deliveries run; completion
/// waits for them (each bounded) and only then writes the audit record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_observer_never_delays_the_decision() {
    let (_denier, _hanging, reg) = deny_then_hang().await;
    let audit = tempfile::NamedTempFile::new().unwrap();
    let options = Options {
        observer_timeout: Some(Duration::from_millis(2_000)),
        audit_path: Some(audit.path().to_path_buf()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg, options).await.unwrap();

    let started = Instant::now();
    let call = settle(&interceptor, "evt_obs_3", None).await;
    let decided_in = started.elapsed();
    assert_eq!(call.settlement().decision, Decision::Deny);
    assert_eq!(call.settlement().decided_by, DecidedBy::BackendDeny);
    // Well before the observer's 2 s bound, with room for a loaded machine.
    assert!(
        decided_in < Duration::from_millis(1_000),
        "the decision waited for observers: {decided_in:?}"
    );
    assert_eq!(
        std::fs::read_to_string(audit.path()).unwrap(),
        "",
        "audited before completion"
    );

    let settled = call.complete().await;
    let completed_in = started.elapsed();
    assert!(
        completed_in >= Duration::from_millis(2_000),
        "completion did not await the observer: {completed_in:?}"
    );
    assert!(
        completed_in < decided_in + Duration::from_millis(2_000 + 500),
        "observer ran past its bound: {completed_in:?}"
    );
    assert_eq!(
        settled.decision,
        Decision::Deny,
        "an observer never changes the decision"
    );
    assert_eq!(
        record_json(&settled)["observers"][0]["backend"],
        "com.example.hang"
    );
    assert_eq!(
        record_json(&settled)["observers"][0]["result"],
        "deadline-exceeded"
    );
    assert_eq!(
        audit_lines(audit.path()),
        vec![record_json(&settled)],
        "one audit record, with the observer result"
    );
}

/// A completion dropped while its observers are being delivered (a `timeout` around
/// `complete`) leaves the record with each observer `interrupted`, not without a result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_dropped_mid_delivery_records_its_observers_interrupted() {
    let (_denier, hanging, reg) = deny_then_hang().await;
    let audit = tempfile::NamedTempFile::new().unwrap();
    let options = Options {
        audit_path: Some(audit.path().to_path_buf()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg, options).await.unwrap();
    let call = settle(&interceptor, "evt_obs_dropped", None).await;
    // Dropped once its delivery has begun (boxed, so that dropping it drops it).
    let mut completing = Box::pin(call.complete());
    let begun = hanging.wait_for_requests(1, Duration::from_secs(5));
    tokio::select! {
        _ = &mut completing => panic!("the observer hangs"),
        sent = begun => assert!(sent, "the notification was sent"),
    }
    drop(completing);
    let lines = ahp_tests::support::audit_lines_once(audit.path(), 1).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    // The digest of the bytes the observer received.
    let sent = sha256_hex(&hanging.requests()[0].body);
    assert_eq!(
        lines[0]["observers"],
        json!([{"backend": "com.example.hang", "subscription": 0, "kind": "short-circuit",
                "requestSha256": sent, "result": "interrupted"}])
    );
}

/// A completion dropped mid-delivery records what each observer got: the one that
/// answered first is `delivered`, only the one still pending `interrupted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_dropped_mid_delivery_keeps_the_results_already_in() {
    let fast = FaultBackend::start(vec![empty_reply(204)]).await;
    let hanging = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let reg = json!({"protocolVersion": "draft", "hooks": [
        observer("com.example.fast", &fast.url(), &["tool.before"]),
        observer("com.example.hang", &hanging.url(), &["tool.before"])]});
    let audit = tempfile::NamedTempFile::new().unwrap();
    let options = Options {
        audit_path: Some(audit.path().to_path_buf()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg.to_string(), options).await.unwrap();
    let call = settle(&interceptor, "evt_obs_dropped_partly", None).await;
    // Dropped once the hanging observer was sent its notification and the fast one was
    // answered (boxed, so that dropping it drops it).
    let mut completing = Box::pin(call.complete());
    let begun = async {
        let hung = hanging.wait_for_requests(1, Duration::from_secs(5)).await;
        let answered = fast.wait_for_requests(1, Duration::from_secs(5)).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        hung && answered
    };
    tokio::select! {
        _ = &mut completing => panic!("one observer hangs"),
        sent = begun => assert!(sent, "both were sent their notifications"),
    }
    drop(completing);
    assert_eq!(
        fast.requests().len(),
        1,
        "the fast observer was sent its notification"
    );
    let lines = ahp_tests::support::audit_lines_once(audit.path(), 1).await;
    assert_eq!(
        results(&lines[0]),
        [&json!("delivered"), &json!("interrupted")],
        "{lines:?}"
    );
}

/// Interruption cancels the call's owned observer deliveries: before completion none is
/// started, during it the pending ones end at once. The decision stays as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interruption_cancels_owned_observer_deliveries_and_starts_none() {
    let (_denier, hanging, reg) = deny_then_hang().await;
    let hooks = interceptor(&reg).await;

    let before = Interrupt::new();
    let call = hooks
        .settle(&event("evt_obs_cut_1"), &[EffectKind::Deny], None, &before)
        .await
        .unwrap();
    before.interrupt();
    let settled = call.complete().await;
    assert_eq!(settled.decided_by, DecidedBy::BackendDeny);
    assert_eq!(record_json(&settled)["observers"][0]["result"], "not-sent");
    assert_nothing_sent(&hanging).await;

    let during = Interrupt::new();
    let call = hooks
        .settle(&event("evt_obs_cut_2"), &[EffectKind::Deny], None, &during)
        .await
        .unwrap();
    let completing = call.complete();
    tokio::pin!(completing);
    // Interrupted once the delivery is under way.
    tokio::select! {
        _ = &mut completing => panic!("the observer hangs"),
        sent = hanging.wait_for_requests(1, Duration::from_secs(5)) => assert!(sent),
    }
    during.interrupt();
    let started = Instant::now();
    let settled = completing.await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "the default 2 s bound ran: {took:?}"
    );
    assert_eq!(settled.decided_by, DecidedBy::BackendDeny);
    assert_eq!(
        record_json(&settled)["observers"][0]["result"],
        "interrupted"
    );
    // Ended, not sent again nor retried once interrupted.
    assert!(
        !hanging
            .wait_for_requests(2, Duration::from_millis(200))
            .await
    );
    assert_eq!(hanging.requests().len(), 1);
}

/// An interceptor on tool.before, and three observe subscriptions on the same event: one
/// that hangs, one nobody listens for, one answering 500.
async fn owned_observers() -> (Vec<FaultBackend>, String) {
    let healthy = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let hanging = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let failing = FaultBackend::start(vec![empty_reply(500)]).await;
    let mut reg = with_a_hanging_observer(&healthy, &hanging);
    let hooks = reg["hooks"].as_array_mut().unwrap();
    hooks.push(observer(
        "com.example.refused",
        &ahp_tests::fault_backend::refused_url(),
        &["tool.*"],
    ));
    hooks.push(observer("com.example.failing", &failing.url(), &["*"]));
    (vec![healthy, hanging, failing], reg.to_string())
}

/// An interceptor on tool.before at `policy`, and an observe subscription on the same
/// event at `hanging`.
fn with_a_hanging_observer(policy: &FaultBackend, hanging: &FaultBackend) -> Value {
    let interceptor = Http::new("com.example.policy", policy.url());
    let mut reg: Value = serde_json::from_str(&registration(&[interceptor])).unwrap();
    let hooks = reg["hooks"].as_array_mut().unwrap();
    hooks.push(observer(
        "com.example.hang",
        &hanging.url(),
        &["tool.before"],
    ));
    reg
}

/// The hook call `id` on `reg`, settled and its owned observers not yet sent, with
/// `observer_timeout`.
async fn owned_call(reg: &str, observer_timeout: Duration, id: &str) -> HookCall {
    let options = Options {
        observer_timeout: Some(observer_timeout),
        ..Options::default()
    };
    let interceptor = Interceptor::new(reg, options).await.unwrap();
    settle(&interceptor, id, None).await
}

/// Through `intercept`, which hands the decision out only once the owned observers
/// ended (the CLI's and `ahp hook`'s way), every observer failing still leaves the allow
/// as it was: in the settlement and in its audit line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_owned_observers_leave_an_allow_through_intercept() {
    let (backends, reg) = owned_observers().await;
    let audit = tempfile::NamedTempFile::new().unwrap();
    let options = Options {
        observer_timeout: Some(Duration::from_millis(300)),
        audit_path: Some(audit.path().to_path_buf()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg, options).await.unwrap();
    let settled = interceptor
        .intercept(&event("evt_owned_intercept"), &[EffectKind::Deny], None)
        .await
        .unwrap();
    let lines = audit_lines_once(audit.path(), 1).await;
    for (what, record) in [("settlement", &record_json(&settled)), ("audit", &lines[0])] {
        assert_eq!(
            (&record["decision"], &record["decidedBy"]),
            (&json!("allow"), &json!("no-objection")),
            "{what}: {record}"
        );
        assert_eq!(
            results(record),
            ["deadline-exceeded", "connection-refused", "http-status"],
            "{what}: every observer failed"
        );
    }
    assert_eq!(
        backends[2].requests().len(),
        1,
        "the failing observer was asked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_of_the_calls_own_event_are_owned_by_the_hook_call() {
    let (backends, reg) = owned_observers().await;
    let call = owned_call(&reg, Duration::from_millis(300), "evt_owned_1").await;
    assert_eq!(call.settlement().decision, Decision::Allow);
    for observer in &backends[1..] {
        assert_eq!(
            observer.requests().len(),
            0,
            "the decision is handed out first"
        );
    }
    let settled = call.complete().await;
    let record = record_json(&settled);
    let observers: Vec<(Value, Value, Value)> = record["observers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["backend"].clone(), o["kind"].clone(), o["result"].clone()))
        .collect();
    assert_eq!(
        observers,
        [
            (
                json!("com.example.hang"),
                json!("owned"),
                json!("deadline-exceeded")
            ),
            (
                json!("com.example.refused"),
                json!("owned"),
                json!("connection-refused")
            ),
            (
                json!("com.example.failing"),
                json!("owned"),
                json!("http-status")
            ),
        ]
    );
    assert_eq!(
        settled.decision,
        Decision::Allow,
        "observers never change the decision"
    );
    let notification = backends[2].requests()[0].json();
    assert_eq!(notification["method"], "hooks/observe");
    assert_eq!(notification["params"]["event"]["id"], "evt_owned_1");
}

/// An observer timeout of `Duration::MAX` ("no bound of my own") leaves each delivery to
/// the component's bound (the registration's timeout), where adding it to now once
/// panicked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_timeout_past_the_end_of_time_leaves_the_components_bound() {
    let (_backends, reg) = owned_observers().await;
    let call = owned_call(&reg, Duration::MAX, "evt_owned_max").await;
    let record = record_json(&call.complete().await);
    assert_eq!(
        results(&record),
        [
            &json!("deadline-exceeded"),
            &json!("connection-refused"),
            &json!("http-status")
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interruption_cancels_the_owned_observers() {
    let (backends, reg) = owned_observers().await;
    let interceptor = Interceptor::new(&reg, Options::default()).await.unwrap();
    let interrupt = Interrupt::new();
    let call = interceptor
        .settle(&event("evt_owned_2"), &[EffectKind::Deny], None, &interrupt)
        .await
        .unwrap();
    interrupt.interrupt();
    let settled = call.complete().await;
    let record = record_json(&settled);
    for entry in record["observers"].as_array().unwrap() {
        assert_eq!(entry["kind"], "owned", "{record}");
        assert_eq!(entry["result"], "not-sent", "{record}");
    }
    assert_eq!(record["observers"].as_array().unwrap().len(), 3);
    for observer in &backends[1..] {
        assert_eq!(observer.requests().len(), 0);
    }
}

/// `intercept_with` hands the decision out only once the owned observers are done and
/// its record written: an interruption or a shutdown while they run overrides an allow
/// (interruption overrides an accepted approval; shutdown is never permission), as
/// `ahp intercept` on a signal then, and so does dropping the call's future: the record
/// is the denial, with nothing of the allow (its message) to enforce. `settle`'s
/// decision, handed out before, stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_the_observers_run_overrides_an_unanswered_allow() {
    let message = json!([{"type": "message", "text": "allowed, with a note"}]);
    for stop in ["interrupt", "shutdown", "drop"] {
        let allowing = FaultBackend::start(vec![Behaviour::Effects(message.clone())]).await;
        let hanging = FaultBackend::start(vec![Behaviour::Blackhole]).await;
        let reg = with_a_hanging_observer(&allowing, &hanging);
        let audit = tempfile::NamedTempFile::new().unwrap();
        let options = Options {
            audit_path: Some(audit.path().to_path_buf()),
            ..Options::default()
        };
        let interceptor = Interceptor::new(&reg.to_string(), options).await.unwrap();
        let interrupt = Interrupt::new();
        let call = event(&format!("evt_owned_{stop}"));
        // As declared: `message` offered.
        // Boxed, so that dropping it drops the call.
        let mut deciding = Box::pin(interceptor.intercept_with(&call, &[], None, &interrupt));
        tokio::select! {
            _ = &mut deciding => panic!("{stop}: the observer hangs"),
            sent = hanging.wait_for_requests(1, Duration::from_secs(5)) => assert!(sent),
        }
        let expected = match stop {
            "interrupt" => {
                interrupt.interrupt();
                DecidedBy::Interrupted
            }
            "shutdown" => {
                interceptor.shutdown();
                DecidedBy::Shutdown
            }
            _ => DecidedBy::Interrupted,
        };
        let record = match stop {
            "drop" => {
                drop(deciding);
                let lines = audit_lines_once(audit.path(), 1).await;
                assert_eq!(lines.len(), 1, "{stop}: {lines:?}");
                lines[0].clone()
            }
            _ => {
                let settled = deciding.await.expect("settled");
                assert_eq!(settled.decision, Decision::Deny, "{stop}");
                assert_eq!(settled.decided_by, expected, "{stop}");
                let record = record_json(&settled);
                let lines = audit_lines_once(audit.path(), 1).await;
                assert_eq!(lines, std::slice::from_ref(&record), "{stop}");
                record
            }
        };
        assert_eq!(record["decision"], "deny", "{stop}: {record}");
        assert_eq!(record["decidedBy"], expected.as_str(), "{stop}: {record}");
        assert_eq!(
            record["interceptors"][0]["effects"],
            json!(["message"]),
            "{stop}: {record}"
        );
        assert!(record.get("messages").is_none(), "{stop}: {record}");
    }
}

/// An owned observer whose deadline passed before the call completed is sent nothing,
/// even over a persistent stdio backend, already running, whose pipe would take the line
/// at once: it is `deadline-exceeded`, and the backend sees only the first call's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_completed_after_its_deadline_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("observer.log");
    let policy = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let mut reg: Value = serde_json::from_str(&registration(&[Http::new(
        "com.example.policy",
        policy.url(),
    )]))
    .unwrap();
    reg["hooks"].as_array_mut().unwrap().push(json!({
        "id": "com.example.late",
        "transport": {"type": "stdio", "command": env!("CARGO_BIN_EXE_stdio_backend"),
                      "args": ["no-effect", log.to_str().unwrap()], "lifecycle": "persistent"},
        "subscriptions": [{"events": ["tool.before"], "mode": "observe",
                           "content": {"default": "metadata"}}]
    }));
    let hooks = Interceptor::new(&reg.to_string(), Options::default())
        .await
        .unwrap();
    let settle = |id: &'static str| {
        let hooks = hooks.clone();
        async move { ahp_tests::support::settle(&hooks, id, None).await }
    };
    let on_time = record_json(&settle("evt_on_time").await.complete().await);
    assert_eq!(on_time["observers"][0]["result"], "delivered", "{on_time}");
    let late = settle("evt_late_obs").await;
    assert_eq!(late.settlement().decision, Decision::Allow);
    // Past the observer's 2 s deadline, counted from the settlement.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let record = record_json(&late.complete().await);
    assert_eq!(
        record["observers"][0]["result"], "deadline-exceeded",
        "{record}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let received = logged
        .lines()
        .filter(|l| *l == "recv hooks/observe")
        .count();
    assert_eq!(received, 1, "the backend was sent {logged:?}");
    hooks.shutdown_async().await;
}

/// Conformance O10 through the real component and host: a fail-open interceptor that
/// fails (HTTP 500) is reported as `hook.failure` to another backend observing it, owned
/// by the hook call like the call's own observers; the failing backend, which observes
/// `hook.failure` too, is never sent its own failure. The decision stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_failure_is_reported_to_the_other_hook_failure_observers() {
    let failing = FaultBackend::start(vec![empty_reply(500)]).await;
    let reporter = FaultBackend::start(vec![empty_reply(202)]).await;
    let mut reg: Value = serde_json::from_str(&registration(&[Http::new(
        "com.example.failing",
        failing.url(),
    )
    .policy("fail-open")]))
    .unwrap();
    let hooks = reg["hooks"].as_array_mut().unwrap();
    hooks[0]["subscriptions"].as_array_mut().unwrap().push(
        json!({"events": ["hook.failure"], "mode": "observe", "content": {"default": "metadata"}}),
    );
    hooks.push(observer(
        "com.example.reporter",
        &reporter.url(),
        &["hook.failure"],
    ));
    let interceptor = Interceptor::new(&reg.to_string(), Options::default())
        .await
        .unwrap();
    let settled = settle(&interceptor, "evt_failed", None)
        .await
        .complete()
        .await;
    assert_eq!(settled.decision, Decision::Allow, "fail-open");
    let record = record_json(&settled);
    assert_eq!(record["interceptors"][0]["outcome"], "failed-open");
    let notifications = reporter.requests();
    assert_eq!(notifications.len(), 1);
    assert_eq!(
        record["observers"],
        json!([{"backend": "com.example.reporter", "subscription": 0,
                "kind": "hook-failure", "reports": 0,
                "requestSha256": sha256_hex(&notifications[0].body),
                "result": "delivered"}])
    );
    let methods: Vec<Value> = failing
        .requests()
        .iter()
        .map(|r| r.json()["method"].clone())
        .collect();
    assert_eq!(methods, [json!("hooks/intercept")], "never its own failure");
    let notification = notifications[0].json();
    assert_eq!(notification["method"], "hooks/observe");
    let reported = &notification["params"]["event"];
    assert_eq!(reported["type"], "hook.failure");
    assert_eq!(reported["id"], "evt_failed/hook.failure/0");
    assert_eq!(reported["parentEventId"], "evt_failed");
    assert_eq!(reported["session"]["id"], "sess_e2e");
    assert_eq!(
        reported["failure"],
        json!({"backendId": "com.example.failing", "reason": "http-status",
               "policy": "fail-open"})
    );
    assert!(
        reported["time"]
            .as_str()
            .is_some_and(|t| t.starts_with("2026-11-30T12:00:") && t.ends_with('Z')),
        "the parent's time plus the call's: {reported}"
    );
}

/// Observers never change a decision, not even by what their notifications take up in
/// the component: sixty observers of a 4 MiB event (each notification holds the event)
/// would need 240 MiB and more of the instance's 256 MiB. The notifications beyond the
/// component's observer limit (64 MiB) are recorded `withheld`, with no digest, and not
/// sent; the others are delivered, and the backend's allow stands. (The interceptor's
/// timeout is long: this is about memory, and a debug build hashes slowly.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_of_a_large_event_beyond_the_observer_limit_are_withheld_not_a_denial() {
    let policy = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let watcher = FaultBackend::start(vec![empty_reply(204)]).await;
    let slow = Http::new("com.example.policy", policy.url()).timeout_ms(10_000);
    let mut reg: Value = serde_json::from_str(&registration(&[slow])).unwrap();
    let hooks = reg["hooks"].as_array_mut().unwrap();
    for n in 0..60 {
        let id = format!("com.example.watch{n}");
        hooks.push(observer(
            &id,
            &watcher.url(),
            &["tool.before", "tool.after"],
        ));
    }
    let interceptor = interceptor(&reg.to_string()).await;
    let large = large_event("evt_large");
    // 4 MiB and the envelope: fifteen fit in 64 MiB.
    let mut expected = vec!["delivered"; 15];
    expected.extend(["withheld"; 45]);
    let results = |observers: &Value| -> Vec<String> {
        let observers = observers.as_array().expect("observers");
        let result = |o: &Value| o["result"].as_str().expect("a result").to_string();
        observers.iter().map(result).collect()
    };

    let record = allowed(&interceptor, &large).await;
    assert_eq!(results(&record["observers"]), expected);
    assert_eq!(watcher.requests().len(), 15);

    // The same for an observe call of its own, of the call's tool.after as large (the
    // tool.before is for intercept).
    let mut after: Value = serde_json::from_str(&tool_after("evt_large_after")).unwrap();
    after["tool"]["input"]["command"] = json!("x".repeat(4 << 20));
    let observed = interceptor
        .observe(&after.to_string(), None)
        .await
        .expect("valid event");
    let report = serde_json::to_value(&observed).unwrap();
    assert_eq!(results(&report["observers"]), expected);
    assert_eq!(watcher.requests().len(), 30);
}

/// A `tool.before` event `id` whose command is 4 MiB long.
fn large_event(id: &str) -> String {
    let mut large: Value = serde_json::from_str(&event(id)).unwrap();
    large["tool"]["input"]["command"] = json!("x".repeat(4 << 20));
    large.to_string()
}

/// The record of `event` intercepted, once its allow is checked to stand.
async fn allowed(interceptor: &Interceptor, event: &str) -> Value {
    let settled = interceptor
        .intercept(event, &[EffectKind::Deny], None)
        .await
        .expect("the call settles");
    assert_eq!(
        (settled.decision, settled.decided_by),
        (Decision::Allow, DecidedBy::NoObjection)
    );
    record_json(&settled)
}

/// Observers never turn an allow into a denial by the time they take: sixty observers,
/// each seeing a 4 MiB event its own way, and no interceptor, so the call's bound is only
/// the time to prepare them. Encoding every view took the call past its bound, and the
/// allow became an `engine-failure` denial (it still does without the time limit); now
/// views not begun 250 ms after the decision, or past the 64 MiB limit, are withheld,
/// with no digest, and nothing is sent for them. (The views differ in name only, the
/// event having no content parts: how many the time limit keeps out depends on the
/// machine, and the guest's `views_not_begun_in_time_to_prepare_are_withheld` pins it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_of_a_large_event_in_many_views_are_withheld_in_time_not_a_denial() {
    let watcher = FaultBackend::start(vec![empty_reply(204)]).await;
    let hooks: Vec<Value> = (0..60)
        .map(|n| {
            let mut hook = observer(&format!("com.example.watch{n}"), &watcher.url(), &["*"]);
            // A category of its own: a view of its own.
            hook["subscriptions"][0]["content"][format!("category{n}")] = json!("omit");
            hook
        })
        .collect();
    let reg = json!({"protocolVersion": "draft", "hooks": hooks}).to_string();
    let interceptor = interceptor(&reg).await;
    let large = large_event("evt_views");
    // The results: some delivered (at most the fifteen that fit in 64 MiB), then the rest
    // withheld. Returns how many were delivered.
    let delivered_then_withheld = |observers: &Value| -> usize {
        let observers = observers.as_array().expect("observers");
        assert_eq!(observers.len(), 60);
        let delivered = observers
            .iter()
            .take_while(|o| o["result"] == "delivered")
            .count();
        assert!((1..=15).contains(&delivered), "{delivered} delivered");
        let withheld = observers.iter().filter(|o| o["result"] == "withheld");
        assert_eq!(withheld.count(), 60 - delivered);
        delivered
    };

    let record = allowed(&interceptor, &large).await;
    let sent = delivered_then_withheld(&record["observers"]);
    assert_eq!(watcher.requests().len(), sent);
    let digests = record["observers"].as_array().unwrap().iter();
    let digests = digests.filter(|o| o.get("requestSha256").is_some());
    assert_eq!(digests.count(), sent, "only what was sent was hashed");

    // The same for an observe call of its own.
    let observed = interceptor
        .observe(&large, None)
        .await
        .expect("valid event");
    let report = serde_json::to_value(&observed).unwrap();
    assert!(report.get("engineFailure").is_none(), "{report}");
    let observed = delivered_then_withheld(&report["observers"]);
    assert_eq!(watcher.requests().len(), sent + observed);
}
