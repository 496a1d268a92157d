//! The stdio binding end to end (AHP-STDIO-001): the real component and host against
//! real backend processes (`src/bin/stdio_backend.rs`), in both lifecycles and under both
//! failure policies.
//!
//! Each misbehaviour maps to one failure class. A child that exits mid-exchange is
//! `abnormal-exit` in both lifecycles: the host reads EOF on stdout, then sees the exit
//! status (3) before reporting, and `connection-lost` is kept for a child that closed
//! stdout and still runs, or a per-event child that exited 0 without a line.
//!
//! Process hygiene is checked through the backend's log file (one `pid` line per process
//! started) and through `/proc` (children of this test process).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ahp_host::{DecidedBy, Decision, Interceptor, Interrupt, Settlement};
use ahp_tests::support::{event, interceptor, only_interceptor};
use serde_json::{json, Value};
use tokio::sync::RwLock;

const BACKEND: &str = env!("CARGO_BIN_EXE_stdio_backend");
const BACKEND_NAME: &str = "stdio_backend";
const ID: &str = "com.example.stdio";
const SYNTHETIC_REASON: &str = "Required policy backend unavailable.";
/// Scheduling slack allowed beyond a deadline before the call must have settled.
const SLACK: Duration = Duration::from_millis(150);
const LIFECYCLES: [&str; 2] = ["persistent", "per_event"];
const POLICIES: [&str; 2] = ["fail-open", "fail-closed"];

/// Tests that start processes hold this shared; the shutdown test holds it alone, so
/// the children it counts in `/proc` are its own.
static PROCESSES: RwLock<()> = RwLock::const_new(());

/// One stdio hook with a `tool.before` intercept subscription.
fn hook(
    id: &str,
    command: &str,
    args: &[&str],
    lifecycle: &str,
    policy: &str,
    timeout_ms: u64,
) -> Value {
    json!({
        "id": id,
        "transport": {"type": "stdio", "command": command, "args": args, "lifecycle": lifecycle},
        "subscriptions": [{
            "events": ["tool.before"], "mode": "intercept",
            "timeoutMs": timeout_ms, "failurePolicy": policy,
            "content": {"default": "metadata"}
        }]
    })
}

fn registration(hooks: Vec<Value>) -> String {
    json!({"protocolVersion": "draft", "hooks": hooks}).to_string()
}

/// A log file for the backend, in its own temporary directory.
struct Log {
    dir: tempfile::TempDir,
}

impl Log {
    fn new() -> Log {
        Log {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("backend.log")
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

/// One call to a built interceptor, measured.
async fn timed(hooks: &Interceptor, id: &str) -> (Settlement, Duration) {
    let started = Instant::now();
    let settled = hooks
        .intercept(&event(id), &["deny"], None)
        .await
        .expect("a valid event settles");
    (settled, started.elapsed())
}

/// One call against a fresh single-backend interceptor, which is shut down afterwards.
async fn one_call(
    args: &[&str],
    lifecycle: &str,
    policy: &str,
    timeout_ms: u64,
) -> (Settlement, Duration) {
    let hooks = interceptor(&registration(vec![hook(
        ID, BACKEND, args, lifecycle, policy, timeout_ms,
    )]))
    .await;
    let case = format!("evt_{}_{lifecycle}_{policy}", args[0].replace(':', "_"));
    let result = timed(&hooks, &case).await;
    hooks.shutdown();
    result
}

/// The single interceptor entry of a settlement record.
/// The call failed operationally with `class` and settled as `policy` says; returns the
/// failure object of the record.
fn assert_failed<'s>(settled: &'s Settlement, policy: &str, class: &str, case: &str) -> &'s Value {
    let entry = only_interceptor(&settled.record);
    let record = &settled.record;
    assert_eq!(entry["failure"]["class"], json!(class), "{case}: {record}");
    assert_eq!(entry["policy"], json!(policy), "{case}: {record}");
    match policy {
        "fail-open" => {
            assert_eq!(
                (
                    settled.decision,
                    settled.decided_by,
                    settled.reason.as_deref()
                ),
                (Decision::Allow, DecidedBy::NoObjection, None),
                "{case}: {record}"
            );
            assert_eq!(entry["outcome"], json!("failed-open"), "{case}");
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
                ),
                "{case}: {record}"
            );
            assert_eq!(entry["outcome"], json!("failed-closed"), "{case}");
        }
        other => panic!("unknown policy {other}"),
    }
    &entry["failure"]
}

