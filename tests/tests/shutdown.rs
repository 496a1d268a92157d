//! Shutdown: admission stops (later calls fail locally with a `shutdown` denial),
//! in-flight calls end as denials, repeated and concurrent shutdown is safe, and the
//! interceptor's connections are released; shutdown also cancels the owned observer
//! deliveries in flight, and `ahp observe` and `ahp hook` shut down on a signal, leaving
//! no child; the hook answers its harness with a denial first.

use ahp_host::{DecidedBy, Decision, EffectKind, Interceptor, Interrupt, Options};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    ahp_command, audited, event, locked_elsewhere, record_json, registration, settle, Http,
};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::sync::RwLock;

/// Every test here holds this shared, but the one that counts the process's descriptors,
/// which holds it alone: the others open sockets, pipes and files while they run.
static DESCRIPTORS: RwLock<()> = RwLock::const_new(());

fn fd_targets() -> Vec<String> {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_admission_ends_in_flight_calls_and_releases_sockets() {
    let _alone = DESCRIPTORS.write().await;
    // Warm the process-wide runtime first (compiled component, memory images), which
    // lives for the whole process; what is counted is what one interceptor holds. The
    // backends are created after the count and dropped before the final one, so only
    // the interceptor's own descriptors can make a difference.
    {
        let warm_backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let warm = Interceptor::new(
            &registration(&[Http::new("com.example.warm", warm_backend.url())]),
            Options::default(),
        )
        .await
        .unwrap();
        warm.intercept(&event("evt_sd_0"), &[EffectKind::Deny], None)
            .await
            .unwrap();
        warm.shutdown();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let fds_before = open_fds();
    let quiet = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let stuck = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let hooks = Interceptor::new(
        &registration(&[
            Http::new("com.example.quiet", quiet.url()),
            Http::new("com.example.stuck", stuck.url())
                .timeout_ms(10_000)
                .policy("fail-open"),
        ]),
        Options::default(),
    )
    .await
    .unwrap();

    // An in-flight call: the first backend answers, the second never does.
    let in_flight = {
        let hooks = hooks.clone();
        tokio::spawn(async move {
            hooks
                .intercept(&event("evt_sd_1"), &[EffectKind::Deny], None)
                .await
        })
    };
    assert!(stuck.wait_for_requests(1, Duration::from_secs(5)).await);
    let started = Instant::now();
    // Repeated and concurrent shutdown is safe.
    let (a, b) = (hooks.clone(), hooks.clone());
    let concurrent = [
        tokio::spawn(async move { a.shutdown() }),
        tokio::spawn(async move { b.shutdown() }),
    ];
    hooks.shutdown();
    for task in concurrent {
        task.await.unwrap();
    }
    let settled = in_flight
        .await
        .unwrap()
        .expect("an in-flight call still settles");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "in-flight call took {:?}",
        started.elapsed()
    );
    assert_eq!(settled.decision, Decision::Deny, "{}", settled.record);
    assert_eq!(settled.decided_by, DecidedBy::Shutdown);
    assert_eq!(record_json(&settled)["decidedBy"], "shutdown");

    // Admission has stopped: a later call fails locally, as a denial, sending nothing.
    let requests_before = quiet.requests().len();
    match hooks
        .intercept(&event("evt_sd_2"), &[EffectKind::Deny], None)
        .await
    {
        Err(e) if e.is_shut_down() => {
            let settled = e.shutdown_settlement().expect("the local shutdown denial");
            assert_eq!(settled.decision, Decision::Deny);
            assert_eq!(settled.decided_by, DecidedBy::Shutdown);
            assert!(e.problems().is_empty());
        }
        other => panic!("a call after shutdown must fail locally, got {other:?}"),
    }
    assert_eq!(quiet.requests().len(), requests_before);

    // Dropping the last handle releases the pooled connections.
    drop(hooks);
    drop((quiet, stuck));
    let deadline = Instant::now() + Duration::from_secs(2);
    while open_fds() > fds_before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        open_fds() <= fds_before,
        "leaked descriptors: {} > {}: {:?}",
        open_fds(),
        fds_before,
        fd_targets()
    );
}

/// Shutdown closes the interceptor's pooled connections itself, while the embedder still
/// holds it: the backend sees its kept-alive connection end, not only once the last
/// handle is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_pooled_connections_while_the_interceptor_is_held() {
    let _shared = DESCRIPTORS.read().await;
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let hooks = Interceptor::new(
        &registration(&[Http::new("com.example.pooled", backend.url())]),
        Options::default(),
    )
    .await
    .unwrap();
    let settled = hooks
        .intercept(&event("evt_sd_pooled"), &[EffectKind::Deny], None)
        .await
        .unwrap();
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    // Kept alive for the next call.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(backend.open_connections(), 1);
    hooks.shutdown_async().await;
    let deadline = Instant::now() + Duration::from_secs(2);
    while backend.open_connections() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        backend.open_connections(),
        0,
        "the pooled connection outlived shutdown"
    );
    drop(hooks);
}

