//! The one reader of every harness's payload: each harness says in a [`Fields`] table
//! where it keeps the session, the tool call and the rest, and [`read`] reads them all
//! the same way, with an error that names the field.

use super::exact::exact;
use super::{AhpEvent, EventSpec, Payload};
use crate::vocab::EventRef;
use serde_json::{Map, Value};

/// Where one harness keeps the fields every AHP event is built from.
pub struct Fields {
    /// The session (or conversation) id's member, then its alternatives: the first one
    /// present is read; none present is an error naming the first.
    pub session: &'static [&'static str],
    /// The tool call's members, then its alternatives, chosen by the name member.
    pub tool: &'static [ToolFields],
    /// The harness's tool-use id, if it has one.
    pub call_id: Option<&'static str>,
    /// The harness's turn id, if it sends one.
    pub turn_id: Option<&'static str>,
    /// Why a session started (`session.start`), if the harness says.
    pub start_trigger: Option<&'static str>,
    /// What set off a compaction (`context.compact.before`), if the harness says.
    pub compact_trigger: Option<&'static str>,
    /// The model's member, if the harness names the model.
    pub model: Option<&'static str>,
    /// The workspace roots' member (a list of paths), if the harness sends them; without
    /// `cwd`, the first of them is the working directory.
    pub workspace_roots: Option<&'static str>,
    /// The member in which the harness describes an MCP tool's server, if it does.
    pub mcp_context: Option<&'static str>,
    /// Whether the harness names an MCP server's tools `mcp__server__tool`, the one mark
    /// the adapter reads without a `mcp_context` (Claude Code, Codex). Where neither
    /// tells (Copilot's `server-tool`, Cursor's own), such a call reads as native.
    pub mcp_by_name: bool,
    /// The harness's version's member, if it says (`session.start`'s `harness.version`).
    pub harness_version: Option<&'static str>,
    /// The members naming the agent a call runs in (a subagent's id, then its type), if
    /// the harness names it (`session.agent`).
    pub agent: Option<(&'static str, &'static str)>,
    /// The permission mode's member, if the harness says (`session.start`'s
    /// `permissionMode`).
    pub permission_mode: Option<&'static str>,
    /// Where a model request is, if the harness lets a hook see one.
    pub model_request: Option<ModelRequestFields>,
    /// The member saying, at a stop, whether a stop hook has already made the agent go
    /// on in this turn (`stop_hook_active`), if the harness says.
    pub continued: Option<&'static str>,
    /// The member saying, at a stop, how the agent's work ended (Cursor's `status`:
    /// `completed`, `aborted` or `error`), if the harness's stop fires on other ends than
    /// completion and says which. A harness without it fires its stop on completion alone.
    pub stop_status: Option<&'static str>,
    /// The member counting, at a stop, the times a stop hook has made the agent go on in
    /// this loop (Cursor's `loop_count`), if the harness counts them.
    pub stop_loop_count: Option<&'static str>,
    /// Where the harness says how a tool call ended (`tool.after`), if it reports other
    /// ends than success there.
    pub ended: Option<EndedField>,
    /// The member saying, after a call that failed ([`EventSpec::after_failed_call`]),
    /// whether the user interrupted it (`is_interrupt`), if the harness says.
    pub interrupted: Option<&'static str>,
}

/// Where a harness says how a tool call ended.
pub enum EndedField {
    /// `(object, member)` names it, in one of these forms: `success`, `failure`, `error`,
    /// `denied`, `rejected` or `timeout` (Copilot's `toolResult.resultType`,
    /// `tool_result.result_type`).
    Status(&'static [(&'static str, &'static str)]),
    /// `(object, member)` present, not null, means the call failed (Gemini's
    /// `tool_response.error`).
    Error(&'static str, &'static str),
}

/// How a tool call ended, as its harness reports it after.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ended {
    /// It ran and succeeded; also what a harness that reports successes alone says.
    #[default]
    Ok,
    /// It ran and failed.
    Error,
    /// It did not run: the harness (its permission rules, its user) refused it.
    Denied,
    /// It ran out of time.
    Timeout,
    /// It was interrupted before it finished (by the user).
    Cancelled,
}

/// How the agent's work ended, as a harness whose stop fires on other ends than
/// completion says at that stop ([`Fields::stop_status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopStatus {
    /// It finished.
    Completed,
    /// It was stopped before it finished (by the user).
    Aborted,
    /// It ended in an error.
    Error,
}

/// `key`, when present, must be one of the words of a [`StopStatus`].
fn optional_stop_status(
    payload: &Map<String, Value>,
    key: &str,
) -> Result<Option<StopStatus>, String> {
    let status = match optional_string(payload, key)?.as_deref() {
        None => return Ok(None),
        Some("completed") => StopStatus::Completed,
        Some("aborted") => StopStatus::Aborted,
        Some("error") => StopStatus::Error,
        Some(_) => return Err(format!("{key} must be completed, aborted or error")),
    };
    Ok(Some(status))
}

