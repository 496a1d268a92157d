//! The intercept chain, driven through the public API against a scripted fake host and a
//! fake clock (DESIGN.md §3–§4, failure-semantics.md, ahp-digest §7–§8).
//!
//! No sockets, no wall clock, no threads: `now()` is a virtual nanosecond counter, and
//! every scripted exchange says what it returns and how much virtual time it takes. A
//! hanging backend behaves like the real host: the clock stops exactly at the deadline
//! and the exchange returns `DeadlineExceeded(AwaitResponse)`. Every call the fake gets is
//! recorded, so tests can assert what was and was not sent.

use ahp_interceptor::effect::EffectKind;
use ahp_interceptor::engine::Engine;
use ahp_interceptor::event::Event;
use ahp_interceptor::host_api::{
    AuthError, DeliveryError, Host, Instant, IoPhase, Reply, NANOS_PER_MS,
};
use ahp_interceptor::settlement::{ObserverDelivery, Settlement};
use ahp_interceptor::vocab::{
    DecidedBy, Decision, EventCapability, FlowCapability, FlowOperation, InterceptableEvent,
    ModifyCapability, ModifyTarget, ObserverKind, Outcome,
};
use ahp_interceptor::wire::Message;
use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};

/// The generic reasons, spelled out here so a change to them is a visible test change.
const SYNTHETIC_REASON: &str = "Required policy backend unavailable.";
const INTERRUPTED_REASON: &str = "Policy evaluation was interrupted.";
const BUDGET_REASON: &str = "Policy evaluation did not finish within the hook call budget.";

// ---------------------------------------------------------------------------------------
// Fake clock and scripted host
// ---------------------------------------------------------------------------------------

/// Where the virtual clock starts: deliberately not zero, so "deadline = timeout" bugs show.
const T0: Instant = 7_000 * NANOS_PER_MS;

const fn ms(n: u64) -> u64 {
    n * NANOS_PER_MS
}

/// The fake's credential handle: which backend, and which acquisition produced it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cred {
    backend: String,
    generation: u32,
}

/// One scripted exchange: what it returns, how long it takes, what happens meanwhile.
#[derive(Clone, Debug)]
struct Step {
    result: Result<Reply, DeliveryError>,
    takes_ms: u64,
    hangs: bool,
    interrupts: bool,
    /// Virtual time that passes right after the component's first clock reading once this
    /// exchange returned: its own work between that reading and the next.
    lag_ms: u64,
}

impl Step {
    fn reply(reply: Reply) -> Step {
        Step {
            result: Ok(reply),
            takes_ms: 1,
            hangs: false,
            interrupts: false,
            lag_ms: 0,
        }
    }

    fn fail(error: DeliveryError) -> Step {
        Step {
            result: Err(error),
            takes_ms: 1,
            hangs: false,
            interrupts: false,
            lag_ms: 0,
        }
    }

    /// The backend never answers: the host gives up exactly at the deadline.
    fn hang() -> Step {
        Step::hang_in(IoPhase::AwaitResponse)
    }

    fn hang_in(phase: IoPhase) -> Step {
        Step {
            hangs: true,
            ..Step::fail(DeliveryError::DeadlineExceeded(phase))
        }
    }

    fn taking(mut self, ms: u64) -> Step {
        self.takes_ms = ms;
        self
    }

    /// `ms` pass between the component's reading of the clock that ends this exchange and
    /// its next one: the window in which a deadline can run out before the next attempt.
    fn then_lag(mut self, ms: u64) -> Step {
        self.lag_ms = ms;
        self
    }

    /// The embedding harness interrupts the call while this exchange completes.
    fn then_interrupt(mut self) -> Step {
        self.interrupts = true;
        self
    }
}

/// What a backend's credential acquisition does.
#[derive(Clone, Copy, Debug)]
enum AuthScript {
    /// Every acquisition yields a fresh credential (generation 1, 2, …).
    Token,
    Fails(AuthError),
    /// No credential at first (no binding); once asked again, after the backend's 401,
    /// as the host's discovery went: a fresh credential, or this error.
    OnChallenge(Option<AuthError>),
    /// A credential at first; none once asked again (the binding gone meanwhile).
    Vanishes,
    /// As the host's cache: the same credential at every acquisition until it is
    /// rejected, then a fresh one.
    Cached,
}

/// One recorded `exchange` call.
#[derive(Clone, Debug)]
struct Sent {
    backend: String,
    message: Vec<u8>,
    credential: Option<Cred>,
    deadline: Instant,
}

impl Sent {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.message).expect("requests are JSON")
    }
}

#[derive(Debug)]
struct FakeHost {
    /// A cell: the component reads the clock through `&self`, and a reading may let time
    /// pass after it (`lag`).
    now: Cell<Instant>,
    /// Added to the clock right after its next reading (see [`Step::then_lag`]).
    lag: Cell<u64>,
    /// Added to the clock right after every reading: the component's own work between
    /// one reading and the next (see [`FakeHost::ticking`]).
    tick: u64,
    interrupted: bool,
    /// When the harness interrupts the call, if it does while the call runs.
    interrupted_at: Option<Instant>,
    acquire_takes_ms: u64,
    auth: HashMap<String, AuthScript>,
    generations: HashMap<String, u32>,
    script: HashMap<String, VecDeque<Step>>,
    acquired: Vec<(String, Instant)>,
    rejected: Vec<Cred>,
    sent: Vec<Sent>,
    /// Retries the host's configuration allows per exchange, and the backoff of each.
    retries: u32,
    backoff_ms: u64,
    /// Virtual time a backoff runs past what was asked (a timer's overshoot).
    overshoot_ms: u64,
    retry_asks: Vec<(String, u32, Instant)>,
    /// How many bytes the component had hashed (every message it prepared).
    hashed: Cell<usize>,
    /// Virtual time each hashing takes: preparing a message takes time.
    hash_takes_ms: u64,
}

impl FakeHost {
    fn new() -> FakeHost {
        FakeHost {
            now: Cell::new(T0),
            lag: Cell::new(0),
            tick: 0,
            interrupted: false,
            interrupted_at: None,
            acquire_takes_ms: 0,
            auth: HashMap::new(),
            generations: HashMap::new(),
            script: HashMap::new(),
            acquired: Vec::new(),
            rejected: Vec::new(),
            sent: Vec::new(),
            retries: 0,
            backoff_ms: 0,
            overshoot_ms: 0,
            retry_asks: Vec::new(),
            hashed: Cell::new(0),
            hash_takes_ms: 0,
        }
    }

    /// Allows `retries` retries per exchange, each after `backoff_ms` of virtual time.
    fn retries(mut self, retries: u32, backoff_ms: u64) -> FakeHost {
        self.retries = retries;
        self.backoff_ms = backoff_ms;
        self
    }

    /// `ms_each` of virtual time pass after every clock reading: work between readings
    /// takes time, so a component that reads the clock as it works sees a deadline pass.
    fn ticking(mut self, ms_each: u64) -> FakeHost {
        self.tick = ms(ms_each);
        self
    }

    /// Scripts the next exchange with `backend`.
    fn on(mut self, backend: &str, step: Step) -> FakeHost {
        self.script
            .entry(backend.into())
            .or_default()
            .push_back(step);
        self
    }

    fn auth(mut self, backend: &str, script: AuthScript) -> FakeHost {
        self.auth.insert(backend.into(), script);
        self
    }

    fn interrupted_already(mut self) -> FakeHost {
        self.interrupted = true;
        self
    }

    /// Virtual time passes.
    fn pass(&self, duration: u64) {
        self.now.set(self.now.get() + duration);
    }

    fn sent_to(&self, backend: &str) -> Vec<&Sent> {
        self.sent.iter().filter(|s| s.backend == backend).collect()
    }
}

impl Host for FakeHost {
    type Credential = Cred;

    fn now(&self) -> Instant {
        let now = self.now.get();
        self.now.set(now + self.lag.take() + self.tick);
        now
    }

    fn acquire(&mut self, backend: &str, deadline: Instant) -> Result<Option<Cred>, AuthError> {
        self.acquired.push((backend.into(), deadline));
        self.pass(ms(self.acquire_takes_ms));
        let asked_before = self.acquired.iter().filter(|(b, _)| b == backend).count() > 1;
        match self.auth.get(backend) {
            None => Ok(None),
            Some(AuthScript::Fails(e)) => Err(*e),
            Some(AuthScript::OnChallenge(_)) if !asked_before => Ok(None),
            Some(AuthScript::OnChallenge(Some(e))) => Err(*e),
            Some(AuthScript::Vanishes) if asked_before => Ok(None),
            Some(AuthScript::Cached) => {
                let generation = self.generations.entry(backend.into()).or_insert(1);
                let cached = Cred {
                    backend: backend.into(),
                    generation: *generation,
                };
                if self.rejected.contains(&cached) {
                    *generation += 1;
                }
                Ok(Some(Cred {
                    backend: backend.into(),
                    generation: *generation,
                }))
            }
            Some(AuthScript::Token | AuthScript::OnChallenge(None) | AuthScript::Vanishes) => {
                let generation = self.generations.entry(backend.into()).or_default();
                *generation += 1;
                Ok(Some(Cred {
                    backend: backend.into(),
                    generation: *generation,
                }))
            }
        }
    }

    fn reject(&mut self, credential: &Cred) {
        self.rejected.push(credential.clone());
    }

    fn exchange(
        &mut self,
        backend: &str,
        message: &[u8],
        credential: Option<&Cred>,
        deadline: Instant,
    ) -> Result<Reply, DeliveryError> {
        self.sent.push(Sent {
            backend: backend.into(),
            message: message.to_vec(),
            credential: credential.cloned(),
            deadline,
        });
        let step = self
            .script
            .get_mut(backend)
            .and_then(VecDeque::pop_front)
            .unwrap_or_else(|| panic!("unscripted exchange with {backend}"));
        if step.hangs {
            self.now.set(self.now.get().max(deadline));
        } else {
            self.pass(ms(step.takes_ms));
        }
        self.lag.set(ms(step.lag_ms));
        self.interrupted |= step.interrupts;
        step.result
    }

    fn interrupted(&self) -> bool {
        self.interrupted || self.interrupted_at.is_some_and(|at| self.now.get() >= at)
    }

    fn retry_after(&mut self, backend: &str, attempt: u32, deadline: Instant) -> bool {
        self.retry_asks.push((backend.into(), attempt, deadline));
        if self.interrupted
            || attempt > self.retries
            || self.now.get() + ms(self.backoff_ms) >= deadline
        {
            return false;
        }
        self.pass(ms(self.backoff_ms + self.overshoot_ms));
        true
    }

    fn sha256(&self, bytes: &[u8]) -> String {
        use sha2::Digest;
        self.hashed.set(self.hashed.get() + bytes.len());
        self.pass(ms(self.hash_takes_ms));
        format!("{:x}", sha2::Sha256::digest(bytes))
    }
}

/// The system allocator, counting the bytes each thread asks of it: what a call costs in
/// copies shows in what its thread allocates, with no wall clock.
struct Counting;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

/// Bytes this thread has allocated so far.
fn allocated() -> usize {
    ALLOCATED.with(Cell::get)
}

fn count(bytes: usize) {
    let _ = ALLOCATED.try_with(|total| total.set(total.get() + bytes));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

// ---------------------------------------------------------------------------------------
// Registrations, events, replies
// ---------------------------------------------------------------------------------------

const A: &str = "com.example.a";
const B: &str = "com.example.b";
const C: &str = "com.example.c";
const EVENT_ID: &str = "evt_1";
const SECRET: &str = "SECRET-BACKEND-TEXT";
/// What the harness can enforce, unless a test says otherwise.
const EFFECTS: &[&str] = &["deny", "allow"];

fn intercept_sub(events: &[&str], policy: &str, timeout_ms: u64) -> Value {
    json!({"events": events, "mode": "intercept", "timeoutMs": timeout_ms,
           "failurePolicy": policy, "content": {"default": "body"}})
}

fn observe_sub(events: &[&str]) -> Value {
    json!({"events": events, "mode": "observe", "content": {"default": "body"}})
}

fn backend(id: &str, subscriptions: Vec<Value>) -> Value {
    json!({"id": id, "transport": {"type": "http", "url": format!("https://{id}/ahp")},
           "subscriptions": subscriptions})
}

/// A backend with one `tool.before` intercept subscription.
fn interceptor(id: &str, policy: &str, timeout_ms: u64) -> Value {
    backend(
        id,
        vec![intercept_sub(&["tool.before"], policy, timeout_ms)],
    )
}

fn load(hooks: Vec<Value>) -> Engine {
    let document = json!({"protocolVersion": "draft", "hooks": hooks});
    Engine::load(&document.to_string()).expect("valid registration")
}

fn event_with_id(id: &str) -> String {
    json!({"id": id, "source": "urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d",
           "type": "tool.before", "time": "2026-08-24T08:51:14Z", "session": {"id": "sess_1"},
           "tool": {"name": "Bash", "input": {"command": "rm -rf build"}, "origin": "native"},
           "call": {"id": "call_1"}, "path": "native", "native": {"raw": "NATIVE-PAYLOAD"}})
    .to_string()
}

fn event() -> String {
    event_with_id(EVENT_ID)
}

/// Runs one intercept call and checks what every call must satisfy: each request sent is
/// a `hooks/intercept` whose JSON-RPC id is the event id, speaking `draft`, advertising
/// exactly `effects`; and interception that did not finish is never `allow`.
fn intercept_with(
    engine: &Engine,
    host: &mut FakeHost,
    event: &str,
    effects: &[&str],
    budget: Option<Instant>,
) -> Settlement {
    let kinds: Vec<EffectKind> = effects
        .iter()
        .map(|e| EffectKind::parse(e).expect("an effect word"))
        .collect();
    let settlement = engine
        .intercept(host, event, &kinds, budget)
        .expect("valid call");
    let event_id = serde_json::from_str::<Value>(event).expect("event is JSON")["id"].clone();
    for sent in &host.sent {
        let request = sent.json();
        assert_eq!(request["jsonrpc"], "2.0");
        assert_eq!(request["method"], "hooks/intercept");
        assert_eq!(request["id"], event_id, "JSON-RPC id must be the event id");
        assert_eq!(request["params"]["event"]["id"], event_id);
        assert_eq!(request["params"]["protocolVersion"], "draft");
        assert_eq!(request["params"]["capabilities"]["effects"], json!(effects));
    }
    let unfinished = settlement
        .interceptors
        .iter()
        .any(|r| matches!(r.outcome, Outcome::Interrupted | Outcome::BudgetExpired));
    if unfinished {
        assert_eq!(
            settlement.decision,
            Decision::Deny,
            "unfinished interception is never permission"
        );
    }
    settlement
}

fn run(engine: &Engine, host: &mut FakeHost) -> Settlement {
    intercept_with(engine, host, &event(), EFFECTS, None)
}

fn run_with_budget(engine: &Engine, host: &mut FakeHost, budget: Instant) -> Settlement {
    intercept_with(engine, host, &event(), EFFECTS, Some(budget))
}

fn http(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
    Reply {
        status: Some(status),
        content_type: Some(content_type.into()),
        body: body.into(),
    }
}

fn json_reply(body: Value) -> Reply {
    http(200, "application/json", body.to_string())
}

fn result(result: Value) -> Reply {
    json_reply(json!({"jsonrpc": "2.0", "id": EVENT_ID, "result": result}))
}

fn effects(effects: Value) -> Reply {
    result(json!({"protocolVersion": "draft", "effects": effects}))
}

fn no_effect() -> Reply {
    effects(json!([]))
}

fn deny(reason: &str) -> Reply {
    effects(json!([{"type": "deny", "reason": reason}]))
}

fn rpc_error(code: i64) -> Reply {
    json_reply(json!({"jsonrpc": "2.0", "id": EVENT_ID,
                      "error": {"code": code, "message": SECRET, "data": {"trace": SECRET}}}))
}

/// Who each prepared observe notification goes to, and why, in order.
fn observer_kinds(settlement: &Settlement) -> Vec<(&str, ObserverKind)> {
    settlement
        .observers
        .iter()
        .map(|o| (o.backend.as_str(), o.kind))
        .collect()
}

/// The audit entry of the `i`-th interceptor.
fn audited(settlement: &Settlement, i: usize) -> Value {
    audit(settlement)["interceptors"][i].clone()
}

fn failure_class(settlement: &Settlement, i: usize) -> Value {
    audited(settlement, i)["failure"]["class"].clone()
}

fn outcomes(settlement: &Settlement) -> Vec<Outcome> {
    settlement.interceptors.iter().map(|r| r.outcome).collect()
}

fn assert_synthetic_deny(settlement: &Settlement) {
    assert_eq!(settlement.decision, Decision::Deny);
    assert_eq!(settlement.decided_by, DecidedBy::SyntheticDeny);
    assert_eq!(settlement.reason.as_deref(), Some(SYNTHETIC_REASON));
    let audit = audit(settlement);
    assert_eq!(audit["decision"], "deny");
    assert_eq!(audit["decidedBy"], "synthetic-deny");
    assert_eq!(audit["reason"], "Required policy backend unavailable.");
}

/// A failure settled as `policy` says: no objection under fail-open, else the synthetic
/// denial.
fn assert_settled_by(policy: &str, settlement: &Settlement) {
    match policy {
        "fail-open" => assert_no_objection(settlement),
        _ => assert_synthetic_deny(settlement),
    }
}

/// Interceptor 0's one attempt was answered 401 and its call is auth-failed awaiting
/// the response, settled as `policy` says.
fn assert_the_401_settles_under(policy: &str, settlement: &Settlement) {
    assert_eq!(
        audited(settlement, 0)["failure"],
        json!({"class": "auth-failed", "phase": "await-response", "httpStatus": 401}),
        "{policy}"
    );
    assert_eq!(
        attempt_results(settlement, 0),
        [json!("unauthorized")],
        "{policy}"
    );
    assert_settled_by(policy, settlement);
}

/// The `result` of each attempt in the audit record of interceptor `index`.
fn attempt_results(settlement: &Settlement, index: usize) -> Vec<Value> {
    audited(settlement, index)["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| a["result"].clone())
        .collect()
}

fn assert_no_objection(settlement: &Settlement) {
    assert_eq!(settlement.decision, Decision::Allow);
    assert_eq!(settlement.decided_by, DecidedBy::NoObjection);
    assert_eq!(settlement.reason, None);
    assert_eq!(audit(settlement)["decidedBy"], "no-objection");
}

// ---------------------------------------------------------------------------------------
// Decisions and the chain
// ---------------------------------------------------------------------------------------

#[test]
fn no_effect_reply_settles_allow_with_no_objection() {
    let engine = load(vec![interceptor(A, "fail-closed", 500)]);
    let mut host = FakeHost::new().on(A, Step::reply(no_effect()));
    let s = run(&engine, &mut host);
    assert_no_objection(&s);
    assert_eq!(outcomes(&s), [Outcome::NoEffect]);
    assert_eq!(host.sent.len(), 1);
    let audit = audit(&s);
    assert_eq!(audit["decision"], "allow");
    assert_eq!(
        audit["interceptors"][0]["attempts"],
        json!([{"n": 1, "elapsedMs": 1, "result": "accepted",
                "requestSha256": audit["interceptors"][0]["requestSha256"]}])
    );
    assert!(audit["interceptors"][0].get("failure").is_none());
}

#[test]
fn explicit_deny_settles_deny_with_the_backends_reason() {
    let engine = load(vec![interceptor(A, "fail-open", 500)]);
    let mut host = FakeHost::new().on(
        A,
        Step::reply(deny("Deleting build outputs requires review.")),
    );
    let s = run(&engine, &mut host);
    assert_eq!(s.decision, Decision::Deny);
    assert_eq!(s.decided_by, DecidedBy::BackendDeny);
    assert_eq!(
        s.reason.as_deref(),
        Some("Deleting build outputs requires review.")
    );
    assert_eq!(outcomes(&s), [Outcome::Deny]);
    let audit = audit(&s);
    assert_eq!(audit["decidedBy"], "backend-deny");
    assert_eq!(audit["interceptors"][0]["outcome"], "deny");
}

#[test]
fn deny_stops_the_chain_and_later_backends_are_not_reached() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-closed", 500),
        interceptor(C, "fail-open", 500),
    ]);
    let mut host = FakeHost::new()
        .on(A, Step::reply(deny("no")))
        .on(B, Step::reply(no_effect()))
        .on(C, Step::reply(no_effect()));
    let s = run(&engine, &mut host);
    assert_eq!(s.decided_by, DecidedBy::BackendDeny);
    assert_eq!(
        outcomes(&s),
        [Outcome::Deny, Outcome::NotReached, Outcome::NotReached]
    );
    assert!(host.sent_to(B).is_empty() && host.sent_to(C).is_empty());
    assert_eq!(
        host.acquired.len(),
        1,
        "no credential is even acquired for B or C"
    );
    for i in [1, 2] {
        assert_eq!(audited(&s, i)["outcome"], "not-reached");
        assert_eq!(audited(&s, i)["attempts"], json!([]));
        assert!(audited(&s, i).get("requestSha256").is_none());
    }
}

#[test]
fn accepted_ask_and_message_survive_a_later_fail_open_failure() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
    ]);
    let mut host = FakeHost::new()
        .on(
            A,
            Step::reply(effects(
                json!([{"type": "ask"}, {"type": "message", "text": "careful"}]),
            )),
        )
        .on(B, Step::fail(DeliveryError::ConnectionReset));
    let s = intercept_with(
        &engine,
        &mut host,
        &event(),
        &["deny", "ask", "message"],
        None,
    );
    assert_eq!(s.decision, Decision::Ask);
    assert_eq!(s.decided_by, DecidedBy::BackendAsk);
    assert_eq!(s.messages, ["careful"]);
    assert_eq!(outcomes(&s), [Outcome::Ask, Outcome::FailedOpen]);
}

#[test]
fn accepted_allow_survives_a_later_fail_open_failure() {
    let engine = load(vec![
        interceptor(A, "fail-closed", 500),
        interceptor(B, "fail-open", 500),
    ]);
    let mut host = FakeHost::new()
        .on(A, Step::reply(effects(json!([{"type": "allow"}]))))
        .on(B, Step::hang());
    let s = run(&engine, &mut host);
    assert_no_objection(&s);
    assert_eq!(outcomes(&s), [Outcome::Allow, Outcome::FailedOpen]);
    assert_eq!(failure_class(&s, 1), "deadline-exceeded");
}

/// Digest §4.4: an ask persists through a later allow, and a later deny wins over it;
/// either way the later interceptor is asked.
#[test]
fn an_ask_then_an_allow_is_an_ask_and_an_ask_then_a_deny_is_a_deny() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
    ]);
    let cases = [
        (
            effects(json!([{"type": "allow"}])),
            (Decision::Ask, DecidedBy::BackendAsk, None),
            Outcome::Allow,
        ),
        (
            deny("not B"),
            (Decision::Deny, DecidedBy::BackendDeny, Some("not B")),
            Outcome::Deny,
        ),
    ];
    for (b_reply, (decision, decided_by, reason), b_outcome) in cases {
        let mut host = FakeHost::new()
            .on(A, Step::reply(effects(json!([{"type": "ask"}]))))
            .on(B, Step::reply(b_reply));
        let advertised = ["deny", "ask", "allow"];
        let s = intercept_with(&engine, &mut host, &event(), &advertised, None);
        assert_eq!((s.decision, s.decided_by), (decision, decided_by));
        assert_eq!(s.reason.as_deref(), reason);
        assert_eq!(outcomes(&s), [Outcome::Ask, b_outcome]);
    }
}

#[test]
fn fail_open_failure_then_deny_is_deny() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
    ]);
    let mut host = FakeHost::new()
        .on(A, Step::fail(DeliveryError::ConnectionRefused))
        .on(B, Step::reply(deny("blocked by B")));
    let s = run(&engine, &mut host);
    assert_eq!(s.decision, Decision::Deny);
    assert_eq!(s.decided_by, DecidedBy::BackendDeny);
    assert_eq!(s.reason.as_deref(), Some("blocked by B"));
    assert_eq!(outcomes(&s), [Outcome::FailedOpen, Outcome::Deny]);
}

// ---------------------------------------------------------------------------------------
// Every operational failure × {fail-open, fail-closed}
// ---------------------------------------------------------------------------------------

/// How backend A fails.
#[derive(Clone, Debug)]
enum Fault {
    Exchange(Step),
    Acquire(AuthError),
}

struct Case {
    name: &'static str,
    fault: Fault,
    class: &'static str,
}

fn case(name: &'static str, step: Step, class: &'static str) -> Case {
    Case {
        name,
        fault: Fault::Exchange(step),
        class,
    }
}

