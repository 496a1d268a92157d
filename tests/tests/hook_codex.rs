//! `ahp hook codex`: Codex CLI's Claude-shaped payloads (developers.openai.com/codex/hooks,
//! with `model` and `turn_id`); deny only — an `ask` would count as a failed hook and run
//! the tool, and `updatedInput` applies only with `allow`, a grant, so neither is
//! advertised.

use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::hook::{
    assert_exit_2_block, assert_json, assert_json_and_exit_2, assert_silent_no_objection,
    assert_stopped, tool_payloads, Contract, Intercepted, Ran,
};
use serde_json::json;

fn contract() -> Contract {
    let common = json!({
        "session_id": "019a-codex", "transcript_path": null, "cwd": "/repo",
        "permission_mode": "default", "model": "gpt-5-codex", "turn_id": "turn-7",
        "tool_name": "Bash", "tool_input": {"command": ["bash", "-lc", "rm -rf build"]},
        "tool_use_id": "call_Codex1"
    });
    let (pre, post) = tool_payloads(
        common,
        "hook_event_name",
        ("PreToolUse", "PostToolUse"),
        ("tool_response", json!("done")),
    );
    Contract {
        harness: "codex",
        pre_tool: (pre, &[]),
        post_tool: (post, &[]),
        tool: ("Bash", json!({"command": ["bash", "-lc", "rm -rf build"]})),
        session: json!({"id": "019a-codex", "cwd": "/repo", "model": "gpt-5-codex"}),
        call_id: Some("call_Codex1"),
        advertised: &["deny"],
        assert_deny,
        assert_no_objection: assert_silent_no_objection,
        assert_ask: None,
        assert_modified: None,
        modify_operations: &[],
        assert_context: None,
        intercepted: vec![
            Intercepted {
                payload: (post_tool(), &[]),
                event: "tool.after",
                advertised: &["inject"],
                assert_block,
            },
            Intercepted {
                payload: (prompt(), &[]),
                event: "turn.start",
                advertised: &["deny", "inject", "flow"],
                assert_block: assert_prompt_blocked,
            },
            Intercepted {
                payload: (stop(), &[]),
                event: "turn.finish.before",
                advertised: &["flow"],
                assert_block: assert_stopped,
            },
            Intercepted {
                payload: (session_start(), &[]),
                event: "session.start",
                advertised: &["inject"],
                assert_block: assert_stopped,
            },
            Intercepted {
                payload: (
                    json!({"session_id": "019a-codex", "turn_id": "turn-8",
                        "transcript_path": null, "cwd": "/repo", "hook_event_name": "PreCompact",
                        "model": "gpt-5-codex", "trigger": "auto"}),
                    &[],
                ),
                event: "context.compact.before",
                advertised: &["deny"],
                assert_block: assert_stopped,
            },
        ],
        assert_blocked_before_the_event: assert_exit_2_block,
    }
}

fn assert_deny(ran: &Ran, reason: &str) {
    let output = json!({"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": reason});
    assert_json_and_exit_2(ran, json!({"hookSpecificOutput": output}), reason);
}

/// After a tool, and at a stop to go on, Codex blocks with `decision: block`.
fn assert_block(ran: &Ran, reason: &str) {
    assert_json(ran, 0, json!({"decision": "block", "reason": reason}));
}

/// Before a prompt the block goes on exit 2 too, with the reason on stderr: Codex would
/// take output it cannot read for text to add to the prompt.
fn assert_prompt_blocked(ran: &Ran, reason: &str) {
    assert_json_and_exit_2(ran, json!({"decision": "block", "reason": reason}), reason);
}

/// A Codex `PostToolUse` payload.
fn post_tool() -> serde_json::Value {
    json!({"session_id": "019a-codex", "cwd": "/repo", "model": "gpt-5-codex",
        "turn_id": "turn-8", "permission_mode": "default", "hook_event_name": "PostToolUse",
        "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "call_2",
        "tool_response": "a b"})
}

/// A Codex `UserPromptSubmit` payload.
fn prompt() -> serde_json::Value {
    json!({"session_id": "019a-codex", "cwd": "/repo", "model": "gpt-5-codex",
        "turn_id": "turn-8", "hook_event_name": "UserPromptSubmit",
        "prompt": "delete the branch"})
}

