//! `ahp hook copilot`: Copilot CLI's camelCase payloads (github/docs cli-hooks-reference),
//! which name no event (the command line does) and encode `toolArgs` as a JSON string;
//! a denial is its JSON and exit 2.

use ahp_tests::hook::{assert_json, assert_silent_no_objection, run_unreachable, Contract, Ran};
use serde_json::{json, Value};

fn contract() -> Contract {
    let common = json!({
        "sessionId": "cop-5", "timestamp": 1_796_083_199_000u64, "cwd": "/repo",
        "toolName": "bash", "toolArgs": "{\"command\":\"git reset --hard\"}"
    });
    let mut post = common.clone();
    post["toolResult"] = json!({"resultType": "success", "textResultForLlm": ""});
    Contract {
        harness: "copilot",
        pre_tool: (common, &["--event", "preToolUse"]),
        post_tool: (post, &["--event", "postToolUse"]),
        tool: ("bash", json!({"command": "git reset --hard"}), "cop-5"),
        call_id: None,
        // Copilot's answer has no context field: no `inject`, no `message`.
        advertised: &["deny", "ask", "modify"],
        assert_deny,
        assert_no_objection: assert_silent_no_objection,
        assert_ask: Some(assert_ask),
        assert_modified: Some(assert_modified),
        modify_operations: &["merge", "replace"],
        assert_context: None,
        intercepted: vec![],
    }
}

fn assert_deny(ran: &Ran, reason: &str) {
    let denial = json!({"permissionDecision": "deny", "permissionDecisionReason": reason});
    assert_json(ran, 2, denial);
    assert!(ran.stderr.trim_end().ends_with(reason), "{ran:?}");
}

/// The changed arguments in `modifiedArgs`, with no decision (never a grant).
fn assert_modified(ran: &Ran, input: &Value) {
    assert_json(ran, 0, json!({"modifiedArgs": input}));
}

fn assert_ask(ran: &Ran) {
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(ran.json()["permissionDecision"], "ask", "{ran:?}");
}

/// A payload that names no event, run without `--event`: the harness's denial, naming
/// what is missing; with `hookEventName` in the payload no flag is needed.
#[tokio::test]
async fn a_payload_without_an_event_needs_the_flag() {
    let (payload, _) = contract().pre_tool;
    let ran = run_unreachable("copilot", &[], &payload).await;
    assert_deny_everywhere(&ran);
    assert!(ran.stderr.contains("names no hook event"), "{ran:?}");
    let mut named = payload;
    named["hookEventName"] = json!("sessionEnd");
    let ran = run_unreachable("copilot", &[], &named).await;
    assert_eq!((ran.code, ran.stdout.as_str()), (0, ""), "{ran:?}");
}

/// Copilot's Claude-compatible form: the PascalCase event name with snake_case fields is
/// the same event (here the backend is down and the subscription fails open: no
/// objection, where an unknown event would be a denial).
#[tokio::test]
async fn the_pascal_case_form_is_the_same_event() {
    let payload = json!({"session_id": "cop-6", "hook_event_name": "PreToolUse",
        "tool_name": "bash", "tool_input": {"command": "ls"}});
    for flag in [&[][..], &["--event", "preToolUse"][..]] {
        assert_silent_no_objection(&run_unreachable("copilot", flag, &payload).await);
    }
}

/// A denial before the event is known: Copilot's JSON denial and exit 2.
fn assert_deny_everywhere(ran: &Ran) {
    assert_deny(ran, ahp_tests::hook::FAILED_REASON);
}

ahp_tests::hook_contract_tests!(contract());
