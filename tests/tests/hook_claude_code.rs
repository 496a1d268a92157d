//! `ahp hook claude-code`: Claude Code's PreToolUse/PostToolUse/PostToolUseFailure
//! payloads (as documented at code.claude.com/docs/en/hooks) through the real binary;
//! answers in `hookSpecificOutput`, never `permissionDecision: "allow"`.

use ahp_tests::hook::{
    assert_exit_2_block, assert_json, assert_silent_no_objection, assert_stopped, tool_payloads,
    Contract, Intercepted, Ran, ASK_REASON, MODIFIED_REASON,
};
use serde_json::{json, Value};

fn contract() -> Contract {
    let common = json!({
        "session_id": "abc123", "transcript_path": "/home/u/.claude/projects/p/abc123.jsonl",
        "cwd": "/repo", "permission_mode": "default",
        "tool_name": "Bash", "tool_input": {"command": "git push --force", "description": "Push"},
        "tool_use_id": "toolu_01ABC", "prompt_id": "p1", "some_future_field": {"x": 1},
        "agent_id": "agent-7", "agent_type": "code-reviewer"
    });
    let (pre, post) = tool_payloads(
        common,
        "hook_event_name",
        ("PreToolUse", "PostToolUse"),
        (
            "tool_response",
            json!({"stdout": "", "stderr": "", "interrupted": false}),
        ),
    );
    Contract {
        harness: "claude-code",
        pre_tool: (pre, &[]),
        post_tool: (post, &[]),
        tool: (
            "Bash",
            json!({"command": "git push --force", "description": "Push"}),
        ),
        session: json!({"id": "abc123", "cwd": "/repo",
            "agent": {"id": "agent-7", "type": "code-reviewer"}}),
        call_id: Some("toolu_01ABC"),
        advertised: &["deny", "ask", "modify", "inject", "message"],
        assert_deny,
        assert_no_objection: assert_silent_no_objection,
        assert_ask: Some(assert_ask),
        assert_modified: Some(assert_modified),
        modify_operations: &["merge", "replace"],
        assert_context: Some(assert_context),
        intercepted: vec![
            Intercepted {
                payload: (
                    native(
                        "PostToolUse",
                        json!({"tool_name": "Bash",
                    "tool_input": {"command": "ls"}, "tool_use_id": "toolu_02",
                    "tool_response": {"stdout": "a"}}),
                    ),
                    &[],
                ),
                event: "tool.after",
                advertised: &["inject", "flow", "message"],
                assert_block,
            },
            Intercepted {
                payload: (
                    native("UserPromptSubmit", json!({"prompt": "deploy it"})),
                    &[],
                ),
                event: "turn.start",
                advertised: &["deny", "inject", "flow", "message"],
                assert_block,
            },
            Intercepted {
                payload: (native("Stop", json!({"stop_hook_active": false})), &[]),
                event: "turn.finish.before",
                advertised: &["flow"],
                assert_block: assert_stopped,
            },
            Intercepted {
                payload: (native("SessionStart", json!({"source": "startup"})), &[]),
                event: "session.start",
                advertised: &["inject", "message"],
                assert_block: assert_stopped,
            },
        ],
        assert_blocked_before_the_event: assert_exit_2_block,
    }
}

/// `output` as PreToolUse's `hookSpecificOutput`, on exit 0 (JSON is read only then).
fn assert_pre_tool(ran: &Ran, mut output: Value) {
    output["hookEventName"] = json!("PreToolUse");
    assert_json(ran, 0, json!({"hookSpecificOutput": output}));
}

/// Claude Code's JSON denial, and exit 2 with the reason on stderr as well: Copilot CLI
/// and Cursor run Claude Code's hooks too and may read only the exit code (Claude Code
/// ignores stdout on exit 2 and shows the reason).
fn assert_deny(ran: &Ran, reason: &str) {
    let output = json!({"hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": reason});
    assert_json(ran, 2, json!({"hookSpecificOutput": output}));
    assert_eq!(ran.stderr.trim_end(), reason, "{ran:?}");
}

