//! `ahp hook codex`: Codex CLI's Claude-shaped payloads (developers.openai.com/codex/hooks,
//! with `model` and `turn_id`); deny only — an `ask` would count as a failed hook and run
//! the tool, and `updatedInput` applies only with `allow`, a grant, so neither is
//! advertised.

use ahp_tests::hook::{
    assert_json, assert_silent_no_objection, tool_payloads, Contract, Intercepted, Ran,
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
        tool: (
            "Bash",
            json!({"command": ["bash", "-lc", "rm -rf build"]}),
            "019a-codex",
        ),
        call_id: Some("call_Codex1"),
        advertised: &["deny"],
        assert_deny,
        assert_no_objection: assert_silent_no_objection,
        assert_ask: None,
        assert_modified: None,
        assert_context: None,
        intercepted: vec![Intercepted {
            payload: (
                json!({"session_id": "019a-codex", "cwd": "/repo", "model": "gpt-5-codex",
                    "turn_id": "turn-8", "hook_event_name": "UserPromptSubmit",
                    "prompt": "delete the branch"}),
                &[],
            ),
            event: "turn.start",
            advertised: &["deny"],
            assert_block,
        }],
    }
}

fn assert_deny(ran: &Ran, reason: &str) {
    let output = json!({"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": reason});
    assert_json(ran, 0, json!({"hookSpecificOutput": output}));
}

/// Before a prompt Codex blocks with `decision: block`.
fn assert_block(ran: &Ran, reason: &str) {
    assert_json(ran, 0, json!({"decision": "block", "reason": reason}));
}

ahp_tests::hook_contract_tests!(contract());
