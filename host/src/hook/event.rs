//! The AHP event built from a harness payload: envelope, identities and tool fields.
//!
//! Identities are derived, never random: the source is a hash of the installation, a
//! missing call id a hash of what identifies the call (so the same call gets the same id
//! in its `tool.before` and `tool.after`, and on every retry), and the event id adds the
//! creation time and process to that. The `tool.after` of a denied call ([`denied_after`])
//! takes its `tool.before`'s identities and an id derived from that event's.

use super::payload::{Ended, StopStatus};
use super::{AhpEvent, EventSpec, Harness, Payload};
use serde_json::{json, Map, Value};
use sha2::{Digest as _, Sha256};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The error message of a `tool.after` whose call failed, as the harness reported.
const TOOL_FAILED: &str = "The tool call failed.";

/// The `path` of every tool event: the harness's native tool path.
pub(super) const TOOL_PATH: &str = "native";

/// The AHP event for `payload`, carrying the whole provider payload in `native` (the
/// component removes it unless the subscription sets `includeNative`).
pub fn build(
    harness: Harness,
    spec: &EventSpec,
    payload: &Payload,
    source: &str,
    native: Map<String, Value>,
) -> Value {
    let now = since_epoch();
    let mut session = json!({"id": payload.session_id});
    if let Some(cwd) = &payload.cwd {
        session["cwd"] = json!(cwd);
    }
    if !payload.workspace_roots.is_empty() {
        session["workspaceRoots"] = json!(payload.workspace_roots);
    }
    if let Some(model) = &payload.model {
        session["model"] = json!(model);
    }
    if let Some((id, kind)) = &payload.agent {
        session["agent"] = json!({"id": id});
        if let Some(kind) = kind {
            session["agent"]["type"] = json!(kind);
        }
    }
    let mut event = json!({
        "source": source,
        "type": spec.ahp.as_str(),
        "time": rfc3339(now.as_secs()),
        "session": session,
        "native": {"provider": harness.name(), "eventName": spec.native, "payload": native},
    });
    let mut identity = vec![
        harness.name().to_string(),
        payload.session_id.clone(),
        spec.native.to_string(),
    ];
    if let Some((name, input)) = &payload.tool {
        let call = match &payload.call_id {
            Some(id) => json!({"id": id}),
            None => {
                json!({"id": synthesized_call_id(&payload.session_id, name, input), "synthesized": true})
            }
        };
        identity.push(call["id"].as_str().unwrap_or_default().to_string());
        event["call"] = call;
        event["tool"] = tool(name, input, payload.mcp_context.as_ref());
        event["path"] = json!(TOOL_PATH);
    }
    match spec.ahp {
        AhpEvent::ToolAfter => {
            let (outcome, execution) = match payload.ended {
                Ended::Ok => ("ok", json!({"status": "executed"})),
                Ended::Error => {
                    // The harness's own words about the failure are its content, not
                    // what a backend selected: only that it failed.
                    event["error"] = json!({"class": "operation", "message": TOOL_FAILED});
                    ("error", json!({"status": "executed"}))
                }
                Ended::Denied => ("denied", json!({"status": "skipped", "reason": "policy"})),
                Ended::Timeout => ("timeout", json!({"status": "executed"})),
                // It had started: interrupted, not skipped.
                Ended::Cancelled => ("cancelled", json!({"status": "executed"})),
            };
            event["outcome"] = json!(outcome);
            event["execution"] = execution;
            event["items"] = json!([]);
            // A call that ran may have output: its emptiness here is no evidence of none
            // ("adapters MUST NOT use emptiness to conceal known authorized content",
            // execution-payloads.md@8f91ac4). A denied call has none.
            if !matches!(payload.ended, Ended::Denied) {
                event["gaps"] = json!([gap("/items", "the tool's output is only in native")]);
            }
        }
        AhpEvent::SessionStart => {
            let mut gaps = Vec::new();
            event["trigger"] = json!(start_trigger(payload.trigger.as_deref(), &mut gaps));
            event["manifest"] = super::manifest::manifest(harness);
            event["items"] = json!([]);
            event["permissionMode"] = said(&payload.permission_mode, "/permissionMode", &mut gaps);
            if !gaps.is_empty() {
                event["gaps"] = json!(gaps);
            }
        }
        AhpEvent::SessionEnd => {
            event["outcome"] = json!("unknown");
            let mut gaps = Vec::new();
            event["reason"] = said(&payload.reason, "/reason", &mut gaps);
            if !gaps.is_empty() {
                event["gaps"] = json!(gaps);
            }
        }
        AhpEvent::TurnStart => {
            event["trigger"] = json!("user");
            // The prompt itself travels only in `native`, which policy must enable.
            event["items"] = json!([]);
            let mut gaps = vec![gap("/items", "the prompt is only in native")];
            if payload.turn_id.is_none() {
                gaps.push(gap("/turn/id", UNSTABLE_TURN));
            }
            event["gaps"] = json!(gaps);
        }
        AhpEvent::TurnFinishBefore => {
            let mut gaps = Vec::new();
            event["outcome"] = json!(turn_outcome(harness, payload.stop_status, &mut gaps));
            // A harness that counts the stop hook's continuations (Cursor's `loop_count`)
            // gives the count; one that says whether a stop hook made the agent go on this
            // turn (`stop_hook_active`) gives it while it is 0; past that, how many times
            // it does not say.
            let count = match (payload.continuation_count, payload.continued) {
                (Some(count), _) => count,
                (None, Some(false)) => 0,
                (None, Some(true)) => {
                    gaps.push(gap(
                        "/continuationCount",
                        "the harness says only that a stop hook made the agent go on; \
                         1 stands for it",
                    ));
                    1
                }
                (None, None) => {
                    gaps.push(gap("/continuationCount", UNSAID));
                    0
                }
            };
            event["continuationCount"] = json!(count);
            event["items"] = json!([]);
            gaps.push(gap("/items", "the response is only in native"));
            if payload.turn_id.is_none() {
                gaps.push(gap("/turn/id", UNSTABLE_TURN));
            }
            event["gaps"] = json!(gaps);
        }
        AhpEvent::ContextCompactBefore => {
            let mut gaps = vec![gap("/items", UNSAID)];
            // The event takes one of AHP's words alone: with another, or none, it would be
            // refused, and a compaction a backend intercepts never asked about.
            let trigger = match payload.trigger.as_deref() {
                Some(word @ ("auto" | "manual" | "hook")) => word,
                _ => {
                    gaps.push(gap("/trigger", COMPACT_TRIGGER_UNSAID));
                    "auto"
                }
            };
            event["trigger"] = json!(trigger);
            event["items"] = json!([]);
            event["gaps"] = json!(gaps);
        }
        AhpEvent::ModelRequestBefore => {
            let provider = harness
                .fields()
                .model_request
                .as_ref()
                .map_or("unknown", |request| request.provider);
            let mut gaps = Vec::new();
            let model = said(&payload.request_model, "/model/id", &mut gaps);
            event["model"] = json!({"id": model, "provider": provider});
            gaps.push(gap(
                "/model/provider",
                &format!("{UNSAID}; {provider} stands for it"),
            ));
            event["params"] = json!(payload.request_params.clone().unwrap_or_default());
            gaps.push(gap(
                "/params",
                "the numeric generation parameters the harness shows a hook, no other",
            ));
            // One hook process sees one request: which attempt it is, the harness does
            // not say, and the attempt's id is made up (from the event's, below).
            gaps.push(gap(
                "/attempt/number",
                &format!("{UNSAID}; 1 stands for it"),
            ));
            event["items"] = json!([]);
            gaps.push(gap(
                "/items",
                "the request's messages are only in native, as the text the harness shows a hook",
            ));
            event["gaps"] = json!(gaps);
        }
        AhpEvent::ToolBefore => {}
    }
    // Every event names its harness: the digest asks it of session.start (§14), and the
    // official SDKs' draft schemas of every event, refusing one without it (-32602), so a
    // backend built on them would never decide a call.
    let mut gaps = Vec::new();
    let version = said(&payload.harness_version, "/harness/version", &mut gaps);
    event["harness"] = json!({"name": harness.name(), "version": version});
    match event.get_mut("gaps") {
        Some(Value::Array(listed)) => listed.extend(gaps),
        _ if !gaps.is_empty() => event["gaps"] = json!(gaps),
        _ => {}
    }
    identity.push(now.as_nanos().to_string());
    identity.push(std::process::id().to_string());
    let id = digest(&identity);
    if let Some(turn) = &payload.turn_id {
        event["turn"] = json!({"id": turn});
    } else if matches!(spec.ahp, AhpEvent::TurnStart | AhpEvent::TurnFinishBefore) {
        // A harness that names no turn: one process sees one hook of a turn, so its id
        // cannot be the harness's, nor stay the same across the turn's events, as a
        // synthesized identity should (execution-payloads.md@8f91ac4): its gap says so
        // ([`UNSTABLE_TURN`]).
        event["turn"] = json!({"id": format!("turn_{id}"), "synthesized": true});
    }
    if spec.ahp == AhpEvent::ModelRequestBefore {
        event["attempt"] = json!({"id": format!("attempt_{id}"), "number": 1, "synthesized": true});
    }
    event["id"] = json!(format!("evt_{id}"));
    event
}