/// The ask alone, with the generic reason: nothing else, the input never written back.
fn assert_ask(ran: &Ran) {
    assert_pre_tool(
        ran,
        json!({"permissionDecision": "ask", "permissionDecisionReason": ASK_REASON}),
    );
}

/// The changed input in `updatedInput`, with `ask` (never `allow`, a grant): the user
/// approves the call that will really run.
fn assert_modified(ran: &Ran, input: &Value) {
    assert_pre_tool(
        ran,
        json!({"permissionDecision": "ask", "permissionDecisionReason": MODIFIED_REASON,
            "updatedInput": input}),
    );
}

/// Context for the model in `additionalContext`, with no decision.
fn assert_context(ran: &Ran, text: &str) {
    assert_pre_tool(ran, json!({"additionalContext": text}));
}

/// A Claude Code payload of `event` with the common fields and `extra`.
fn native(event: &str, extra: Value) -> Value {
    let mut payload = json!({"session_id": "abc123", "cwd": "/repo",
        "transcript_path": "/t.jsonl", "hook_event_name": event});
    for (key, value) in extra.as_object().expect("an object") {
        payload[key] = value.clone();
    }
    payload
}

/// After a tool, before a prompt or a stop Claude Code blocks with `decision: block`.
fn assert_block(ran: &Ran, reason: &str) {
    assert_json(ran, 0, json!({"decision": "block", "reason": reason}));
}

ahp_tests::hook_contract_tests!(contract());

/// An MCP tool (`mcp__server__tool`) gets an inferred MCP descriptor whose connection
/// names its location only as gaps: a valid event, which reaches the interceptor (here
/// failing open at a backend that is down: no objection, where an invalid event would
/// be a denial).
#[tokio::test]
async fn an_mcp_tool_reaches_the_interceptor() {
    let payload = json!({"session_id": "abc123", "cwd": "/repo", "hook_event_name": "PreToolUse",
        "tool_name": "mcp__github__create_issue", "tool_input": {"title": "t"},
        "tool_use_id": "toolu_mcp"});
    let ran = ahp_tests::hook::run_unreachable("claude-code", &[], &payload).await;
    assert_silent_no_objection(&ran);
}

/// A registration is read up to the payload's bound: `/dev/zero` in its place is refused
/// at once, naming it (in the operator's log), where reading on ended only when memory or
/// the watchdog did. The call is denied with the generic reason.
#[tokio::test]
async fn a_registration_past_the_bound_is_refused_naming_it() {
    let (payload, _) = contract().pre_tool;
    let command = ahp_tests::hook::hook_command("claude-code", "/dev/zero".as_ref(), &[]);
    let ran = ahp_tests::hook::run_command(command, payload.to_string().as_bytes(), true).await;
    assert_deny(&ran, ahp_tests::hook::FAILED_REASON);
    assert!(
        ran.log
            .contains("--registration /dev/zero: larger than 16 MiB"),
        "{ran:?}"
    );
}

/// A registration the component refuses denies the call with the generic reason, and
/// the operator's log names each of its problems once.
#[tokio::test]
async fn a_refused_registration_is_logged_naming_each_problem_once() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = ahp_tests::hook::write_unreachable(dir.path());
    let mut registration: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("JSON");
    registration["protocolVersion"] = json!("1999");
    registration["hooks"][0]["subscriptions"][0]["timeoutMs"] = json!(0);
    std::fs::write(&path, registration.to_string()).expect("write");
    let (payload, _) = contract().pre_tool;
    let ran =
        ahp_tests::hook::run_hook("claude-code", &path, &[], payload.to_string().as_bytes()).await;
    assert_deny(&ran, ahp_tests::hook::FAILED_REASON);
    let line = ran
        .log
        .lines()
        .find(|line| line.contains("invalid registration"));
    let line = line.unwrap_or_else(|| panic!("{ran:?}"));
    for problem in ["/protocolVersion: ", "/hooks/0/subscriptions/0/timeoutMs: "] {
        assert_eq!(line.matches(problem).count(), 1, "{problem}: {line}");
    }
}