/// Timeout of the failing interceptor in the table.
const TABLE_TIMEOUT_MS: u64 = 500;

fn operational_failures() -> Vec<Case> {
    use DeliveryError::*;
    let secret_json = |body: Value| json_reply(body);
    let mut cases = vec![
        // Transport, as the host classifies it.
        case("hang", Step::hang(), "deadline-exceeded"),
        case(
            "deadline in connect",
            Step::hang_in(IoPhase::Connect),
            "deadline-exceeded",
        ),
        case(
            "deadline in send",
            Step::hang_in(IoPhase::Send),
            "deadline-exceeded",
        ),
        case(
            "deadline in read",
            Step::hang_in(IoPhase::ReadResponse),
            "deadline-exceeded",
        ),
        case(
            "connection refused",
            Step::fail(ConnectionRefused),
            "connection-refused",
        ),
        case(
            "connection reset",
            Step::fail(ConnectionReset),
            "connection-reset",
        ),
        case(
            "connection lost",
            Step::fail(ConnectionLost),
            "connection-lost",
        ),
        case("malformed http", Step::fail(MalformedHttp), "http-status"),
        case(
            "malformed framing",
            Step::fail(MalformedFraming),
            "malformed-json",
        ),
        case(
            "unresolved host",
            Step::fail(UnresolvedHost),
            "connection-refused",
        ),
        case("tls failed", Step::fail(TlsFailed), "connection-refused"),
        case("launch failed", Step::fail(LaunchFailed), "launch-failed"),
        case(
            "abnormal exit 3",
            Step::fail(AbnormalExit(Some(3))),
            "abnormal-exit",
        ),
        case(
            "abnormal exit by signal",
            Step::fail(AbnormalExit(None)),
            "abnormal-exit",
        ),
        case(
            "response too large",
            Step::fail(ResponseTooLarge),
            "malformed-json",
        ),
        case(
            "not permitted",
            Step::fail(NotPermitted),
            "connection-refused",
        ),
        // Status and framing.
        case(
            "500 with error body",
            Step::reply(http(500, "application/json", rpc_error(-32003).body)),
            "http-status",
        ),
        case(
            "202 without body",
            Step::reply(http(202, "application/json", "")),
            "http-status",
        ),
        case(
            "401 without credential",
            Step::reply(http(401, "text/plain", SECRET)),
            "auth-failed",
        ),
        case(
            "text/plain content type",
            Step::reply(http(200, "text/plain", no_effect().body)),
            "http-status",
        ),
        case(
            "invalid utf-8",
            Step::reply(http(
                200,
                "application/json",
                b"{\"id\":\"\xff\xfe SECRET-BACKEND-TEXT\"}".to_vec(),
            )),
            "malformed-utf8",
        ),
        case(
            "invalid json",
            Step::reply(http(
                200,
                "application/json",
                format!("{{\"jsonrpc\": \"2.0\", {SECRET}"),
            )),
            "malformed-json",
        ),
        // JSON-RPC envelope.
        case(
            "batch",
            Step::reply(secret_json(
                json!([{"jsonrpc": "2.0", "id": EVENT_ID, "result": {"protocolVersion": "draft", "effects": []}}]),
            )),
            "malformed-jsonrpc",
        ),
        case(
            "missing jsonrpc",
            Step::reply(secret_json(
                json!({"id": EVENT_ID, "result": {"protocolVersion": "draft", "effects": []}}),
            )),
            "malformed-jsonrpc",
        ),
        case(
            "id mismatch",
            Step::reply(secret_json(
                json!({"jsonrpc": "2.0", "id": "evt_other", "result": {"protocolVersion": "draft", "effects": []}}),
            )),
            "id-mismatch",
        ),
        case(
            "numeric id",
            Step::reply(secret_json(
                json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "draft", "effects": []}}),
            )),
            "id-mismatch",
        ),
        case(
            "error -32003",
            Step::reply(rpc_error(-32003)),
            "jsonrpc-error",
        ),
        case(
            "error -32001",
            Step::reply(rpc_error(-32001)),
            "unsupported-version",
        ),
        case(
            "error -32002",
            Step::reply(rpc_error(-32002)),
            "unsupported-event",
        ),
        // Result.
        case(
            "missing protocolVersion",
            Step::reply(result(json!({"effects": []}))),
            "missing-result-fields",
        ),
        case(
            "version 1900-01-01",
            Step::reply(result(
                json!({"protocolVersion": "1900-01-01", "effects": []}),
            )),
            "unsupported-version",
        ),
        case(
            "missing effects",
            Step::reply(result(json!({"protocolVersion": "draft"}))),
            "missing-result-fields",
        ),
        // Effects (the harness advertises deny and allow).
        case(
            "unknown effect",
            Step::reply(effects(
                json!([{"type": "com.example.quarantine", "note": SECRET}]),
            )),
            "invalid-effects",
        ),
        case(
            "unadvertised effect",
            Step::reply(effects(json!([{"type": "message", "text": SECRET}]))),
            "invalid-effects",
        ),
        case(
            "conflicting allow+deny",
            Step::reply(effects(
                json!([{"type": "allow"}, {"type": "deny", "reason": SECRET}]),
            )),
            "invalid-effects",
        ),
        case(
            "unknown field in deny",
            Step::reply(effects(
                json!([{"type": "deny", "reason": SECRET, "severity": "high"}]),
            )),
            "invalid-effects",
        ),
        case(
            "empty deny reason",
            Step::reply(effects(json!([{"type": "deny", "reason": ""}]))),
            "invalid-effects",
        ),
        // Arrived too late.
        case(
            "late no-effect",
            Step::reply(no_effect()).taking(TABLE_TIMEOUT_MS + 1),
            "late-response",
        ),
        case(
            "late deny",
            Step::reply(deny(SECRET)).taking(TABLE_TIMEOUT_MS + 1),
            "late-response",
        ),
    ];
    for (name, error) in [
        ("acquire unresolved", AuthError::Unresolved),
        ("acquire failed", AuthError::AcquisitionFailed),
        ("refresh failed", AuthError::RefreshFailed),
        ("auth unsupported", AuthError::Unsupported),
        ("acquire deadline", AuthError::DeadlineExceeded),
    ] {
        cases.push(Case {
            name,
            fault: Fault::Acquire(error),
            class: "auth-failed",
        });
    }
    cases
}

/// A fails as `case` says under `policy`; B, fail-closed, would answer no-effect.
fn run_case(case: &Case, policy: &str) -> (Settlement, FakeHost) {
    let engine = load(vec![
        interceptor(A, policy, TABLE_TIMEOUT_MS),
        interceptor(B, "fail-closed", TABLE_TIMEOUT_MS),
    ]);
    let mut host = FakeHost::new().on(B, Step::reply(no_effect()));
    host = match &case.fault {
        Fault::Exchange(step) => host.on(A, step.clone()),
        Fault::Acquire(error) => host.auth(A, AuthScript::Fails(*error)),
    };
    let settlement = run(&engine, &mut host);
    (settlement, host)
}

fn assert_no_backend_text(case: &Case, settlement: &Settlement) {
    let reason = settlement.reason.clone().unwrap_or_default();
    assert!(
        !reason.contains(SECRET),
        "{}: backend text in reason",
        case.name
    );
    let audit = audit(settlement).to_string();
    assert!(
        !audit.contains(SECRET),
        "{}: backend text in audit {audit}",
        case.name
    );
}

#[test]
fn every_operational_failure_fail_closed_is_a_generic_synthetic_deny_with_its_class() {
    let cases = operational_failures();
    let mut allows = 0;
    for case in &cases {
        let (s, host) = run_case(case, "fail-closed");
        if s.decision != Decision::Deny {
            allows += 1;
        }
        assert_synthetic_deny(&s);
        assert_eq!(
            outcomes(&s),
            [Outcome::FailedClosed, Outcome::NotReached],
            "{}",
            case.name
        );
        assert_eq!(audited(&s, 0)["outcome"], "failed-closed", "{}", case.name);
        assert_eq!(failure_class(&s, 0), case.class, "{}", case.name);
        assert!(
            host.sent_to(B).is_empty(),
            "{}: the chain must stop",
            case.name
        );
        assert_no_backend_text(case, &s);
    }
    assert_eq!(allows, 0, "fail-closed must never allow");
    assert!(cases.len() >= 40);
}

#[test]
fn every_operational_failure_fail_open_is_recorded_and_the_chain_continues() {
    for case in &operational_failures() {
        let (s, host) = run_case(case, "fail-open");
        assert_no_objection(&s);
        assert_eq!(
            outcomes(&s),
            [Outcome::FailedOpen, Outcome::NoEffect],
            "{}",
            case.name
        );
        assert_eq!(audited(&s, 0)["outcome"], "failed-open", "{}", case.name);
        assert_eq!(failure_class(&s, 0), case.class, "{}", case.name);
        assert_eq!(
            host.sent_to(B).len(),
            1,
            "{}: B must still be asked",
            case.name
        );
        assert!(s.observers.is_empty(), "{}", case.name);
        assert_no_backend_text(case, &s);
    }
}

/// Conformance B6 (CORE-003): an unknown top-level member of a reply's envelope is
/// ignored, as one in `result` is: the reply is accepted, under either policy.
#[test]
fn an_unknown_top_level_member_of_a_reply_is_ignored_under_both_policies() {
    for policy in ["fail-open", "fail-closed"] {
        let engine = load(vec![interceptor(A, policy, 500)]);
        for (reply, outcome) in [
            (deny("kept"), Outcome::Deny),
            (no_effect(), Outcome::NoEffect),
        ] {
            let mut body: Value = serde_json::from_slice(&reply.body).unwrap();
            body["x"] = json!(1);
            body["com.example.trace"] = json!({"span": [1, 2]});
            let mut host = FakeHost::new().on(A, Step::reply(json_reply(body)));
            let s = run(&engine, &mut host);
            assert_eq!(outcomes(&s), [outcome], "{policy}: {}", audit(&s));
            assert!(audited(&s, 0).get("failure").is_none(), "{policy}");
        }
    }
}

#[test]
fn failure_records_the_phase_and_the_status_but_never_the_body() {
    let engine = load(vec![interceptor(A, "fail-closed", 500)]);
    let mut host = FakeHost::new().on(
        A,
        Step::reply(http(503, "application/json", rpc_error(-32003).body)),
    );
    let s = run(&engine, &mut host);
    assert_eq!(
        audited(&s, 0)["failure"],
        json!({"class": "http-status", "phase": "parse", "httpStatus": 503, "rpcCode": -32003})
    );
    let mut host = FakeHost::new().on(A, Step::hang());
    let s = run(&engine, &mut host);
    assert_eq!(
        audited(&s, 0)["failure"],
        json!({"class": "deadline-exceeded", "phase": "await-response"})
    );
    assert_eq!(
        audited(&s, 0)["attempts"],
        json!([{"n": 1, "elapsedMs": 500, "result": "deadline-exceeded",
                "requestSha256": audited(&s, 0)["requestSha256"]}])
    );
}

#[test]
fn cancelled_delivery_is_an_interruption_under_both_policies() {
    for policy in ["fail-open", "fail-closed"] {
        // An owned observer of the event: interruption starts it not, even where the
        // host's own interruption flag is not set (the cancelled attempt says it).
        let engine = load(vec![
            interceptor(A, policy, 500),
            interceptor(B, "fail-open", 500),
            backend(C, vec![observe_sub(&["tool.before"])]),
        ]);
        let mut host = FakeHost::new()
            .on(A, Step::fail(DeliveryError::Cancelled))
            .on(B, Step::reply(no_effect()));
        let s = run(&engine, &mut host);
        assert_eq!(s.decision, Decision::Deny, "{policy}");
        assert_eq!(s.decided_by, DecidedBy::Interrupted, "{policy}");
        assert_eq!(s.reason.as_deref(), Some(INTERRUPTED_REASON));
        assert_eq!(
            outcomes(&s),
            [Outcome::Interrupted, Outcome::NotReached],
            "{policy}"
        );
        assert!(host.sent_to(B).is_empty());
        assert!(s.observers.is_empty(), "interruption starts no observers");
    }
}

#[test]
fn cancelled_credential_acquisition_is_an_interruption_and_sends_nothing() {
    for policy in ["fail-open", "fail-closed"] {
        let engine = load(vec![
            interceptor(A, policy, 500),
            backend(C, vec![observe_sub(&["tool.before"])]),
        ]);
        let mut host = FakeHost::new().auth(A, AuthScript::Fails(AuthError::Cancelled));
        let s = run(&engine, &mut host);
        assert_eq!(s.decided_by, DecidedBy::Interrupted, "{policy}");
        assert_eq!(s.decision, Decision::Deny);
        assert!(host.sent.is_empty());
        assert!(s.observers.is_empty(), "interruption starts no observers");
    }
}

// ---------------------------------------------------------------------------------------
// Deadlines and the enclosing budget
// ---------------------------------------------------------------------------------------

#[test]
fn exchange_deadline_is_start_plus_timeout_ms() {
    let engine = load(vec![interceptor(A, "fail-closed", 750)]);
    let mut host = FakeHost::new().on(A, Step::reply(no_effect()));
    run(&engine, &mut host);
    assert_eq!(host.sent[0].deadline, T0 + ms(750));
    assert_eq!(host.acquired, [(A.to_string(), T0 + ms(750))]);
}

#[test]
fn credential_acquisition_time_counts_against_the_same_deadline() {
    let engine = load(vec![interceptor(A, "fail-closed", 750)]);
    let mut host = FakeHost::new()
        .auth(A, AuthScript::Token)
        .on(A, Step::reply(no_effect()));
    host.acquire_takes_ms = 300;
    run(&engine, &mut host);
    assert_eq!(
        host.sent[0].deadline,
        T0 + ms(750),
        "acquisition must not reset the deadline"
    );
}

/// Runs one call that began at `started` (before it waited for an instance).
fn run_queued(engine: &Engine, host: &mut FakeHost, started: Instant) -> Settlement {
    let kinds = [EffectKind::Deny, EffectKind::Allow];
    engine
        .intercept_since(host, &event(), &kinds, None, started)
        .expect("valid call")
}

#[test]
fn each_interceptor_gets_its_own_deadline_from_when_it_starts_the_first_from_the_call() {
    // The call began `waited` ms before it reached an instance: the wait counts against
    // the first deadline; B's clock starts when A's answer comes.
    for waited in [0, 300] {
        let engine = load(vec![
            interceptor(A, "fail-open", 750),
            interceptor(B, "fail-open", 200),
        ]);
        let mut host = FakeHost::new()
            .on(A, Step::reply(no_effect()).taking(40))
            .on(B, Step::reply(no_effect()));
        let s = run_queued(&engine, &mut host, T0 - ms(waited));
        assert_eq!(host.sent_to(A)[0].deadline, T0 - ms(waited) + ms(750));
        assert_eq!(host.sent_to(B)[0].deadline, T0 + ms(40) + ms(200));
        assert_eq!(s.elapsed_ns, ms(waited) + ms(40) + ms(1));
    }
}

#[test]
fn a_first_deadline_used_up_in_the_queue_is_settled_by_its_policy_with_phase_queue() {
    for policy in ["fail-open", "fail-closed"] {
        let engine = load(vec![
            interceptor(A, policy, 500),
            interceptor(B, "fail-open", 200),
        ]);
        let mut host = FakeHost::new().on(B, Step::reply(no_effect()));
        // A's deadline passed 100 ms before the call reached an instance.
        let s = run_queued(&engine, &mut host, T0 - ms(600));
        assert!(host.sent_to(A).is_empty(), "{policy}: nothing is sent to A");
        assert!(host.acquired.iter().all(|(b, _)| b != A), "{policy}");
        let entry = audited(&s, 0);
        assert_eq!(entry["failure"]["class"], "deadline-exceeded", "{policy}");
        assert_eq!(entry["failure"]["phase"], "queue", "{policy}");
        assert_eq!(entry["attempts"].as_array().map_or(0, Vec::len), 0);
        assert!(entry.get("requestSha256").is_none(), "{policy}: {entry}");
        match policy {
            "fail-open" => {
                assert_no_objection(&s);
                assert_eq!(outcomes(&s), [Outcome::FailedOpen, Outcome::NoEffect]);
                // The next interceptor's clock started when A's deadline passed.
                assert_eq!(host.sent_to(B)[0].deadline, T0 + ms(100));
            }
            _ => {
                assert_synthetic_deny(&s);
                assert_eq!(outcomes(&s), [Outcome::FailedClosed, Outcome::NotReached]);
                assert!(host.sent_to(B).is_empty());
            }
        }
    }
}

#[test]
fn a_wait_that_used_up_every_deadline_in_turn_settles_each_by_policy_and_sends_nothing() {
    // Deadlines in turn: A's at T0 - 400, B's at T0 - 200, C's at T0 - 100.
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 200),
        interceptor(C, "fail-closed", 100),
    ]);
    let mut host = FakeHost::new();
    let s = run_queued(&engine, &mut host, T0 - ms(900));
    assert!(host.sent.is_empty() && host.acquired.is_empty());
    assert_synthetic_deny(&s);
    assert_eq!(
        outcomes(&s),
        [
            Outcome::FailedOpen,
            Outcome::FailedOpen,
            Outcome::FailedClosed
        ]
    );
    for i in 0..3 {
        assert_eq!(audited(&s, i)["failure"]["phase"], "queue", "{i}");
    }
    // A call whose wait ended in C's time asks C with what is left of it.
    let mut host = FakeHost::new().on(C, Step::reply(no_effect()));
    let s = run_queued(&engine, &mut host, T0 - ms(750));
    assert_no_objection(&s);
    assert_eq!(host.sent_to(C)[0].deadline, T0 + ms(50));
}

#[test]
fn a_start_in_the_future_never_extends_the_deadline() {
    let engine = load(vec![interceptor(A, "fail-closed", 750)]);
    let mut host = FakeHost::new().on(A, Step::reply(no_effect()));
    run_queued(&engine, &mut host, T0 + ms(10_000));
    assert_eq!(host.sent[0].deadline, T0 + ms(750));
}

#[test]
fn chain_timeouts_list_each_selected_event_s_interceptors_in_chain_order() {
    let engine = load(vec![
        backend(A, vec![observe_sub(&["tool.after"])]),
        interceptor(B, "fail-open", 300),
        backend(C, vec![intercept_sub(&["tool.*"], "fail-closed", 900)]),
    ]);
    let timeouts: HashMap<String, Vec<u64>> = engine.chain_timeouts().into_iter().collect();
    assert_eq!(timeouts.get("tool.before"), Some(&vec![300, 900]));
    assert_eq!(timeouts.get("tool.after"), Some(&vec![900]));
    assert_eq!(timeouts.get("session.start"), None);
}

#[test]
fn hang_stops_the_clock_exactly_at_the_deadline() {
    let engine = load(vec![interceptor(A, "fail-closed", 750)]);
    let mut host = FakeHost::new().on(A, Step::hang());
    let s = run(&engine, &mut host);
    assert_eq!(host.now.get(), T0 + ms(750));
    assert_eq!(s.elapsed_ns, ms(750));
    assert_eq!(audit(&s)["elapsedMs"], 750);
}

#[test]
fn reply_completing_after_the_deadline_is_late_and_never_accepted() {
    for (reply, name) in [(deny("too late"), "deny"), (no_effect(), "no-effect")] {
        for takes in [500, 501, 10_000] {
            // Fail-open: a late deny is not a deny.
            let engine = load(vec![interceptor(A, "fail-open", 500)]);
            let mut host = FakeHost::new().on(A, Step::reply(reply.clone()).taking(takes));
            let s = run(&engine, &mut host);
            assert_no_objection(&s);
            assert_eq!(
                outcomes(&s),
                [Outcome::FailedOpen],
                "{name} after {takes} ms"
            );
            assert_eq!(failure_class(&s, 0), "late-response");
            assert_eq!(audited(&s, 0)["failure"]["phase"], "accept");
            // Fail-closed: a late no-effect is not permission.
            let engine = load(vec![interceptor(A, "fail-closed", 500)]);
            let mut host = FakeHost::new().on(A, Step::reply(reply.clone()).taking(takes));
            let s = run(&engine, &mut host);
            assert_synthetic_deny(&s);
            assert_eq!(
                failure_class(&s, 0),
                "late-response",
                "{name} after {takes} ms"
            );
        }
    }
}

#[test]
fn reply_just_inside_the_deadline_is_accepted() {
    let engine = load(vec![interceptor(A, "fail-closed", 500)]);
    let mut host = FakeHost::new().on(A, Step::reply(deny("in time")).taking(499));
    let s = run(&engine, &mut host);
    assert_eq!(s.decided_by, DecidedBy::BackendDeny);
    assert_eq!(s.reason.as_deref(), Some("in time"));
}

#[test]
fn budget_shorter_than_timeout_becomes_the_exchange_deadline() {
    let engine = load(vec![interceptor(A, "fail-open", 750)]);
    let mut host = FakeHost::new().on(A, Step::reply(no_effect()));
    run_with_budget(&engine, &mut host, T0 + ms(300));
    assert_eq!(host.sent[0].deadline, T0 + ms(300));
    assert_eq!(host.acquired[0].1, T0 + ms(300));
}

#[test]
fn budget_longer_than_timeout_leaves_the_timeout_in_force() {
    let engine = load(vec![interceptor(A, "fail-open", 750)]);
    let mut host = FakeHost::new().on(A, Step::hang());
    let s = run_with_budget(&engine, &mut host, T0 + ms(5_000));
    assert_eq!(host.sent[0].deadline, T0 + ms(750));
    assert_no_objection(&s);
    assert_eq!(outcomes(&s), [Outcome::FailedOpen]);
}

#[test]
fn timeout_under_a_binding_budget_is_budget_expired_not_the_subscription_policy() {
    for policy in ["fail-open", "fail-closed"] {
        for step in [Step::hang(), Step::reply(no_effect()).taking(301)] {
            let engine = load(vec![
                interceptor(A, policy, 750),
                interceptor(B, "fail-open", 750),
            ]);
            let mut host = FakeHost::new().on(A, step).on(B, Step::reply(no_effect()));
            let s = run_with_budget(&engine, &mut host, T0 + ms(300));
            assert_eq!(s.decision, Decision::Deny, "{policy}");
            assert_eq!(s.decided_by, DecidedBy::BudgetExpired, "{policy}");
            assert_eq!(s.reason.as_deref(), Some(BUDGET_REASON));
            assert_eq!(audit(&s)["decidedBy"], "budget-expired");
            assert_eq!(outcomes(&s), [Outcome::BudgetExpired, Outcome::NotReached]);
            assert!(host.sent_to(B).is_empty());
            assert!(
                s.observers.is_empty(),
                "an expired budget starts no observers"
            );
        }
    }
}

#[test]
fn budget_spent_before_the_second_interceptor_stops_it_uncalled() {
    // A's own 300 ms timeout ends exactly when the budget does.
    let engine = load(vec![
        interceptor(A, "fail-open", 300),
        interceptor(B, "fail-open", 750),
    ]);
    let mut host = FakeHost::new()
        .on(A, Step::hang())
        .on(B, Step::reply(no_effect()));
    let s = run_with_budget(&engine, &mut host, T0 + ms(300));
    assert_eq!(s.decision, Decision::Deny);
    assert_eq!(s.decided_by, DecidedBy::BudgetExpired);
    assert_eq!(outcomes(&s), [Outcome::FailedOpen, Outcome::NotReached]);
    assert!(host.sent_to(B).is_empty());
    assert!(host.acquired.iter().all(|(b, _)| b == A));
}

#[test]
fn budget_expired_before_the_call_sends_nothing() {
    let engine = load(vec![interceptor(A, "fail-open", 300)]);
    let mut host = FakeHost::new();
    let s = run_with_budget(&engine, &mut host, T0);
    assert_eq!(s.decided_by, DecidedBy::BudgetExpired);
    assert_eq!(outcomes(&s), [Outcome::NotReached]);
    assert!(host.sent.is_empty() && host.acquired.is_empty());
}

