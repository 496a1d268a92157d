//! Claude Code (code.claude.com/docs/en/hooks): settings `.claude/settings.json`, hook
//! timeout in seconds, snake_case payloads, answers in `hookSpecificOutput`.
//!
//! Claude Code enforces deny, ask, a replaced input (`updatedInput`) and context for the
//! model (`additionalContext`) before a tool runs. Its `allow` skips its own permission
//! prompt, so the adapter never writes it: no objection is an empty answer, and a
//! replaced input goes out with `ask`, so the user sees what will run.
//!
//! After a tool, before a prompt and before stopping it blocks with `decision: block`
//! (the tool already ran; the prompt is erased; the agent goes on), takes context in
//! `additionalContext`, and stops the agent with `continue: false` on any event.

use super::install::Snippet;
use super::{AhpEvent, Answer, EventSpec, Payload, Verdict};
use crate::{Decision, EffectKind as E};
use serde_json::{json, Map, Value};

/// The mapped events and what Claude Code enforces at each.
pub const EVENTS: &[EventSpec] = &[
    EventSpec {
        native: "PreToolUse",
        ahp: AhpEvent::ToolBefore,
        enforces: &[E::Deny, E::Ask, E::Modify, E::Message],
    },
    EventSpec {
        native: "PostToolUse",
        ahp: AhpEvent::ToolAfter,
        enforces: &[E::Flow, E::Message],
    },
    EventSpec {
        native: "UserPromptSubmit",
        ahp: AhpEvent::TurnStart,
        enforces: &[E::Deny, E::Flow, E::Message],
    },
    EventSpec {
        native: "Stop",
        ahp: AhpEvent::TurnFinishBefore,
        enforces: &[E::Flow],
    },
    EventSpec {
        native: "SessionStart",
        ahp: AhpEvent::SessionStart,
        enforces: &[E::Message],
    },
    EventSpec {
        native: "SessionEnd",
        ahp: AhpEvent::SessionEnd,
        enforces: &[],
    },
    EventSpec {
        native: "PreCompact",
        ahp: AhpEvent::ContextCompactBefore,
        enforces: &[],
    },
];

/// The settings file the snippet belongs in.
pub const SETTINGS_FILE: &str = ".claude/settings.json";

/// Reads a Claude-shaped payload (also Codex's): `session_id`, `cwd`, and for tool events
/// `tool_name`, `tool_input` (an object) and `tool_use_id`.
pub fn read(payload: &Map<String, Value>, event: &str) -> Result<Payload, String> {
    let tool = match event {
        "PreToolUse" | "PostToolUse" => Some((
            required_string(payload, "tool_name")?,
            required_object(payload, "tool_input")?,
        )),
        _ => None,
    };
    Ok(Payload {
        session_id: required_string(payload, "session_id")?,
        cwd: optional_string(payload, "cwd")?,
        call_id: optional_string(payload, "tool_use_id")?,
        trigger: optional_string(payload, "source")?,
        reason: optional_string(payload, "reason")?,
        tool,
    })
}

/// The answer to `PreToolUse`, or [`after_tool_before`] for the other events.
pub fn answer(spec: &EventSpec, verdict: &Verdict) -> Answer {
    if spec.ahp != AhpEvent::ToolBefore {
        return after_tool_before(spec, verdict);
    }
    let mut output = json!({"hookEventName": spec.native});
    let decision = match (verdict.decision, &verdict.input) {
        (Decision::Deny, _) => Some("deny"),
        (Decision::Ask, _) | (Decision::Allow, Some(_)) => Some("ask"),
        (Decision::Allow, None) => None,
    };
    if let Some(decision) = decision {
        output["permissionDecision"] = json!(decision);
        output["permissionDecisionReason"] = json!(verdict.reason());
    }
    if verdict.decision != Decision::Deny {
        if let Some(input) = &verdict.input {
            output["updatedInput"] = json!(input);
        }
        if let Some(text) = verdict.message_text() {
            output["additionalContext"] = json!(text);
        }
    }
    match output.as_object().map(Map::len) {
        Some(1) => Answer::silent(),
        _ => Answer::json(json!({"hookSpecificOutput": output})),
    }
}