/// A payload past the bound is refused as too large, not read cut off at the bound and
/// then reported as broken JSON; no event is known, so the answer is exit 2.
#[tokio::test]
async fn a_payload_past_the_bound_is_refused_as_too_large() {
    use tokio::io::AsyncWriteExt as _;
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = ahp_tests::hook::write_unreachable(dir.path());
    let mut command = ahp_tests::hook::hook_command("claude-code", &registration, &[]);
    let mut child = command.spawn().expect("start ahp hook");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // Whitespace, then more: the hook stops reading at the bound, so the write may fail.
    let writing = tokio::spawn(async move {
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..17 {
            if stdin.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = stdin.write_all(b"{}").await;
    });
    let output = child.wait_with_output().await.expect("ahp hook finishes");
    writing.abort();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let log = ahp_tests::hook::log_of(&command);
    assert!(
        log.contains("the payload on stdin: larger than 16 MiB"),
        "{log}"
    );
}

/// Runs `ahp hook claude-code` with `stdin` against a backend that is down under
/// fail-open (a call that reached the interceptor would be no objection), with an
/// operator's log file; returns the run and the log (empty if none was written).
async fn run_logged(stdin: &[u8]) -> (Ran, String) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = ahp_tests::hook::write_unreachable(dir.path());
    let log = dir.path().join("ahp.log");
    let mut command = ahp_tests::hook::hook_command("claude-code", &registration, &[]);
    command.env("AHP_LOG_FILE", &log);
    let ran = ahp_tests::hook::run_command(command, stdin, true).await;
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    (ran, logged)
}

/// Claude Code's block when no event is known: exit 2, stdout empty (ignored on exit 2)
/// and stderr, which the model reads, the generic reason alone; `detail` is for the
/// operator, in the log.
fn assert_blocked_before_the_event((ran, logged): &(Ran, String), detail: &str) {
    assert_exit_2_block(ran, ahp_tests::hook::FAILED_REASON);
    assert!(logged.contains(detail), "{ran:?}, log: {logged}");
}

/// A hook event the adapter does not map (`Notification`, which Claude Code sends but
/// the snippet never installs) is refused before the interceptor: Claude Code's block,
/// naming the event.
#[tokio::test]
async fn an_unmapped_hook_event_is_blocked_naming_it() {
    let payload = native(
        "Notification",
        json!({"message": "Claude needs your input"}),
    );
    let ran = run_logged(payload.to_string().as_bytes()).await;
    assert_blocked_before_the_event(&ran, "claude-code has no mapped hook event Notification");
}

/// The log is never written through a symbolic link at `AHP_LOG_FILE`, nor to a file
/// another user owns: its lines carry text the payload chose (here the event's name), and
/// a link planted at a shared path would have them appended to a file of the user's, a
/// shell's startup file say. The call is answered all the same; a plain file of the
/// user's at the path gets the line.
#[tokio::test]
async fn the_log_is_never_written_through_a_link_or_to_another_users_file() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = ahp_tests::hook::write_unreachable(dir.path());
    let payload = native("Notification", json!({"message": "hello"})).to_string();
    let log = dir.path().join("ahp.log");
    let logged_to = |path: std::path::PathBuf| {
        let mut command = ahp_tests::hook::hook_command("claude-code", &registration, &[]);
        command.env("AHP_LOG_FILE", path);
        ahp_tests::hook::run_command(command, payload.as_bytes(), true)
    };
    let victim = dir.path().join("bashrc");
    std::fs::write(&victim, "keep\n").expect("write the victim");
    std::os::unix::fs::symlink(&victim, &log).expect("plant a link");
    let ran = logged_to(log.clone()).await;
    assert_exit_2_block(&ran, ahp_tests::hook::FAILED_REASON);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
    std::fs::remove_file(&log).expect("remove the link");
    let ran = logged_to(log.clone()).await;
    assert_exit_2_block(&ran, ahp_tests::hook::FAILED_REASON);
    let written = std::fs::read_to_string(&log).expect("the log");
    assert!(
        written.contains("no mapped hook event Notification"),
        "{written}"
    );
    // SAFETY: geteuid touches no memory of ours.
    if unsafe { libc::geteuid() } == 0 {
        // As root the test can give the file away: another user's is not written.
        std::os::unix::fs::chown(&log, Some(65534), Some(65534)).expect("chown");
        let before = std::fs::metadata(&log).unwrap().size();
        let ran = logged_to(log.clone()).await;
        assert_exit_2_block(&ran, ahp_tests::hook::FAILED_REASON);
        assert_eq!(std::fs::metadata(&log).unwrap().size(), before);
    }
}