/// Conformance F15: an enclosing budget of 1 s; A (`timeoutMs` 800) answers after
/// 600 ms, so B (`timeoutMs` 800) has what is left of the budget, 400 ms, not its own
/// 800. If B hangs, the budget expires: a denial that says expiry, never interruption or
/// cancellation, whatever B's policy.
#[test]
fn a_later_interceptor_gets_only_what_remains_of_the_enclosing_budget() {
    let budget = T0 + ms(1_000);
    for policy in ["fail-open", "fail-closed"] {
        let engine = load(vec![
            interceptor(A, "fail-open", 800),
            interceptor(B, policy, 800),
        ]);
        let mut host = FakeHost::new()
            .on(A, Step::reply(no_effect()).taking(600))
            .on(B, Step::reply(no_effect()));
        let s = run_with_budget(&engine, &mut host, budget);
        assert_no_objection(&s);
        assert_eq!(host.sent_to(A)[0].deadline, T0 + ms(800), "{policy}");
        assert_eq!(
            host.sent_to(B)[0].deadline,
            budget,
            "{policy}: start + 1000 ms, not B's start (T0 + 600 ms) + 800 ms"
        );
        let acquired: Vec<_> = host
            .acquired
            .iter()
            .map(|(b, at)| (b.as_str(), *at))
            .collect();
        assert_eq!(acquired, [(A, T0 + ms(800)), (B, budget)], "{policy}");

        let mut host = FakeHost::new()
            .on(A, Step::reply(no_effect()).taking(600))
            .on(B, Step::hang());
        let s = run_with_budget(&engine, &mut host, budget);
        assert_eq!(
            host.now.get(),
            budget,
            "{policy}: B hangs until the budget ends"
        );
        assert_eq!(
            (s.decision, s.decided_by, s.reason.as_deref()),
            (
                Decision::Deny,
                DecidedBy::BudgetExpired,
                Some(BUDGET_REASON)
            ),
            "{policy}"
        );
        assert_eq!(outcomes(&s), [Outcome::NoEffect, Outcome::BudgetExpired]);
        let record = audit(&s);
        assert_eq!(record["decidedBy"], "budget-expired", "{policy}");
        let entry = &record["interceptors"][1];
        assert_eq!(entry["outcome"], "budget-expired", "{policy}");
        assert_eq!(entry["failure"]["class"], "deadline-exceeded", "{policy}");
        assert_eq!(entry["attempts"][0]["result"], "deadline-exceeded");
        assert_eq!(entry["attempts"][0]["elapsedMs"], 400, "{policy}");
        let text = record.to_string();
        assert!(
            !text.contains("interrupt") && !text.contains("cancel"),
            "{policy}: {record}"
        );
    }
}

/// A retry's backoff that ends past the deadline (the host allowed it, its timer
/// overshot) starts no attempt: the exchange ends as the deadline's failure in the phase
/// the last attempt failed in, and the audit lists only the attempt that was made.
#[test]
fn a_backoff_that_ends_past_the_deadline_starts_no_attempt() {
    let engine = load(vec![interceptor(A, "fail-open", 100)]);
    let mut host = FakeHost::new()
        .retries(1, 50)
        .on(A, Step::fail(DeliveryError::ConnectionRefused).taking(20));
    host.overshoot_ms = 40;
    let s = run(&engine, &mut host);
    assert_eq!(host.sent_to(A).len(), 1, "no second attempt");
    assert_eq!(attempt_results(&s, 0), ["connection-refused"]);
    assert_eq!(
        audited(&s, 0)["failure"],
        json!({"class": "deadline-exceeded", "phase": "connect"})
    );
    assert_eq!(outcomes(&s), [Outcome::FailedOpen]);
}

/// Conformance F15, retries and phases: however often B's exchange is retried, and
/// however often it acquires a credential, every attempt of B is bounded by the
/// enclosing budget, and the final hang settles as its expiry.
#[test]
fn no_retry_or_reacquisition_of_a_later_interceptor_outlasts_the_enclosing_budget() {
    let budget = T0 + ms(1_000);
    let engine = load(vec![
        interceptor(A, "fail-open", 800),
        interceptor(B, "fail-open", 800),
    ]);
    // B: a reset at +600 ms, a retry at +770 ms resets too, a retry at +940 ms hangs.
    let mut host = FakeHost::new()
        .retries(10, 150)
        .auth(B, AuthScript::Token)
        .on(A, Step::reply(no_effect()).taking(600))
        .on(B, Step::fail(DeliveryError::ConnectionReset).taking(20))
        .on(B, Step::fail(DeliveryError::ConnectionReset).taking(20))
        .on(B, Step::hang());
    let s = run_with_budget(&engine, &mut host, budget);
    assert_eq!(s.decided_by, DecidedBy::BudgetExpired);
    assert_eq!(outcomes(&s), [Outcome::NoEffect, Outcome::BudgetExpired]);
    let deadlines: Vec<Instant> = host.sent_to(B).iter().map(|x| x.deadline).collect();
    assert_eq!(deadlines, [budget; 3], "every attempt keeps the budget");
    let asked: Vec<Instant> = host.retry_asks.iter().map(|(_, _, at)| *at).collect();
    assert_eq!(asked, [budget; 2], "retries are asked within the budget");
    let acquired: Vec<Instant> = host
        .acquired
        .iter()
        .filter(|(b, _)| b == B)
        .map(|(_, at)| *at)
        .collect();
    assert_eq!(acquired, [budget; 3], "every acquisition keeps the budget");
    assert_eq!(host.now.get(), budget);
    let results = attempt_results(&s, 1);
    assert_eq!(
        results,
        ["connection-reset", "connection-reset", "deadline-exceeded"]
    );
}

// ---------------------------------------------------------------------------------------
// Authentication
// ---------------------------------------------------------------------------------------

fn unauthorized() -> Reply {
    http(
        401,
        "application/json",
        format!("{{\"error\": \"{SECRET}\"}}"),
    )
}

#[test]
fn unauthorized_with_credential_rejects_reacquires_and_resends_identical_bytes() {
    let engine = load(vec![interceptor(A, "fail-closed", 750)]);
    let mut host = FakeHost::new()
        .auth(A, AuthScript::Token)
        .on(A, Step::reply(unauthorized()).taking(30))
        .on(A, Step::reply(deny("with a fresh token")));
    let s = run(&engine, &mut host);
    assert_eq!(s.decided_by, DecidedBy::BackendDeny);
    assert_eq!(s.reason.as_deref(), Some("with a fresh token"));
    let cred = |generation| {
        Some(Cred {
            backend: A.into(),
            generation,
        })
    };
    assert_eq!(host.rejected, [cred(1).unwrap()]);
    assert_eq!(host.acquired.len(), 2);
    assert_eq!(host.sent.len(), 2);
    assert_eq!(
        host.sent[0].message, host.sent[1].message,
        "a retry resends the same bytes"
    );
    assert_eq!(
        (
            host.sent[0].credential.clone(),
            host.sent[1].credential.clone()
        ),
        (cred(1), cred(2))
    );
    assert_eq!(
        host.sent[1].deadline,
        T0 + ms(750),
        "a retry keeps the original deadline"
    );
    assert_eq!(
        audited(&s, 0)["attempts"],
        json!([{"n": 1, "elapsedMs": 30, "result": "unauthorized",
                "requestSha256": audited(&s, 0)["requestSha256"]},
               {"n": 2, "elapsedMs": 1, "result": "accepted",
                "requestSha256": audited(&s, 0)["requestSha256"]}])
    );
}

#[test]
fn the_resend_after_a_401_is_not_one_of_the_retries() {
    let engine = load(vec![interceptor(A, "fail-closed", 750)]);
    let mut host = FakeHost::new()
        .retries(1, 0)
        .auth(A, AuthScript::Token)
        .on(A, Step::reply(unauthorized()))
        .on(A, Step::fail(DeliveryError::ConnectionReset))
        .on(A, Step::reply(deny("after one retry")));
    let s = run(&engine, &mut host);
    assert_eq!(s.reason.as_deref(), Some("after one retry"));
    assert_eq!(host.sent.len(), 3);
    assert_eq!(
        host.retry_asks,
        [(A.to_string(), 1, T0 + ms(750))],
        "the first retry after a transient failure is retry number 1"
    );
}

#[test]
fn second_unauthorized_is_auth_failed_after_exactly_two_exchanges() {
    for (policy, decision) in [
        ("fail-closed", Decision::Deny),
        ("fail-open", Decision::Allow),
    ] {
        let engine = load(vec![interceptor(A, policy, 750)]);
        let mut host = FakeHost::new()
            .auth(A, AuthScript::Token)
            .on(A, Step::reply(unauthorized()))
            .on(A, Step::reply(unauthorized()));
        let s = run(&engine, &mut host);
        assert_eq!(s.decision, decision, "{policy}");
        assert_eq!(host.sent.len(), 2, "{policy}");
        assert_eq!(host.acquired.len(), 2, "{policy}");
        assert_eq!(failure_class(&s, 0), "auth-failed");
        assert_eq!(audited(&s, 0)["failure"]["httpStatus"], 401);
        assert!(!audit(&s).to_string().contains(SECRET));
    }
}

#[test]
fn unauthorized_without_credential_is_auth_failed_without_retry() {
    let engine = load(vec![interceptor(A, "fail-closed", 750)]);
    let mut host = FakeHost::new().on(A, Step::reply(unauthorized()));
    let s = run(&engine, &mut host);
    assert_synthetic_deny(&s);
    assert_eq!(failure_class(&s, 0), "auth-failed");
    assert_eq!(host.sent.len(), 1);
    assert!(host.rejected.is_empty());
}

#[test]
fn unauthorized_without_credential_asks_the_host_once_more_and_sends_nothing_without_one() {
    let engine = load(vec![interceptor(A, "fail-closed", 750)]);
    let mut host = FakeHost::new().on(A, Step::reply(unauthorized()));
    let s = run(&engine, &mut host);
    assert_eq!(
        host.acquired.len(),
        2,
        "the challenge is offered to the host"
    );
    assert_eq!(
        host.sent.len(),
        1,
        "never the same request unauthenticated twice"
    );
    assert_eq!(
        audited(&s, 0)["failure"],
        json!({"class": "auth-failed", "phase": "await-response", "httpStatus": 401})
    );
    assert_eq!(audited(&s, 0)["attempts"].as_array().map(Vec::len), Some(1));
}

/// failure-semantics: fail-open does not permit unauthenticated fallback delivery. A
/// request refused with its credential is never resent without one, should the host
/// have none left when asked again: the 401 stands, under either policy.
#[test]
fn a_refused_credential_the_host_cannot_renew_is_auth_failed_without_a_second_send() {
    for policy in ["fail-open", "fail-closed"] {
        let engine = load(vec![interceptor(A, policy, 750)]);
        let mut host = FakeHost::new()
            .auth(A, AuthScript::Vanishes)
            .on(A, Step::reply(unauthorized()))
            .on(A, Step::reply(deny("sent without a credential")));
        let s = run(&engine, &mut host);
        assert_eq!(host.sent.len(), 1, "{policy}: exactly one send");
        assert!(host.sent[0].credential.is_some(), "{policy}");
        assert_eq!(
            host.acquired.len(),
            2,
            "{policy}: asked again after the 401"
        );
        assert_eq!(host.rejected.len(), 1, "{policy}");
        assert_the_401_settles_under(policy, &s);
    }
}

#[test]
fn a_challenge_the_host_answers_resends_the_same_bytes_once_with_the_credential() {
    let engine = load(vec![interceptor(A, "fail-closed", 750)]);
    let mut host = FakeHost::new()
        .auth(A, AuthScript::OnChallenge(None))
        .on(A, Step::reply(unauthorized()).taking(20))
        .on(A, Step::reply(deny("discovered")));
    let s = run(&engine, &mut host);
    assert_eq!(s.decided_by, DecidedBy::BackendDeny);
    assert_eq!(s.reason.as_deref(), Some("discovered"));
    assert_eq!(host.sent.len(), 2);
    assert_eq!(host.sent[0].message, host.sent[1].message);
    assert_eq!(host.sent[0].credential, None);
    assert_eq!(
        host.sent[1].credential,
        Some(Cred {
            backend: A.into(),
            generation: 1
        })
    );
    assert_eq!(host.sent[1].deadline, T0 + ms(750));
    assert!(host.rejected.is_empty(), "no credential was refused");
    let results = attempt_results(&s, 0);
    assert_eq!(results, [json!("unauthorized"), json!("accepted")]);
}

/// One interceptor under `policy` with a 750 ms timeout, whose backend answers 401 in
/// time (740 ms), after which the deadline passes (20 ms of the component's own work)
/// before another attempt can begin.
fn run_into_the_deadline_after_a_401(policy: &str, auth: AuthScript) -> (FakeHost, Settlement) {
    let engine = load(vec![interceptor(A, policy, 750)]);
    let mut host = FakeHost::new()
        .auth(A, auth)
        .on(A, Step::reply(unauthorized()).taking(740).then_lag(20));
    let s = run(&engine, &mut host);
    (host, s)
}

#[test]
fn a_budget_that_runs_out_after_a_401_is_never_permission() {
    // The 401 comes in time (690 ms), the budget (700 ms, before the interceptor's own
    // 750 ms) passes before it can be answered, with or without a credential: the call
    // is out of budget, whatever the policy, and not the 401's failure settled open.
    for policy in ["fail-open", "fail-closed"] {
        for auth in [AuthScript::OnChallenge(None), AuthScript::Token] {
            let engine = load(vec![interceptor(A, policy, 750)]);
            let mut host = FakeHost::new()
                .auth(A, auth)
                .on(A, Step::reply(unauthorized()).taking(690).then_lag(20));
            let s = run_with_budget(&engine, &mut host, T0 + ms(700));
            assert_eq!(host.sent.len(), 1, "{policy} {auth:?}");
            assert_eq!(s.decided_by, DecidedBy::BudgetExpired, "{policy} {auth:?}");
            assert_eq!(outcomes(&s), [Outcome::BudgetExpired], "{policy} {auth:?}");
        }
    }
}

#[test]
fn a_timeout_reported_before_a_binding_budget_ends_is_settled_by_policy() {
    // An injected transport or credential provider with a timeout of its own gives up
    // 10 ms into a 400 ms budget: the budget has not run out, so the subscription's
    // policy settles the failure, not expiry.
    for policy in ["fail-open", "fail-closed"] {
        let early_delivery = FakeHost::new().on(
            A,
            Step::fail(DeliveryError::DeadlineExceeded(IoPhase::AwaitResponse)).taking(10),
        );
        let early_credential =
            FakeHost::new().auth(A, AuthScript::Fails(AuthError::DeadlineExceeded));
        for mut host in [early_delivery, early_credential] {
            let engine = load(vec![interceptor(A, policy, 500)]);
            let s = run_with_budget(&engine, &mut host, T0 + ms(400));
            assert_settled_by(policy, &s);
            let settled = match policy {
                "fail-open" => Outcome::FailedOpen,
                _ => Outcome::FailedClosed,
            };
            assert_eq!(outcomes(&s), [settled], "{policy}");
        }
    }
}

#[test]
fn no_time_left_to_answer_a_401_is_the_deadlines() {
    // After a 401 to a request that carried a credential (dropped, its renewal never
    // begun) or to one that carried none (the challenge never offered), with no time
    // left: nothing more is asked or sent, and the deadline, not the 401, ends the call,
    // as the policy says.
    for policy in ["fail-open", "fail-closed"] {
        for (auth, refused) in [(AuthScript::Token, 1), (AuthScript::OnChallenge(None), 0)] {
            let (host, s) = run_into_the_deadline_after_a_401(policy, auth);
            let case = format!("{policy} {auth:?}");
            assert_eq!(host.sent.len(), 1, "{case}");
            assert_eq!(
                host.acquired.len(),
                1,
                "{case}: nothing asked past the deadline"
            );
            assert_eq!(
                host.rejected.len(),
                refused,
                "{case}: a refused credential dropped"
            );
            assert_settled_by(policy, &s);
            assert_eq!(
                audited(&s, 0)["failure"],
                json!({"class": "deadline-exceeded", "phase": "acquire-credential"}),
                "{case}"
            );
            let results = attempt_results(&s, 0);
            assert_eq!(
                results,
                [json!("unauthorized"), json!("deadline-exceeded")],
                "{case}"
            );
        }
    }
}

#[test]
fn a_retry_after_the_answered_challenge_still_carries_a_credential() {
    let engine = load(vec![interceptor(A, "fail-closed", 750)]);
    let mut host = FakeHost::new()
        .retries(1, 0)
        .auth(A, AuthScript::OnChallenge(None))
        .on(A, Step::reply(unauthorized()))
        .on(A, Step::fail(DeliveryError::ConnectionReset))
        .on(A, Step::reply(deny("after the retry")));
    let s = run(&engine, &mut host);
    assert_eq!(s.reason.as_deref(), Some("after the retry"));
    let credentials: Vec<_> = host.sent.iter().map(|s| s.credential.is_some()).collect();
    assert_eq!(credentials, [false, true, true]);
    assert!(host.sent.iter().all(|s| s.message == host.sent[0].message));
}

#[test]
fn a_challenge_is_answered_once_and_a_failed_answer_is_auth_failed_under_policy() {
    // The discovered credential refused too: no third request.
    let engine = load(vec![interceptor(A, "fail-open", 750)]);
    let mut host = FakeHost::new()
        .auth(A, AuthScript::OnChallenge(None))
        .on(A, Step::reply(unauthorized()))
        .on(A, Step::reply(unauthorized()));
    let s = run(&engine, &mut host);
    assert_no_objection(&s);
    assert_eq!(host.sent.len(), 2);
    assert_eq!(host.rejected.len(), 1);
    assert_eq!(audited(&s, 0)["failure"]["httpStatus"], 401);
    // Discovery failing: nothing more is sent, the failure is the acquisition's.
    for policy in ["fail-open", "fail-closed"] {
        let engine = load(vec![interceptor(A, policy, 750)]);
        let mut host = FakeHost::new()
            .auth(
                A,
                AuthScript::OnChallenge(Some(AuthError::AcquisitionFailed)),
            )
            .on(A, Step::reply(unauthorized()));
        let s = run(&engine, &mut host);
        assert_eq!(host.sent.len(), 1, "{policy}");
        assert_eq!(
            audited(&s, 0)["failure"],
            json!({"class": "auth-failed", "phase": "acquire-credential", "detail": "acquisition-failed"}),
            "{policy}"
        );
        assert_settled_by(policy, &s);
    }
}

#[test]
fn failed_refresh_is_auth_failed_in_the_refresh_phase() {
    let engine = load(vec![interceptor(A, "fail-closed", 750)]);
    let mut host = FakeHost::new().auth(A, AuthScript::Fails(AuthError::RefreshFailed));
    let s = run(&engine, &mut host);
    assert!(host.sent.is_empty());
    assert_synthetic_deny(&s);
    assert_eq!(
        audited(&s, 0)["failure"],
        json!({"class": "auth-failed", "phase": "refresh-credential", "detail": "refresh-failed"})
    );
}

#[test]
fn unresolved_credential_is_auth_failed_and_nothing_is_sent_under_both_policies() {
    for policy in ["fail-open", "fail-closed"] {
        let engine = load(vec![interceptor(A, policy, 750)]);
        let mut host = FakeHost::new().auth(A, AuthScript::Fails(AuthError::Unresolved));
        let s = run(&engine, &mut host);
        assert!(
            host.sent.is_empty(),
            "{policy}: no unauthenticated fallback delivery"
        );
        assert_eq!(failure_class(&s, 0), "auth-failed");
        assert_eq!(audited(&s, 0)["failure"]["phase"], "acquire-credential");
        assert_settled_by(policy, &s);
    }
}

#[test]
fn unauthorized_arriving_after_the_deadline_is_a_late_response() {
    // The 401 is a response received after the deadline: it must be ignored like any other
    // late response, so under a binding budget the call is budget-expired, never allowed.
    let engine = load(vec![interceptor(A, "fail-open", 750)]);
    let mut host = FakeHost::new()
        .auth(A, AuthScript::Token)
        .on(A, Step::reply(unauthorized()).taking(301));
    let s = run_with_budget(&engine, &mut host, T0 + ms(300));
    assert_eq!(host.sent.len(), 1);
    assert_eq!(
        s.decision,
        Decision::Deny,
        "a budget that ran out is never permission"
    );
    assert_eq!(s.decided_by, DecidedBy::BudgetExpired);
    assert_eq!(failure_class(&s, 0), "late-response");
}

/// A 401 that comes too late to act on, or to a call interrupted meanwhile, still drops
/// the credential it refused from the host's cache (the outcome is as before): the next
/// call sends a fresh one, never the refused one again.
#[test]
fn a_late_or_interrupted_401_still_drops_the_refused_credential() {
    for late in [true, false] {
        let engine = load(vec![interceptor(A, "fail-open", 500)]);
        let refused = match late {
            true => Step::reply(unauthorized()).taking(501),
            false => Step::reply(unauthorized()).then_interrupt(),
        };
        let mut host = FakeHost::new()
            .auth(A, AuthScript::Cached)
            .on(A, refused)
            .on(A, Step::reply(no_effect()));
        let first = run(&engine, &mut host);
        match late {
            true => assert_eq!(failure_class(&first, 0), "late-response"),
            false => assert_eq!(first.decided_by, DecidedBy::Interrupted),
        }
        assert_eq!(host.sent.len(), 1, "late: {late}");
        host.interrupted = false;
        let next = run(&engine, &mut host);
        assert_eq!(next.decision, Decision::Allow, "late: {late}");
        let sent_with: Vec<_> = host
            .sent
            .iter()
            .map(|s| s.credential.as_ref().map(|c| c.generation))
            .collect();
        assert_eq!(sent_with, [Some(1), Some(2)], "late: {late}");
    }
}

// ---------------------------------------------------------------------------------------
// Interruption
// ---------------------------------------------------------------------------------------

#[test]
fn interruption_after_the_reply_but_before_acceptance_denies_even_a_no_effect_reply() {
    for policy in ["fail-open", "fail-closed"] {
        let engine = load(vec![
            interceptor(A, policy, 500),
            interceptor(B, "fail-open", 500),
        ]);
        let mut host = FakeHost::new()
            .on(A, Step::reply(no_effect()).then_interrupt())
            .on(B, Step::reply(no_effect()));
        let s = run(&engine, &mut host);
        assert_eq!(s.decision, Decision::Deny, "{policy}");
        assert_eq!(s.decided_by, DecidedBy::Interrupted);
        assert_eq!(audit(&s)["decidedBy"], "interrupted");
        assert_eq!(outcomes(&s), [Outcome::Interrupted, Outcome::NotReached]);
        assert!(host.sent_to(B).is_empty());
        assert!(s.observers.is_empty(), "interruption starts no observers");
    }
}

/// An accepted modification and message are staged, not published: interrupted later,
/// the call hands on neither (failure-semantics.md: staged effects never revive
/// interrupted work).
#[test]
fn interruption_drops_an_earlier_accepted_modification_and_message() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
    ]);
    let staged = effects(json!([
        {"type": "modify", "target": "input", "operation": "replace", "value": {"command": "ls"}},
        {"type": "message", "text": "staged words"}
    ]));
    let mut host = FakeHost::new()
        .on(A, Step::reply(staged))
        .on(B, Step::reply(no_effect()).then_interrupt());
    let s = engine
        .intercept(&mut host, &event(), &[], None)
        .expect("valid");
    assert_eq!(s.decided_by, DecidedBy::Interrupted);
    assert_eq!(outcomes(&s), [Outcome::NoEffect, Outcome::Interrupted]);
    let record = audit(&s);
    assert!(record.get("effective").is_none(), "{record}");
    assert!(!record.to_string().contains("staged words"), "{record}");
}

#[test]
fn interruption_overrides_an_already_accepted_approval() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
    ]);
    let mut host = FakeHost::new()
        .on(A, Step::reply(effects(json!([{"type": "allow"}]))))
        .on(B, Step::reply(no_effect()).then_interrupt());
    let s = run(&engine, &mut host);
    assert_eq!(s.decision, Decision::Deny);
    assert_eq!(s.decided_by, DecidedBy::Interrupted);
    assert_eq!(outcomes(&s), [Outcome::Allow, Outcome::Interrupted]);
}

#[test]
fn interruption_during_an_unauthorized_reply_stops_the_retry() {
    let engine = load(vec![interceptor(A, "fail-open", 500)]);
    let mut host = FakeHost::new()
        .auth(A, AuthScript::Token)
        .on(A, Step::reply(unauthorized()).then_interrupt())
        .on(A, Step::reply(no_effect()));
    let s = run(&engine, &mut host);
    assert_eq!(s.decided_by, DecidedBy::Interrupted);
    assert_eq!(
        host.acquired.len(),
        1,
        "no re-acquisition after interruption"
    );
    assert_eq!(host.sent.len(), 1, "nothing is sent after interruption");
}

#[test]
fn interruption_during_a_fail_closed_failure_starts_no_observers() {
    let engine = load(vec![
        interceptor(A, "fail-closed", 500),
        interceptor(B, "fail-open", 500),
    ]);
    let mut host = FakeHost::new().on(
        A,
        Step::fail(DeliveryError::ConnectionReset).then_interrupt(),
    );
    let s = run(&engine, &mut host);
    assert_eq!(s.decision, Decision::Deny);
    assert!(host.sent_to(B).is_empty());
    assert!(s.observers.is_empty(), "interruption starts no observers");
}

