//! A persistent stdio observer under the one-shot commands (`ahp observe`, `intercept`,
//! `hook`): a notification gets no reply, so written to the child's pipe is all its
//! delivery shows. Before the process exits, the child's stdin is closed and it has until
//! that notification's deadline to read it and end of itself; then, or at a signal, it is
//! killed — never left running.

use ahp_tests::hook::{answer_after_signal, hook_command, run_command};
use ahp_tests::support::{ahp_command, eventually, valid_event, Run};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A registration whose one hook observes `tool.before` through a persistent stdio child:
/// `stdio_backend MODE LOG`, started after `delay` (as an interpreter takes a while to
/// start reading).
fn observer_registration(dir: &Path, mode: &str, delay: &str, log: &Path) -> PathBuf {
    let script = format!("sleep {delay}; exec \"$0\" \"$1\" \"$2\"");
    let registration = json!({"protocolVersion": "draft", "hooks": [{
        "id": "com.example.observer",
        "transport": {"type": "stdio", "command": "/bin/sh", "lifecycle": "persistent",
            "args": ["-c", script, env!("CARGO_BIN_EXE_stdio_backend"), mode,
                     log.to_str().expect("a UTF-8 path")]},
        "subscriptions": [{"events": ["tool.before"], "mode": "observe",
                           "content": {"default": "metadata"}}]
    }]});
    let path = dir.join("registration.json");
    std::fs::write(&path, registration.to_string()).expect("write the registration");
    path
}

/// A temporary directory holding an observer's log, the registration of
/// [`observer_registration`] and, if `event_id` is given, a `tool.before` event with it.
struct Setup {
    _dir: tempfile::TempDir,
    log: PathBuf,
    registration: PathBuf,
    event: PathBuf,
}

fn set_up(mode: &str, delay: &str, event_id: &str) -> Setup {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("observer.log");
    let registration = observer_registration(dir.path(), mode, delay, &log);
    let event = dir.path().join("event.json");
    std::fs::write(&event, valid_event("tool.before", event_id)).expect("write");
    Setup {
        _dir: dir,
        log,
        registration,
        event,
    }
}

/// A Claude Code `PreToolUse` payload.
fn pre_tool_use() -> Vec<u8> {
    json!({"session_id": "s1", "cwd": "/repo", "transcript_path": "/t.jsonl",
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "ls"}, "tool_use_id": "toolu_1"})
    .to_string()
    .into_bytes()
}

/// Waits (30 s at most) until the observer logged reading its notification.
async fn read_by_the_observer(log: &Path) {
    let read = || notifications(log) > 0;
    assert!(
        eventually(Duration::from_secs(30), read).await,
        "never delivered"
    );
}

/// `ahp COMMAND --registration R --event E`, run to its end.
fn one_shot(command: &str, registration: &Path, event: &Path) -> Run {
    let output = ahp_command()
        .args([command, "--registration"])
        .arg(registration)
        .arg("--event")
        .arg(event)
        .stdin(Stdio::null())
        .output()
        .expect("run ahp");
    Run::of(output)
}

/// How many notifications the observer logged reading.
fn notifications(log: &Path) -> usize {
    let logged = std::fs::read_to_string(log).unwrap_or_default();
    logged.matches("recv hooks/observe").count()
}

/// The observer's process id, from its log.
fn observer_pid(log: &Path) -> i32 {
    let logged = std::fs::read_to_string(log).unwrap_or_default();
    logged
        .lines()
        .find_map(|line| line.strip_prefix("pid "))
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("the observer logged its pid: {logged}"))
}

/// Whether `pid` still runs: present and not a zombie (one the command left unreaped is
/// dead all the same).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit(')').next().unwrap_or_default().trim_start();
        !state.starts_with('Z') && !state.starts_with('X')
    })
}

/// The observer starts reading 0.3 s after it was sent the event, well within its 2 s
/// deadline: each command exits only once the observer has read it. Killed at once at
/// shutdown, as before, it lost the notification while the record said `delivered`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_observer_reads_its_notification_before_a_one_shot_command_exits() {
    let Setup {
        _dir,
        log,
        registration,
        event,
    } = set_up("no-effect", "0.3", "evt_persistent");
    for command in ["observe", "intercept"] {
        let _ = std::fs::remove_file(&log);
        let run = one_shot(command, &registration, &event);
        run.assert_exit(0, command);
        assert!(run.stdout.contains("\"delivered\""), "{}", run.stdout);
        assert_eq!(notifications(&log), 1, "{command}");
    }
    let _ = std::fs::remove_file(&log);
    let ran = run_command(
        hook_command("claude-code", &registration, &[]),
        &pre_tool_use(),
        true,
    )
    .await;
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(notifications(&log), 1, "hook claude-code: {ran:?}");
}