/// Why a member is a gap when the harness is silent on it.
pub(super) const UNSAID: &str = "the harness does not say";

/// Why a denied call's input is a gap in its `tool.after` ([`denied_after`]).
const WITHHELD: &str = "modified by a policy backend before the denial; the input it \
     accepted is not handed on with a denial, and the original is not observed";

/// A session start's `trigger`, one of the words the SDKs' session-start schema takes:
/// the harness's own where it is one (`startup`, `resume`, `compact`), `startup` for
/// Copilot's `new`, and `startup` with a gap for anything else. A `clear` (or `fork`)
/// must name the session it came from (`resumedFrom`), which no harness's hook payload
/// does, so it is `startup` with a gap saying what the harness said.
fn start_trigger<'a>(said: Option<&'a str>, gaps: &mut Vec<Value>) -> &'a str {
    match said {
        Some(word @ ("startup" | "resume" | "compact")) => word,
        Some("new") => "startup",
        Some(other @ ("clear" | "fork")) => {
            let why = format!(
                "the harness says {other}, without the session it came from (resumedFrom); startup stands for it"
            );
            gaps.push(gap("/trigger", &why));
            "startup"
        }
        _ => {
            gaps.push(gap("/trigger", START_TRIGGER_UNSAID));
            "startup"
        }
    }
}

/// A stop's `outcome`, one of AHP's turn outcomes: what the harness's stop says (Cursor's
/// `status`: an abort is `cancelled`, an error `failed`), else `completed`. A harness
/// whose stop fires on completion alone (it has no
/// [`stop_status`](super::payload::Fields::stop_status)) says `completed` by firing it;
/// where the stop fires on other ends too and the payload names none (or a word of
/// another shape), `completed` stands for it, with a gap.
fn turn_outcome(harness: Harness, said: Option<StopStatus>, gaps: &mut Vec<Value>) -> &'static str {
    match said {
        Some(StopStatus::Completed) => "completed",
        Some(StopStatus::Aborted) => "cancelled",
        Some(StopStatus::Error) => "failed",
        None if harness.fields().stop_status.is_some() => {
            gaps.push(gap("/outcome", OUTCOME_UNSAID));
            "completed"
        }
        None => "completed",
    }
}