#[test]
fn interrupted_before_start_sends_nothing() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
    ]);
    let mut host = FakeHost::new().interrupted_already();
    let s = run(&engine, &mut host);
    assert_eq!(s.decision, Decision::Deny);
    assert_eq!(s.decided_by, DecidedBy::Interrupted);
    assert_eq!(s.reason.as_deref(), Some(INTERRUPTED_REASON));
    assert_eq!(outcomes(&s), [Outcome::NotReached, Outcome::NotReached]);
    assert!(host.sent.is_empty() && host.acquired.is_empty());
    assert!(s.observers.is_empty());
}

// ---------------------------------------------------------------------------------------
// Short-circuit observers
// ---------------------------------------------------------------------------------------

/// Also: an interceptor a deny kept from being called and an observer of the event that
/// see the same get one encoding between them.
#[test]
fn deny_turns_uncalled_interceptors_into_observe_notifications() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-closed", 500),
        backend(C, vec![observe_sub(&["tool.before"])]),
    ]);
    let mut host = FakeHost::new().on(A, Step::reply(deny("no")).taking(10));
    let s = run(&engine, &mut host);
    assert!(host.sent_to(B).is_empty());
    assert_eq!(
        s.observers.len(),
        2,
        "the uncalled interceptor, not A, and the call's own observer"
    );
    assert_eq!(s.observers[1].backend, C);
    assert_eq!(s.observers[1].kind, ObserverKind::Owned);
    let observer = &s.observers[0];
    assert_eq!(observer.backend, B);
    let notification: Value = serde_json::from_slice(prepared(observer).bytes()).unwrap();
    assert_eq!(notification["method"], "hooks/observe");
    assert!(notification.get("id").is_none(), "a notification has no id");
    assert_eq!(notification["params"]["protocolVersion"], "draft");
    assert_eq!(notification["params"]["event"]["id"], EVENT_ID);
    assert!(notification["params"]["event"].get("native").is_none());
    assert_eq!(observer.deadline, T0 + ms(10) + ms(2_000));
    let audit = audit(&s);
    assert_eq!(audit["observers"][0]["backend"], B);
    assert_eq!(audit["observers"][0]["kind"], "short-circuit");
    assert_eq!(
        audit["observers"][0]["requestSha256"],
        prepared(observer).sha256()
    );
    // B and C see the same: one encoding between them (one batch), hashed once.
    assert_eq!(s.observers[1].message, observer.message);
    let request = host.sent[0].message.len();
    assert_eq!(
        host.hashed.get(),
        request + prepared(observer).bytes().len()
    );
}

#[test]
fn fail_closed_stop_turns_uncalled_interceptors_into_observe_notifications() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-closed", 500),
        interceptor(C, "fail-open", 500),
    ]);
    let mut host = FakeHost::new()
        .on(A, Step::fail(DeliveryError::ConnectionLost))
        .on(B, Step::fail(DeliveryError::ConnectionRefused));
    let s = run(&engine, &mut host);
    assert_synthetic_deny(&s);
    let observed: Vec<&str> = s.observers.iter().map(|o| o.backend.as_str()).collect();
    assert_eq!(observed, [C], "A and B were already called");
}

#[test]
fn short_circuit_observer_deadline_is_bounded_by_the_budget() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
    ]);
    let mut host = FakeHost::new().on(A, Step::reply(deny("no")));
    let s = run_with_budget(&engine, &mut host, T0 + ms(600));
    assert_eq!(s.observers.len(), 1);
    assert_eq!(s.observers[0].deadline, T0 + ms(600));
}

/// Observers never change a decision, also by what they take up in the instance: each
/// notification holds the event, and those past the observer limit (64 MiB for the
/// call) are withheld as they come, neither kept nor hashed, and the record says
/// `withheld`, with no digest; a later, smaller one still goes. Observers that see the
/// same get copies of one encoding, hashed once: a copy of a sent one, or of a withheld
/// one.
#[test]
fn notifications_past_the_observer_limit_are_withheld_and_recorded_so() {
    let mut hooks = vec![interceptor(A, "fail-open", 500)];
    // Observers 7 and 9 see the event with its native payload, the others without.
    hooks.extend((0..10).map(|n| {
        let mut subscription = observe_sub(&["tool.before"]);
        subscription["includeNative"] = json!(n == 7 || n == 9);
        backend(&format!("com.example.watch{n}"), vec![subscription])
    }));
    // A's failure's `hook.failure` report is small: it fits after the large ones.
    hooks.push(backend(C, vec![observe_sub(&["hook.failure"])]));
    let engine = load(hooks);
    let mut large: Value = serde_json::from_str(&event()).unwrap();
    large["tool"]["input"]["command"] = json!("x".repeat(9 << 20));
    let mut host = FakeHost::new().on(A, Step::fail(DeliveryError::ConnectionRefused));
    let s = intercept_with(&engine, &mut host, &large.to_string(), EFFECTS, None);
    assert_eq!(s.decision, Decision::Allow, "A fails open");
    let withheld: Vec<bool> = s.observers.iter().map(|o| o.withheld()).collect();
    // Seven 9 MiB notifications fit in 64 MiB; the next three would not.
    let mut expected = vec![false; 7];
    expected.extend([true, true, true, false]);
    assert_eq!(withheld, expected);
    assert_eq!(s.observers[10].kind, ObserverKind::HookFailure);
    let sent = prepared(&s.observers[0]);
    assert!(s.observers[1..7]
        .iter()
        .all(|o| o.message.as_ref() == Some(sent)));
    assert!(sent.bytes().len() > 9 << 20);
    // Hashed: A's request (which holds the event), the one view sent, the report; not
    // one per observer, nor again for a view met before another, nor the withheld view.
    assert!(host.hashed.get() < 19 << 20, "{}", host.hashed.get());
    let audit = audit(&s);
    let entries = audit["observers"].as_array().unwrap();
    let results: Vec<&Value> = entries.iter().map(|e| &e["result"]).collect();
    let withheld_word = json!("withheld");
    let mut expected = vec![&Value::Null; 7];
    expected.extend([&withheld_word, &withheld_word, &withheld_word, &Value::Null]);
    assert_eq!(results, expected);
    let digests: Vec<Option<&str>> = entries
        .iter()
        .map(|e| e.get("requestSha256").map(|d| d.as_str().unwrap()))
        .collect();
    let mut expected = vec![Some(sent.sha256()); 7];
    expected.extend([None, None, None, Some(prepared(&s.observers[10]).sha256())]);
    assert_eq!(digests, expected);
}

/// Observers never change a decision by the time they take either: each distinct view
/// of the event is an encoding, and none begins once 250 ms have passed since the
/// decision was settled (nor past the budget). Later views are withheld, with no digest;
/// a copy of a view already encoded still goes.
#[test]
fn views_not_begun_in_time_to_prepare_are_withheld() {
    // Five distinct views (each names a category of its own), then observer 0's again.
    let mut hooks = vec![interceptor(A, "fail-closed", 500)];
    hooks.extend((0..6).map(|n| {
        let mut subscription = observe_sub(&["tool.before"]);
        subscription["content"][format!("category{}", n % 5)] = json!("omit");
        backend(&format!("com.example.watch{n}"), vec![subscription])
    }));
    let engine = load(hooks);
    let results = |s: &Settlement| -> Vec<Option<String>> {
        let audit = audit(s);
        let entries = audit["observers"].as_array().unwrap().clone();
        let result = |e: &Value| e["result"].as_str().map(String::from);
        entries.iter().map(result).collect()
    };
    let withheld = Some("withheld".to_string());
    // Each view takes 100 ms to prepare: the first three begin at 0, 100 and 200 ms.
    let mut host = FakeHost::new().on(A, Step::reply(no_effect()));
    host.hash_takes_ms = 100;
    let s = run(&engine, &mut host);
    assert_eq!(s.decided_by, DecidedBy::NoObjection);
    let mut expected = vec![None; 3];
    expected.extend([withheld.clone(), withheld.clone(), None]);
    assert_eq!(results(&s), expected);
    assert_eq!(s.observers[5].message, s.observers[0].message);
    assert!(audit(&s)["observers"][3].get("requestSha256").is_none());

    // A budget that ends first ends preparing first: two views, at 0 and 100 ms.
    let mut host = FakeHost::new().on(A, Step::reply(no_effect()));
    host.hash_takes_ms = 100;
    let settled_at = T0 + ms(100);
    let s = run_with_budget(&engine, &mut host, settled_at + ms(150));
    assert_eq!(s.decided_by, DecidedBy::NoObjection);
    let mut expected = vec![None; 2];
    expected.extend([withheld.clone(), withheld.clone(), withheld, None]);
    assert_eq!(results(&s), expected);
}

/// Preparing observers takes time, and an interruption meanwhile still comes before the
/// decision is published: A's allow becomes `interrupted`; A's deny stands. Either way
/// the notifications prepared are not sent.
#[test]
fn an_interruption_while_observers_are_prepared_comes_before_the_decision() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        backend(C, vec![observe_sub(&["tool.before"])]),
    ]);
    for (reply, decided_by) in [
        (no_effect(), DecidedBy::Interrupted),
        (deny("no"), DecidedBy::BackendDeny),
    ] {
        let mut host = FakeHost::new().on(A, Step::reply(reply));
        // A's request is hashed by T0 + 100 ms, C's notification by T0 + 200 ms.
        host.hash_takes_ms = 100;
        host.interrupted_at = Some(T0 + ms(150));
        let s = run(&engine, &mut host);
        assert_eq!((s.decision, s.decided_by), (Decision::Deny, decided_by));
        assert!(s.observers.is_empty(), "{decided_by:?}");
        assert_eq!(audit(&s)["observers"], json!([]));
    }
}

/// Backend A with two `tool.before` intercept subscriptions, then `more`. The second
/// includes the native payload, the first does not: a notification shows whose view it
/// was encoded for.
fn two_interceptors_of_a(more: Vec<Value>) -> Engine {
    let mut second = intercept_sub(&["tool.before"], "fail-closed", 500);
    second["includeNative"] = json!(true);
    let mut subscriptions = vec![intercept_sub(&["tool.before"], "fail-open", 500), second];
    subscriptions.extend(more);
    load(vec![backend(A, subscriptions)])
}

/// The message of a delivery that was not withheld.
fn prepared(delivery: &ObserverDelivery) -> &Message {
    delivery
        .message
        .as_ref()
        .expect("a notification, not withheld")
}

/// A prepared observe notification, checked to be one of the call's own boundary.
fn observed_event(observer: &ahp_interceptor::settlement::ObserverDelivery) -> Value {
    let notification: Value = serde_json::from_slice(prepared(observer).bytes()).unwrap();
    assert_eq!(notification["method"], "hooks/observe");
    assert!(notification.get("id").is_none(), "a notification has no id");
    let event = notification["params"]["event"].clone();
    assert_eq!(
        (&event["id"], &event["type"]),
        (&json!(EVENT_ID), &json!("tool.before"))
    );
    event
}

/// (backend, subscription, outcome) of each interceptor's audit entry.
fn audited_subscriptions(settlement: &Settlement) -> Vec<(Value, Value, Value)> {
    let audit = audit(settlement);
    let entries = audit["interceptors"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    entries
        .iter()
        .map(|e| {
            (
                e["backend"].clone(),
                e["subscription"].clone(),
                e["outcome"].clone(),
            )
        })
        .collect()
}

/// Digest §8: interceptors run in `hooks` order, and within a backend in subscription
/// order: every subscription of the first backend before the second's, never each
/// backend's first subscription before any second one.
#[test]
fn a_backends_subscriptions_run_in_order_before_the_next_backend() {
    let engine = load(vec![
        backend(
            A,
            vec![
                intercept_sub(&["tool.before"], "fail-closed", 300),
                intercept_sub(&["tool.*"], "fail-closed", 400),
            ],
        ),
        backend(B, vec![intercept_sub(&["*"], "fail-closed", 500)]),
    ]);
    let mut host = FakeHost::new()
        .on(A, Step::reply(no_effect()))
        .on(A, Step::reply(no_effect()))
        .on(B, Step::reply(no_effect()));
    let s = run(&engine, &mut host);
    assert_no_objection(&s);
    let order: Vec<&str> = host.sent.iter().map(|sent| sent.backend.as_str()).collect();
    assert_eq!(order, [A, A, B]);
    let entries: Vec<(Value, Value)> = audited_subscriptions(&s)
        .into_iter()
        .map(|(backend, subscription, _)| (backend, subscription))
        .collect();
    assert_eq!(
        entries,
        [
            (json!(A), json!(0)),
            (json!(A), json!(1)),
            (json!(B), json!(0))
        ]
    );
    // Each was asked under its own subscription's timeout, from when it was asked (each
    // reply takes the fake host 1 ms).
    let deadlines: Vec<Instant> = host.sent.iter().map(|sent| sent.deadline).collect();
    assert_eq!(
        deadlines,
        [T0 + ms(300), T0 + ms(1 + 400), T0 + ms(2 + 500)]
    );
}

/// Conformance D3 (REG-002): two interceptors of one backend are two subscriptions. The
/// first denies: the second is never sent `hooks/intercept` but gets the boundary as one
/// best-effort `hooks/observe`, encoded for its own subscription; the first gets no
/// second copy.
#[test]
fn a_deny_turns_the_same_backends_later_interceptor_into_one_short_circuit_observe() {
    let engine = two_interceptors_of_a(vec![]);
    let mut host = FakeHost::new().on(A, Step::reply(deny("no")));
    let s = run(&engine, &mut host);
    assert_eq!(s.decided_by, DecidedBy::BackendDeny);
    // `run` checks that everything sent is a `hooks/intercept`.
    assert_eq!(host.sent_to(A).len(), 1, "one intercept, to subscription 0");
    let kinds = observer_kinds(&s);
    assert_eq!(kinds, [(A, ObserverKind::ShortCircuit)]);
    let event = observed_event(&s.observers[0]);
    assert_eq!(
        event["native"]["raw"], "NATIVE-PAYLOAD",
        "encoded for subscription 1, which includes native"
    );
    assert_eq!(
        audited_subscriptions(&s),
        [
            (json!(A), json!(0), json!("deny")),
            (json!(A), json!(1), json!("not-reached")),
        ]
    );
    assert_eq!(
        audit(&s)["observers"],
        json!([{"backend": A, "subscription": 1, "kind": "short-circuit",
                "requestSha256": prepared(&s.observers[0]).sha256()}])
    );
}

/// Conformance D4 (REG-002): D3 plus an observe subscription of the same backend. The
/// observer still gets the final view: delivery is tracked per subscription, so a
/// backend already sent a short-circuit observe is sent its own observation too.
#[test]
fn a_backends_observe_subscription_is_served_beside_its_short_circuited_interceptor() {
    let engine = two_interceptors_of_a(vec![observe_sub(&["tool.before"])]);
    let mut host = FakeHost::new().on(A, Step::reply(deny("no")));
    let s = run(&engine, &mut host);
    assert_eq!(host.sent_to(A).len(), 1);
    let kinds = observer_kinds(&s);
    assert_eq!(
        kinds,
        [(A, ObserverKind::ShortCircuit), (A, ObserverKind::Owned)]
    );
    // Each is encoded for its own subscription: only subscription 1 includes native.
    assert!(observed_event(&s.observers[0]).get("native").is_some());
    assert!(observed_event(&s.observers[1]).get("native").is_none());
    assert_eq!(
        audited_subscriptions(&s),
        [
            (json!(A), json!(0), json!("deny")),
            (json!(A), json!(1), json!("not-reached")),
        ],
        "an observe subscription is no interceptor"
    );
    let audit = audit(&s);
    let recorded: Vec<(&Value, &Value)> = audit["observers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (&o["backend"], &o["kind"]))
        .collect();
    assert_eq!(
        recorded,
        [
            (&json!(A), &json!("short-circuit")),
            (&json!(A), &json!("owned"))
        ]
    );
}

// ---------------------------------------------------------------------------------------
// hook.failure (digest §14, conformance O10)
// ---------------------------------------------------------------------------------------

/// The `hook.failure` notifications of a settlement, as (backend, event) pairs.
fn hook_failures(settlement: &Settlement) -> Vec<(String, Value)> {
    settlement
        .observers
        .iter()
        .filter(|o| o.kind == ObserverKind::HookFailure)
        .map(|o| {
            let notification: Value = serde_json::from_slice(prepared(o).bytes()).unwrap();
            assert_eq!(notification["method"], "hooks/observe");
            assert!(notification.get("id").is_none(), "a notification has no id");
            (o.backend.clone(), notification["params"]["event"].clone())
        })
        .collect()
}

/// A fail-open failure is reported to every other backend observing `hook.failure`
/// (exactly or by wildcard), never to the one that failed, as a `hook.failure` event the
/// component's own reading accepts: the parent's source and session, its time plus the
/// call's elapsed time, the failure's class as the reason, no backend text.
#[test]
fn a_fail_open_failure_is_reported_to_the_other_backends_hook_failure_observers() {
    let engine = load(vec![
        backend(
            A,
            vec![
                intercept_sub(&["tool.before"], "fail-open", 500),
                observe_sub(&["hook.failure"]),
            ],
        ),
        backend(B, vec![observe_sub(&["hook.failure"])]),
        backend(C, vec![observe_sub(&["*"])]),
    ]);
    let mut host = FakeHost::new().on(A, Step::reply(rpc_error(-32000)).taking(250));
    let s = run(&engine, &mut host);
    assert_no_objection(&s);
    let reports = hook_failures(&s);
    let to: Vec<&str> = reports
        .iter()
        .map(|(backend, _)| backend.as_str())
        .collect();
    assert_eq!(
        to,
        [B, C],
        "the other observers, in registration order; never A"
    );
    let event = &reports[0].1;
    assert_eq!(
        *event,
        json!({
            "id": format!("{EVENT_ID}/hook.failure/0"),
            "source": "urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d",
            "time": "2026-08-24T08:51:14.250Z",
            "type": "hook.failure",
            "session": {"id": "sess_1"},
            "failure": {"backendId": A, "reason": "jsonrpc-error", "policy": "fail-open"},
            "parentEventId": EVENT_ID,
        })
    );
    assert_eq!(reports[1].1, *event, "the same event for every observer");
    assert!(!event.to_string().contains(SECRET));
    Event::parse_any(&event.to_string()).expect("a valid hook.failure event");
    // A parent that names its harness: so does its report (the SDKs' schemas require it).
    let mut named: Value = serde_json::from_str(&self::event()).unwrap();
    named["harness"] = json!({"name": "example", "version": "1.0"});
    let mut host = FakeHost::new().on(A, Step::reply(rpc_error(-32000)).taking(250));
    let s = intercept_with(&engine, &mut host, &named.to_string(), EFFECTS, None);
    let reports = hook_failures(&s);
    assert_eq!(
        reports[0].1["harness"], named["harness"],
        "{:?}",
        reports[0]
    );
    // C observes everything: it also gets the call's own event, as an owned observer.
    let kinds = observer_kinds(&s);
    assert_eq!(
        kinds,
        [
            (C, ObserverKind::Owned),
            (B, ObserverKind::HookFailure),
            (C, ObserverKind::HookFailure)
        ]
    );
    // The audit says which subscription each went to, and which failure a report is of.
    let entries: Vec<(Value, Value, Value)> = audit(&s)["observers"]
        .as_array()
        .expect("observers")
        .iter()
        .map(|o| {
            (
                o["kind"].clone(),
                o["subscription"].clone(),
                o["reports"].clone(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            (json!("owned"), json!(0), Value::Null),
            (json!("hook-failure"), json!(0), json!(0)),
            (json!("hook-failure"), json!(0), json!(0)),
        ]
    );
    assert_eq!(s.observers[1].deadline, T0 + ms(250) + ms(2_000));
}

/// Each failure settled by policy is reported once, under its own id, with its own
/// policy: a fail-open one, then the fail-closed one that stops the chain; each dated
/// when it was settled (the parent's time plus the time since the call began), not when
/// the chain ended.
#[test]
fn every_failure_settled_by_policy_is_reported_with_its_own_policy() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-closed", 500),
        backend(C, vec![observe_sub(&["hook.failure"])]),
    ]);
    let mut host = FakeHost::new()
        .on(A, Step::hang())
        .on(B, Step::fail(DeliveryError::ConnectionRefused));
    let s = run(&engine, &mut host);
    assert_synthetic_deny(&s);
    let reports = hook_failures(&s);
    let summary: Vec<(String, Value, Value)> = reports
        .iter()
        .map(|(to, e)| (to.clone(), e["id"].clone(), e["failure"].clone()))
        .collect();
    assert_eq!(
        summary,
        [
            (
                C.to_string(),
                json!(format!("{EVENT_ID}/hook.failure/0")),
                json!({"backendId": A, "reason": "deadline-exceeded", "policy": "fail-open"})
            ),
            (
                C.to_string(),
                json!(format!("{EVENT_ID}/hook.failure/1")),
                json!({"backendId": B, "reason": "connection-refused", "policy": "fail-closed"})
            ),
        ]
    );
    let times: Vec<&Value> = reports.iter().map(|(_, event)| &event["time"]).collect();
    assert_eq!(
        times,
        ["2026-08-24T08:51:14.500Z", "2026-08-24T08:51:14.501Z"]
    );
    // Two reports to the same subscription, told apart in the audit by what they report.
    let audited = audit(&s);
    let reported: Vec<&Value> = audited["observers"]
        .as_array()
        .expect("observers")
        .iter()
        .map(|o| &o["reports"])
        .collect();
    assert_eq!(reported, [&json!(0), &json!(1)]);
}

/// Only an operational failure settled by policy is reported: not a backend's deny or
/// reply, not an interruption, not a budget that ran out (such a call starts no new
/// observation), and nothing without a `hook.failure` observer.
#[test]
fn only_a_failure_settled_by_policy_is_reported() {
    let observed = |first: Value| {
        load(vec![
            first,
            backend(B, vec![observe_sub(&["hook.failure"])]),
        ])
    };
    let engine = observed(interceptor(A, "fail-closed", 500));
    for step in [Step::reply(deny("no")), Step::reply(no_effect())] {
        let s = run(&engine, &mut FakeHost::new().on(A, step));
        assert_eq!(hook_failures(&s), [], "{:?}", s.decided_by);
    }
    let interrupted = Step::fail(DeliveryError::ConnectionLost).then_interrupt();
    let s = run(&engine, &mut FakeHost::new().on(A, interrupted));
    assert_eq!(s.decided_by, DecidedBy::Interrupted);
    assert_eq!(hook_failures(&s), []);
    let s = run_with_budget(
        &engine,
        &mut FakeHost::new().on(A, Step::hang()),
        T0 + ms(300),
    );
    assert_eq!(s.decided_by, DecidedBy::BudgetExpired);
    assert_eq!(hook_failures(&s), []);
    let unobserved = load(vec![interceptor(A, "fail-open", 500)]);
    let failed = Step::fail(DeliveryError::ConnectionRefused);
    let s = run(&unobserved, &mut FakeHost::new().on(A, failed));
    assert_eq!(outcomes(&s), [Outcome::FailedOpen]);
    assert!(s.observers.is_empty());
}

/// A call whose budget ran out after an interceptor failed open reports nothing: not the
/// failure that was settled by policy before the budget ended (no `hook.failure`), and
/// not the event to its owned observers. Nothing is sent, and nothing is recorded
/// withheld either.
#[test]
fn a_call_out_of_budget_after_a_failure_settled_by_policy_reports_nothing() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
        backend(C, vec![observe_sub(&["hook.failure", "tool.before"])]),
    ]);
    // A is refused just inside the budget; B, a moment later, finds it spent.
    let refused = Step::fail(DeliveryError::ConnectionRefused)
        .taking(99)
        .then_lag(5);
    let s = run_with_budget(&engine, &mut FakeHost::new().on(A, refused), T0 + ms(100));
    assert_eq!(s.decided_by, DecidedBy::BudgetExpired);
    assert_eq!(outcomes(&s)[0], Outcome::FailedOpen);
    assert!(s.observers.is_empty(), "{:?}", s.observers);
}

