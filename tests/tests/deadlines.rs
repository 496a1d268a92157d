//! Deadlines end to end (failure-semantics.md "Deadlines", AHP-FAIL-002): the real
//! component against loopback backends that never answer, answer late, or trickle.
//!
//! Every deadline case asserts the failure class and phase, the policy's outcome, and that
//! the call returned no earlier than the deadline and no later than the deadline plus a
//! generous slack (a correctness bound, not a benchmark).

use ahp_host::{DecidedBy, Decision, EffectKind, Interceptor, Interrupt, Options, Settlement};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    assert_failed, assert_settled, assert_settled_at, attempts, audit_lines, audit_lines_once,
    audited, event, eventually, interceptor, locked_elsewhere, only_interceptor, record_json,
    registration, settle, timed_call, Http, SLACK,
};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const BACKEND: &str = "com.example.policy";
const BUDGET_REASON: &str = "Policy evaluation did not finish within the hook call budget.";

/// Asserts a settled deadline failure in `phase` under `policy`, with exactly one attempt.
fn assert_deadline_failure(
    settled: &Settlement,
    id: &str,
    policy: &str,
    timeout_ms: u64,
    phase: &str,
) {
    let failure = assert_failed(settled, policy, "deadline-exceeded", id);
    assert_eq!(
        failure,
        json!({"class": "deadline-exceeded", "phase": phase})
    );
    let record = &record_json(settled);
    let entry = only_interceptor(record);
    assert_eq!(record["event"]["id"], json!(id));
    assert_eq!(entry["backend"], json!(BACKEND));
    assert_eq!(entry["timeoutMs"], json!(timeout_ms));
    let attempts = attempts(entry);
    assert_eq!(attempts.len(), 1, "a deadline is never retried: {entry}");
    assert_eq!(attempts[0]["n"], json!(1));
    assert_eq!(attempts[0]["result"], json!("deadline-exceeded"));
}

/// One call `id` to a fresh interceptor for `url` under `policy`: it fails with a deadline
/// in `phase`, settled at the `timeout_ms` deadline.
async fn deadline_case(url: String, policy: &str, timeout_ms: u64, phase: &str, id: &str) {
    let reg = registration(&[Http::new(BACKEND, url)
        .policy(policy)
        .timeout_ms(timeout_ms)]);
    let interceptor = interceptor(&reg).await;
    let (settled, elapsed) = timed_call(&interceptor, id, None).await;
    assert_deadline_failure(&settled, id, policy, timeout_ms, phase);
    assert_settled_at(elapsed, Duration::from_millis(timeout_ms), id);
}

/// A backend that reads the request and never answers, 200 ms timeout.
async fn blackhole_case(policy: &str) {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let id = format!("evt_blackhole_{policy}");
    deadline_case(backend.url(), policy, 200, "await-response", &id).await;
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
    let id = format!("evt_unread_{policy}");
    deadline_case(backend.url(), policy, 200, "await-response", &id).await;
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
    let reg = registration(&[Http::new(BACKEND, backend.url())
        .policy("fail-closed")
        .timeout_ms(200)]);
    let options = Options {
        audit_path: Some(audit.clone()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg, options)
        .await
        .expect("valid registration");

    let (first, elapsed) = timed_call(&interceptor, "evt_slow_1", None).await;
    assert_deadline_failure(&first, "evt_slow_1", "fail-closed", 200, "await-response");
    assert_settled_at(elapsed, Duration::from_millis(200), "slow reply");

    // Long enough for the delayed reply to have been sent.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let lines = audit_lines(&audit);
    assert_eq!(
        lines,
        vec![record_json(&first)],
        "the audit log holds the one settled record"
    );
    assert_eq!(backend.requests().len(), 1);

    let (second, elapsed) = timed_call(&interceptor, "evt_slow_2", None).await;
    println!("after the late reply: settled in {elapsed:?}");
    assert_settled(&second, Decision::Allow, DecidedBy::NoObjection, None);
    let record = record_json(&second);
    let entry = only_interceptor(&record);
    assert_eq!(entry["outcome"], json!("no-effect"));
    assert_eq!(entry.get("failure"), None, "no failure in {entry}");
    assert_eq!(record_json(&second)["event"]["id"], json!("evt_slow_2"));
    let requests = backend.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].json()["id"], json!("evt_slow_2"));
    assert_eq!(
        audit_lines(&audit),
        vec![record_json(&first), record_json(&second)]
    );
}

