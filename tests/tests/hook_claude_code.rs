//! `ahp hook claude-code`: Claude Code's PreToolUse/PostToolUse payloads (as documented at
//! code.claude.com/docs/en/hooks) through the real binary; answers in
//! `hookSpecificOutput`, never `permissionDecision: "allow"`.

use ahp_tests::hook::{Contract, Ran};
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
        assert_no_objection,
        assert_ask: Some(assert_ask),
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

fn assert_no_objection(ran: &Ran) {
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (0, ""),
        "no answer, no grant: {ran:?}"
    );
}

fn assert_ask(ran: &Ran) {
    assert_eq!(ran.code, 0, "{ran:?}");
    let output = &ran.json()["hookSpecificOutput"];
    assert_eq!(output["permissionDecision"], "ask", "{ran:?}");
    assert_eq!(output["hookEventName"], "PreToolUse", "{ran:?}");
}

ahp_tests::hook_contract_tests!(contract());