/// Shutdown returns once the audit records queued before it are written (bounded): a
/// dropped call's, still waiting for another process's lock on the file. A call refused
/// after shutdown leaves its `shutdown` denial in the log too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_writes_the_audit_records_queued_before_it() {
    let _shared = DESCRIPTORS.read().await;
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let audit = dir.path().join("audit.jsonl");
    let hooks = audited(&audit, "com.example.policy", &backend.url(), "fail-closed").await;
    let holder = locked_elsewhere(&audit);
    let call = settle(&hooks, "evt_sd_queued", None).await;
    drop(call);
    let unlock = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        holder.unlock().expect("unlock");
    });
    hooks.shutdown();
    let ids = |lines: Vec<Value>| -> Vec<(Value, Value)> {
        let pair = |l: &Value| (l["event"]["id"].clone(), l["decidedBy"].clone());
        lines.iter().map(pair).collect()
    };
    let queued = (json!("evt_sd_queued"), json!("no-objection"));
    assert_eq!(
        ids(ahp_tests::support::audit_lines(&audit)),
        std::slice::from_ref(&queued)
    );
    unlock.join().expect("the lock's holder");

    // Refused at once, waiting for nothing (the file locked elsewhere again): a
    // caller's timeout of zero still gets the denial, and the log one record for it
    // (not also an `interrupted` one).
    let holder = locked_elsewhere(&audit);
    let late = event("evt_sd_refused");
    let calling = hooks.intercept(&late, &[EffectKind::Deny], None);
    let refused = tokio::time::timeout(Duration::ZERO, calling).await;
    holder.unlock().expect("unlock");
    assert!(
        matches!(&refused, Ok(Err(e)) if e.is_shut_down()),
        "{refused:?}"
    );
    let refused = (json!("evt_sd_refused"), json!("shutdown"));
    // Written once the lock is free; then a moment for a second record, which must not come.
    ahp_tests::support::audit_lines_once(&audit, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        ids(ahp_tests::support::audit_lines(&audit)),
        [queued, refused]
    );
    assert_eq!(backend.requests().len(), 1);
}

/// The audit record of a call whose future a harness drops once it has shut the
/// interceptor down (a `select!` between the call and its shutdown signal), the backend
/// never answering: the call is recorded `shutdown` — `interrupted` if the call's own
/// interrupt is set too (here, set before the shutdown).
async fn dropped_after_shutdown(interrupted_first: bool) -> Value {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let audit = dir.path().join("audit.jsonl");
    let options = Options {
        audit_path: Some(audit.clone()),
        ..Options::default()
    };
    let reg = registration(&[Http::new("com.example.silent", backend.url())
        .timeout_ms(10_000)
        .policy("fail-open")]);
    let hooks = Interceptor::new(&reg, options).await.expect("valid");
    let interrupt = Interrupt::new();
    let event = event("evt_sd_dropped");
    let mut calling = Box::pin(hooks.settle(&event, &[EffectKind::Deny], None, &interrupt));
    // Polled until the backend holds the request, then never again: it cannot settle.
    tokio::select! {
        _ = &mut calling => panic!("settled with its backend silent"),
        asked = backend.wait_for_requests(1, Duration::from_secs(5)) => assert!(asked),
    }
    if interrupted_first {
        interrupt.interrupt();
    }
    hooks.shutdown_async().await;
    drop(calling);
    let lines = ahp_tests::support::audit_lines_once(&audit, 1).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["event"]["id"], "evt_sd_dropped");
    assert_eq!(lines[0]["decision"], "deny");
    lines[0].clone()
}

/// A call dropped before it settles, after the interceptor shut down, is recorded as
/// shut down, as one that settles then is; as interrupted if the call itself was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_after_shutdown_is_recorded_shutdown_unless_interrupted() {
    let _shared = DESCRIPTORS.read().await;
    assert_eq!(dropped_after_shutdown(false).await["decidedBy"], "shutdown");
    assert_eq!(
        dropped_after_shutdown(true).await["decidedBy"],
        "interrupted"
    );
}