/// A deny that comes 50 ms after its 200 ms deadline is ignored, not obeyed (conformance
/// F12): under fail-open the chain goes on to the next backend and the call is allowed;
/// the late deny's reason is nowhere in the settlement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_after_the_deadline_is_ignored_under_fail_open() {
    const LATE_REASON: &str = "late deny 6b1f0c";
    let late = Behaviour::Delay(
        Duration::from_millis(250),
        Box::new(Behaviour::Deny(LATE_REASON.into())),
    );
    let late_backend = FaultBackend::start(vec![late]).await;
    let next_backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let reg = registration(&[
        Http::new(BACKEND, late_backend.url())
            .policy("fail-open")
            .timeout_ms(200),
        Http::new("com.example.next", next_backend.url()).policy("fail-closed"),
    ]);
    let interceptor = Interceptor::new(&reg, Options::default())
        .await
        .expect("valid registration");
    let (settled, elapsed) = timed_call(&interceptor, "evt_late_deny", None).await;
    assert_settled(&settled, Decision::Allow, DecidedBy::NoObjection, None);
    assert_settled_at(elapsed, Duration::from_millis(200), "late deny");
    let record = record_json(&settled);
    let interceptors = record["interceptors"].as_array().expect("interceptors");
    assert_eq!(interceptors[0]["outcome"], json!("failed-open"), "{record}");
    assert_eq!(
        interceptors[0]["failure"],
        json!({"class": "deadline-exceeded", "phase": "await-response"})
    );
    assert_eq!(interceptors[1]["outcome"], json!("no-effect"), "{record}");
    assert_eq!(
        next_backend.requests().len(),
        1,
        "the next backend was asked"
    );
    // The late deny was sent, and nothing of it was taken.
    assert_eq!(late_backend.requests().len(), 1);
    assert!(!settled.to_json().contains(LATE_REASON), "{record}");
}

/// A kept-alive connection carries each call's own deadline: the second call, on the
/// connection the first one used, long after the first call's deadline has passed, still
/// gets its full timeout (not none, not the first call's), and the slow reply it abandons
/// is never read into a later call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_holds_each_call_to_its_own_deadline() {
    let slow = Behaviour::Delay(Duration::from_millis(600), Box::new(Behaviour::NoEffect));
    let backend = FaultBackend::start(vec![Behaviour::NoEffect, slow, Behaviour::NoEffect]).await;
    let reg = registration(&[Http::new(BACKEND, backend.url())
        .policy("fail-closed")
        .timeout_ms(200)]);
    let interceptor = interceptor(&reg).await;

    let (first, _) = timed_call(&interceptor, "evt_kept_1", None).await;
    assert_settled(&first, Decision::Allow, DecidedBy::NoObjection, None);
    // Past the first call's deadline, with its connection idle in the pool.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (second, elapsed) = timed_call(&interceptor, "evt_kept_2", None).await;
    assert_eq!(
        backend.connections(),
        1,
        "the second call reused the connection"
    );
    assert_deadline_failure(&second, "evt_kept_2", "fail-closed", 200, "await-response");
    assert_settled_at(elapsed, Duration::from_millis(200), "reused connection");

    let (third, _) = timed_call(&interceptor, "evt_kept_3", None).await;
    assert_settled(&third, Decision::Allow, DecidedBy::NoObjection, None);
    let requests = backend.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2].json()["id"], json!("evt_kept_3"));
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
    let id = "evt_trickle";
    // The body the backend trickles: one byte per 50 ms, so it needs well over a second.
    let body =
        json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "draft", "effects": []}});
    assert!(every * body.to_string().len() as u32 > Duration::from_secs(1));

    deadline_case(backend.url(), "fail-closed", 300, "read-response", id).await;
    assert_eq!(backend.requests().len(), 1);
}