/// Why a stop's `outcome` says `completed` where the harness's stop could have said
/// otherwise and did not.
const OUTCOME_UNSAID: &str = "the harness does not say how the turn ended; completed stands for it";

/// Why a session start's `trigger` says `startup` where the harness said no AHP trigger.
const START_TRIGGER_UNSAID: &str = "the harness says no trigger AHP names; startup stands for it";

/// Why a compaction's `trigger` says `auto` where the harness said no AHP trigger.
const COMPACT_TRIGGER_UNSAID: &str = "the harness says no trigger AHP names; auto stands for it";

/// Why a turn's synthesized id is a gap: it names the hook call's event alone.
const UNSTABLE_TURN: &str =
    "synthesized for this hook call alone: the turn's other events carry another";

/// One entry of a `gaps` list: the member not disclosed, and why.
pub(super) fn gap(path: &str, reason: &str) -> Value {
    json!({"path": path, "reason": reason})
}

/// What the harness said of a required member, else "unknown" with a gap at `pointer`
/// that says so.
fn said(value: &Option<String>, pointer: &str, gaps: &mut Vec<Value>) -> Value {
    match value {
        Some(value) => json!(value),
        None => {
            gaps.push(gap(pointer, UNSAID));
            json!("unknown")
        }
    }
}

/// The `tool.after` that reports the call of `before`, a `tool.before` built by [`build`],
/// as denied (conformance O2): the harness never runs a tool it was denied, so it sends no
/// post-tool hook, and this is the only `tool.after` of that call. The same source,
/// session, call, tool, path and `native` (the pre-tool payload, still named as the
/// harness's event it came from), `outcome: "denied"`, skipped by policy, no content; its
/// own id, derived from `before`'s, so the same denial always has the same id.
///
/// `modified`: an interceptor's modification of the input was accepted before the call was
/// denied. Observations carry only accepted effective content (digest §8), and a denial
/// hands on no effective input, so neither the original input (a redaction would reach
/// every observer through it) nor `native` goes out: the input is `{}`, with a gap that
/// says why.
pub fn denied_after(before: &Value, modified: bool) -> Value {
    let mut after = before.clone();
    if modified {
        after["tool"]["input"] = json!({});
        if let Some(members) = after.as_object_mut() {
            members.remove("native");
        }
        let withheld = gap("/tool/input", WITHHELD);
        match after["gaps"].as_array_mut() {
            Some(gaps) => gaps.push(withheld),
            None => after["gaps"] = json!([withheld]),
        }
    }
    let before_id = before["id"].as_str().unwrap_or_default();
    let id = digest(&[
        AhpEvent::ToolAfter.as_str().to_string(),
        "denied".to_string(),
        before_id.to_string(),
    ]);
    after["id"] = json!(format!("evt_{id}"));
    after["type"] = json!(AhpEvent::ToolAfter.as_str());
    after["time"] = json!(rfc3339(since_epoch().as_secs()));
    after["outcome"] = json!("denied");
    after["execution"] = json!({"status": "skipped", "reason": "policy"});
    after["items"] = json!([]);
    after
}

/// The time since the Unix epoch (zero for a clock set before it).
fn since_epoch() -> std::time::Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// `tool`: the native name verbatim, the parsed input, the origin and a behaviour hint.
/// An MCP tool (by the harness's account of its server, or by the `mcp__server__tool`
/// naming convention) carries its descriptor (`mcp`).
fn tool(name: &str, input: &Map<String, Value>, mcp_context: Option<&Map<String, Value>>) -> Value {
    let mut tool = json!({"name": name, "input": input, "kind": kind(name), "origin": "native"});
    if let Some(descriptor) = super::mcp::descriptor(name, mcp_context) {
        tool["origin"] = json!("mcp");
        tool["kind"] = json!("mcp");
        tool["mcp"] = descriptor;
    }
    tool
}

/// The `tool.kind` hint for a native tool name (Claude Code's names, which Codex,
/// Cursor and Copilot mostly share; Gemini's own names where they differ).
fn kind(name: &str) -> &'static str {
    if name.starts_with("mcp__") {
        return "mcp";
    }
    match name {
        "Bash" | "Shell" | "shell" | "run_shell_command" | "bash" | "powershell" => "shell",
        "Read" | "read_file" | "read_many_files" | "list_directory" | "view" => "file_read",
        "Write" | "write_file" | "create" => "file_write",
        "Edit" | "MultiEdit" | "replace" | "apply_patch" | "edit" | "str_replace_editor" => {
            "file_edit"
        }
        "Grep" | "Glob" | "search_file_content" | "glob" | "grep" | "rg" => "search",
        "WebFetch" | "WebSearch" | "web_fetch" | "google_web_search" | "web_search" => "fetch",
        "Task" | "Agent" | "task" | "delegate_to_agent" => "task",
        _ => "other",
    }
}

/// A stable call id for a harness without tool-use ids: the same session, tool and input
/// give the same id.
fn synthesized_call_id(session: &str, name: &str, input: &Map<String, Value>) -> String {
    let input = Value::Object(input.clone()).to_string();
    format!(
        "call_{}",
        digest(&[session.to_string(), name.to_string(), input])
    )
}