/// A Codex `SessionStart` payload.
fn session_start() -> serde_json::Value {
    json!({"session_id": "019a-codex", "cwd": "/repo", "hook_event_name": "SessionStart",
        "source": "startup", "permission_mode": "default", "model": "gpt-5-codex"})
}

/// A Codex `Stop` payload (codex-rs/hooks `events/stop.rs`), before any stop hook has
/// made the agent go on.
fn stop() -> serde_json::Value {
    json!({"session_id": "019a-codex", "turn_id": "turn-8", "transcript_path": null,
        "cwd": "/repo", "hook_event_name": "Stop", "model": "gpt-5-codex",
        "permission_mode": "default", "stop_hook_active": false,
        "last_assistant_message": "Done."})
}

ahp_tests::hook_contract_tests!(contract());

/// Context for the model reaches Codex as `hookSpecificOutput.additionalContext` (named
/// by its event, which Codex requires) after a tool, before a prompt and at a session
/// start; a flow stop before a prompt is `continue: false` (the prompt is dropped).
#[tokio::test]
async fn context_and_a_stop_reach_codex_in_its_own_words() {
    use ahp_tests::hook::answered_by_interceptor_of;
    let inject = ahp_tests::hook::inject_text("the repo is frozen");
    let cases = [
        ("tool.after", "PostToolUse", post_tool()),
        ("turn.start", "UserPromptSubmit", prompt()),
        ("session.start", "SessionStart", session_start()),
    ];
    for (event, native, payload) in cases {
        let sent =
            answered_by_interceptor_of(&[event], "fail-closed", "codex", &payload, inject.clone())
                .await;
        let output = json!({"hookEventName": native, "additionalContext": "the repo is frozen"});
        assert_json(&sent.ran, 0, json!({"hookSpecificOutput": output}));
    }
    let stop = ahp_tests::hook::flow_stop("the repo is frozen");
    let sent =
        answered_by_interceptor_of(&["turn.start"], "fail-closed", "codex", &prompt(), stop).await;
    let stopped = json!({"continue": false, "stopReason": "the repo is frozen"});
    assert_json_and_exit_2(&sent.ran, stopped, "the repo is frozen");
}

/// A subagent's stop is `turn.finish.before` too, its `session.agent` the subagent and
/// its `turn` Codex's, and a backend's `continue` there keeps the subagent working, once
/// per turn.
#[tokio::test]
async fn a_continue_at_subagent_stop_keeps_the_subagent_working_once_per_turn() {
    let mut payload = stop();
    payload["hook_event_name"] = json!("SubagentStop");
    payload["agent_id"] = json!("a-9");
    payload["agent_type"] = json!("worker");
    let event = ahp_tests::hook::continue_once_per_turn("codex", &payload, assert_block).await;
    assert_eq!(
        event["session"]["agent"],
        json!({"id": "a-9", "type": "worker"})
    );
    assert_eq!(event["turn"], json!({"id": "turn-8"}), "{event}");
}

/// A backend's `continue` at a stop makes Codex go on (`decision: block`, the
/// instruction its next prompt), once per turn.
#[tokio::test]
async fn a_continue_at_a_stop_keeps_the_agent_working_once_per_turn() {
    ahp_tests::hook::continue_once_per_turn("codex", &stop(), assert_block).await;
}

/// Pulling the component from a registry happens inside the hook's budget: a registry
/// that never answers cannot hold the tool call past it, and the answer is a denial.
#[tokio::test]
async fn a_registry_that_never_answers_is_bounded_by_the_budget() {
    let registry = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let component = format!("oci://{}/ahp/interceptor:0.1", registry.addr());
    let (payload, _) = contract().pre_tool;
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().expect("a temp dir");
    let audit = dir.path().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let args = [
        "--component",
        &component,
        "--budget-ms",
        "1000",
        "--audit",
        &audit_arg,
    ];
    let ran = ahp_tests::hook::run_unreachable("codex", &args, &payload).await;
    // The watchdog's denial, in Codex's terms: the event was known by then.
    assert_deny(&ran, ahp_tests::hook::FAILED_REASON);
    assert!(ran.log.contains("ran past its budget"), "{ran:?}");
    // Before the interceptor existed: the adapter's record, by the budget, of the event.
    let records = ahp_tests::hook::audit_records(&audit);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["decidedBy"], "budget-expired", "{records:?}");
    assert_eq!(records[0]["reason"], ahp_tests::hook::FAILED_REASON);
    assert_eq!(records[0]["event"]["call"], "call_Codex1", "{records:?}");
    assert_eq!(records[0]["event"]["type"], "tool.before", "{records:?}");
    // The budget and the watchdog's second (and a first compile of the component, on a
    // busy machine), not the registry client's 60 s read timeout.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{ran:?}"
    );
    assert!(registry.connections() > 0, "the pull was tried");
}