/// A payload that is not UTF-8 (a 0xff byte inside a string) is not JSON: Claude Code's
/// block, the error naming where the bad byte is (line 1, column 15).
#[tokio::test]
async fn a_payload_with_invalid_utf8_is_blocked_naming_the_position() {
    let ran = run_logged(b"{\"tool_name\":\"\xff\"}").await;
    assert_blocked_before_the_event(
        &ran,
        "the payload is not JSON: invalid unicode code point at line 1 column 15",
    );
}

/// In `auto` permission mode Claude Code's classifier decides in the user's place, and a
/// hook's `ask` has been reported to let the tool run unasked: `ask` is not offered
/// there, as in every other mode it is, and a backend's `ask` anyway is an unadvertised
/// effect, settled by its policy (a denial, fail-closed), never an ask nobody sees.
#[tokio::test]
async fn ask_is_not_offered_where_the_permission_mode_asks_nobody() {
    let payload = |mode: &str| {
        native(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_use_id": "toolu_a", "permission_mode": mode,
                "tool_input": {"command": "git push"}}),
        )
    };
    for (mode, offered) in [("default", true), ("acceptEdits", true), ("auto", false)] {
        let sent = ahp_tests::hook::sent_to_interceptor_of(
            &["tool.before"],
            "claude-code",
            &payload(mode),
        )
        .await;
        let request: Value = serde_json::from_str(&sent.body).expect("a JSON request");
        let effects = &request["params"]["capabilities"]["effects"];
        assert!(
            effects
                .as_array()
                .is_some_and(|e| e.contains(&json!("deny"))),
            "{mode}: {effects}"
        );
        assert_eq!(
            effects.as_array().unwrap().contains(&json!("ask")),
            offered,
            "{mode}: {effects}"
        );
    }
    let asked = ahp_tests::hook::answered_by_interceptor_of(
        &["tool.before"],
        "fail-closed",
        "claude-code",
        &payload("auto"),
        json!([{"type": "ask"}]),
    )
    .await;
    assert_deny(&asked.ran, ahp_tests::support::SYNTHETIC_REASON);
}