/// The default `source`: a URN stable for one harness installation (the harness and the
/// absolute registration path), revealing neither.
pub fn installation_source(harness: Harness, registration: &Path) -> String {
    let path = std::path::absolute(registration).unwrap_or_else(|_| registration.to_path_buf());
    let hash = digest(&[harness.name().to_string(), path.display().to_string()]);
    format!("urn:ahp:hook:{}:{hash}", harness.name())
}

/// The first 16 bytes of SHA-256 over `parts` (length-prefixed), in hex.
fn digest(parts: &[String]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `secs` since the Unix epoch as an RFC 3339 UTC date-time.
fn rfc3339(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Codex names its turn (`turn_id`): that is the event's turn, so a turn's start, its
    /// tool calls and its finish can be put together; a harness that names none gets a
    /// synthesized turn at the turn events, and none at a tool event.
    #[test]
    fn a_turn_the_harness_names_is_the_events_turn() {
        let built = |harness: Harness, ahp: AhpEvent, payload: &Value| {
            let spec = harness
                .events()
                .iter()
                .find(|s| s.ahp == ahp)
                .expect("mapped");
            let object = payload.as_object().expect("an object");
            let read = super::super::payload::read(harness.fields(), object, spec)
                .unwrap_or_else(|e| panic!("{harness:?} {ahp:?}: {e}"));
            build(harness, spec, &read, "urn:x", Map::new())
        };
        let prompt = json!({"session_id": "s", "turn_id": "turn-7", "prompt": "hi"});
        let tool = json!({"session_id": "s", "turn_id": "turn-7", "tool_name": "Bash",
            "tool_input": {"command": "ls"}, "tool_use_id": "c1"});
        for (ahp, payload) in [
            (AhpEvent::TurnStart, &prompt),
            (AhpEvent::ToolBefore, &tool),
        ] {
            let event = built(Harness::Codex, ahp, payload);
            assert_eq!(event["turn"], json!({"id": "turn-7"}), "{ahp:?}");
        }
        let started = built(Harness::ClaudeCode, AhpEvent::TurnStart, &prompt);
        assert_eq!(started["turn"]["synthesized"], true);
        assert_ne!(started["turn"]["id"], "turn-7");
        let called = built(Harness::ClaudeCode, AhpEvent::ToolBefore, &tool);
        assert!(called.get("turn").is_none(), "{called}");
        // A synthesized turn id names this event alone, and its gap says so; the
        // harness's own needs none.
        let paths = |event: &Value| {
            let gaps = event["gaps"].as_array().cloned().unwrap_or_default();
            gaps.iter()
                .filter_map(|gap| gap["path"].as_str().map(String::from))
                .collect::<Vec<_>>()
        };
        assert!(
            paths(&started).contains(&"/turn/id".to_string()),
            "{started}"
        );
        let named = built(Harness::Codex, AhpEvent::TurnStart, &prompt);
        assert!(!paths(&named).contains(&"/turn/id".to_string()), "{named}");
    }

    /// A tool.after of a call that ran says its output is only in native: empty `items`
    /// are no evidence of none (execution-payloads.md@8f91ac4). A denied call has none.
    #[test]
    fn a_tool_afters_empty_items_are_a_gap_unless_the_call_was_denied() {
        let after = |ended: Option<&str>| {
            let mut payload = json!({"session_id": "s", "tool_name": "Bash",
                "tool_input": {"command": "ls"}, "tool_use_id": "c1",
                "tool_response": {"stdout": "a.txt"}});
            if let Some(ended) = ended {
                payload["ended"] = json!(ended);
            }
            payload
        };
        let spec = Harness::ClaudeCode
            .events()
            .iter()
            .find(|s| s.ahp == AhpEvent::ToolAfter)
            .expect("mapped");
        let object = after(None);
        let read = super::super::payload::read(
            Harness::ClaudeCode.fields(),
            object.as_object().unwrap(),
            spec,
        )
        .expect("a PostToolUse");
        let event = build(Harness::ClaudeCode, spec, &read, "urn:x", Map::new());
        assert_eq!(event["outcome"], "ok");
        assert_eq!(event["items"], json!([]));
        assert_eq!(
            event["gaps"][0],
            json!({"path": "/items", "reason": "the tool's output is only in native"})
        );
        let denied = Payload {
            tool: Some(("Bash".into(), Map::new())),
            ended: Ended::Denied,
            ..Payload::default()
        };
        let event = built(Harness::ClaudeCode, AhpEvent::ToolAfter, denied);
        assert_eq!(event["outcome"], "denied");
        assert!(event
            .get("gaps")
            .is_none_or(|gaps| !gaps.to_string().contains("/items")));
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_083_199), "2026-11-30T23:59:59Z");
    }

    #[test]
    fn kinds_follow_the_hints() {
        assert_eq!(kind("Bash"), "shell");
        assert_eq!(kind("Edit"), "file_edit");
        assert_eq!(kind("Glob"), "search");
        assert_eq!(kind("mcp__github__create_issue"), "mcp");
        assert_eq!(kind("Frobnicate"), "other");
    }

    /// Copilot's lowercase spellings: `powershell` is a shell as `bash` is, `task` a
    /// subagent as `Task` is.
    #[test]
    fn powershell_and_lowercase_task_have_their_kinds() {
        assert_eq!(kind("powershell"), "shell");
        assert_eq!(kind("task"), "task");
    }

    /// Copilot's and Gemini's other native names have the kinds of Claude Code's.
    #[test]
    fn copilot_and_gemini_names_have_their_kinds() {
        for (name, expected) in [
            ("web_search", "fetch"),
            ("rg", "search"),
            ("str_replace_editor", "file_edit"),
            ("read_many_files", "file_read"),
            ("list_directory", "file_read"),
            ("delegate_to_agent", "task"),
        ] {
            assert_eq!(kind(name), expected, "{name}");
        }
    }

    /// An MCP tool, named by the convention or described by the harness, is of origin
    /// and kind `mcp` with its descriptor; the harness's account wins over the name.
    #[test]
    fn an_mcp_tool_carries_its_descriptor() {
        let inferred = tool("mcp__github__create_issue", &Map::new(), None);
        assert_eq!(
            (&inferred["origin"], &inferred["kind"]),
            (&json!("mcp"), &json!("mcp"))
        );
        assert_eq!(inferred["mcp"]["provenance"], "inferred");
        let context = json!({"server_name": "gh", "tool_name": "create_issue"});
        let described = tool(
            "mcp__github__create_issue",
            &Map::new(),
            context.as_object(),
        );
        assert_eq!(described["mcp"]["server"]["id"], "gh");
        assert_eq!(described["mcp"]["provenance"], "runtime");
        let renamed = tool("create_issue", &Map::new(), context.as_object());
        assert_eq!(
            (&renamed["origin"], &renamed["kind"]),
            (&json!("mcp"), &json!("mcp"))
        );
        let native = tool("Bash", &Map::new(), None);
        assert_eq!(native["origin"], "native");
        assert!(native.get("mcp").is_none(), "{native}");
    }

    /// Where the harness says how a call ended, its `tool.after` says so: a failure as
    /// `error` (with a generic error, not the harness's words), a refusal as `denied`,
    /// skipped by policy, an interruption as `cancelled`; a success, or nothing said, as
    /// `ok`. Claude Code's `PostToolUse` reports successes only, whatever its tool's
    /// response holds; its `PostToolUseFailure` failures, with or without its `error`, an
    /// interrupted one (`is_interrupt: true`) as `cancelled`, and one whose `is_interrupt`
    /// is of another shape still as `error`.
    #[test]
    fn a_tool_after_says_how_its_call_ended() {
        let copilot = |result: Value, outcome| (Harness::Copilot, "postToolUse", result, outcome);
        let failure =
            |extra: Value, outcome| (Harness::ClaudeCode, "PostToolUseFailure", extra, outcome);
        let cases = [
            copilot(json!({"tool_result": {"result_type": "failure"}}), "error"),
            copilot(json!({"toolResult": {"resultType": "denied"}}), "denied"),
            copilot(json!({"toolResult": {"resultType": "success"}}), "ok"),
            copilot(json!({"toolResult": {"resultType": "rejected"}}), "denied"),
            copilot(json!({"toolResult": {"resultType": "timeout"}}), "timeout"),
            copilot(json!({"toolResult": "odd"}), "ok"),
            (
                Harness::Gemini,
                "AfterTool",
                json!({"tool_response": {"error": {"message": "ENOENT"}}}),
                "error",
            ),
            (
                Harness::Gemini,
                "AfterTool",
                json!({"tool_response": {"llmContent": "x", "error": null}}),
                "ok",
            ),
            (
                Harness::ClaudeCode,
                "PostToolUse",
                json!({"tool_response": {"error": "ENOENT"}}),
                "ok",
            ),
            failure(
                json!({"error": "Exit code 1", "is_interrupt": false}),
                "error",
            ),
            failure(json!({}), "error"),
            // Copilot's `postToolUseFailure`, its `error` a string.
            (
                Harness::Copilot,
                "postToolUseFailure",
                json!({"error": "Exit code 1"}),
                "error",
            ),
            failure(json!({"is_interrupt": "yes"}), "error"),
            failure(
                json!({"error": "Interrupted", "is_interrupt": true}),
                "cancelled",
            ),
        ];
        for (harness, native, extra, outcome) in cases {
            let mut payload = json!({"session_id": "s", "hook_event_name": native,
                "tool_name": "bash", "tool_input": {}});
            for (key, value) in extra.as_object().unwrap() {
                payload[key] = value.clone();
            }
            let object = payload.as_object().unwrap();
            let spec = harness.spec(native).expect("mapped");
            let read = super::super::payload::read(harness.fields(), object, spec).unwrap();
            let event = build(harness, spec, &read, "urn:x", object.clone());
            let case = format!("{harness:?} {extra}");
            assert_eq!(event["outcome"], outcome, "{case}");
            let skipped = json!({"status": "skipped", "reason": "policy"});
            let executed = json!({"status": "executed"});
            let execution = if outcome == "denied" {
                skipped
            } else {
                executed
            };
            assert_eq!(event["execution"], execution, "{case}");
            match outcome {
                "error" => assert_eq!(
                    event["error"],
                    json!({"class": "operation", "message": TOOL_FAILED}),
                    "{case}"
                ),
                _ => assert!(event.get("error").is_none(), "{case}"),
            }
        }
    }

    #[test]
    fn a_denied_call_s_tool_after_keeps_its_identities() {
        let harness = Harness::Codex;
        let spec = &harness.events()[0];
        let input = json!({"command": "ls"}).as_object().cloned().unwrap();
        let payload = Payload {
            session_id: "s".into(),
            tool: Some(("Bash".into(), input)),
            ..Payload::default()
        };
        let before = build(harness, spec, &payload, "urn:x", Map::new());
        let after = denied_after(&before, false);
        for same in ["source", "session", "call", "tool", "path", "native"] {
            assert_eq!(after[same], before[same], "{same}");
        }
        assert_eq!(after["gaps"], before["gaps"], "no gap added");
        assert_eq!(after["type"], "tool.after");
        assert_eq!(after["outcome"], "denied");
        assert_eq!(
            after["execution"],
            json!({"status": "skipped", "reason": "policy"})
        );
        assert_eq!(after["items"], json!([]));
        assert_ne!(after["id"], before["id"]);
        assert_eq!(after["id"], denied_after(&before, false)["id"], "stable");
    }

    /// A call whose input a backend modified before it was denied: its `tool.after`
    /// carries neither the original input nor `native` (which holds it too), but `{}`
    /// and a gap saying why; the rest as any denied call's.
    #[test]
    fn a_denied_call_whose_input_was_modified_observes_no_input() {
        let harness = Harness::ClaudeCode;
        let spec = &harness.events()[0];
        let input = json!({"command": "cat ~/.secret"})
            .as_object()
            .cloned()
            .unwrap();
        let payload = Payload {
            session_id: "s".into(),
            tool: Some(("Bash".into(), input)),
            ..Payload::default()
        };
        let before = build(harness, spec, &payload, "urn:x", Map::new());
        assert!(before.get("native").is_some(), "{before}");
        let after = denied_after(&before, true);
        assert_eq!(after["tool"]["input"], json!({}));
        assert_eq!(after["tool"]["name"], "Bash");
        assert!(after.get("native").is_none(), "{after}");
        assert!(!after.to_string().contains(".secret"), "{after}");
        let mut gaps = before["gaps"].as_array().cloned().unwrap_or_default();
        gaps.push(gap("/tool/input", WITHHELD));
        assert_eq!(after["gaps"], json!(gaps));
        assert_eq!(after["outcome"], "denied");
        assert_eq!(after["id"], denied_after(&before, false)["id"]);
    }

    /// The `ahp` event `harness` builds for a session "s" from `payload`.
    fn built(harness: Harness, ahp: AhpEvent, payload: Payload) -> Value {
        let spec = harness.events().iter().find(|spec| spec.ahp == ahp);
        let spec = spec.unwrap_or_else(|| panic!("{harness:?} maps {ahp:?}"));
        let payload = Payload {
            session_id: "s".into(),
            ..payload
        };
        build(harness, spec, &payload, "urn:x", Map::new())
    }

    /// The session.start `harness` builds for a session "s" from `payload`.
    fn session_start(harness: Harness, payload: Payload) -> Value {
        built(harness, AhpEvent::SessionStart, payload)
    }

    /// The paths of a `gaps` list (an event's or a manifest's); none when it has none.
    fn gap_paths(gaps: &Value) -> Vec<&str> {
        let gaps = gaps.as_array().into_iter().flatten();
        gaps.filter_map(|gap| gap["path"].as_str()).collect()
    }

    /// A stop's continuation count is the harness's while it says none happened, 1 with
    /// a gap once it says one did, 0 with a gap when it does not say.
    #[test]
    fn a_stop_counts_its_continuations_as_far_as_the_harness_says() {
        let stop = |continued| {
            let payload = Payload {
                continued,
                harness_version: Some("2.1.0".into()),
                ..Payload::default()
            };
            let event = built(Harness::ClaudeCode, AhpEvent::TurnFinishBefore, payload);
            let gaps = gap_paths(&event["gaps"]).join(" ");
            (event["continuationCount"].clone(), gaps)
        };
        // The turn's id is synthesized (the payload names none), and said to be so.
        assert_eq!(stop(Some(false)), (json!(0), "/items /turn/id".into()));
        assert_eq!(
            stop(Some(true)),
            (json!(1), "/continuationCount /items /turn/id".into())
        );
        assert_eq!(
            stop(None),
            (json!(0), "/continuationCount /items /turn/id".into())
        );
    }

    /// A stop's outcome is what the harness's stop says (Cursor's `status`): `completed`,
    /// an abort `cancelled`, an error `failed`, none of them with a gap; where it says
    /// nothing, `completed`, with a gap only where the stop fires on other ends too
    /// (Cursor), not where firing it says the work completed (Claude Code, Codex, Gemini).
    #[test]
    fn a_stop_says_how_the_turn_ended_as_far_as_the_harness_says() {
        let stop = |harness: Harness, stop_status| {
            let payload = Payload {
                stop_status,
                harness_version: Some("1.0.0".into()),
                ..Payload::default()
            };
            let event = built(harness, AhpEvent::TurnFinishBefore, payload);
            let gaps = gap_paths(&event["gaps"]).contains(&"/outcome");
            (event["outcome"].clone(), gaps)
        };
        let cases = [
            (Some(StopStatus::Completed), "completed", false),
            (Some(StopStatus::Aborted), "cancelled", false),
            (Some(StopStatus::Error), "failed", false),
            (None, "completed", true),
        ];
        for (said, outcome, gapped) in cases {
            let built = stop(Harness::Cursor, said);
            assert_eq!(built, (json!(outcome), gapped), "{said:?}");
        }
        for harness in [Harness::ClaudeCode, Harness::Codex, Harness::Gemini] {
            assert_eq!(
                stop(harness, None),
                (json!("completed"), false),
                "{harness:?}"
            );
        }
        let event = built(
            Harness::Cursor,
            AhpEvent::TurnFinishBefore,
            Payload::default(),
        );
        let why = event["gaps"].as_array().into_iter().flatten();
        let why = why
            .filter(|gap| gap["path"] == "/outcome")
            .map(|gap| &gap["reason"]);
        assert_eq!(why.collect::<Vec<_>>(), [&json!(OUTCOME_UNSAID)]);
    }

    /// A stop's continuation count is the harness's own where it counts them (Cursor's
    /// `loop_count`), with no gap, whatever else it says; else as far as
    /// `stop_hook_active` says.
    #[test]
    fn a_stop_takes_the_harness_s_count_of_its_continuations() {
        let stop = |harness: Harness, continuation_count, continued| {
            let payload = Payload {
                continuation_count,
                continued,
                harness_version: Some("1.0.0".into()),
                ..Payload::default()
            };
            let event = built(harness, AhpEvent::TurnFinishBefore, payload);
            let gaps = gap_paths(&event["gaps"]).contains(&"/continuationCount");
            (event["continuationCount"].clone(), gaps)
        };
        assert_eq!(stop(Harness::Cursor, Some(2), None), (json!(2), false));
        assert_eq!(stop(Harness::Cursor, Some(0), None), (json!(0), false));
        assert_eq!(
            stop(Harness::Cursor, Some(3), Some(true)),
            (json!(3), false)
        );
        assert_eq!(stop(Harness::Cursor, None, None), (json!(0), true));
        assert_eq!(
            stop(Harness::ClaudeCode, None, Some(true)),
            (json!(1), true)
        );
    }

    /// Every event of every harness names its harness (the SDKs' schemas refuse one
    /// without it): the version the payload gives, else "unknown" with a gap, added to
    /// the event's own gaps.
    #[test]
    fn every_event_names_its_harness() {
        for harness in Harness::ALL {
            for spec in harness.events() {
                let said = Payload {
                    harness_version: Some("1.2.3".into()),
                    ..Payload::default()
                };
                let event = built(harness, spec.ahp, said);
                let named = json!({"name": harness.name(), "version": "1.2.3"});
                assert_eq!(event["harness"], named, "{harness:?} {}", spec.native);
                assert!(!gap_paths(&event["gaps"]).contains(&"/harness/version"));
                let unsaid = built(harness, spec.ahp, Payload::default());
                assert_eq!(unsaid["harness"]["version"], "unknown");
                let gaps = gap_paths(&unsaid["gaps"]);
                assert_eq!(
                    gaps.last(),
                    Some(&"/harness/version"),
                    "{harness:?} {}",
                    spec.native
                );
            }
        }
    }

    /// A session start's trigger is a word the SDKs' schema takes: the harness's own
    /// where it is one, `startup` for Copilot's `new`, and `startup` with a gap saying
    /// what the harness said for a `clear` (which would have to name the session it came
    /// from), anything else or nothing.
    #[test]
    fn a_session_start_s_trigger_is_one_of_ahp_s_words() {
        let cases = [
            (Some("startup"), "startup", None),
            (Some("resume"), "resume", None),
            (Some("compact"), "compact", None),
            (Some("new"), "startup", None),
            (Some("clear"), "startup", Some("the harness says clear")),
            (Some("reload"), "startup", Some("no trigger AHP names")),
            (None, "startup", Some("no trigger AHP names")),
        ];
        for (said, word, gap) in cases {
            let payload = Payload {
                trigger: said.map(str::to_owned),
                ..Payload::default()
            };
            let event = session_start(Harness::ClaudeCode, payload);
            assert_eq!(event["trigger"], word, "{said:?}");
            let manifest = gap_paths(&event["manifest"]["gaps"]);
            assert!(manifest.contains(&"session.start.trigger"), "{manifest:?}");
            let reason = event["gaps"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|g| g["path"] == "/trigger")
                .map(|g| g["reason"].as_str().unwrap_or_default().to_owned());
            match gap {
                Some(why) => assert!(reason.is_some_and(|r| r.contains(why)), "{said:?}: {event}"),
                None => assert_eq!(reason, None, "{said:?}"),
            }
        }
    }

    /// Every session.start carries its harness's manifest (digest §11: "session.start
    /// also embeds the manifest"), the one `ahp hook manifest` prints, never an empty one.
    #[test]
    fn a_session_start_embeds_its_harness_s_manifest() {
        for harness in Harness::ALL {
            let event = session_start(harness, Payload::default());
            assert_eq!(
                event["manifest"],
                super::super::manifest::manifest(harness),
                "{harness:?}"
            );
            assert!(event["manifest"]["events"]
                .as_array()
                .is_some_and(|e| !e.is_empty()));
        }
    }

    /// Gemini's model request: the model it names and its generation parameters, Google
    /// as the provider, a synthesized first attempt, and gaps for what it does not say (a
    /// missing model is "unknown" with a gap of its own).
    #[test]
    fn a_model_request_names_its_model_and_what_it_does_not_know() {
        let mut params = Map::new();
        params.insert("temperature".into(), json!(0.2));
        let payload = Payload {
            request_model: Some("gemini-2.5-pro".into()),
            request_params: Some(params),
            harness_version: Some("0.9.0".into()),
            ..Payload::default()
        };
        let event = built(Harness::Gemini, AhpEvent::ModelRequestBefore, payload);
        assert_eq!(event["type"], "model.request.before");
        assert_eq!(
            event["model"],
            json!({"id": "gemini-2.5-pro", "provider": "google"})
        );
        assert_eq!(event["params"], json!({"temperature": 0.2}));
        assert_eq!(event["attempt"]["number"], 1);
        assert_eq!(event["attempt"]["synthesized"], true);
        assert_eq!(event["items"], json!([]));
        let gaps = ["/model/provider", "/params", "/attempt/number", "/items"];
        assert_eq!(gap_paths(&event["gaps"]), gaps);
        let attempt_id = event["attempt"]["id"].as_str().expect("an attempt id");
        let event_id = event["id"].as_str().expect("an event id");
        assert_eq!(
            attempt_id.strip_prefix("attempt_"),
            event_id.strip_prefix("evt_")
        );
        let unnamed = built(
            Harness::Gemini,
            AhpEvent::ModelRequestBefore,
            Payload::default(),
        );
        assert_eq!(unnamed["model"]["id"], "unknown");
        assert_eq!(unnamed["params"], json!({}));
        let unnamed_gaps = gap_paths(&unnamed["gaps"]);
        assert_eq!(unnamed_gaps[0], "/model/id");
        assert_eq!(unnamed_gaps[1..5], gaps);
        assert_eq!(unnamed_gaps[5..], ["/harness/version"]);
    }

    /// A session end's reason is the harness's; where it gives none, "unknown" stands
    /// for it, and a gap says so.
    #[test]
    fn a_session_end_without_its_reason_says_so() {
        let ended = |reason: Option<&str>| {
            let payload = Payload {
                reason: reason.map(str::to_owned),
                ..Payload::default()
            };
            built(Harness::ClaudeCode, AhpEvent::SessionEnd, payload)
        };
        let said = ended(Some("logout"));
        assert_eq!(said["reason"], "logout");
        assert_eq!(gap_paths(&said["gaps"]), ["/harness/version"], "{said}");
        let unsaid = ended(None);
        assert_eq!(unsaid["reason"], "unknown");
        assert_eq!(
            gap_paths(&unsaid["gaps"]),
            ["/reason", "/harness/version"],
            "{unsaid}"
        );
    }

    /// A subagent the harness names is the session's agent; a permission mode it names
    /// is the session.start's, with no gap.
    #[test]
    fn the_subagent_and_the_permission_mode_are_the_harness_s() {
        let in_agent = |kind: Option<&str>| {
            let payload = Payload {
                tool: Some(("Bash".into(), Map::new())),
                agent: Some(("a-1".into(), kind.map(str::to_owned))),
                ..Payload::default()
            };
            built(Harness::ClaudeCode, AhpEvent::ToolBefore, payload)
        };
        assert_eq!(
            in_agent(Some("reviewer"))["session"]["agent"],
            json!({"id": "a-1", "type": "reviewer"})
        );
        assert_eq!(in_agent(None)["session"]["agent"], json!({"id": "a-1"}));
        let start = |mode: Option<&str>| {
            let payload = Payload {
                permission_mode: mode.map(str::to_owned),
                ..Payload::default()
            };
            session_start(Harness::ClaudeCode, payload)
        };
        // Both known (no harness names both today): no gaps at all.
        let both = Payload {
            permission_mode: Some("plan".into()),
            harness_version: Some("2.4.0".into()),
            trigger: Some("startup".into()),
            ..Payload::default()
        };
        let event = session_start(Harness::Cursor, both);
        assert!(event.get("gaps").is_none(), "{event}");
        let known = start(Some("plan"));
        assert_eq!(known["permissionMode"], "plan");
        assert!(
            !gap_paths(&known["gaps"]).contains(&"/permissionMode"),
            "{known}"
        );
        let unknown = start(None);
        assert_eq!(unknown["permissionMode"], "unknown");
        assert!(
            gap_paths(&unknown["gaps"]).contains(&"/permissionMode"),
            "{unknown}"
        );
    }

    /// `harness.version` is required at session.start: the harness's own when it says
    /// (Cursor), else "unknown" with a gap that says so.
    #[test]
    fn a_session_start_names_the_harness_s_version_or_its_gap() {
        let versioned = Payload {
            harness_version: Some("2.4.0".into()),
            ..Payload::default()
        };
        let cursor = session_start(Harness::Cursor, versioned);
        assert_eq!(
            cursor["harness"],
            json!({"name": "cursor", "version": "2.4.0"})
        );
        assert!(
            !gap_paths(&cursor["gaps"]).contains(&"/harness/version"),
            "{cursor}"
        );
        let claude = session_start(Harness::ClaudeCode, Payload::default());
        assert_eq!(claude["harness"]["version"], "unknown");
        assert!(
            gap_paths(&claude["gaps"]).contains(&"/harness/version"),
            "{claude}"
        );
        // The manifest each embeds says the same of its harness.
        let manifest_gap =
            |event: &Value| gap_paths(&event["manifest"]["gaps"]).contains(&"harness.version");
        assert_eq!(
            (manifest_gap(&cursor), manifest_gap(&claude)),
            (false, true)
        );
        // The permission mode's gap: always there, said to apply only sometimes where the
        // harness can name it.
        let mode_reason = |event: &Value| {
            let gaps = event["manifest"]["gaps"].as_array().into_iter().flatten();
            let mut mode = gaps.filter(|gap| gap["path"] == "session.start.permissionMode");
            mode.next().map(|gap| gap["reason"].clone())
        };
        assert_eq!(
            mode_reason(&cursor),
            Some(json!("the harness does not say"))
        );
        assert_eq!(
            mode_reason(&claude),
            Some(json!("when the harness does not say, \"unknown\""))
        );
    }

    #[test]
    fn synthesized_call_ids_are_stable_and_distinct() {
        let input = json!({"command": "ls"});
        let input = input.as_object().unwrap();
        let a = synthesized_call_id("s", "Bash", input);
        assert_eq!(a, synthesized_call_id("s", "Bash", input));
        assert_ne!(a, synthesized_call_id("s2", "Bash", input));
        assert_ne!(a, synthesized_call_id("s", "Bash", &Map::new()));
    }
}