/// An observer that does not end at end of input holds the command no later than its
/// notification's deadline (2 s, the observers' bound), and is killed then: the command
/// leaves nothing running.
#[test]
fn an_observer_that_ignores_end_of_input_is_killed_at_its_notifications_deadline() {
    let Setup {
        _dir,
        log,
        registration,
        event,
    } = set_up("stubborn", "0", "evt_stubborn");
    let started = Instant::now();
    let run = one_shot("observe", &registration, &event);
    run.assert_exit(0, "observe");
    assert_eq!(notifications(&log), 1);
    // Correctness bounds (the deadline is 2 s), not a measurement: it waited for the
    // deadline, and not much past it.
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(2), "{took:?} {run:?}");
    assert!(took < Duration::from_secs(10), "{took:?} {run:?}");
    assert!(!running(observer_pid(&log)), "the observer outlived ahp");
}

/// `ahp observe` signalled while a stubborn observer is given its time: the wait ends,
/// the observer is killed, and the command exits 0, its notification delivered (only a
/// signal before the deliveries ended is exit 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_during_the_wait_leaves_observe_s_deliveries_as_they_were() {
    let Setup {
        _dir,
        log,
        registration,
        event,
    } = set_up("stubborn", "0", "evt_observe_cut");
    let mut observe = ahp_command();
    observe
        .args(["observe", "--registration"])
        .arg(&registration)
        .arg("--event")
        .arg(&event)
        // Its log says when the wait begins.
        .env("AHP_LOG", "ahp_host=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = tokio::process::Command::from(observe)
        .kill_on_drop(true)
        .spawn()
        .expect("start ahp observe");
    let log_lines = child.stderr.take().expect("stderr is piped");
    let (waiting, waits) = tokio::sync::oneshot::channel();
    // Read to its end: a full pipe would hold the command.
    tokio::spawn(async move {
        use tokio::io::AsyncBufReadExt as _;
        let mut lines = tokio::io::BufReader::new(log_lines).lines();
        let mut waiting = Some(waiting);
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("input for it to end") {
                waiting.take().map(|waiting| waiting.send(()));
            }
        }
    });
    read_by_the_observer(&log).await;
    // The delivery over and recorded, the command's wait for the observer has begun.
    let began = tokio::time::timeout(Duration::from_secs(30), waits).await;
    assert!(matches!(began, Ok(Ok(()))), "the wait never began");
    let signalled = Instant::now();
    let output = answer_after_signal(child, "TERM").await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout.contains("\"delivered\""), "{stdout}");
    // At once, not when the observer's 2 s are up: a wait the signal does not end would
    // end there the same way (a correctness bound, with slack).
    let took = signalled.elapsed();
    assert!(took < Duration::from_millis(1500), "{took:?} {output:?}");
    assert!(
        !running(observer_pid(&log)),
        "the observer outlived ahp observe"
    );
}

/// A signal while a stubborn observer is given its time ends the wait at once: `ahp hook`
/// answers, with a denial, and exits with the observer killed. Waited for past the signal's grace, the
/// process would exit leaving the observer running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_while_an_observer_ends_kills_it() {
    use tokio::io::AsyncWriteExt as _;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("observer.log");
    let registration = observer_registration(dir.path(), "stubborn", "0", &log);
    let mut command = hook_command("claude-code", &registration, &[]);
    let mut hook = command.spawn().expect("start ahp hook");
    let mut stdin = hook.stdin.take().expect("piped");
    stdin.write_all(&pre_tool_use()).await.expect("write");
    drop(stdin);
    // The observer has read its notification: the command now waits for it to end.
    read_by_the_observer(&log).await;
    let signalled = Instant::now();
    let output = answer_after_signal(hook, "TERM").await;
    // No objection was settled, but not answered yet: the signal makes it Claude Code's
    // denial (exit 2, its reason on stderr), never the allow.
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let answer: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("a JSON answer on stdout");
    let decided = &answer["hookSpecificOutput"];
    assert_eq!(decided["permissionDecision"], "deny", "{answer}");
    let reason = decided["permissionDecisionReason"]
        .as_str()
        .unwrap_or_default();
    assert!(!reason.is_empty(), "{answer}");
    assert_eq!(String::from_utf8_lossy(&output.stderr).trim(), reason);
    // At once, not when the observer's 2 s are up (a correctness bound, with slack).
    let took = signalled.elapsed();
    assert!(took < Duration::from_millis(1500), "{took:?} {output:?}");
    assert!(
        !running(observer_pid(&log)),
        "the observer outlived ahp hook"
    );
}