/// How the call `payload` reports on ended, as `field` says; a value of another shape
/// only informs a backend, so it is left out (logged): success, as before.
fn ended(payload: &Map<String, Value>, field: &EndedField) -> Ended {
    match field {
        EndedField::Status(forms) => {
            let status = forms.iter().find_map(|(object, member)| {
                let object = informational(optional_object(payload, object))?;
                informational(optional_string(object, member))
            });
            match status.as_deref() {
                Some("failure" | "error") => Ended::Error,
                Some("denied" | "rejected") => Ended::Denied,
                Some("timeout") => Ended::Timeout,
                Some("success") | None => Ended::Ok,
                Some(other) => {
                    tracing::warn!(status = other, "unknown tool result type: read as success");
                    Ended::Ok
                }
            }
        }
        EndedField::Error(object, member) => {
            let failed = informational(optional_object(payload, object))
                .and_then(|object| object.get(*member))
                .is_some_and(|error| !error.is_null());
            if failed {
                Ended::Error
            } else {
                Ended::Ok
            }
        }
    }
}

/// How a call the harness reports as failed ([`EventSpec::after_failed_call`]) ended: it
/// was interrupted where its `interrupted` member is true, else it failed. What the
/// harness says of the failure only informs a backend (its words stay in `native`): a
/// member of another shape is left out (logged), and the call still failed.
fn failed(payload: &Map<String, Value>, interrupted: Option<&str>) -> Ended {
    let interrupted = interrupted.and_then(|key| informational(optional_bool(payload, key)));
    match interrupted {
        Some(true) => Ended::Cancelled,
        Some(false) | None => Ended::Error,
    }
}

/// Where a harness keeps a model request (`model.request.before`).
pub struct ModelRequestFields {
    /// The request's member, an object.
    pub request: &'static str,
    /// The model's member in it.
    pub model: &'static str,
    /// The generation parameters' member in it, an object.
    pub params: &'static str,
    /// The generation parameters passed on, when numbers; the rest of that object is
    /// left out.
    pub kept_params: &'static [&'static str],
    /// Who serves the harness's models (`model.provider`): the harness does not say per
    /// request.
    pub provider: &'static str,
}

/// One form of a tool call in a payload.
pub struct ToolFields {
    /// The native tool name's member.
    pub name: &'static str,
    /// The tool input's member.
    pub input: &'static str,
    /// The input may also come as a string that encodes the JSON object.
    pub encoded: bool,
}

/// The tool call as most harnesses send it: `tool_name` and a `tool_input` object.
pub const SNAKE_TOOL: ToolFields = ToolFields {
    name: "tool_name",
    input: "tool_input",
    encoded: false,
};

/// Reads `payload` for `spec`'s event as `fields` says; tool events must carry a tool.
pub fn read(
    fields: &Fields,
    payload: &Map<String, Value>,
    spec: &EventSpec,
) -> Result<Payload, String> {
    let tool = match spec.ahp {
        AhpEvent::ToolBefore | AhpEvent::ToolAfter => Some(tool(fields.tool, payload)?),
        _ => None,
    };
    let mcp_context = match (fields.mcp_context, &tool) {
        (Some(key), Some(_)) => informational(optional_object(payload, key)).cloned(),
        _ => None,
    };
    let session_id = first_string(payload, fields.session)?;
    // The model request, where the harness shows one: what is in it only informs a
    // backend, so one of another shape is read as saying nothing.
    let request = match (spec.ahp, &fields.model_request) {
        (AhpEvent::ModelRequestBefore, Some(request_fields)) => {
            informational(optional_object(payload, request_fields.request))
                .map(|request| (request_fields, request))
        }
        _ => None,
    };
    let workspace_roots = match fields.workspace_roots {
        Some(key) => informational(optional_strings(payload, key)),
        None => Vec::new(),
    };
    // These only inform a backend too (a harness's own tool-use id missing or malformed
    // is one synthesized): one of another shape is left out, never the call denied.
    let named_cwd = informational(optional_string(payload, "cwd"));
    let cwd_is_a_root = named_cwd.is_none() && !workspace_roots.is_empty();
    let cwd = named_cwd.or_else(|| workspace_roots.first().cloned());
    let optional =
        |key: Option<&str>| key.and_then(|key| informational(optional_string(payload, key)));
    // What a stop says of the turn is read there alone.
    let at_stop =
        |key: Option<&'static str>| key.filter(|_| spec.ahp == AhpEvent::TurnFinishBefore);
    let trigger = match spec.ahp {
        AhpEvent::SessionStart => fields.start_trigger,
        AhpEvent::ContextCompactBefore => fields.compact_trigger,
        _ => None,
    };
    Ok(Payload {
        session_id,
        cwd,
        workspace_roots,
        cwd_is_a_root,
        model: fields
            .model
            .and_then(|key| informational(optional_string(payload, key))),
        call_id: optional(fields.call_id),
        turn_id: optional(fields.turn_id),
        trigger: optional(trigger),
        // Read where a session ends, the one event that carries it.
        reason: optional(Some("reason").filter(|_| spec.ahp == AhpEvent::SessionEnd)),
        tool,
        mcp_context,
        harness_version: fields
            .harness_version
            .and_then(|key| informational(optional_string(payload, key))),
        agent: fields.agent.and_then(|keys| agent(payload, keys)),
        permission_mode: fields
            .permission_mode
            .and_then(|key| informational(optional_string(payload, key))),
        request_model: request
            .and_then(|(fields, request)| informational(optional_string(request, fields.model))),
        request_params: request.and_then(|(fields, request)| {
            let params = informational(optional_object(request, fields.params))?;
            Some(kept_params(params, fields.kept_params))
        }),
        continued: at_stop(fields.continued)
            .and_then(|key| informational(optional_bool(payload, key))),
        stop_status: at_stop(fields.stop_status)
            .and_then(|key| informational(optional_stop_status(payload, key))),
        continuation_count: at_stop(fields.stop_loop_count)
            .and_then(|key| informational(optional_count(payload, key))),
        ended: match (&fields.ended, spec.ahp) {
            _ if spec.after_failed_call => failed(payload, fields.interrupted),
            (Some(field), AhpEvent::ToolAfter) => ended(payload, field),
            _ => Ended::Ok,
        },
    })
}