/// A `hook.failure` report is made after the decision, and making one copies the
/// parent's session and harness, which can be MiB: none is made once the time to prepare
/// observers (250 ms) is over, so many failures cannot hold the decision past it. Here
/// encoding A's report takes 300 ms: B's is withheld, recorded `withheld` with no digest,
/// and the call, which made only A's, allocates no more than one where B replied.
#[test]
fn hook_failure_reports_not_begun_in_time_to_prepare_are_withheld_unmade() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
        backend(C, vec![observe_sub(&["hook.failure"])]),
    ]);
    let session = 4 << 20;
    let mut large: Value = serde_json::from_str(&event()).unwrap();
    large["session"]["notes"] = json!("x".repeat(session));
    let large = large.to_string();
    // One call on `engine` where B's step is `b`, each hashing taking 300 ms: what it
    // settles, and what it allocates.
    let call = |b: Step| {
        let mut host = FakeHost::new()
            .on(A, Step::fail(DeliveryError::ConnectionRefused))
            .on(B, b);
        host.hash_takes_ms = 300;
        let before = allocated();
        let s = engine
            .intercept(&mut host, &large, &[], None)
            .expect("valid");
        (s, allocated() - before)
    };
    let (s, spent) = call(Step::fail(DeliveryError::ConnectionRefused));
    assert_no_objection(&s);
    assert_eq!(outcomes(&s), [Outcome::FailedOpen, Outcome::FailedOpen]);
    let delivered: Vec<(&str, ObserverKind, Option<usize>, bool)> = s
        .observers
        .iter()
        .map(|o| (o.backend.as_str(), o.kind, o.reports, o.withheld()))
        .collect();
    assert_eq!(
        delivered,
        [
            (C, ObserverKind::HookFailure, Some(0), false),
            (C, ObserverKind::HookFailure, Some(1), true),
        ]
    );
    let notification: Value = serde_json::from_slice(prepared(&s.observers[0]).bytes()).unwrap();
    assert_eq!(
        notification["params"]["event"]["id"],
        format!("{EVENT_ID}/hook.failure/0")
    );
    assert_eq!(s.observers[1].deadline, s.observers[0].deadline);
    assert_eq!(
        audit(&s)["observers"],
        json!([
            {"backend": C, "subscription": 0, "kind": "hook-failure", "reports": 0,
             "requestSha256": prepared(&s.observers[0]).sha256()},
            {"backend": C, "subscription": 0, "kind": "hook-failure", "reports": 1,
             "result": "withheld"},
        ])
    );
    let (one, spent_on_one) = call(Step::reply(no_effect()));
    assert_eq!(hook_failures(&one).len(), 1);
    assert!(
        spent < spent_on_one + session,
        "{spent} bytes allocated, {spent_on_one} with one report: B's was made"
    );
}

// ---------------------------------------------------------------------------------------
// Dispatch
// ---------------------------------------------------------------------------------------

#[test]
fn wildcard_subscriptions_match_tool_before() {
    let engine = load(vec![
        backend(A, vec![intercept_sub(&["tool.*"], "fail-open", 500)]),
        backend(B, vec![intercept_sub(&["*"], "fail-open", 500)]),
        backend(C, vec![intercept_sub(&["model.*"], "fail-open", 500)]),
    ]);
    let mut host = FakeHost::new()
        .on(A, Step::reply(no_effect()))
        .on(B, Step::reply(no_effect()));
    let s = run(&engine, &mut host);
    let asked: Vec<&str> = host.sent.iter().map(|x| x.backend.as_str()).collect();
    assert_eq!(
        asked,
        [A, B],
        "in registration order; model.* does not match"
    );
    assert_eq!(s.interceptors.len(), 2);
}

#[test]
fn observe_only_backend_never_receives_intercept() {
    let engine = load(vec![
        backend(A, vec![observe_sub(&["tool.before"])]),
        backend(B, vec![observe_sub(&["*"])]),
    ]);
    let mut host = FakeHost::new();
    let s = run(&engine, &mut host);
    assert!(host.sent.is_empty() && host.acquired.is_empty());
    assert!(s.interceptors.is_empty());
    assert_no_objection(&s);
    let deliveries = engine
        .observe(&FakeHost::new(), T0, &event(), None)
        .expect("valid event");
    let observed: Vec<&str> = deliveries.iter().map(|d| d.backend.as_str()).collect();
    assert_eq!(observed, [A, B]);
    for delivery in &deliveries {
        let v: Value = serde_json::from_slice(prepared(delivery).bytes()).unwrap();
        assert_eq!(v["method"], "hooks/observe");
        assert!(v.get("id").is_none());
    }
}

#[test]
fn no_matching_interceptor_sends_nothing_and_has_no_objection() {
    let engine = load(vec![backend(
        A,
        vec![intercept_sub(&["session.start"], "fail-closed", 500)],
    )]);
    let mut host = FakeHost::new();
    let s = run(&engine, &mut host);
    assert!(host.sent.is_empty());
    assert_no_objection(&s);
}

#[test]
fn intercept_request_correlates_ids_and_advertises_exactly_the_harness_effects() {
    let engine = load(vec![interceptor(A, "fail-closed", 500)]);
    let event = event_with_id("01J8Z3K5N0Q6Y7R9T2V4W6X8Y0");
    let body = json!({"jsonrpc": "2.0", "id": "01J8Z3K5N0Q6Y7R9T2V4W6X8Y0",
                      "result": {"protocolVersion": "draft", "effects": []}});
    let mut host = FakeHost::new().on(A, Step::reply(json_reply(body)));
    let advertised = ["ask", "deny", "message"];
    let s = intercept_with(&engine, &mut host, &event, &advertised, None);
    assert_no_objection(&s);
    let request = host.sent[0].json();
    assert_eq!(request["id"], "01J8Z3K5N0Q6Y7R9T2V4W6X8Y0");
    assert_eq!(request["params"]["protocolVersion"], "draft");
    assert_eq!(
        request["params"]["capabilities"]["effects"],
        json!(["ask", "deny", "message"])
    );
    assert_eq!(request["params"]["event"]["session"]["id"], "sess_1");
    assert_eq!(request["params"]["event"]["call"]["id"], "call_1");
    assert_eq!(
        s.interceptors[0].request_sha256.as_deref().map(str::len),
        Some(64)
    );
}

#[test]
fn native_payload_is_sent_only_to_subscriptions_that_include_it() {
    let mut with_native = intercept_sub(&["tool.before"], "fail-open", 500);
    with_native["includeNative"] = json!(true);
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        backend(B, vec![with_native]),
    ]);
    let mut host = FakeHost::new()
        .on(A, Step::reply(no_effect()))
        .on(B, Step::reply(no_effect()));
    run(&engine, &mut host);
    assert!(host.sent_to(A)[0].json()["params"]["event"]
        .get("native")
        .is_none());
    assert_eq!(
        host.sent_to(B)[0].json()["params"]["event"]["native"]["raw"],
        "NATIVE-PAYLOAD"
    );
}

/// The provider's native payload holds the operation as the harness had it: once a
/// backend's modification is accepted, a later subscription that includes `native` is
/// sent the effective event without it, never the original input by that way (each
/// later interceptor sees the accepted effective value, never the original).
#[test]
fn native_is_not_sent_once_the_event_is_modified() {
    let mut with_native = intercept_sub(&["tool.before"], "fail-open", 500);
    with_native["includeNative"] = json!(true);
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        backend(B, vec![with_native]),
    ]);
    let redacted = effects(json!([{"type": "modify", "target": "input",
        "operation": "replace", "value": {"command": "ls"}}]));
    let mut host = FakeHost::new()
        .on(A, Step::reply(redacted))
        .on(B, Step::reply(no_effect()));
    engine
        .intercept(&mut host, &event(), &[], None)
        .expect("valid");
    let b_saw = host.sent_to(B)[0].json()["params"]["event"].clone();
    assert_eq!(b_saw["tool"]["input"], json!({"command": "ls"}), "{b_saw}");
    assert!(b_saw.get("native").is_none(), "{b_saw}");
}

// ---------------------------------------------------------------------------------------
// Invalid harness inputs: errors naming the field, and nothing sent
// ---------------------------------------------------------------------------------------

fn intercept_error(event: &str, effects: &[&str]) -> (Vec<String>, FakeHost) {
    let engine = load(vec![interceptor(A, "fail-closed", 500)]);
    let mut host = FakeHost::new().on(A, Step::reply(no_effect()));
    let kinds: Vec<EffectKind> = effects
        .iter()
        .map(|e| EffectKind::parse(e).expect("an effect word"))
        .collect();
    let problems = engine
        .intercept(&mut host, event, &kinds, None)
        .expect_err("invalid call");
    (problems.iter().map(ToString::to_string).collect(), host)
}

#[test]
fn effects_without_deny_are_rejected_naming_the_field() {
    let (problems, host) = intercept_error(&event(), &["allow"]);
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("effects") && p.contains("deny")),
        "{problems:?}"
    );
    assert!(host.sent.is_empty());
}

#[test]
fn an_effect_the_event_does_not_declare_is_rejected_naming_the_field() {
    let (problems, host) = intercept_error(&event(), &["deny", "deny"]);
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("effects[1]") && p.contains("twice")),
        "{problems:?}"
    );
    assert!(host.sent.is_empty());
}

#[test]
fn invalid_event_is_rejected_naming_the_field() {
    let mut bad: Value = serde_json::from_str(&event()).unwrap();
    bad["tool"]["input"] = json!("rm -rf build");
    bad.as_object_mut().unwrap().remove("call");
    let (problems, host) = intercept_error(&bad.to_string(), EFFECTS);
    assert!(
        problems.iter().any(|p| p.starts_with("event/tool/input")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with("event/call")),
        "{problems:?}"
    );
    assert!(host.sent.is_empty() && host.acquired.is_empty());
}

// ---------------------------------------------------------------------------------------
// Retries: same bytes, inside the original deadline, only after transient failures
// ---------------------------------------------------------------------------------------

/// One backend, `A`, with a fail-closed intercept subscription of 500 ms to `kind`,
/// declared as the harness intercepts it.
fn one_backend_on(kind: InterceptableEvent) -> Engine {
    let hooks = vec![backend(
        A,
        vec![intercept_sub(&[kind.as_str()], "fail-closed", 500)],
    )];
    Engine::load_declared(&registration(hooks), declared(&[kind])).expect("valid")
}

fn one_backend(policy: &str, timeout_ms: u64) -> Engine {
    load(vec![interceptor(A, policy, timeout_ms)])
}

#[test]
fn a_reset_is_retried_with_byte_identical_bytes_and_then_accepted() {
    let engine = one_backend("fail-closed", 1_000);
    let mut host = FakeHost::new()
        .retries(2, 10)
        .on(A, Step::fail(DeliveryError::ConnectionReset))
        .on(A, Step::reply(no_effect()));
    let settled = run(&engine, &mut host);
    assert_eq!(settled.decision, Decision::Allow);
    let sent = host.sent_to(A);
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[0].message, sent[1].message,
        "a retry resends the exact bytes"
    );
    assert_eq!(
        sent[0].deadline, sent[1].deadline,
        "a retry never extends the deadline"
    );
    let audit = audit(&settled);
    let attempts = audit["interceptors"][0]["attempts"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["result"], "connection-reset");
    assert_eq!(attempts[1]["result"], "accepted");
    assert_eq!(attempts[0]["requestSha256"], attempts[1]["requestSha256"]);
    assert_eq!(
        attempts[0]["requestSha256"],
        audit["interceptors"][0]["requestSha256"]
    );
}

#[test]
fn without_configured_retries_a_transient_failure_is_settled_at_once() {
    let engine = one_backend("fail-closed", 1_000);
    let mut host = FakeHost::new().on(A, Step::fail(DeliveryError::ConnectionRefused));
    let settled = run(&engine, &mut host);
    assert_eq!(settled.decided_by, DecidedBy::SyntheticDeny);
    assert_eq!(host.sent_to(A).len(), 1);
    assert_eq!(host.retry_asks.len(), 1, "the host was asked and said no");
}

#[test]
fn transient_statuses_and_backend_unavailable_are_retried() {
    for reply in [
        http(503, "application/json", ""),
        http(502, "text/plain", "bad gateway"),
        rpc_error(-32003),
    ] {
        let engine = one_backend("fail-closed", 1_000);
        let mut host = FakeHost::new()
            .retries(1, 5)
            .on(A, Step::reply(reply.clone()))
            .on(A, Step::reply(no_effect()));
        let settled = run(&engine, &mut host);
        assert_eq!(settled.decision, Decision::Allow, "{reply:?}");
        assert_eq!(host.sent_to(A).len(), 2);
    }
}

/// Each attempt keeps its own status and JSON-RPC code: a 503 retried into a reset is
/// still on record as a 503.
#[test]
fn each_attempt_keeps_its_own_status_and_code() {
    let engine = one_backend("fail-open", 1_000);
    let unavailable = Reply {
        status: Some(503),
        ..rpc_error(-32003)
    };
    let mut host = FakeHost::new()
        .retries(1, 5)
        .on(A, Step::reply(unavailable))
        .on(A, Step::fail(DeliveryError::ConnectionReset));
    let settled = run(&engine, &mut host);
    let attempts = &audit(&settled)["interceptors"][0]["attempts"];
    assert_eq!(
        (
            &attempts[0]["result"],
            &attempts[0]["httpStatus"],
            &attempts[0]["rpcCode"]
        ),
        (&json!("http-status"), &json!(503), &json!(-32003))
    );
    assert_eq!(attempts[1]["result"], "connection-reset");
    assert!(attempts[1].get("httpStatus").is_none(), "{attempts}");
    assert!(attempts[1].get("rpcCode").is_none(), "{attempts}");
}

#[test]
fn deny_empty_success_and_rejected_content_are_never_retried() {
    let replies = [
        deny("no"),
        no_effect(),
        http(500, "application/json", ""),
        http(200, "application/json", "{not json"),
        rpc_error(-32004),
    ];
    for reply in replies {
        let engine = one_backend("fail-open", 1_000);
        let mut host = FakeHost::new()
            .retries(5, 1)
            .on(A, Step::reply(reply.clone()));
        run(&engine, &mut host);
        assert_eq!(host.sent_to(A).len(), 1, "retried {reply:?}");
        assert!(host.retry_asks.is_empty(), "asked to retry {reply:?}");
    }
}

#[test]
fn retries_stop_at_the_original_deadline() {
    let engine = one_backend("fail-closed", 250);
    let mut host = FakeHost::new().retries(100, 100);
    for _ in 0..10 {
        host = host.on(A, Step::fail(DeliveryError::ConnectionRefused));
    }
    let settled = run(&engine, &mut host);
    assert_eq!(settled.decided_by, DecidedBy::SyntheticDeny);
    // Attempts at +0, +100, +200 ms; a fourth would start at +300 ms, past the deadline.
    assert_eq!(host.sent_to(A).len(), 3);
    assert!(host.now.get() <= T0 + ms(250));
}

#[test]
fn interruption_during_backoff_ends_the_call_as_interrupted() {
    let engine = one_backend("fail-open", 1_000);
    let mut host = FakeHost::new().retries(3, 10).on(
        A,
        Step {
            interrupts: true,
            ..Step::fail(DeliveryError::ConnectionReset)
        },
    );
    let settled = run(&engine, &mut host);
    assert_eq!(settled.decision, Decision::Deny);
    assert_eq!(settled.decided_by, DecidedBy::Interrupted);
    assert_eq!(host.sent_to(A).len(), 1);
}

/// The host grants a retry, and the call is interrupted while it waits out the backoff:
/// no second attempt, and the interceptor ended interrupted, not failed open (the end of
/// the run would deny the call either way; the entry says which it was).
#[test]
fn interruption_inside_a_granted_backoff_stops_the_retry() {
    let engine = one_backend("fail-open", 1_000);
    let mut host = FakeHost::new()
        .retries(3, 100)
        .on(A, Step::fail(DeliveryError::ConnectionReset));
    host.interrupted_at = Some(T0 + ms(50));
    let settled = run(&engine, &mut host);
    assert_eq!(
        (settled.decision, settled.decided_by),
        (Decision::Deny, DecidedBy::Interrupted)
    );
    assert_eq!(host.sent_to(A).len(), 1);
    assert_eq!(host.retry_asks.len(), 1, "the backoff was granted once");
    let entry = &audit(&settled)["interceptors"][0];
    assert_eq!(entry["outcome"], "interrupted", "{entry}");
    assert!(entry.get("failure").is_none(), "{entry}");
}

/// The settlement's audit record as JSON, as the host writes it.
fn audit(settlement: &Settlement) -> Value {
    serde_json::to_value(settlement.record()).expect("a record serializes")
}

// ---------------------------------------------------------------------------------------
// Every interceptable event, the capability handshake, the effect vocabulary
// ---------------------------------------------------------------------------------------

/// A valid `tool.after` (the upstream observe fixture's event) with id `evt_1`.
fn tool_after() -> Value {
    let text =
        include_str!("../../tests/upstream/fixtures/draft/http/observe-tool-after.valid.json");
    let mut event = serde_json::from_str::<Value>(text).unwrap()["params"]["event"].clone();
    event["id"] = json!(EVENT_ID);
    event["items"] = json!([{"id": "out1", "role": "tool", "parts": []}]);
    event
}

fn registration(hooks: Vec<Value>) -> String {
    json!({"protocolVersion": "draft", "hooks": hooks}).to_string()
}

fn declared(events: &[InterceptableEvent]) -> Vec<EventCapability> {
    events
        .iter()
        .map(|&e| ahp_interceptor::events::full(e))
        .collect()
}

fn settle(engine: &Engine, host: &mut FakeHost, event: &Value) -> Settlement {
    engine
        .intercept(host, &event.to_string(), &[], None)
        .expect("valid call")
}

#[test]
fn an_undeclared_exact_event_is_refused_at_load_naming_its_path() {
    let hooks = vec![backend(
        A,
        vec![intercept_sub(
            &["tool.before", "model.request.before"],
            "fail-closed",
            500,
        )],
    )];
    let problems = Engine::load_declared(
        &registration(hooks),
        declared(&[InterceptableEvent::ToolBefore]),
    )
    .expect_err("model.request.before is not declared");
    let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        problems,
        ["/hooks/0/subscriptions/0/events/1: \"model.request.before\" is not declared interceptable by this harness"]
    );
}

/// Undeclared events are listed as a registration's own problems are: the first hundred,
/// then one line counting the rest (a registration can hold hundreds of thousands).
#[test]
fn undeclared_events_are_listed_a_hundred_at_most() {
    let subscriptions = (0..150)
        .map(|_| intercept_sub(&["model.request.before"], "fail-closed", 500))
        .collect();
    let problems = Engine::load_declared(
        &registration(vec![backend(A, subscriptions)]),
        declared(&[InterceptableEvent::ToolBefore]),
    )
    .expect_err("model.request.before is not declared");
    assert_eq!(problems.len(), 101);
    assert_eq!(problems[99].path, "/hooks/0/subscriptions/99/events/0");
    assert_eq!(problems[100].path, "");
    assert_eq!(
        problems[100].rule,
        "50 more problems not listed (only the first 100 are)"
    );
}

#[test]
fn a_wildcard_covers_only_declared_events() {
    let hooks = vec![backend(A, vec![intercept_sub(&["*"], "fail-closed", 500)])];
    let engine = Engine::load_declared(
        &registration(hooks.clone()),
        declared(&[InterceptableEvent::ToolBefore]),
    )
    .expect("the wildcard reaches tool.before");
    let mut host = FakeHost::new();
    let problems = engine
        .intercept(&mut host, &tool_after().to_string(), &[], None)
        .expect_err("tool.after is not declared");
    assert_eq!(problems[0].path, "event/type");
    assert!(host.sent.is_empty());
    let family = vec![backend(
        A,
        vec![intercept_sub(&["model.*"], "fail-closed", 500)],
    )];
    let problems = Engine::load_declared(
        &registration(family),
        declared(&[InterceptableEvent::ToolBefore]),
    )
    .expect_err("model.* reaches nothing declared");
    assert_eq!(problems[0].path, "/hooks/0/subscriptions/0/events/0");
}

/// An event an interceptor selects is for `intercept`: observed, it would reach none of
/// its interceptors (a fail-closed redaction at tool.after, or every policy at
/// tool.before) and the call would go on unchecked. A denied tool's tool.after, how a
/// denial is observed, is a decision already made; an undeclared type, which `intercept`
/// refuses, is observed.
#[test]
fn observe_refuses_an_event_an_interceptor_selects_but_a_denied_tools_after() {
    let hooks = vec![
        backend(A, vec![intercept_sub(&["tool.after"], "fail-closed", 500)]),
        backend(B, vec![observe_sub(&["tool.*"])]),
        backend(C, vec![intercept_sub(&["tool.before"], "fail-closed", 500)]),
    ];
    let engine = load(hooks);
    for event in [event(), tool_after().to_string()] {
        let problems = engine
            .observe(&FakeHost::new(), T0, &event, None)
            .expect_err("an intercepted event");
        let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("event/type: \"tool.")
                && problems[0].ends_with("\" is intercepted by this registration: use intercept"),
            "{problems:?}"
        );
    }
    let mut denied = tool_after();
    denied["outcome"] = json!("denied");
    denied["execution"] = json!({"status": "skipped", "reason": "policy"});
    denied["items"] = json!([]);
    let deliveries = engine
        .observe(&FakeHost::new(), T0, &denied.to_string(), None)
        .expect("a denial is observed");
    let observed: Vec<&str> = deliveries.iter().map(|d| d.backend.as_str()).collect();
    assert_eq!(observed, [B]);

    let wildcard = vec![
        backend(A, vec![intercept_sub(&["*"], "fail-closed", 500)]),
        backend(B, vec![observe_sub(&["tool.*"])]),
    ];
    let engine = Engine::load_declared(
        &registration(wildcard),
        declared(&[InterceptableEvent::ToolBefore]),
    )
    .expect("the wildcard reaches tool.before");
    let deliveries = engine
        .observe(&FakeHost::new(), T0, &tool_after().to_string(), None)
        .expect("tool.after is not declared: nothing intercepts it");
    assert_eq!(deliveries.len(), 1);
    let problems = engine
        .observe(&FakeHost::new(), T0, &event(), None)
        .expect_err("tool.before is declared and intercepted");
    assert_eq!(problems[0].path, "event/type");
}

#[test]
fn params_capabilities_are_exactly_the_declaration_narrowed_by_the_call() {
    let mut capability = ahp_interceptor::events::full(InterceptableEvent::ToolAfter);
    capability.modify = Some(ModifyCapability {
        target: ModifyTarget::Output,
        replace: true,
        merge: false,
    });
    let hooks = vec![backend(
        A,
        vec![intercept_sub(&["tool.after"], "fail-closed", 500)],
    )];
    let engine = Engine::load_declared(&registration(hooks), vec![capability]).expect("valid");
    let mut host = FakeHost::new()
        .on(A, Step::reply(no_effect()))
        .on(A, Step::reply(no_effect()));
    settle(&engine, &mut host, &tool_after());
    assert_eq!(
        host.sent[0].json()["params"]["capabilities"],
        json!({"effects": ["modify", "inject", "flow", "message"],
               "modify": {"output": {"replace": true, "merge": false}},
               "flow": {"operations": ["stop"]},
               "inject": {"context": {"append": true, "deliverAt": ["now", "next_turn"]}}})
    );
    engine
        .intercept(
            &mut host,
            &tool_after().to_string(),
            &[EffectKind::Message],
            None,
        )
        .expect("narrower");
    assert_eq!(
        host.sent[1].json()["params"]["capabilities"],
        json!({"effects": ["message"]})
    );
}

#[test]
fn a_deny_on_tool_after_is_unadvertised_and_rejected_whole() {
    let hooks = vec![backend(
        A,
        vec![intercept_sub(&["tool.after"], "fail-open", 500)],
    )];
    let engine = Engine::load(&registration(hooks)).expect("valid");
    let reply = effects(json!([{"type": "message", "text": "m"}, {"type": "deny", "reason": "r"}]));
    let mut host = FakeHost::new().on(A, Step::reply(reply));
    let s = settle(&engine, &mut host, &tool_after());
    assert_eq!(s.decision, Decision::Allow);
    assert_eq!(outcomes(&s), [Outcome::FailedOpen]);
    assert_eq!(failure_class(&s, 0), "invalid-effects");
    assert!(
        s.messages.is_empty(),
        "nothing of a rejected response is published"
    );
}

#[test]
fn fail_closed_on_an_event_without_deny_still_denies() {
    let hooks = vec![backend(
        A,
        vec![intercept_sub(&["tool.after"], "fail-closed", 500)],
    )];
    let engine = Engine::load(&registration(hooks)).expect("valid");
    let mut host = FakeHost::new().on(A, Step::fail(DeliveryError::ConnectionRefused));
    let s = settle(&engine, &mut host, &tool_after());
    assert_synthetic_deny(&s);
}

