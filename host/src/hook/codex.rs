//! OpenAI Codex CLI (developers.openai.com/codex/hooks): Claude-shaped payloads and
//! `hooks.json`, timeout in seconds.
//!
//! Before a tool Codex treats `ask` (and `continue`, `stopReason`, `suppressOutput`) as
//! a failed hook and runs the tool, and applies `updatedInput` only with `allow` — a
//! grant. So the only effect it really enforces there is deny. Before a prompt it blocks
//! with `decision: block`. At a stop (codex-rs/hooks `events/stop.rs`) `continue: false`
//! stops the agent, and `decision: block` with a non-empty reason makes it go on with
//! that reason as a new prompt: a flow `continue` (once per turn, while
//! `stop_hook_active` is false; Codex itself sets no bound). After a tool its block is
//! no AHP effect (the protocol has no deny at `tool.after`), so that is only observed.

use super::claude_code::block;
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
    on("Stop", AhpEvent::TurnFinishBefore, &[E::Flow]).continuing(),
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
/// count as a failed hook and run the tool, so it can only be a denial here). At a stop,
/// [`at_stop`](super::at_stop), a continue as `decision: block`.
pub fn answer(spec: &EventSpec, verdict: &Verdict) -> Answer {
    match (spec.ahp, verdict.decision) {
        (AhpEvent::ToolBefore, _) => {}
        (AhpEvent::TurnStart, Decision::Deny) => return block(verdict.reason()),
        (AhpEvent::TurnFinishBefore, _) => return super::at_stop(verdict, block),
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
