//! The stdio binding end to end (AHP-STDIO-001): the real component and host against
//! real backend processes (`src/bin/stdio_backend.rs`), in both lifecycles and under both
//! failure policies.
//!
//! Each misbehaviour maps to one failure class. A child that exits mid-exchange is
//! `abnormal-exit` in both lifecycles: the host reads EOF on stdout, then sees the exit
//! status (3, or none for a child killed by a signal) before reporting, and
//! `connection-lost` is kept for a child that closed stdout and still runs, or a
//! per-event child that exited 0 without a line.
//!
//! Process hygiene is checked through the backend's log file (one `pid` line per process
//! started) and through `/proc` (children of this test process).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ahp_host::{
    DecidedBy, Decision, EffectKind, Interceptor, Interrupt, Options, RetryPolicy, Settlement,
    StdioEnv,
};
use ahp_tests::support::{
    assert_failed, assert_settled, assert_settled_at, assert_settled_by, attempt_results, attempts,
    call, event, eventually, interceptor, only_attempt_results, only_interceptor, record_json,
    sha256_hex, timed_call, valid_event,
};
use serde_json::{json, Value};
use tokio::sync::RwLock;

const BACKEND: &str = env!("CARGO_BIN_EXE_stdio_backend");
const BACKEND_NAME: &str = "stdio_backend";
const ID: &str = "com.example.stdio";
/// How soon a failure the backend shows at once (a bad line, an exit, a failed launch)
/// must settle: far sooner than [`AT_ONCE_TIMEOUT_MS`], and with room for a loaded
/// machine to start the backend.
const AT_ONCE: Duration = Duration::from_secs(3);
/// The timeout of the calls that must settle [`AT_ONCE`]: one that waited it out would
/// take more than three times as long.
const AT_ONCE_TIMEOUT_MS: u64 = 10_000;
const LIFECYCLES: [&str; 2] = ["persistent", "per_event"];
const POLICIES: [&str; 2] = ["fail-open", "fail-closed"];

/// Tests that start processes hold this shared; the shutdown test holds it alone, so
/// the children it counts in `/proc` are its own.
static PROCESSES: RwLock<()> = RwLock::const_new(());

/// One hook running this test's backend with `args`, with a `tool.before` intercept
/// subscription.
fn hook(id: &str, args: &[&str], lifecycle: &str, policy: &str, timeout_ms: u64) -> Value {
    hook_on("tool.before", id, args, lifecycle, policy, timeout_ms)
}

/// [`hook`], intercepting `event_type` instead.
fn hook_on(
    event_type: &str,
    id: &str,
    args: &[&str],
    lifecycle: &str,
    policy: &str,
    timeout_ms: u64,
) -> Value {
    json!({
        "id": id,
        "transport": {"type": "stdio", "command": BACKEND, "args": args, "lifecycle": lifecycle},
        "subscriptions": [{
            "events": [event_type], "mode": "intercept",
            "timeoutMs": timeout_ms, "failurePolicy": policy,
            "content": {"default": "metadata"}
        }]
    })
}

fn registration(hooks: Vec<Value>) -> String {
    json!({"protocolVersion": "draft", "hooks": hooks}).to_string()
}

/// An interceptor with these hooks, in order, and default options.
async fn start(hooks: Vec<Value>) -> Interceptor {
    interceptor(&registration(hooks)).await
}

/// An interceptor whose one hook (`ID`) runs the backend in `mode`, logging to the
/// returned log.
async fn logged(mode: &str, lifecycle: &str, policy: &str, timeout_ms: u64) -> (Log, Interceptor) {
    logged_with(Options::default(), mode, lifecycle, policy, timeout_ms).await
}

/// [`logged`], under these host options.
async fn logged_with(
    options: Options,
    mode: &str,
    lifecycle: &str,
    policy: &str,
    timeout_ms: u64,
) -> (Log, Interceptor) {
    let log = Log::new();
    let hook = hook(ID, &[mode, &log.arg()], lifecycle, policy, timeout_ms);
    let hooks = Interceptor::new(&registration(vec![hook]), options)
        .await
        .expect("valid test registration");
    (log, hooks)
}

/// A log file for the backend, in its own temporary directory.
struct Log {
    dir: tempfile::TempDir,
    name: &'static str,
}

impl Log {
    fn new() -> Log {
        Log::named("backend.log")
    }

