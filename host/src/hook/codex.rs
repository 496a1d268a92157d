//! OpenAI Codex CLI (developers.openai.com/codex/hooks): Claude-shaped payloads and
//! `hooks.json`, timeout in seconds.
//!
//! Codex treats `ask` (and `continue`, `stopReason`, `suppressOutput`) as a failed hook
//! and runs the tool, and applies `updatedInput` only with `allow` — a grant. So the only
//! effect it really enforces before a tool runs is deny. Before a prompt it blocks with
//! `decision: block`. After a tool and before a stop its block is no AHP effect there
//! (the protocol has no deny at `tool.after` or `turn.finish.before`, and Codex ignores
//! `continue`), so those are only observed.

use super::install::Snippet;
use super::payload::Fields;
use super::{on, AhpEvent, Answer, EventSpec, Verdict};
use crate::{Decision, EffectKind as E};
use serde_json::{json, Value};

/// The mapped events and what Codex enforces at each.
pub const EVENTS: &[EventSpec] = &[
    on("PreToolUse", AhpEvent::ToolBefore, &[E::Deny]),
    on("PostToolUse", AhpEvent::ToolAfter, &[]),
    on("UserPromptSubmit", AhpEvent::TurnStart, &[E::Deny]),
    on("Stop", AhpEvent::TurnFinishBefore, &[]),
    on("SessionStart", AhpEvent::SessionStart, &[]),
];

/// Claude Code's payload shape, and the turn's id (`turn_id`), which Codex sends; no
/// subagent (Codex names none).
pub const FIELDS: Fields = Fields {
    turn_id: Some("turn_id"),
    agent: None,
    ..super::claude_code::FIELDS
};

/// The settings file the snippet belongs in.
pub const SETTINGS_FILE: &str = "~/.codex/hooks.json";

/// A denial as Claude Code writes it; anything else is no answer at all (an `ask` would
/// count as a failed hook and run the tool, so it can only be a denial here).
pub fn answer(spec: &EventSpec, verdict: &Verdict) -> Answer {
    match (spec.ahp, verdict.decision) {
        (AhpEvent::ToolBefore, _) => {}
        (AhpEvent::TurnStart, Decision::Deny) => {
            return Answer::json(json!({"decision": "block", "reason": verdict.reason()}))
        }
        _ => return super::exit_code_answer(spec, verdict),
    }
    match verdict.decision {
        Decision::Allow => Answer::silent(),
        Decision::Deny | Decision::Ask => Answer::json(json!({"hookSpecificOutput": {
            "hookEventName": spec.native,
            "permissionDecision": "deny",
            "permissionDecisionReason": verdict.reason(),
        }})),
    }
}

/// `hooks.json`: every mapped event (hooks must then be trusted once in `/hooks`).
pub fn snippet(snippet: &Snippet) -> Value {
    super::claude_code::claude_shaped(snippet, EVENTS, snippet.timeout_secs(), None)
}
