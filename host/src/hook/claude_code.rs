//! Claude Code (code.claude.com/docs/en/hooks): settings `.claude/settings.local.json`,
//! hook timeout in seconds, snake_case payloads, answers in `hookSpecificOutput`.
//!
//! Claude Code enforces deny, ask, a replaced input (`updatedInput`) and context for the
//! model (`additionalContext`) before a tool runs. Its `allow` skips its own permission
//! prompt, so the adapter never writes it: no objection is an empty answer, and a
//! replaced input (the settlement's effective input, merges already applied) goes out
//! with `ask`, so the user sees what will run. Messages and injected context (text
//! parts, delivered now) both go to `additionalContext`.
//!
//! After a tool and before a prompt it blocks with `decision: block` (the tool already
//! ran; the prompt is erased); before stopping, a block makes the agent go on with the
//! reason as its instruction: that is a flow `continue` (once per turn, while
//! `stop_hook_active` is false), and a denial there stops the agent instead. After a
//! tool call that failed or was interrupted it fires `PostToolUseFailure`, not
//! `PostToolUse`: the same call's `tool.after`, where no block is documented, so a
//! denial stops the agent. It takes context in `additionalContext` (not before a stop),
//! and stops the agent with `continue: false` on any event.

use super::install::Snippet;
use super::payload::{Fields, SNAKE_TOOL};
use super::{on, AhpEvent, Answer, EventSpec, Verdict};
use crate::{Decision, EffectKind as E};
use serde_json::{json, Map, Value};

/// The mapped events and what Claude Code enforces at each.
pub const EVENTS: &[EventSpec] = &[
    on(
        "PreToolUse",
        AhpEvent::ToolBefore,
        &[E::Deny, E::Ask, E::Modify, E::Inject, E::Message],
    ),
    on(
        "PostToolUse",
        AhpEvent::ToolAfter,
        &[E::Inject, E::Flow, E::Message],
    ),
    // After a call that failed or was interrupted (`PostToolUse` follows a success
    // alone): context given with the error, and `continue: false`; no block is
    // documented there.
    on(
        "PostToolUseFailure",
        AhpEvent::ToolAfter,
        &[E::Inject, E::Flow, E::Message],
    )
    .after_failed_call(),
    on(
        "UserPromptSubmit",
        AhpEvent::TurnStart,
        &[E::Deny, E::Inject, E::Flow, E::Message],
    ),
    // Its block at a stop keeps the agent working, the reason its next instruction; a
    // subagent's stop likewise (the event's `session.agent` names the subagent).
    on("Stop", AhpEvent::TurnFinishBefore, &[E::Flow]).continuing(),
    on("SubagentStop", AhpEvent::TurnFinishBefore, &[E::Flow]).continuing(),
    on(
        "SessionStart",
        AhpEvent::SessionStart,
        &[E::Inject, E::Message],
    ),
    on("SessionEnd", AhpEvent::SessionEnd, &[]),
    on("PreCompact", AhpEvent::ContextCompactBefore, &[]),
];

/// The settings file the snippet belongs in: the project's local one, which is not
/// committed. The snippet holds this machine's absolute paths (the binary, the
/// registration), which would break the hooks of everyone else sharing
/// `.claude/settings.json` (the user's own `~/.claude/settings.json` holds them as well).
pub const SETTINGS_FILE: &str = ".claude/settings.local.json";

