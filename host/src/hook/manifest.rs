//! A harness's capability manifest (digest §11, conformance O11): what `ahp hook
//! HARNESS` emits and enforces, as `hooks/capabilities` answers it. It is embedded in
//! every `session.start`, and `ahp hook manifest HARNESS` prints it.
//!
//! Everything in it is derived from the adapter itself, so it cannot claim more than the
//! adapter does: the events are the harness's mapped events ([`Harness::events`]), each
//! intercepted one with the capabilities advertised there (its declaration's entry),
//! plus the two the interceptor emits for them (a denied call's `tool.after`, and
//! `hook.failure`). What it cannot say is in `gaps`, never left to mean "unlimited".

use super::event::{gap, UNSAID};
use super::{AhpEvent, Harness};
use ahp_vocab::{Capabilities, EffectKind, PROTOCOL_VERSION, SUPPORTED_TIMEOUT_MS};
use serde_json::{json, Value};

/// The events the interceptor itself emits under any harness, observe only: the
/// `tool.after` of a call the hook denied, and a backend's failure.
const EMITTED: [&str; 2] = ["tool.after", "hook.failure"];

/// `hooks/capabilities`' result for `harness`: `{protocolVersion, manifest}`.
pub fn capabilities(harness: Harness) -> Value {
    json!({"protocolVersion": PROTOCOL_VERSION, "manifest": manifest(harness)})
}

/// The manifest of `harness` (capabilities-response.schema.json `manifest`).
pub fn manifest(harness: Harness) -> Value {
    // Each AHP event once, though two native events map to it (a stop, a subagent's).
    let mut events: Vec<Value> = harness
        .distinct_events()
        .map(|spec| match spec.capability() {
            Some(capability) => json!({
                "event": spec.ahp.as_str(),
                "modes": ["observe", "intercept"],
                "capabilities": Capabilities(&capability),
            }),
            None => observed(spec.ahp.as_str()),
        })
        .collect();
    for emitted in EMITTED {
        if !events.iter().any(|e| e["event"] == emitted) {
            events.push(observed(emitted));
        }
    }
    // Where `ahp hook install` puts the hooks: the user's own settings, or the project's.
    let scope = match harness.settings_file().starts_with('~') {
        true => "user",
        false => "project",
    };
    let mut gaps = vec![
        gap(
            "contentCategories",
            "prompts, responses and tool output reach backends only in `native`",
        ),
        gap("limits.maxUploadBytes", "content upload is not supported"),
    ];
    // A hook written only for a registration that selects its event (Gemini's before a
    // model request and a stop, Codex's before a compaction): claimed, but emitted only
    // where it was installed so.
    for spec in harness.distinct_events().filter(|spec| spec.on_demand) {
        gaps.push(gap(
            spec.ahp.as_str(),
            "emitted only where `ahp hook install` wrote its hook: for a registration that \
             selected it then",
        ));
    }
    let fields = harness.fields();
    // The permission mode: "unknown" at a session.start where the harness does not say.
    let mode_gap = match fields.permission_mode {
        Some(_) => format!("when {UNSAID}, \"unknown\""),
        None => UNSAID.to_owned(),
    };
    gaps.push(gap("session.start.permissionMode", &mode_gap));
    // Without the harness's tool-use id, a call's id is a hash of what it was asked.
    if fields.call_id.is_none() {
        gaps.push(gap(
            "call.id",
            "synthesized from the session, tool name and input: the same for a retry, but \
             a call whose input a backend modified has another in its tool.after, and two \
             calls alike in one session share one",
        ));
    }
    // Codex sends its tool hooks for some of its tools only.
    if harness == Harness::Codex {
        gaps.push(gap(
            "tool.before.tools",
            "Codex sends a PreToolUse for its shell, apply_patch and MCP tools; its other \
             tools (a web search its provider runs, its plan) may run with no tool.before",
        ));
    }
    // The effects a call is not offered whatever its event enforces (`withheld`).
    let before_tool = harness
        .events()
        .iter()
        .find(|spec| spec.ahp == AhpEvent::ToolBefore);
    let enforced = |kind| before_tool.is_some_and(|spec| spec.enforces.contains(&kind));
    if enforced(EffectKind::Modify) {
        gaps.push(gap(
            "tool.before.modify",
            "not offered for an input holding U+FFFD (a lone UTF-16 surrogate as read): \
             written back, it would differ where no backend changed it",
        ));
    }
    if enforced(EffectKind::Ask) && fields.permission_mode.is_some() {
        gaps.push(gap(
            "tool.before.ask",
            "not offered in a session whose permission mode is auto, where the harness \
             has been reported to run the tool unasked",
        ));
    }
    // An MCP tool the adapter cannot tell from a native one.
    if fields.mcp_context.is_none() && !fields.mcp_by_name {
        gaps.push(gap(
            "tool.origin",
            "the harness names an MCP server's tools without the mcp__server__tool mark or \
             an account of the server: such a call reads as native, with no mcp descriptor",
        ));
    }
    // A server named from the tool's name, where the harness gives no account of it.
    if fields.mcp_by_name {
        gaps.push(gap(
            "tool.mcp.server.id",
            "where the harness gives no account of the server, inferred from the tool's \
             name (mcp__SERVER__TOOL) at its first `__`: a server whose name holds `__` is \
             named by its part before it (provenance: inferred)",
        ));
    }
    // Every event names the harness, its version "unknown" where the harness does not say.
    if fields.harness_version.is_none() {
        gaps.push(gap("harness.version", UNSAID));
    }
    // A session start's trigger is one of AHP's words, `startup` standing for the rest.
    let trigger_gap = match fields.start_trigger {
        Some(_) => {
            "a clear or a fork (which would have to name the session it came from) or a word \
             AHP does not name is startup"
        }
        None => "the harness does not say; startup stands for it",
    };
    gaps.push(gap("session.start.trigger", trigger_gap));
    // The stop's entry below is what every call is offered; continue is offered per call.
    if max_continuations(harness) > 0 {
        gaps.push(gap(
            "turn.finish.before.flow.continue",
            "offered per call, while the harness says no stop hook has made the agent go \
             on this turn (stop_hook_active)",
        ));
    }
    json!({
        "events": events,
        "gaps": gaps,
        "transports": ["http", "stdio"],
        "authentication": ["bearer", "oauth"],
        "toolPaths": [super::event::TOOL_PATH],
        "contentCategories": [],
        "limits": {
            "minTimeoutMs": SUPPORTED_TIMEOUT_MS.start(),
            "maxTimeoutMs": SUPPORTED_TIMEOUT_MS.end(),
            "maxContinuations": max_continuations(harness),
        },
        "managedPolicy": {"scopes": [scope], "disableable": true},
        "correlationIdentityFields": correlation(harness),
    })
}

