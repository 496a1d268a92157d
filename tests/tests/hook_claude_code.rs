//! `ahp hook claude-code`: Claude Code's PreToolUse/PostToolUse payloads (as documented at
//! code.claude.com/docs/en/hooks) through the real binary; answers in
//! `hookSpecificOutput`, never `permissionDecision: "allow"`.

use ahp_tests::hook::{assert_silent_no_objection, Contract, Intercepted, Ran};
use serde_json::json;

fn contract() -> Contract {
    let common = json!({
        "session_id": "abc123", "transcript_path": "/home/u/.claude/projects/p/abc123.jsonl",
        "cwd": "/repo", "permission_mode": "default",
        "tool_name": "Bash", "tool_input": {"command": "git push --force", "description": "Push"},
        "tool_use_id": "toolu_01ABC", "prompt_id": "p1", "some_future_field": {"x": 1}
    });
    let mut pre = common.clone();
    pre["hook_event_name"] = json!("PreToolUse");
    let mut post = common;
    post["hook_event_name"] = json!("PostToolUse");
    post["tool_response"] = json!({"stdout": "", "stderr": "", "interrupted": false});
    Contract {
        harness: "claude-code",
        pre_tool: (pre, &[]),
        post_tool: (post, &[]),
        tool: (
            "Bash",
            json!({"command": "git push --force", "description": "Push"}),
            "abc123",
        ),
        call_id: Some("toolu_01ABC"),
        advertised: &["deny", "ask", "message"],
        assert_deny,
        assert_no_objection: assert_silent_no_objection,
        assert_ask: Some(assert_ask),
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
                advertised: &["flow", "message"],
                assert_block,
            },
            Intercepted {
                payload: (
                    native("UserPromptSubmit", json!({"prompt": "deploy it"})),
                    &[],
                ),
                event: "turn.start",
                advertised: &["deny", "flow", "message"],
                assert_block,
            },
            Intercepted {
                payload: (native("Stop", json!({"stop_hook_active": false})), &[]),
                event: "turn.finish.before",
                advertised: &["flow"],
                assert_block,
            },
            Intercepted {
                payload: (native("SessionStart", json!({"source": "startup"})), &[]),
                event: "session.start",
                advertised: &["message"],
                assert_block: assert_stopped,
            },
        ],
    }
}

fn assert_deny(ran: &Ran, reason: &str) {
    assert_eq!(ran.code, 0, "JSON is read only on exit 0: {ran:?}");
    assert_eq!(
        ran.json(),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "deny", "permissionDecisionReason": reason}}),
        "{ran:?}"
    );
}

fn assert_ask(ran: &Ran) {
    assert_eq!(ran.code, 0, "{ran:?}");
    let output = &ran.json()["hookSpecificOutput"];
    assert_eq!(output["permissionDecision"], "ask", "{ran:?}");
    assert_eq!(output["hookEventName"], "PreToolUse", "{ran:?}");
}

/// A Claude Code payload of `event` with the common fields and `extra`.
fn native(event: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut payload = json!({"session_id": "abc123", "cwd": "/repo",
        "transcript_path": "/t.jsonl", "hook_event_name": event});
    for (key, value) in extra.as_object().expect("an object") {
        payload[key] = value.clone();
    }
    payload
}

/// After a tool, before a prompt or a stop Claude Code blocks with `decision: block`.
fn assert_block(ran: &Ran, reason: &str) {
    assert_eq!(ran.code, 0, "JSON is read only on exit 0: {ran:?}");
    assert_eq!(
        ran.json(),
        json!({"decision": "block", "reason": reason}),
        "{ran:?}"
    );
}

/// At SessionStart the only block is stopping the agent.
fn assert_stopped(ran: &Ran, reason: &str) {
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(
        ran.json(),
        json!({"continue": false, "stopReason": reason}),
        "{ran:?}"
    );
}

ahp_tests::hook_contract_tests!(contract());