/// Runs `check` for every lifecycle × policy against a backend in `mode`.
async fn every_case<F>(mode: &str, timeout_ms: u64, check: F)
where
    F: Fn(&Settlement, Duration, &str, &str, &Log),
{
    let _shared = PROCESSES.read().await;
    for lifecycle in LIFECYCLES {
        for policy in POLICIES {
            let log = Log::new();
            let log_arg = log.arg();
            let (settled, elapsed) =
                one_call(&[mode, &log_arg], lifecycle, policy, timeout_ms).await;
            let case = format!("{mode} {lifecycle} {policy}");
            println!("{case}: settled in {elapsed:?}");
            check(&settled, elapsed, &case, policy, &log);
        }
    }
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

/// Polls `condition` every 5 ms until it holds or `within` passes; whether it held.
async fn eventually(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_settles_as_no_objection_in_both_lifecycles() {
    every_case("allow", 2_000, |settled, _, case, _, log| {
        let entry = only_interceptor(&settled.record);
        assert_eq!(
            (settled.decision, settled.decided_by),
            (Decision::Allow, DecidedBy::NoObjection),
            "{case}: {}",
            settled.record
        );
        assert_eq!(entry["outcome"], json!("no-effect"), "{case}");
        assert_eq!(entry.get("failure"), None, "{case}");
        // One process got exactly one message; its stderr (the PID) did not disturb it.
        assert_eq!(log.pids().len(), 1, "{case}: {:?}", log.lines());
        assert_eq!(log.values("recv"), ["hooks/intercept"], "{case}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_is_an_explicit_backend_deny_in_both_lifecycles() {
    every_case("deny", 2_000, |settled, _, case, _, _| {
        assert_eq!(
            (
                settled.decision,
                settled.decided_by,
                settled.reason.as_deref()
            ),
            (
                Decision::Deny,
                DecidedBy::BackendDeny,
                Some("stdio says no")
            ),
            "{case}: {}",
            settled.record
        );
        assert_eq!(settled.record["decidedBy"], json!("backend-deny"), "{case}");
        assert_eq!(
            only_interceptor(&settled.record)["outcome"],
            json!("deny"),
            "{case}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleeping_past_the_timeout_is_deadline_exceeded_within_the_slack() {
    every_case("sleep:2000", 300, |settled, elapsed, case, policy, _| {
        let failure = assert_failed(settled, policy, "deadline-exceeded", case);
        assert_eq!(failure["phase"], json!("await-response"), "{case}");
        let deadline = Duration::from_millis(300);
        assert!(
            elapsed >= deadline,
            "{case}: settled in {elapsed:?}, before the deadline"
        );
        assert!(
            elapsed < deadline + SLACK,
            "{case}: settled in {elapsed:?}, after {deadline:?} + {SLACK:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_is_malformed_json_at_once() {
    every_case("garbage", 2_000, |settled, elapsed, case, policy, _| {
        assert_failed(settled, policy, "malformed-json", case);
        assert!(
            elapsed < Duration::from_millis(500),
            "{case}: waited {elapsed:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_id_is_id_mismatch_at_once() {
    every_case("wrong-id", 2_000, |settled, elapsed, case, policy, _| {
        assert_failed(settled, policy, "id-mismatch", case);
        assert!(
            elapsed < Duration::from_millis(500),
            "{case}: waited {elapsed:?} of a 2 s timeout"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exiting_mid_exchange_is_abnormal_exit() {
    every_case("exit-mid", 2_000, |settled, elapsed, case, policy, log| {
        assert_failed(settled, policy, "abnormal-exit", case);
        assert!(
            elapsed < Duration::from_millis(500),
            "{case}: waited {elapsed:?}"
        );
        // abnormal-exit is not transient: not retried, so one process only.
        assert_eq!(log.pids().len(), 1, "{case}");
    })
    .await;
}

/// Per event, exit 0 is what says the exchange finished: a nonzero exit fails it even
/// after a valid line. A persistent backend's reply stands, and the exited process is
/// replaced on the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nonzero_exit_after_a_valid_line_fails_only_per_event() {
    let _shared = PROCESSES.read().await;
    for policy in POLICIES {
        let (settled, _) = one_call(&["reply-then-exit"], "per_event", policy, 2_000).await;
        assert_failed(
            &settled,
            policy,
            "abnormal-exit",
            &format!("per_event {policy}"),
        );
    }
    let log = Log::new();
    let hooks = interceptor(&registration(vec![hook(
        ID,
        BACKEND,
        &["reply-then-exit", &log.arg()],
        "persistent",
        "fail-closed",
        2_000,
    )]))
    .await;
    for n in 1..=2 {
        let (settled, _) = timed(&hooks, &format!("evt_reply_then_exit_{n}")).await;
        assert_eq!(
            settled.decision,
            Decision::Allow,
            "call {n}: {}",
            settled.record
        );
        // Let the process finish exiting (a zombie until the next use reaps it), so the
        // next call finds it gone instead of racing its exit.
        let pid = *log.pids().last().expect("a backend was started");
        assert!(
            eventually(Duration::from_secs(2), || matches!(
                state(pid),
                None | Some('Z')
            ))
            .await
        );
    }
    assert_eq!(log.pids().len(), 2, "{:?}", log.lines());
    hooks.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_line_over_the_cap_is_response_too_large() {
    every_case("huge", 2_000, |settled, _, case, policy, _| {
        let failure = assert_failed(settled, policy, "malformed-json", case);
        assert_eq!(failure["detail"], json!("response-too-large"), "{case}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_command_is_launch_failed() {
    for lifecycle in LIFECYCLES {
        for policy in POLICIES {
            let hooks = interceptor(&registration(vec![hook(
                ID,
                "/nonexistent/backend",
                &[],
                lifecycle,
                policy,
                1_000,
            )]))
            .await;
            let (settled, elapsed) = timed(&hooks, "evt_missing").await;
            hooks.shutdown();
            let case = format!("missing {lifecycle} {policy}");
            let failure = assert_failed(&settled, policy, "launch-failed", &case);
            assert_eq!(failure["phase"], json!("connect"), "{case}");
            assert!(
                elapsed < Duration::from_millis(500),
                "{case}: waited {elapsed:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_backend_serves_sequential_calls_with_one_process() {
    let _shared = PROCESSES.read().await;
    let log = Log::new();
    let hooks = interceptor(&registration(vec![hook(
        ID,
        BACKEND,
        &["count", &log.arg()],
        "persistent",
        "fail-closed",
        2_000,
    )]))
    .await;
    for n in 1..=3 {
        let (settled, _) = timed(&hooks, &format!("evt_reuse_{n}")).await;
        assert_eq!(
            settled.decision,
            Decision::Allow,
            "call {n}: {}",
            settled.record
        );
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
    let log = Log::new();
    let hooks = interceptor(&registration(vec![hook(
        ID,
        BACKEND,
        &["sleep:2000", &log.arg()],
        "persistent",
        "fail-open",
        300,
    )]))
    .await;
    let (first, _) = timed(&hooks, "evt_timeout_1").await;
    assert_failed(&first, "fail-open", "deadline-exceeded", "first call");
    let pids = log.pids();
    assert_eq!(pids.len(), 1);
    // Killed and reaped before the call returned, not just marked.
    assert!(
        !exists(pids[0]),
        "the timed-out backend {} is still there",
        pids[0]
    );
    let (second, _) = timed(&hooks, "evt_timeout_2").await;
    assert_failed(&second, "fail-open", "deadline-exceeded", "second call");
    let pids = log.pids();
    assert_eq!(pids.len(), 2, "{:?}", log.lines());
    assert_ne!(pids[0], pids[1]);
    hooks.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_backend_is_replaced_after_output_it_cannot_attribute() {
    let _shared = PROCESSES.read().await;
    for (mode, class) in [("garbage", "malformed-json"), ("wrong-id", "id-mismatch")] {
        let log = Log::new();
        let hooks = interceptor(&registration(vec![hook(
            ID,
            BACKEND,
            &[mode, &log.arg()],
            "persistent",
            "fail-closed",
            2_000,
        )]))
        .await;
        for n in 1..=2 {
            let (settled, _) = timed(&hooks, &format!("evt_{mode}_{n}")).await;
            assert_failed(&settled, "fail-closed", class, &format!("{mode} call {n}"));
        }
        let pids: BTreeSet<u32> = log.pids().into_iter().collect();
        assert_eq!(pids.len(), 2, "{mode}: {:?}", log.lines());
        assert!(
            pids.iter().all(|&pid| !exists(pid)),
            "{mode}: a replaced backend is still there"
        );
        hooks.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_event_starts_and_reaps_one_process_per_message() {
    let _shared = PROCESSES.read().await;
    let log = Log::new();
    let hooks = interceptor(&registration(vec![hook(
        ID,
        BACKEND,
        &["count", &log.arg()],
        "per_event",
        "fail-closed",
        2_000,
    )]))
    .await;
    for n in 1..=3 {
        let (settled, _) = timed(&hooks, &format!("evt_per_event_{n}")).await;
        assert_eq!(
            settled.decision,
            Decision::Allow,
            "call {n}: {}",
            settled.record
        );
        let pids = log.pids();
        assert_eq!(pids.len(), n, "{:?}", log.lines());
        assert!(!exists(pids[n - 1]), "call {n}: its process was not reaped");
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
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log_path = dir.path().join("log; touch pwned $HOME");
    let log_arg = log_path.to_str().expect("UTF-8 path");
    let mut backend = hook(
        ID,
        BACKEND,
        &["allow", log_arg],
        "per_event",
        "fail-closed",
        2_000,
    );
    backend["transport"]["cwd"] = json!(workdir.path());
    let hooks = interceptor(&registration(vec![backend])).await;
    let (settled, _) = timed(&hooks, "evt_no_shell").await;
    hooks.shutdown();
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    let text = std::fs::read_to_string(&log_path).expect("the log has the literal name");
    let values = |key: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix(&format!("{key} ")).map(str::to_owned))
            .collect()
    };
    assert_eq!(values("env"), ["PATH"], "the environment is not minimal");
    let cwd = std::fs::canonicalize(workdir.path()).expect("canonical path");
    assert_eq!(values("cwd"), [cwd.display().to_string()]);
    assert!(!workdir.path().join("pwned").exists() && !dir.path().join("pwned").exists());
}

/// The host configuration may name more variables to pass on; nothing else leaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_named_host_variables_reach_a_stdio_backend() {
    let _shared = PROCESSES.read().await;
    std::env::set_var("AHP_E2E_STDIO_PASSED", "1");
    std::env::set_var("AHP_E2E_STDIO_KEPT_BACK", "1");
    let log = Log::new();
    let reg = registration(vec![hook(
        ID,
        BACKEND,
        &["allow", &log.arg()],
        "per_event",
        "fail-closed",
        2_000,
    )]);
    let options = ahp_host::Options {
        stdio_env: vec!["AHP_E2E_STDIO_PASSED".into(), "AHP_E2E_STDIO_UNSET".into()],
        ..ahp_host::Options::default()
    };
    let hooks = Interceptor::new(&reg, options).await.unwrap();
    let (settled, _) = timed(&hooks, "evt_stdio_env").await;
    hooks.shutdown();
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    assert_eq!(log.values("env"), ["AHP_E2E_STDIO_PASSED,PATH"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_on_a_persistent_backend_are_served_one_at_a_time() {
    let _shared = PROCESSES.read().await;
    let log = Log::new();
    let hooks = interceptor(&registration(vec![hook(
        ID,
        BACKEND,
        &["sleep:100", &log.arg()],
        "persistent",
        "fail-closed",
        2_000,
    )]))
    .await;
    let started = Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for n in 0..4 {
        let hooks = hooks.clone();
        calls.spawn(async move { timed(&hooks, &format!("evt_concurrent_{n}")).await });
    }
    while let Some(joined) = calls.join_next().await {
        let (settled, elapsed) = joined.expect("the call task completed");
        println!("concurrent call settled in {elapsed:?}");
        assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    }
    let elapsed = started.elapsed();
    println!("4 concurrent calls of 100 ms each took {elapsed:?}");
    // The backend reads a request only after answering the previous one, so one at a
    // time means at least 4 × 100 ms; all were answered by the one process.
    assert!(elapsed >= Duration::from_millis(400), "took {elapsed:?}");
    assert_eq!(log.pids().len(), 1, "{:?}", log.lines());
    assert_eq!(log.values("recv"), ["hooks/intercept"; 4]);
    hooks.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_exchange_kills_the_persistent_backend_and_the_next_call_replaces_it() {
    let _shared = PROCESSES.read().await;
    let log = Log::new();
    let hooks = interceptor(&registration(vec![hook(
        ID,
        BACKEND,
        &["sleep:2000", &log.arg()],
        "persistent",
        "fail-open",
        5_000,
    )]))
    .await;
    for n in 1..=2 {
        let interrupt = Interrupt::new();
        let trigger = interrupt.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            trigger.interrupt();
        });
        let started = Instant::now();
        let settled = hooks
            .intercept_with(
                &event(&format!("evt_interrupted_{n}")),
                &["deny"],
                None,
                &interrupt,
            )
            .await
            .expect("the call settles");
        let elapsed = started.elapsed();
        println!("interrupted call {n} settled in {elapsed:?}");
        assert_eq!(
            (settled.decision, settled.decided_by),
            (Decision::Deny, DecidedBy::Interrupted),
            "{}",
            settled.record
        );
        assert!(
            elapsed < Duration::from_millis(200) + SLACK,
            "call {n}: {elapsed:?}"
        );
        let pid = *log.pids().last().expect("a backend was started");
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
        let hooks = interceptor(&registration(vec![
            hook(
                "com.example.first",
                BACKEND,
                &["deny"],
                "persistent",
                "fail-closed",
                2_000,
            ),
            hook(
                ID,
                BACKEND,
                &["allow", &log.arg()],
                lifecycle,
                "fail-closed",
                2_000,
            ),
        ]))
        .await;
        let (settled, _) = timed(&hooks, &format!("evt_observe_{lifecycle}")).await;
        assert_eq!(
            settled.decided_by,
            DecidedBy::BackendDeny,
            "{}",
            settled.record
        );
        let observers = &settled.record["observers"];
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
    let hooks = interceptor(&registration(vec![
        hook(
            "com.example.first",
            BACKEND,
            &["stubborn"],
            "persistent",
            "fail-closed",
            2_000,
        ),
        hook(
            ID,
            BACKEND,
            &["sleep:5000"],
            "per_event",
            "fail-open",
            10_000,
        ),
    ]))
    .await;
    let call = {
        let hooks = hooks.clone();
        tokio::spawn(async move { timed(&hooks, "evt_shutdown").await })
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
    assert!(
        eventually(Duration::from_secs(2), || ours().is_empty()).await,
        "children left (live or zombie) after shutdown: {:?}",
        ours()
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