#[test]
fn two_denies_under_fail_open_are_a_deny() {
    let engine = load(vec![interceptor(A, "fail-open", 500)]);
    let reply = effects(json!([{"type": "deny", "reason": "a"}, {"type": "deny", "reason": "b"}]));
    let mut host = FakeHost::new().on(A, Step::reply(reply));
    let s = run(&engine, &mut host);
    assert_eq!(
        (s.decision, s.decided_by),
        (Decision::Deny, DecidedBy::BackendDeny)
    );
    assert_eq!(s.reason.as_deref(), Some("a"));
}

/// Two decisions that disagree in one reply (deny with ask or allow, ask with allow), in
/// any order, are conflicting effects: the reply is rejected whole and settled by the
/// subscription's policy — a synthetic deny under fail-closed, no objection under
/// fail-open — and its deny is never salvaged (digest §4.3, DESIGN §5).
#[test]
fn decisions_that_disagree_in_one_response_are_invalid_effects() {
    let deny = json!({"type": "deny", "reason": "held back"});
    let (ask, allow) = (json!({"type": "ask"}), json!({"type": "allow"}));
    for policy in ["fail-closed", "fail-open"] {
        let engine = load(vec![interceptor(A, policy, 500)]);
        for reply in [
            json!([deny, ask]),
            json!([ask, deny]),
            json!([allow, deny]),
            json!([ask, allow]),
        ] {
            let mut host = FakeHost::new().on(A, Step::reply(effects(reply.clone())));
            let s = intercept_with(
                &engine,
                &mut host,
                &event(),
                &["deny", "ask", "allow"],
                None,
            );
            match policy {
                "fail-closed" => assert_synthetic_deny(&s),
                _ => assert_eq!(
                    (s.decision, s.decided_by),
                    (Decision::Allow, DecidedBy::NoObjection),
                    "{reply}: {}",
                    audit(&s)
                ),
            }
            assert_eq!(failure_class(&s, 0), "invalid-effects", "{reply}");
            assert_eq!(
                audited(&s, 0)["failure"]["detail"],
                "conflicting-effects",
                "{reply}"
            );
        }
    }
}

/// A backend's injected context must be canonical messages (content-item.schema.json):
/// an empty object or a bare part is rejected with the whole reply, by policy.
#[test]
fn an_injected_value_off_the_message_schema_is_rejected_whole() {
    let engine = load(vec![interceptor(A, "fail-closed", 500)]);
    // A deny that stands only if the inject beside it is valid.
    let settle = |value: &Value| {
        let reply = effects(json!([
            {"type": "deny", "reason": "kept only with a valid reply"},
            {"type": "inject", "target": "context", "operation": "append",
             "deliverAt": "now", "value": value}
        ]));
        let mut host = FakeHost::new().on(A, Step::reply(reply));
        intercept_with(&engine, &mut host, &event(), &["deny", "inject"], None)
    };
    let bare_part = json!({"id": "p", "kind": "text", "mediaType": "text/plain",
                           "selection": "body", "text": "bare"});
    for value in [json!([{}]), json!([bare_part])] {
        let s = settle(&value);
        assert_synthetic_deny(&s);
        assert_eq!(failure_class(&s, 0), "invalid-effects", "{value}");
        let failure = &audited(&s, 0)["failure"];
        assert_eq!(failure["detail"], "malformed-effect", "{value}: {failure}");
    }
    // The same reply with canonical messages is accepted: the deny stands.
    let message = json!([{"id": "m", "role": "system", "parts": [{"id": "p", "kind": "text",
        "mediaType": "text/plain", "selection": "body", "text": "context"}]}]);
    assert_eq!(settle(&message).decided_by, DecidedBy::BackendDeny);
}

/// An event just under the weight limit is worked on whole: its document, parsed again
/// from its text for content selection and for a modification, is the event's own (an
/// empty one would send the backend content its subscription omits and drop the change).
#[test]
fn an_event_at_the_weight_limit_is_selected_and_modified_whole() {
    let mut subscription = intercept_sub(&["tool.before"], "fail-closed", 500);
    subscription["content"] = json!({"default": "omit"});
    let engine = load(vec![backend(A, vec![subscription])]);
    let mut event: Value = serde_json::from_str(&event()).unwrap();
    let zeros = ahp_interceptor::json::MAX_PARSED_VALUES - 1_000;
    event["extensions"] = json!({
        "com.example.notes": {"id": "p1", "kind": "text", "mediaType": "text/plain",
                              "selection": "body", "text": "BODY-THE-SUBSCRIPTION-OMITS"},
        "com.example.xs": vec![0; zeros],
    });
    let modify = modify_input("replace", json!({"command": "ls"}));
    let mut host = FakeHost::new().on(A, Step::reply(modify));
    let s = intercept_with(
        &engine,
        &mut host,
        &event.to_string(),
        &["deny", "allow", "modify"],
        None,
    );
    let sent = host.sent_to(A)[0].json()["params"]["event"].clone();
    assert_eq!(
        sent["extensions"]["com.example.notes"],
        json!({"id": "p1", "kind": "text", "mediaType": "text/plain", "selection": "omit"})
    );
    assert_eq!(
        sent["extensions"]["com.example.xs"]
            .as_array()
            .map(Vec::len),
        Some(zeros)
    );
    assert_eq!(s.decision, Decision::Allow, "{}", audit(&s));
    assert_eq!(
        s.enforce.effective.get("input"),
        Some(&json!({"command": "ls"}))
    );
}

fn modify_input(operation: &str, value: Value) -> Reply {
    effects(json!([{"type": "modify", "target": "input", "operation": operation, "value": value}]))
}

/// The timeout covers acceptance: a modification whose reply came in time but whose
/// application ended past the deadline (a large event is parsed and copied) is a late
/// response, settled by policy, and its change is not handed on. Applied in time, it is.
#[test]
fn a_modification_applied_only_past_the_deadline_is_a_late_response() {
    let modify = || modify_input("replace", json!({"command": "ls"}));
    for policy in ["fail-open", "fail-closed"] {
        let engine = load(vec![interceptor(A, policy, 500)]);
        let mut host = FakeHost::new().on(A, Step::reply(modify()).taking(499).then_lag(5));
        let s = engine
            .intercept(&mut host, &event(), &[], None)
            .expect("valid");
        assert_settled_by(policy, &s);
        assert_eq!(failure_class(&s, 0), "late-response", "{policy}");
        assert_eq!(audited(&s, 0)["failure"]["phase"], "accept", "{policy}");
        // Its one attempt is recorded as what it became, not as accepted.
        assert_eq!(
            audited(&s, 0)["attempts"][0]["result"],
            "late-response",
            "{policy}"
        );
        assert!(audit(&s).get("effective").is_none(), "{policy}");
        assert!(s.enforce.effective.is_empty(), "{policy}");
    }
    // A denial that came in time stands, under fail-open too.
    let deny_and_modify = effects(json!([
        {"type": "deny", "reason": "no"},
        {"type": "modify", "target": "input", "operation": "replace", "value": {"command": "ls"}}
    ]));
    let engine = load(vec![interceptor(A, "fail-open", 500)]);
    let mut host = FakeHost::new().on(A, Step::reply(deny_and_modify).taking(499).then_lag(5));
    let s = engine
        .intercept(&mut host, &event(), &[], None)
        .expect("valid");
    assert_eq!(s.decided_by, DecidedBy::BackendDeny);
    assert_eq!(outcomes(&s), [Outcome::Deny]);
    let engine = load(vec![interceptor(A, "fail-closed", 500)]);
    let mut host = FakeHost::new().on(A, Step::reply(modify()).taking(499));
    let s = engine
        .intercept(&mut host, &event(), &[], None)
        .expect("valid");
    assert_eq!(s.decided_by, DecidedBy::NoObjection);
    assert_eq!(audit(&s)["effective"]["input"], json!({"command": "ls"}));
}

/// That `s`'s first interceptor's reply, complete in time, was accepted only past its
/// deadline: a late response at acceptance, settled by `policy`, its attempt so recorded.
fn assert_late_at_acceptance(policy: &str, s: &Settlement) {
    assert_settled_by(policy, s);
    assert_eq!(
        audited(s, 0)["failure"],
        json!({"class": "late-response", "phase": "accept"}),
        "{policy}"
    );
    assert_eq!(attempt_results(s, 0), [json!("late-response")], "{policy}");
}

/// The timeout covers acceptance of every reply, not only of one that modifies: one
/// whose effects are checked only past the deadline (an ask here; an inject's attachments
/// looked up among the event's take time) is a late response, settled by policy; a reply
/// of no effects has nothing to check, and one checked in time is accepted.
#[test]
fn a_reply_without_a_modification_checked_only_past_the_deadline_is_a_late_response() {
    for policy in ["fail-open", "fail-closed"] {
        let engine = load(vec![interceptor(A, policy, 500)]);
        let ask = effects(json!([{"type": "ask"}]));
        let mut host = FakeHost::new().on(A, Step::reply(ask).taking(499).then_lag(5));
        let s = engine
            .intercept(&mut host, &event(), &[], None)
            .expect("valid");
        assert_late_at_acceptance(policy, &s);
    }
    let engine = load(vec![interceptor(A, "fail-closed", 500)]);
    let mut host = FakeHost::new().on(A, Step::reply(no_effect()).taking(499).then_lag(5));
    let s = engine
        .intercept(&mut host, &event(), &[], None)
        .expect("valid");
    assert_no_objection(&s);
    let ask = effects(json!([{"type": "ask"}]));
    let mut host = FakeHost::new().on(A, Step::reply(ask).taking(499));
    let s = engine
        .intercept(&mut host, &event(), &[], None)
        .expect("valid");
    assert_eq!(s.decision, Decision::Ask, "{}", audit(&s));
}

/// The timeout covers acceptance while it runs, not only once it is done: the clock is
/// read between a reply's modifications, so a reply of many whose application takes its
/// interceptor past the deadline ends there, as a late response settled by the
/// subscription's policy, not as an acceptance that runs on past the host's bounds (an
/// engine failure, whatever the policy).
#[test]
fn the_deadline_passing_between_modifications_is_a_late_response() {
    let merge = json!({"type": "modify", "target": "input", "operation": "merge",
                       "value": {"n": 1}});
    let many = effects(Value::Array(vec![merge; 2000]));
    for policy in ["fail-open", "fail-closed"] {
        let engine = load(vec![interceptor(A, policy, 500)]);
        // A millisecond of work between readings: the 2000 modifications take 2 s.
        let mut host = FakeHost::new().ticking(1).on(A, Step::reply(many.clone()));
        let s = engine
            .intercept(&mut host, &event(), &[], None)
            .expect("valid");
        assert_late_at_acceptance(policy, &s);
        assert!(s.enforce.effective.is_empty(), "{policy}");
        // It ended at the deadline, not once all of them were applied.
        assert!(
            s.elapsed_ns < ms(600),
            "{policy}: {} ms",
            s.elapsed_ns / NANOS_PER_MS
        );
    }
}

/// A reply's modifications are applied to one copy of the target, and the event is
/// rebuilt once: what accepting them allocates grows with the reply and the event, not
/// with their product. A copy of the input and of the event per modification made these
/// 1,000 empty merges to a 256 KiB input allocate half a gigabyte (and a 1 MiB reply of
/// them to a 1 MiB input, gigabytes: past the host's CPU bound, an engine failure).
#[test]
fn many_modifications_copy_the_target_and_the_event_once() {
    let mut large: Value = serde_json::from_str(&event()).unwrap();
    large["tool"]["input"]["data"] = json!("x".repeat(256 * 1024));
    let large = large.to_string();
    let merge = json!({"type": "modify", "target": "input", "operation": "merge", "value": {}});
    let many = effects(Value::Array(vec![merge; 1000]));
    let weight = large.len() + many.body.len();
    let engine = load(vec![interceptor(A, "fail-closed", 500)]);
    let mut host = FakeHost::new().on(A, Step::reply(many));
    let before = allocated();
    let s = engine
        .intercept(&mut host, &large, &[], None)
        .expect("valid");
    let spent = allocated() - before;
    assert_eq!(outcomes(&s), [Outcome::NoEffect], "{}", audit(&s));
    assert_eq!(s.decision, Decision::Allow);
    assert!(
        spent < 16 * weight,
        "{spent} bytes allocated for a call of {weight}"
    );
}

/// A modification copies neither its own value nor what it replaces. Measured in the
/// bytes a call allocates against those of one copy of the value (the same allocator,
/// so no clock): a call replacing a small input with 20,000 objects allocates about two
/// copies' worth (the reply's reading), and one replacing as large an input about 2.75
/// more (the event's reading). Each copy left in adds one: the value copied into the
/// target, the target copied before its replacement, the effective value copied out of
/// the effective event, the document copied whole. Three or four at once held the
/// component past its memory where the values were dense.
#[test]
fn a_replacement_copies_neither_the_value_nor_what_it_replaces() {
    let dense = || json!(vec![json!({"a": [1, 2, 3]}); 20_000]);
    let replacement = effects(json!([{"type": "modify", "target": "input",
        "operation": "replace", "value": {"b": dense()}}]));
    let spent_on = |input: Value| {
        let mut event: Value = serde_json::from_str(&event()).unwrap();
        event["tool"]["input"] = input;
        let event = event.to_string();
        let engine = load(vec![interceptor(A, "fail-closed", 500)]);
        let mut host = FakeHost::new().on(A, Step::reply(replacement.clone()));
        let before = allocated();
        let s = engine
            .intercept(&mut host, &event, &[], None)
            .expect("valid");
        let spent = allocated() - before;
        assert_eq!(s.enforce.effective["input"]["b"], dense());
        spent
    };
    let small = spent_on(json!({"command": "ls"}));
    let large = spent_on(json!({"c": dense()}));
    let value = dense();
    let before = allocated();
    let copy = value.clone();
    let a_copy = allocated() - before;
    drop(copy);
    assert!(
        small * 2 < a_copy * 5,
        "{small} bytes for the call, a copy {a_copy}"
    );
    assert!(
        (large - small) * 4 < a_copy * 13,
        "{} bytes more for a large input, a copy {a_copy}",
        large - small
    );
}

/// A registration with an unknown member holding a long name over a large array loads,
/// the member ignored with a warning (digest §6 rule 11), at a cost that grows with the
/// document, not with its name's length times its items: the search for literal secrets
/// once built a pointer per item, about 10 GB copied here, far past the load's CPU bound.
#[test]
fn a_long_name_over_a_large_array_loads_with_a_warning_at_linear_cost() {
    let name = "a".repeat(100_000);
    let mut document = json!({"protocolVersion": "draft",
        "hooks": [interceptor(A, "fail-closed", 500)]});
    document["x"] = json!({ name: vec![0; 100_000] });
    let text = document.to_string();
    let before = allocated();
    let engine = Engine::load(&text).expect("valid registration");
    let spent = allocated() - before;
    let warned: Vec<&str> = engine.warnings().iter().map(|p| p.path.as_str()).collect();
    assert_eq!(warned, ["/x"], "{:?}", engine.warnings());
    assert!(
        spent < 64 * text.len(),
        "{spent} bytes allocated to load {} bytes",
        text.len()
    );
}

/// An interrupted call is never permission, also when no interceptor subscribes to its
/// event (the host settles it so when it waits for an instance; the component too).
#[test]
fn an_interrupted_call_without_interceptors_is_an_interrupted_denial() {
    let engine = load(vec![backend(B, vec![observe_sub(&["tool.*"])])]);
    let mut host = FakeHost::new().interrupted_already();
    let s = run(&engine, &mut host);
    assert_eq!(s.decision, Decision::Deny);
    assert_eq!(s.decided_by, DecidedBy::Interrupted);
    assert!(s.observers.is_empty(), "interruption starts no observer");
    let mut host = FakeHost::new();
    let s = run(&engine, &mut host);
    assert_eq!(s.decided_by, DecidedBy::NoObjection);
    assert_eq!(s.observers.len(), 1);
}

#[test]
fn modify_chains_and_survives_a_later_fail_open_failure() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
        interceptor(C, "fail-open", 500),
    ]);
    let mut host = FakeHost::new()
        .on(
            A,
            Step::reply(modify_input("merge", json!({"command": "ls", "cwd": null}))),
        )
        .on(B, Step::reply(modify_input("merge", json!({"extra": 1}))))
        .on(C, Step::fail(DeliveryError::ConnectionReset));
    let s = engine
        .intercept(&mut host, &event(), &[], None)
        .expect("valid");
    let b_saw = &host.sent_to(B)[0].json()["params"]["event"]["tool"]["input"];
    assert_eq!(
        *b_saw,
        json!({"command": "ls", "cwd": null}),
        "B sees A's effective input"
    );
    let c_saw = &host.sent_to(C)[0].json()["params"]["event"]["tool"]["input"];
    assert_eq!(*c_saw, json!({"command": "ls", "cwd": null, "extra": 1}));
    assert_eq!(
        outcomes(&s),
        [Outcome::NoEffect, Outcome::NoEffect, Outcome::FailedOpen]
    );
    // The outcome is the decision; the record still names who changed the call.
    assert_eq!(audited(&s, 0)["effects"], json!(["modify"]));
    assert_eq!(audited(&s, 1)["effects"], json!(["modify"]));
    assert!(audited(&s, 2).get("effects").is_none());
    assert_eq!(
        audit(&s)["effective"]["input"],
        json!({"command": "ls", "cwd": null, "extra": 1})
    );
    assert_eq!(
        audit(&s)["event"]["id"],
        EVENT_ID,
        "identity kept across modifications"
    );
}

/// A later interceptor's one modification is made in the effective event in place (no
/// copy of the target beside it and the original), and still accepted whole or not at
/// all: a merge or a replacement checked only past the deadline leaves the earlier
/// interceptor's effective input as it was (a merge of another shape is refused before:
/// `effect::fits`); one that changes nothing leaves an earlier supplied result, one that
/// changes the input drops it.
#[test]
fn a_later_modification_made_in_place_is_taken_back_when_not_accepted() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
    ]);
    let earlier = || Step::reply(modify_input("merge", json!({"command": "ls", "cwd": "/"})));
    let earlier_input = json!({"command": "ls", "cwd": "/"});
    for (later, failure) in [
        (
            Step::reply(modify_input("merge", json!({"command": "rm", "x": 1})))
                .taking(499)
                .then_lag(5),
            "late-response",
        ),
        (
            Step::reply(modify_input("replace", json!({"command": "rm"})))
                .taking(499)
                .then_lag(5),
            "late-response",
        ),
    ] {
        let mut host = FakeHost::new().on(A, earlier()).on(B, later);
        let s = engine
            .intercept(&mut host, &event(), &[], None)
            .expect("valid");
        assert_eq!(failure_class(&s, 1), failure, "{}", audit(&s));
        assert_eq!(audit(&s)["effective"]["input"], earlier_input, "{failure}");
    }
    let mut host = FakeHost::new()
        .on(A, earlier())
        .on(B, Step::reply(modify_input("merge", json!({"x": 1}))));
    let s = engine
        .intercept(&mut host, &event(), &[], None)
        .expect("valid");
    let merged = json!({"command": "ls", "cwd": "/", "x": 1});
    assert_eq!(audit(&s)["effective"]["input"], merged);

    let modify_and_return = effects(json!([
        {"type": "modify", "target": "input", "operation": "merge", "value": {"command": "ls"}},
        {"type": "return", "value": {"stdout": "cached"}}
    ]));
    for (later, kept) in [
        (modify_input("merge", json!({"command": "ls"})), true),
        (modify_input("replace", json!({"command": "ls"})), true),
        (modify_input("merge", json!({"command": "pwd"})), false),
        (modify_input("replace", json!({"command": "pwd"})), false),
    ] {
        let mut host = FakeHost::new()
            .on(A, Step::reply(modify_and_return.clone()))
            .on(B, Step::reply(later));
        let s = engine
            .intercept(&mut host, &event(), &[], None)
            .expect("valid");
        let record = audit(&s);
        assert_eq!(record.get("returned").is_some(), kept, "{record}");
    }
}

/// A modification a later interceptor's denial overrides is not enforced: the record of
/// a denial, by the backend or by a fail-closed failure, names no effective input, though
/// it still names who changed the call.
#[test]
fn a_later_denial_drops_an_earlier_modification() {
    for (b_step, decided_by) in [
        (Step::reply(deny("no")), DecidedBy::BackendDeny),
        (
            Step::fail(DeliveryError::ConnectionReset),
            DecidedBy::SyntheticDeny,
        ),
    ] {
        let engine = load(vec![
            interceptor(A, "fail-closed", 500),
            interceptor(B, "fail-closed", 500),
        ]);
        let mut host = FakeHost::new()
            .on(
                A,
                Step::reply(modify_input("replace", json!({"command": "ls"}))),
            )
            .on(B, b_step);
        let s = engine
            .intercept(&mut host, &event(), &[], None)
            .expect("valid");
        assert_eq!((s.decision, s.decided_by), (Decision::Deny, decided_by));
        assert!(s.enforce.effective.is_empty(), "{decided_by:?}");
        assert!(audit(&s).get("effective").is_none(), "{}", audit(&s));
        assert_eq!(audited(&s, 0)["effects"], json!(["modify"]));
    }
}

/// A modification that leaves the input as it came is accepted and changes nothing: the
/// audit names no effective input, so the harness runs the call it sent.
#[test]
fn a_modify_to_the_same_input_records_no_effective_input() {
    let engine = load(vec![interceptor(A, "fail-closed", 500)]);
    let same = modify_input("replace", json!({"command": "rm -rf build"}));
    let mut host = FakeHost::new().on(A, Step::reply(same));
    let s = engine
        .intercept(&mut host, &event(), &[], None)
        .expect("valid");
    assert_eq!(s.decision, Decision::Allow);
    assert_eq!(outcomes(&s), [Outcome::NoEffect]);
    assert!(audit(&s).get("effective").is_none(), "{}", audit(&s));
}

#[test]
fn a_modify_outside_the_advertised_target_or_operation_is_rejected() {
    let mut capability = ahp_interceptor::events::full(InterceptableEvent::ToolBefore);
    capability.modify = Some(ModifyCapability {
        target: ModifyTarget::Input,
        replace: true,
        merge: false,
    });
    let engine = Engine::load_declared(
        &registration(vec![interceptor(A, "fail-open", 500)]),
        vec![capability],
    )
    .expect("valid");
    for (reply, detail) in [
        (
            modify_input("merge", json!({"a": 1})),
            "unadvertised-effect",
        ),
        (
            effects(
                json!([{"type": "modify", "target": "output", "operation": "replace", "value": []}]),
            ),
            "unadvertised-effect",
        ),
        (
            modify_input("replace", json!(["not an object"])),
            "malformed-effect",
        ),
        (
            effects(
                json!([{"type": "modify", "target": "parts", "operation": "replace", "value": []}]),
            ),
            "malformed-effect",
        ),
    ] {
        let mut host = FakeHost::new().on(A, Step::reply(reply));
        let s = engine
            .intercept(&mut host, &event(), &[], None)
            .expect("valid");
        assert_eq!(audited(&s, 0)["failure"]["detail"], detail);
        assert!(audit(&s).get("effective").is_none());
    }
}

/// The upstream flow-inject reply at tool.after, without its `continue`: this harness
/// cannot offer one there (tool.after carries no continuation count, see
/// `events::check`). Its stop ends the chain as a denial, its injection is kept. A stop
/// beating a continue is `continue_instructions_are_kept_in_chain_order`'s.
#[test]
fn flow_stop_ends_the_chain_and_inject_is_recorded() {
    let hooks = vec![
        backend(A, vec![intercept_sub(&["tool.after"], "fail-closed", 500)]),
        backend(B, vec![intercept_sub(&["tool.after"], "fail-closed", 500)]),
    ];
    let engine = Engine::load_declared(
        &registration(hooks),
        declared(&[InterceptableEvent::ToolAfter]),
    )
    .expect("valid");
    let text = include_str!("../../tests/upstream/fixtures/draft/http/flow-inject.valid.json");
    let mut reply: Value = serde_json::from_str(text).unwrap();
    reply["id"] = json!(EVENT_ID);
    let effects = reply["result"]["effects"].as_array_mut().unwrap();
    effects.retain(|effect| effect["operation"] != "continue");
    assert_eq!(effects.len(), 2, "an inject and a stop are left");
    let mut host = FakeHost::new().on(A, Step::reply(json_reply(reply)));
    let s = settle(&engine, &mut host, &tool_after());
    assert!(
        host.sent_to(B).is_empty(),
        "a flow stop ends decision-making"
    );
    assert_eq!(outcomes(&s), [Outcome::Stop, Outcome::NotReached]);
    // A stop is not a way around the decision: the harness must not proceed.
    assert_eq!(
        (s.decision, s.decided_by, s.reason.as_deref()),
        (
            Decision::Deny,
            DecidedBy::BackendDeny,
            Some("Budget reached.")
        )
    );
    let record = audit(&s);
    assert_eq!(
        record["flow"],
        json!({"operation": "stop", "reason": "Budget reached."})
    );
    assert_eq!(record["injections"][0]["deliverAt"], "next_turn");
    assert_eq!(s.observers.len(), 1, "B gets the short-circuit observe");
}

