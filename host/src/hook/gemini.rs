//! Gemini CLI (google-gemini/gemini-cli docs/hooks/reference.md, and its hook code
//! where the two differ): `settings.json`, hook timeout in milliseconds, snake_case
//! payloads without a tool-use id.
//!
//! Gemini blocks with `decision: deny`: before a tool (its arguments may also change,
//! `hookSpecificOutput.tool_input`), after one (the result is replaced by the reason),
//! before the agent takes a prompt (the prompt is dropped), and before a request goes to
//! the model (`BeforeModel`, whose `llm_request` names the model and its generation
//! parameters; the request's messages reach a backend only in `native`). Its hooks
//! reference says `tool_input` "merges with and overrides" the model's arguments: a key
//! the adapter leaves out survives, so a `modify` that replaces the input cannot be
//! carried, and only merge is advertised. It has no ask. Context for the model
//! (`hookSpecificOutput.additionalContext`) is appended to a tool's result and to the
//! prompt; `continue: false` stops the agent at each of those events. After the agent's
//! last answer (`AfterAgent`) a denial makes it go on with the reason as its next
//! prompt: that is a flow `continue` there (once per turn, while `stop_hook_active` is
//! false; Gemini itself sets no bound), and a denial of ours stops the agent instead.
//! Its `systemMessage` is shown only in the interactive UI, so `message` is not
//! advertised.

use super::install::Snippet;
use super::payload::{EndedField, Fields, ModelRequestFields, SNAKE_TOOL};
use super::{on, AhpEvent, Answer, EventSpec, Verdict};
use crate::{Decision, EffectKind as E};
use serde_json::{json, Value};

/// The mapped events and what Gemini CLI enforces at each.
pub const EVENTS: &[EventSpec] = &[
    // Gemini merges `tool_input` into the model's arguments: merge only, no replace.
    on(
        "BeforeTool",
        AhpEvent::ToolBefore,
        &[E::Deny, E::Modify, E::Flow],
    )
    .merging_input(),
    on("AfterTool", AhpEvent::ToolAfter, &[E::Inject, E::Flow]),
    on(
        "BeforeAgent",
        AhpEvent::TurnStart,
        &[E::Deny, E::Inject, E::Flow],
    ),
    // Its denial there starts another turn with the reason as the prompt, and so does a
    // hook that dies (killed, say: Gemini reads any exit past 1 as a block). Installed
    // only for a registration that selects turn.finish.before.
    on("AfterAgent", AhpEvent::TurnFinishBefore, &[E::Flow])
        .continuing()
        .on_demand(),
    // Gemini's `decision: deny` blocks the request and aborts the turn.
    // Installed only for a registration that selects model.request.before.
    on(
        "BeforeModel",
        AhpEvent::ModelRequestBefore,
        &[E::Deny, E::Flow],
    )
    .on_demand(),
    on("SessionStart", AhpEvent::SessionStart, &[]),
    on("SessionEnd", AhpEvent::SessionEnd, &[]),
    on("PreCompress", AhpEvent::ContextCompactBefore, &[]),
];

/// The settings file the snippet belongs in.
pub const SETTINGS_FILE: &str = ".gemini/settings.json";

/// `session_id`, `cwd`, `source` at session start, `trigger` before a compression,
/// `stop_hook_active` after the agent's answer, and for tool events `tool_name`,
/// `tool_input` and, for an MCP tool, `mcp_context` (its server, `mcp.rs`); Gemini has
/// no tool-use id.
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
    mcp_by_name: false,
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
    continued: Some("stop_hook_active"),
    // `AfterAgent` fires once the agent loop completes, and it does not count
    // continuations.
    stop_status: None,
    stop_loop_count: None,
    // `AfterTool` runs after a failed call too, its error in the response.
    ended: Some(EndedField::Error("tool_response", "error")),
    interrupted: None,
};