/// Claude-shaped payloads (also Codex's): `session_id`, `cwd`, `permission_mode`, the
/// `model` (at a session start), a subagent's `agent_id` and `agent_type`, `source` at
/// session start, `trigger` before a compaction, `stop_hook_active` at a stop, for
/// tool events `tool_name`, `tool_input` (an object) and `tool_use_id`, and after a
/// failed call `is_interrupt` (its `error`, the harness's words, stays in `native`).
pub const FIELDS: Fields = Fields {
    session: &["session_id"],
    tool: &[SNAKE_TOOL],
    call_id: Some("tool_use_id"),
    turn_id: None,
    start_trigger: Some("source"),
    compact_trigger: Some("trigger"),
    model: Some("model"),
    workspace_roots: None,
    mcp_context: None,
    mcp_by_name: true,
    harness_version: None,
    agent: Some(("agent_id", "agent_type")),
    permission_mode: Some("permission_mode"),
    model_request: None,
    continued: Some("stop_hook_active"),
    // Its stops fire on completion alone (an interrupt fires none, an API error the
    // unmapped `StopFailure`), and it does not count continuations.
    stop_status: None,
    stop_loop_count: None,
    // `PostToolUse` runs after a success only, `PostToolUseFailure` after a failure.
    ended: None,
    interrupted: Some("is_interrupt"),
};

/// The answer to `PreToolUse`, or [`after_tool_before`] for the other events.
pub fn answer(spec: &EventSpec, verdict: &Verdict) -> Answer {
    if spec.ahp != AhpEvent::ToolBefore {
        return after_tool_before(spec, verdict);
    }
    let mut output = json!({"hookEventName": spec.native});
    let decision = match (verdict.decision, &verdict.input) {
        (Decision::Deny, _) => Some(("deny", verdict.reason())),
        (Decision::Ask, _) => Some(("ask", verdict.ask_reason())),
        (Decision::Allow, Some(_)) => Some(("ask", super::MODIFIED_REASON)),
        (Decision::Allow, None) => None,
    };
    if let Some((decision, reason)) = decision {
        output["permissionDecision"] = json!(decision);
        output["permissionDecisionReason"] = json!(reason);
    }
    if verdict.decision != Decision::Deny {
        if let Some(input) = &verdict.input {
            output["updatedInput"] = json!(input);
        }
        if let Some(text) = verdict.context_text() {
            output["additionalContext"] = json!(text);
        }
    }
    match output.as_object().map(Map::len) {
        Some(1) => Answer::silent(),
        // Copilot CLI and Cursor run Claude Code's hooks too, and may not read this JSON.
        _ if verdict.decision == Decision::Deny => {
            Answer::json_and_blocked(json!({"hookSpecificOutput": output}), verdict.reason())
        }
        _ => Answer::json(json!({"hookSpecificOutput": output})),
    }
}

/// Every event but `PreToolUse` (Codex's too). At a stop, [`at_stop`](super::at_stop),
/// a continue as `decision: block`. Elsewhere a flow stop is read first: `continue:
/// false`, whether the settlement also denies or not. A denial is then `continue: false`
/// at `SessionStart`, `PostToolUseFailure` (and Codex's `PreCompact`), where no block
/// holds the agent ([`EventSpec::stops_on_denial`]), and `decision: block` where Claude
/// Code blocks (after a tool, before a prompt); messages and injected context go to
/// `additionalContext` where advertised. The events it enforces nothing at answer by
/// exit code.
pub fn after_tool_before(spec: &EventSpec, verdict: &Verdict) -> Answer {
    if spec.ahp == AhpEvent::TurnFinishBefore {
        return super::at_stop(verdict, block);
    }
    if let Some(reason) = verdict.stop_reason() {
        return super::stop_answer(reason);
    }
    let blocks = matches!(spec.ahp, AhpEvent::ToolAfter | AhpEvent::TurnStart);
    match verdict.decision {
        Decision::Deny if spec.stops_on_denial() => super::stop_answer(verdict.reason()),
        Decision::Deny if blocks => block(verdict.reason()),
        Decision::Deny => super::exit_code_answer(spec, verdict),
        Decision::Allow | Decision::Ask => match verdict.context_text() {
            Some(text)
                if spec
                    .enforces
                    .iter()
                    .any(|e| matches!(e, E::Message | E::Inject)) =>
            {
                Answer::json(json!({"hookSpecificOutput": {
                    "hookEventName": spec.native,
                    "additionalContext": text,
                }}))
            }
            _ => Answer::silent(),
        },
    }
}

/// `{"decision": "block", "reason": …}`: Claude Code's (and Codex's) block after a tool,
/// before a prompt, and at a stop, where it makes the agent go on.
fn block(reason: &str) -> Answer {
    super::decided("block", reason)
}