/// A tool input's numbers reach the backend as Claude Code wrote them: `-0` an integer
/// (serde_json reads it as the float -0.0, which a Go backend's integer refuses), the
/// largest integers exactly.
#[tokio::test]
async fn a_tool_input_s_numbers_reach_the_backend_as_written() {
    let payload = native(
        "PreToolUse",
        json!({"tool_name": "Read", "tool_use_id": "toolu_n",
            "tool_input": {"offset": "MINUS_ZERO", "limit": u64::MAX, "from": i64::MIN}}),
    );
    let stdin = payload.to_string().replace(r#""MINUS_ZERO""#, "-0");
    let sent =
        ahp_tests::hook::sent_text("claude-code", &[], stdin.as_bytes(), "hooks/intercept").await;
    assert_silent_no_objection(&sent.ran);
    let input = &sent.event["tool"]["input"];
    assert_eq!(input["offset"].as_u64(), Some(0), "{}", sent.body);
    assert_eq!(input["limit"].as_u64(), Some(u64::MAX), "{}", sent.body);
    assert_eq!(input["from"].as_i64(), Some(i64::MIN), "{}", sent.body);
}

/// A whole number past 64 bits in a tool input would reach a backend as another number
/// (serde_json reads it as the nearest double) than the tool gets: Claude Code's denial
/// of the call, the log naming where the number is, the record naming the call.
#[tokio::test]
async fn a_whole_number_past_64_bits_is_denied_naming_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = ahp_tests::hook::write_unreachable(dir.path());
    let payload = native(
        "PreToolUse",
        json!({"tool_name": "mcp__bank__pay", "tool_use_id": "toolu_n",
            "tool_input": {"account": "ACCOUNT"}}),
    );
    let stdin = payload
        .to_string()
        .replace(r#""ACCOUNT""#, "123456789012345678901234567890");
    let audit = dir.path().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let args = ["--audit", audit_arg.as_str()];
    let ran =
        ahp_tests::hook::run_hook("claude-code", &registration, &args, stdin.as_bytes()).await;
    assert_deny(&ran, ahp_tests::hook::FAILED_REASON);
    let logged = r#"the payload holds a whole number past 64 bits at "/tool_input/account", which a backend would read as another number"#;
    assert!(ran.log.contains(logged), "{ran:?}");
    let records = ahp_tests::hook::audit_records(&audit);
    assert_eq!(records.len(), 1, "{records:?}");
    let event = &records[0]["event"];
    assert_eq!(
        (&event["type"], &event["session"], &event["call"]),
        (&json!("tool.before"), &json!("abc123"), &json!("toolu_n")),
        "{records:?}"
    );
}

/// Claude Code names the session's permission mode and, at a session start, the model:
/// the session.start a backend sees carries both, with no gap for the mode; its version
/// Claude Code does not name, so that is "unknown" with a gap. The component checks the
/// event before anything is sent.
#[tokio::test]
async fn a_session_start_carries_the_permission_mode_and_the_model() {
    let payload = native(
        "SessionStart",
        json!({"source": "startup", "permission_mode": "plan", "model": "claude-sonnet-4-6"}),
    );
    let sent = ahp_tests::hook::sent_event("claude-code", &[], &payload, "hooks/observe").await;
    assert_eq!(sent.ran.code, 0, "{:?}", sent.ran);
    let event = &sent.event;
    assert_eq!(event["type"], "session.start", "{event}");
    assert_eq!(event["permissionMode"], "plan", "{event}");
    assert_eq!(event["session"]["model"], "claude-sonnet-4-6", "{event}");
    assert_eq!(
        event["harness"],
        json!({"name": "claude-code", "version": "unknown"})
    );
    assert_eq!(
        event["gaps"],
        json!([{"path": "/harness/version", "reason": "the harness does not say"}])
    );
}

/// The `Stop` hook copied under an event the adapter does not map (`Notification`): the
/// failure is answered as at the stop it was installed at (`--event Stop`), so the agent
/// stops; exit 2, the block for an unknown event, would keep it working at a stop. A
/// hook that names no event gets that block.
#[tokio::test]
async fn a_stop_hook_copied_to_an_unmapped_event_stops_the_agent() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = ahp_tests::hook::write_unreachable(dir.path());
    let payload = native("Notification", json!({"message": "Claude is waiting"}));
    let payload = payload.to_string();
    let audit = dir.path().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let flagged = ["--event", "Stop", "--audit", &audit_arg];
    let ran =
        ahp_tests::hook::run_hook("claude-code", &registration, &flagged, payload.as_bytes()).await;
    assert_stopped(&ran, ahp_tests::hook::FAILED_REASON);
    assert!(ran.log.contains("the command line says Stop"), "{ran:?}");
    // Its record names what the payload does: the stop's type, its session.
    let records = ahp_tests::hook::audit_records(&audit);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["decision"], "deny", "{records:?}");
    assert_eq!(
        records[0]["event"]["type"], "turn.finish.before",
        "{records:?}"
    );
    assert_eq!(records[0]["event"]["session"], "abc123", "{records:?}");
    let ran =
        ahp_tests::hook::run_hook("claude-code", &registration, &[], payload.as_bytes()).await;
    assert_exit_2_block(&ran, ahp_tests::hook::FAILED_REASON);
}

