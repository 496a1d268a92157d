//! GitHub Copilot CLI (github/docs, cli-hooks-reference): `~/.copilot/hooks/*.json` (and a
//! repository's `.github/hooks/*.json`),
//! `timeoutSec`, camelCase payloads that name no event and encode `toolArgs` as a JSON
//! string.
//!
//! Before a tool runs Copilot enforces deny, ask and changed arguments (`modifiedArgs`):
//! its answer has no field for context, so neither `message` nor `inject` is advertised.
//! A denial is its JSON with exit 0. Copilot's own references disagree over the years on
//! a non-zero exit: the CLI hooks reference said hook failures, non-zero exits among
//! them, "are logged and skipped" (the tool runs), while the later hooks reference says
//! a `preToolUse` command hook's non-zero exit, exit 2 included, denies. Every version
//! reads a `permissionDecision: "deny"` on exit 0 as a denial, with its reason; exit 2
//! denied only under the later reading.
//!
//! The contract gives `modifiedArgs` only as a field of the answer beside
//! `permissionDecision`: it does not say Copilot applies it without a decision, nor
//! whether it replaces the model's arguments or merges into them. So changed arguments
//! go out with `ask` (the user approves the call that will run, as behind Claude Code),
//! never `allow`, a grant; and only a merge is advertised. The adapter writes the whole
//! effective input, and an AHP merge (shallow, `null` a value) never takes a key out of
//! it: replaced by it, or merged into key by key, the model's arguments become the same
//! object. A key a replace drops would survive a merging Copilot, so replace is not
//! offered.

use super::install::Snippet;
use super::payload::{EndedField, Fields, ToolFields, SNAKE_TOOL};
use super::{on, AhpEvent, Answer, EventSpec, Verdict};
use crate::{Decision, EffectKind as E};
use serde_json::{json, Map, Value};

/// The mapped events and what Copilot CLI enforces at each.
pub const EVENTS: &[EventSpec] = &[
    // Copilot may merge `modifiedArgs` into the model's arguments: merge only.
    on(
        "preToolUse",
        AhpEvent::ToolBefore,
        &[E::Deny, E::Ask, E::Modify],
    )
    .merging_input(),
    on("postToolUse", AhpEvent::ToolAfter, &[]),
    // After a failed call (Copilot CLI 1.0.15 on; `postToolUse` follows successes only):
    // Copilot takes `additionalContext` there but nothing at `postToolUse`, and one AHP
    // event has one declaration, so nothing is offered at either.
    on("postToolUseFailure", AhpEvent::ToolAfter, &[]).after_failed_call(),
    on("userPromptSubmitted", AhpEvent::TurnStart, &[]),
    on("sessionStart", AhpEvent::SessionStart, &[]),
    on("sessionEnd", AhpEvent::SessionEnd, &[]),
];

/// The settings file the snippet belongs in: the user's own hooks directory (Copilot CLI
/// 0.0.422 on), not the repository's `.github/hooks/`, whose hooks Copilot runs only in
/// a folder it trusts and, in prompt mode (`copilot -p`, as in CI), in some versions not
/// at all (github/copilot-cli#3345), where no backend would be asked; its cloud agent
/// runs a repository's hooks where this machine's paths do not exist.
pub const SETTINGS_FILE: &str = "~/.copilot/hooks/ahp.json";

/// `sessionId`, `cwd`, and for tool events `toolName` with `toolArgs` (a JSON-encoded
/// object), or the snake_case `session_id`, `tool_name` / `tool_input` of Copilot's
/// Claude-compatible form.
pub const FIELDS: Fields = Fields {
    session: &["sessionId", "session_id"],
    tool: &[
        ToolFields {
            name: "toolName",
            input: "toolArgs",
            // The SDK hands over an object; it is taken as it is.
            encoded: true,
        },
        SNAKE_TOOL,
    ],
    call_id: None,
    turn_id: None,
    start_trigger: Some("source"),
    // Copilot has no compaction event.
    compact_trigger: None,
    model: None,
    workspace_roots: None,
    mcp_context: None,
    mcp_by_name: false,
    harness_version: None,
    agent: None,
    permission_mode: None,
    model_request: None,
    continued: None,
    stop_status: None,
    stop_loop_count: None,
    // `postToolUse` is run after a success only (`postToolUseFailure` after a failure,
    // its `error` text left in `native`); the snake_case `PostToolUse` after a failure or
    // a denial too.
    ended: Some(EndedField::Status(&[
        ("toolResult", "resultType"),
        ("tool_result", "result_type"),
    ])),
    interrupted: None,
};