/// An owned observer delivery hanging on a blackhole ends as `interrupted` when the
/// interceptor shuts down during `HookCall::complete`, instead of running to its 2 s
/// bound (`deadline-exceeded`); the decision handed out before is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cancels_owned_observer_deliveries_in_flight() {
    let _shared = DESCRIPTORS.read().await;
    let policy = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let hanging = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let mut reg: Value = serde_json::from_str(&registration(&[Http::new(
        "com.example.policy",
        policy.url(),
    )]))
    .unwrap();
    reg["hooks"].as_array_mut().unwrap().push(json!({
        "id": "com.example.hang", "transport": {"type": "http", "url": hanging.url()},
        "subscriptions": [{"events": ["tool.before"], "mode": "observe",
                           "content": {"default": "metadata"}}]
    }));
    let hooks = Interceptor::new(&reg.to_string(), Options::default())
        .await
        .unwrap();
    let call = settle(&hooks, "evt_sd_obs", None).await;
    assert_eq!(call.settlement().decision, Decision::Allow);
    let completing = tokio::spawn(call.complete());
    assert!(hanging.wait_for_requests(1, Duration::from_secs(5)).await);
    hooks.shutdown_async().await;
    let settled = tokio::time::timeout(Duration::from_secs(10), completing)
        .await
        .expect("completion ends once shut down")
        .unwrap();
    let record = record_json(&settled);
    assert_eq!(
        record["observers"][0]["backend"], "com.example.hang",
        "{record}"
    );
    assert_eq!(record["observers"][0]["result"], "interrupted", "{record}");
    assert_eq!(settled.decision, Decision::Allow, "{record}");
}

/// `ahp observe` sent SIGTERM while its per-event stdio observer is still running (that
/// backend ignores its input closing and sleeps): the CLI shuts down, exits 1 on its own
/// (not killed by the signal), and the child is gone, not orphaned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ahp_observe_on_sigterm_kills_and_reaps_its_stdio_children() {
    let _shared = DESCRIPTORS.read().await;
    adopt_orphans();
    use std::os::unix::process::ExitStatusExt as _;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("backend.log");
    let reg = json!({"protocolVersion": "draft", "hooks": [{
        "id": "com.example.sleepy",
        "transport": {"type": "stdio", "command": env!("CARGO_BIN_EXE_stdio_backend"),
                      "args": ["stubborn", log.to_str().unwrap()], "lifecycle": "per_event"},
        "subscriptions": [{"events": ["tool.after"], "mode": "observe",
                           "content": {"default": "metadata"}}]
    }]});
    let reg_path = dir.path().join("registration.json");
    std::fs::write(&reg_path, reg.to_string()).unwrap();
    let event_path = dir.path().join("event.json");
    let after = json!({"id": "evt_sd_sig", "source": "urn:ahp:test", "type": "tool.after",
        "time": "2026-11-30T12:00:01Z", "session": {"id": "sess_sd"}, "call": {"id": "call_sd"},
        "path": "native", "tool": {"name": "Bash", "input": {"command": "ls"}, "origin": "native"},
        "outcome": "ok", "execution": {"status": "executed"}, "items": []});
    std::fs::write(&event_path, after.to_string()).unwrap();
    let mut ahp = tokio::process::Command::from(ahp_command())
        .arg("observe")
        .arg("--registration")
        .arg(&reg_path)
        .arg("--event")
        .arg(&event_path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let child_pid = wait_for_pid(&log)
        .await
        .expect("the observer backend started");
    // The delivery is in flight: the backend has the notification and keeps running.
    assert!(alive(child_pid));
    // Signalled directly: a minimal Debian has no `kill` program (procps).
    let ahp_pid = libc::pid_t::try_from(ahp.id().unwrap()).unwrap();
    // SAFETY: kill(2) takes any pid and signal number; this one is our own child's.
    let sent = unsafe { libc::kill(ahp_pid, libc::SIGTERM) };
    assert_eq!(sent, 0, "{}", std::io::Error::last_os_error());
    let status = tokio::time::timeout(Duration::from_secs(10), ahp.wait())
        .await
        .expect("ahp observe exits after SIGTERM")
        .unwrap();
    assert_eq!(status.signal(), None, "handled, not killed by the signal");
    assert_eq!(status.code(), Some(1));
    assert!(
        reaped(child_pid),
        "stdio child {child_pid} outlived ahp observe, or was left unreaped"
    );
}