/// An OAuth client's secret in a FIFO nobody writes (a secret manager's) is not read
/// for the log's warnings: the call is decided as it would be without it (its backend,
/// unreachable, fails open: no objection) well within the budget, where the read held
/// it to the watchdog's denial whatever the subscription's policy.
#[tokio::test]
async fn a_client_secret_in_a_fifo_does_not_hold_the_call() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let fifo = never_read(dir.path(), "secret");
    let clients = dir.path().join("clients.json");
    let list = json!([{"issuer": "https://issuer.example", "clientId": "ahp",
        "clientSecretRef": format!("file:{}", fifo.display()), "scopes": []}]);
    std::fs::write(&clients, list.to_string()).expect("write the clients");
    let clients = clients.display().to_string();
    let (payload, _) = contract().pre_tool;
    let args = ["--oauth-clients", &clients, "--budget-ms", "20000"];
    let answered = std::time::Duration::from_secs(30);
    let running = ahp_tests::hook::run_unreachable("codex", &args, &payload);
    let ran = tokio::time::timeout(answered, running)
        .await
        .expect("ahp hook answers");
    assert_eq!((ran.code, ran.stdout.as_str()), (0, ""), "{ran:?}");
    assert!(!ran.log.contains("ran past its budget"), "{ran:?}");
}

/// A registration that never reads (a FIFO, a mount gone away) is bounded the same way.
#[tokio::test]
async fn a_registration_that_never_reads_is_bounded_by_the_budget() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = never_read(dir.path(), "registration.json");
    answered_by_the_watchdog(&registration, &[]).await;
}

/// A FIFO called `name` in `dir` that nobody writes: opening it for reading never returns.
fn never_read(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let fifo = dir.join(name);
    ahp_tests::support::make_fifo(&fifo);
    fifo
}

/// Runs `ahp hook codex` on the pre-tool payload with `registration` and `args` under a
/// 500 ms budget, on every CPU and on one (`taskset -c 0`, where the async runtime would
/// have a single worker): a step that blocks must not hold the watchdog, whose denial is
/// the answer.
async fn answered_by_the_watchdog(registration: &std::path::Path, args: &[&str]) {
    let (payload, _) = contract().pre_tool;
    let payload = payload.to_string();
    for cpus in [None, Some("0")] {
        let program = ahp_tests::support::ahp_binary().as_os_str();
        let mut command = match cpus {
            None => ahp_tests::hook::logged(program, ["hook", "codex"]),
            Some(cpu) => {
                let words = [
                    "-c".as_ref(),
                    cpu.as_ref(),
                    program,
                    "hook".as_ref(),
                    "codex".as_ref(),
                ];
                ahp_tests::hook::logged("taskset", words)
            }
        };
        command
            .arg("--registration")
            .arg(registration)
            .args(args)
            .args(["--budget-ms", "500"]);
        // The budget and the watchdog's second (and a first compile of the component, on
        // a busy machine); without a bound the open never returns.
        let answered = std::time::Duration::from_secs(30);
        let running = ahp_tests::hook::run_command(command, payload.as_bytes(), true);
        let ran = tokio::time::timeout(answered, running)
            .await
            .unwrap_or_else(|_| panic!("ahp hook answers within its budget on CPUs {cpus:?}"));
        assert_deny(&ran, ahp_tests::hook::FAILED_REASON);
        assert!(ran.log.contains("ran past its budget"), "{ran:?}");
    }
}