/// What identifies `spec`'s event in `payload`, read leniently where [`read`] may fail:
/// the AHP type, the session id and (at a tool event) the harness's tool-use id, each
/// when it is a non-empty string. No event id: that is made when the event is built.
pub fn identity(fields: &Fields, payload: &Map<String, Value>, spec: &EventSpec) -> EventRef {
    let text = |key: &str| match payload.get(key) {
        Some(Value::String(text)) if !text.is_empty() => Some(text.clone()),
        _ => None,
    };
    let tool_event = matches!(spec.ahp, AhpEvent::ToolBefore | AhpEvent::ToolAfter);
    EventRef {
        id: None,
        event_type: Some(spec.ahp.as_str().to_string()),
        session: fields.session.iter().find_map(|key| text(key)),
        call: fields.call_id.filter(|_| tool_event).and_then(text),
    }
}

/// The first of `keys` present, a non-empty string; none present names the first.
fn first_string(payload: &Map<String, Value>, keys: &[&str]) -> Result<String, String> {
    for key in keys {
        if let Some(text) = optional_string(payload, key)? {
            return Ok(text);
        }
    }
    Err(format!("{} is required", keys.first().unwrap_or(&"the id")))
}

/// The tool call in the first form whose name member is present.
fn tool(
    forms: &[ToolFields],
    payload: &Map<String, Value>,
) -> Result<(String, Map<String, Value>), String> {
    for form in forms {
        if let Some(name) = optional_string(payload, form.name)? {
            return Ok((name, input(payload, form)?));
        }
    }
    let first = forms.first().map_or("tool_name", |form| form.name);
    Err(format!("{first} is required"))
}

/// `json` parsed, a lone UTF-16 surrogate in a `\u` escape read as U+FFFD. JSON's
/// grammar allows one, and the JavaScript harnesses write one (`JSON.stringify` of a
/// string cut in the middle of an emoji, tool output truncated by UTF-16 length), but
/// serde_json refuses it: the payload would be "not JSON", a failure answered as a denial
/// of a call nothing objected to. Escapes are rewritten only after a first parse fails,
/// and the rewritten text is refused if two member names of one object are then alike
/// (`"K\ud800"` and `"K\udc00"`): the harness would act on both members, a backend see
/// one of them.
///
/// Its numbers are as the harness wrote them ([`exact`]), or [`Parsed::inexact`] says
/// where one is not; the error completes a sentence that names what was read ("the
/// payload …").
pub fn parse(json: &[u8]) -> Result<Parsed, String> {
    let read = serde_json::from_slice(json).map(|value| (value, None));
    let (mut value, replaced) = read
        .or_else(|error| match lone_surrogates_replaced(json) {
            Some(replaced) => {
                serde_json::from_slice::<Distinct>(&replaced)?;
                Ok((serde_json::from_slice(&replaced)?, Some(replaced)))
            }
            None => Err(error),
        })
        .map_err(|e| format!("is not JSON: {e}"))?;
    // Read as UTF-8 already.
    let text = std::str::from_utf8(replaced.as_deref().unwrap_or(json)).unwrap_or_default();
    let inexact = exact(text, &mut value).err();
    Ok(Parsed { value, inexact })
}

/// A payload (or an encoded tool input) as the harness reads it.
pub struct Parsed {
    pub value: Value,
    /// Why a backend would not read one of its numbers as the harness wrote it (a
    /// whole number past 64 bits, at its pointer), completing a sentence as [`parse`]'s
    /// error does: such a payload is refused, once what it is (its event, its session)
    /// is known for the answer and the record.
    pub inexact: Option<String>,
}