/// `.claude/settings.local.json` hooks: every mapped event, blocking when the hook fails
/// where [`Snippet::fails_closed`] says: where Claude Code lets a hook decide, but not at
/// `Stop` and `SubagentStop` (blocking a stop keeps the agent working, so a hook that
/// fails there lets it stop).
pub fn snippet(snippet: &Snippet) -> Value {
    claude_shaped(
        snippet,
        EVENTS,
        snippet.timeout_secs(),
        Some(("onFailure", json!("block"))),
    )
}

/// The `hooks` object Claude Code, Codex and Gemini share: per event one matcher group
/// (tool events match every tool) with one command hook; `extra`, the harness's
/// fail-closed flag, goes on the hooks [`Snippet::fails_closed`] names.
pub fn claude_shaped(
    snippet: &Snippet,
    events: &[EventSpec],
    timeout: u64,
    extra: Option<(&str, Value)>,
) -> Value {
    let mut hooks = Map::new();
    for spec in events.iter().filter(|spec| snippet.installs(spec)) {
        let mut hook =
            json!({"type": "command", "command": snippet.command(spec), "timeout": timeout});
        if let Some((key, value)) = extra.as_ref().filter(|_| snippet.fails_closed(spec)) {
            hook[*key] = value.clone();
        }
        let mut group = json!({"hooks": [hook]});
        if matches!(spec.ahp, AhpEvent::ToolBefore | AhpEvent::ToolAfter) {
            group["matcher"] = json!("*");
        }
        hooks.insert(spec.native.to_string(), json!([group]));
    }
    json!({"hooks": hooks})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::tests::verdict;

    fn pre() -> &'static EventSpec {
        &EVENTS[0]
    }

    fn output(answer: &Answer) -> Value {
        let value: Value = serde_json::from_str(&answer.stdout).expect("JSON");
        value["hookSpecificOutput"].clone()
    }

    #[test]
    fn a_modified_input_goes_out_with_ask_never_allow() {
        let mut modified = verdict(Decision::Allow, None);
        modified.input = json!({"command": "ls -l"}).as_object().cloned();
        let out = output(&answer(pre(), &modified));
        assert_eq!(out["permissionDecision"], "ask");
        assert_eq!(out["updatedInput"], json!({"command": "ls -l"}));
        assert_eq!(out["hookEventName"], "PreToolUse");
    }

    #[test]
    fn messages_go_to_additional_context_without_a_decision() {
        let mut noted = verdict(Decision::Allow, None);
        noted.messages = vec!["one".into(), "two".into()];
        let out = output(&answer(pre(), &noted));
        assert_eq!(out["additionalContext"], "one\ntwo");
        assert!(out.get("permissionDecision").is_none(), "{out}");
    }

    fn spec(native: &str) -> &'static EventSpec {
        EVENTS.iter().find(|s| s.native == native).expect("mapped")
    }

    fn json_of(answer: &Answer) -> Value {
        assert_eq!(answer.exit, 0, "{answer:?}");
        serde_json::from_str(&answer.stdout).expect("JSON")
    }

    #[test]
    fn a_denial_after_a_tool_or_before_a_prompt_is_decision_block() {
        for native in ["PostToolUse", "UserPromptSubmit"] {
            let out = json_of(&answer(spec(native), &verdict(Decision::Deny, Some("no"))));
            assert_eq!(
                out,
                json!({"decision": "block", "reason": "no"}),
                "{native}"
            );
        }
    }

    #[test]
    fn a_denial_at_session_start_stops_and_a_flow_stop_stops_anywhere() {
        let out = json_of(&answer(
            spec("SessionStart"),
            &verdict(Decision::Deny, Some("no")),
        ));
        assert_eq!(out, json!({"continue": false, "stopReason": "no"}));
        let out = json_of(&answer(spec("Stop"), &verdict(Decision::Deny, Some("no"))));
        assert_eq!(out, json!({"continue": false, "stopReason": "no"}));
        let mut stopped = verdict(Decision::Allow, None);
        stopped.stop = Some(Some("enough".into()));
        let out = json_of(&answer(spec("Stop"), &stopped));
        assert_eq!(out, json!({"continue": false, "stopReason": "enough"}));
        // A stop the settlement also records as a denial is still a stop, not a block.
        stopped.decision = Decision::Deny;
        let out = json_of(&answer(spec("UserPromptSubmit"), &stopped));
        assert_eq!(out, json!({"continue": false, "stopReason": "enough"}));
    }

    #[test]
    fn injected_context_joins_the_messages_and_an_ask_has_its_own_reason() {
        let mut noted = verdict(Decision::Ask, None);
        noted.messages = vec!["note".into()];
        noted.context = vec!["context".into()];
        let out = output(&answer(pre(), &noted));
        assert_eq!(out["additionalContext"], "note\ncontext");
        assert_eq!(out["permissionDecision"], "ask");
        assert_eq!(out["permissionDecisionReason"], crate::hook::ASK_REASON);
    }

    #[test]
    fn messages_after_a_tool_are_additional_context() {
        let mut noted = verdict(Decision::Allow, None);
        noted.messages = vec!["mind the output".into()];
        let out = output(&answer(spec("PostToolUse"), &noted));
        assert_eq!(out["hookEventName"], "PostToolUse");
        assert_eq!(out["additionalContext"], "mind the output");
        assert_eq!(answer(spec("Stop"), &noted), Answer::silent());
    }

    /// After a failed call, context is `additionalContext` under that event's name, and
    /// a denial (fail-closed, the adapter's own) or a flow stop stops the agent: no block
    /// is documented there.
    #[test]
    fn after_a_failed_call_context_is_given_and_a_denial_stops() {
        let failure = spec("PostToolUseFailure");
        assert_eq!(failure.ahp, AhpEvent::ToolAfter);
        let mut noted = verdict(Decision::Allow, None);
        noted.context = vec!["retry with --force-with-lease".into()];
        let out = output(&answer(failure, &noted));
        assert_eq!(
            out,
            json!({"hookEventName": "PostToolUseFailure",
                "additionalContext": "retry with --force-with-lease"})
        );
        let out = json_of(&answer(failure, &verdict(Decision::Deny, Some("no"))));
        assert_eq!(out, json!({"continue": false, "stopReason": "no"}));
        let mut stopped = verdict(Decision::Allow, None);
        stopped.stop = Some(Some("enough".into()));
        let out = json_of(&answer(failure, &stopped));
        assert_eq!(out, json!({"continue": false, "stopReason": "enough"}));
        assert_eq!(
            answer(failure, &verdict(Decision::Allow, None)),
            Answer::silent()
        );
    }

    #[test]
    fn a_denial_carries_no_modified_input() {
        let mut denied = verdict(Decision::Deny, Some("no"));
        denied.input = Some(Map::new());
        let answered = answer(pre(), &denied);
        let out = output(&answered);
        assert_eq!(out["permissionDecision"], "deny");
        assert_eq!(out["permissionDecisionReason"], "no");
        assert!(out.get("updatedInput").is_none(), "{out}");
        // Also a block by exit code, for a harness running Claude Code's hooks that reads
        // only that (Copilot CLI, Cursor).
        assert_eq!(
            (answered.exit, answered.stderr.as_slice()),
            (2, &["no".to_string()][..])
        );
    }

    /// Only a denial exits 2: an ask or a modification (an ask with the new input) is
    /// JSON on exit 0, which Claude Code reads only then.
    #[test]
    fn only_a_denial_blocks_by_exit_code() {
        let mut modified = verdict(Decision::Allow, None);
        modified.input = json!({"command": "ls -l"}).as_object().cloned();
        for verdict in [verdict(Decision::Ask, Some("sure?")), modified] {
            let answered = answer(pre(), &verdict);
            assert_eq!(
                (answered.exit, answered.stderr.len()),
                (0, 0),
                "{answered:?}"
            );
        }
    }
}
