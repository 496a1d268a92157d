//! Cursor (cursor.com/docs/hooks): `.cursor/hooks.json`, payloads keyed by
//! `conversation_id`, answers in `permission`.
//!
//! Cursor's `preToolUse` enforces allow and deny only (`ask` is for
//! `beforeShellExecution` / `beforeMCPExecution`). Its `permission: "allow"` is a word
//! of permission, and the contract does not say it leaves Cursor's own approvals in
//! place, so the adapter never writes it: no objection is `{}` — valid JSON, so
//! `failClosed: true` does not read it as a failed hook, and no `permission`, so it
//! grants nothing. Cursor does not document what it does with a permission hook's
//! answer without `permission`; should it refuse it, every call is blocked, never
//! granted. `updated_input` and `agent_message` are not advertised: the contract does
//! not say Cursor applies them without `permission: "allow"`, the grant.

use super::install::Snippet;
use super::payload::{Fields, SNAKE_TOOL};
use super::{on, AhpEvent, Answer, EventSpec, Verdict};
use crate::{Decision, EffectKind as E};
use serde_json::{json, Map, Value};

/// The mapped events and what Cursor enforces at each.
pub const EVENTS: &[EventSpec] = &[
    on("preToolUse", AhpEvent::ToolBefore, &[E::Deny]),
    on("postToolUse", AhpEvent::ToolAfter, &[]),
    on("beforeSubmitPrompt", AhpEvent::TurnStart, &[E::Deny]),
    on("stop", AhpEvent::TurnFinishBefore, &[]),
    on("sessionStart", AhpEvent::SessionStart, &[]),
    on("sessionEnd", AhpEvent::SessionEnd, &[]),
];

/// The settings file the snippet belongs in.
pub const SETTINGS_FILE: &str = ".cursor/hooks.json";

/// `conversation_id` as the session, `cwd` (else the first workspace root), the
/// `workspace_roots`, the `model`, `cursor_version` as the harness's version, at `stop`
/// its `status` and `loop_count`, and for tool events `tool_name`, `tool_input` and
/// `tool_use_id`.
pub const FIELDS: Fields = Fields {
    session: &["conversation_id"],
    tool: &[SNAKE_TOOL],
    call_id: Some("tool_use_id"),
    turn_id: None,
    start_trigger: None,
    compact_trigger: None,
    model: Some("model"),
    workspace_roots: Some("workspace_roots"),
    mcp_context: None,
    mcp_by_name: false,
    harness_version: Some("cursor_version"),
    agent: None,
    permission_mode: None,
    model_request: None,
    continued: None,
    // Its stop fires when the agent completes, errs or is aborted, and says which.
    stop_status: Some("status"),
    stop_loop_count: Some("loop_count"),
    // Its after-tool hook runs after a success only.
    ended: None,
    interrupted: None,
};

/// Always a JSON answer: `permission` before a tool, `continue` before a prompt, `{}`
/// elsewhere, and exit 2 for a denial Cursor cannot otherwise express.
pub fn answer(spec: &EventSpec, verdict: &Verdict) -> Answer {
    let denied = verdict.decision != Decision::Allow;
    match spec.ahp {
        // On exit 2 too, which Cursor reads as a denial whatever stdout holds.
        AhpEvent::ToolBefore if denied => Answer::json_and_blocked(
            json!({
                "permission": "deny",
                "user_message": verdict.reason(),
                "agent_message": verdict.reason(),
            }),
            verdict.reason(),
        ),
        AhpEvent::TurnStart if denied => {
            Answer::json(json!({"continue": false, "user_message": verdict.reason()}))
        }
        AhpEvent::TurnStart => Answer::json(json!({"continue": true})),
        // Exit 2 at `stop` would keep the agent working: there a denial is `{}` too.
        AhpEvent::TurnFinishBefore => Answer::json(json!({})),
        _ if denied => super::exit_code_answer(spec, verdict),
        _ => Answer::json(json!({})),
    }
}

/// `.cursor/hooks.json`: every mapped event, failing closed where
/// [`Snippet::fails_closed`] says: where Cursor lets a hook decide. Cursor's `stop` is
/// observed, and never fails closed anyway: a failure there must not keep the agent
/// working (as the Claude Code snippet leaves `onFailure` off `Stop`), and Cursor does
/// not say what failing closed means at a stop.
pub fn snippet(snippet: &Snippet) -> Value {
    let hooks: Map<String, Value> = EVENTS
        .iter()
        .filter(|spec| snippet.installs(spec))
        .map(|spec| {
            let mut hook = json!({
                "command": snippet.command(spec),
                "timeout": snippet.timeout_secs(),
            });
            if snippet.fails_closed(spec) {
                hook["failClosed"] = json!(true);
            }
            (spec.native.to_string(), json!([hook]))
        })
        .collect();
    json!({"version": 1, "hooks": hooks})
}