impl Parsed {
    /// The value, unless a number in it would not reach a backend as written.
    pub fn exact(self) -> Result<Value, String> {
        match self.inexact {
            None => Ok(self.value),
            Some(inexact) => Err(inexact),
        }
    }
}

/// A JSON value whose objects, at every depth, name each member once.
struct Distinct;

impl<'de> serde::Deserialize<'de> for Distinct {
    fn deserialize<D: serde::Deserializer<'de>>(reader: D) -> Result<Distinct, D::Error> {
        reader.deserialize_any(Distinct)
    }
}

impl<'de> serde::de::Visitor<'de> for Distinct {
    type Value = Distinct;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_str<E>(self, _: &str) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_unit<E>(self) -> Result<Distinct, E> {
        Ok(Distinct)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<Distinct, A::Error> {
        while items.next_element::<Distinct>()?.is_some() {}
        Ok(Distinct)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut members: A) -> Result<Distinct, A::Error> {
        let mut names = std::collections::HashSet::new();
        while let Some(name) = members.next_key::<String>()? {
            if !names.insert(name) {
                return Err(serde::de::Error::custom(
                    "two member names are alike once lone surrogates are read as U+FFFD",
                ));
            }
            members.next_value::<Distinct>()?;
        }
        Ok(Distinct)
    }
}

/// `json` with each `\u` escape of a surrogate that is not half of a pair replaced by
/// `\ufffd`; `None` if it has none. Escapes are read in order, so the `\u` of an
/// escaped backslash (`\\u`) is never taken for one.
fn lone_surrogates_replaced(json: &[u8]) -> Option<Vec<u8>> {
    let unit = |at: usize| -> Option<u16> {
        let hex = json.get(at..at + 6)?.strip_prefix(b"\\u")?;
        u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    };
    let is_high = |unit: u16| (0xD800..0xDC00).contains(&unit);
    let is_low = |unit: u16| (0xDC00..0xE000).contains(&unit);
    let (mut out, mut at, mut replaced) = (Vec::with_capacity(json.len()), 0, false);
    while at < json.len() {
        match (json[at], unit(at)) {
            (b'\\', Some(high)) if is_high(high) && unit(at + 6).is_some_and(is_low) => {
                out.extend_from_slice(&json[at..at + 12]);
                at += 12;
            }
            (b'\\', Some(lone)) if is_high(lone) || is_low(lone) => {
                out.extend_from_slice(b"\\ufffd");
                (at, replaced) = (at + 6, true);
            }
            (b'\\', _) => {
                out.extend_from_slice(&json[at..(at + 2).min(json.len())]);
                at += 2;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    replaced.then_some(out)
}

/// The tool input: an object, or where the form allows, a string encoding one.
fn input(payload: &Map<String, Value>, form: &ToolFields) -> Result<Map<String, Value>, String> {
    let key = form.input;
    match payload.get(key) {
        Some(Value::Object(object)) => Ok(object.clone()),
        Some(Value::String(encoded)) if form.encoded => {
            match parse(encoded.as_bytes()).and_then(Parsed::exact) {
                Ok(Value::Object(input)) => Ok(input),
                Ok(_) => Err(format!("{key} must encode a JSON object")),
                Err(e) => Err(format!("{key} {e}")),
            }
        }
        Some(_) if form.encoded => Err(format!("{key} must be a JSON-encoded object")),
        Some(_) => Err(format!("{key} must be a JSON object")),
        None => Err(format!("{key} is required")),
    }
}

/// The agent `payload` names at its `(id, type)` members: its id and, when named, its
/// type. A type with no id names none: `session.agent` requires an id (`claude --agent
/// NAME` names the main agent's type alone).
fn agent(
    payload: &Map<String, Value>,
    (id_key, kind_key): (&str, &str),
) -> Option<(String, Option<String>)> {
    let kind = informational(optional_string(payload, kind_key));
    let Some(id) = informational(optional_string(payload, id_key)) else {
        if kind.is_some() {
            tracing::debug!("{kind_key} without {id_key}: no session.agent");
        }
        return None;
    };
    Some((id, kind))
}

/// `key`'s list of non-empty strings, when present.
fn optional_strings(payload: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    let wrong = || format!("{key} must be a list of non-empty strings");
    match payload.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) if !text.is_empty() => Ok(text.clone()),
                _ => Err(wrong()),
            })
            .collect(),
        Some(_) => Err(wrong()),
    }
}

/// A field that only informs a backend, read as `read` says: one of another shape is
/// left out, logged, rather than failing the payload, so that a harness that changed
/// it does not have every call denied.
fn informational<T: Default>(read: Result<T, String>) -> T {
    read.unwrap_or_else(|problem| {
        tracing::warn!("{problem}: left out of the event");
        T::default()
    })
}