/// A hook-call budget shorter than the interceptor's timeout ends the call at the budget
/// as `budget-expired` — a denial even though the subscription fails open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_shorter_than_the_timeout_denies_even_under_fail_open() {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let reg = registration(&[Http::new(BACKEND, backend.url())
        .policy("fail-open")
        .timeout_ms(1_000)]);
    let interceptor = interceptor(&reg).await;
    let budget = Duration::from_millis(150);
    let (settled, elapsed) = timed_call(&interceptor, "evt_budget", Some(budget)).await;
    assert_settled_at(elapsed, budget, "budget");
    assert_settled(
        &settled,
        Decision::Deny,
        DecidedBy::BudgetExpired,
        Some(BUDGET_REASON),
    );
    let record = record_json(&settled);
    let entry = only_interceptor(&record);
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
        let id = format!("evt_slow_connect_{policy}");
        deadline_case(url.clone(), policy, 200, "connect", &id).await;
    }
}

/// `Duration::MAX` is a natural way to say "no budget": it bounds nothing (the
/// registration's timeouts still do), where adding it to the start once panicked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_past_the_end_of_time_bounds_nothing() {
    let backend = FaultBackend::start(vec![Behaviour::Deny("no".into())]).await;
    let interceptor = interceptor(&registration(&[Http::new(BACKEND, backend.url())])).await;
    let settled = interceptor
        .intercept(
            &ahp_tests::support::event("evt_budget_max"),
            &[ahp_host::EffectKind::Deny],
            Some(Duration::MAX),
        )
        .await
        .expect("a settlement");
    assert_eq!(settled.decided_by, DecidedBy::BackendDeny);
    // Of an event no interceptor selects: tool.before is for intercept.
    let observed = interceptor
        .observe(
            &ahp_tests::support::valid_event("session.start", "evt_budget_max_2"),
            Some(Duration::MAX),
        )
        .await
        .expect("observed");
    assert!(!observed.engine_failure, "{observed:?}");
}

/// The budget bounds the whole call, writing its audit record too: while another process
/// holds the audit file's lock, the call returns its decision at the budget (plus the
/// record's 250 ms grace), and the record is written once the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_audit_file_does_not_hold_the_call_past_its_budget() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let audit = dir.path().join("audit.jsonl");
    let options = Options {
        audit_path: Some(audit.clone()),
        ..Options::default()
    };
    let hooks = Interceptor::new(&registration(&[Http::new(BACKEND, backend.url())]), options)
        .await
        .expect("valid");
    let holder = locked_elsewhere(&audit);

    let budget = Duration::from_secs(1);
    let calling = timed_call(&hooks, "evt_locked_audit", Some(budget));
    let (settled, elapsed) = tokio::time::timeout(Duration::from_secs(5), calling)
        .await
        .expect("the call returns while the audit file is locked");
    assert_eq!(settled.decision, Decision::Allow);
    assert!(
        elapsed < budget + Duration::from_millis(250) + SLACK,
        "held {elapsed:?} by the audit file's lock"
    );
    assert!(audit_lines(&audit).is_empty());

    holder.unlock().expect("unlock");
    assert_eq!(audit_lines_once(&audit, 1).await, [record_json(&settled)]);
}

/// A call completed after its budget (a harness that acted on `settle`'s decision first)
/// still returns only once its record is synced: the grace counts from the write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_completed_after_its_budget_returns_with_its_record_written() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let audit = dir.path().join("audit.jsonl");
    let hooks = audited(&audit, BACKEND, &backend.url(), "fail-closed").await;
    let budget = Some(Duration::from_millis(100));
    let call = settle(&hooks, "evt_late_complete", budget).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let settled = call.complete().await;
    assert_eq!(audit_lines(&audit), [record_json(&settled)]);
}