/// Every event but `PreToolUse`: a denial is `decision: block` where Claude Code blocks
/// (after a tool, before a prompt or a stop) and `continue: false` at `SessionStart`,
/// whose only block is to stop; a flow stop is `continue: false`; messages go to
/// `additionalContext`. The events it enforces nothing at answer by exit code.
fn after_tool_before(spec: &EventSpec, verdict: &Verdict) -> Answer {
    let blocks = matches!(
        spec.ahp,
        AhpEvent::ToolAfter | AhpEvent::TurnStart | AhpEvent::TurnFinishBefore
    );
    let stop = |reason: &str| Answer::json(json!({"continue": false, "stopReason": reason}));
    match (verdict.decision, &verdict.stop) {
        (Decision::Deny, _) if blocks => {
            Answer::json(json!({"decision": "block", "reason": verdict.reason()}))
        }
        (Decision::Deny, _) if spec.ahp == AhpEvent::SessionStart => stop(verdict.reason()),
        (Decision::Deny, _) => super::exit_code_answer(verdict),
        (_, Some(reason)) => stop(reason.as_deref().unwrap_or(super::generic_reason())),
        _ => match verdict.message_text() {
            Some(text) if spec.enforces.contains(&E::Message) => {
                Answer::json(json!({"hookSpecificOutput": {
                    "hookEventName": spec.native,
                    "additionalContext": text,
                }}))
            }
            _ => Answer::silent(),
        },
    }
}

/// `.claude/settings.json` hooks: every mapped event, blocking when the hook fails.
pub fn snippet(snippet: &Snippet) -> Value {
    claude_shaped(
        snippet,
        EVENTS,
        snippet.timeout_secs(),
        Some(("onFailure", json!("block"))),
    )
}

/// The `hooks` object Claude Code and Codex share: per event one matcher group (tool
/// events match every tool) with one command hook.
pub fn claude_shaped(
    snippet: &Snippet,
    events: &[EventSpec],
    timeout: u64,
    extra: Option<(&str, Value)>,
) -> Value {
    let mut hooks = Map::new();
    for spec in events {
        let mut hook =
            json!({"type": "command", "command": snippet.command(None), "timeout": timeout});
        if let Some((key, value)) = &extra {
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

/// `key` must be a non-empty string.
pub fn required_string(payload: &Map<String, Value>, key: &str) -> Result<String, String> {
    optional_string(payload, key)?.ok_or_else(|| format!("{key} is required"))
}

/// `key`, when present, must be a non-empty string.
pub fn optional_string(payload: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match payload.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if !text.is_empty() => Ok(Some(text.clone())),
        Some(_) => Err(format!("{key} must be a non-empty string")),
    }
}

/// `key` must be a JSON object (a parsed tool input).
pub fn required_object(
    payload: &Map<String, Value>,
    key: &str,
) -> Result<Map<String, Value>, String> {
    match payload.get(key) {
        Some(Value::Object(object)) => Ok(object.clone()),
        Some(_) => Err(format!("{key} must be a JSON object")),
        None => Err(format!("{key} is required")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::tests::verdict;

    fn pre() -> &'static EventSpec {
        &EVENTS[0]
    }

    fn output(answer: &Answer) -> Value {
        assert_eq!(answer.exit, 0, "{answer:?}");
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
    fn a_denial_after_a_tool_before_a_prompt_or_a_stop_is_decision_block() {
        for native in ["PostToolUse", "UserPromptSubmit", "Stop"] {
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
        let mut stopped = verdict(Decision::Allow, None);
        stopped.stop = Some(Some("enough".into()));
        let out = json_of(&answer(spec("Stop"), &stopped));
        assert_eq!(out, json!({"continue": false, "stopReason": "enough"}));
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

    #[test]
    fn a_denial_carries_no_modified_input() {
        let mut denied = verdict(Decision::Deny, Some("no"));
        denied.input = Some(Map::new());
        let out = output(&answer(pre(), &denied));
        assert_eq!(out["permissionDecision"], "deny");
        assert_eq!(out["permissionDecisionReason"], "no");
        assert!(out.get("updatedInput").is_none(), "{out}");
    }
}