/// A subagent's stop is `turn.finish.before` too, its `session.agent` the subagent, and
/// a backend's `continue` there keeps the subagent working, once per turn.
#[tokio::test]
async fn a_continue_at_subagent_stop_keeps_the_subagent_working_once_per_turn() {
    let payload = native(
        "SubagentStop",
        json!({"stop_hook_active": false, "agent_id": "a-1", "agent_type": "reviewer",
            "last_assistant_message": "Reviewed."}),
    );
    let event =
        ahp_tests::hook::continue_once_per_turn("claude-code", &payload, assert_block).await;
    assert_eq!(
        event["session"]["agent"],
        json!({"id": "a-1", "type": "reviewer"})
    );
}

/// A backend's `continue` at `Stop` keeps Claude Code working (`decision: block`, the
/// instruction as its reason), once per turn.
#[tokio::test]
async fn a_continue_at_stop_keeps_the_agent_working_once_per_turn() {
    let payload = native(
        "Stop",
        json!({"stop_hook_active": false, "last_assistant_message": "Done."}),
    );
    ahp_tests::hook::continue_once_per_turn("claude-code", &payload, assert_block).await;
}

/// `--omit-session agent` leaves the subagent Claude Code names out of the event.
#[tokio::test]
async fn an_omitted_agent_reaches_no_backend() {
    let (payload, _) = contract().pre_tool;
    let omit = ["--omit-session", "agent"];
    let sent = ahp_tests::hook::sent_event("claude-code", &omit, &payload, "hooks/intercept").await;
    assert_silent_no_objection(&sent.ran);
    assert_eq!(
        sent.event["session"],
        json!({"id": "abc123", "cwd": "/repo"})
    );
}

/// An audit file at the process's file-size limit (`ulimit -f`): the append fails with
/// EFBIG instead of SIGXFSZ ending the hook before it answers (a killed hook is one the
/// harness reads as no objection, by accident): the call is answered as it settled, the
/// failed append is logged, and the record cut short is cut back off.
#[tokio::test]
async fn a_file_size_limit_does_not_kill_the_hook() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = ahp_tests::hook::write_unreachable(dir.path());
    let audit = dir.path().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    // Earlier records up to 64 bytes short of the limit: the next one does not fit.
    let earlier = "{}\n".repeat(1 << 18).into_bytes();
    std::fs::write(&audit, &earlier).expect("earlier records");
    let limit = earlier.len() as u64 + 64;
    let (payload, args) = contract().pre_tool;
    let mut command = ahp_tests::hook::hook_command(
        "claude-code",
        &registration,
        &[args, &["--audit", &audit_arg]].concat(),
    );
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(ahp_tests::support::cap_file_size(limit));
    }
    let ran = ahp_tests::hook::run_command(command, payload.to_string().as_bytes(), true).await;
    // The backend is down and its subscription fails open: no objection.
    assert_silent_no_objection(&ran);
    assert!(ran.log.contains("audit record"), "{ran:?}");
    let written = std::fs::read(&audit).expect("the audit file");
    assert!(written == earlier, "a torn record left behind");
}

/// An observer that fails at an event that is only observed (`SessionEnd`) has no audit
/// record to hold its result (nothing was decided): it is in the operator's log, naming
/// the backend and the failure class (digest §15, observer delivery failures), and the
/// answer is no objection.
#[tokio::test]
async fn an_observer_failure_at_an_observed_event_is_logged() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let refused = ahp_tests::fault_backend::refused_url();
    let path = ahp_tests::hook::write_observed(dir.path(), &refused, "fail-closed", &refused);
    let mut registration: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("JSON");
    registration["hooks"][1]["subscriptions"][0]["events"] = json!(["session.end"]);
    std::fs::write(&path, registration.to_string()).expect("write");
    let payload = native("SessionEnd", json!({"reason": "exit"}));
    // The log at its default level (AHP_LOG unset): the failure is shown there.
    let mut command = ahp_tests::hook::hook_command("claude-code", &path, &[]);
    command.env_remove("AHP_LOG");
    let ran = ahp_tests::hook::run_command(command, payload.to_string().as_bytes(), true).await;
    assert_silent_no_objection(&ran);
    for logged in ["com.example.observer", "connection-refused"] {
        assert!(ran.log.contains(logged), "{logged}: {ran:?}");
    }
}