/// A call dropped by the harness while another process holds the audit file's lock
/// (a `timeout` around `intercept`) lets the harness go on at once; its record,
/// interrupted, is written once the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_while_the_audit_file_is_locked_holds_nobody() {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let audit = dir.path().join("audit.jsonl");
    let hooks = audited(&audit, BACKEND, &backend.url(), "fail-closed").await;
    let holder = locked_elsewhere(&audit);

    let dropped = event("evt_dropped_locked");
    let started = Instant::now();
    let cut = tokio::time::timeout(Duration::from_millis(300), async {
        hooks
            .intercept(&dropped, &[EffectKind::Deny], Some(Duration::from_secs(5)))
            .await
    });
    let unlock = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        holder.unlock().expect("unlock");
    });
    assert!(cut.await.is_err(), "the backend never answers");
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_millis(300) + SLACK,
        "held {elapsed:?}"
    );
    unlock.join().expect("the unlocking thread");
    let lines = audit_lines_once(&audit, 1).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["decidedBy"], "interrupted");
}

/// Whether someone waits for a lock on `path` (a `->` line of /proc/locks naming its
/// inode).
fn lock_waited_for(path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let inode = std::fs::metadata(path).expect("the file").ino();
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    locks.lines().any(|line| {
        line.contains("->")
            && line
                .split_whitespace()
                .any(|field| field.rsplit(':').next() == Some(&inode.to_string()))
    })
}

/// An interceptor whose backend raises no objection, its audit file locked by another
/// holder (`holder`, as another process's lock) until [`Locked::release`], and the
/// interruption its calls are made with.
struct Locked {
    backend: FaultBackend,
    audit: std::path::PathBuf,
    hooks: Interceptor,
    holder: std::fs::File,
    interrupt: Interrupt,
    _dir: tempfile::TempDir,
}

impl Locked {
    async fn new() -> Locked {
        let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let audit = dir.path().join("audit.jsonl");
        let hooks = audited(&audit, BACKEND, &backend.url(), "fail-closed").await;
        let holder = locked_elsewhere(&audit);
        Locked {
            backend,
            audit,
            hooks,
            holder,
            interrupt: Interrupt::new(),
            _dir: dir,
        }
    }

    /// Starts `intercept_with` of a new event `id` (no objection), and returns it once
    /// decided, its record waiting for the audit file's lock: the writer is a waiter on
    /// the file's flock in /proc/locks.
    async fn waiting(
        &self,
        id: &str,
        budget: Option<Duration>,
    ) -> std::pin::Pin<Box<impl std::future::Future<Output = Settlement> + '_>> {
        let request = event(id);
        let mut calling = Box::pin(async move {
            let called =
                self.hooks
                    .intercept_with(&request, &[EffectKind::Deny], budget, &self.interrupt);
            called.await.expect("a valid event")
        });
        let decided_and_waiting = async {
            assert!(
                self.backend
                    .wait_for_requests(1, Duration::from_secs(5))
                    .await
            );
            let waited = eventually(Duration::from_secs(10), || lock_waited_for(&self.audit));
            assert!(waited.await, "the record never waited");
        };
        tokio::select! {
            _ = &mut calling => panic!("returned while the record waits for the lock"),
            () = decided_and_waiting => {}
        }
        calling
    }

    /// Lets the other holder's lock go.
    fn release(&self) {
        self.holder.unlock().expect("unlock");
    }

    /// The audit file's one line, once written.
    async fn lines(&self) -> Vec<Value> {
        audit_lines_once(&self.audit, 1).await
    }
}

/// A call without a budget whose record waits for the audit file's lock (another
/// process holding it) is not held there past an interruption or a shutdown: the wait
/// ends a grace later, and the record, still queued, is written once the lock is free.
/// Before, only the lock's release ended it (a signalled `ahp intercept` waited on).
/// The decision was not handed out: the signal overrides it, in the record too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_waiting_for_the_lock_does_not_hold_a_call_past_a_signal() {
    for (stop, by) in [
        ("interrupt", DecidedBy::Interrupted),
        ("shutdown", DecidedBy::Shutdown),
    ] {
        let locked = Locked::new().await;
        let calling = locked.waiting(&format!("evt_lock_{stop}"), None).await;
        match stop {
            "interrupt" => locked.interrupt.interrupt(),
            _ => locked.hooks.shutdown(),
        }
        let returned = tokio::time::timeout(Duration::from_secs(10), calling).await;
        let settled = returned.unwrap_or_else(|_| panic!("{stop}: held by the lock"));
        assert_eq!(settled.decision, Decision::Deny, "{stop}");
        assert_eq!(settled.decided_by, by, "{stop}");
        locked.release();
        assert_eq!(locked.lines().await, [record_json(&settled)], "{stop}");
    }
}