/// `ahp hook codex` sent SIGTERM while its stdio interceptor holds the request (that
/// backend sleeps a minute before answering and reads nothing meanwhile): the call ends as
/// `interrupted` although the subscription fails open, Codex gets its denial on stdout
/// from a process that exited on its own, the audit log has the record, and the backend
/// is killed and reaped, not orphaned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ahp_hook_on_sigterm_answers_a_denial_and_reaps_its_stdio_backend() {
    let _shared = DESCRIPTORS.read().await;
    adopt_orphans();
    use tokio::io::AsyncWriteExt as _;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("backend.log");
    let audit = dir.path().join("audit.jsonl");
    let reg = json!({"protocolVersion": "draft", "hooks": [{
        "id": "com.example.slow",
        "transport": {"type": "stdio", "command": env!("CARGO_BIN_EXE_stdio_backend"),
                      "args": ["sleep:60000", log.to_str().unwrap()], "lifecycle": "per_event"},
        "subscriptions": [{"events": ["tool.before"], "mode": "intercept", "timeoutMs": 30000,
                           "failurePolicy": "fail-open", "content": {"default": "metadata"}}]
    }]});
    let reg_path = dir.path().join("registration.json");
    std::fs::write(&reg_path, reg.to_string()).unwrap();
    let payload = json!({"session_id": "s-sig", "cwd": "/repo", "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "tool_use_id": "call_sig"});
    let mut ahp = tokio::process::Command::from(ahp_command())
        .args(["hook", "codex", "--registration"])
        .arg(&reg_path)
        .arg("--audit")
        .arg(&audit)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = ahp.stdin.take().unwrap();
    stdin
        .write_all(payload.to_string().as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let child_pid = wait_for_pid(&log).await.expect("the backend started");
    assert!(
        wait_for_line(&log, "recv hooks/intercept").await,
        "the request reached the backend"
    );
    let output = ahp_tests::hook::answer_after_signal(ahp, "TERM").await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Codex's denial: its JSON, and exit 2 with the reason on stderr.
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr, "Policy evaluation was interrupted.\n");
    let answer: Value = serde_json::from_str(&stdout).expect("a JSON answer");
    assert_eq!(
        answer["hookSpecificOutput"]["permissionDecision"], "deny",
        "{answer}"
    );
    let line = std::fs::read_to_string(&audit).expect("the audit log");
    let record: Value = serde_json::from_str(line.trim()).expect("one record");
    assert_eq!(record["decision"], "deny", "{record}");
    assert_eq!(record["decidedBy"], "interrupted", "{record}");
    assert!(
        reaped(child_pid),
        "stdio backend {child_pid} outlived ahp hook, or was left unreaped"
    );
}

/// Whether `line` appears in the file at `log` within 10 s.
async fn wait_for_line(log: &std::path::Path, line: &str) -> bool {
    for _ in 0..1000 {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.lines().any(|l| l == line) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// The pid the stdio backend logs when it starts, polled for up to 10 s.
async fn wait_for_pid(log: &std::path::Path) -> Option<u32> {
    for _ in 0..1000 {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(pid) = text.lines().find_map(|l| l.strip_prefix("pid ")) {
            return pid.parse().ok();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// What the two SIGTERM tests above rely on: under [`adopt_orphans`], a child killed and
/// left unreaped by a parent that then exits is seen as not [`reaped`], though it is not
/// [`alive`] either (a shell kills its background `sleep` and exits without waiting).
#[test]
fn an_orphan_killed_and_left_unreaped_is_seen() {
    adopt_orphans();
    let shell = std::process::Command::new("sh")
        .args(["-c", "sleep 30 & echo $!; kill -KILL $!"])
        .output()
        .expect("sh runs");
    let pid: u32 = String::from_utf8_lossy(&shell.stdout)
        .trim()
        .parse()
        .expect("the shell printed its child's pid");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!alive(pid), "the killed sleep {pid} still runs");
    assert!(!reaped(pid), "the orphan {pid} was reaped by someone else");
    // SAFETY: waitpid on our own adopted child, with a valid status pointer.
    let waited = unsafe { libc::waitpid(pid as i32, &mut 0, 0) };
    assert_eq!(waited, pid as i32, "the adopted zombie is ours to reap");
    assert!(reaped(pid));
}

/// Makes this test process the reaper of every process orphaned below it
/// (`PR_SET_CHILD_SUBREAPER`): a stdio backend that `ahp` killed but left unreaped when it
/// exited then stays a zombie here, where [`reaped`] sees it, instead of being reaped at
/// once by init. Process-wide and lasting, so other tests' orphans may wait here as
/// zombies too; none of them looks for its own.
fn adopt_orphans() {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes one integer argument and touches no memory.
    let set = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(set, 0, "prctl(PR_SET_CHILD_SUBREAPER)");
}

/// Whether `pid` is gone altogether: neither running nor a zombie awaiting its reaper.
/// Under [`adopt_orphans`], true only if its parent reaped it.
fn reaped(pid: u32) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether `pid` runs (a zombie awaiting its reaper does not count).
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    state != Some("Z")
}
