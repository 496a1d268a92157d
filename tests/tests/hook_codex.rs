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
        modify_operations: &[],
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

/// Pulling the component from a registry happens inside the hook's budget: a registry
/// that never answers cannot hold the tool call past it, and the answer is a denial.
#[tokio::test]
async fn a_registry_that_never_answers_is_bounded_by_the_budget() {
    use ahp_tests::fault_backend::{Behaviour, FaultBackend};
    let registry = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let component = format!("oci://{}/ahp/interceptor:0.1", registry.addr());
    let (payload, _) = contract().pre_tool;
    let started = std::time::Instant::now();
    let args = ["--component", &component, "--budget-ms", "1000"];
    let ran = ahp_tests::hook::run_unreachable("codex", &args, &payload).await;
    // The watchdog's denial, in Codex's terms: the event was known by then.
    assert_deny(&ran, ahp_tests::hook::FAILED_REASON);
    assert!(ran.log.contains("ran past its budget"), "{ran:?}");
    // The budget and the watchdog's second (and a first compile of the component, on a
    // busy machine), not the registry client's 60 s read timeout.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{ran:?}"
    );
    assert!(registry.connections() > 0, "the pull was tried");
}

/// At `Stop` a call past its budget is no answer: exit 2 there would keep the agent
/// working.
#[tokio::test]
async fn past_the_budget_at_a_stop_lets_the_agent_stop() {
    let payload = json!({"session_id": "019a-codex", "cwd": "/repo", "turn_id": "turn-9",
        "hook_event_name": "Stop", "stop_hook_active": false});
    let ran = ahp_tests::hook::run_past_budget("codex", &[], &payload).await;
    assert_silent_no_objection(&ran);
}
