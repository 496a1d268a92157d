//! GitHub Copilot CLI (github/docs, cli-hooks-reference): `.github/hooks/*.json`,
//! `timeoutSec`, camelCase payloads that name no event and encode `toolArgs` as a JSON
//! string.
//!
//! Before a tool runs Copilot enforces deny, ask, replaced arguments (`modifiedArgs`)
//! and context (`additionalContext`). Sources disagree on whether it reads exit codes,
//! so a denial is written both ways: the JSON and exit 2 with the reason.

use super::claude_code::{optional_string, required_object};
use super::install::Snippet;
use super::{AhpEvent, Answer, EventSpec, Payload, Verdict};
use crate::{Decision, EffectKind as E};
use serde_json::{json, Map, Value};

/// The mapped events and what Copilot CLI enforces at each.
pub const EVENTS: &[EventSpec] = &[
    EventSpec {
        native: "preToolUse",
        ahp: AhpEvent::ToolBefore,
        enforces: &[E::Deny, E::Ask, E::Modify, E::Message],
    },
    EventSpec {
        native: "postToolUse",
        ahp: AhpEvent::ToolAfter,
        enforces: &[],
    },
    EventSpec {
        native: "userPromptSubmitted",
        ahp: AhpEvent::TurnStart,
        enforces: &[],
    },
    EventSpec {
        native: "sessionStart",
        ahp: AhpEvent::SessionStart,
        enforces: &[],
    },
    EventSpec {
        native: "sessionEnd",
        ahp: AhpEvent::SessionEnd,
        enforces: &[],
    },
];

/// The settings file the snippet belongs in.
pub const SETTINGS_FILE: &str = ".github/hooks/ahp.json";

/// `sessionId`, `cwd`, and for tool events `toolName` with `toolArgs` (a JSON-encoded
/// object), or the snake_case `tool_name` / `tool_input` of Copilot's Claude-compatible
/// form.
pub fn read(payload: &Map<String, Value>, event: &str) -> Result<Payload, String> {
    let tool = match event {
        "preToolUse" | "postToolUse" => Some(tool(payload)?),
        _ => None,
    };
    let session_id = match optional_string(payload, "sessionId")? {
        Some(id) => id,
        None => optional_string(payload, "session_id")?.ok_or("sessionId is required")?,
    };
    Ok(Payload {
        session_id,
        cwd: optional_string(payload, "cwd")?,
        call_id: None,
        trigger: optional_string(payload, "source")?,
        reason: optional_string(payload, "reason")?,
        tool,
    })
}

fn tool(payload: &Map<String, Value>) -> Result<(String, Map<String, Value>), String> {
    let Some(name) = optional_string(payload, "toolName")? else {
        let name = optional_string(payload, "tool_name")?.ok_or("toolName is required")?;
        return Ok((name, required_object(payload, "tool_input")?));
    };
    let input = match payload.get("toolArgs") {
        Some(Value::String(encoded)) => match serde_json::from_str::<Value>(encoded) {
            Ok(Value::Object(input)) => input,
            Ok(_) => return Err("toolArgs must encode a JSON object".into()),
            Err(e) => return Err(format!("toolArgs is not JSON: {e}")),
        },
        // The SDK hands over an object; accept it as it is.
        Some(Value::Object(input)) => input.clone(),
        Some(_) => return Err("toolArgs must be a JSON-encoded object".into()),
        None => return Err("toolArgs is required".into()),
    };
    Ok((name, input))
}

/// `preToolUse`: deny (JSON and exit 2), ask, replaced arguments, context, or nothing.
pub fn answer(spec: &EventSpec, verdict: &Verdict) -> Answer {
    if spec.ahp != AhpEvent::ToolBefore {
        return super::exit_code_answer(verdict);
    }
    tool_answer(verdict)
}

/// The `preToolUse` answer, also the JSON half of a denial for an unknown event.
pub fn tool_answer(verdict: &Verdict) -> Answer {
    let mut output = Map::new();
    match verdict.decision {
        Decision::Deny => {
            let denial =
                json!({"permissionDecision": "deny", "permissionDecisionReason": verdict.reason()});
            let mut answer = Answer::blocked(verdict.reason());
            answer.stdout = format!("{denial}\n");
            return answer;
        }
        Decision::Ask => {
            output.insert("permissionDecision".into(), json!("ask"));
            output.insert("permissionDecisionReason".into(), json!(verdict.reason()));
        }
        Decision::Allow => {}
    }
    if let Some(input) = &verdict.input {
        output.insert("modifiedArgs".into(), json!(input));
    }
    if let Some(text) = verdict.message_text() {
        output.insert("additionalContext".into(), json!(text));
    }
    match output.is_empty() {
        true => Answer::silent(),
        false => Answer::json(Value::Object(output)),
    }
}

/// `.github/hooks/ahp.json`: every mapped event; the command names its event, since
/// Copilot's payloads do not.
pub fn snippet(snippet: &Snippet) -> Value {
    let hooks: Map<String, Value> = EVENTS
        .iter()
        .map(|spec| {
            let hook = json!({
                "type": "command",
                "bash": snippet.command(Some(spec.native)),
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
    fn replaced_arguments_go_in_modified_args_without_a_grant() {
        let mut modified = verdict(Decision::Allow, None);
        modified.input = json!({"command": "ls"}).as_object().cloned();
        let answer = tool_answer(&modified);
        assert_eq!(answer.exit, 0);
        assert_eq!(answer.stdout, "{\"modifiedArgs\":{\"command\":\"ls\"}}\n");
    }

    #[test]
    fn tool_args_must_encode_an_object() {
        let payload = json!({"sessionId": "s", "toolName": "bash", "toolArgs": "[1]"});
        let error = read(payload.as_object().unwrap(), "preToolUse").unwrap_err();
        assert!(error.contains("toolArgs"), "{error}");
    }
}