/// What Claude Code says of the failed call in [`failed_call`]: a marker no backend may
/// see without `includeNative`.
const FAILURE_WORDS: &str = "Exit code 128: fatal: secret-marker-7f3a rejected";

/// A `PostToolUseFailure` payload, which Claude Code sends after a tool call that failed
/// or was interrupted (instead of `PostToolUse`): the call `toolu_02`, `git push`, with
/// `extra` (its `error`, `is_interrupt`).
fn failed_call(extra: Value) -> Value {
    let mut payload = native(
        "PostToolUseFailure",
        json!({"permission_mode": "default", "tool_name": "Bash",
            "tool_input": {"command": "git push"}, "tool_use_id": "toolu_02"}),
    );
    for (key, value) in extra.as_object().expect("an object") {
        payload[key] = value.clone();
    }
    payload
}

/// Asserts `event` is the tool.after of [`failed_call`]'s call: its call id the
/// `tool_use_id`, its tool's name and input, run (`executed`), and ended as `outcome`.
fn assert_failed_call(event: &Value, outcome: &str) {
    assert_eq!(event["type"], "tool.after", "{event}");
    assert_eq!(event["call"], json!({"id": "toolu_02"}), "{event}");
    assert_eq!(event["tool"]["name"], "Bash", "{event}");
    assert_eq!(
        event["tool"]["input"],
        json!({"command": "git push"}),
        "{event}"
    );
    assert_eq!(event["outcome"], outcome, "{event}");
    assert_eq!(event["execution"], json!({"status": "executed"}), "{event}");
}

/// A tool call that failed reaches tool.after's observers and interceptors as that
/// call's `tool.after` with `outcome: "error"` and the generic error (Claude Code's words
/// stay in `native`, sent to no backend without `includeNative`); an interceptor is
/// offered what it is after any tool (inject, flow stop, message).
#[tokio::test]
async fn a_failed_call_is_its_tool_after_with_an_error() {
    let payload = failed_call(json!({"error": FAILURE_WORDS, "is_interrupt": false}));
    let observed = ahp_tests::hook::sent_event("claude-code", &[], &payload, "hooks/observe").await;
    let intercepted =
        ahp_tests::hook::sent_to_interceptor_of(&["tool.after"], "claude-code", &payload).await;
    for sent in [&observed, &intercepted] {
        assert_silent_no_objection(&sent.ran);
        assert_failed_call(&sent.event, "error");
        let generic = json!({"class": "operation", "message": "The tool call failed."});
        assert_eq!(sent.event["error"], generic, "{}", sent.event);
        assert!(!sent.body.contains("secret-marker-7f3a"), "{}", sent.body);
    }
    let body: Value = serde_json::from_str(&intercepted.body).expect("a JSON request");
    let effects = &body["params"]["capabilities"]["effects"];
    assert_eq!(effects, &json!(["inject", "flow", "message"]), "{body}");
}