/// `key`, when present, must be an object.
fn optional_object<'a>(
    payload: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a Map<String, Value>>, String> {
    match payload.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(object)) => Ok(Some(object)),
        Some(_) => Err(format!("{key} must be a JSON object")),
    }
}

/// The generation parameters among `params` that are named in `kept` and are numbers:
/// an open object may carry anything (a system prompt, headers), which must not reach
/// every backend whatever its content selection says.
fn kept_params(params: &Map<String, Value>, kept: &[&str]) -> Map<String, Value> {
    params
        .iter()
        .filter(|(key, value)| kept.contains(&key.as_str()) && value.is_number())
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// `key`, when present, must be a boolean.
fn optional_bool(payload: &Map<String, Value>, key: &str) -> Result<Option<bool>, String> {
    match payload.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(_) => Err(format!("{key} must be a boolean")),
    }
}

/// `key`, when present, must be a whole number, 0 or more.
fn optional_count(payload: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match payload.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) if number.is_u64() => Ok(number.as_u64()),
        Some(_) => Err(format!("{key} must be a whole number, 0 or more")),
    }
}

/// `key`, when present, must be a non-empty string.
fn optional_string(payload: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match payload.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if !text.is_empty() => Ok(Some(text.clone())),
        Some(_) => Err(format!("{key} must be a non-empty string")),
    }
}

