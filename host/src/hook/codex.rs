//! OpenAI Codex CLI (developers.openai.com/codex/hooks): Claude-shaped payloads and
//! `hooks.json`, timeout in seconds.
//!
//! Before a tool Codex treats `ask` (and `continue`, `stopReason`, `suppressOutput`) as
//! a failed hook and runs the tool, and applies `updatedInput` only with `allow` — a
//! grant. So the only effect it really enforces there is deny. Elsewhere it answers as
//! Claude Code does (codex-rs/hooks `events/*.rs`), and the answer is Claude Code's:
//! before a prompt it blocks with `decision: block` and stops the agent with `continue:
//! false` (the prompt is dropped either way); after a tool, before a prompt and at a
//! session start it takes context for the model in `hookSpecificOutput.additionalContext`
//! (a developer message). After a tool its `continue: false` only replaces the tool's
//! output, so no flow is offered there. At a stop `continue: false` stops the agent, and
//! `decision: block` with a non-empty reason makes it go on with that reason as a new
//! prompt: a flow `continue` (once per turn, while `stop_hook_active` is false; Codex
//! itself sets no bound). Before a compaction (`PreCompact`, `events/compact.rs`)
//! `continue: false` aborts it, the turn too: that is how a denial goes out there. Its
//! `systemMessage` is a warning in its UI, never the model's, so `message` is not
//! offered.

use super::install::Snippet;
use super::payload::Fields;
use super::{on, AhpEvent, Answer, EventSpec, Verdict};
use crate::{Decision, EffectKind as E};
use serde_json::{json, Value};

/// The mapped events and what Codex enforces at each.
pub const EVENTS: &[EventSpec] = &[
    on("PreToolUse", AhpEvent::ToolBefore, &[E::Deny]),
    on("PostToolUse", AhpEvent::ToolAfter, &[E::Inject]),
    on(
        "UserPromptSubmit",
        AhpEvent::TurnStart,
        &[E::Deny, E::Inject, E::Flow],
    ),
    on("Stop", AhpEvent::TurnFinishBefore, &[E::Flow]).continuing(),
    on("SubagentStop", AhpEvent::TurnFinishBefore, &[E::Flow]).continuing(),
    on("SessionStart", AhpEvent::SessionStart, &[E::Inject]),
    // Its `continue: false` aborts the compaction (and the turn with it), and so does
    // any failure there, at every compaction until it is fixed. Installed only for a
    // registration that selects context.compact.before.
    on("PreCompact", AhpEvent::ContextCompactBefore, &[E::Deny]).on_demand(),
];

/// Claude Code's payload shape (a subagent's `agent_id` and `agent_type` at its tool,
/// compaction and subagent-stop events), and the turn's id (`turn_id`), which Codex
/// sends.
pub const FIELDS: Fields = Fields {
    turn_id: Some("turn_id"),
    ..super::claude_code::FIELDS
};

/// The settings file the snippet belongs in.
pub const SETTINGS_FILE: &str = "~/.codex/hooks.json";

/// Before a tool a denial as Claude Code writes it, else no answer at all (an `ask` would
/// count as a failed hook and run the tool, so it can only be a denial here); elsewhere
/// Claude Code's answer. The denial also exits 2 with its reason on stderr, which Codex
/// reads as a block whatever stdout holds: it runs a hook through the user's shell, whose
/// startup files may print before the JSON and make it unreadable, a failed hook. So
/// does a denial or a stop before a prompt, which Codex would otherwise take for text
/// to add to it, the prompt going ahead.
pub fn answer(spec: &EventSpec, verdict: &Verdict) -> Answer {
    if spec.ahp != AhpEvent::ToolBefore {
        let answer = super::claude_code::after_tool_before(spec, verdict);
        let refused = match verdict.stop_reason() {
            Some(reason) => Some(reason),
            None => (verdict.decision == Decision::Deny).then(|| verdict.reason()),
        };
        return match refused {
            Some(reason) if spec.ahp == AhpEvent::TurnStart => Answer {
                stderr: vec![reason.to_string()],
                exit: 2,
                ..answer
            },
            _ => answer,
        };
    }
    match verdict.decision {
        Decision::Allow => Answer::silent(),
        Decision::Deny | Decision::Ask => Answer::json_and_blocked(
            json!({"hookSpecificOutput": {
                "hookEventName": spec.native,
                "permissionDecision": "deny",
                "permissionDecisionReason": verdict.reason(),
            }}),
            verdict.reason(),
        ),
    }
}

/// `hooks.json`: every mapped event (hooks must then be trusted once in `/hooks`).
pub fn snippet(snippet: &Snippet) -> Value {
    super::claude_code::claude_shaped(snippet, EVENTS, snippet.timeout_secs(), None)
}
