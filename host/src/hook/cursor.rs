//! Cursor (cursor.com/docs/hooks): `.cursor/hooks.json`, payloads keyed by
//! `conversation_id`, answers in `permission`.
//!
//! Cursor's `preToolUse` enforces allow and deny only (`ask` is for
//! `beforeShellExecution` / `beforeMCPExecution`). With `failClosed: true` a permission
//! hook that prints nothing is refused, so no objection must be written as Cursor's one
//! non-denial word there, `allow`; it grants nothing beyond Cursor's own approvals, which
//! `preToolUse` does not replace.

use super::claude_code::{optional_string, required_object, required_string};
use super::install::Snippet;
use super::{AhpEvent, Answer, EventSpec, Payload, Verdict};
use crate::{Decision, EffectKind as E};
use serde_json::{json, Map, Value};

/// The mapped events and what Cursor enforces at each.
pub const EVENTS: &[EventSpec] = &[
    EventSpec {
        native: "preToolUse",
        ahp: AhpEvent::ToolBefore,
        enforces: &[E::Deny],
    },
    EventSpec {
        native: "postToolUse",
        ahp: AhpEvent::ToolAfter,
        enforces: &[],
    },
    EventSpec {
        native: "beforeSubmitPrompt",
        ahp: AhpEvent::TurnStart,
        enforces: &[E::Deny],
    },
    EventSpec {
        native: "stop",
        ahp: AhpEvent::TurnFinishBefore,
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
pub const SETTINGS_FILE: &str = ".cursor/hooks.json";

/// `conversation_id` as the session, `cwd` (else the first workspace root), and for tool
/// events `tool_name`, `tool_input` and `tool_use_id`.
pub fn read(payload: &Map<String, Value>, event: &str) -> Result<Payload, String> {
    let tool = match event {
        "preToolUse" | "postToolUse" => Some((
            required_string(payload, "tool_name")?,
            required_object(payload, "tool_input")?,
        )),
        _ => None,
    };
    let first_root = payload
        .get("workspace_roots")
        .and_then(|roots| roots.get(0))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(Payload {
        session_id: required_string(payload, "conversation_id")?,
        cwd: optional_string(payload, "cwd")?.or(first_root),
        call_id: optional_string(payload, "tool_use_id")?,
        trigger: None,
        reason: optional_string(payload, "reason")?,
        tool,
    })
}

/// Always a JSON answer: `permission` before a tool, `continue` before a prompt, `{}`
/// elsewhere, and exit 2 for a denial Cursor cannot otherwise express.
pub fn answer(spec: &EventSpec, verdict: &Verdict) -> Answer {
    let denied = verdict.decision != Decision::Allow;
    match spec.ahp {
        AhpEvent::ToolBefore if denied => Answer::json(json!({
            "permission": "deny",
            "user_message": verdict.reason(),
            "agent_message": verdict.reason(),
        })),
        AhpEvent::ToolBefore => Answer::json(json!({"permission": "allow"})),
        AhpEvent::TurnStart if denied => {
            Answer::json(json!({"continue": false, "user_message": verdict.reason()}))
        }
        AhpEvent::TurnStart => Answer::json(json!({"continue": true})),
        _ if denied => super::exit_code_answer(verdict),
        _ => Answer::json(json!({})),
    }
}

/// `.cursor/hooks.json`: every mapped event, each failing closed.
pub fn snippet(snippet: &Snippet) -> Value {
    let hooks: Map<String, Value> = EVENTS
        .iter()
        .map(|spec| {
            let hook = json!({
                "command": snippet.command(None),
                "timeout": snippet.timeout_secs(),
                "failClosed": true,
            });
            (spec.native.to_string(), json!([hook]))
        })
        .collect();
    json!({"version": 1, "hooks": hooks})
}