#[cfg(test)]
mod tests {
    /// A lone surrogate, high or low, is U+FFFD; a pair is the character it makes; the
    /// `u` after an escaped backslash is text; a payload that parses is read as it is.
    #[test]
    fn a_lone_surrogate_is_the_replacement_character() {
        let parsed = |json: &str| super::parse(json.as_bytes()).and_then(super::Parsed::exact);
        for (json, text) in [
            (r#""a\ud83d""#, "a\u{fffd}"),
            (r#""\ude00b""#, "\u{fffd}b"),
            (r#""\ud83d\ud83d\ude00""#, "\u{fffd}\u{1f600}"),
            (r#""\ud83dx\ude00""#, "\u{fffd}x\u{fffd}"),
            (r#""\\ud83d""#, "\\ud83d"),
            (r#""\ud83d\n""#, "\u{fffd}\n"),
        ] {
            assert_eq!(parsed(json), Ok(serde_json::json!(text)), "{json}");
        }
        assert_eq!(super::lone_surrogates_replaced(br#""\ud83d\ude00""#), None);
        assert!(parsed(r#""\ud83d"#).is_err(), "still not JSON");
        assert!(parsed(r#"{"a": \ud83d}"#).is_err(), "still not JSON");
    }

    /// Two names the harness tells apart that U+FFFD would make one are refused, at any
    /// depth: a backend would see one member, the tool would run with both. Names alike
    /// only because the harness wrote them twice are the harness's own (its reader keeps
    /// the last, as serde_json does), unless lone surrogates were rewritten too.
    #[test]
    fn names_made_alike_by_the_replacement_are_refused() {
        let parsed = |json: &str| super::parse(json.as_bytes()).and_then(super::Parsed::exact);
        for json in [
            r#"{"K\ud800": "SECRET", "K\udc00": "x"}"#,
            r#"{"tool_input": {"headers": [{"K\ud800": 1, "K\ufffd": 2}]}}"#,
        ] {
            let error = parsed(json).expect_err(json);
            assert!(error.contains("alike"), "{json}: {error}");
        }
        let kept = parsed(r#"{"K\ud800": "a", "L\udc00": ["b", {"K\ud800": "c"}]}"#);
        assert_eq!(
            kept,
            Ok(serde_json::json!({"K\u{fffd}": "a", "L\u{fffd}": ["b", {"K\u{fffd}": "c"}]}))
        );
        assert_eq!(
            parsed(r#"{"a": 1, "a": 2}"#),
            Ok(serde_json::json!({"a": 2}))
        );
    }

    use super::*;
    use crate::hook::Harness;
    use serde_json::json;

    fn read_as(harness: Harness, payload: Value) -> Result<Payload, String> {
        let spec = &harness.events()[0];
        read(harness.fields(), payload.as_object().unwrap(), spec)
    }

    /// `payload` read at `harness`'s `native` event.
    fn read_at(harness: Harness, native: &str, payload: Value) -> Result<Payload, String> {
        let spec = harness.spec(native).expect("mapped");
        read(harness.fields(), payload.as_object().unwrap(), spec)
    }

    #[test]
    fn a_missing_or_mistyped_field_is_named() {
        let error = read_as(Harness::ClaudeCode, json!({"tool_name": "Bash"})).unwrap_err();
        assert_eq!(error, "tool_input is required");
        let payload = json!({"session_id": 7, "tool_name": "Bash", "tool_input": {}});
        let error = read_as(Harness::Gemini, payload).unwrap_err();
        assert_eq!(error, "session_id must be a non-empty string");
        let payload = json!({"tool_name": "Bash", "tool_input": "{}"});
        let error = read_as(Harness::Cursor, payload).unwrap_err();
        assert_eq!(error, "tool_input must be a JSON object");
    }

    #[test]
    fn copilot_takes_either_form_and_decodes_tool_args() {
        let camel = json!({"sessionId": "s", "toolName": "bash", "toolArgs": "{\"a\":1}"});
        let read_camel = read_as(Harness::Copilot, camel).unwrap();
        assert_eq!(
            read_camel.tool,
            Some(("bash".into(), json!({"a": 1}).as_object().cloned().unwrap()))
        );
        let snake = json!({"session_id": "s", "tool_name": "bash", "tool_input": {"a": 1}});
        assert_eq!(read_as(Harness::Copilot, snake).unwrap(), read_camel);
        let error = read_as(
            Harness::Copilot,
            json!({"toolName": "bash", "toolArgs": "{}"}),
        )
        .unwrap_err();
        assert_eq!(error, "sessionId is required");
        // The encoded arguments' numbers are read as written too.
        let args = |encoded: &str| json!({"sessionId": "s", "toolName": "t", "toolArgs": encoded});
        let read = read_as(Harness::Copilot, args(r#"{"n":-0}"#)).unwrap();
        let (_, input) = read.tool.expect("a tool");
        assert_eq!(input["n"].as_u64(), Some(0), "{input:?}");
        let error = read_as(
            Harness::Copilot,
            args(r#"{"n":[1e2,-18446744073709551616]}"#),
        );
        assert_eq!(
            error.unwrap_err(),
            r#"toolArgs holds a whole number past 64 bits at "/n/1", which a backend would read as another number"#
        );
    }

    /// The fields that only inform a backend, malformed, are left out rather than failing
    /// the call (every call denied by a harness that changed one): `cwd` (then the first
    /// workspace root), the tool-use id (then one is synthesized), a `reason` (read only
    /// where a session ends).
    #[test]
    fn a_malformed_informational_field_is_left_out() {
        let payload = json!({"session_id": "s", "hook_event_name": "PreToolUse", "cwd": 7,
            "tool_name": "Bash", "tool_input": {}, "tool_use_id": "", "reason": ""});
        let read = read_at(Harness::ClaudeCode, "PreToolUse", payload).unwrap();
        assert_eq!((read.cwd, read.call_id, read.reason), (None, None, None));
        let payload = json!({"conversation_id": "c", "hook_event_name": "preToolUse", "cwd": "",
            "workspace_roots": ["/repo"], "tool_name": "Shell", "tool_input": {}});
        let read = read_at(Harness::Cursor, "preToolUse", payload).unwrap();
        assert_eq!(read.cwd.as_deref(), Some("/repo"));
        let payload = json!({"session_id": "s", "hook_event_name": "SessionEnd",
            "reason": "logout"});
        let read = read_at(Harness::ClaudeCode, "SessionEnd", payload).unwrap();
        assert_eq!(read.reason.as_deref(), Some("logout"));
    }

    /// A session start says why in `source`, a compaction (Claude Code's `PreCompact`,
    /// Gemini's `PreCompress`) what set it off in `trigger`.
    #[test]
    fn the_trigger_is_read_from_each_event_s_own_field() {
        let cases = [
            (Harness::ClaudeCode, "SessionStart", "source", "resume"),
            (Harness::ClaudeCode, "PreCompact", "trigger", "auto"),
            (Harness::Gemini, "SessionStart", "source", "startup"),
            (Harness::Gemini, "PreCompress", "trigger", "manual"),
        ];
        for (harness, native, key, trigger) in cases {
            let payload = json!({"session_id": "s", "hook_event_name": native, key: trigger});
            let read = read_at(harness, native, payload).unwrap();
            assert_eq!(
                read.trigger.as_deref(),
                Some(trigger),
                "{harness:?} {native}"
            );
        }
    }

    /// A payload [`read`] refuses still names its type, session and tool-use id.
    #[test]
    fn the_identity_of_a_refused_payload_is_read_leniently() {
        let harness = Harness::ClaudeCode;
        let payload = json!({"session_id": "s", "tool_name": "Bash", "tool_input": 42,
            "tool_use_id": "toolu_1"});
        let payload = payload.as_object().unwrap();
        let spec = &harness.events()[0];
        assert!(read(harness.fields(), payload, spec).is_err());
        let known = identity(harness.fields(), payload, spec);
        assert_eq!(known.event_type.as_deref(), Some("tool.before"));
        assert_eq!(known.session.as_deref(), Some("s"));
        assert_eq!(known.call.as_deref(), Some("toolu_1"));
        assert_eq!(known.id, None);
    }

    /// Gemini's `llm_request` at `BeforeModel`: its model and generation parameters, each
    /// left out when of another shape, and the payload still reads.
    #[test]
    fn gemini_s_model_request_is_read_before_the_model() {
        let read_request = |request: Value| {
            let payload = json!({"session_id": "s", "hook_event_name": "BeforeModel",
                "llm_request": request});
            let read = read_at(Harness::Gemini, "BeforeModel", payload);
            let read = read.expect("the payload reads");
            (read.request_model, read.request_params)
        };
        let (model, params) = read_request(json!({"model": "gemini-2.5-pro",
            "messages": [{"role": "user", "content": "hi"}],
            "config": {"temperature": 0.2, "topK": 40, "systemInstruction": "be terse",
                "httpOptions": {"headers": {"x-goog-api-key": "k3y"}}, "seed": "7"}}));
        assert_eq!(model.as_deref(), Some("gemini-2.5-pro"));
        // Known numeric generation parameters only: no prompt, no header, no string.
        assert_eq!(
            params,
            json!({"temperature": 0.2, "topK": 40}).as_object().cloned()
        );
        assert_eq!(
            read_request(json!({"model": 7, "config": [1]})),
            (None, None)
        );
        assert_eq!(read_request(json!("not an object")), (None, None));
        assert_eq!(read_request(json!(null)), (None, None));
    }

    /// `stop_hook_active` is read at a stop alone; of another shape it says nothing (and
    /// nothing is then offered on it), and the payload still reads.
    #[test]
    fn whether_a_stop_hook_continued_the_turn_is_read_at_a_stop() {
        let continued = |harness: Harness, native: &str, flag: Value| {
            let payload = json!({"session_id": "s", "conversation_id": "s",
                "hook_event_name": native, "stop_hook_active": flag,
                "tool_name": "t", "tool_input": {}});
            read_at(harness, native, payload).unwrap().continued
        };
        assert_eq!(
            continued(Harness::ClaudeCode, "Stop", json!(false)),
            Some(false)
        );
        assert_eq!(continued(Harness::Codex, "Stop", json!(true)), Some(true));
        assert_eq!(
            continued(Harness::Gemini, "AfterAgent", json!(false)),
            Some(false)
        );
        assert_eq!(
            continued(Harness::Gemini, "AfterAgent", json!("false")),
            None
        );
        assert_eq!(
            continued(Harness::ClaudeCode, "PostToolUse", json!(false)),
            None
        );
        assert_eq!(continued(Harness::Cursor, "stop", json!(false)), None);
    }

    /// Cursor's `stop` says how the agent's work ended (`status`) and how many times a
    /// stop hook has made it go on in this loop (`loop_count`), read at a stop alone. Each
    /// only informs a backend: of another shape (a word Cursor does not send, a count
    /// that is negative, fractional or not a number) it is left out, and the payload
    /// still reads; absent, it says nothing.
    #[test]
    fn cursor_s_stop_says_how_the_work_ended_and_how_often_it_went_on() {
        let stop = |status: Value, loop_count: Value| {
            let payload = json!({"conversation_id": "c", "hook_event_name": "stop",
                "status": status, "loop_count": loop_count});
            let read = read_at(Harness::Cursor, "stop", payload).unwrap();
            (read.stop_status, read.continuation_count)
        };
        let said = [
            ("completed", StopStatus::Completed),
            ("aborted", StopStatus::Aborted),
            ("error", StopStatus::Error),
        ];
        for (word, status) in said {
            assert_eq!(
                stop(json!(word), json!(2)),
                (Some(status), Some(2)),
                "{word}"
            );
        }
        assert_eq!(stop(json!("aborted"), json!(0)).1, Some(0));
        for malformed in [json!("Aborted"), json!("paused"), json!(""), json!(7)] {
            assert_eq!(
                stop(malformed.clone(), json!(1)),
                (None, Some(1)),
                "{malformed}"
            );
        }
        for malformed in [json!(-1), json!(1.5), json!("2"), json!(true)] {
            let read = stop(json!("error"), malformed.clone());
            assert_eq!(read, (Some(StopStatus::Error), None), "{malformed}");
        }
        let absent = json!({"conversation_id": "c", "hook_event_name": "stop"});
        let read = read_at(Harness::Cursor, "stop", absent).unwrap();
        assert_eq!((read.stop_status, read.continuation_count), (None, None));
        // Elsewhere, and from a harness that sends neither, members of those names are
        // not read.
        let tool = json!({"conversation_id": "c", "hook_event_name": "postToolUse",
            "tool_name": "Shell", "tool_input": {}, "status": "error", "loop_count": 1});
        let read = read_at(Harness::Cursor, "postToolUse", tool).unwrap();
        assert_eq!((read.stop_status, read.continuation_count), (None, None));
        let claude = json!({"session_id": "s", "hook_event_name": "Stop",
            "status": "error", "loop_count": 1});
        let read = read_at(Harness::ClaudeCode, "Stop", claude).unwrap();
        assert_eq!((read.stop_status, read.continuation_count), (None, None));
    }

    /// Claude Code names the subagent a call runs in (`agent_id`, `agent_type`) and the
    /// permission mode; informational, each of another shape is left out.
    #[test]
    fn claude_code_reads_its_subagent_and_permission_mode() {
        let payload = json!({"session_id": "s", "tool_name": "Bash", "tool_input": {},
            "agent_id": "a-1", "agent_type": "reviewer", "permission_mode": "plan"});
        let read = read_as(Harness::ClaudeCode, payload).unwrap();
        assert_eq!(read.agent, Some(("a-1".into(), Some("reviewer".into()))));
        assert_eq!(read.permission_mode.as_deref(), Some("plan"));
        let payload = json!({"session_id": "s", "tool_name": "Bash", "tool_input": {},
            "agent_id": "a-1", "agent_type": 3, "permission_mode": ["plan"]});
        let read = read_as(Harness::ClaudeCode, payload).unwrap();
        assert_eq!(
            (read.agent, read.permission_mode),
            (Some(("a-1".into(), None)), None)
        );
        // An agent's type with no id (`claude --agent NAME`) names no `session.agent`,
        // which requires an id.
        for id in [json!(""), json!(null)] {
            let payload = json!({"session_id": "s", "tool_name": "Bash", "tool_input": {},
                "agent_id": id, "agent_type": "reviewer"});
            assert_eq!(read_as(Harness::ClaudeCode, payload).unwrap().agent, None);
        }
    }

    /// Codex names a subagent (`agent_id`, `agent_type`) at its tool and compaction
    /// events, as Claude Code does.
    #[test]
    fn codex_reads_the_subagent_it_names() {
        let payload = json!({"session_id": "s", "hook_event_name": "PreCompact",
            "trigger": "auto", "agent_id": "a-2", "agent_type": "worker"});
        let read = read_at(Harness::Codex, "PreCompact", payload).unwrap();
        assert_eq!(read.agent, Some(("a-2".into(), Some("worker".into()))));
        assert_eq!(read.trigger.as_deref(), Some("auto"));
    }

    /// Gemini's `mcp_context` is read at a tool event; one of another shape is left out
    /// (the descriptor is then inferred from the name), as a null one is absent, and the
    /// payload still reads.
    #[test]
    fn gemini_s_mcp_context_is_read_at_tool_events() {
        let context = json!({"server_name": "files", "tool_name": "read"});
        let payload = json!({"session_id": "s", "tool_name": "read", "tool_input": {},
            "mcp_context": context});
        let read = read_as(Harness::Gemini, payload.clone()).unwrap();
        assert_eq!(read.mcp_context.as_ref(), context.as_object());
        for malformed in [json!("files"), json!([1]), json!(null)] {
            let payload = json!({"session_id": "s", "tool_name": "read", "tool_input": {},
                "mcp_context": malformed});
            assert_eq!(read_as(Harness::Gemini, payload).unwrap().mcp_context, None);
        }
        // Claude Code sends none: a member of that name is not read.
        assert_eq!(
            read_as(Harness::ClaudeCode, payload).unwrap().mcp_context,
            None
        );
    }

    /// Cursor's workspace roots are the session's, all of them; without `cwd`, the first
    /// is the working directory too. Roots or a model of another shape are left out, and
    /// the payload still reads: they only inform a backend.
    #[test]
    fn cursor_reads_its_workspace_roots_and_falls_back_to_the_first() {
        let payload = json!({"conversation_id": "c", "tool_name": "Shell", "tool_input": {},
            "workspace_roots": ["/w1", "/w2"], "model": "m-1"});
        let read = read_as(Harness::Cursor, payload).unwrap();
        assert_eq!(read.cwd.as_deref(), Some("/w1"));
        assert_eq!(read.workspace_roots, ["/w1", "/w2"]);
        assert_eq!(read.model.as_deref(), Some("m-1"));
        for (roots, model) in [(json!("/w1"), json!(7)), (json!(["/w1", 2]), json!(""))] {
            let payload = json!({"conversation_id": "c", "tool_name": "Shell",
                "tool_input": {}, "workspace_roots": roots, "model": model, "cwd": "/c"});
            let read = read_as(Harness::Cursor, payload).unwrap();
            assert_eq!((read.workspace_roots.len(), read.model), (0, None));
            assert_eq!(read.cwd.as_deref(), Some("/c"));
        }
        // Cursor's version, likewise informational: of another shape, it is left out.
        let versioned = |version: Value| {
            let payload = json!({"conversation_id": "c", "hook_event_name": "sessionStart",
                "cursor_version": version});
            let read = read_at(Harness::Cursor, "sessionStart", payload);
            read.unwrap().harness_version
        };
        assert_eq!(versioned(json!("2.4.0")).as_deref(), Some("2.4.0"));
        assert_eq!((versioned(json!(7)), versioned(json!(""))), (None, None));
        // Claude Code sends neither: a member of that name is not read.
        let payload = json!({"session_id": "s", "tool_name": "Bash", "tool_input": {},
            "workspace_roots": "/w1", "model": 3});
        let read = read_as(Harness::ClaudeCode, payload).unwrap();
        assert_eq!((read.workspace_roots.len(), read.model), (0, None));
    }
}