    /// A log file called `name`, taken literally.
    fn named(name: &'static str) -> Log {
        Log {
            dir: tempfile::tempdir().expect("a temporary directory"),
            name,
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join(self.name)
    }

    fn arg(&self) -> String {
        self.path().to_str().expect("a UTF-8 temp path").to_owned()
    }

    /// Every line the backend processes wrote, in order.
    fn lines(&self) -> Vec<String> {
        match std::fs::read_to_string(self.path()) {
            Ok(text) => text.lines().map(str::to_owned).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The values of the lines starting with `key `.
    fn values(&self, key: &str) -> Vec<String> {
        let prefix = format!("{key} ");
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
            .collect()
    }

    /// The PIDs of the processes started, in start order.
    fn pids(&self) -> Vec<u32> {
        self.values("pid")
            .iter()
            .map(|p| p.parse().expect("a pid"))
            .collect()
    }

    /// The PID of the process started last.
    fn last_pid(&self) -> u32 {
        *self.pids().last().expect("a backend was started")
    }

    /// Waits until the backends logged `n` received messages; returns them.
    async fn received(&self, n: usize) -> Vec<String> {
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            let received = self.values("recv");
            if received.len() >= n || Instant::now() >= until {
                return received;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// One call to `hooks`, measured, after which `hooks` is shut down.
async fn only_call(hooks: Interceptor, id: &str) -> (Settlement, Duration) {
    let result = timed_call(&hooks, id, None).await;
    hooks.shutdown();
    result
}

/// Calls `hooks` with event `id` and asserts its one backend answered with no effects.
async fn call_no_effect(hooks: &Interceptor, id: &str) {
    assert_no_effect(&call(hooks, id).await, id);
}

/// The one backend answered without effects: allowed with no objection, no reason, no
/// failure.
fn assert_no_effect(settled: &Settlement, case: &str) {
    assert_settled(settled, Decision::Allow, DecidedBy::NoObjection, None);
    let record = &record_json(settled);
    let entry = only_interceptor(record);
    assert_eq!(entry["outcome"], json!("no-effect"), "{case}: {record}");
    assert_eq!(entry.get("failure"), None, "{case}: {record}");
}

/// [`assert_failed`], reported at once instead of by waiting out the deadline.
fn assert_failed_at_once(
    settled: &Settlement,
    elapsed: Duration,
    policy: &str,
    class: &str,
    case: &str,
) -> Value {
    let failure = assert_failed(settled, policy, class, case);
    assert!(elapsed < AT_ONCE, "{case}: waited {elapsed:?}");
    failure
}

/// `n` backend processes have been started so far, and the last one is already reaped.
fn assert_nth_process_reaped(log: &Log, n: usize, case: &str) {
    let pids = log.pids();
    assert_eq!(pids.len(), n, "{case}: {:?}", log.lines());
    assert!(
        !exists(pids[n - 1]),
        "{case}: process {} was not reaped",
        pids[n - 1]
    );
}

/// Every lifecycle × policy pair.
fn every_lifecycle_and_policy() -> impl Iterator<Item = (&'static str, &'static str)> {
    LIFECYCLES
        .into_iter()
        .flat_map(|lifecycle| POLICIES.map(|policy| (lifecycle, policy)))
}

/// One call of [`every_case`], against a fresh backend that was shut down afterwards.
struct Case {
    /// `mode lifecycle policy`, for messages.
    name: String,
    lifecycle: &'static str,
    policy: &'static str,
    settled: Settlement,
    elapsed: Duration,
    log: Log,
}

/// Runs `check` for every lifecycle × policy against a backend in `mode`.
async fn every_case(mode: &str, timeout_ms: u64, check: impl Fn(&Case)) {
    every_case_with(Options::default(), mode, timeout_ms, check).await;
}

/// [`every_case`], under these host options.
async fn every_case_with(options: Options, mode: &str, timeout_ms: u64, check: impl Fn(&Case)) {
    let _shared = PROCESSES.read().await;
    for (lifecycle, policy) in every_lifecycle_and_policy() {
        let (log, hooks) = logged_with(options.clone(), mode, lifecycle, policy, timeout_ms).await;
        let id = format!("evt_{}_{lifecycle}_{policy}", mode.replace(':', "_"));
        let (settled, elapsed) = only_call(hooks, &id).await;
        let name = format!("{mode} {lifecycle} {policy}");
        println!("{name}: settled in {elapsed:?}");
        check(&Case {
            name,
            lifecycle,
            policy,
            settled,
            elapsed,
            log,
        });
    }
}

/// Two calls to a persistent backend in `mode` both fail with `class`; each one kills its
/// process, reaped in the background as the call returns, and the next call starts a
/// new one.
async fn assert_replaced_after_each_failure(
    mode: &str,
    policy: &str,
    timeout_ms: u64,
    class: &str,
) {
    let (log, hooks) = logged(mode, "persistent", policy, timeout_ms).await;
    for n in 1..=2 {
        let case = format!("{mode} call {n}");
        let id = format!("evt_{}_{n}", mode.replace(':', "_"));
        assert_failed(&call(&hooks, &id).await, policy, class, &case);
        // Killed, and reaped just after the call returned: the failure is not held back
        // until then (a child slow to die could hold it past the deadline). Within 1 s,
        // well before `sleep:2000` would have ended on its own.
        assert_eq!(log.pids().len(), n, "{case}: {:?}", log.lines());
        let pid = log.last_pid();
        assert!(
            eventually(Duration::from_secs(1), || !exists(pid)).await,
            "{case}: process {pid} was not reaped"
        );
    }
    let distinct: BTreeSet<u32> = log.pids().into_iter().collect();
    assert_eq!(distinct.len(), 2, "{mode}: {:?}", log.lines());
    hooks.shutdown();
}

/// The `(pid, state)` of every live or zombie child of this process running the backend.
fn backend_children() -> Vec<(u32, char)> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")
        .expect("/proc is readable")
        .flatten()
    {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may contain spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let mut rest = stat[close + 1..].split_whitespace();
        let state = rest.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid: Option<u32> = rest.next().and_then(|p| p.parse().ok());
        if comm == BACKEND_NAME && ppid == Some(me) {
            if let Ok(pid) = stat[..open].trim().parse() {
                found.push((pid, state));
            }
        }
    }
    found
}

/// The state letter of process `pid` (`R`, `S`, `Z`, ...), `None` once it is gone.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Whether process `pid` still exists (running or zombie).
fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_settles_as_no_objection_in_both_lifecycles() {
    every_case("allow", 2_000, |c| {
        assert_no_effect(&c.settled, &c.name);
        // One process got exactly one message; its stderr (the PID) did not disturb it.
        assert_eq!(c.log.pids().len(), 1, "{}: {:?}", c.name, c.log.lines());
        assert_eq!(c.log.values("recv"), ["hooks/intercept"], "{}", c.name);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_is_an_explicit_backend_deny_in_both_lifecycles() {
    every_case("deny", 2_000, |c| {
        assert_settled(
            &c.settled,
            Decision::Deny,
            DecidedBy::BackendDeny,
            Some("stdio says no"),
        );
        let record = record_json(&c.settled);
        assert_eq!(
            only_interceptor(&record)["outcome"],
            json!("deny"),
            "{}",
            c.name
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleeping_past_the_timeout_is_deadline_exceeded_within_the_slack() {
    const TIMEOUT_MS: u64 = 300;
    let deadline = Duration::from_millis(TIMEOUT_MS);
    every_case("sleep:2000", TIMEOUT_MS, |c| {
        let failure = assert_failed(&c.settled, c.policy, "deadline-exceeded", &c.name);
        assert_eq!(failure["phase"], json!("await-response"), "{}", c.name);
        assert_settled_at(c.elapsed, deadline, &c.name);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_is_malformed_json_at_once() {
    every_case("garbage", AT_ONCE_TIMEOUT_MS, |c| {
        assert_failed_at_once(&c.settled, c.elapsed, c.policy, "malformed-json", &c.name);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_id_is_id_mismatch_at_once() {
    every_case("wrong-id", AT_ONCE_TIMEOUT_MS, |c| {
        assert_failed_at_once(&c.settled, c.elapsed, c.policy, "id-mismatch", &c.name);
    })
    .await;
}

/// Host options with retries enabled, so that "not retried" is the host's and guest's
/// choice and not just the default configuration's.
fn retrying() -> Options {
    Options {
        retries: RetryPolicy {
            default: 2,
            ..RetryPolicy::default()
        },
        ..Options::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exiting_mid_exchange_is_abnormal_exit() {
    every_case_with(retrying(), "exit-mid", AT_ONCE_TIMEOUT_MS, |c| {
        assert_failed_at_once(&c.settled, c.elapsed, c.policy, "abnormal-exit", &c.name);
        // abnormal-exit is not transient (unlike connection-lost): not retried, so one
        // process only.
        assert_eq!(c.log.pids().len(), 1, "{}: {:?}", c.name, c.log.lines());
    })
    .await;
}

/// AHP-CORE-004 over stdio: a lost connection (`connection-lost`, transient) is retried
/// inside the original deadline, by a new process, which is sent the very bytes of the
/// first attempt: the same line, so the same event, JSON-RPC, session and call ids. Per
/// event, the connection is lost by a backend that exits 0 without a line and by one that
/// closes its stdout and goes on running (killed after a short grace); a persistent
/// backend loses it only the second way (its exit, even 0, is `abnormal-exit`, never
/// retried: see the next test), and the process that answered the retry is kept for the
/// next call. Both attempts are recorded, with the digest of the line each process read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_is_retried_by_a_new_process_with_the_same_bytes() {
    let _shared = PROCESSES.read().await;
    for (lifecycle, first) in [
        ("per_event", "exit-silently"),
        ("per_event", "close-stdout"),
        ("persistent", "close-stdout"),
    ] {
        let case = format!("once:{first} {lifecycle}");
        let mode = format!("once:{first}");
        let (log, hooks) = logged_with(
            retrying(),
            &mode,
            lifecycle,
            "fail-closed",
            AT_ONCE_TIMEOUT_MS,
        )
        .await;
        let id = format!("evt_retried_{lifecycle}_{}", first.replace('-', "_"));
        let (settled, elapsed) = timed_call(&hooks, &id, None).await;
        println!("{case}: settled in {elapsed:?}");
        assert_no_effect(&settled, &case);
        assert!(elapsed < AT_ONCE, "{case}: waited {elapsed:?}");
        let record = record_json(&settled);
        let entry = only_interceptor(&record);
        assert_eq!(
            attempt_results(entry),
            ["connection-lost", "accepted"],
            "{case}: {record}"
        );

        // Two processes, each sent one line, byte for byte the same: this call's event.
        let pids = log.pids();
        assert_eq!(pids.len(), 2, "{case}: {:?}", log.lines());
        assert_ne!(pids[0], pids[1], "{case}");
        let lines = log.values("line");
        assert_eq!(lines.len(), 2, "{case}: {:?}", log.lines());
        assert_eq!(
            lines[0], lines[1],
            "{case}: a retry resends the exact bytes"
        );
        let request: Value = serde_json::from_str(&lines[0]).expect("the request is JSON");
        assert_eq!(request["params"]["event"]["id"], json!(id), "{case}");
        // Each attempt's digest, and the entry's, is that of the line the backends read.
        let sent = sha256_hex(lines[0].as_bytes());
        for attempt in attempts(entry) {
            assert_eq!(attempt["requestSha256"], json!(sent), "{case}: {record}");
        }
        assert_eq!(entry["requestSha256"], json!(sent), "{case}: {record}");

        // The process that lost the connection exited or was killed, and is reaped.
        let lost = pids[0];
        assert!(
            eventually(Duration::from_secs(2), || !exists(lost)).await,
            "{case}: process {lost} was not reaped"
        );
        if lifecycle == "persistent" {
            call_no_effect(&hooks, &format!("{id}_next")).await;
            assert_eq!(log.pids(), pids, "{case}: the retry's process was not kept");
        }
        hooks.shutdown();
    }
}

/// The contrast to the test above: a persistent backend that exits 0 without a reply has
/// not lost a connection, it exited, which it never should: `abnormal-exit`, which is not
/// transient, so not retried even with retries allowed. One process, one attempt, at
/// once; the next call starts a new process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_backend_that_exits_0_is_not_retried() {
    let _shared = PROCESSES.read().await;
    let case = "once:exit-silently persistent";
    let (log, hooks) = logged_with(
        retrying(),
        "once:exit-silently",
        "persistent",
        "fail-closed",
        AT_ONCE_TIMEOUT_MS,
    )
    .await;
    let (settled, elapsed) = timed_call(&hooks, "evt_exited_persistent", None).await;
    assert_failed_at_once(&settled, elapsed, "fail-closed", "abnormal-exit", case);
    assert_eq!(only_attempt_results(&settled), ["abnormal-exit"], "{case}");
    assert_eq!(log.values("line").len(), 1, "{case}: {:?}", log.lines());
    assert_nth_process_reaped(&log, 1, case);
    call_no_effect(&hooks, "evt_exited_persistent_next").await;
    assert_eq!(log.pids().len(), 2, "{case}: {:?}", log.lines());
    hooks.shutdown();
}

/// S6, a backend killed by a signal (a crash, the OOM killer) after it read the request
/// and before it replied: no exit status, which is no exit 0, so `abnormal-exit` in both
/// lifecycles, as a nonzero exit is. Per event, never `connection-lost`, which is kept
/// for a process that exited 0 (transient, so it would be retried). At once, not
/// retried, the process reaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_death_without_a_reply_is_abnormal_exit() {
    every_case_with(retrying(), "abort-mid", AT_ONCE_TIMEOUT_MS, |c| {
        assert_no_reply_at_once(c, "abnormal-exit");
    })
    .await;
}

/// F2, a stdio pipe closed: a backend that exits 0 without writing a line. Per event,
/// exit 0 ends an exchange that produced nothing: `connection-lost`. A persistent backend
/// should never exit, so its exit is `abnormal-exit` whatever the code. Both at once,
/// not by waiting out the deadline, and the process is reaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exiting_0_without_a_reply_is_connection_lost_per_event_and_abnormal_exit_persistent() {
    every_case("exit-silently", AT_ONCE_TIMEOUT_MS, |c| {
        let class = match c.lifecycle {
            "per_event" => "connection-lost",
            _ => "abnormal-exit",
        };
        assert_no_reply_at_once(c, class);
    })
    .await;
}

/// F2, a stdio pipe closed under a running process: the backend closes its stdout
/// without a reply and goes on running. No reply can come any more, so in both
/// lifecycles it is `connection-lost` once it has not exited within a short grace, well
/// before the deadline, and it is killed and reaped before the call returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_stdout_without_a_reply_is_connection_lost_at_once() {
    every_case("close-stdout", AT_ONCE_TIMEOUT_MS, |c| {
        assert_no_reply_at_once(c, "connection-lost");
    })
    .await;
}

/// F2 with part of a reply written: the backend writes the start of a line, closes its
/// stdout inside it and goes on running. No reply can come any more, and what came is no
/// message (a line ends with `\n`), so in both lifecycles it is `connection-lost` once it
/// has not exited within a short grace, well before the deadline, and it is killed and
/// reaped before the call returns. The phase is `await-response` in both lifecycles, as
/// for a pipe closed with nothing on it: the component gives `connection-lost` that phase
/// whatever was read before the close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_stdout_mid_line_is_connection_lost_at_once() {
    every_case("close-stdout-mid-line", AT_ONCE_TIMEOUT_MS, |c| {
        assert_no_reply_at_once(c, "connection-lost");
    })
    .await;
}

/// A backend that got the request and will never reply: failed with `class` while
/// awaiting the response, at once, its one process reaped.
fn assert_no_reply_at_once(c: &Case, class: &str) {
    let failure = assert_failed_at_once(&c.settled, c.elapsed, c.policy, class, &c.name);
    assert_eq!(failure["phase"], json!("await-response"), "{}", c.name);
    assert_eq!(c.log.values("recv"), ["hooks/intercept"], "{}", c.name);
    assert_nth_process_reaped(&c.log, 1, &c.name);
}

/// S4: a reply pretty-printed over several lines is an operational failure. Its first
/// line, `{`, is the whole frame, which is not JSON: `malformed-json` at once, not a wait
/// for the rest of the object until the deadline, and never the object pieced together.
/// A persistent backend whose next lines would be read as the next reply is replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_pretty_printed_over_several_lines_is_malformed_json_at_once() {
    every_case("pretty", AT_ONCE_TIMEOUT_MS, |c| {
        let failure =
            assert_failed_at_once(&c.settled, c.elapsed, c.policy, "malformed-json", &c.name);
        assert_eq!(failure["phase"], json!("parse"), "{}", c.name);
    })
    .await;
    let _shared = PROCESSES.read().await;
    assert_replaced_after_each_failure("pretty", "fail-open", 2_000, "malformed-json").await;
}

/// Per event, exit 0 is what says the exchange finished: a nonzero exit fails it even
/// after a valid line. A persistent backend's reply stands, and the exited process is
/// replaced on the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nonzero_exit_after_a_valid_line_fails_only_per_event() {
    let _shared = PROCESSES.read().await;
    for policy in POLICIES {
        let (_log, hooks) = logged("reply-then-exit", "per_event", policy, 2_000).await;
        let (settled, _) = only_call(hooks, &format!("evt_reply_then_exit_{policy}")).await;
        let case = format!("per_event {policy}");
        assert_failed(&settled, policy, "abnormal-exit", &case);
    }
    let (log, hooks) = logged("reply-then-exit", "persistent", "fail-closed", 2_000).await;
    for n in 1..=2 {
        call_no_effect(&hooks, &format!("evt_reply_then_exit_{n}")).await;
        // Let the process finish exiting (a zombie until the next use reaps it), so the
        // next call finds it gone instead of racing its exit.
        let pid = log.last_pid();
        assert!(
            eventually(Duration::from_secs(2), || matches!(
                state(pid),
                None | Some('Z')
            ))
            .await,
            "call {n}: the backend {pid} did not exit after its reply"
        );
    }
    assert_eq!(log.pids().len(), 2, "{:?}", log.lines());
    hooks.shutdown();
}

/// S6, per event: a backend killed by a signal after a valid line (it crashed after
/// answering, so it has no exit status) did not finish the exchange either. Its reply is
/// discarded: `abnormal-exit`, settled by the policy (fail-closed a synthetic deny,
/// fail-open an allow failed open), never the reply's own allow, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_death_after_a_valid_line_fails_per_event() {
    let _shared = PROCESSES.read().await;
    for policy in POLICIES {
        let (log, hooks) =
            logged("reply-then-abort", "per_event", policy, AT_ONCE_TIMEOUT_MS).await;
        let (settled, elapsed) = only_call(hooks, &format!("evt_reply_then_abort_{policy}")).await;
        let case = format!("reply-then-abort per_event {policy}");
        let failure = assert_failed_at_once(&settled, elapsed, policy, "abnormal-exit", &case);
        assert_eq!(failure["phase"], json!("await-response"), "{case}");
        assert_eq!(log.values("recv"), ["hooks/intercept"], "{case}");
        assert_nth_process_reaped(&log, 1, &case);
    }
}

/// A per-event exchange ends when its process exits, so a reply whose process exited
/// before the deadline is in time: a fail-open backend that denies and exits 60 ms before
/// its timeout is the backend's deny, never a `late-response` failed open (allowed). The
/// exit time is absolute, so the backend's start-up does not eat the margin. (That the
/// exit itself wakes the wait, not a poll, is the host's unit test
/// `the_wait_for_an_exit_is_woken_by_the_exit`.) A margin in milliseconds on a loaded
/// machine (the test suite's own) can still be missed by the scheduler alone, so the
/// round is tried up to three times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_event_deny_whose_process_exits_in_time_is_the_backends_deny() {
    /// How long before the call's deadline the backend exits.
    const EXIT_MARGIN_MS: u64 = 60;
    let _shared = PROCESSES.read().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut rounds = Vec::new();
    for round in 0..3 {
        let mut lost = Vec::new();
        for timeout_ms in (200..220).step_by(3) {
            let exit_at = dir.path().join(format!("exit-at-{round}-{timeout_ms}"));
            let mode = format!("deny-then-exit-at:{}", exit_at.display());
            let hook = hook(ID, &[&mode], "per_event", "fail-open", timeout_ms);
            let hooks = start(vec![hook]).await;
            let unix_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_millis() as u64;
            let at = unix_ms + timeout_ms - EXIT_MARGIN_MS;
            std::fs::write(&exit_at, at.to_string()).expect("write the exit time");
            let id = format!("evt_deny_then_exit_{round}_{timeout_ms}");
            let (settled, elapsed) = only_call(hooks, &id).await;
            if (settled.decision, settled.decided_by) != (Decision::Deny, DecidedBy::BackendDeny) {
                lost.push(format!(
                    "timeoutMs {timeout_ms}, settled in {elapsed:?}: {}",
                    record_json(&settled)
                ));
                continue;
            }
            assert_settled(
                &settled,
                Decision::Deny,
                DecidedBy::BackendDeny,
                Some("stdio says no"),
            );
        }
        if lost.is_empty() {
            return;
        }
        rounds.push(lost);
    }
    panic!("a deny whose process exited in time was lost in every round: {rounds:#?}");
}

/// A per-event backend that writes more after its reply line (against the binding)
/// still exits 0, and its reply decides: what follows the reply is read and thrown away,
/// never left to meet a closed pipe, which would fail or kill the backend depending on
/// when it wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_after_the_reply_is_discarded_and_the_reply_decides_per_event() {
    let _shared = PROCESSES.read().await;
    for policy in POLICIES {
        let (_log, hooks) = logged("reply-then-chatter", "per_event", policy, 2_000).await;
        let (settled, _) = only_call(hooks, &format!("evt_chatter_{policy}")).await;
        assert_no_effect(&settled, &format!("per_event {policy}"));
    }
}

/// A backend that never reads its stdin, sent a request larger than a pipe's buffer
/// (the event's tool input, which every content selection sends, holds 256 KiB): the
/// write can never complete, so the call fails at its deadline in phase `send`, settled
/// by the policy, within the slack of the deadline and not held past it, and the backend
/// is killed and reaped. It read nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_never_reads_a_large_request_fails_at_its_deadline_in_send() {
    const TIMEOUT_MS: u64 = 1_000;
    let deadline = Duration::from_millis(TIMEOUT_MS);
    let _shared = PROCESSES.read().await;
    for (lifecycle, policy) in every_lifecycle_and_policy() {
        let case = format!("deaf {lifecycle} {policy}");
        let (log, hooks) = logged("deaf", lifecycle, policy, TIMEOUT_MS).await;
        let event = large_event(&format!("evt_deaf_{lifecycle}_{policy}"), 256 << 10);
        let started = Instant::now();
        let settled = hooks
            .intercept(&event, &[EffectKind::Deny], None)
            .await
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        let elapsed = started.elapsed();
        hooks.shutdown();
        let failure = assert_failed(&settled, policy, "deadline-exceeded", &case);
        assert_eq!(failure["phase"], json!("send"), "{case}");
        assert_settled_at(elapsed, deadline, &case);
        assert_eq!(log.values("recv"), Vec::<String>::new(), "{case}");
        assert_nth_process_reaped(&log, 1, &case);
    }
}

/// A `tool.before` event with id `id` whose tool input holds a string of `bytes` bytes.
fn large_event(id: &str, bytes: usize) -> String {
    let mut event: Value = serde_json::from_str(&event(id)).expect("the event is JSON");
    event["tool"]["input"]["command"] = json!("x".repeat(bytes));
    event.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_line_over_the_cap_is_response_too_large() {
    every_case("huge", 2_000, |c| {
        let failure = assert_failed(&c.settled, c.policy, "malformed-json", &c.name);
        assert_eq!(failure["detail"], json!("response-too-large"), "{}", c.name);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_command_is_launch_failed() {
    for (lifecycle, policy) in every_lifecycle_and_policy() {
        let mut missing = hook(ID, &[], lifecycle, policy, AT_ONCE_TIMEOUT_MS);
        missing["transport"]["command"] = json!("/nonexistent/backend");
        let (settled, elapsed) = only_call(start(vec![missing]).await, "evt_missing").await;
        let case = format!("missing {lifecycle} {policy}");
        let failure = assert_failed_at_once(&settled, elapsed, policy, "launch-failed", &case);
        assert_eq!(failure["phase"], json!("connect"), "{case}");
    }
}

/// A `command` that names a file the host may not execute (no execute bit, which even
/// root needs), and a real backend given a `cwd` that does not exist (the registration
/// takes any absolute `cwd`; it is looked for only at start), are `launch-failed` in
/// phase `connect`, at once, in both lifecycles and under both policies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_is_not_executable_or_a_missing_cwd_is_launch_failed() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("a temporary directory");
    // The backend itself, so that only the missing execute bit keeps it from starting.
    let not_executable = dir.path().join("not_executable");
    std::fs::copy(BACKEND, &not_executable).expect("copy the backend");
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o644))
        .expect("clear the execute bits");
    let missing_cwd = dir.path().join("missing");
    for (lifecycle, policy) in every_lifecycle_and_policy() {
        let mut not_executable_hook = hook(ID, &["allow"], lifecycle, policy, AT_ONCE_TIMEOUT_MS);
        not_executable_hook["transport"]["command"] = json!(not_executable);
        let mut missing_cwd_hook = hook(ID, &["allow"], lifecycle, policy, AT_ONCE_TIMEOUT_MS);
        missing_cwd_hook["transport"]["cwd"] = json!(missing_cwd);
        for (what, backend) in [
            ("not-executable", not_executable_hook),
            ("missing-cwd", missing_cwd_hook),
        ] {
            let case = format!("{what} {lifecycle} {policy}");
            let id = format!("evt_{}", case.replace([' ', '-'], "_"));
            let (settled, elapsed) = only_call(start(vec![backend]).await, &id).await;
            let failure = assert_failed_at_once(&settled, elapsed, policy, "launch-failed", &case);
            assert_eq!(failure["phase"], json!("connect"), "{case}");
        }
    }
}

/// The two stdio-only failure classes complete the failure matrix of tool.after and
/// session.start (failure_matrix.rs has every HTTP class for them): a failed launch and
/// an exit mid-exchange are settled by the policy on events without deny too, with
/// fail-closed denying them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_failed_and_abnormal_exit_on_tool_after_and_session_start() {
    let _shared = PROCESSES.read().await;
    for event_type in ["tool.after", "session.start"] {
        for (lifecycle, policy) in every_lifecycle_and_policy() {
            let log = Log::new();
            let mut missing = hook_on(event_type, ID, &[], lifecycle, policy, 1_000);
            missing["transport"]["command"] = json!("/nonexistent/backend");
            let exiting = hook_on(
                event_type,
                ID,
                &["exit-mid", &log.arg()],
                lifecycle,
                policy,
                2_000,
            );
            for (hook, class) in [(missing, "launch-failed"), (exiting, "abnormal-exit")] {
                let case = format!("{class} {event_type} {lifecycle} {policy}");
                let hooks = start(vec![hook]).await;
                let id = format!("evt_{}", case.replace([' ', '.', '-'], "_"));
                let settled = hooks
                    .intercept(&valid_event(event_type, &id), &[], None)
                    .await
                    .unwrap_or_else(|e| panic!("{case}: {e}"));
                hooks.shutdown();
                assert_failed(&settled, policy, class, &case);
                assert_eq!(
                    record_json(&settled)["event"]["type"],
                    json!(event_type),
                    "{case}"
                );
            }
            assert_eq!(log.pids().len(), 1, "{event_type}: one exiting process");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_backend_serves_sequential_calls_with_one_process() {
    let _shared = PROCESSES.read().await;
    let (log, hooks) = logged("count", "persistent", "fail-closed", 2_000).await;
    for n in 1..=3 {
        call_no_effect(&hooks, &format!("evt_reuse_{n}")).await;
    }
    let pids = log.pids();
    assert_eq!(
        pids.len(),
        1,
        "the persistent backend was restarted: {:?}",
        log.lines()
    );
    assert!(
        exists(pids[0]),
        "the persistent backend is gone between calls"
    );
    assert_eq!(log.values("recv"), ["hooks/intercept"; 3]);
    hooks.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_backend_is_replaced_after_a_timeout() {
    let _shared = PROCESSES.read().await;
    assert_replaced_after_each_failure("sleep:2000", "fail-open", 300, "deadline-exceeded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_backend_is_replaced_after_output_it_cannot_attribute() {
    let _shared = PROCESSES.read().await;
    for (mode, class, policy) in [
        ("garbage", "malformed-json", "fail-closed"),
        ("wrong-id", "id-mismatch", "fail-closed"),
        ("latin1", "malformed-utf8", "fail-closed"),
        ("banner", "malformed-json", "fail-open"),
        // A line over the cap: what follows it cannot be framed.
        ("huge", "malformed-json", "fail-closed"),
    ] {
        assert_replaced_after_each_failure(mode, policy, 2_000, class).await;
    }
}

/// The JSON-RPC and result rows of the HTTP failure matrix (failure_matrix.rs), over
/// stdio: the component classifies a well-framed line exactly as an HTTP body, at once.
/// A persistent backend whose line was a JSON-RPC 2.0 response to this request (this id,
/// alone, one of `result` and `error`) is kept for the next call, whatever its result
/// says; one whose line answers no request of ours (a batch has no id) or is no JSON-RPC
/// 2.0 response is replaced (the framing can no longer be trusted); one whose response
/// the component refuses for its content is kept, its framing intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_json_rpc_replies_are_classified_as_over_http_and_only_malformed_ones_replace_the_backend(
) {
    const DENY: &str = r#"[{"type":"deny","reason":"stdio says no"}]"#;
    let result = format!(r#"{{"protocolVersion":"draft","effects":{DENY}}}"#);
    let error = |code: i64| format!(r#"{{"code":{code},"message":"no"}}"#);
    let rows: Vec<(String, &str, Value, bool)> = vec![
        (
            format!(r#"{{"jsonrpc":"2.0","id":$ID$,"error":{}}}"#, error(-32003)),
            "jsonrpc-error",
            json!({"phase": "parse", "rpcCode": -32003}),
            true,
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":$ID$,"error":{}}}"#, error(-32001)),
            "unsupported-version",
            json!({"phase": "parse", "rpcCode": -32001}),
            true,
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":$ID$,"error":{}}}"#, error(-32002)),
            "unsupported-event",
            json!({"phase": "parse", "rpcCode": -32002}),
            true,
        ),
        (
            format!(r#"{{"jsonrpc":"1.0","id":$ID$,"result":{result}}}"#),
            "malformed-jsonrpc",
            json!({"phase": "parse", "detail": "jsonrpc-version"}),
            false,
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":$ID$,"result":{result},"error":{}}}"#,
                error(-32003)
            ),
            "malformed-jsonrpc",
            json!({"phase": "parse", "detail": "result-and-error"}),
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","id":$ID$}"#.to_owned(),
            "malformed-jsonrpc",
            json!({"phase": "parse", "detail": "no-result-or-error"}),
            false,
        ),
        (
            format!(r#"[{{"jsonrpc":"2.0","id":$ID$,"result":{result}}}]"#),
            "malformed-jsonrpc",
            json!({"phase": "parse", "detail": "batch"}),
            false,
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":$ID$,"result":{{"effects":{DENY}}}}}"#),
            "missing-result-fields",
            json!({"phase": "parse", "detail": "protocolVersion"}),
            true,
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":$ID$,"result":{{"protocolVersion":"1900-01-01","effects":{DENY}}}}}"#
            ),
            "unsupported-version",
            json!({"phase": "parse"}),
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":$ID$,"result":{"protocolVersion":"draft"}}"#.to_owned(),
            "missing-result-fields",
            json!({"phase": "parse", "detail": "effects"}),
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":$ID$,"result":{"protocolVersion":"draft","effects":[{"type":"com.example.quarantine"}]}}"#.to_owned(),
            "invalid-effects",
            json!({"phase": "accept", "detail": "unknown-effect", "effect": 0}),
            true,
        ),
    ];
    let _shared = PROCESSES.read().await;
    for (n, (template, class, pinned, kept)) in rows.into_iter().enumerate() {
        // Both policies across the rows, each row under one.
        let policy = POLICIES[n % 2];
        for lifecycle in LIFECYCLES {
            let mode = format!("line:{template}");
            let (log, hooks) = logged(&mode, lifecycle, policy, AT_ONCE_TIMEOUT_MS).await;
            for call_n in 1..=2 {
                let case = format!("{template} {lifecycle} {policy} call {call_n}");
                let (settled, elapsed) =
                    timed_call(&hooks, &format!("evt_rpc_{n}_{call_n}"), None).await;
                let failure = assert_failed_at_once(&settled, elapsed, policy, class, &case);
                for (member, value) in pinned.as_object().expect("an object") {
                    assert_eq!(&failure[member], value, "{case}: {failure}");
                }
            }
            let processes = log.pids().len();
            let expected = match (lifecycle, kept) {
                ("persistent", true) => 1,
                _ => 2,
            };
            assert_eq!(
                processes,
                expected,
                "{template} {lifecycle}: {:?}",
                log.lines()
            );
            hooks.shutdown();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_event_starts_and_reaps_one_process_per_message() {
    let _shared = PROCESSES.read().await;
    let (log, hooks) = logged("count", "per_event", "fail-closed", 2_000).await;
    for n in 1..=3 {
        let id = format!("evt_per_event_{n}");
        call_no_effect(&hooks, &id).await;
        assert_nth_process_reaped(&log, n, &id);
    }
    let distinct: BTreeSet<u32> = log.pids().into_iter().collect();
    assert_eq!(distinct.len(), 3);
    // stdin was closed after one message, or the backend would not have exited.
    assert_eq!(log.values("recv"), ["hooks/intercept"; 3]);
    hooks.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_runs_without_a_shell_with_only_path_and_its_cwd() {
    let _shared = PROCESSES.read().await;
    let workdir = tempfile::tempdir().expect("a temporary directory");
    // A shell would split this path, expand `$HOME` and run `touch`.
    let log = Log::named("log; touch pwned $HOME");
    let mut backend = hook(
        ID,
        &["allow", &log.arg()],
        "per_event",
        "fail-closed",
        2_000,
    );
    backend["transport"]["cwd"] = json!(workdir.path());
    let (settled, _) = only_call(start(vec![backend]).await, "evt_no_shell").await;
    assert_no_effect(&settled, "evt_no_shell");
    assert!(
        log.path().exists(),
        "the log does not have the literal name"
    );
    assert_eq!(
        log.values("env"),
        ["PATH"],
        "the environment is not minimal"
    );
    let cwd = std::fs::canonicalize(workdir.path()).expect("canonical path");
    assert_eq!(log.values("cwd"), [cwd.display().to_string()]);
    assert!(!workdir.path().join("pwned").exists() && !log.dir.path().join("pwned").exists());
}

/// A backend with no `cwd` starts in `/`, not in the harness's working directory (under
/// a command hook, the agent's project): a relative argument there would name a file the
/// agent could have written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_without_a_cwd_starts_in_the_root() {
    let _shared = PROCESSES.read().await;
    let log = Log::named("log");
    let backend = hook(
        ID,
        &["allow", &log.arg()],
        "per_event",
        "fail-closed",
        2_000,
    );
    let (settled, _) = only_call(start(vec![backend]).await, "evt_no_cwd").await;
    assert_no_effect(&settled, "evt_no_cwd");
    assert_eq!(log.values("cwd"), ["/"]);
}

/// A relative `command` path under an absolute `cwd` is started by the absolute path it
/// names there: the host never leaves it to the platform to find a relative program
/// after changing the child's directory (Rust's `Command` calls that platform-specific).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relative_command_is_started_by_its_absolute_path_under_its_cwd() {
    let _shared = PROCESSES.read().await;
    let log = Log::new();
    let program = std::path::Path::new(BACKEND);
    let (dir, name) = (program.parent().expect("a directory"), BACKEND_NAME);
    let above = dir.parent().expect("a directory above");
    let relative = format!(
        "{}/{name}",
        dir.file_name().expect("named").to_string_lossy()
    );
    let mut backend = hook(
        ID,
        &["allow", &log.arg()],
        "per_event",
        "fail-closed",
        2_000,
    );
    backend["transport"]["command"] = json!(relative);
    backend["transport"]["cwd"] = json!(above);
    let (settled, _) = only_call(start(vec![backend]).await, "evt_relative_command").await;
    assert_no_effect(&settled, "evt_relative_command");
    assert_eq!(log.values("argv0"), [BACKEND]);
    let cwd = std::fs::canonicalize(above).expect("canonical path");
    assert_eq!(log.values("cwd"), [cwd.display().to_string()]);
}

/// The host configuration may name more variables to pass on; nothing else leaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_named_host_variables_reach_a_stdio_backend() {
    let _shared = PROCESSES.read().await;
    // Cargo sets both for every test process, so no test has to change the environment
    // while others spawn children.
    let (passed, kept_back) = ("CARGO_MANIFEST_DIR", "CARGO_PKG_NAME");
    assert!(std::env::var_os(passed).is_some() && std::env::var_os(kept_back).is_some());
    let options = Options {
        stdio_env: vec![
            StdioEnv::All(passed.into()),
            StdioEnv::All("AHP_E2E_STDIO_UNSET".into()),
        ],
        ..Options::default()
    };
    let (log, hooks) = logged_with(options, "allow", "per_event", "fail-closed", 2_000).await;
    let (settled, _) = only_call(hooks, "evt_stdio_env").await;
    assert_no_effect(&settled, "evt_stdio_env");
    assert_eq!(log.values("env"), [format!("{passed},PATH")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_on_a_persistent_backend_are_served_one_at_a_time() {
    let _shared = PROCESSES.read().await;
    // The backend reads every request as it arrives (and logs it), so a request sent
    // before the previous one was answered shows in its log.
    let (log, hooks) = logged("eager-sleep:100", "persistent", "fail-closed", 2_000).await;
    let started = Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for n in 0..4 {
        let hooks = hooks.clone();
        calls.spawn(async move {
            let id = format!("evt_concurrent_{n}");
            let (settled, elapsed) = timed_call(&hooks, &id, None).await;
            (id, settled, elapsed)
        });
    }
    while let Some(joined) = calls.join_next().await {
        let (id, settled, elapsed) = joined.expect("the call task completed");
        println!("{id} settled in {elapsed:?}");
        assert_no_effect(&settled, &id);
    }
    let elapsed = started.elapsed();
    println!("4 concurrent calls of 100 ms each took {elapsed:?}");
    // One at a time: each request arrived only once the one before was answered, all
    // by the one process.
    let exchanges: Vec<String> = log
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("recv ") || l == "answering")
        .collect();
    let one_at_a_time = ["recv hooks/intercept", "answering"].repeat(4);
    assert_eq!(exchanges, one_at_a_time, "{:?}", log.lines());
    assert_eq!(log.pids().len(), 1, "{:?}", log.lines());
    hooks.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_exchange_kills_the_persistent_backend_and_the_next_call_replaces_it() {
    let _shared = PROCESSES.read().await;
    let (log, hooks) = logged("sleep:2000", "persistent", "fail-open", 5_000).await;
    for n in 1..=2 {
        let interrupt = Interrupt::new();
        let trigger = interrupt.clone();
        let (tell, interrupted_at) = tokio::sync::oneshot::channel();
        let path = log.path();
        // Interrupted once this call's request reached its backend (a new one for the
        // second call, which has logged its pid by then), however long it took to start.
        tokio::spawn(async move {
            let received = || {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                text.lines().filter(|l| l.starts_with("recv ")).count()
            };
            let waited = Instant::now();
            while received() < n && waited.elapsed() < Duration::from_secs(20) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let _ = tell.send(Instant::now());
            trigger.interrupt();
        });
        let settled = hooks
            .intercept_with(
                &event(&format!("evt_interrupted_{n}")),
                &[EffectKind::Deny],
                None,
                &interrupt,
            )
            .await
            .expect("the call settles");
        let interrupted_at = interrupted_at.await.expect("the call was interrupted");
        let elapsed = interrupted_at.elapsed();
        println!("interrupted call {n} settled {elapsed:?} after the interruption");
        assert_eq!(
            (settled.decision, settled.decided_by),
            (Decision::Deny, DecidedBy::Interrupted),
            "{}",
            settled.record
        );
        assert_settled_by(elapsed, Duration::ZERO, &format!("call {n}"));
        let pid = log.last_pid();
        assert!(
            eventually(Duration::from_secs(1), || !exists(pid)).await,
            "call {n}: the interrupted backend {pid} kept running"
        );
    }
    let pids: BTreeSet<u32> = log.pids().into_iter().collect();
    assert_eq!(pids.len(), 2, "{:?}", log.lines());
    hooks.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_circuit_observe_is_delivered_over_stdio() {
    let _shared = PROCESSES.read().await;
    for lifecycle in LIFECYCLES {
        let log = Log::new();
        let hooks = start(vec![
            hook(
                "com.example.first",
                &["deny"],
                "persistent",
                "fail-closed",
                2_000,
            ),
            hook(ID, &["allow", &log.arg()], lifecycle, "fail-closed", 2_000),
        ])
        .await;
        let settled = call(&hooks, &format!("evt_observe_{lifecycle}")).await;
        assert_eq!(
            settled.decided_by,
            DecidedBy::BackendDeny,
            "{}",
            settled.record
        );
        let observers = &record_json(&settled)["observers"];
        assert_eq!(
            observers[0]["backend"],
            json!(ID),
            "{lifecycle}: {observers}"
        );
        assert_eq!(
            observers[0]["result"],
            json!("delivered"),
            "{lifecycle}: {observers}"
        );
        assert_eq!(log.received(1).await, ["hooks/observe"], "{lifecycle}");
        hooks.shutdown();
    }
}

/// A per-event stdio hook observing a call the persistent denier before it decided: the
/// observer runs `mode`, its delivery is bounded by `observer_timeout`. Returns the
/// observer's log, the settled call and how long the whole call took.
async fn observed_by_per_event(
    mode: &str,
    policy: &str,
    observer_timeout: Duration,
    id: &str,
) -> (Log, Settlement, Duration) {
    let log = Log::new();
    let registration = registration(vec![
        hook(
            "com.example.first",
            &["deny"],
            "persistent",
            "fail-closed",
            2_000,
        ),
        hook(ID, &[mode, &log.arg()], "per_event", policy, 2_000),
    ]);
    let options = Options {
        observer_timeout: Some(observer_timeout),
        ..Options::default()
    };
    let hooks = Interceptor::new(&registration, options)
        .await
        .expect("valid test registration");
    // Timed from the decision, where the observer's bound starts: spawning the denier
    // before it takes what it takes.
    let call = ahp_tests::support::settle(&hooks, id, None).await;
    let decided = Instant::now();
    let settled = call.complete().await;
    let elapsed = decided.elapsed();
    hooks.shutdown();
    (log, settled, elapsed)
}

/// The call was decided by the persistent denier, whatever happened to its observer,
/// and the observer's delivery is recorded as `result`.
fn assert_denied_and_observed(settled: &Settlement, result: &str, case: &str) {
    assert_settled(
        settled,
        Decision::Deny,
        DecidedBy::BackendDeny,
        Some("stdio says no"),
    );
    let record = record_json(settled);
    let observers = record["observers"]
        .as_array()
        .expect("observers is an array");
    let observed: Vec<_> = observers
        .iter()
        .map(|o| (&o["backend"], &o["kind"], &o["result"]))
        .collect();
    assert_eq!(
        observed,
        [(&json!(ID), &json!("short-circuit"), &json!(result))],
        "{case}: {record}"
    );
}

/// S7: a per-event observer is not waited on for a response, and its exit status is only
/// logged. One that reads its notification and exits 3 was still delivered, and the
/// decision stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_event_observers_nonzero_exit_is_only_logged() {
    let _shared = PROCESSES.read().await;
    for policy in POLICIES {
        let case = format!("exit-3-at-eof {policy}");
        let id = format!("evt_observer_exit_{policy}");
        let (log, settled, elapsed) = observed_by_per_event(
            "exit-3-at-eof",
            policy,
            Duration::from_millis(AT_ONCE_TIMEOUT_MS),
            &id,
        )
        .await;
        println!("{case}: settled in {elapsed:?}");
        assert_denied_and_observed(&settled, "delivered", &case);
        assert!(elapsed < AT_ONCE, "{case}: waited {elapsed:?}");
        assert_eq!(log.received(1).await, ["hooks/observe"], "{case}");
        assert_nth_process_reaped(&log, 1, &case);
    }
}

/// S7: a per-event observer that never exits holds the call's completion only until its
/// observer deadline; it is then killed and reaped, and the decision stands. Killed, it
/// may not have read its notification (an interpreter slow to start), so its delivery is
/// recorded as past its deadline, not delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_event_observer_that_never_exits_is_bounded_by_its_deadline() {
    let _shared = PROCESSES.read().await;
    let bound = Duration::from_millis(300);
    for policy in POLICIES {
        let case = format!("stubborn {policy}");
        let id = format!("evt_observer_stubborn_{policy}");
        let (log, settled, elapsed) = observed_by_per_event("stubborn", policy, bound, &id).await;
        assert_settled_at(elapsed, bound, &case);
        assert_denied_and_observed(&settled, "deadline-exceeded", &case);
        assert_eq!(log.values("recv"), ["hooks/observe"], "{case}");
        assert_nth_process_reaped(&log, 1, &case);
    }
}

/// Whether this is test `name` run again in a child process of this test binary (marked
/// by variable `marker`), whose signal dispositions no other test shares. If not, runs
/// it so and checks it passed.
fn in_a_process_of_its_own(name: &str, marker: &str) -> bool {
    if std::env::var_os(marker).is_some() {
        return true;
    }
    let output = std::process::Command::new(std::env::current_exe().expect("this test"))
        .args(["--exact", name, "--nocapture"])
        .env(marker, "1")
        .output()
        .expect("run this test in a child process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let shown = format!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{shown}");
    assert!(stdout.contains("1 passed"), "{shown}");
    false
}

/// An interceptor whose one backend is over HTTP is built whatever the signal dispositions.
fn built_without_a_stdio_backend(runtime: &tokio::runtime::Runtime) {
    let http = json!({"protocolVersion": "draft", "hooks": [{
        "id": "com.example.http", "transport": {"type": "http", "url": "http://127.0.0.1:9/hooks"},
        "subscriptions": [{"events": ["tool.before"], "mode": "intercept", "timeoutMs": 1_000,
            "failurePolicy": "fail-closed", "content": {"default": "metadata"}}]}]});
    runtime
        .block_on(Interceptor::new(&http.to_string(), Options::default()))
        .expect("built without a stdio backend");
}

/// With SIGCHLD ignored in the process (an embedder's choice, or inherited across exec)
/// the kernel reaps every child itself and no exit status can be read: a per-event
/// backend that answered and exited 0 would be taken for an abnormal exit, its answer
/// settled by policy. An interceptor with a stdio backend is refused then, naming the
/// cause; one without is built. Run in a child process of this test binary, whose
/// signal disposition no other test shares.
#[test]
fn an_interceptor_with_a_stdio_backend_is_refused_while_sigchld_is_ignored() {
    const CHILD: &str = "AHP_TEST_SIGCHLD_IGNORED";
    const NAME: &str = "an_interceptor_with_a_stdio_backend_is_refused_while_sigchld_is_ignored";
    if !in_a_process_of_its_own(NAME, CHILD) {
        return;
    }
    // SAFETY: signal(2) touches no memory of ours.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let stdio = registration(vec![hook(
        ID,
        &["allow"],
        "per_event",
        "fail-closed",
        1_000,
    )]);
    let error = runtime
        .block_on(Interceptor::new(&stdio, Options::default()))
        .err()
        .expect("refused while SIGCHLD is ignored");
    assert!(
        format!("{error:?}").contains("SIGCHLD is ignored"),
        "{error:?}"
    );
    built_without_a_stdio_backend(&runtime);
}

/// With SIGPIPE at its default action (an embedder that restored it), writing a request
/// to a stdio backend that exited before reading it would kill the harness itself, not
/// fail the exchange: an interceptor with a stdio backend is refused then, naming the
/// cause; one without is built. Run in a child process of this test binary, whose signal
/// disposition no other test shares.
#[test]
fn an_interceptor_with_a_stdio_backend_is_refused_while_sigpipe_would_kill() {
    const CHILD: &str = "AHP_TEST_SIGPIPE_DEFAULT";
    const NAME: &str = "an_interceptor_with_a_stdio_backend_is_refused_while_sigpipe_would_kill";
    if !in_a_process_of_its_own(NAME, CHILD) {
        return;
    }
    // SAFETY: signal(2) touches no memory of ours.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let stdio = registration(vec![hook(ID, &["allow"], "per_event", "fail-open", 1_000)]);
    let error = runtime
        .block_on(Interceptor::new(&stdio, Options::default()))
        .err()
        .expect("refused while SIGPIPE would kill");
    assert!(format!("{error:?}").contains("SIGPIPE"), "{error:?}");
    built_without_a_stdio_backend(&runtime);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_kills_and_reaps_every_backend_process() {
    let _alone = PROCESSES.write().await;
    let before: BTreeSet<u32> = backend_children().into_iter().map(|(pid, _)| pid).collect();
    let ours = move || -> Vec<(u32, char)> {
        backend_children()
            .into_iter()
            .filter(|(pid, _)| !before.contains(pid))
            .collect()
    };
    let hooks = start(vec![
        hook(
            "com.example.first",
            &["stubborn"],
            "persistent",
            "fail-closed",
            2_000,
        ),
        hook(ID, &["sleep:5000"], "per_event", "fail-open", 10_000),
    ])
    .await;
    let call = {
        let hooks = hooks.clone();
        tokio::spawn(async move { timed_call(&hooks, "evt_shutdown", None).await })
    };
    // The persistent backend is idle after answering (and would outlive its stdin
    // closing); the per-event one is mid-exchange.
    assert!(
        eventually(Duration::from_secs(5), || ours()
            .iter()
            .filter(|(_, s)| *s != 'Z')
            .count()
            == 2)
        .await,
        "the two backends never ran: {:?}",
        ours()
    );

    let started = Instant::now();
    // Concurrent and repeated shutdowns are safe.
    std::thread::scope(|s| {
        s.spawn(|| hooks.shutdown());
        s.spawn(|| hooks.shutdown());
    });
    let shutdown_took = started.elapsed();
    hooks.shutdown();
    println!(
        "shutdown took {shutdown_took:?}; children left right after: {:?}",
        ours()
    );
    assert!(
        shutdown_took < Duration::from_secs(2),
        "shutdown took {shutdown_took:?}"
    );
    // Reaped by the time shutdown returned: it waits for them, not a watcher after it.
    let left = ours();
    assert!(
        left.is_empty(),
        "children left (live or zombie) when shutdown returned: {left:?}"
    );

    // The call in flight ends promptly, and never as permission: the host settles it as
    // `shutdown`.
    let (settled, elapsed) = tokio::time::timeout(Duration::from_secs(2), call)
        .await
        .expect("the call in flight ended after shutdown")
        .expect("the call task completed");
    println!("the call in flight settled after {elapsed:?}");
    assert_eq!(settled.decision, Decision::Deny, "{}", settled.record);
    assert_eq!(
        settled.decided_by,
        DecidedBy::Shutdown,
        "{}",
        settled.record
    );
}

/// An interceptor dropped without `shutdown()` (an embedder's error path) still kills
/// what its stdio backends started, not only the processes it spawned: a wrapper's
/// helper, in the backend's process group, does not run on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_interceptor_kills_what_the_backend_started_too() {
    let _shared = PROCESSES.read().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let pid_file = dir.path().join("helper.pid");
    let script = format!(
        "sleep 300 & echo $! > '{}'; exec '{BACKEND}' allow",
        pid_file.display()
    );
    let hook = json!({
        "id": ID,
        "transport": {"type": "stdio", "command": "/bin/sh", "args": ["-c", script],
                      "lifecycle": "persistent"},
        "subscriptions": [{"events": ["tool.before"], "mode": "intercept",
                           "timeoutMs": 2_000, "failurePolicy": "fail-closed",
                           "content": {"default": "metadata"}}]
    });
    let hooks = start(vec![hook]).await;
    call_no_effect(&hooks, "evt_dropped").await;
    let helper: u32 = std::fs::read_to_string(&pid_file)
        .expect("the wrapper wrote its helper's pid")
        .trim()
        .parse()
        .expect("a pid");
    assert!(
        state(helper).is_some_and(|s| s != 'Z'),
        "the helper runs while the backend does: {:?}",
        state(helper)
    );
    drop(hooks);
    let gone = eventually(Duration::from_secs(2), || {
        state(helper).is_none_or(|s| s == 'Z')
    })
    .await;
    assert!(
        gone,
        "the backend's helper {helper} outlived the dropped interceptor: {:?}",
        state(helper)
    );
}

/// A backend started through a wrapper (here a shell that starts a helper process and
/// then becomes the backend, as `npx` or `uv run` start the real server): a deadline
/// kills what the backend started too, in both lifecycles, not only the process the host
/// spawned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_kills_what_the_backend_started_too() {
    // Its backend is a child of this process too: the test that counts those waits.
    let _shared = PROCESSES.read().await;
    for lifecycle in LIFECYCLES {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let pid_file = dir.path().join("helper.pid");
        let script = format!(
            "sleep 300 & echo $! > '{}'; exec '{BACKEND}' sleep:10000",
            pid_file.display()
        );
        let hook = json!({
            "id": ID,
            "transport": {"type": "stdio", "command": "/bin/sh", "args": ["-c", script],
                          "lifecycle": lifecycle},
            "subscriptions": [{"events": ["tool.before"], "mode": "intercept",
                               "timeoutMs": 300, "failurePolicy": "fail-open",
                               "content": {"default": "metadata"}}]
        });
        let hooks = start(vec![hook]).await;
        let settled = call(&hooks, &format!("evt_wrapped_{lifecycle}")).await;
        assert_failed(&settled, "fail-open", "deadline-exceeded", lifecycle);
        let helper: u32 = std::fs::read_to_string(&pid_file)
            .expect("the wrapper wrote its helper's pid")
            .trim()
            .parse()
            .expect("a pid");
        let gone = eventually(Duration::from_secs(2), || {
            state(helper).is_none_or(|s| s == 'Z')
        })
        .await;
        hooks.shutdown();
        assert!(
            gone,
            "{lifecycle}: the backend's helper {helper} outlived the deadline"
        );
    }
}

/// A call still under way when the interceptor shuts down draining (as `ahp`'s one-shot
/// commands do; an embedder may with calls running) ends as shut down. Left running
/// while a persistent observer drained, a later backend it reached (which starts no
/// child any more) failed it as a lost connection, and fail-open let the call through
/// where that backend denies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_under_way_at_a_draining_shutdown_is_shut_down() {
    let _shared = PROCESSES.read().await;
    let observer_log = Log::new();
    let slow_log = Log::new();
    let observer = json!({"id": "com.example.observer",
        "transport": {"type": "stdio", "command": BACKEND, "lifecycle": "persistent",
                      "args": ["stubborn", observer_log.arg()]},
        "subscriptions": [{"events": ["tool.before", "turn.start"], "mode": "observe",
                           "content": {"default": "metadata"}}]});
    let slow_args = ["sleep:500", &slow_log.arg()];
    let slow = hook(
        "com.example.slow",
        &slow_args,
        "per_event",
        "fail-open",
        10_000,
    );
    let denying = hook(
        "com.example.deny",
        &["deny"],
        "per_event",
        "fail-open",
        10_000,
    );
    let hooks = start(vec![observer, slow, denying]).await;
    // The observer is started by an event no interceptor selects (one that is would be
    // refused: it is for intercept).
    hooks
        .observe(&valid_event("turn.start", "evt_observed"), None)
        .await
        .expect("observed");
    let event = valid_event("tool.before", "evt_drained");
    let call = hooks.intercept(&event, &[], None);
    let drain = async {
        let reached = eventually(Duration::from_secs(10), || {
            slow_log
                .values("recv")
                .contains(&"hooks/intercept".to_owned())
        })
        .await;
        assert!(reached, "the slow backend never got its request");
        hooks.shutdown_draining(&Interrupt::new()).await;
    };
    let (settled, ()) = tokio::join!(call, drain);
    let settled = settled.expect("settled");
    assert_eq!(
        (settled.decision, settled.decided_by),
        (Decision::Deny, DecidedBy::Shutdown),
        "{}",
        record_json(&settled)
    );
}

/// `ahp` passes none of what its harness leaked to a stdio backend: a descriptor it
/// inherited without close-on-exec (here 40, a file) is not open in the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descriptor_the_harness_leaked_does_not_reach_a_backend() {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::process::CommandExt as _;
    let _shared = PROCESSES.read().await;
    let log = Log::new();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = dir.path().join("registration.json");
    let hooks = vec![hook(
        ID,
        &["no-effect", &log.arg()],
        "per_event",
        "fail-closed",
        10_000,
    )];
    std::fs::write(&reg, registration(hooks)).expect("write the registration");
    let event_file = dir.path().join("event.json");
    std::fs::write(&event_file, event("evt_leak")).expect("write the event");
    let leaked = std::fs::File::open(&reg).expect("a file to leak");
    let leaked_fd = leaked.as_raw_fd();
    let mut command = ahp_tests::support::ahp_command();
    command
        .arg("intercept")
        .arg("--registration")
        .arg(&reg)
        .arg("--event")
        .arg(&event_file);
    // SAFETY: only dup2, async-signal-safe, between fork and exec; the new descriptor
    // is not close-on-exec, as a careless harness leaves one.
    unsafe {
        command.pre_exec(move || match libc::dup2(leaked_fd, 40) {
            40 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
    let output = command.output().expect("run ahp");
    assert!(output.status.success(), "{output:?}");
    let fds = log.values("fds");
    assert_eq!(fds.len(), 1, "{:?}", log.lines());
    let open: Vec<&str> = fds[0].split(',').collect();
    assert!(open.contains(&"2"), "{open:?}");
    assert!(
        !open.contains(&"40"),
        "the leaked descriptor reached the backend: {open:?}"
    );
}

/// A reply line ended by CR LF is read as the reply (the CR is JSON whitespace), and a
/// persistent backend that writes one is kept: no restart, one process for two calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_ended_by_crlf_is_the_reply() {
    every_case("crlf", 2_000, |c| assert_no_effect(&c.settled, &c.name)).await;
    let _shared = PROCESSES.read().await;
    let (log, hooks) = logged("crlf", "persistent", "fail-closed", 2_000).await;
    call_no_effect(&hooks, "evt_crlf_1").await;
    call_no_effect(&hooks, "evt_crlf_2").await;
    assert_eq!(log.pids().len(), 1, "{:?}", log.lines());
    hooks.shutdown();
}

/// A reply that is not UTF-8 is `malformed-utf8`, and a line that is not protocol before
/// the reply (a greeting on stdout) is read as the reply, `malformed-json`: each settled
/// by the policy at once (a fail-open one lets the call through, a deny unread), and the
/// persistent child replaced, since what it writes next cannot be attributed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_is_not_utf8_or_follows_a_banner_is_malformed() {
    for (mode, class) in [("latin1", "malformed-utf8"), ("banner", "malformed-json")] {
        every_case(mode, 2_000, |c| {
            assert_failed(&c.settled, c.policy, class, &c.name);
        })
        .await;
    }
}

/// A backend that writes 1 MiB to stderr (in lines far longer than the logged cap)
/// before it answers is answered in time: its stderr is drained as it writes, so it never
/// blocks on a full pipe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_on_stderr_does_not_hold_the_reply() {
    every_case("stderr-flood:1048576", 5_000, |c| {
        assert_no_effect(&c.settled, &c.name)
    })
    .await;
}

/// A per-event backend whose reply came in time but whose exit did not fails the exchange
/// by its deadline (exit 0 is what says it finished), in phase `read-response`: the
/// record does not claim that no reply came (`await-response`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_event_reply_whose_exit_comes_late_fails_past_the_response() {
    let _shared = PROCESSES.read().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    for policy in POLICIES {
        let exit_at = dir.path().join(format!("exit-at-{policy}"));
        let later = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis()
            + 60_000;
        std::fs::write(&exit_at, later.to_string()).expect("write the exit time");
        let mode = format!("deny-then-exit-at:{}", exit_at.display());
        let hooks = start(vec![hook(ID, &[&mode], "per_event", policy, 500)]).await;
        let (settled, _) = only_call(hooks, &format!("evt_exit_late_{policy}")).await;
        let case = format!("per_event {policy}");
        let failure = assert_failed(&settled, policy, "deadline-exceeded", &case);
        assert_eq!(failure["phase"], json!("read-response"), "{case}");
    }
}

/// A variable named with a backend id (`ID:NAME`) reaches that stdio backend only; one
/// named alone reaches every stdio backend. An id that is no stdio backend of the
/// registration is refused when the interceptor is built.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_variable_scoped_to_a_backend_reaches_that_backend_only() {
    let _shared = PROCESSES.read().await;
    // Set by Cargo for every test process (see the test above).
    let (shared, scoped) = ("CARGO_MANIFEST_DIR", "CARGO_PKG_NAME");
    let (first, second) = (Log::named("first.log"), Log::named("second.log"));
    let hooks = vec![
        hook(
            "com.example.first",
            &["allow", &first.arg()],
            "per_event",
            "fail-closed",
            2_000,
        ),
        hook(
            "com.example.second",
            &["allow", &second.arg()],
            "per_event",
            "fail-closed",
            2_000,
        ),
    ];
    let options = Options {
        stdio_env: vec![
            StdioEnv::All(shared.into()),
            StdioEnv::Backend {
                id: "com.example.first".into(),
                name: scoped.into(),
            },
        ],
        ..Options::default()
    };
    let hooks = Interceptor::new(&registration(hooks.clone()), options)
        .await
        .expect("a valid registration");
    let (settled, _) = only_call(hooks, "evt_scoped_env").await;
    assert_settled(&settled, Decision::Allow, DecidedBy::NoObjection, None);
    assert_eq!(first.values("env"), [format!("{shared},{scoped},PATH")]);
    assert_eq!(second.values("env"), [format!("{shared},PATH")]);

    let options = Options {
        stdio_env: vec![StdioEnv::Backend {
            id: "com.example.third".into(),
            name: scoped.into(),
        }],
        ..Options::default()
    };
    let refused = Interceptor::new(
        &registration(vec![hook(
            ID,
            &["allow"],
            "per_event",
            "fail-closed",
            2_000,
        )]),
        options,
    )
    .await
    .err()
    .expect("an unknown backend id is refused");
    assert!(
        refused
            .to_string()
            .contains("stdio-env names `com.example.third`"),
        "{refused}"
    );
}