/// A signal while an allow's record waits for the audit file's lock (another process
/// holding it), the lock freed right after: the writer, once it has the lock, finds the
/// call interrupted and writes its denial, and the call returns that denial — the allow
/// was never handed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_while_the_record_waits_for_the_lock_overrides_the_allow() {
    let locked = Locked::new().await;
    let calling = locked.waiting("evt_lock_overridden", None).await;
    locked.interrupt.interrupt();
    locked.release();
    let settled = tokio::time::timeout(Duration::from_secs(10), calling)
        .await
        .expect("returns once the record is written");
    assert_eq!(settled.decision, Decision::Deny);
    assert_eq!(settled.decided_by, DecidedBy::Interrupted);
    let lines = locked.lines().await;
    assert_eq!(lines, [record_json(&settled)]);
    assert_eq!(lines[0]["decidedBy"], "interrupted");
}

/// An allow handed out once its record waited past the budget (and the grace) for the
/// audit file's lock stands: a signal after that does not turn its record, written once
/// the lock is free, into a denial the caller never got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_handed_out_while_its_record_waits_stands_in_the_record() {
    let locked = Locked::new().await;
    // Long enough for the call to be decided (no objection) under load first.
    let budget = Some(Duration::from_secs(2));
    let calling = locked.waiting("evt_lock_handed_out", budget).await;
    let settled = tokio::time::timeout(Duration::from_secs(10), calling)
        .await
        .expect("returns past the budget and the grace");
    assert_eq!(settled.decision, Decision::Allow);
    assert_eq!(settled.decided_by, DecidedBy::NoObjection);
    locked.interrupt.interrupt();
    locked.release();
    let lines = locked.lines().await;
    assert_eq!(lines, [record_json(&settled)]);
    assert_eq!(lines[0]["decidedBy"], "no-objection");
}

/// A call whose `intercept_with` future is dropped (a caller's own timeout) while its
/// allow's record waits for the audit file's lock was handed nothing: its record, written
/// once the lock is free, is the dropped call's `interrupted` denial, not the allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_while_its_record_waits_is_recorded_interrupted() {
    let locked = Locked::new().await;
    drop(locked.waiting("evt_lock_dropped", None).await);
    locked.release();
    let lines = locked.lines().await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["decision"], "deny", "{lines:?}");
    assert_eq!(lines[0]["decidedBy"], "interrupted", "{lines:?}");
}

/// Records waiting for a lock another process holds take no thread a name lookup
/// needs: with two blocking threads in the runtime, interceptors whose calls left their
/// records waiting do not stop the next one from resolving `localhost` (each connects
/// anew) and reaching its backend.
#[test]
fn records_waiting_for_the_lock_leave_name_lookups_their_threads() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let by_name = backend.url().replace("127.0.0.1", "localhost");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let audit = dir.path().join("audit.jsonl");
        std::fs::File::create(&audit).expect("the audit file");
        let holder = locked_elsewhere(&audit);
        let mut kept = Vec::new();
        for n in 0..4 {
            let id = format!("evt_waiting_{n}");
            // Room for a loaded machine to make the instance and resolve the name.
            let budget = Some(Duration::from_secs(1));
            let calling = async {
                let hooks = audited(&audit, BACKEND, &by_name, "fail-closed").await;
                let settled = hooks
                    .intercept(&event(&id), &[EffectKind::Deny], budget)
                    .await;
                (hooks, settled.expect("a valid event"))
            };
            let (hooks, settled) = tokio::time::timeout(Duration::from_secs(20), calling)
                .await
                .unwrap_or_else(|_| panic!("call {n} hung"));
            assert_eq!(
                (settled.decision, settled.decided_by),
                (Decision::Allow, DecidedBy::NoObjection),
                "call {n}: {}",
                record_json(&settled)
            );
            kept.push(hooks);
        }
        holder.unlock().expect("unlock");
        assert_eq!(audit_lines_once(&audit, 4).await.len(), 4);
    });
}
