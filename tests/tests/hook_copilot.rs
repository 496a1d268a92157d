//! `ahp hook copilot`: Copilot CLI's camelCase payloads (github/docs cli-hooks-reference),
//! which name no event (the command line does) and encode `toolArgs` as a JSON string;
//! a denial is its JSON and exit 2.

use ahp_tests::hook::{Contract, Ran};
use serde_json::json;

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
        advertised: &["deny", "ask", "message"],
        assert_deny,
        assert_no_objection,
        assert_ask: Some(assert_ask),
    }
}

fn assert_deny(ran: &Ran, reason: &str) {
    assert_eq!(ran.code, 2, "{ran:?}");
    assert_eq!(
        ran.json(),
        json!({"permissionDecision": "deny", "permissionDecisionReason": reason}),
        "{ran:?}"
    );
    assert!(ran.stderr.trim_end().ends_with(reason), "{ran:?}");
}

fn assert_no_objection(ran: &Ran) {
    assert_eq!((ran.code, ran.stdout.as_str()), (0, ""), "{ran:?}");
}

fn assert_ask(ran: &Ran) {
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(ran.json()["permissionDecision"], "ask", "{ran:?}");
}

ahp_tests::hook_contract_tests!(contract());
