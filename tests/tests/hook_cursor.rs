//! `ahp hook cursor`: Cursor's preToolUse/postToolUse payloads (cursor.com/docs/hooks),
//! keyed by `conversation_id`; `permission` answers, always JSON (with `failClosed` an
//! empty answer is refused), no ask on preToolUse.

use ahp_tests::hook::{Contract, Intercepted, Ran};
use serde_json::json;

fn contract() -> Contract {
    let common = json!({
        "conversation_id": "conv-9", "generation_id": "gen-1", "model": "claude-4",
        "cursor_version": "2.4.0", "workspace_roots": ["/repo"], "user_email": "dev@example.com",
        "transcript_path": null, "cwd": "/repo",
        "tool_name": "Shell", "tool_input": {"command": "npm publish"}, "tool_use_id": "tool_c1"
    });
    let mut pre = common.clone();
    pre["hook_event_name"] = json!("preToolUse");
    let mut post = common;
    post["hook_event_name"] = json!("postToolUse");
    post["tool_output"] = json!("published");
    Contract {
        harness: "cursor",
        pre_tool: (pre, &[]),
        post_tool: (post, &[]),
        tool: ("Shell", json!({"command": "npm publish"}), "conv-9"),
        call_id: Some("tool_c1"),
        advertised: &["deny"],
        assert_deny,
        assert_no_objection,
        assert_ask: None,
        intercepted: vec![Intercepted {
            payload: (
                json!({"conversation_id": "conv-9", "generation_id": "gen-1",
                    "hook_event_name": "beforeSubmitPrompt", "workspace_roots": ["/repo"],
                    "prompt": "ship it"}),
                &[],
            ),
            event: "turn.start",
            advertised: &["deny"],
            assert_block,
        }],
    }
}

fn assert_deny(ran: &Ran, reason: &str) {
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(
        ran.json(),
        json!({"permission": "deny", "user_message": reason, "agent_message": reason}),
        "{ran:?}"
    );
}

fn assert_no_objection(ran: &Ran) {
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(ran.json(), json!({"permission": "allow"}), "{ran:?}");
}

/// Before a prompt Cursor blocks with `continue: false`.
fn assert_block(ran: &Ran, reason: &str) {
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(
        ran.json(),
        json!({"continue": false, "user_message": reason}),
        "{ran:?}"
    );
}

ahp_tests::hook_contract_tests!(contract());