/// How many times in a turn a `continue` can make the agent go on: once where the
/// harness goes on at a stop ([`EventSpec::continues`](super::EventSpec::continues)),
/// never elsewhere.
fn max_continuations(harness: Harness) -> u8 {
    u8::from(harness.events().iter().any(|spec| spec.continues))
}

/// An event emitted to observers only: no effects.
fn observed(event: &str) -> Value {
    json!({"event": event, "modes": ["observe"], "capabilities": {"effects": []}})
}

/// The identity fields the events of `harness` carry, for correlating them: every
/// event's id and source, the session, a tool call's id where there are tool events (the
/// same in a call's `tool.before` and `tool.after`, but where it is synthesized, see the
/// `call.id` gap), and
/// `parentEventId` (hook.failure). Not `turn.id`: one hook process sees one event of a
/// turn, so the id it synthesizes names that event alone.
fn correlation(harness: Harness) -> Vec<&'static str> {
    let tools = harness
        .events()
        .iter()
        .any(|spec| matches!(spec.ahp, AhpEvent::ToolBefore | AhpEvent::ToolAfter));
    let mut fields = vec!["id", "source", "session.id"];
    if tools {
        fields.push("call.id");
    }
    fields.push("parentEventId");
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A turn can be continued once where the harness goes on at a stop, and the
    /// manifest says continue is offered per call there; never elsewhere.
    #[test]
    fn the_manifest_says_how_often_a_turn_can_be_continued() {
        let cases = [
            (Harness::ClaudeCode, 1),
            (Harness::Codex, 1),
            (Harness::Gemini, 1),
            (Harness::Cursor, 0),
            (Harness::Copilot, 0),
        ];
        for (harness, limit) in cases {
            let manifest = manifest(harness);
            assert_eq!(
                manifest["limits"]["maxContinuations"],
                json!(limit),
                "{harness:?}"
            );
            let said = has_gap(harness, "turn.finish.before.flow.continue");
            assert_eq!(said, limit > 0, "{harness:?}");
        }
    }

    /// Codex's manifest says its tool hooks do not cover every tool; the others' do not.
    #[test]
    fn only_codex_says_some_tools_run_with_no_tool_before() {
        for harness in Harness::ALL {
            let said = has_gap(harness, "tool.before.tools");
            assert_eq!(said, harness == Harness::Codex, "{harness:?}");
        }
    }

    /// Whether `harness`'s manifest has a gap at `path`.
    fn has_gap(harness: Harness, path: &str) -> bool {
        let manifest = manifest(harness);
        let gaps = manifest["gaps"].as_array().expect("gaps");
        gaps.iter().any(|gap| gap["path"] == path)
    }

    /// An event whose hook `hook install` writes only for a registration that selects it
    /// is a gap: claimed, but emitted only where it was installed so (digest §11: what is
    /// left out never means universal support).
    #[test]
    fn an_event_whose_hook_is_installed_on_demand_is_a_gap() {
        let expected: [(Harness, &[&str]); 5] = [
            (Harness::ClaudeCode, &[]),
            (Harness::Codex, &["context.compact.before"]),
            (
                Harness::Gemini,
                &["model.request.before", "turn.finish.before"],
            ),
            (Harness::Cursor, &[]),
            (Harness::Copilot, &[]),
        ];
        for (harness, on_demand) in expected {
            let manifest = manifest(harness);
            let gaps = manifest["gaps"].as_array().expect("gaps");
            let mut gapped: Vec<&str> = (manifest["events"].as_array().expect("events"))
                .iter()
                .filter_map(|e| e["event"].as_str())
                .filter(|event| gaps.iter().any(|gap| gap["path"] == *event))
                .collect();
            gapped.sort_unstable();
            assert_eq!(gapped, on_demand, "{harness:?}");
        }
    }

    /// What a call is not offered though its event enforces it is said: `modify` where
    /// the harness takes a modified input before a tool, `ask` where it also says the
    /// session's permission mode (Claude Code).
    #[test]
    fn an_effect_withheld_per_call_is_a_gap() {
        for harness in Harness::ALL {
            let modifies = !matches!(harness, Harness::Codex | Harness::Cursor);
            assert_eq!(
                has_gap(harness, "tool.before.modify"),
                modifies,
                "{harness:?}"
            );
            let asks_by_mode = harness == Harness::ClaudeCode;
            assert_eq!(
                has_gap(harness, "tool.before.ask"),
                asks_by_mode,
                "{harness:?}"
            );
        }
    }

    /// Where the harness names its MCP tools in no way the adapter reads (Copilot's
    /// `server-tool`, Cursor's own), the manifest says their calls may read as native.
    #[test]
    fn an_mcp_tool_the_adapter_cannot_tell_is_a_gap() {
        for harness in Harness::ALL {
            let untold = matches!(harness, Harness::Cursor | Harness::Copilot);
            assert_eq!(has_gap(harness, "tool.origin"), untold, "{harness:?}");
            // A server named from the tool's name is a guess, said so.
            let by_name = harness.fields().mcp_by_name;
            assert_eq!(
                has_gap(harness, "tool.mcp.server.id"),
                by_name,
                "{harness:?}"
            );
        }
    }

    /// Where the harness sends no tool-use id, the manifest says what a synthesized
    /// `call.id` does not correlate (Gemini and Copilot, which can also modify the input).
    #[test]
    fn a_synthesized_call_id_is_a_gap() {
        for harness in Harness::ALL {
            let synthesized = matches!(harness, Harness::Gemini | Harness::Copilot);
            assert_eq!(has_gap(harness, "call.id"), synthesized, "{harness:?}");
        }
    }
}
