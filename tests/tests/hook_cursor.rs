//! `ahp hook cursor`: Cursor's preToolUse/postToolUse payloads (cursor.com/docs/hooks),
//! keyed by `conversation_id`; `permission: "deny"` to block, always JSON, and no
//! objection as `{}` — never `permission: "allow"`, a grant; no ask on preToolUse.

use ahp_tests::hook::{
    assert_exit_2_block, assert_json, assert_json_and_exit_2, tool_payloads, Contract, Intercepted,
    Ran,
};
use serde_json::json;

fn contract() -> Contract {
    let common = json!({
        "conversation_id": "conv-9", "generation_id": "gen-1", "model": "claude-4",
        "cursor_version": "2.4.0", "workspace_roots": ["/repo", "/libs"], "user_email": "dev@example.com",
        "transcript_path": null, "cwd": "/repo",
        "tool_name": "Shell", "tool_input": {"command": "npm publish"}, "tool_use_id": "tool_c1"
    });
    let (pre, post) = tool_payloads(
        common,
        "hook_event_name",
        ("preToolUse", "postToolUse"),
        ("tool_output", json!("published")),
    );
    Contract {
        harness: "cursor",
        pre_tool: (pre, &[]),
        post_tool: (post, &[]),
        tool: ("Shell", json!({"command": "npm publish"})),
        session: json!({"id": "conv-9", "cwd": "/repo", "workspaceRoots": ["/repo", "/libs"],
            "model": "claude-4"}),
        call_id: Some("tool_c1"),
        advertised: &["deny"],
        assert_deny,
        assert_no_objection,
        assert_ask: None,
        assert_modified: None,
        modify_operations: &[],
        assert_context: None,
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
        assert_blocked_before_the_event: assert_exit_2_block,
    }
}

fn assert_deny(ran: &Ran, reason: &str) {
    let expected = json!({"permission": "deny", "user_message": reason, "agent_message": reason});
    assert_json_and_exit_2(ran, expected, reason);
}

/// Valid JSON (so `failClosed` does not count it a failed hook) that names no permission.
fn assert_no_objection(ran: &Ran) {
    assert_json(ran, 0, json!({}));
}

/// Before a prompt Cursor blocks with `continue: false`.
fn assert_block(ran: &Ran, reason: &str) {
    assert_json(ran, 0, json!({"continue": false, "user_message": reason}));
}

ahp_tests::hook_contract_tests!(contract());

/// At `stop` a call past its budget, or a command line that does not parse, is `{}`:
/// exit 2 there would keep the agent working.
#[tokio::test]
async fn a_failure_at_a_stop_lets_the_agent_stop() {
    let payload = json!({"conversation_id": "conv-9", "generation_id": "gen-2",
        "hook_event_name": "stop", "status": "completed", "workspace_roots": ["/repo"]});
    let ran = ahp_tests::hook::run_past_budget("cursor", &[], &payload).await;
    assert_no_objection(&ran);
    let ran =
        ahp_tests::hook::run_with_usage_error("cursor", &[], "--no-such-flag", &payload).await;
    assert_no_objection(&ran);
}

/// An administrator may leave the optional session fields out of every event (digest
/// §3.2): `--omit-session` takes them out, and the backend sees only the rest. Without
/// a `cwd` in the payload, the first workspace root stands for it, and leaving out the
/// roots leaves it out too; a `cwd` Cursor names stays.
#[tokio::test]
async fn omitted_session_fields_reach_no_backend() {
    let (payload, _) = contract().pre_tool;
    let omit = ["--omit-session", "cwd,workspaceRoots"];
    let sent = ahp_tests::hook::sent_event("cursor", &omit, &payload, "hooks/intercept").await;
    assert_no_objection(&sent.ran);
    assert_eq!(
        sent.event["session"],
        json!({"id": "conv-9", "model": "claude-4"})
    );
    let mut rootless = payload.clone();
    rootless.as_object_mut().unwrap().remove("cwd");
    let roots = ["--omit-session", "workspaceRoots"];
    for (payload, cwd) in [(&payload, Some(&payload["cwd"])), (&rootless, None)] {
        let sent = ahp_tests::hook::sent_event("cursor", &roots, payload, "hooks/intercept").await;
        assert_no_objection(&sent.ran);
        let session = &sent.event["session"];
        assert_eq!(session.get("workspaceRoots"), None, "{session}");
        assert_eq!(session.get("cwd"), cwd, "{session}");
    }
}

/// Cursor names its version (`cursor_version`): the observed `session.start` carries it
/// as `harness.version`, required there, with no gap for it. The component checks the
/// event, so a session.start without a version would reach no backend. Cursor names no
/// trigger: `startup`, with a gap.
#[tokio::test]
async fn a_session_start_carries_cursor_s_version() {
    let payload = json!({"conversation_id": "conv-9", "generation_id": "gen-1",
        "hook_event_name": "sessionStart", "cursor_version": "2.4.0",
        "workspace_roots": ["/repo"], "model": "claude-4"});
    let sent = ahp_tests::hook::sent_event("cursor", &[], &payload, "hooks/observe").await;
    assert_eq!(sent.ran.code, 0, "{:?}", sent.ran);
    let event = &sent.event;
    assert_eq!(event["type"], "session.start", "{event}");
    assert_eq!(
        event["harness"],
        json!({"name": "cursor", "version": "2.4.0"})
    );
    assert_eq!(event["trigger"], "startup", "{event}");
    assert_eq!(
        event["gaps"],
        json!([
            {"path": "/trigger",
                "reason": "the harness says no trigger AHP names; startup stands for it"},
            {"path": "/permissionMode", "reason": "the harness does not say"}
        ])
    );
}

/// Cursor's `stop` says how the agent's work ended (`status`) and how many times a stop
/// hook has made it go on in this loop (`loop_count`): an aborted stop reaches an
/// observer as `outcome: "cancelled"` with Cursor's count as its `continuationCount`, and
/// no gap for either (the component checks the event on its way).
#[tokio::test]
async fn an_aborted_stop_is_observed_as_cancelled_with_cursor_s_count() {
    let payload = json!({"conversation_id": "conv-9", "generation_id": "gen-2",
        "hook_event_name": "stop", "status": "aborted", "loop_count": 2,
        "cursor_version": "2.4.0", "workspace_roots": ["/repo"]});
    let sent = ahp_tests::hook::sent_event("cursor", &[], &payload, "hooks/observe").await;
    assert_no_objection(&sent.ran);
    let event = &sent.event;
    assert_eq!(event["type"], "turn.finish.before", "{event}");
    assert_eq!(event["outcome"], "cancelled", "{event}");
    assert_eq!(event["continuationCount"], 2, "{event}");
    // Cursor names no turn: its synthesized id names this event alone, said so.
    assert_eq!(
        event["gaps"],
        json!([{"path": "/items", "reason": "the response is only in native"},
               {"path": "/turn/id",
                "reason": "synthesized for this hook call alone: the turn's other events carry another"}])
    );
}
