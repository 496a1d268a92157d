//! Gemini CLI (google-gemini/gemini-cli docs/hooks/reference.md): `settings.json`, hook
//! timeout in milliseconds, snake_case payloads without a tool-use id.
//!
//! Before a tool runs Gemini enforces a denial (`decision: deny`) and changed arguments
//! (`hookSpecificOutput.tool_input`); it has no ask. Its hooks reference says that
//! object "merges with and overrides" the model's arguments: a key the adapter leaves
//! out survives, so a `modify` that replaces the input cannot be carried, and only
//! merge is advertised. Before the agent takes a prompt it blocks with the same
//! `decision: deny`, and so before a request goes to the model (`BeforeModel`, whose
//! `llm_request` names the model and its generation parameters; the request's messages
//! reach a backend only in `native`). After a tool its block is no AHP effect there (the
//! protocol has no deny at `tool.after`), so that event is only observed.

use super::install::Snippet;
use super::payload::{Fields, ModelRequestFields, SNAKE_TOOL};
use super::{on, AhpEvent, Answer, EventSpec, Verdict};
use crate::{Decision, EffectKind as E};
use serde_json::{json, Value};

/// The mapped events and what Gemini CLI enforces at each.
pub const EVENTS: &[EventSpec] = &[
    // Gemini merges `tool_input` into the model's arguments: merge only, no replace.
    on("BeforeTool", AhpEvent::ToolBefore, &[E::Deny, E::Modify]).merging_input(),
    on("AfterTool", AhpEvent::ToolAfter, &[]),
    on("BeforeAgent", AhpEvent::TurnStart, &[E::Deny]),
    // Gemini's `decision: deny` blocks the request and aborts the turn.
    // Installed only for a registration that selects model.request.before.
    on("BeforeModel", AhpEvent::ModelRequestBefore, &[E::Deny]).on_demand(),
    on("SessionStart", AhpEvent::SessionStart, &[]),
    on("SessionEnd", AhpEvent::SessionEnd, &[]),
    on("PreCompress", AhpEvent::ContextCompactBefore, &[]),
];

/// The settings file the snippet belongs in.
pub const SETTINGS_FILE: &str = ".gemini/settings.json";

/// `session_id`, `cwd`, `source` at session start, `trigger` before a compression, and
/// for tool events `tool_name`, `tool_input` and, for an MCP tool, `mcp_context` (its
/// server, `mcp.rs`); Gemini has no tool-use id.
pub const FIELDS: Fields = Fields {
    session: &["session_id"],
    tool: &[SNAKE_TOOL],
    call_id: None,
    turn_id: None,
    start_trigger: Some("source"),
    compact_trigger: Some("trigger"),
    model: None,
    workspace_roots: None,
    mcp_context: Some("mcp_context"),
    harness_version: None,
    agent: None,
    permission_mode: None,
    model_request: Some(ModelRequestFields {
        request: "llm_request",
        model: "model",
        params: "config",
        // Gemini shows a hook temperature, maxOutputTokens, topP and topK today; the
        // others are generation parameters its hook request type declares.
        kept_params: &[
            "temperature",
            "maxOutputTokens",
            "topP",
            "topK",
            "candidateCount",
            "presencePenalty",
            "frequencyPenalty",
        ],
        provider: "google",
    }),
};

/// `BeforeTool`: a denial, replaced arguments, or nothing. Gemini has no ask, so an
/// ask can only be a denial.
pub fn answer(spec: &EventSpec, verdict: &Verdict) -> Answer {
    match (spec.ahp, verdict.decision) {
        (AhpEvent::ToolBefore, _) => {}
        (AhpEvent::TurnStart | AhpEvent::ModelRequestBefore, Decision::Deny) => {
            return Answer::json(json!({"decision": "deny", "reason": verdict.reason()}))
        }
        _ => return super::exit_code_answer(spec, verdict),
    }
    match (verdict.decision, &verdict.input) {
        (Decision::Deny | Decision::Ask, _) => {
            Answer::json(json!({"decision": "deny", "reason": verdict.reason()}))
        }
        (Decision::Allow, Some(input)) => {
            Answer::json(json!({"hookSpecificOutput": {"tool_input": input}}))
        }
        (Decision::Allow, None) => Answer::silent(),
    }
}

/// `settings.json` hooks; Gemini's `timeout` is in milliseconds.
pub fn snippet(snippet: &Snippet) -> Value {
    super::claude_code::claude_shaped(snippet, EVENTS, snippet.timeout_ms, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::tests::verdict;

    #[test]
    fn replaced_arguments_go_in_tool_input() {
        let mut modified = verdict(Decision::Allow, None);
        modified.input = json!({"path": "/tmp/x"}).as_object().cloned();
        let answer = answer(&EVENTS[0], &modified);
        assert_eq!(
            answer.stdout,
            "{\"hookSpecificOutput\":{\"tool_input\":{\"path\":\"/tmp/x\"}}}\n"
        );
    }

    #[test]
    fn tool_input_is_merged_never_replaced() {
        let capability = EVENTS[0].capability().expect("BeforeTool is intercepted");
        let modify = capability.modify.expect("modify is advertised");
        assert!(modify.merge && !modify.replace, "{modify:?}");
    }

    #[test]
    fn an_ask_is_a_denial() {
        let answer = answer(&EVENTS[0], &verdict(Decision::Ask, None));
        assert!(
            answer.stdout.contains("\"decision\":\"deny\""),
            "{answer:?}"
        );
    }
}