#[test]
fn tool_before_cannot_continue_and_inject_must_append() {
    let engine = load(vec![interceptor(A, "fail-open", 500)]);
    for (name, detail) in [
        ("continue-no-instruction.valid.json", "unadvertised-effect"),
        ("inject-wrong-operation.invalid.json", "malformed-effect"),
        ("stop-no-reason.invalid.json", "malformed-effect"),
        ("flow-no-operation.invalid.json", "malformed-effect"),
    ] {
        let path = format!(
            "{}/../tests/upstream/fixtures/draft/http/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut reply: Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        reply["id"] = json!(EVENT_ID);
        let mut host = FakeHost::new().on(A, Step::reply(json_reply(reply)));
        let s = engine
            .intercept(&mut host, &event(), &[], None)
            .expect("valid");
        assert_eq!(audited(&s, 0)["failure"]["detail"], detail, "{name}");
        assert!(s.messages.is_empty(), "{name}: nothing is published");
    }
}

/// A returned value is recorded, and "a later change to the operation invalidates an
/// earlier candidate": a modify that changes the input drops it (its backend still
/// named), one that changes nothing (a replace with the same input, an empty merge)
/// leaves it, and the operation is not run after all.
#[test]
fn a_returned_value_is_recorded_and_only_a_later_change_invalidates_it() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
    ]);
    let returned = effects(json!([{"type": "return", "value": {"stdout": "cached"}}]));
    for (later, kept) in [
        (no_effect(), true),
        (
            modify_input("replace", json!({"command": "rm -rf build"})),
            true,
        ),
        (modify_input("merge", json!({})), true),
        (modify_input("replace", json!({"command": "true"})), false),
    ] {
        let mut host = FakeHost::new()
            .on(A, Step::reply(returned.clone()))
            .on(B, Step::reply(later));
        let s = engine
            .intercept(&mut host, &event(), &[], None)
            .expect("valid");
        let record = audit(&s);
        if kept {
            assert_eq!(record["returned"], json!({"stdout": "cached"}), "{record}");
            assert!(record.get("effective").is_none(), "{record}");
        } else {
            assert!(record.get("returned").is_none(), "{record}");
            assert_eq!(
                audited(&s, 0)["effects"],
                json!(["return"]),
                "the invalidated result's backend is still named"
            );
        }
    }
}

#[test]
fn session_start_intercepts_with_inject_and_message_only() {
    let hooks = vec![backend(
        A,
        vec![intercept_sub(&["session.start"], "fail-open", 500)],
    )];
    let engine = Engine::load(&registration(hooks)).expect("valid");
    let text =
        include_str!("../../tests/upstream/fixtures/draft/http/observe-session-start.valid.json");
    let event = serde_json::from_str::<Value>(text).unwrap()["params"]["event"].clone();
    let id = event["id"].as_str().unwrap().to_owned();
    let reply = json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "draft",
        "effects": [{"type": "message", "text": "hi"}]}});
    let mut host = FakeHost::new().on(A, Step::reply(json_reply(reply)));
    let s = settle(&engine, &mut host, &event);
    assert_eq!(s.messages, ["hi"]);
    assert_eq!(
        host.sent[0].json()["params"]["capabilities"]["effects"],
        json!(["inject", "message"])
    );
    // An event with more values than the component can work on is refused, naming the
    // event, not run out of memory (an engine failure).
    let mut huge = event.clone();
    huge["extensions"] = json!({"xs": vec![0; ahp_interceptor::json::MAX_PARSED_VALUES]});
    let problems = engine
        .intercept(&mut host, &huge.to_string(), &[], None)
        .expect_err("too many values");
    assert_eq!(
        problems[0].rule,
        ahp_interceptor::json::TOO_MANY_PARSED_RULE
    );
    let mut missing = event.clone();
    missing.as_object_mut().unwrap().remove("trigger");
    let problems = engine
        .intercept(&mut host, &missing.to_string(), &[], None)
        .expect_err("trigger");
    assert_eq!(problems[0].path, "event/trigger");
}

#[test]
fn observers_of_the_calls_own_event_are_owned_and_skipped_when_interrupted() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        backend(B, vec![observe_sub(&["tool.*"])]),
        backend(C, vec![observe_sub(&["tool.after"])]),
    ]);
    let mut host = FakeHost::new().on(
        A,
        Step::reply(modify_input("replace", json!({"command": "ls"}))),
    );
    let s = engine
        .intercept(&mut host, &event(), &[], None)
        .expect("valid");
    assert_eq!(s.observers.len(), 1);
    assert_eq!(
        (s.observers[0].backend.as_str(), s.observers[0].kind),
        (B, ObserverKind::Owned)
    );
    let sent: Value = serde_json::from_slice(prepared(&s.observers[0]).bytes()).unwrap();
    assert_eq!(
        sent["params"]["event"]["tool"]["input"],
        json!({"command": "ls"}),
        "effective content only"
    );
    assert_eq!(audit(&s)["observers"][0]["kind"], "owned");
    let mut host = FakeHost::new().on(A, Step::reply(no_effect()).then_interrupt());
    let s = run(&engine, &mut host);
    assert!(
        s.observers.is_empty(),
        "interruption starts no owned observer"
    );
}

/// Conformance O9: A's modification is accepted, then B fails and is settled fail-open,
/// once with a modification in a reply rejected whole (an unknown effect beside it), once
/// with one that arrived too late. The observation carries A's accepted content, never
/// B's staged content; so does the settlement.
#[test]
fn an_observer_is_sent_the_accepted_content_never_a_failed_replys_staged_content() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-open", 500),
        backend(C, vec![observe_sub(&["tool.before"])]),
    ]);
    let staged = json!({"type": "modify", "target": "input", "operation": "replace",
                        "value": {"command": "STAGED-BY-B"}});
    let rejected = effects(json!([staged.clone(), {"type": "com.example.quarantine"}]));
    let late = effects(json!([staged]));
    for (name, step, class) in [
        ("rejected", Step::reply(rejected), "invalid-effects"),
        ("late", Step::reply(late).taking(501), "late-response"),
    ] {
        let mut host = FakeHost::new()
            .on(
                A,
                Step::reply(modify_input("replace", json!({"command": "ls"}))),
            )
            .on(B, step);
        let s = engine
            .intercept(&mut host, &event(), &[], None)
            .expect("valid");
        let kinds = observer_kinds(&s);
        assert_eq!(kinds, [(C, ObserverKind::Owned)], "{name}");
        assert_eq!(
            observed_event(&s.observers[0])["tool"]["input"],
            json!({"command": "ls"}),
            "{name}: A's accepted content"
        );
        let record = audit(&s);
        assert_eq!(record["effective"]["input"], json!({"command": "ls"}));
        assert!(!record.to_string().contains("STAGED-BY-B"), "{name}");
        assert_no_objection(&s);
        assert_eq!(outcomes(&s), [Outcome::NoEffect, Outcome::FailedOpen]);
        assert_eq!(failure_class(&s, 1), class, "{name}");
    }
}

// ---------------------------------------------------------------------------------------
// The upstream fixtures that show what a harness must refuse or never send
// ---------------------------------------------------------------------------------------

/// A valid event of `event_type` (the payloads of tests/src/valid_events.json) with id
/// `evt_1`.
fn catalogue_event(event_type: &str) -> Value {
    let text = include_str!("../../tests/src/valid_events.json");
    let mut event = serde_json::from_str::<Value>(text).unwrap()[event_type].clone();
    event["id"] = json!(EVENT_ID);
    event["source"] = json!("urn:ahp:test");
    event["type"] = json!(event_type);
    event["time"] = json!("2026-11-30T12:00:00Z");
    event
}