/// After the agent's answer [`at_stop`](super::at_stop), a continue as `decision: deny`.
/// Elsewhere a flow stop first: `continue: false`. Then before a tool a denial, replaced
/// arguments, or nothing (Gemini has no ask, so an ask can only be a denial); elsewhere a
/// denial where Gemini blocks (before a tool and a model request on exit 2 too), else the context
/// for the model, else nothing.
pub fn answer(spec: &EventSpec, verdict: &Verdict) -> Answer {
    let deny = |reason: &str| super::decided("deny", reason);
    if spec.ahp == AhpEvent::TurnFinishBefore {
        return super::at_stop(verdict, deny);
    }
    let denied = verdict.decision != Decision::Allow;
    if let Some(reason) = verdict.stop_reason() {
        let mut answer = super::stop_answer(reason);
        // Before a model request on exit 2 too, as a denial there (below): were the JSON
        // ignored on exit 0 there as a denial's has been, the request would go out; on
        // exit 2 it is blocked whatever Gemini makes of the JSON.
        if spec.ahp == AhpEvent::ModelRequestBefore && denied {
            answer.exit = 2;
            answer.stderr = vec![reason.to_string()];
        }
        return answer;
    }
    match spec.ahp {
        // On exit 2 too, which Gemini reads as a block whatever stdout holds (output a
        // shell's startup files print there would leave the JSON unread).
        AhpEvent::ToolBefore if denied => Answer::json_and_blocked(
            json!({"decision": "deny", "reason": verdict.reason()}),
            verdict.reason(),
        ),
        AhpEvent::ToolBefore => match &verdict.input {
            Some(input) => Answer::json(json!({"hookSpecificOutput": {"tool_input": input}})),
            None => Answer::silent(),
        },
        AhpEvent::ToolAfter | AhpEvent::TurnStart if denied => deny(verdict.reason()),
        // Gemini has been seen to ignore a denial on exit 0 before a model request
        // (google-gemini/gemini-cli#16792, open), and denies on an exit of 2 or more with
        // output whatever it reads there: the JSON, on exit 2, the reason on stderr too.
        AhpEvent::ModelRequestBefore if denied => {
            let mut answer = deny(verdict.reason());
            answer.exit = 2;
            answer.stderr = vec![verdict.reason().to_string()];
            answer
        }
        AhpEvent::ToolAfter | AhpEvent::TurnStart => match verdict.context_text() {
            Some(text) => Answer::json(json!({"hookSpecificOutput": {"additionalContext": text}})),
            None => Answer::silent(),
        },
        _ => super::exit_code_answer(spec, verdict),
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

    /// Gemini's answer at `native` to `verdict`, as written on stdout.
    fn answer_of(native: &str, verdict: &Verdict) -> String {
        let spec = crate::hook::Harness::Gemini.spec(native).expect("mapped");
        answer(spec, verdict).stdout
    }

    /// `continue: false` stops the agent at every event Gemini lets a hook stop it,
    /// whatever else the verdict says.
    #[test]
    fn a_flow_stop_is_continue_false_everywhere_it_is_advertised() {
        let mut stopped = verdict(Decision::Deny, Some("frozen"));
        stopped.stop = Some(Some("the repo is frozen".into()));
        stopped.input = json!({"path": "/tmp/x"}).as_object().cloned();
        for spec in EVENTS.iter().filter(|s| s.advertised().contains(&E::Flow)) {
            let answer = answer(spec, &stopped);
            assert_eq!(
                answer.stdout, "{\"continue\":false,\"stopReason\":\"the repo is frozen\"}\n",
                "{}",
                spec.native
            );
            // Before a model request, blocked on exit 2 too, as a denial there is.
            let (exit, stderr) = match spec.ahp {
                AhpEvent::ModelRequestBefore => (2, vec!["the repo is frozen".to_string()]),
                _ => (0, Vec::new()),
            };
            assert_eq!(
                (answer.exit, &answer.stderr),
                (exit, &stderr),
                "{}",
                spec.native
            );
        }
    }

    /// Context for the model goes to `additionalContext` after a tool and before a
    /// prompt; a denial there is `decision: deny` (the result or the prompt is dropped).
    #[test]
    fn context_and_denial_after_a_tool_and_before_a_prompt() {
        let mut context = verdict(Decision::Allow, None);
        context.context = vec!["the repo is frozen".into()];
        for native in ["AfterTool", "BeforeAgent"] {
            assert_eq!(
                answer_of(native, &context),
                "{\"hookSpecificOutput\":{\"additionalContext\":\"the repo is frozen\"}}\n"
            );
            let denied = answer_of(native, &verdict(Decision::Deny, Some("no")));
            assert_eq!(denied, "{\"decision\":\"deny\",\"reason\":\"no\"}\n");
            assert_eq!(answer_of(native, &verdict(Decision::Allow, None)), "");
        }
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