/// `preToolUse`: deny (its JSON, exit 0), ask (with changed arguments, if any), or
/// nothing.
pub fn answer(spec: &EventSpec, verdict: &Verdict) -> Answer {
    if spec.ahp != AhpEvent::ToolBefore {
        return super::exit_code_answer(spec, verdict);
    }
    tool_answer(verdict)
}

/// The `preToolUse` answer, also the JSON half of a denial for an unknown event.
pub fn tool_answer(verdict: &Verdict) -> Answer {
    let mut output = Map::new();
    match verdict.decision {
        Decision::Deny => {
            return Answer::json(json!({"permissionDecision": "deny",
                "permissionDecisionReason": verdict.reason()}));
        }
        Decision::Ask => {
            output.insert("permissionDecision".into(), json!("ask"));
            output.insert(
                "permissionDecisionReason".into(),
                json!(verdict.ask_reason()),
            );
        }
        Decision::Allow => {}
    }
    if let Some(input) = &verdict.input {
        // Changed arguments never go out without a decision, which is then `ask`: the
        // user sees the call that will run.
        if output.is_empty() {
            output.insert("permissionDecision".into(), json!("ask"));
            output.insert(
                "permissionDecisionReason".into(),
                json!(super::MODIFIED_REASON),
            );
        }
        output.insert("modifiedArgs".into(), json!(input));
    }
    match output.is_empty() {
        true => Answer::silent(),
        false => Answer::json(Value::Object(output)),
    }
}

/// [`SETTINGS_FILE`]: every mapped event; the command names its event, since
/// Copilot's payloads do not.
pub fn snippet(snippet: &Snippet) -> Value {
    let hooks: Map<String, Value> = EVENTS
        .iter()
        .filter(|spec| snippet.installs(spec))
        .map(|spec| {
            let hook = json!({
                "type": "command",
                "bash": snippet.command(spec),
                "timeoutSec": snippet.timeout_secs(),
            });
            (spec.native.to_string(), json!([hook]))
        })
        .collect();
    json!({"version": 1, "hooks": hooks})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::tests::verdict;

    #[test]
    fn changed_arguments_go_in_modified_args_with_ask_never_a_grant() {
        let mut modified = verdict(Decision::Allow, None);
        modified.input = json!({"command": "ls"}).as_object().cloned();
        let answer = tool_answer(&modified);
        assert_eq!(answer.exit, 0);
        let out: Value = serde_json::from_str(&answer.stdout).expect("JSON");
        assert_eq!(
            out,
            json!({"permissionDecision": "ask",
                "permissionDecisionReason": crate::hook::MODIFIED_REASON,
                "modifiedArgs": {"command": "ls"}})
        );
        // A backend's own ask keeps its reason.
        modified.decision = Decision::Ask;
        modified.reason = Some("check the path".into());
        let out: Value = serde_json::from_str(&tool_answer(&modified).stdout).expect("JSON");
        assert_eq!(out["permissionDecision"], "ask");
        assert_eq!(out["permissionDecisionReason"], "check the path");
        assert_eq!(out["modifiedArgs"], json!({"command": "ls"}));
    }

    #[test]
    fn modified_args_are_merged_never_replaced() {
        let capability = EVENTS[0].capability().expect("preToolUse is intercepted");
        let modify = capability.modify.expect("modify is advertised");
        assert!(modify.merge && !modify.replace, "{modify:?}");
    }

    /// A denial after a failed call (none is offered there: the adapter's) is answered
    /// as after a successful one, by exit code (`exit_code_answer`).
    #[test]
    fn after_a_failed_call_a_denial_is_answered_as_after_a_success() {
        let spec = |native| {
            EVENTS
                .iter()
                .find(|spec| spec.native == native)
                .expect("mapped")
        };
        let (after, failure) = (spec("postToolUse"), spec("postToolUseFailure"));
        assert!(failure.after_failed_call && failure.advertised().is_empty());
        let denied = verdict(Decision::Deny, Some("no"));
        assert_eq!(answer(failure, &denied), answer(after, &denied));
        assert_eq!(answer(failure, &denied), Answer::blocked("no"));
    }

    #[test]
    fn tool_args_must_encode_an_object() {
        let payload = json!({"sessionId": "s", "toolName": "bash", "toolArgs": "[1]"});
        let object = payload.as_object().unwrap();
        let error = crate::hook::payload::read(&FIELDS, object, &EVENTS[0]).unwrap_err();
        assert_eq!(error, "toolArgs must encode a JSON object");
    }
}