/// At `Stop` a call past its budget, or a command line that does not parse, stops the
/// agent (`continue: false`, the generic reason): exit 2 or a block there would keep it
/// working.
#[tokio::test]
async fn a_failure_at_a_stop_lets_the_agent_stop() {
    let payload = json!({"session_id": "019a-codex", "cwd": "/repo", "turn_id": "turn-9",
        "hook_event_name": "Stop", "stop_hook_active": false});
    let ran = ahp_tests::hook::run_past_budget("codex", &[], &payload).await;
    assert_stopped(&ran, ahp_tests::hook::FAILED_REASON);
    let ran = ahp_tests::hook::run_with_usage_error("codex", &[], "--no-such-flag", &payload).await;
    assert_stopped(&ran, ahp_tests::hook::FAILED_REASON);
    // A payload that cannot be read, at the `Stop` hook `hook install` writes (it names
    // the event): the stop's answer, not the block for an unknown event.
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = ahp_tests::hook::write_unreachable(dir.path());
    let args = ["--event", "Stop"];
    let ran = ahp_tests::hook::run_hook("codex", &registration, &args, b"{truncated").await;
    assert_stopped(&ran, ahp_tests::hook::FAILED_REASON);
    // And a command line that does not parse, with nothing on stdin.
    let args = ["--event", "Stop", "--no-such-flag"];
    let ran = ahp_tests::hook::run_hook("codex", &registration, &args, b"").await;
    assert_stopped(&ran, ahp_tests::hook::FAILED_REASON);
}

/// SIGHUP (the terminal or session that started Codex went away) while the backend holds
/// the request is SIGTERM's answer: the call is interrupted although its subscription
/// fails open, and Codex gets its denial from a process that exited on its own — killed
/// by the signal, Codex would read a crashed hook and run the tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_is_answered_with_a_denial() {
    a_signal_while_the_backend_holds_the_request_is_a_denial("HUP").await;
}

/// SIGQUIT (`Ctrl-\` at a terminal) likewise: its default action, a core dump, is a
/// crashed hook to Codex.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigquit_is_answered_with_a_denial() {
    a_signal_while_the_backend_holds_the_request_is_a_denial("QUIT").await;
}

/// Sends `signal` to `ahp hook codex` while a fail-open backend holds its request: the
/// answer is Codex's denial, from a process that exited on its own, and the audit record
/// says `interrupted`.
async fn a_signal_while_the_backend_holds_the_request_is_a_denial(signal: &str) {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let (_dir, registration, audit) = intercepting_fail_open(&backend, "tool.before");
    let (pre_tool, _) = contract().pre_tool;
    let (command, hook) = started_on(&pre_tool, &registration, &audit).await;
    assert!(
        backend
            .wait_for_requests(1, std::time::Duration::from_secs(30))
            .await,
        "the request reached the backend"
    );
    let output = ahp_tests::hook::answer_after_signal(hook, signal).await;
    let ran = Ran::of(&output, &command);
    assert_deny(&ran, "Policy evaluation was interrupted.");
    let record = std::fs::read_to_string(&audit).expect("the audit log");
    let record: serde_json::Value = serde_json::from_str(record.trim()).expect("one record");
    assert_eq!(record["decidedBy"], "interrupted", "SIG{signal}: {record}");
}

/// An audit log everybody can read is written to all the same, and said to be such in
/// `ahp hook`'s log as an error, which the default filter (errors only) keeps: the hook's
/// stderr is the harness's, no place for it.
#[tokio::test]
async fn an_audit_log_everybody_can_read_is_logged_as_an_error() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = ahp_tests::hook::write_unreachable(dir.path());
    let audit = dir.path().join("audit.jsonl");
    std::fs::write(&audit, "").expect("create the audit log");
    let permissions = std::fs::Permissions::from_mode(0o644);
    std::fs::set_permissions(&audit, permissions).expect("chmod");
    let audit_arg = audit.display().to_string();
    let args = ["--audit", audit_arg.as_str()];
    let mut command = ahp_tests::hook::hook_command("codex", &registration, &args);
    command.env_remove("AHP_LOG");
    let (payload, _) = contract().pre_tool;
    let stdin = payload.to_string();
    let ran = ahp_tests::hook::run_command(command, stdin.as_bytes(), true).await;
    assert_silent_no_objection(&ran);
    let said = "the audit log: its mode, 644, lets everybody read";
    let line = ran.log.lines().find(|line| line.contains(said));
    assert!(line.is_some_and(|line| line.contains("ERROR")), "{ran:?}");
    assert_eq!(ahp_tests::hook::audit_records(&audit).len(), 1, "{ran:?}");
}