/// An upstream fixture, read whole.
fn upstream(name: &str) -> Value {
    let path = format!(
        "{}/../tests/upstream/fixtures/draft/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Conformance C3 and C4: a modify of a target the event does not have, a modify with an
/// extra `path`, and a tool output given as an object are each refused as a whole (the
/// staged value is not the effective one) and settled by the subscription's policy.
#[test]
fn upstream_invalid_modify_responses_are_refused_and_settled_by_policy() {
    let turn_start = catalogue_event("turn.start");
    let cases = [
        (
            "http/modify-invalid-target.invalid.json",
            &turn_start,
            "malformed-effect",
        ),
        (
            "http/modify-invalid-path.invalid.json",
            &turn_start,
            "unknown-effect-field",
        ),
        (
            "http/contextual-tool-output-object.invalid.json",
            &tool_after(),
            "malformed-effect",
        ),
    ];
    for (name, event, detail) in cases {
        let event_type = event["type"].as_str().unwrap();
        for policy in ["fail-open", "fail-closed"] {
            let hooks = vec![backend(A, vec![intercept_sub(&[event_type], policy, 500)])];
            let kind = InterceptableEvent::parse(event_type).unwrap();
            let engine =
                Engine::load_declared(&registration(hooks), declared(&[kind])).expect("valid");
            let mut reply = upstream(name);
            reply["id"] = json!(EVENT_ID);
            let mut host = FakeHost::new().on(A, Step::reply(json_reply(reply)));
            let s = settle(&engine, &mut host, event);
            let entry = audited(&s, 0);
            assert_eq!(entry["failure"]["class"], "invalid-effects", "{name}");
            assert_eq!(entry["failure"]["detail"], detail, "{name}");
            assert!(
                audit(&s).get("effective").is_none(),
                "{name}: {}",
                audit(&s)
            );
            let expected = match policy {
                "fail-open" => (Decision::Allow, DecidedBy::NoObjection),
                _ => (Decision::Deny, DecidedBy::SyntheticDeny),
            };
            assert_eq!((s.decision, s.decided_by), expected, "{name} / {policy}");
        }
    }
}

/// Conformance T4, T5, S1 and O8, against the events of the upstream negative
/// fixtures: the request's id is its event's id (not `intercept-request-id-mismatch`'s
/// outer id), it advertises the harness's effects (`intercept-request-effects-missing`
/// has none), it is one line (`intercept-request-multiline`), and an observe
/// notification has no id (`observe-with-id`).
#[test]
fn requests_never_take_the_shape_of_the_upstream_negative_fixtures() {
    let engine = load(vec![
        interceptor(A, "fail-closed", 500),
        backend(B, vec![observe_sub(&["session.start"])]),
    ]);
    for name in [
        "http/intercept-request-id-mismatch.invalid.json",
        "http/intercept-request-effects-missing.invalid.json",
        "stdio/intercept-request-multiline.invalid.jsonl",
    ] {
        let fixture = upstream(name);
        let event = &fixture["params"]["event"];
        let reply = json!({"jsonrpc": "2.0", "id": event["id"],
                           "result": {"protocolVersion": "draft", "effects": []}});
        let mut host = FakeHost::new().on(A, Step::reply(json_reply(reply)));
        // A call that names no effects: the harness's whole declaration is advertised.
        let s = engine
            .intercept(&mut host, &event.to_string(), &[], None)
            .expect("a valid event");
        assert_eq!(s.decision, Decision::Allow, "{name}");
        let sent = host.sent_to(A);
        assert_eq!(sent.len(), 1, "{name}");
        assert!(!sent[0].message.contains(&b'\n'), "{name}: one line");
        let request = sent[0].json();
        assert_eq!(request["id"], event["id"], "{name}");
        let effects = request["params"]["capabilities"]["effects"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: no advertised effects: {request}"));
        assert!(effects.contains(&json!("deny")), "{name}: {request}");
    }
    assert_ne!(
        upstream("http/intercept-request-id-mismatch.invalid.json")["id"],
        upstream("http/intercept-request-id-mismatch.invalid.json")["params"]["event"]["id"],
        "the fixture's defect"
    );

    let fixture = upstream("http/observe-with-id.invalid.json");
    assert!(fixture.get("id").is_some(), "the fixture's defect");
    let event = fixture["params"]["event"].to_string();
    let deliveries = engine
        .observe(&FakeHost::new(), T0, &event, None)
        .expect("a valid session.start");
    assert_eq!(deliveries.len(), 1);
    let notification: Value = serde_json::from_slice(prepared(&deliveries[0]).bytes()).unwrap();
    assert_eq!(notification["method"], "hooks/observe");
    assert!(notification.get("id").is_none(), "{notification}");
}

// ---------------------------------------------------------------------------------------
// Composition: what a deny leaves behind, conflicts within one reply, the record
// ---------------------------------------------------------------------------------------

/// effect.schema.json on `content`: "Canonical messages at user.message.outbound; MCP
/// answer object at user.elicitation.result. The host MUST validate the
/// boundary-specific target contract." A value of the other boundary's shape is a
/// malformed effect, settled by policy; the right shape is the effective content.
#[test]
fn a_content_modify_must_have_its_own_boundarys_shape() {
    let message = json!([{"id": "m1", "role": "assistant", "parts": [{"id": "p1",
        "kind": "text", "mediaType": "text/plain", "selection": "body", "text": "Hello."}]}]);
    let answer = json!({"name": "x"});
    for (event_type, wrong, right) in [
        ("user.message.outbound", &answer, &message),
        ("user.elicitation.result", &message, &answer),
    ] {
        let kind = InterceptableEvent::parse(event_type).unwrap();
        let hooks = vec![backend(
            A,
            vec![intercept_sub(&[event_type], "fail-closed", 500)],
        )];
        let engine = Engine::load_declared(&registration(hooks), declared(&[kind])).expect("valid");
        let content = |value: &Value| {
            effects(
                json!([{"type": "modify", "target": "content", "operation": "replace",
                "value": value}]),
            )
        };
        let mut host = FakeHost::new().on(A, Step::reply(content(wrong)));
        let s = settle(&engine, &mut host, &catalogue_event(event_type));
        assert_eq!(
            (s.decision, s.decided_by),
            (Decision::Deny, DecidedBy::SyntheticDeny),
            "{event_type}"
        );
        assert_eq!(audited(&s, 0)["failure"]["detail"], "malformed-effect");
        assert!(audit(&s).get("effective").is_none(), "{}", audit(&s));

        let mut host = FakeHost::new().on(A, Step::reply(content(right)));
        let s = settle(&engine, &mut host, &catalogue_event(event_type));
        assert_eq!(s.decision, Decision::Allow, "{event_type}");
        assert_eq!(audit(&s)["effective"]["content"], *right, "{event_type}");
    }
}

/// Digest §4.4: "Deny, stop or fail-closed stop a candidate from getting around the
/// settled decision." A supplied result accepted before a fail-closed failure, or in the
/// denying reply itself, is not handed on with the deny; the accepted message is.
#[test]
fn a_deny_hands_on_no_supplied_result() {
    let returned = json!({"type": "return", "value": {"stdout": "cached"}});
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        interceptor(B, "fail-closed", 500),
    ]);
    let mut host = FakeHost::new()
        .on(
            A,
            Step::reply(effects(json!([returned, {"type": "message", "text": "m"}]))),
        )
        .on(B, Step::fail(DeliveryError::ConnectionRefused));
    let s = engine
        .intercept(&mut host, &event(), &[], None)
        .expect("valid");
    assert_eq!(s.decided_by, DecidedBy::SyntheticDeny);
    assert_eq!(outcomes(&s), [Outcome::NoEffect, Outcome::FailedClosed]);
    assert!(audit(&s).get("returned").is_none(), "{}", audit(&s));
    assert_eq!(s.messages, ["m"]);

    let engine = load(vec![interceptor(A, "fail-open", 500)]);
    let both = effects(json!([{"type": "deny", "reason": "no"}, returned]));
    let mut host = FakeHost::new().on(A, Step::reply(both));
    let s = engine
        .intercept(&mut host, &event(), &[], None)
        .expect("valid");
    assert_eq!(s.decided_by, DecidedBy::BackendDeny);
    assert!(audit(&s).get("returned").is_none(), "{}", audit(&s));
}

/// A `turn.finish.before` engine whose harness offers flow stop and continue, one
/// continuation a turn (its events, from [`turn_finish_before`], made none yet).
fn turn_finish_before_with_continue(hooks: Vec<Value>) -> Engine {
    let mut capability = ahp_interceptor::events::full(InterceptableEvent::TurnFinishBefore);
    capability.flow = Some(FlowCapability {
        operations: vec![FlowOperation::Stop, FlowOperation::Continue],
        remaining_continuations: Some(1),
        continuation_count: Some(0),
    });
    Engine::load_declared(&registration(hooks), vec![capability]).expect("valid")
}

/// A `turn.finish.before` event whose turn has made `count` continuations.
fn turn_finish_before(count: u64) -> Value {
    let examples: Value =
        serde_json::from_str(include_str!("../../tests/src/valid_events.json")).unwrap();
    let mut event = examples["turn.finish.before"].clone();
    event["id"] = json!(EVENT_ID);
    event["source"] = json!("urn:ahp:test");
    event["type"] = json!("turn.finish.before");
    event["time"] = json!("2026-11-30T12:00:00Z");
    event["session"] = json!({"id": "sess_example"});
    event["continuationCount"] = json!(count);
    event
}

/// The same, its count written as a float with no fraction (`2.0`), an integer to JSON
/// Schema.
fn turn_finish_before_as_float(count: u64) -> Value {
    let mut event = turn_finish_before(count);
    event["continuationCount"] = json!(count as f64);
    event
}

/// A declaration is made once, at load; continuations are counted per turn. Declared
/// with two a turn, each call offers what its event says is left, and once none is,
/// `stop` alone: a `continue` then is an unadvertised effect, settled by policy.
#[test]
fn each_call_offers_what_is_left_of_the_turns_continuations() {
    let mut capability = ahp_interceptor::events::full(InterceptableEvent::TurnFinishBefore);
    capability.flow = Some(FlowCapability {
        operations: vec![FlowOperation::Stop, FlowOperation::Continue],
        remaining_continuations: Some(2),
        continuation_count: Some(0),
    });
    let hooks = vec![backend(
        A,
        vec![intercept_sub(&["turn.finish.before"], "fail-closed", 500)],
    )];
    let engine = Engine::load_declared(&registration(hooks), vec![capability]).expect("valid");
    let go_on = json!([{"type": "flow", "operation": "continue", "instruction": "run the tests"}]);
    let offer = |operations: Value, remaining: u64, count: u64| {
        json!({"operations": operations, "remainingContinuations": remaining,
               "continuationCount": count})
    };
    for (count, offered, event) in [
        (
            0,
            offer(json!(["stop", "continue"]), 2, 0),
            turn_finish_before(0),
        ),
        (
            1,
            offer(json!(["stop", "continue"]), 1, 1),
            turn_finish_before(1),
        ),
        (2, offer(json!(["stop"]), 0, 2), turn_finish_before(2)),
        (5, offer(json!(["stop"]), 0, 5), turn_finish_before(5)),
        (
            2,
            offer(json!(["stop"]), 0, 2),
            turn_finish_before_as_float(2),
        ),
    ] {
        let mut host = FakeHost::new().on(A, Step::reply(effects(go_on.clone())));
        let s = settle(&engine, &mut host, &event);
        let sent = host.sent[0].json();
        assert_eq!(sent["params"]["capabilities"]["flow"], offered, "{count}");
        if count < 2 {
            assert_eq!(s.decision, Decision::Allow, "{count}: {}", audit(&s));
            assert_eq!(audit(&s)["flow"]["operation"], "continue", "{count}");
        } else {
            assert_synthetic_deny(&s);
            assert_eq!(
                audited(&s, 0)["failure"]["class"],
                "invalid-effects",
                "{count}: {}",
                audit(&s)
            );
        }
    }
}

/// A `continue` accepted before a fail-closed failure does not survive into the deny:
/// the record never says both "deny" and "continue".
#[test]
fn a_deny_hands_on_no_continue() {
    let engine = turn_finish_before_with_continue(vec![
        backend(
            A,
            vec![intercept_sub(&["turn.finish.before"], "fail-open", 500)],
        ),
        backend(
            B,
            vec![intercept_sub(&["turn.finish.before"], "fail-closed", 500)],
        ),
    ]);
    let go_on = json!([{"type": "flow", "operation": "continue", "instruction": "go on"}]);
    let mut host = FakeHost::new()
        .on(A, Step::reply(effects(go_on)))
        .on(B, Step::fail(DeliveryError::ConnectionRefused));
    let s = settle(&engine, &mut host, &turn_finish_before(0));
    assert_eq!(s.decided_by, DecidedBy::SyntheticDeny);
    assert!(audit(&s).get("flow").is_none(), "{}", audit(&s));
}

/// Accepted effects are composed in chain order, never silently dropped (digest §3.1's
/// request state carries `instructions[]`): every accepted `continue` instruction is
/// kept, in order, and a later `continue` without one drops none. A stop still beats
/// them all, in a later reply or the same.
#[test]
fn continue_instructions_are_kept_in_chain_order() {
    let engine = turn_finish_before_with_continue(vec![
        backend(
            A,
            vec![intercept_sub(&["turn.finish.before"], "fail-open", 500)],
        ),
        backend(
            B,
            vec![intercept_sub(&["turn.finish.before"], "fail-open", 500)],
        ),
    ]);
    let go_on =
        |text: &str| json!([{"type": "flow", "operation": "continue", "instruction": text}]);
    let bare = json!([{"type": "flow", "operation": "continue"}]);
    let stop = json!([{"type": "flow", "operation": "stop", "reason": "enough"}]);
    for (a, b, flow) in [
        (
            go_on("first"),
            go_on("second"),
            json!({"operation": "continue", "instructions": ["first", "second"]}),
        ),
        (
            go_on("first"),
            bare.clone(),
            json!({"operation": "continue", "instructions": ["first"]}),
        ),
        (
            bare.clone(),
            go_on("second"),
            json!({"operation": "continue", "instructions": ["second"]}),
        ),
        (bare.clone(), bare.clone(), json!({"operation": "continue"})),
        (
            go_on("first"),
            stop.clone(),
            json!({"operation": "stop", "reason": "enough"}),
        ),
        // Within one reply too (as upstream flow-inject.valid.json has them).
        (
            json!([go_on("first")[0], stop[0]]),
            bare,
            json!({"operation": "stop", "reason": "enough"}),
        ),
    ] {
        let mut host = FakeHost::new()
            .on(A, Step::reply(effects(a)))
            .on(B, Step::reply(effects(b)));
        let s = settle(&engine, &mut host, &turn_finish_before(0));
        assert_eq!(audit(&s)["flow"], flow, "{}", audit(&s));
    }
}

/// Conformance T9: "Audit: explicit denial with backend, subscription, code."
#[test]
fn a_denys_policy_code_is_in_its_interceptors_record() {
    let engine = load(vec![interceptor(A, "fail-open", 500)]);
    let coded = json!([{"type": "deny", "reason": "r", "code": "com.example.policy.rm_build"}]);
    let mut host = FakeHost::new().on(A, Step::reply(effects(coded)));
    let s = run(&engine, &mut host);
    assert_eq!(audited(&s, 0)["code"], "com.example.policy.rm_build");
    let mut host = FakeHost::new().on(A, Step::reply(deny("r")));
    let s = run(&engine, &mut host);
    assert!(audited(&s, 0).get("code").is_none(), "{}", audit(&s));
}

/// Conformance T9 (DEC-002), a deny from a backend's second subscription: the call is
/// denied with the backend's reason, and the audit names the explicit denial by backend,
/// subscription and code, apart from the same backend's first, silent subscription.
#[test]
fn a_deny_from_a_backends_second_subscription_is_audited_with_that_subscription_and_code() {
    let reason = "Deleting build outputs requires review.";
    let engine = load(vec![backend(
        A,
        vec![
            intercept_sub(&["tool.before"], "fail-open", 500),
            intercept_sub(&["tool.before"], "fail-closed", 500),
        ],
    )]);
    let coded = json!([{"type": "deny", "reason": reason, "code": "com.example.policy.rm_build"}]);
    let mut host = FakeHost::new()
        .on(A, Step::reply(no_effect()))
        .on(A, Step::reply(effects(coded)));
    let s = run(&engine, &mut host);
    assert_eq!(host.sent_to(A).len(), 2, "both subscriptions are asked");
    assert_eq!(
        (s.decision, s.decided_by, s.reason.as_deref()),
        (Decision::Deny, DecidedBy::BackendDeny, Some(reason))
    );
    let audit = audit(&s);
    assert_eq!(
        (&audit["decidedBy"], &audit["reason"]),
        (&json!("backend-deny"), &json!(reason))
    );
    let denier = &audit["interceptors"][1];
    assert_eq!(
        (
            &denier["backend"],
            &denier["subscription"],
            &denier["outcome"],
            &denier["code"]
        ),
        (
            &json!(A),
            &json!(1),
            &json!("deny"),
            &json!("com.example.policy.rm_build")
        ),
        "{audit}"
    );
    let silent = &audit["interceptors"][0];
    assert_eq!(
        (&silent["subscription"], &silent["outcome"]),
        (&json!(0), &json!("no-effect"))
    );
    assert!(silent.get("code").is_none(), "{audit}");
}

/// A failure the host reports only after the deadline came too late to be the outcome:
/// under a binding budget it settles as the budget's expiry, as a late reply does, not
/// by a fail-open policy.
#[test]
fn a_failure_reported_after_the_deadline_is_the_deadlines() {
    let engine = load(vec![interceptor(A, "fail-open", 500)]);
    for step in [
        Step::fail(DeliveryError::ConnectionLost).taking(400),
        Step::reply(no_effect()).taking(400),
    ] {
        let mut host = FakeHost::new().on(A, step);
        let s = run_with_budget(&engine, &mut host, T0 + ms(300));
        assert_eq!(s.decided_by, DecidedBy::BudgetExpired, "{}", audit(&s));
    }
    let mut host = FakeHost::new().on(A, Step::fail(DeliveryError::ConnectionLost).taking(600));
    let s = run(&engine, &mut host);
    assert_eq!(audited(&s, 0)["failure"]["class"], "deadline-exceeded");
    assert_eq!(
        s.decision,
        Decision::Allow,
        "fail-open: the deadline's own policy"
    );
}

/// At tool.after, `modify(output)` is the event's `items` (execution-payloads.md@8f91ac4):
/// a merge appends to them, in order, what the next backend sees and what the call
/// takes; a replace substitutes them.
#[test]
fn a_tool_after_output_modify_is_its_items() {
    let hooks = vec![
        backend(A, vec![intercept_sub(&["tool.after"], "fail-closed", 500)]),
        backend(B, vec![intercept_sub(&["tool.after"], "fail-closed", 500)]),
    ];
    let engine = Engine::load_declared(
        &registration(hooks),
        declared(&[InterceptableEvent::ToolAfter]),
    )
    .expect("valid");
    let message = json!({"id": "m2", "role": "tool", "parts": [{"id": "p2", "kind": "text",
        "mediaType": "text/plain", "selection": "body", "text": "[redacted]"}]});
    let output = |operation: &str| {
        effects(
            json!([{"type": "modify", "target": "output", "operation": operation,
                        "value": [message]}]),
        )
    };
    let sent = tool_after()["items"].clone();
    let mut merged = sent.as_array().unwrap().clone();
    merged.push(message.clone());
    for (operation, expected) in [("merge", json!(merged)), ("replace", json!([message]))] {
        let mut host = FakeHost::new()
            .on(A, Step::reply(output(operation)))
            .on(B, Step::reply(effects(json!([]))));
        let s = settle(&engine, &mut host, &tool_after());
        assert_eq!(s.decision, Decision::Allow, "{operation}: {}", audit(&s));
        let b_saw = &host.sent_to(B)[0].json()["params"]["event"];
        assert_eq!(b_saw["items"], expected, "{operation}");
        assert!(b_saw["tool"].get("output").is_none(), "{operation}");
        assert_eq!(audit(&s)["effective"]["output"], expected, "{operation}");
    }
}

/// A reply that redacts a tool's output and stops the agent is accepted whole: the
/// output has been produced already, and the event's observers are handed the redacted
/// one, never what the backend withheld (digest §8: observations carry only accepted
/// effective content).
#[test]
fn a_redaction_beside_a_stop_is_what_observers_get() {
    let hooks = vec![
        backend(A, vec![intercept_sub(&["tool.after"], "fail-closed", 500)]),
        backend(C, vec![observe_sub(&["tool.after"])]),
    ];
    let engine = Engine::load_declared(
        &registration(hooks),
        declared(&[InterceptableEvent::ToolAfter]),
    )
    .expect("valid");
    let redacted = json!([{"id": "m2", "role": "tool", "parts": [{"id": "p2", "kind": "text",
        "mediaType": "text/plain", "selection": "body", "text": "[redacted]"}]}]);
    let reply = effects(json!([
        {"type": "modify", "target": "output", "operation": "replace", "value": redacted},
        {"type": "flow", "operation": "stop", "reason": "leak"}
    ]));
    let mut host = FakeHost::new().on(A, Step::reply(reply));
    let s = settle(&engine, &mut host, &tool_after());
    assert_eq!(
        observer_kinds(&s),
        [(C, ObserverKind::Owned)],
        "{}",
        audit(&s)
    );
    let notification: Value = serde_json::from_slice(prepared(&s.observers[0]).bytes()).unwrap();
    let observed = &notification["params"]["event"];
    assert_eq!(observed["items"], redacted, "{observed}");
}

/// Every other modify target, at its place in its event (`events::TABLE`): a backend's
/// replace is what the next backend is sent there, the rest of the event as it was, and
/// the harness is handed it as the effective value; a merge appends to a list, or sets
/// an object's members. (tool.before's input, tool.after's output and an elicitation's
/// answer have their own tests.)
#[test]
fn every_modify_target_reaches_the_next_backend_and_the_settlement() {
    use InterceptableEvent as E;
    let part = |id: &str, text: &str| {
        json!({"id": id, "kind": "text", "mediaType": "text/plain", "selection": "body",
               "text": text})
    };
    let message =
        |role: &str| json!({"id": "m9", "role": role, "parts": [part("m9-t", "[edited]")]});
    let cases = [
        (E::TurnStart, "prompt", "/items", json!([message("user")])),
        (
            E::UserMessageInbound,
            "prompt",
            "/message/messages",
            json!([message("user")]),
        ),
        (
            E::ModelRequestBefore,
            "request",
            "/items",
            json!([message("user")]),
        ),
        (
            E::TurnFinishBefore,
            "response",
            "/items",
            json!([message("assistant")]),
        ),
        (
            E::ModelResponseAfter,
            "response",
            "/items",
            json!([message("assistant")]),
        ),
        (
            E::ContextCompactBefore,
            "instructions",
            "/instructions",
            json!([part("t9", "Keep nothing.")]),
        ),
        (
            E::ContextCompactAfter,
            "summary",
            "/summary",
            json!([part("t9", "[redacted]")]),
        ),
        (
            E::WorkspaceChangeBefore,
            "workspace",
            "/workspace/change",
            json!({"workspaceRoots": ["/repo"]}),
        ),
        (
            E::ToolPermissionRequest,
            "input",
            "/tool/input",
            json!({"command": "pwd"}),
        ),
        (
            E::UserMessageOutbound,
            "content",
            "/message/messages",
            json!([message("assistant")]),
        ),
    ];
    for (kind, target, pointer, value) in cases {
        let rules = ahp_interceptor::events::of(kind);
        let declared_target = rules.modify.map(|(t, at)| (t.as_str(), at));
        assert_eq!(declared_target, Some((target, pointer)), "{kind}");
        let hooks = vec![
            backend(A, vec![intercept_sub(&[kind.as_str()], "fail-closed", 500)]),
            backend(B, vec![intercept_sub(&[kind.as_str()], "fail-closed", 500)]),
        ];
        let engine = Engine::load_declared(&registration(hooks), declared(&[kind])).expect("valid");
        let event = catalogue_event(kind.as_str());
        let original = event.pointer(pointer).cloned().expect("the target's value");
        let merged = match (&original, &value) {
            (Value::Array(sent), Value::Array(added)) => {
                json!([sent.clone(), added.clone()].concat())
            }
            (Value::Object(sent), Value::Object(set)) => {
                let mut merged = sent.clone();
                merged.extend(set.clone());
                Value::Object(merged)
            }
            _ => panic!("{kind}: a list or an object"),
        };
        assert_ne!(merged, original, "{kind}: the merge changes something");
        for (operation, expected) in [("replace", value.clone()), ("merge", merged)] {
            let modify = effects(json!([{"type": "modify", "target": target,
                                         "operation": operation, "value": value}]));
            let mut host = FakeHost::new()
                .on(A, Step::reply(modify))
                .on(B, Step::reply(no_effect()));
            let s = settle(&engine, &mut host, &event);
            let case = format!("{kind} {operation}");
            assert_eq!(s.decision, Decision::Allow, "{case}: {}", audit(&s));
            assert_eq!(
                outcomes(&s),
                [Outcome::NoEffect, Outcome::NoEffect],
                "{case}"
            );
            let mut b_saw = host.sent_to(B)[0].json()["params"]["event"].clone();
            assert_eq!(b_saw.pointer(pointer), Some(&expected), "{case}");
            *b_saw.pointer_mut(pointer).unwrap() = original.clone();
            assert_eq!(b_saw, event, "{case}: nothing else changed");
            assert_eq!(audit(&s)["effective"], json!({target: expected}), "{case}");
            assert_eq!(s.enforce.effective.get(target), Some(&expected), "{case}");
        }
    }
}

/// At user.elicitation.result, `modify(content)` edits the MCP answer inside the result
/// part's serialized `ElicitResult` (interaction-payloads.md@8f91ac4): a merge keeps
/// the answer's other fields and the result's action, the next backend is sent the
/// re-serialized part, and the harness is handed the answer. A nested value (upstream
/// `contextual-elicitation-content-nested.invalid.json`) is a malformed effect, settled by
/// policy; a result not accepted, or whose part is not selected as body, exposes no
/// answer (`…-decline.invalid.json`): modify is withdrawn from that call's capabilities,
/// and a backend's change is unadvertised, settled by its policy.
#[test]
fn an_elicitation_answer_is_modified_inside_its_result_part() {
    let kind = InterceptableEvent::UserElicitationResult;
    let hooks = vec![
        backend(A, vec![intercept_sub(&[kind.as_str()], "fail-closed", 500)]),
        backend(B, vec![intercept_sub(&[kind.as_str()], "fail-closed", 500)]),
    ];
    let engine = Engine::load_declared(&registration(hooks), declared(&[kind])).expect("valid");
    let content = |operation: &str, value: Value| {
        effects(
            json!([{"type": "modify", "target": "content", "operation": operation,
                        "value": value}]),
        )
    };
    let accepted = catalogue_event(kind.as_str());
    let mut host = FakeHost::new()
        .on(A, Step::reply(content("merge", json!({"age": 3}))))
        .on(B, Step::reply(effects(json!([]))));
    let s = settle(&engine, &mut host, &accepted);
    assert_eq!(s.decision, Decision::Allow, "{}", audit(&s));
    let answer = json!({"name": "x", "age": 3});
    assert_eq!(audit(&s)["effective"]["content"], answer);
    let b_saw = &host.sent_to(B)[0].json()["params"]["event"]["elicitation"];
    let result: Value = serde_json::from_str(b_saw["result"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(result, json!({"action": "accept", "content": answer}));
    assert_eq!(b_saw["action"], "accept");

    for (operation, value) in [
        ("merge", json!({"nested": {"x": 1}})),
        ("replace", json!({"list": [1]})),
    ] {
        let mut host = FakeHost::new().on(A, Step::reply(content(operation, value.clone())));
        let s = settle(&engine, &mut host, &accepted);
        assert_synthetic_deny(&s);
        assert_eq!(
            audited(&s, 0)["failure"]["detail"],
            "malformed-effect",
            "{value}"
        );
        assert!(audit(&s).get("effective").is_none(), "{}", audit(&s));
    }
    let mut declined = accepted.clone();
    declined["elicitation"]["action"] = json!("decline");
    let mut unselected = accepted.clone();
    unselected["elicitation"]["result"] = json!({"id": "r1", "kind": "text",
        "mediaType": "text/plain", "selection": "metadata"});
    for event in [declined, unselected] {
        let mut host = FakeHost::new().on(A, Step::reply(content("merge", json!({}))));
        let s = settle(&engine, &mut host, &event);
        let offered = &host.sent_to(A)[0].json()["params"]["capabilities"];
        assert!(offered.get("modify").is_none(), "{offered}");
        assert!(
            !offered["effects"]
                .as_array()
                .unwrap()
                .contains(&json!("modify")),
            "{offered}"
        );
        assert_synthetic_deny(&s);
        assert_eq!(audited(&s, 0)["failure"]["detail"], "unadvertised-effect");
    }
}

/// At user.elicitation.result, a harness result whose `content` is no answer MCP allows
/// (`null`) exposes none: modify is withdrawn, so a backend's merge is unadvertised, not
/// a misfit blamed on it. A result with no `content` yet still takes a merge, which sets
/// the answer.
#[test]
fn an_elicitation_result_whose_content_is_no_answer_offers_no_modify() {
    let kind = InterceptableEvent::UserElicitationResult;
    let engine = one_backend_on(kind);
    let merge = effects(
        json!([{"type": "modify", "target": "content", "operation": "merge",
                                "value": {"age": 3}}]),
    );
    let with_result = |text: &str| {
        let mut event = catalogue_event(kind.as_str());
        event["elicitation"]["result"]["text"] = json!(text);
        event
    };

    let null = with_result(r#"{"action":"accept","content":null}"#);
    let mut host = FakeHost::new().on(A, Step::reply(merge.clone()));
    let s = settle(&engine, &mut host, &null);
    let offered = &host.sent_to(A)[0].json()["params"]["capabilities"];
    assert!(offered.get("modify").is_none(), "{offered}");
    assert_synthetic_deny(&s);
    assert_eq!(audited(&s, 0)["failure"]["detail"], "unadvertised-effect");

    let absent = with_result(r#"{"action":"accept"}"#);
    let mut host = FakeHost::new().on(A, Step::reply(merge));
    let s = settle(&engine, &mut host, &absent);
    assert_eq!(s.decision, Decision::Allow, "{}", audit(&s));
    assert_eq!(audit(&s)["effective"]["content"], json!({"age": 3}));
}

/// At user.elicitation.result, the answer is offered for modification only to a
/// subscription shown the result part as body (composition.md@8f91ac4: "It requires an
/// accepted form result and body selection"): one whose selection lowers it to
/// metadata is offered no modify, and its merge is unadvertised, settled by its
/// policy; the same call offers it to a subscription shown the part whole.
#[test]
fn an_elicitation_answer_not_shown_as_body_is_not_offered_for_modification() {
    let kind = InterceptableEvent::UserElicitationResult;
    let mut described = intercept_sub(&[kind.as_str()], "fail-open", 500);
    described["content"] = json!({"default": "metadata"});
    let hooks = vec![
        backend(A, vec![described]),
        backend(B, vec![intercept_sub(&[kind.as_str()], "fail-closed", 500)]),
    ];
    let engine = Engine::load_declared(&registration(hooks), declared(&[kind])).expect("valid");
    let merge = effects(
        json!([{"type": "modify", "target": "content", "operation": "merge",
                "value": {"age": 3}}]),
    );
    let mut host = FakeHost::new()
        .on(A, Step::reply(merge.clone()))
        .on(B, Step::reply(merge));
    let s = settle(&engine, &mut host, &catalogue_event(kind.as_str()));
    let offered = |backend| host.sent_to(backend)[0].json()["params"]["capabilities"].clone();
    assert!(offered(A).get("modify").is_none(), "{}", offered(A));
    assert_eq!(
        offered(B)["modify"],
        json!({"content": {"merge": true, "replace": true}})
    );
    assert_eq!(outcomes(&s), [Outcome::FailedOpen, Outcome::NoEffect]);
    assert_eq!(audited(&s, 0)["failure"]["detail"], "unadvertised-effect");
    assert_eq!(s.decision, Decision::Allow, "{}", audit(&s));
    assert_eq!(
        audit(&s)["effective"]["content"],
        json!({"name": "x", "age": 3})
    );
}

/// An attachment in an effect's content must be one the event holds, unchanged, that
/// the subscription was shown whole (composition.md@8f91ac4): kept where it was, or
/// moved, it is accepted; one made up, pointed at other bytes, or echoed by a backend
/// shown it only as metadata is a malformed effect, the reply rejected whole.
#[test]
fn an_attachment_in_an_effect_must_be_one_the_backend_was_shown() {
    let kind = InterceptableEvent::ToolAfter;
    let image = json!({"id": "p_image", "kind": "attachment", "mediaType": "image/png",
        "selection": "body", "body": {"ref": "blob-1"}, "size": 4,
        "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"});
    let mut event = catalogue_event(kind.as_str());
    event["items"] = json!([{"id": "out1", "role": "tool", "parts": [image.clone()]}]);
    let with_parts = |parts: Value| {
        effects(
            json!([{"type": "modify", "target": "output", "operation": "replace",
            "value": [{"id": "out2", "role": "tool", "parts": parts}]}]),
        )
    };
    let engine_for = |content: Value| {
        let mut subscription = intercept_sub(&[kind.as_str()], "fail-closed", 500);
        subscription["content"] = content;
        let hooks = vec![backend(A, vec![subscription])];
        Engine::load_declared(&registration(hooks), declared(&[kind])).expect("valid")
    };
    let shown = engine_for(json!({"default": "body"}));

    let kept = with_parts(json!([image.clone()]));
    let mut host = FakeHost::new().on(A, Step::reply(kept));
    let s = settle(&shown, &mut host, &event);
    assert_eq!(s.decision, Decision::Allow, "{}", audit(&s));
    assert_eq!(audit(&s)["effective"]["output"][0]["parts"][0], image);

    let mut elsewhere = image.clone();
    elsewhere["body"]["ref"] = json!("blob-2");
    let mut made_up = image.clone();
    made_up["id"] = json!("p_other");
    for part in [elsewhere, made_up] {
        let mut host = FakeHost::new().on(A, Step::reply(with_parts(json!([part.clone()]))));
        let s = settle(&shown, &mut host, &event);
        assert_synthetic_deny(&s);
        assert_eq!(
            audited(&s, 0)["failure"]["detail"],
            "malformed-effect",
            "{part}"
        );
        assert!(audit(&s).get("effective").is_none(), "{}", audit(&s));
    }

    // Shown as metadata only (merge, still offered), echoing the harness's part whole.
    let described = engine_for(json!({"default": "metadata"}));
    let merge = effects(
        json!([{"type": "modify", "target": "output", "operation": "merge",
        "value": [{"id": "out2", "role": "tool", "parts": [image]}]}]),
    );
    let mut host = FakeHost::new().on(A, Step::reply(merge));
    let s = settle(&described, &mut host, &event);
    assert_synthetic_deny(&s);
    assert_eq!(audited(&s, 0)["failure"]["detail"], "malformed-effect");
}

/// A call whose budget runs out only after its decision (a reply accepted in time, the
/// clock then past the budget) keeps that decision, and its observers are recorded as
/// withheld, not left out of the record as if none had matched: no time is left to
/// prepare them, so nothing is encoded or sent. An expired call records none.
#[test]
fn observers_past_a_budget_that_ran_out_after_the_decision_are_recorded_withheld() {
    let engine = load(vec![
        interceptor(A, "fail-open", 500),
        backend(C, vec![observe_sub(&["tool.before"])]),
    ]);
    let step = Step::reply(no_effect()).taking(98).then_lag(5);
    let mut host = FakeHost::new().on(A, step);
    let s = run_with_budget(&engine, &mut host, T0 + ms(100));
    assert_no_objection(&s);
    assert_eq!(s.observers.len(), 1, "{}", audit(&s));
    assert_eq!(s.observers[0].backend, C);
    assert!(
        s.observers[0].message.is_none(),
        "withheld: nothing encoded"
    );
    assert_eq!(audit(&s)["observers"][0]["result"], "withheld");
}

/// A supplied result at a `user.elicitation.request` is an MCP `ElicitResult` its
/// request can take: a URL request's carries no answer `content`
/// (interaction-payloads.md@8f91ac4), a malformed effect, settled by policy; a form
/// request's may.
#[test]
fn a_supplied_elicitation_result_fits_its_requests_mode() {
    let kind = InterceptableEvent::UserElicitationRequest;
    let engine = one_backend_on(kind);
    let answered = effects(json!([{"type": "return",
        "value": {"action": "accept", "content": {"name": "x"}}}]));
    let form = catalogue_event(kind.as_str());
    let mut host = FakeHost::new().on(A, Step::reply(answered.clone()));
    let s = settle(&engine, &mut host, &form);
    assert_eq!(s.decision, Decision::Allow, "{}", audit(&s));
    assert_eq!(audit(&s)["returned"]["content"], json!({"name": "x"}));

    let mut url = form.clone();
    url["elicitation"]["mode"] = json!("url");
    let mut host = FakeHost::new().on(A, Step::reply(answered));
    let s = settle(&engine, &mut host, &url);
    assert_synthetic_deny(&s);
    assert_eq!(audited(&s, 0)["failure"]["detail"], "malformed-effect");
    let accepted = effects(json!([{"type": "return", "value": {"action": "accept"}}]));
    let mut host = FakeHost::new().on(A, Step::reply(accepted));
    let s = settle(&engine, &mut host, &url);
    assert_eq!(s.decision, Decision::Allow, "{}", audit(&s));
}

/// An interruption while observers are prepared ends the preparing there: no view is
/// encoded after it (observation-disposition.md: observers "must not delay
/// interruption"), and the call settles as interrupted at once, not after the time to
/// prepare them all.
#[test]
fn an_interruption_stops_preparing_observers() {
    let mut hooks = vec![interceptor(A, "fail-open", 500)];
    hooks.extend((0..5).map(|n| {
        let mut subscription = observe_sub(&["tool.before"]);
        subscription["content"][format!("category{n}")] = json!("omit");
        backend(&format!("com.example.watch{n}"), vec![subscription])
    }));
    let engine = load(hooks);
    let mut host = FakeHost::new().on(A, Step::reply(no_effect()));
    // A's request is hashed by T0 + 100 ms, the first view by 200 ms.
    host.hash_takes_ms = 100;
    host.interrupted_at = Some(T0 + ms(150));
    let s = run(&engine, &mut host);
    assert_eq!(s.decided_by, DecidedBy::Interrupted);
    assert!(s.observers.is_empty());
    assert!(
        host.now.get() < T0 + ms(250),
        "preparing went on to {} ms",
        (host.now.get() - T0) / ms(1)
    );
}

/// A supplied form answer satisfies the request's `requestedSchema` where the event
/// holds the request (interaction-payloads.md@8f91ac4: it "must satisfy the requesting
/// form schema"): each required field there, each field it names of its type, within
/// its bounds and one of its choices; else a malformed effect.
#[test]
fn a_supplied_form_answer_satisfies_the_requested_schema() {
    let kind = InterceptableEvent::UserElicitationRequest;
    let engine = one_backend_on(kind);
    let params = json!({"message": "Who?", "requestedSchema": {"type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "age": {"type": "integer", "minimum": 0},
            "color": {"type": "string", "enum": ["red", "blue"]},
            "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]},
                     "maxItems": 2},
            "ok": {"type": "boolean"}},
        "required": ["name"]}});
    let mut event = catalogue_event(kind.as_str());
    event["elicitation"]["request"] = json!({"id": "q1", "kind": "text",
        "mediaType": "text/plain", "selection": "body", "text": params.to_string()});
    let settled = |content: Value| {
        let answer = effects(json!([{"type": "return",
            "value": {"action": "accept", "content": content}}]));
        let mut host = FakeHost::new().on(A, Step::reply(answer));
        settle(&engine, &mut host, &event)
    };
    // A field the schema does not name is JSON Schema's default, allowed.
    let fitting = json!({"name": "x", "age": 3, "color": "red", "size": "s",
                         "tags": ["a", "b"], "ok": true, "other": 1});
    let s = settled(fitting);
    assert_eq!(s.decision, Decision::Allow, "{}", audit(&s));
    // An accept with no answer gives none of the required fields.
    let bare = effects(json!([{"type": "return", "value": {"action": "accept"}}]));
    let mut host = FakeHost::new().on(A, Step::reply(bare));
    let s = settle(&engine, &mut host, &event);
    assert_synthetic_deny(&s);
    for misfit in [
        json!({"age": 3}),
        json!({"name": ""}),
        json!({"name": "x", "age": 3.5}),
        json!({"name": "x", "age": -1}),
        json!({"name": "x", "age": "3"}),
        json!({"name": "x", "color": "green"}),
        json!({"name": "x", "size": "m"}),
        json!({"name": "x", "tags": ["c"]}),
        json!({"name": "x", "tags": ["a", "b", "a"]}),
    ] {
        let s = settled(misfit.clone());
        assert_synthetic_deny(&s);
        assert_eq!(
            audited(&s, 0)["failure"]["detail"],
            "malformed-effect",
            "{misfit}"
        );
    }
}