/// With `includeNative` the words Claude Code gave for the failure reach the backend, in
/// `native` (the whole payload, named as the event it came from).
#[tokio::test]
async fn a_failed_call_s_error_is_in_native() {
    use ahp_tests::fault_backend::{Behaviour, FaultBackend};
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = ahp_tests::hook::write_intercepting(
        dir.path(),
        &backend.url(),
        "fail-closed",
        &["tool.after"],
        300,
    );
    let mut registration: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("JSON");
    let subscription = &mut registration["hooks"][0]["subscriptions"][0];
    subscription["includeNative"] = json!(true);
    subscription["content"] = json!({"default": "body"});
    std::fs::write(&path, registration.to_string()).expect("write");
    let payload = failed_call(json!({"error": FAILURE_WORDS}));
    let stdin = payload.to_string();
    let ran = ahp_tests::hook::run_hook("claude-code", &path, &[], stdin.as_bytes()).await;
    assert_silent_no_objection(&ran);
    let requests = backend.requests_with_method("hooks/intercept");
    assert_eq!(requests.len(), 1, "{ran:?}");
    let event = &requests[0].json()["params"]["event"];
    assert_failed_call(event, "error");
    assert_eq!(
        event["native"]["eventName"], "PostToolUseFailure",
        "{event}"
    );
    assert_eq!(
        event["native"]["payload"]["error"], FAILURE_WORDS,
        "{event}"
    );
}

/// A call the user interrupted (`is_interrupt: true`) is its `tool.after` with `outcome:
/// "cancelled"`, which carries no error; it had started, so it was executed.
#[tokio::test]
async fn an_interrupted_call_is_its_tool_after_cancelled() {
    let payload = failed_call(json!({"error": "Interrupted by user", "is_interrupt": true}));
    let sent = ahp_tests::hook::sent_event("claude-code", &[], &payload, "hooks/observe").await;
    assert_silent_no_objection(&sent.ran);
    assert_failed_call(&sent.event, "cancelled");
    assert!(sent.event.get("error").is_none(), "{}", sent.event);
}

/// Injected context after a failed call is Claude Code's `additionalContext` under
/// `PostToolUseFailure`, given to Claude with the error; a flow stop is `continue:
/// false`. A deny is not offered there (Claude Code documents no block after a failed
/// call): one is an unadvertised effect, which a fail-closed subscription settles as a
/// denial, and a denial there stops the agent.
#[tokio::test]
async fn after_a_failed_call_context_is_given_and_a_denial_stops_the_agent() {
    use ahp_tests::hook::{answered_by_interceptor_of, flow_stop, inject_text};
    let payload = failed_call(json!({"error": FAILURE_WORDS}));
    let answered = |effects| {
        answered_by_interceptor_of(
            &["tool.after"],
            "fail-closed",
            "claude-code",
            &payload,
            effects,
        )
    };
    let hint = "Pull first: the remote has commits you do not.";
    let injected = answered(inject_text(hint)).await;
    let output = json!({"hookEventName": "PostToolUseFailure", "additionalContext": hint});
    assert_json(&injected.ran, 0, json!({"hookSpecificOutput": output}));
    let stopped = answered(flow_stop("enough for today")).await;
    assert_stopped(&stopped.ran, "enough for today");
    let denied = answered(json!([{"type": "deny", "reason": "no"}])).await;
    assert_stopped(&denied.ran, ahp_tests::support::SYNTHETIC_REASON);
}

/// A failed call's `error` only informs a backend: a payload without it (or with
/// `is_interrupt` of another shape) is still a failed call's `tool.after`, the call
/// decided as any other. A payload without what the event needs (`tool_input`) is the
/// adapter's failure, which there stops the agent.
#[tokio::test]
async fn a_failed_call_without_its_error_is_still_a_failure() {
    let payload = failed_call(json!({"is_interrupt": "no"}));
    let sent =
        ahp_tests::hook::sent_to_interceptor_of(&["tool.after"], "claude-code", &payload).await;
    assert_silent_no_objection(&sent.ran);
    assert_failed_call(&sent.event, "error");
    let mut unreadable = failed_call(json!({"error": FAILURE_WORDS}));
    unreadable
        .as_object_mut()
        .expect("a payload object")
        .remove("tool_input");
    let ran = ahp_tests::hook::run_unreachable("claude-code", &[], &unreadable).await;
    assert_stopped(&ran, ahp_tests::hook::FAILED_REASON);
    assert!(ran.log.contains("tool_input is required"), "{ran:?}");
}