/// A signal while the payload is still being read (the harness has not closed stdin) is
/// answered too: the signals are caught from the start of the hook call, so the process
/// answers the block for an event it does not know yet (exit 2, the generic reason),
/// never dies by the signal, which Codex would read as a crashed hook. Its audit record
/// says `interrupted`, of an event it knows nothing of.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_before_the_payload_is_read_is_answered_with_a_block() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = ahp_tests::hook::write_unreachable(dir.path());
    let audit = dir.path().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let args = ["--audit", audit_arg.as_str()];
    let mut command = ahp_tests::hook::hook_command("codex", &registration, &args);
    let mut hook = command.spawn().expect("start ahp hook");
    // Held open and never written: the hook waits in its read of stdin.
    let _stdin = hook.stdin.take().expect("stdin is piped");
    let pid = hook.id().expect("running");
    let reading = async {
        while !reads_stdin(pid) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), reading)
        .await
        .expect("ahp hook reads its stdin");
    let output = ahp_tests::hook::answer_after_signal(hook, "TERM").await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty(), "{output:?}");
    assert_eq!(stderr, format!("{}\n", ahp_tests::hook::FAILED_REASON));
    let records = ahp_tests::hook::audit_records(&audit);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["decision"], "deny", "{records:?}");
    assert_eq!(records[0]["decidedBy"], "interrupted", "{records:?}");
    let unknown = json!({"id": null, "type": null, "session": null, "call": null});
    assert_eq!(records[0]["event"], unknown, "{records:?}");
}

/// A signal after the backend raised no objection, while the call's record waits for the
/// audit file (another process is appending), overrides it: interruption overrides an
/// approval not yet answered. Codex gets its denial, and the one record says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_before_no_objection_is_answered_is_a_denial() {
    let (pre_tool, _) = contract().pre_tool;
    let records =
        signalled_before_the_answer("tool.before", &pre_tool, Behaviour::NoEffect, |ran| {
            assert_deny(ran, ahp_tests::hook::FAILED_REASON)
        })
        .await;
    assert_eq!(records[0]["event"]["call"], "call_Codex1", "{records:?}");
}

/// Likewise a signal after a backend's `continue` at a stop: the agent stops
/// (`continue: false`), never goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_before_a_continue_is_answered_stops_the_agent() {
    let go_on = ahp_tests::hook::flow_continue("go on");
    // Unsignalled, the same backend's continue is Codex's block: the agent goes on.
    let events = &["turn.finish.before"];
    let sent = ahp_tests::hook::answered_by_interceptor_of(
        events,
        "fail-open",
        "codex",
        &stop(),
        go_on.clone(),
    )
    .await;
    assert_block(&sent.ran, "go on");
    let records = signalled_before_the_answer(
        "turn.finish.before",
        &stop(),
        Behaviour::Effects(go_on),
        |ran| assert_stopped(ran, ahp_tests::hook::FAILED_REASON),
    )
    .await;
    assert_eq!(
        records[0]["event"]["type"], "turn.finish.before",
        "{records:?}"
    );
}

/// Runs `ahp hook codex` on `payload` with a fail-open interceptor of `event` that
/// answers `answer`, and sends SIGTERM while the call's record waits for the audit file
/// (another process holds its lock, and lets go soon after); asserts the answer with
/// `assert_answer` and that the one record is an interrupted denial, and returns it.
async fn signalled_before_the_answer(
    event: &str,
    payload: &serde_json::Value,
    answer: Behaviour,
    assert_answer: impl Fn(&Ran),
) -> Vec<serde_json::Value> {
    let backend = FaultBackend::start(vec![answer]).await;
    let (_dir, registration, audit) = intercepting_fail_open(&backend, event);
    let held = std::fs::File::create(&audit).expect("the audit file");
    held.lock().expect("its lock");
    let (command, hook) = started_on(payload, &registration, &audit).await;
    let pid = hook.id().expect("running");
    let waiting = async {
        while !blocked_in(pid, FLOCK, None) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), waiting)
        .await
        .expect("ahp hook waits for the audit file's lock");
    assert_eq!(backend.requests().len(), 1, "the backend was asked");
    // The other writer finishes once the hook has taken the signal (its log says so),
    // well within the hook's grace.
    ahp_tests::hook::send_signal(&hook, "TERM");
    let logged = || ahp_tests::hook::log_of(&command).contains("interrupted by a signal");
    let taken = ahp_tests::support::eventually(std::time::Duration::from_secs(10), logged);
    assert!(taken.await, "ahp hook logs the signal");
    held.unlock().expect("unlock");
    let output = ahp_tests::hook::answer_to_signal(hook, "TERM").await;
    assert_answer(&Ran::of(&output, &command));
    let records = ahp_tests::hook::audit_records(&audit);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["decision"], "deny", "{records:?}");
    assert_eq!(records[0]["decidedBy"], "interrupted", "{records:?}");
    records
}

/// A registration in a new directory (kept while held): `backend` intercepts `event`,
/// fail-open, 30 s; and where the call's audit goes in it.
fn intercepting_fail_open(
    backend: &FaultBackend,
    event: &str,
) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = ahp_tests::hook::write_intercepting(
        dir.path(),
        &backend.url(),
        "fail-open",
        &[event],
        30_000,
    );
    let audit = dir.path().join("audit.jsonl");
    (dir, registration, audit)
}

/// `ahp hook codex` with `registration`, auditing to `audit` (a 60 s budget), started on
/// `payload`, its stdin closed after it.
async fn started_on(
    payload: &serde_json::Value,
    registration: &std::path::Path,
    audit: &std::path::Path,
) -> (ahp_tests::hook::HookCommand, tokio::process::Child) {
    use tokio::io::AsyncWriteExt as _;
    let audit_arg = audit.display().to_string();
    let args = ["--audit", &audit_arg, "--budget-ms", "60000"];
    let mut command = ahp_tests::hook::hook_command("codex", registration, &args);
    let mut hook = command.spawn().expect("start ahp hook");
    let mut stdin = hook.stdin.take().expect("stdin is piped");
    let payload = payload.to_string();
    stdin.write_all(payload.as_bytes()).await.expect("write");
    drop(stdin);
    (command, hook)
}

/// `flock(2)`'s number: 73 on x86-64, 32 on aarch64.
const FLOCK: &str = if cfg!(target_arch = "aarch64") {
    "32"
} else {
    "73"
};

/// Whether a thread of process `pid` is blocked in `read(0, …)`: `read` is 0 on x86-64
/// and 63 on aarch64, its first argument the descriptor.
fn reads_stdin(pid: u32) -> bool {
    let read = if cfg!(target_arch = "aarch64") {
        "63"
    } else {
        "0"
    };
    blocked_in(pid, read, Some("0x0"))
}

/// Whether a thread of process `pid` is in system call number `call`, with `first` as
/// its first argument if given: the first two fields of `/proc/PID/task/TID/syscall`.
fn blocked_in(pid: u32, call: &str, first: Option<&str>) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("syscall")).is_ok_and(|line| {
            let mut fields = line.split_whitespace();
            fields.next() == Some(call) && first.is_none_or(|first| fields.next() == Some(first))
        })
    })
}

/// Codex names the session's permission mode: the session.start a backend sees
/// carries it, with no gap for it.
#[tokio::test]
async fn a_session_start_carries_the_permission_mode() {
    let payload = json!({"session_id": "019a-codex", "cwd": "/repo",
        "hook_event_name": "SessionStart", "source": "startup",
        "permission_mode": "on-request", "model": "gpt-5-codex"});
    let sent = ahp_tests::hook::sent_event("codex", &[], &payload, "hooks/observe").await;
    assert_eq!(sent.ran.code, 0, "{:?}", sent.ran);
    assert_eq!(sent.event["permissionMode"], "on-request", "{}", sent.event);
    assert_eq!(
        sent.event["gaps"],
        json!([{"path": "/harness/version", "reason": "the harness does not say"}])
    );
}

/// A compaction whose payload names no trigger AHP has a word for (none, or another) is
/// still asked about, as `auto` with a gap saying so: the event refused, Codex would be
/// told to stop the agent at every such compaction.
#[tokio::test]
async fn a_compaction_without_an_ahp_trigger_is_asked_about() {
    for trigger in [None, Some("user")] {
        let mut payload = json!({"session_id": "019a-codex", "turn_id": "turn-8",
            "transcript_path": null, "cwd": "/repo", "hook_event_name": "PreCompact",
            "model": "gpt-5-codex"});
        if let Some(trigger) = trigger {
            payload["trigger"] = json!(trigger);
        }
        let events = ["context.compact.before"];
        let sent = ahp_tests::hook::sent_to_interceptor_of(&events, "codex", &payload).await;
        assert_silent_no_objection(&sent.ran);
        let event = &sent.event;
        assert_eq!(event["trigger"], "auto", "{trigger:?}: {event}");
        let gaps = event["gaps"].as_array().expect("gaps");
        assert!(
            gaps.iter().any(|gap| gap["path"] == "/trigger"),
            "{trigger:?}: {event}"
        );
    }
}
