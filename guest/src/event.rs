//! Checks a harness-supplied event before anything is sent to a backend.
//!
//! The harness is the security boundary, so an event it cannot vouch for must never reach
//! a backend: a backend that sees a malformed event could be deciding about something
//! other than what will run. Checks follow the draft schemas (`tool-before.schema.json`,
//! `common.schema.json`) plus the prose rules they cannot express (an encoded-string
//! `input`, the MCP descriptor tied to `origin`, strict RFC 3986 / RFC 3339 strings).
//!
//! Envelopes are lenient (AHP-CORE-003): unknown fields are kept untouched and re-encoded
//! as they came, so extensions survive. Every problem is collected, not just the first,
//! so whoever wired up the harness can fix the event in one go.

use crate::content::{self, Selection};
use crate::effect::EffectKind;
use crate::events::{self, Payload, Rules, Shape};
use crate::json::{self, Node, Object};
use crate::registration::View;
use crate::syntax::{
    argument_carries_a_credential, has_a_secret_parameter, has_userinfo, is_absolute_uri,
    is_date_time, is_http_url, is_reverse_dns, secret_after_option,
};
use ahp_vocab::EventCapability;
use serde::ser::SerializeMap as _;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::BTreeSet;
use std::fmt;

/// A validated event. Keeps the harness's own text so that, unchanged, it can be sent as
/// it came; its values are read from that text only when a member's value is needed (a
/// modification, or an encoding without `native`): the checks look at a tree that
/// borrows the text, and most calls need nothing more.
#[derive(Clone, Debug)]
pub struct Event {
    /// `id`: the event identity, also the JSON-RPC id of an intercept request.
    pub id: String,
    /// `type`, e.g. `tool.before`.
    pub event_type: String,
    /// `session.id`, when the event has a session.
    pub session_id: Option<String>,
    /// `call.id`, when the event has a (string) call identity.
    pub call_id: Option<String>,
    /// The harness's text, without the whitespace around it. When it is one line, a
    /// backend is sent the document that was checked, byte for byte (the strict reader
    /// refused repeated members, so no reader can see another one in it), without the
    /// cost of encoding it again; a stdio frame is one line, so a text with a line break
    /// is encoded again. Gone once a modification changes the event.
    text: Option<String>,
    /// Whether the document has a `native` member where the schemas allow one (at the
    /// top, or in `error`): a subscription that does not include it is sent the document
    /// encoded without it.
    native: bool,
    /// Whether the document holds the value its type's modify effect targets.
    holds_modify_target: bool,
    /// The least selection a content part of the document claims (see
    /// [`crate::content`]), `None` without parts: only a part can change by a
    /// subscription's selection, and for one that allows body, only a part that claims
    /// less (it never rises to the subscription's).
    least_claimed: Option<Selection>,
    /// The document as values: read from `text` the first time a value is needed, or
    /// the modified document.
    document: OnceCell<Map<String, Value>>,
}

/// Two events are the same when their documents are: the text is only how one came.
impl PartialEq for Event {
    /// The same operation: equal documents but for `native`, which a modified event
    /// leaves out ([`Event::with_value`]): a modification that changes nothing else is
    /// no change.
    fn eq(&self, other: &Event) -> bool {
        equal_but_native(self.document(), other.document())
    }
}

/// A copy of `object` with the member at `steps` (member names, its parents objects) set
/// to `value`, and the member it replaces not copied; as it is where a parent is missing
/// or no object.
fn copied_with(object: &Map<String, Value>, steps: &[&str], value: Value) -> Map<String, Value> {
    let Some((&step, rest)) = steps.split_first() else {
        return object.clone();
    };
    let mut copy: Map<String, Value> = object
        .iter()
        .filter(|(name, _)| name.as_str() != step)
        .map(|(name, member)| (name.clone(), member.clone()))
        .collect();
    let member = match (object.get(step), rest.is_empty()) {
        (_, true) => Some(value),
        (Some(Value::Object(inner)), false) => Some(Value::Object(copied_with(inner, rest, value))),
        (other, false) => other.cloned(),
    };
    if let Some(member) = member {
        copy.insert(step.to_owned(), member);
    }
    copy
}

/// Whether two objects are equal, their `native` members left out, and their `error`s'.
fn equal_but_native(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    let members =
        |m: &Map<String, Value>| m.iter().filter(|(key, _)| key.as_str() != "native").count();
    members(a) == members(b)
        && a.iter()
            .filter(|(key, _)| key.as_str() != "native")
            .all(|(key, value)| match (value, b.get(key)) {
                (Value::Object(x), Some(Value::Object(y))) if key == "error" => {
                    equal_but_native(x, y)
                }
                (value, Some(other)) => value == other,
                (_, None) => false,
            })
}

/// One broken rule: where (a JSON Pointer into the event) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventProblem {
    /// JSON Pointer to the offending member, e.g. `/tool/input` (`""` is the root).
    pub path: String,
    /// The rule it breaks, in words.
    pub rule: String,
}

impl fmt::Display for EventProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.rule)
    }
}

impl std::error::Error for EventProblem {}

/// Fields that only exist once a tool has run; a `tool.before` carrying them would claim
/// an outcome that has not happened.
const AFTER_ONLY_FIELDS: [&str; 4] = ["outcome", "execution", "durationMs", "fileChanges"];

impl Event {
    /// A `tool.before` event: envelope + call/tool/path rules.
    pub fn parse_tool_before(text: &str) -> Result<Event, Vec<EventProblem>> {
        parse_checked(text, |object, _, problems| {
            check_tool_before(object, problems)
        })
    }

    /// An event for interception: the envelope, then the payload rules of its type
    /// (tool-before and tool-after schemas in full, the required members of the
    /// upstream catalogue schemas for the others, see [`events::TABLE`]). A type that is
    /// not interceptable is a problem at `/type`.
    pub fn parse_intercepted(text: &str) -> Result<(Event, &'static Rules), Vec<EventProblem>> {
        let mut rules = None;
        let event = parse_checked(text, |object, name, problems| {
            rules = events::named(name);
            match rules {
                Some(rules) => check_payload(object, name, rules, problems),
                None if name.is_empty() => {}
                None => problems.add("/type", "must be an interceptable event"),
            }
        })?;
        // The type is known and interceptable whenever there is no problem.
        Ok((event, rules.unwrap_or(&events::TABLE[0])))
    }

    /// A problem when `capability` advertises modify but the event lacks the target's
    /// value: the harness would offer a backend to change something it did not send,
    /// and could not check or apply the change. A target optional on the event
    /// (`/instructions`) is then required. `rules` are the event's own, as
    /// [`Event::parse_intercepted`] found them.
    pub fn missing_target(
        &self,
        rules: &Rules,
        capability: &EventCapability,
    ) -> Option<EventProblem> {
        let (target, pointer) = rules
            .modify
            .filter(|_| capability.has(EffectKind::Modify))?;
        (!self.holds_modify_target).then(|| EventProblem {
            path: pointer.to_owned(),
            rule: format!("is required when modify of \"{target}\" is advertised"),
        })
    }

    /// The value at `pointer` (a JSON Pointer of member names into the event), taken out
    /// of it: what a caller that has no more use for the event keeps, not copied.
    pub fn into_value_at(self, pointer: &str) -> Option<Value> {
        self.document();
        let document = self.document.into_inner()?;
        Value::Object(document)
            .pointer_mut(pointer)
            .map(Value::take)
    }

    /// That a modification made in place brought parts claiming at least `least`.
    pub fn brought_parts(&mut self, least: Option<Selection>) {
        self.least_claimed = match (self.least_claimed, least) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// The value at `pointer` in an event a modification made (never the harness's, whose
    /// text is what is sent), to change in place; `None` where it is missing.
    pub fn value_at_mut(&mut self, pointer: &str) -> Option<&mut Value> {
        if self.text.is_some() {
            return None;
        }
        let path = pointer.strip_prefix('/')?;
        let (first, rest) = path.find('/').map_or((path, ""), |at| path.split_at(at));
        self.document.get_mut()?.get_mut(first)?.pointer_mut(rest)
    }

    /// The value at `pointer` (a JSON Pointer of member names into the event), if present.
    pub fn value_at(&self, pointer: &str) -> Option<&Value> {
        let path = pointer.strip_prefix('/')?;
        let (first, rest) = path.find('/').map_or((path, ""), |at| path.split_at(at));
        self.document().get(first)?.pointer(rest)
    }

    /// The document as values, read from the harness's text the first time.
    pub(crate) fn document(&self) -> &Map<String, Value> {
        self.document.get_or_init(|| {
            // The text was read strictly already, within the weight `json::parse` takes
            // ([`parse_object`]): reading it again cannot fail. Were it to, an empty
            // document would send a backend content its subscription omits and drop an
            // accepted modification, so a failure here is a trap (an engine failure, a
            // denial), never an empty document.
            // (Without a text, the document was set when the event was made.)
            match self.text.as_deref().map(json::parse) {
                Some(Ok(Value::Object(object))) => object,
                _ => panic!("an event's text read as an object before does not parse again"),
            }
        })
    }

    /// This event with the member at `pointer` set to `value` (its parents must exist):
    /// the effective event after an accepted modification. Identities are untouched.
    /// Every `native` member is taken out: the provider's payload describes the
    /// operation as the harness had it, the original input or output included, and a
    /// later subscription sees the accepted effective value, never the original
    /// (composition) — a redaction would otherwise reach it through `native`.
    ///
    /// The member it replaces is not copied: a copy of a large target beside the new value
    /// and the event's own ran the component out of memory.
    pub fn with_value(&self, pointer: &str, value: Value) -> Event {
        let steps: Vec<&str> = pointer.split('/').skip(1).collect();
        let mut document = copied_with(self.document(), &steps, value);
        document.remove("native");
        if let Some(Value::Object(error)) = document.get_mut("error") {
            error.remove("native");
        }
        Event {
            id: self.id.clone(),
            event_type: self.event_type.clone(),
            session_id: self.session_id.clone(),
            call_id: self.call_id.clone(),
            text: None,
            native: false,
            holds_modify_target: self.holds_modify_target,
            // A modification may bring parts of its own, of any selection.
            least_claimed: content::least_claimed_in(document.values()),
            document: OnceCell::from(document),
        }
    }

    /// Any event (for observe): the envelope rules (id, source, type, time; session.id if
    /// session present), and the payload rules of an interceptable type, which observers
    /// are owed as much as interceptors, or of a type observed only whose rules are
    /// known ([`events::OBSERVED`]). A type outside the catalogue is refused.
    pub fn parse_any(text: &str) -> Result<Event, Vec<EventProblem>> {
        parse_checked(text, |object, name, problems| {
            if let Some(rules) = events::named(name) {
                check_payload(object, name, rules, problems);
            } else if let Some(members) = events::observed(name) {
                check_members(object, name, members, problems);
            } else if !name.is_empty() && !events::CATALOGUE.contains(&name) {
                problems.add("/type", "must be an event type of the catalogue");
            }
        })
    }

    /// Appends the event as sent to one subscription (its [`View`]): every `native`
    /// removed unless included (the provider payload may hold anything, so it leaves only
    /// when local policy says so), and every content part lowered to the subscription's
    /// selection or its own, the smaller. The harness's text when it can go as it came,
    /// else the document encoded (one line).
    pub fn write_wire(&self, view: &View, out: &mut Vec<u8>) {
        let projected = match self.least_claimed {
            Some(least) if least < Selection::Body || !view.content.is_all_body() => {
                view.content.project(self.document())
            }
            _ => None,
        };
        let include_native = view.include_native;
        match (&self.text, &projected) {
            (Some(text), None)
                if !has_line_break(text.as_bytes()) && (include_native || !self.native) =>
            {
                out.extend_from_slice(text.as_bytes())
            }
            _ => {
                let wire = WireEvent {
                    object: projected.as_ref().unwrap_or_else(|| self.document()),
                    include_native,
                };
                // Writing a `Map` of `Value`s to a `Vec` cannot fail.
                let _ = serde_json::to_writer(out, &wire);
            }
        }
    }
}

/// The parsed event re-encoded for one subscription (see [`Event::write_wire`]).
struct WireEvent<'a> {
    object: &'a Map<String, Value>,
    include_native: bool,
}

impl Serialize for WireEvent<'_> {
    /// Without `native` unless included, wherever the schemas allow one: the event's own,
    /// and the one of its `error` (execution-event.schema.json `$defs/error`).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.include_native {
            return serializer.collect_map(self.object);
        }
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.object {
            match (key.as_str(), value) {
                ("native", _) => {}
                ("error", Value::Object(error)) => {
                    map.serialize_entry(key, &WithoutNative(error))?
                }
                _ => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
}

/// An object encoded without its `native` member.
struct WithoutNative<'a>(&'a Map<String, Value>);

impl Serialize for WithoutNative<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().filter(|(key, _)| key.as_str() != "native"))
    }
}

/// The most problems one event is refused with. A hostile event can hold millions (an
/// empty call id each), and every problem is looked up before another is added: without
/// a bound that is quadratic time, and memory the component does not have.
pub(crate) const MAX_PROBLEMS: usize = 100;

/// Problems found so far (the first [`MAX_PROBLEMS`]); turns into the event only if
/// there are none.
#[derive(Default)]
struct Problems(Vec<EventProblem>);

impl Problems {
    fn add(&mut self, path: impl Into<String>, rule: &str) {
        if !self.is_full() {
            self.0.push(EventProblem {
                path: path.into(),
                rule: rule.to_owned(),
            });
        }
    }

    fn is_full(&self) -> bool {
        self.0.len() >= MAX_PROBLEMS
    }

    /// Whether a problem found so far is at `path`, so that it is not named again; once
    /// full, every path is, as nothing more would be kept.
    fn names(&self, path: &str) -> bool {
        self.is_full() || self.0.iter().any(|p| p.path == path)
    }

    fn into_result(self, object: &Object, source: &str) -> Result<Event, Vec<EventProblem>> {
        if !self.0.is_empty() {
            return Err(self.0);
        }
        let text = |parent: Option<&Object>, key: &str| {
            parent
                .and_then(|parent| parent.get(key))
                .and_then(Node::as_str)
                .filter(|text| !text.is_empty())
                .map(str::to_owned)
        };
        let member = |key: &str| object.get(key).and_then(Node::as_object);
        let event_type = text(Some(object), "type").unwrap_or_default();
        let holds_modify_target = events::named(&event_type)
            .and_then(|rules| rules.modify)
            .is_some_and(|(_, pointer)| member_at(object, pointer).is_some());
        let source = source.trim();
        Ok(Event {
            id: text(Some(object), "id").unwrap_or_default(),
            event_type,
            session_id: text(member("session"), "id"),
            call_id: text(member("call"), "id"),
            text: Some(source.to_owned()),
            native: object.contains_key("native")
                || object.get("error").and_then(|e| e.get("native")).is_some(),
            holds_modify_target,
            least_claimed: content::least_claimed(object),
            document: OnceCell::new(),
        })
    }
}

/// The checks every parser shares, around the payload rules it names: the envelope
/// first, then `payload` (given the event's `type`, empty when it has none), then the
/// lineage and content checks, which leave alone what the payload rules named. The
/// event, or every problem found.
fn parse_checked(
    text: &str,
    payload: impl FnOnce(&Object, &str, &mut Problems),
) -> Result<Event, Vec<EventProblem>> {
    let object = parse_object(text)?;
    let mut problems = Problems::default();
    if let Some(pointer) = nested_too_deep(&object, 1) {
        problems.add(pointer, TOO_DEEP_RULE);
    }
    check_envelope(&object, &mut problems);
    let name = object
        .get("type")
        .and_then(Node::as_str)
        .unwrap_or_default();
    payload(&object, name, &mut problems);
    check_lineage(&object, &mut problems);
    check_content(&object, &mut problems);
    problems.into_result(&object, text)
}

/// The payload rules of the interceptable type `name` (its row in [`events::TABLE`]).
fn check_payload(object: &Object, name: &str, rules: &Rules, problems: &mut Problems) {
    match rules.payload {
        Payload::ToolBefore => check_tool_before(object, problems),
        Payload::ToolAfter => check_tool_after(object, problems),
        Payload::Members(members) => check_members(object, name, members, problems),
    }
}

/// The most levels of arrays and objects an event may nest, itself the first. Every
/// message wraps it two levels deeper (`{"params":{"event":…}}`, [`crate::wire`]), and
/// serde_json refuses a text nested 128 levels ([`json`]): the reader of the host's stdio
/// transport and of the official SDKs' backends. An event nested 126 or 127 levels was
/// read here but its request by none of them, so a fail-open subscription let it go on
/// unasked.
pub const MAX_NESTING: usize = 125;

/// The rule an event nested deeper than [`MAX_NESTING`] breaks, at the first array or
/// object past it.
pub const TOO_DEEP_RULE: &str = "is nested past 125 levels of arrays and objects, the event \
     counted: a request wraps the event 2 levels deeper, and JSON readers refuse 128";

/// The pointer of the first array or object nested past [`MAX_NESTING`] in a member of
/// `object`, itself at nesting level `level` (the event is 1). Built on the way back up:
/// an event within the limit costs one walk and no string.
fn nested_too_deep(object: &Object, level: usize) -> Option<String> {
    object.members().find_map(|(name, value)| {
        let inner = too_deep(value, level + 1)?;
        Some(format!("/{}{inner}", json::segment(name)))
    })
}

/// The same from `node`, at nesting level `level`: `""` when `node` itself is past it.
fn too_deep(node: &Node, level: usize) -> Option<String> {
    match node {
        Node::Array(_) | Node::Object(_) if level > MAX_NESTING => Some(String::new()),
        Node::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            let inner = too_deep(item, level + 1)?;
            Some(format!("/{i}{inner}"))
        }),
        Node::Object(object) => nested_too_deep(object, level),
        _ => None,
    }
}

/// The root must be a JSON object; nothing else can be checked otherwise. A member
/// named twice is refused: the backend and the harness could each read a different one.
/// Its weight is held to what [`json::parse`] takes, as the document may be parsed whole
/// later ([`Event::document`]).
fn parse_object(text: &str) -> Result<Object<'_>, Vec<EventProblem>> {
    let problem = |path: String, rule: String| vec![EventProblem { path, rule }];
    let root = |rule: &str| problem(String::new(), rule.to_owned());
    match json::read_parseable(text) {
        Ok(Node::Object(object)) => Ok(object),
        Ok(_) => Err(root("must be a JSON object")),
        Err(json::Error::Duplicate(repeat)) => Err(problem(
            repeat.pointer,
            format!("duplicate member `{}`", repeat.member),
        )),
        Err(json::Error::Inexact(number)) => {
            Err(problem(number.pointer, json::Inexact::RULE.to_owned()))
        }
        Err(json::Error::TooMany) => Err(root(json::TOO_MANY_PARSED_RULE)),
        // serde_json says where, and why: a grammar error, a number out of range, or a
        // nesting past its limit; named at the value it was reading.
        Err(json::Error::Syntax(e)) => Err(problem(
            e.pointer,
            format!("must be valid JSON: {}", e.error),
        )),
    }
}

/// Whether JSON text holds an LF or CR, looked for eight bytes at a time: a JSON string
/// cannot hold a raw control character, so the only bytes below 0x0E in JSON text are
/// whitespace (tab, LF, CR), and a word with none of them needs no closer look.
fn has_line_break(json: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH_BITS: u64 = ONES << 7;
    let is_break = |b: &u8| *b == b'\n' || *b == b'\r';
    let mut words = json.chunks_exact(8);
    let found = words.by_ref().any(|word| {
        let w = u64::from_ne_bytes(word.try_into().unwrap_or_default());
        // Non-zero exactly when some byte of `w` is below 0x0E.
        let below = w.wrapping_sub(ONES * 0x0E) & !w & HIGH_BITS;
        below != 0 && word.iter().any(is_break)
    });
    found || words.remainder().iter().any(is_break)
}

/// Rules every event shares (event.schema.json envelope).
fn check_envelope(event: &Object, problems: &mut Problems) {
    required_string(event, "", "id", problems);
    if let Some(source) = required_string(event, "", "source", problems) {
        if !is_absolute_uri(source) {
            problems.add("/source", "must be an absolute URI (RFC 3986)");
        } else if has_userinfo(source) {
            // Digest §3.2: non-secret, and sent to every backend. Not echoed.
            problems.add(
                "/source",
                "must not carry user info (user:password@): it is sent to every backend",
            );
        } else if has_a_secret_parameter(source) {
            problems.add(
                "/source",
                "must not carry a credential in a parameter named as a secret: it is sent to \
                 every backend",
            );
        }
    }
    required_string(event, "", "type", problems);
    if let Some(time) = required_string(event, "", "time", problems) {
        if !is_date_time(time) {
            problems.add("/time", "must be an RFC 3339 date-time");
        }
    }
    if event.contains_key("session") {
        if let Some(session) = required_object(event, "", "session", problems) {
            check_session(session, problems);
        }
    }
    optional_string(event, "", "parentEventId", problems);
    // Known fields are validated (AHP-CORE-003): an extension named outside reverse DNS
    // could take another vendor's meaning.
    // Each name that is not is named, so that one among many can be found.
    match event.get("extensions") {
        Some(Node::Object(extensions)) => {
            for name in extensions.keys().filter(|name| !is_reverse_dns(name)) {
                let at = format!("/extensions/{}", json::segment(name));
                problems.add(at, "must be named in reverse DNS (AHP-EXT-001)");
            }
        }
        Some(_) => problems.add(
            "/extensions",
            "must be an object whose member names are reverse-DNS (AHP-EXT-001)",
        ),
        None => {}
    }
}

/// `session` (common.schema.json): `{id, cwd?, workspaceRoots?, model?, agent?: {id,
/// type?}, synthesized?}`.
fn check_session(session: &Object, problems: &mut Problems) {
    let at = "/session";
    required_string(session, at, "id", problems);
    for key in ["cwd", "model"] {
        if session.get(key).is_some_and(|value| !value.is_string()) {
            problems.add(format!("{at}/{key}"), "must be a string");
        }
    }
    match session.get("workspaceRoots") {
        Some(Node::Array(roots)) => {
            for (i, _) in roots.iter().enumerate().filter(|(_, r)| !r.is_string()) {
                problems.add(format!("/session/workspaceRoots/{i}"), "must be a string");
            }
        }
        Some(_) => problems.add("/session/workspaceRoots", "must be an array of strings"),
        None => {}
    }
    if session.contains_key("agent") {
        if let Some(agent) = required_object(session, at, "agent", problems) {
            required_string(agent, "/session/agent", "id", problems);
            if agent.get("type").is_some_and(|kind| !kind.is_string()) {
                problems.add("/session/agent/type", "must be a string");
            }
        }
    }
    optional_bool(session, at, "synthesized", problems);
}

/// The lineage members any event may carry (digest §3.2, each event schema): `turn`
/// `{id, synthesized?}`, `gaps` of `{path, reason}` and `synthesized`. Checked after
/// the payload rules, which name `turn` where an event requires it, and never naming a
/// member twice.
fn check_lineage(event: &Object, problems: &mut Problems) {
    let mut found = Problems::default();
    if event.contains_key("turn") {
        if let Some(turn) = required_object(event, "", "turn", &mut found) {
            required_string(turn, "/turn", "id", &mut found);
            optional_bool(turn, "/turn", "synthesized", &mut found);
        }
    }
    check_gaps(event, "", &mut found);
    optional_bool(event, "", "synthesized", &mut found);
    for problem in found.0 {
        if !problems.names(&problem.path) {
            problems.add(problem.path, &problem.rule);
        }
    }
}

/// `parent.call` (at `at`): `{id, synthesized?}` and nothing else, and the batch the
/// call belongs to, `parent.batch`, where there is one ([`check_batch`]). Every schema
/// with a call gives it both: tool-before/after schemas, and in
/// execution-event.schema.json@62fc780 tool.permission.request,
/// tool.permission.resolved, tool.progress and each of tool.batch.after's `calls`.
fn check_call(parent: &Object, at: &str, problems: &mut Problems) {
    if let Some(call) = required_object(parent, at, "call", problems) {
        // The event's own call (every tool call) needs no formatting.
        let at = match at {
            "" => Cow::Borrowed("/call"),
            _ => Cow::Owned(format!("{at}/call")),
        };
        check_identity(call, &at, "call", problems);
    }
    if parent.contains_key("batch") {
        check_batch(parent, at, problems);
    }
}

/// An identity object `what` (at `at`): `{id, synthesized?}` and nothing else.
fn check_identity(identity: &Object, at: &str, what: &str, problems: &mut Problems) {
    required_string(identity, at, "id", problems);
    optional_bool(identity, at, "synthesized", problems);
    closed(identity, at, &["id", "synthesized"], what, problems);
}

/// `parent.batch` (at `at`; execution-event.schema.json@62fc780 `$defs/batch`, closed):
/// `{id, callIds, synthesized?}`, `callIds` naming at least one call, each once
/// (`minItems` 1, `uniqueItems`), by a non-empty string.
fn check_batch(parent: &Object, at: &str, problems: &mut Problems) {
    let Some(batch) = required_object(parent, at, "batch", problems) else {
        return;
    };
    let at = format!("{at}/batch");
    required_string(batch, &at, "id", problems);
    let ids_at = format!("{at}/callIds");
    match batch.get("callIds") {
        Some(Node::Array(ids)) if ids.is_empty() => {
            problems.add(ids_at, "must name at least one call")
        }
        Some(Node::Array(ids)) => {
            // A set, not a look back over every id before: a batch's size is the sender's.
            let mut seen = BTreeSet::new();
            for (i, id) in ids.iter().enumerate() {
                let rule = match id.as_str().filter(|id| !id.is_empty()) {
                    None => "must be a non-empty string",
                    Some(id) if !seen.insert(id) => "is listed twice",
                    Some(_) => continue,
                };
                problems.add(format!("{ids_at}/{i}"), rule);
            }
        }
        Some(_) => problems.add(ids_at, "must be an array of call ids"),
        None => problems.add(ids_at, "is required"),
    }
    optional_bool(batch, &at, "synthesized", problems);
    let known = ["id", "callIds", "synthesized"];
    closed(batch, &at, &known, "batch", problems);
}

/// The `tool.before` payload (tool-before.schema.json, AHP-TB-001).
fn check_tool_before(event: &Object, problems: &mut Problems) {
    if let Some(kind) = event.get("type").and_then(Node::as_str) {
        if !kind.is_empty() && kind != "tool.before" {
            problems.add("/type", "must be \"tool.before\"");
        }
    }
    // `session` is optional (tool-before.schema.json): a detached call has none, and
    // execution-payloads.md forbids fabricating one for it.
    check_call(event, "", problems);
    if let Some(tool) = required_object(event, "", "tool", problems) {
        check_tool(tool, "/tool", problems);
    }
    required_string(event, "", "path", problems);
    for field in AFTER_ONLY_FIELDS {
        if event.contains_key(field) {
            problems.add(format!("/{field}"), "must not appear on tool.before");
        }
    }
}

/// Each member of an event's rules, at its pointer, with its shape: present with its
/// JSON type or word, or absent. A member whose parent is missing or of another type is
/// not reported again: the parent is, and fixing it is the first step.
fn check_members(event: &Object, name: &str, members: &[(&str, Shape)], problems: &mut Problems) {
    for &(pointer, shape) in members {
        let (shape, optional) = match shape {
            Shape::Optional(inner) => (*inner, true),
            Shape::RequiredWhen(condition, words, inner) => {
                let word = member_at(event, condition).and_then(Node::as_str);
                (*inner, !word.is_some_and(|w| words.contains(&w)))
            }
            shape => (shape, shape.is_optional()),
        };
        let (parent, _) = pointer.rsplit_once('/').unwrap_or_default();
        if !parent.is_empty() && !member_at(event, parent).is_some_and(Node::is_object) {
            continue;
        }
        if shape == Shape::Absent {
            if member_at(event, pointer).is_some() {
                problems.add(pointer, &format!("must not be present on {name}"));
            }
            continue;
        }
        if let Shape::AbsentWhen(condition, word) = shape {
            let holds = member_at(event, condition).and_then(Node::as_str) == Some(word);
            if holds && member_at(event, pointer).is_some() {
                problems.add(
                    pointer,
                    &format!("must not be present on {name} when {condition} is \"{word}\""),
                );
            }
            continue;
        }
        let Some(value) = member_at(event, pointer) else {
            if !optional {
                problems.add(pointer, &format!("is required on {name}"));
            }
            continue;
        };
        // The envelope's own checks (`session`) may have named it already.
        if problems.names(pointer) {
            continue;
        }
        let rule = match shape {
            Shape::Object
            | Shape::Tool
            | Shape::Identity
            | Shape::Closed(..)
            | Shape::Execution(_)
            | Shape::Error
            | Shape::Usage(_)
            | Shape::TokenCounts
            | Shape::Counters
                if !value.is_object() =>
            {
                "must be an object"
            }
            Shape::Array
            | Shape::ResolvedCalls
            | Shape::ChangedFiles
            | Shape::Removed
            | Shape::Texts
            | Shape::Objects
                if !value.is_array() =>
            {
                "must be an array"
            }
            Shape::Text if value.as_str().is_none_or(|t| t.is_empty()) => {
                "must be a non-empty string"
            }
            Shape::String if value.as_str().is_none() => "must be a string",
            Shape::Texts => {
                for (i, text) in value.as_array().unwrap_or_default().iter().enumerate() {
                    if text.as_str().is_none_or(|t| t.is_empty()) {
                        problems.add(format!("{pointer}/{i}"), "must be a non-empty string");
                    }
                }
                continue;
            }
            Shape::Objects => {
                for (i, item) in value.as_array().unwrap_or_default().iter().enumerate() {
                    if !item.is_object() {
                        problems.add(format!("{pointer}/{i}"), "must be an object");
                    }
                }
                continue;
            }
            Shape::Workspace => {
                match value.to_value() {
                    Ok(value) => {
                        for (at, rule) in events::workspace_flaws(&value, true) {
                            problems.add(format!("{pointer}{at}"), rule);
                        }
                    }
                    Err(number) => {
                        problems.add(format!("{pointer}{}", number.pointer), json::Inexact::RULE)
                    }
                }
                continue;
            }
            Shape::Bool if !value.is_boolean() => "must be true or false",
            Shape::Count | Shape::Ordinal if value.is_too_large() => {
                problems.add(pointer, &too_large());
                continue;
            }
            Shape::Count if !value.is_u64() => "must be a non-negative integer",
            Shape::NonNegative if !matches!(value, Node::Number(n) if n.as_f64() >= Some(0.0)) => {
                "must be a non-negative number"
            }
            Shape::Currency if !value.as_str().is_some_and(is_currency) => {
                "must be three capital letters"
            }
            Shape::Ordinal if !value.is_u64() || value.as_i64() == Some(0) => {
                "must be a positive integer"
            }
            Shape::Word(words) if !value.as_str().is_some_and(|w| words.contains(&w)) => {
                problems.add(pointer, &format!("must be one of {}", words.join(", ")));
                continue;
            }
            Shape::Tool => {
                if let Some(tool) = value.as_object() {
                    check_tool(tool, pointer, problems);
                }
                continue;
            }
            Shape::Usage(form) => {
                if let Some(usage) = value.as_object() {
                    check_usage(usage, pointer, form, problems);
                }
                continue;
            }
            Shape::Closed(what, known) => {
                if let Some(object) = value.as_object() {
                    closed(object, pointer, known, what, problems);
                }
                continue;
            }
            Shape::Identity => {
                if let Some(identity) = value.as_object() {
                    let what = pointer.rsplit('/').next().unwrap_or_default();
                    check_identity(identity, pointer, what, problems);
                }
                continue;
            }
            Shape::ResolvedCalls => {
                if let Some(calls) = value.as_array() {
                    check_resolved_calls(calls, pointer, problems);
                }
                continue;
            }
            Shape::TokenCounts => {
                if let Some(counts) = value.as_object() {
                    for (key, count) in counts.members() {
                        let at = format!("{pointer}/{key}");
                        let counted = ["before", "after"].contains(&key);
                        if counted && !count.is_u64() && !problems.names(&at) {
                            problems.add(at, &count_rule(count));
                        }
                    }
                    closed(
                        counts,
                        pointer,
                        &["before", "after"],
                        "tokenCounts",
                        problems,
                    );
                }
                continue;
            }
            Shape::Counters => {
                for (key, count) in value.as_object().map(|o| o.members()).into_iter().flatten() {
                    let at = format!("{pointer}/{}", json::segment(key));
                    if !count.is_u64() && !problems.names(&at) {
                        problems.add(at, &count_rule(count));
                    }
                }
                continue;
            }
            Shape::Removed => {
                for (i, item) in value.as_array().unwrap_or_default().iter().enumerate() {
                    let at = format!("{pointer}/{i}");
                    match item.as_object() {
                        None => problems.add(at, "must be an object"),
                        Some(item) => {
                            required_string(item, &at, "id", problems);
                            closed(item, &at, &["id"], "a removed item", problems);
                        }
                    }
                }
                continue;
            }
            Shape::ChangedFiles => {
                if let Some(changes) = value.as_array() {
                    check_changed_files(changes, pointer, problems);
                }
                continue;
            }
            // The rows name the event's own call, whose parent is the event.
            Shape::Call => {
                check_call(event, "", problems);
                continue;
            }
            // The rows name the event's own execution, whose parent is the event.
            Shape::Execution(skips) => {
                check_execution(event, "", None, problems);
                check_skip(value, pointer, name, skips, problems);
                continue;
            }
            // The rows name the event's own error, at `/error`.
            Shape::Error => {
                if let Some(error) = value.as_object() {
                    check_error(error, problems);
                }
                continue;
            }
            // Right as it is; a message's shape is its content slot's to name
            // ([`check_content`]).
            _ => continue,
        };
        problems.add(pointer, rule);
    }
}

/// Each content slot of the event's type holds its shape ([`events::content`]) wherever
/// it is present, each flaw named at its own pointer. A slot a payload rule named already
/// (of the wrong type, say) is not named again.
fn check_content(event: &Object, problems: &mut Problems) {
    let name = event.get("type").and_then(Node::as_str).unwrap_or_default();
    for &(pointer, holds) in events::content(name) {
        // A list of slots (`/fileChanges/*/before`) that is no list would hide them all.
        if let Some((list, _)) = pointer.split_once("/*") {
            for (at, node) in members_at(event, list) {
                if !node.is_array() && !problems.names(&at) {
                    problems.add(at, "must be an array");
                }
            }
        }
        for (at, slot) in members_at(event, pointer) {
            if problems.names(&at) {
                continue;
            }
            match slot.to_value() {
                Ok(value) => {
                    for flaw in holds.flaws(&value) {
                        problems.add(format!("{at}{}", flaw.at), flaw.rule);
                    }
                }
                // An event is read refusing such a number ([`parse_object`]); were one
                // here, it is named as there.
                Err(number) => problems.add(format!("{at}{}", number.pointer), json::Inexact::RULE),
            }
        }
    }
}

/// The members at `pointer` (member names, and `*` for each entry of an array) of
/// `object`, each with its own pointer.
fn members_at<'n, 'a>(object: &'n Object<'a>, pointer: &str) -> Vec<(String, &'n Node<'a>)> {
    let mut steps = pointer.split('/').skip(1);
    let first = steps.next().unwrap_or_default();
    let mut found: Vec<(String, &Node)> = object
        .get(first)
        .map(|node| (format!("/{first}"), node))
        .into_iter()
        .collect();
    for step in steps {
        found = found
            .into_iter()
            .flat_map(|(at, node)| match (step, node) {
                ("*", Node::Array(entries)) => entries
                    .iter()
                    .enumerate()
                    .map(|(i, entry)| (format!("{at}/{i}"), entry))
                    .collect(),
                _ => node
                    .get(step)
                    .map(|member| (format!("{at}/{step}"), member))
                    .into_iter()
                    .collect::<Vec<_>>(),
            })
            .collect();
    }
    found
}

/// The member at `pointer` (a JSON Pointer of plain member names) of `object`.
fn member_at<'n, 'a>(object: &'n Object<'a>, pointer: &str) -> Option<&'n Node<'a>> {
    let mut parts = pointer.split('/').skip(1);
    let mut value = object.get(parts.next()?)?;
    for part in parts {
        value = value.get(part)?;
    }
    Some(value)
}

/// Outcomes of a resolved call (tool-after.schema.json).
const OUTCOMES: [&str; 5] = ["ok", "error", "denied", "cancelled", "timeout"];
/// Why a call was skipped (execution-event.schema.json).
const SKIP_REASONS: [&str; 5] = ["supplied_result", "policy", "cancelled", "timeout", "other"];

/// The `tool.after` payload (tool-after.schema.json): the one resolved-call boundary.
fn check_tool_after(event: &Object, problems: &mut Problems) {
    check_call(event, "", problems);
    let tool = required_object(event, "", "tool", problems);
    if let Some(tool) = tool {
        check_tool(tool, "/tool", problems);
    }
    required_string(event, "", "path", problems);
    match event.get("items") {
        Some(Node::Array(_)) => {}
        Some(_) => problems.add("/items", "must be an array"),
        None => problems.add("/items", "is required"),
    }
    let outcome = check_outcome(event, "", problems);
    match (outcome, event.get("error")) {
        (Some("error"), None) => problems.add("/error", "is required when outcome is \"error\""),
        (Some(o), Some(_)) if o != "error" => {
            problems.add("/error", "is only allowed when outcome is \"error\"")
        }
        (_, Some(Node::Object(error))) => check_error(error, problems),
        (_, Some(_)) => problems.add("/error", "must be an object"),
        _ => {}
    }
    if let Some(Node::Array(changes)) = event.get("fileChanges") {
        for (i, change) in changes.iter().enumerate() {
            check_file_change(change, &format!("/fileChanges/{i}"), problems);
        }
    }
    let duration = event.get("durationMs");
    if duration.is_some_and(|d| !matches!(d, Node::Number(ms) if ms.as_f64() >= Some(0.0))) {
        problems.add("/durationMs", "must be a non-negative number");
    }
    if check_execution(event, "", outcome, problems) {
        for field in ["durationMs", "fileChanges"] {
            if event.contains_key(field) {
                problems.add(format!("/{field}"), "must not appear on a skipped call");
            }
        }
    }
}

/// `parent.outcome` (at `at`), one of [`OUTCOMES`]; returns it when it is a non-empty
/// string, one of them or not.
fn check_outcome<'a>(parent: &'a Object, at: &str, problems: &mut Problems) -> Option<&'a str> {
    let outcome = required_string(parent, at, "outcome", problems);
    if outcome.is_some_and(|o| !OUTCOMES.contains(&o)) {
        problems.add(
            format!("{at}/outcome"),
            "must be ok, error, denied, cancelled or timeout",
        );
    }
    outcome
}

/// `parent.execution` (at `at`, `$defs/execution`): executed, or skipped for one of
/// [`SKIP_REASONS`]; skipped by policy when `outcome` is denied. Each branch is closed:
/// executed, and skipped for a supplied result, hold nothing more; another skip may say
/// why in a non-empty `detail`. Says whether the call was skipped.
fn check_execution(
    parent: &Object,
    at: &str,
    outcome: Option<&str>,
    problems: &mut Problems,
) -> bool {
    let Some(execution) = required_object(parent, at, "execution", problems) else {
        return false;
    };
    let at = format!("{at}/execution");
    let status = required_string(execution, &at, "status", problems);
    let reason = match status {
        Some("skipped") => required_string(execution, &at, "reason", problems),
        _ => None,
    };
    match status {
        Some("executed") if outcome == Some("denied") => problems.add(
            format!("{at}/status"),
            "must be \"skipped\" when outcome is \"denied\"",
        ),
        Some("executed") | None => {}
        Some("skipped") => {
            if reason.is_some_and(|r| !SKIP_REASONS.contains(&r)) {
                problems.add(
                    format!("{at}/reason"),
                    "must be supplied_result, policy, cancelled, timeout or other",
                );
            }
            if outcome == Some("denied") && reason.is_some_and(|r| r != "policy") {
                problems.add(
                    format!("{at}/reason"),
                    "must be \"policy\" when outcome is \"denied\"",
                );
            }
        }
        Some(_) => problems.add(
            format!("{at}/status"),
            "must be \"executed\" or \"skipped\"",
        ),
    }
    let (known, what): (&[&str], &str) = match (status, reason) {
        (Some("executed"), _) => (&["status"], "an executed call's execution"),
        (Some("skipped"), Some("supplied_result")) => {
            (&["status", "reason"], "a supplied result's execution")
        }
        (Some("skipped"), _) => (
            &["status", "reason", "detail"],
            "a skipped call's execution",
        ),
        _ => (&["status", "reason", "detail"], "an execution"),
    };
    if known.contains(&"detail") {
        optional_string(execution, &at, "detail", problems);
    }
    closed(execution, &at, known, what, problems);
    status == Some("skipped")
}

/// The skip an execution (at `at`, checked by [`check_execution`]) makes is one of
/// `skips`, the reasons its event allows; none skips at all when there are none
/// (execution-event.schema.json@62fc780, the `allOf` of model.response.after,
/// model.error and context.compact.after).
fn check_skip(execution: &Node, at: &str, name: &str, skips: &[&str], problems: &mut Problems) {
    if execution.get("status").and_then(Node::as_str) != Some("skipped") {
        return;
    }
    let reason = execution.get("reason").and_then(Node::as_str);
    match reason {
        _ if skips.is_empty() => {
            problems.add(
                format!("{at}/status"),
                &format!("must be \"executed\" on {name}"),
            );
        }
        Some(reason) if SKIP_REASONS.contains(&reason) && !skips.contains(&reason) => {
            problems.add(
                format!("{at}/reason"),
                &format!("must be {} on {name}", skips.join(" or ")),
            );
        }
        _ => {}
    }
}

/// The members of one of tool.batch.after's `calls` (execution-event.schema.json@62fc780,
/// closed).
const RESOLVED_CALL: &[&str] = &["call", "tool", "path", "batch", "outcome", "execution"];

/// tool.batch.after's `calls` (at `at`; execution-event.schema.json@62fc780, `minItems`
/// 1): each a resolved call `{call, tool, path, batch?, outcome, execution}` and nothing
/// else, its call and batch, tool (`$defs/tool`, which has no `output`), outcome and
/// execution checked as tool.after's own. A member the schema does not name could carry
/// content no check reaches, as in a tool.
fn check_resolved_calls(calls: &[Node], at: &str, problems: &mut Problems) {
    if calls.is_empty() {
        problems.add(at, "must name at least one call");
    }
    for (i, call) in calls.iter().enumerate() {
        let at = format!("{at}/{i}");
        let Some(call) = call.as_object() else {
            problems.add(
                at,
                "must be an object {call, tool, path, outcome, execution}",
            );
            continue;
        };
        check_call(call, &at, problems);
        if let Some(tool) = required_object(call, &at, "tool", problems) {
            check_tool(tool, &format!("{at}/tool"), problems);
        }
        required_string(call, &at, "path", problems);
        let outcome = check_outcome(call, &at, problems);
        check_execution(call, &at, outcome, problems);
        closed(call, &at, RESOLVED_CALL, "a resolved call", problems);
    }
}

/// What a file change may be (execution-event.schema.json@62fc780 `$defs/fileChange`).
const FILE_CHANGES: [&str; 4] = ["created", "modified", "deleted", "moved"];

/// One of tool.after's `fileChanges` (`$defs/fileChange`): `{path, change,
/// previousPath?, before?, after?}` and nothing else, as its snapshots are the only
/// content in it the selection lowers (`before` and `after`, checked as parts by
/// `check_content`). A moved file names where it was; a created one has no `before`,
/// a deleted one no `after`.
fn check_file_change(change: &Node, at: &str, problems: &mut Problems) {
    let Some(change) = change.as_object() else {
        problems.add(at, "must be an object {path, change}");
        return;
    };
    required_string(change, at, "path", problems);
    let word = required_string(change, at, "change", problems);
    if word.is_some_and(|w| !FILE_CHANGES.contains(&w)) {
        problems.add(
            format!("{at}/change"),
            "must be created, modified, deleted or moved",
        );
    }
    if change.contains_key("previousPath") || word == Some("moved") {
        required_string(change, at, "previousPath", problems);
    }
    match word {
        Some("created") if change.contains_key("before") => {
            problems.add(format!("{at}/before"), "must be absent when created")
        }
        Some("deleted") if change.contains_key("after") => {
            problems.add(format!("{at}/after"), "must be absent when deleted")
        }
        _ => {}
    }
    let known = ["path", "change", "previousPath", "before", "after"];
    closed(change, at, &known, "a file change", problems);
}

/// What file.changed says a change did (task-workspace-event.schema.json@8f91ac4).
const FILE_OPERATIONS: [&str; 3] = ["create", "update", "remove"];

/// file.changed's `changes` (at `at`; task-workspace-event.schema.json@8f91ac4
/// `$defs/file.changed`, `minItems` 1): each `{path, operation, agentCaused, before?,
/// after?}` and nothing else, its snapshots checked as parts by `check_content`. Not
/// tool.after's `fileChanges` ([`check_file_change`]): this schema has its own words,
/// and ties no snapshot to the operation.
fn check_changed_files(changes: &[Node], at: &str, problems: &mut Problems) {
    if changes.is_empty() {
        problems.add(at, "must name at least one change");
    }
    for (i, change) in changes.iter().enumerate() {
        let at = format!("{at}/{i}");
        let Some(change) = change.as_object() else {
            problems.add(at, "must be an object {path, operation, agentCaused}");
            continue;
        };
        required_string(change, &at, "path", problems);
        let operation = required_string(change, &at, "operation", problems);
        if operation.is_some_and(|o| !FILE_OPERATIONS.contains(&o)) {
            problems.add(
                format!("{at}/operation"),
                "must be create, update or remove",
            );
        }
        match change.get("agentCaused") {
            Some(caused) if caused.is_boolean() => {}
            Some(_) => problems.add(format!("{at}/agentCaused"), "must be true or false"),
            None => problems.add(format!("{at}/agentCaused"), "is required"),
        }
        let known = ["path", "operation", "agentCaused", "before", "after"];
        closed(change, &at, &known, "a file change", problems);
    }
}

/// `error` (execution-event.schema.json `$defs/error`): `{message, class, code?,
/// status?, native?}` and nothing else; `class` is what a backend tells failures apart
/// by, and a member the schema does not name could carry what `native` may not.
fn check_error(error: &Object, problems: &mut Problems) {
    required_string(error, "/error", "message", problems);
    required_string(error, "/error", "class", problems);
    optional_string(error, "/error", "code", problems);
    match error.get("status") {
        None => {}
        Some(status) if status.as_i64().is_some() || status.is_u64() => {}
        Some(Node::Text(status)) if !status.is_empty() => {}
        Some(_) => problems.add("/error/status", "must be a non-empty string or an integer"),
    }
    let known = ["message", "class", "code", "status", "native"];
    closed(error, "/error", &known, "error", problems);
}

/// A usage report (at `at`; execution-event.schema.json@62fc780 `$defs/usage`, closed)
/// of `form`: its kind and scope, how complete it is and where it came from, token
/// counts (non-negative integers) and a cost (`{amount, currency, basis}`, closed).
fn check_usage(usage: &Object, at: &str, form: events::Usage, problems: &mut Problems) {
    for (key, word) in [("kind", form.kind), ("scope", form.scope)] {
        match usage.get(key) {
            None => problems.add(format!("{at}/{key}"), "is required"),
            Some(value) if value.as_str() != Some(word) => {
                problems.add(format!("{at}/{key}"), &format!("must be \"{word}\""))
            }
            Some(_) => {}
        }
    }
    required_word(
        usage,
        at,
        "completeness",
        &["complete", "partial", "unknown"],
        problems,
    );
    required_word(usage, at, "provenance", form.provenance, problems);
    for key in TOKEN_COUNTS {
        if let Some(count) = usage.get(key).filter(|count| !count.is_u64()) {
            problems.add(format!("{at}/{key}"), &count_rule(count));
        }
    }
    if let Some(cost) = usage.get("cost") {
        let at = format!("{at}/cost");
        match cost.as_object() {
            None => problems.add(at, "must be an object"),
            Some(cost) => check_cost(cost, &at, problems),
        }
    }
    let known = ["kind", "scope", "completeness", "provenance", "cost"];
    let known: Vec<&str> = known.into_iter().chain(TOKEN_COUNTS).collect();
    closed(usage, at, &known, "usage", problems);
}

/// The token counts a usage report may give.
const TOKEN_COUNTS: [&str; 4] = [
    "inputTokens",
    "outputTokens",
    "cacheReadTokens",
    "cacheWriteTokens",
];

/// A usage report's cost (at `at`): a non-negative amount, a currency of three capital
/// letters (`^[A-Z]{3}$`) and its basis, and nothing else.
fn check_cost(cost: &Object, at: &str, problems: &mut Problems) {
    match cost.get("amount") {
        None => problems.add(format!("{at}/amount"), "is required"),
        Some(Node::Number(n)) if n.as_f64().is_some_and(|n| n >= 0.0) => {}
        Some(_) => problems.add(format!("{at}/amount"), "must be a non-negative number"),
    }
    match cost.get("currency").map(Node::as_str) {
        None => problems.add(format!("{at}/currency"), "is required"),
        Some(Some(c)) if is_currency(c) => {}
        Some(_) => problems.add(format!("{at}/currency"), "must be three capital letters"),
    }
    required_word(
        cost,
        at,
        "basis",
        &["billed", "reported", "estimated"],
        problems,
    );
    closed(cost, at, &["amount", "currency", "basis"], "cost", problems);
}

/// A currency code as the schema has it: three capital letters (`^[A-Z]{3}$`).
fn is_currency(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())
}

/// `parent/key` must be one of `words`.
fn required_word(parent: &Object, at: &str, key: &str, words: &[&str], problems: &mut Problems) {
    match parent.get(key).map(Node::as_str) {
        None => problems.add(format!("{at}/{key}"), "is required"),
        Some(Some(word)) if words.contains(&word) => {}
        Some(_) => problems.add(
            format!("{at}/{key}"),
            &format!("must be one of {}", words.join(", ")),
        ),
    }
}

/// The members of a `tool` (execution-event.schema.json@62fc780 `$defs/tool`, closed),
/// at every tool event and in each of tool.batch.after's `calls`. tool.after's too: a
/// condition of tool-after.schema.json@a9adb1a still names an `output`, but the closed
/// `$defs/tool` has none, and execution-payloads.md@8f91ac4 puts a call's result in the
/// event's `items` ("no ... optional native output field is defined").
const TOOL: &[&str] = &["name", "kind", "input", "origin", "mcp"];

/// `tool` (at `at`): name, parsed input, an origin that agrees with the MCP descriptor,
/// and no member but [`TOOL`]'s. The schema closes it, and it must stay closed here:
/// lowering reaches only the content slots the event's checks cover, so a member no
/// slot names (a `transcript` of parts, say) would take its content to every
/// subscription.
fn check_tool(tool: &Object, at: &str, problems: &mut Problems) {
    required_string(tool, at, "name", problems);
    optional_string(tool, at, "kind", problems);
    match tool.get("input") {
        Some(Node::Object(_)) => {}
        // A backend matching on `input.command` must never have to guess at an encoding.
        Some(Node::Text(_)) => problems.add(
            format!("{at}/input"),
            "must be a JSON object, not an encoded string",
        ),
        Some(_) => problems.add(format!("{at}/input"), "must be a JSON object"),
        None => problems.add(format!("{at}/input"), "is required"),
    }
    let mcp = tool.get("mcp");
    // Formatted only where it is used: this runs on every tool call.
    let mcp_at = || format!("{at}/mcp");
    match required_string(tool, at, "origin", problems) {
        Some("native") if mcp.is_some() => {
            problems.add(mcp_at(), "must be absent when origin is \"native\"")
        }
        Some("mcp") => match mcp {
            Some(Node::Object(mcp)) => check_mcp(mcp, &mcp_at(), problems),
            Some(_) => problems.add(mcp_at(), "must be an object"),
            None => problems.add(mcp_at(), "is required when origin is \"mcp\""),
        },
        Some("native") | None => {}
        Some(_) => problems.add(format!("{at}/origin"), "must be \"native\" or \"mcp\""),
    }
    closed(tool, at, TOOL, "tool", problems);
}

/// The MCP descriptor (at `at`; digest §3, execution-event.schema.json `$defs/mcp`):
/// `{server: {id, name?}, toolName, provenance: runtime|inferred, connection}`,
/// self-contained and closed. It never carries credentials.
fn check_mcp(mcp: &Object, at: &str, problems: &mut Problems) {
    if let Some(server) = required_object(mcp, at, "server", problems) {
        let server_at = format!("{at}/server");
        required_string(server, &server_at, "id", problems);
        optional_string(server, &server_at, "name", problems);
        closed(server, &server_at, &["id", "name"], "server", problems);
    }
    required_string(mcp, at, "toolName", problems);
    let provenance = required_string(mcp, at, "provenance", problems);
    if provenance.is_some_and(|p| !["runtime", "inferred"].contains(&p)) {
        problems.add(format!("{at}/provenance"), "must be runtime or inferred");
    }
    let known = ["server", "toolName", "provenance", "connection"];
    closed(mcp, at, &known, "an MCP descriptor", problems);
    if let Some(connection) = required_object(mcp, at, "connection", problems) {
        check_connection(connection, &format!("{at}/connection"), problems);
    }
}

/// Where an MCP server is, by its transport: the members that say it (`$defs/mcp`
/// `connection`). Unknown for a transport that is neither known nor an extension.
fn location(transport: &str) -> Option<&'static [&'static str]> {
    match transport {
        "http" | "sse" => Some(&["url"]),
        "stdio" => Some(&["command", "args", "cwd"]),
        _ if transport.len() > 1 && transport.starts_with('_') => Some(&["addressForm", "address"]),
        _ => None,
    }
}

/// `connection`: a transport, and each member of its location disclosed or named by a
/// gap whose path is exactly that member, so a backend can tell a server it was not
/// told about from one that has no such member. Nothing else: a member the schema does
/// not name could carry what the descriptor must not (a token in a header, say). Nor a
/// URL with a credential in it, as user info or a parameter named as a secret
/// (`?api_key=…`): a `url`, or an extension transport's `address` in the `url` form; the
/// descriptor goes to every backend (digest §3.3: it never carries credentials). The
/// rule names neither, nor the URL.
fn check_connection(connection: &Object, at: &str, problems: &mut Problems) {
    let gaps = check_gaps(connection, at, problems);
    if let Some(entries) = connection.get("gaps").and_then(Node::as_array) {
        if entries.is_empty() {
            problems.add(format!("{at}/gaps"), "must name at least one gap");
        }
        for (i, gap) in entries.iter().enumerate() {
            if let Some(gap) = gap.as_object() {
                let gap_at = format!("{at}/gaps/{i}");
                closed(gap, &gap_at, &["path", "reason"], "a gap", problems);
            }
        }
    }
    let Some(transport) = required_string(connection, at, "transport", problems) else {
        return;
    };
    let Some(members) = location(transport) else {
        problems.add(
            format!("{at}/transport"),
            "must be http, sse, stdio or an extension name starting with \"_\"",
        );
        return;
    };
    let url_form = connection.get("addressForm").and_then(Node::as_str) == Some("url");
    let is_url = |member: &str| member == "url" || (member == "address" && url_form);
    for &member in members {
        let rule = match (member, connection.get(member)) {
            (_, None) if gaps.contains(&member) => continue,
            (_, None) => "is required, or a gap naming it when it is not disclosed",
            (m, Some(Node::Text(url))) if is_url(m) && has_userinfo(url) => {
                "must not carry credentials (user info)"
            }
            (m, Some(Node::Text(url))) if is_url(m) && has_a_secret_parameter(url) => {
                "must not carry credentials (a query or fragment parameter named as a secret)"
            }
            ("url", Some(Node::Text(url))) if is_absolute_uri(url) && is_http_url(url, false) => {
                continue
            }
            ("url", Some(_)) => "must be an http or https URL",
            ("args", Some(Node::Array(args))) if args.iter().all(Node::is_string) => {
                // "Descriptors never carry credentials ... sanitize addresses and
                // arguments" (execution-payloads.md@8f91ac4): each at its own pointer.
                let texts: Vec<&str> = args.iter().filter_map(Node::as_str).collect();
                for (i, arg) in texts.iter().enumerate() {
                    let after_an_option = i
                        .checked_sub(1)
                        .is_some_and(|o| secret_after_option(texts[o], arg));
                    if after_an_option || argument_carries_a_credential(arg) {
                        problems.add(format!("{at}/args/{i}"), CREDENTIAL_ARGUMENT);
                    }
                }
                continue;
            }
            ("args", Some(_)) => "must be an array of strings",
            (_, Some(Node::Text(text))) if !text.is_empty() => continue,
            (_, Some(_)) => "must be a non-empty string",
        };
        problems.add(format!("{at}/{member}"), rule);
    }
    let known: Vec<&str> = ["transport", "gaps"]
        .iter()
        .chain(members)
        .copied()
        .collect();
    closed(connection, at, &known, "this connection", problems);
}

/// The rule an MCP descriptor's argument carrying a credential breaks.
const CREDENTIAL_ARGUMENT: &str = "must not carry credentials (an argument giving a \
     credential's value, itself or after its option, or a URL with user info or a \
     parameter named as a secret)";

/// `parent.gaps`, where present: each `{path, reason}`, non-empty strings. The paths
/// of the well-formed ones.
fn check_gaps<'a>(parent: &'a Object, at: &str, problems: &mut Problems) -> Vec<&'a str> {
    let Some(gaps) = parent.get("gaps") else {
        return Vec::new();
    };
    let Some(gaps) = gaps.as_array() else {
        problems.add(format!("{at}/gaps"), "must be an array");
        return Vec::new();
    };
    let mut paths = Vec::new();
    for (i, gap) in gaps.iter().enumerate() {
        let gap_at = format!("{at}/gaps/{i}");
        let Some(gap) = gap.as_object() else {
            problems.add(gap_at, "must be an object {path, reason}");
            continue;
        };
        let path = required_string(gap, &gap_at, "path", problems);
        let reason = required_string(gap, &gap_at, "reason", problems);
        if let (Some(path), Some(_)) = (path, reason) {
            paths.push(path);
        }
    }
    paths
}

/// The rule a count that is no `u64` breaks: its size, for a whole number past the
/// largest held (an integer to the schema), or else its type.
fn count_rule(count: &Node) -> String {
    if count.is_too_large() {
        too_large()
    } else {
        "must be a non-negative integer".to_owned()
    }
}

/// The rule for a count or an ordinal past the largest held (`u64::MAX`), as a
/// registration's (`registration::rules`).
fn too_large() -> String {
    format!("is too large: at most {}", u64::MAX)
}

/// Each member of `object` (at `at`) not among `known` is a problem: a closed object
/// (`additionalProperties: false`), named `what` in the rule.
fn closed(object: &Object, at: &str, known: &[&str], what: &str, problems: &mut Problems) {
    for key in object.keys().filter(|key| !known.contains(key)) {
        problems.add(
            format!("{at}/{}", crate::json::segment(key)),
            &format!("is not a member of {what}"),
        );
    }
}

/// `parent/key`, where present, must be true or false.
fn optional_bool(parent: &Object, at: &str, key: &str, problems: &mut Problems) {
    if parent.get(key).is_some_and(|value| !value.is_boolean()) {
        problems.add(format!("{at}/{key}"), "must be true or false");
    }
}

/// `parent/key`, where present, must be a non-empty string.
fn optional_string(parent: &Object, at: &str, key: &str, problems: &mut Problems) {
    if parent.contains_key(key) {
        required_string(parent, at, key, problems);
    }
}

/// `parent/key` must be a non-empty string; returns it when it is.
fn required_string<'a>(
    parent: &'a Object,
    at: &str,
    key: &str,
    problems: &mut Problems,
) -> Option<&'a str> {
    match parent.get(key) {
        Some(Node::Text(text)) if !text.is_empty() => Some(text),
        Some(_) => {
            problems.add(format!("{at}/{key}"), "must be a non-empty string");
            None
        }
        None => {
            problems.add(format!("{at}/{key}"), "is required");
            None
        }
    }
}

/// `parent/key` must be an object; returns it when it is.
fn required_object<'a>(
    parent: &'a Object,
    at: &str,
    key: &str,
    problems: &mut Problems,
) -> Option<&'a Object<'a>> {
    match parent.get(key) {
        Some(Node::Object(object)) => Some(object),
        Some(_) => {
            problems.add(format!("{at}/{key}"), "must be an object");
            None
        }
        None => {
            problems.add(format!("{at}/{key}"), "is required");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::Holds;
    use crate::syntax::examples::{ABSOLUTE_URIS, DATE_TIMES, NOT_ABSOLUTE_URIS, NOT_DATE_TIMES};
    use serde_json::json;

    /// `params.event` of a fixture message.
    fn fixture_event(text: &str) -> Value {
        let message: Value = serde_json::from_str(text).expect("fixture is JSON");
        message
            .pointer("/params/event")
            .cloned()
            .expect("fixture has params.event")
    }

    /// The valid tool.before from `stdio/intercept-request.valid.jsonl`.
    fn valid() -> Value {
        fixture_event(fixture!("stdio/intercept-request.valid.jsonl"))
    }

    /// `valid()` with `value` written at `pointer` (`None` removes the member).
    fn with(pointer: &str, value: Option<Value>) -> Value {
        edited(valid(), pointer, value)
    }

    /// `event` with `value` written at `pointer` (`None` removes the member).
    fn edited(mut event: Value, pointer: &str, value: Option<Value>) -> Value {
        let (parent, key) = pointer.rsplit_once('/').expect("pointer has a parent");
        let parent = event
            .pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .expect("parent is an object");
        match value {
            Some(value) => parent.insert(key.to_owned(), value),
            None => parent.remove(key),
        };
        event
    }

    /// The problems `parse_tool_before` reports, as (path, rule) pairs.
    /// The problems of a reading as `(path, rule)` pairs; none when it was accepted.
    fn pairs<T>(read: Result<T, Vec<EventProblem>>) -> Vec<(String, String)> {
        read.err()
            .unwrap_or_default()
            .into_iter()
            .map(|p| (p.path, p.rule))
            .collect()
    }

    fn problems(event: &Value) -> Vec<(String, String)> {
        pairs(Event::parse_tool_before(&event.to_string()))
    }

    /// Asserts `event` fails with exactly one problem, at `path`, and returns its rule.
    fn only_problem(event: &Value, path: &str) -> String {
        let found = problems(event);
        assert_eq!(found.len(), 1, "{found:?}");
        let (at, rule) = found.into_iter().next().unwrap_or_default();
        assert_eq!(at, path);
        rule
    }

    /// The example event of `name` (tests/src/valid_events.json, shared with the
    /// end-to-end tests), completed with an envelope.
    fn example(name: &str) -> Value {
        let examples: Value = serde_json::from_str(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/src/valid_events.json"
        )))
        .expect("the examples are JSON");
        let mut event = examples[name].clone();
        event["id"] = json!("evt_example");
        event["source"] = json!("urn:ahp:test");
        event["type"] = json!(name);
        event["time"] = json!("2026-11-30T12:00:00Z");
        event["session"] = json!({"id": "sess_example"});
        event
    }

    /// The problems `parse_intercepted` reports, as (path, rule) pairs.
    fn intercepted_problems(event: &Value) -> Vec<(String, String)> {
        pairs(Event::parse_intercepted(&event.to_string()))
    }

    /// Asserts `event`, read by `problems_of` ([`intercepted_problems`] or
    /// [`observed_problems`]), is refused with one problem: `rule`, at `pointer`.
    #[track_caller]
    fn assert_refused(
        problems_of: fn(&Value) -> Vec<(String, String)>,
        event: &Value,
        pointer: &str,
        rule: &str,
    ) {
        assert_eq!(
            problems_of(event),
            [(pointer.to_owned(), rule.to_owned())],
            "{} with {pointer}: {:?}",
            event["type"],
            event.pointer(pointer)
        );
    }

    /// Asserts the example of `name` with `value` at `pointer` is refused there as a
    /// member `name` must not have.
    #[track_caller]
    fn assert_forbidden_on(name: &str, pointer: &str, value: Value) {
        let event = edited(example(name), pointer, Some(value));
        let rule = format!("must not be present on {name}");
        assert_refused(intercepted_problems, &event, pointer, &rule);
    }

    /// A user message's list holds its boundary's one role (interaction-event.schema.json
    /// @2b5da58): the user's words on the way in, the assistant's on the way out.
    #[test]
    fn a_user_message_is_of_its_boundarys_one_role() {
        let rule = "must be the event's one role (user on user.message.inbound, assistant on \
                    outbound)";
        for (name, other) in [
            ("user.message.inbound", "assistant"),
            ("user.message.inbound", "system"),
            ("user.message.outbound", "user"),
        ] {
            let mut event = example(name);
            event["message"]["messages"][0]["role"] = json!(other);
            let at = "/message/messages/0/role";
            assert_refused(intercepted_problems, &event, at, rule);
        }
    }

    /// The nested payloads of the task, workspace, configuration and user events are
    /// closed (their upstream schemas' `additionalProperties: false`): a member they do
    /// not name is refused at its pointer.
    #[test]
    fn nested_payloads_name_nothing_else() {
        for (name, object, what) in [
            ("config.change.before", "/change", "change"),
            ("user.elicitation.request", "/elicitation", "elicitation"),
            ("user.elicitation.result", "/elicitation", "elicitation"),
            ("user.message.inbound", "/message", "message"),
            ("user.message.outbound", "/message", "message"),
            ("workspace.change.before", "/workspace", "workspace"),
            (
                "workspace.change.before",
                "/workspace/change",
                "a workspace change",
            ),
            ("task.change.before", "/task", "task"),
        ] {
            let at = format!("{object}/note");
            let event = edited(example(name), &at, Some(json!("x")));
            let rule = format!("is not a member of {what}");
            assert_refused(intercepted_problems, &event, &at, &rule);
        }
    }

    /// A workspace change names a directory or roots, each a non-empty string, the roots
    /// distinct; so does its prior state, where present.
    #[test]
    fn a_workspace_change_is_a_cwd_or_distinct_roots() {
        let name = "workspace.change.before";
        for (change, at, rule) in [
            (json!({}), "", "must name cwd or workspaceRoots"),
            (json!({"cwd": ""}), "/cwd", "must be a non-empty string"),
            (json!({"cwd": 7}), "/cwd", "must be a non-empty string"),
            (
                json!({"workspaceRoots": "/a"}),
                "/workspaceRoots",
                "must be an array of strings",
            ),
            (
                json!({"workspaceRoots": ["/a", 1]}),
                "/workspaceRoots/1",
                "must be a non-empty string",
            ),
            (
                json!({"workspaceRoots": ["/a", "/a"]}),
                "/workspaceRoots/1",
                "repeats a root",
            ),
        ] {
            for member in ["change", "prior"] {
                let pointer = format!("/workspace/{member}");
                let event = edited(example(name), &pointer, Some(change.clone()));
                assert_refused(
                    intercepted_problems,
                    &event,
                    &format!("{pointer}{at}"),
                    rule,
                );
            }
        }
        let roots = json!({"cwd": "/b", "workspaceRoots": ["/a", "/b"]});
        let event = edited(example(name), "/workspace/prior", Some(roots));
        assert_eq!(intercepted_problems(&event), []);
        let event = edited(example(name), "/workspace/reason", Some(json!(false)));
        assert_refused(
            intercepted_problems,
            &event,
            "/workspace/reason",
            "must be a string",
        );
    }

    /// A configuration change's settings are names, each a non-empty string.
    #[test]
    fn a_configuration_change_names_its_settings() {
        let event = edited(
            example("config.change.before"),
            "/change/settings",
            Some(json!(["model", ""])),
        );
        let rule = "must be a non-empty string";
        assert_refused(intercepted_problems, &event, "/change/settings/1", rule);
    }

    #[test]
    fn the_example_of_every_interceptable_event_is_valid() {
        for rules in events::TABLE {
            let name = rules.event.as_str();
            let (event, found) = Event::parse_intercepted(&example(name).to_string())
                .unwrap_or_else(|p| {
                    panic!(
                        "{name}: {:?}",
                        p.iter().map(|p| p.to_string()).collect::<Vec<_>>()
                    )
                });
            assert_eq!(
                (event.event_type.as_str(), found.event),
                (name, rules.event)
            );
            if let Some((target, pointer)) = rules.modify {
                assert!(
                    event.value_at(pointer).is_some(),
                    "{name}: the example has no {target} at {pointer}"
                );
            }
        }
    }

    /// A session start's trigger is one of the SDKs' words, and a clear or a fork names
    /// the session it came from (`resumedFrom`, an identity): required then, optional
    /// otherwise.
    #[test]
    fn a_session_start_names_its_trigger_and_what_a_clear_came_from() {
        let start = |trigger: &str, from: Option<Value>| {
            let event = edited(example("session.start"), "/trigger", Some(json!(trigger)));
            intercepted_problems(&edited(event, "/resumedFrom", from))
        };
        for trigger in ["clear", "fork"] {
            let required = ("/resumedFrom".into(), "is required on session.start".into());
            assert_eq!(start(trigger, None), [required], "{trigger}");
            assert_eq!(
                start(trigger, Some(json!({"id": "sess_0"}))),
                [],
                "{trigger}"
            );
            let extra = start(trigger, Some(json!({"id": "sess_0", "x": 1})));
            assert_eq!(extra.len(), 1, "{trigger}: {extra:?}");
        }
        for trigger in ["startup", "resume", "compact"] {
            assert_eq!(start(trigger, None), [], "{trigger}");
        }
        let unknown = start("new", None);
        assert_eq!(unknown.len(), 1, "{unknown:?}");
        assert_eq!(unknown[0].0, "/trigger");
        assert!(
            unknown[0]
                .1
                .contains("startup, resume, clear, compact, fork"),
            "{unknown:?}"
        );
    }

    /// Each required member of each catalogue event: missing, it is the one problem,
    /// named at its pointer; of the wrong JSON type, likewise.
    #[test]
    fn each_required_member_of_a_catalogue_event_is_named_when_missing_or_mistyped() {
        let mut checked = 0;
        for rules in events::TABLE {
            let name = rules.event.as_str();
            let Payload::Members(members) = rules.payload else {
                continue;
            };
            for &(pointer, shape) in members {
                // Optional unless another member says otherwise: its own test sets that
                // member (a_skipped_model_call_reports_no_usage_or_latency).
                if let Shape::AbsentWhen(..) = shape {
                    continue;
                }
                let (wrong, rule) = mistake(name, shape);
                if shape.is_optional() {
                    let missing = edited(example(name), pointer, None);
                    assert_eq!(
                        intercepted_problems(&missing),
                        [],
                        "{name} without {pointer}"
                    );
                } else if shape != Shape::Absent {
                    let missing = edited(example(name), pointer, None);
                    assert_eq!(
                        intercepted_problems(&missing),
                        [(pointer.to_owned(), format!("is required on {name}"))],
                        "{name} without {pointer}"
                    );
                }
                // An optional parent (context.compact.before's `tokenCounts`) is given.
                let mut mistyped = example(name);
                let (parent, _) = pointer.rsplit_once('/').unwrap_or_default();
                if !parent.is_empty() && mistyped.pointer(parent).is_none() {
                    mistyped = edited(mistyped, parent, Some(json!({})));
                }
                let mistyped = edited(mistyped, pointer, Some(wrong));
                assert_eq!(
                    intercepted_problems(&mistyped),
                    [(pointer.to_owned(), rule)],
                    "{name} with a mistyped {pointer}"
                );
                checked += 1;
            }
        }
        assert_eq!(
            checked, 121,
            "the members of session.start and the 16 catalogue events"
        );
    }

    /// An execution event's `turn` is closed, as its schema says
    /// (execution-event.schema.json@62fc780): a member beside its id is refused at its
    /// pointer, not sent on. A tool.before's stays open.
    #[test]
    fn an_execution_events_turn_is_closed() {
        let turn = json!({"id": "t1", "transcript": "x"});
        for name in [
            "model.request.before",
            "model.response.after",
            "model.switch.before",
            "tool.permission.request",
            "tool.batch.after",
            "context.compact.before",
            "context.compact.after",
        ] {
            let event = edited(example(name), "/turn", Some(turn.clone()));
            let found = intercepted_problems(&event);
            assert_eq!(found.len(), 1, "{name}: {found:?}");
            assert_eq!(found[0].0, "/turn/transcript", "{name}: {found:?}");
        }
        let event = edited(example("tool.before"), "/turn", Some(turn));
        assert_eq!(intercepted_problems(&event), [], "tool.before");
    }

    /// A value `shape` refuses, and the rule that names it.
    fn mistake(name: &str, shape: Shape) -> (Value, String) {
        let (value, rule) = match shape {
            Shape::Object
            | Shape::Tool
            | Shape::Call
            | Shape::Identity
            | Shape::Closed(..)
            | Shape::Execution(_)
            | Shape::Error
            | Shape::Usage(_)
            | Shape::TokenCounts
            | Shape::Counters
            | Shape::Workspace => (json!([]), "must be an object"),
            Shape::Array
            | Shape::ResolvedCalls
            | Shape::ChangedFiles
            | Shape::Removed
            | Shape::Texts
            | Shape::Objects => (json!({}), "must be an array"),
            Shape::Message => (json!([]), "must be a message {id, role, parts}"),
            Shape::Text => (json!(""), "must be a non-empty string"),
            Shape::String => (json!(7), "must be a string"),
            Shape::Bool => (json!("yes"), "must be true or false"),
            Shape::Count => (json!(-1), "must be a non-negative integer"),
            Shape::Ordinal => (json!(0), "must be a positive integer"),
            Shape::NonNegative => (json!(-1), "must be a non-negative number"),
            Shape::Currency => (json!("usd"), "must be three capital letters"),
            Shape::Optional(shape) | Shape::RequiredWhen(_, _, shape) => {
                return mistake(name, *shape)
            }
            Shape::Word(words) => {
                return (
                    json!("other"),
                    format!("must be one of {}", words.join(", ")),
                )
            }
            Shape::Absent => return (json!({}), format!("must not be present on {name}")),
            Shape::AbsentWhen(condition, word) => {
                let rule = format!("must not be present on {name} when {condition} is \"{word}\"");
                return (json!({}), rule);
            }
        };
        (value, rule.to_owned())
    }

    /// Advertising modify offers the target's value to backends: it must be there.
    /// Without modify in the call, an event may leave an optional target out.
    #[test]
    fn a_modify_target_the_event_lacks_is_named_when_modify_is_advertised() {
        let mut checked = Vec::new();
        for rules in events::TABLE {
            let Some((_, pointer)) = rules.modify else {
                continue;
            };
            let name = rules.event.as_str();
            let complete = Event::parse_intercepted(&example(name).to_string())
                .expect("valid")
                .0;
            let full = events::full(rules.event);
            assert_eq!(complete.missing_target(rules, &full), None, "{name}");
            let lacking = edited(example(name), pointer, None);
            let problems = intercepted_problems(&lacking);
            if !problems.is_empty() {
                // A target the event requires anyway is named by the payload check.
                assert_eq!(problems[0].0, pointer, "{name}");
                continue;
            }
            let event = Event::parse_intercepted(&lacking.to_string())
                .expect("valid")
                .0;
            let problem = event.missing_target(rules, &full).expect("named");
            assert_eq!(problem.path, pointer, "{name}");
            assert!(problem.rule.contains("modify"), "{name}: {problem}");
            let without_modify = events::narrow(
                &full,
                &full
                    .effects
                    .iter()
                    .copied()
                    .filter(|&k| k != EffectKind::Modify)
                    .collect::<Vec<_>>(),
            )
            .expect("narrower");
            assert_eq!(event.missing_target(rules, &without_modify), None, "{name}");
            checked.push(name);
        }
        assert_eq!(
            checked,
            ["context.compact.before", "user.elicitation.result"],
            "the events whose target is optional"
        );
    }

    /// execution-event.schema.json@62fc780 `not` any of these: a permission request
    /// claiming a decision or an outcome, or a proposed switch naming the model it left,
    /// would claim what has not happened.
    #[test]
    fn a_permission_request_and_a_proposed_switch_refuse_what_comes_after_them() {
        let forbidden = [
            ("tool.permission.request", "/decision", json!("allow")),
            ("tool.permission.request", "/decidedBy", json!("user")),
            ("tool.permission.request", "/outcome", json!("ok")),
            (
                "tool.permission.request",
                "/execution",
                json!({"status": "executed"}),
            ),
            (
                "model.switch.before",
                "/previous",
                json!({"id": "m0", "provider": "p"}),
            ),
        ];
        for (name, pointer, value) in forbidden {
            assert_forbidden_on(name, pointer, value);
        }
    }

    /// execution-event.schema.json@62fc780 `not` any of these on model.request.before: a
    /// request claiming its usage, execution, finish reason, latency or error would claim
    /// what only its response (model.response.after) or failure (model.error) can.
    #[test]
    fn a_model_request_refuses_what_its_response_carries() {
        let name = "model.request.before";
        let forbidden = [
            (
                "/usage",
                json!({"kind": "amount", "scope": "attempt", "completeness": "complete",
                       "provenance": "provider", "inputTokens": 3}),
            ),
            ("/execution", json!({"status": "executed"})),
            ("/finishReason", json!("stop")),
            ("/latencyMs", json!(12)),
            (
                "/error",
                json!({"message": "overloaded", "class": "provider"}),
            ),
        ];
        for (pointer, value) in forbidden {
            assert_forbidden_on(name, pointer, value);
        }
    }

    #[test]
    fn a_permission_request_checks_its_tool_as_tool_before_does() {
        let name = "tool.permission.request";
        let encoded = edited(
            example(name),
            "/tool/input",
            Some(json!("{\"command\":\"ls\"}")),
        );
        assert_eq!(
            intercepted_problems(&encoded),
            [(
                "/tool/input".to_owned(),
                "must be a JSON object, not an encoded string".to_owned()
            )]
        );
        let no_call_id = edited(example(name), "/call/id", None);
        assert_eq!(
            intercepted_problems(&no_call_id),
            [("/call/id".to_owned(), "is required".to_owned())]
        );
    }

    #[test]
    fn upstream_catalogue_fixtures_are_valid_interceptable_events() {
        // Invalid for their capabilities only; the events themselves are complete.
        let event = fixture_event(fixture!("http/task-return-capability.invalid.json"));
        assert_eq!(intercepted_problems(&event), [], "{event}");
        // This one (62fc780) predates canonical messages: its response is a flat item of
        // then, refused now at the first member no message has. As a message, the event
        // is complete.
        let mut event = fixture_event(fixture!("http/model-response-input-target.invalid.json"));
        assert_eq!(
            intercepted_problems(&event),
            [(
                "/items/0/kind".to_owned(),
                "is not a member of a message".to_owned()
            )]
        );
        event["items"] = json!([{"id": "assistant1", "role": "assistant", "parts": [
            {"id": "assistant1-text", "kind": "text", "mediaType": "text/plain",
             "selection": "metadata"}]}]);
        assert_eq!(intercepted_problems(&event), [], "{event}");
        let mut event = fixture_event(fixture!("http/task-return-capability.invalid.json"));
        if let Some(task) = event["task"].as_object_mut() {
            task.remove("id");
        }
        assert_eq!(
            intercepted_problems(&event),
            [(
                "/task/id".to_owned(),
                "is required on task.change.before".to_owned()
            )]
        );
    }

    /// A text part that names no selection: no subscription's selection would find it,
    /// so every backend would be sent its text.
    fn unselected_part() -> Value {
        json!({"id": "p1", "kind": "text", "mediaType": "text/plain", "text": "password=hunter2"})
    }

    /// The upstream `items` whose `synthesized` flags are strings are refused as an event,
    /// intercepted or observed, at the message's flag (its parts wait for it).
    #[test]
    fn upstream_items_with_string_flags_are_refused_as_an_event() {
        let event = fixture_event(fixture!("http/synthesized-items-string.invalid.json"));
        let expected = [(
            "/items/0/synthesized".to_owned(),
            "must be true or false".to_owned(),
        )];
        assert_eq!(intercepted_problems(&event), expected);
        assert_eq!(observed_problems(&event), expected);
        let valid = fixture_event(fixture!("http/synthesized-identities.valid.json"));
        assert_eq!(intercepted_problems(&valid), []);
    }

    /// A message list whose part names no selection is refused at the part, whichever
    /// parser reads it: sent on, it would reach an `omit` subscription byte for byte.
    #[test]
    fn a_part_without_a_selection_is_refused_where_it_would_have_leaked() {
        let mut event = fixture_event(fixture!("http/observe-tool-after.valid.json"));
        event["items"] = json!([{"id": "m1", "role": "tool", "parts": [unselected_part()]}]);
        let expected = [(
            "/items/0/parts/0/selection".to_owned(),
            "is required".to_owned(),
        )];
        assert_eq!(intercepted_problems(&event), expected);
        assert_eq!(observed_problems(&event), expected);
        // Each other way a part could hide from a selection is refused too.
        for (member, value, rule) in [
            ("selection", json!(1), "must be body, metadata or omit"),
            (
                "kind",
                json!("reasoning"),
                "must be \"text\" or \"attachment\"",
            ),
            (
                "preview",
                json!("password=hunter2"),
                "is not a member of a part",
            ),
        ] {
            let mut part = unselected_part();
            part["selection"] = json!("metadata");
            part.as_object_mut().unwrap().remove("text");
            part[member] = value;
            event["items"][0]["parts"] = json!([part]);
            assert_eq!(
                intercepted_problems(&event),
                [(format!("/items/0/parts/0/{member}"), rule.to_owned())]
            );
        }
        let mut part = unselected_part();
        part["selection"] = json!("omit");
        part.as_object_mut().unwrap().remove("mediaType");
        event["items"][0]["parts"] = json!([part]);
        assert_eq!(
            intercepted_problems(&event),
            [(
                "/items/0/parts/0/text".to_owned(),
                "is not allowed with this part's selection".to_owned()
            )]
        );
    }

    /// Every content slot of every interceptable event refuses the part no selection would
    /// find, at the part's own pointer; the slot's shape is the table's.
    #[test]
    fn every_content_slot_refuses_a_part_without_a_selection() {
        let mut checked = 0;
        for rules in events::TABLE {
            let name = rules.event.as_str();
            for &(pointer, holds) in events::content(name) {
                let role = match holds {
                    Holds::MessagesOf(role) => role,
                    _ => "user",
                };
                let message = json!({"id": "m1", "role": role, "parts": [unselected_part()]});
                let (value, below) = match holds {
                    Holds::Messages | Holds::MessagesOf(_) => (json!([message]), "/0/parts/0"),
                    Holds::Message => (message, "/parts/0"),
                    Holds::Items => (json!([unselected_part()]), "/0"),
                    Holds::TextParts => (json!([unselected_part()]), "/0"),
                    Holds::TextPart | Holds::Part => (unselected_part(), ""),
                };
                let mut event = example(name);
                let at = pointer.replace('*', "0");
                if let Some(list) = pointer.split("/*").next().filter(|_| pointer.contains('*')) {
                    event[&list[1..]] = json!([{"path": "a.txt", "change": "modified"}]);
                }
                event = edited(event, &at, Some(value));
                assert_eq!(
                    intercepted_problems(&event),
                    [(format!("{at}{below}/selection"), "is required".to_owned())],
                    "{name} {pointer}"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 27, "the content slots of the interceptable events");
    }

    /// A tool is closed: a member its schema does not name is refused wherever a tool is
    /// checked, as a part in it would reach no lowering. Not `output` either, even once
    /// the tool has run: its result is tool.after's `items`.
    #[test]
    fn a_tool_holds_only_the_members_of_its_schema() {
        let transcript = json!([{"id": "p", "kind": "text", "mediaType": "text/plain",
                                 "text": "AWS_SECRET=x"}]);
        let expected = [(
            "/tool/transcript".to_owned(),
            "is not a member of tool".to_owned(),
        )];
        let before = with("/tool/transcript", Some(transcript.clone()));
        assert_eq!(problems(&before), expected);
        assert_eq!(intercepted_problems(&before), expected);
        assert_eq!(observed_problems(&before), expected);
        for name in ["tool.after", "tool.permission.request"] {
            let event = edited(example(name), "/tool/transcript", Some(transcript.clone()));
            assert_eq!(intercepted_problems(&event), expected, "{name}");
        }
        // A call's result is tool.after's `items`: no tool has an `output`.
        let output = json!([{"id": "m", "role": "tool", "parts": []}]);
        let expected = [(
            "/tool/output".to_owned(),
            "is not a member of tool".to_owned(),
        )];
        assert_eq!(
            problems(&with("/tool/output", Some(output.clone()))),
            expected
        );
        for name in ["tool.after", "tool.permission.request"] {
            let event = edited(example(name), "/tool/output", Some(output.clone()));
            assert_eq!(intercepted_problems(&event), expected, "{name}");
        }
    }

    /// tool.after's file changes are a list of closed `{path, change, previousPath?,
    /// before?, after?}`: a member the schema does not name, or a list that is none, would
    /// hide its snapshots from every check.
    #[test]
    fn file_changes_are_a_list_of_closed_file_changes() {
        let secret = json!({"id": "p", "kind": "text", "mediaType": "text/plain",
                            "text": "AWS_SECRET=x"});
        let event = |changes: Value| edited(example("tool.after"), "/fileChanges", Some(changes));
        let change = json!({"path": "a.txt", "change": "modified", "diff": [secret]});
        assert_eq!(
            intercepted_problems(&event(json!([change]))),
            [(
                "/fileChanges/0/diff".to_owned(),
                "is not a member of a file change".to_owned()
            )]
        );
        let keyed = json!({"a.txt": {"path": "a.txt", "change": "modified", "after": secret}});
        assert_eq!(
            intercepted_problems(&event(keyed)),
            [("/fileChanges".to_owned(), "must be an array".to_owned())]
        );
        let body = json!({"id": "p", "kind": "text", "mediaType": "text/plain",
                          "selection": "body", "text": "x"});
        let valid = json!([
            {"path": "a.txt", "change": "modified", "before": body, "after": body},
            {"path": "b.txt", "change": "created", "after": body},
            {"path": "c.txt", "change": "deleted", "before": body},
            {"path": "d.txt", "change": "moved", "previousPath": "e.txt"}
        ]);
        assert_eq!(intercepted_problems(&event(valid)), []);
        let invalid = json!([
            "a.txt",
            {"change": "renamed"},
            {"path": "b.txt", "change": "created", "before": body},
            {"path": "c.txt", "change": "deleted", "after": body},
            {"path": "d.txt", "change": "moved"}
        ]);
        let found: Vec<String> = intercepted_problems(&event(invalid))
            .into_iter()
            .map(|(at, rule)| format!("{at}: {rule}"))
            .collect();
        assert_eq!(
            found,
            [
                "/fileChanges/0: must be an object {path, change}",
                "/fileChanges/1/path: is required",
                "/fileChanges/1/change: must be created, modified, deleted or moved",
                "/fileChanges/2/before: must be absent when created",
                "/fileChanges/3/after: must be absent when deleted",
                "/fileChanges/4/previousPath: is required",
            ]
        );
        // Each entry of file.changed's list is checked where it is one; a list that is
        // none is refused there too.
        let mut changed = example("tool.after");
        changed["type"] = json!("file.changed");
        changed["changes"] = json!({"a.txt": {"after": secret}});
        assert_eq!(
            observed_problems(&changed),
            [("/changes".to_owned(), "must be an array".to_owned())]
        );
    }

    /// The model-visible item of a progress event (tool.progress `partialOutput`,
    /// turn.progress `delta`; execution-event.schema.json@62fc780 `modelVisibleItem`) is
    /// one canonical message, checked as one: its part that names no selection is
    /// refused at the part, and a list of messages there is named as not one message.
    #[test]
    fn a_progress_events_model_visible_item_is_a_checked_message() {
        let message = |part: Value| json!({"id": "m1", "role": "tool", "parts": [part]});
        let selected = json!({"id": "p1", "kind": "text", "mediaType": "text/plain",
                              "selection": "omit"});
        let turn_progress = turn_progress();
        let not_one = "must be a message {id, role, parts}";
        for (mut event, member) in [
            (tool_observed("tool.progress"), "partialOutput"),
            (turn_progress, "delta"),
        ] {
            let name = event["type"].clone();
            event[member] = message(unselected_part());
            assert_eq!(
                observed_problems(&event),
                [(
                    format!("/{member}/parts/0/selection"),
                    "is required".to_owned()
                )],
                "{name}"
            );
            event[member] = json!([message(selected.clone())]);
            assert_eq!(
                observed_problems(&event),
                [(format!("/{member}"), not_one.to_owned())],
                "{name}"
            );
            event[member] = message(selected.clone());
            assert_eq!(observed_problems(&event), [], "{name}");
        }
    }

    /// Where the envelope is open (an extension, a member it does not know), a part that
    /// names no selection is not refused, as such a member may hold any JSON; it is lowered
    /// to each subscription's selection, and a subscription that omits content is sent no
    /// text of it.
    #[test]
    fn a_part_no_check_reaches_is_lowered_without_a_selection() {
        let mut event = valid();
        event["transcript"] = json!([unselected_part()]);
        event["extensions"] = json!({"com.example.notes": {"last": unselected_part()}});
        let event = Event::parse_tool_before(&event.to_string()).expect("an open member");
        let view = View {
            include_native: false,
            content: content::Content::all(content::Selection::Omit),
        };
        let mut out = Vec::new();
        event.write_wire(&view, &mut out);
        let sent = String::from_utf8(out).unwrap();
        assert!(!sent.contains("hunter2"), "{sent}");
        let sent: Value = serde_json::from_str(&sent).unwrap();
        let omitted = json!({"id": "p1", "kind": "text", "mediaType": "text/plain",
                             "selection": "omit"});
        assert_eq!(sent["transcript"][0], omitted);
        assert_eq!(sent["extensions"]["com.example.notes"]["last"], omitted);
    }

    /// A part the harness withheld keeps to its own selection for a subscription that
    /// allows body too: where no check reached it, its text would otherwise go as it came.
    #[test]
    fn a_withheld_part_in_an_open_member_loses_its_text_even_for_body() {
        let mut event = valid();
        event["extensions"] = json!({"com.example.notes": {"id": "p1", "kind": "text",
            "mediaType": "text/plain", "selection": "omit", "text": "hunter2"}});
        let event = Event::parse_tool_before(&event.to_string()).expect("an open member");
        let sent = wire(&event, false);
        assert!(!sent.contains("hunter2"), "{sent}");
        let sent: Value = serde_json::from_str(&sent).unwrap();
        assert_eq!(
            sent["extensions"]["com.example.notes"],
            json!({"id": "p1", "kind": "text", "mediaType": "text/plain", "selection": "omit"})
        );
    }

    /// A tool's input is the call a policy decides on, not content, wherever the schema
    /// places a tool: a batched call's too. Nor is a tool a part because its own `kind`
    /// (a free word) is a part's.
    #[test]
    fn a_batched_calls_tool_reaches_a_metadata_subscription_unchanged() {
        let input = json!({"kind": "text", "text": "rm -rf build"});
        let kinded = json!({"name": "Write", "kind": "text", "input": {"path": "a"},
                            "origin": "native"});
        let mut event = example("tool.batch.after");
        event["calls"][0]["tool"]["input"] = input;
        let mut second = event["calls"][0].clone();
        second["call"]["id"] = json!("call2");
        second["tool"] = kinded;
        event["calls"] = json!([event["calls"][0], second]);
        let (parsed, _) = Event::parse_intercepted(&event.to_string()).expect("valid");
        let view = View {
            include_native: false,
            content: content::Content::all(content::Selection::Metadata),
        };
        let mut out = Vec::new();
        parsed.write_wire(&view, &mut out);
        let sent: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(sent["calls"], event["calls"]);
    }

    /// A part may hold another where no check reaches: an extension holds any JSON
    /// (extensions.schema.json), so a part that claims body there may carry, under a
    /// member no schema names or even one that names a part, a part the harness withheld
    /// (omit or metadata). That part keeps to its own selection for every subscription:
    /// its text reaches neither one that allows body nor one that allows metadata.
    /// Where a check reaches (`items`), the nesting is refused instead.
    #[test]
    fn a_withheld_part_nested_in_a_body_part_never_reaches_a_subscription() {
        use content::{Content, Selection};
        let outer = json!({"id": "p1", "kind": "text", "mediaType": "text/plain",
                           "selection": "body", "text": "visible"});
        let views = [
            Content::all(Selection::Body),
            Content::all(Selection::Metadata),
            Content {
                default: Selection::Metadata,
                categories: [("text".to_owned(), Selection::Body)].into(),
            },
        ];
        for selection in ["omit", "metadata"] {
            let withheld = json!({"id": "p2", "kind": "text", "mediaType": "text/plain",
                                  "selection": selection, "text": "hunter2"});
            for member in ["quoted", "category"] {
                let mut holder = outer.clone();
                holder[member] = withheld.clone();
                let mut event = valid();
                event["extensions"] = json!({"com.example.notes": holder});
                let event = Event::parse_tool_before(&event.to_string()).expect("an open member");
                for content in &views {
                    let view = View {
                        include_native: false,
                        content: content.clone(),
                    };
                    let mut out = Vec::new();
                    event.write_wire(&view, &mut out);
                    let sent = String::from_utf8(out).unwrap();
                    assert!(!sent.contains("hunter2"), "{member}, {content:?}: {sent}");
                }
                let sent: Value = serde_json::from_str(&wire(&event, false)).unwrap();
                let notes = &sent["extensions"]["com.example.notes"];
                assert_eq!(notes["text"], "visible", "the holder claims body: {notes}");
                assert_eq!(
                    notes[member],
                    json!({"id": "p2", "kind": "text", "mediaType": "text/plain",
                           "selection": selection}),
                    "{member}"
                );
            }
            let mut holder = outer.clone();
            holder["quoted"] = withheld;
            let mut event = valid();
            event["items"] = json!([holder]);
            assert_eq!(
                problems(&event),
                [(
                    "/items/0/quoted".to_owned(),
                    "is not a member of a part".to_owned()
                )]
            );
        }
    }

    /// The upstream event fixtures that break a rule of the call, the envelope or the
    /// tool.after payload are refused at the member they break; the valid one is not.
    #[test]
    fn upstream_invalid_events_are_refused_at_their_member() {
        let cases = [
            (
                fixture!("http/synthesized-call-string.invalid.json"),
                "/call/synthesized",
            ),
            (fixture!("http/parent-empty.invalid.json"), "/parentEventId"),
            (
                fixture!("http/observe-tool-error-message-missing.invalid.json"),
                "/error/message",
            ),
            (
                fixture!("http/observe-tool-error-output.invalid.json"),
                "/tool/output",
            ),
        ];
        for (text, path) in cases {
            let event = fixture_event(text);
            let problems = intercepted_problems(&event);
            assert!(
                problems.iter().any(|(p, _)| p == path),
                "{path}: {problems:?}"
            );
        }
        let valid = fixture_event(fixture!("http/observe-tool-error.valid.json"));
        assert_eq!(intercepted_problems(&valid), []);
        let mut denied = valid;
        denied["outcome"] = json!("denied");
        denied["execution"] = json!({"status": "skipped", "reason": "policy"});
        denied.as_object_mut().unwrap().remove("error");
        assert_eq!(intercepted_problems(&denied), []);
        let mut extra = fixture_event(fixture!("http/observe-tool-after.valid.json"));
        extra["call"]["parent"] = json!("c0");
        assert_eq!(
            intercepted_problems(&extra),
            [(
                "/call/parent".to_owned(),
                "is not a member of call".to_owned()
            )]
        );
    }

    /// A tool error (execution-event `$defs/error`) needs its message and class, and
    /// holds nothing the schema does not name.
    #[test]
    fn a_tool_error_needs_a_message_and_a_class_and_nothing_else() {
        let valid = fixture_event(fixture!("http/observe-tool-error.valid.json"));
        let mut full = valid.clone();
        full["error"] = json!({"message": "m", "class": "tool", "code": "ENOENT",
                               "status": 404, "native": {"errno": 2}});
        assert_eq!(intercepted_problems(&full), []);
        full["error"]["status"] = json!("not_found");
        assert_eq!(intercepted_problems(&full), []);
        for (member, value, rule) in [
            ("class", None, "is required"),
            ("class", Some(json!("")), "must be a non-empty string"),
            ("code", Some(json!(2)), "must be a non-empty string"),
            (
                "status",
                Some(json!(4.5)),
                "must be a non-empty string or an integer",
            ),
            (
                "status",
                Some(json!("")),
                "must be a non-empty string or an integer",
            ),
            (
                "stack",
                Some(json!("at secret.rs:1")),
                "is not a member of error",
            ),
        ] {
            let event = edited(valid.clone(), &format!("/error/{member}"), value);
            assert_eq!(
                intercepted_problems(&event),
                [(format!("/error/{member}"), rule.to_owned())],
                "{member}"
            );
        }
    }

    /// An MCP server's location is disclosed or named as a gap (upstream fixtures).
    #[test]
    fn an_mcp_descriptor_discloses_its_location_or_names_the_gap() {
        for text in [
            fixture!("http/mcp-http-gap.valid.json"),
            fixture!("http/mcp-stdio-gap.valid.json"),
            fixture!("http/mcp-unix-gap.valid.json"),
        ] {
            let event = fixture_event(text).to_string();
            assert!(Event::parse_tool_before(&event).is_ok(), "{event}");
        }
        for (text, path) in [
            (
                fixture!("http/mcp-http-location-missing.invalid.json"),
                "/tool/mcp/connection/url",
            ),
            (
                fixture!("http/mcp-stdio-location-missing.invalid.json"),
                "/tool/mcp/connection/command",
            ),
        ] {
            let event = fixture_event(text).to_string();
            let problems = Event::parse_tool_before(&event).expect_err("no location");
            assert_eq!(problems[0].path, path, "{problems:?}");
        }
        let mut event = fixture_event(fixture!("http/mcp-http-gap.valid.json"));
        let connection = &mut event["tool"]["mcp"]["connection"];
        connection["url"] = json!("https://user:secret@mcp.example/");
        let problems = Event::parse_tool_before(&event.to_string()).expect_err("credentials");
        assert_eq!(problems[0].path, "/tool/mcp/connection/url");
        assert!(!problems[0].rule.contains("secret"));
        event["tool"]["mcp"]["provenance"] = json!("guessed");
        let problems = Event::parse_tool_before(&event.to_string()).expect_err("provenance");
        assert!(
            problems.iter().any(|p| p.path == "/tool/mcp/provenance"),
            "{problems:?}"
        );
    }

    /// Digest §3.3: the MCP descriptor never carries credentials, and it goes to every
    /// backend. A server URL with a parameter named as a secret is refused at its
    /// pointer, neither the URL nor the value in the problem; an ordinary query loads.
    #[test]
    fn an_mcp_url_with_a_secret_parameter_is_refused_without_echoing_it() {
        let marker = "SECRET-VALUE-42";
        let mut event = fixture_event(fixture!("http/mcp-http-gap.valid.json"));
        for url in [
            format!("https://mcp.example/x?api_key={marker}"),
            format!("https://mcp.example/x?tenant=a&Access-Token={marker}"),
            format!("https://mcp.example/x?access%5Ftoken={marker}"),
        ] {
            event["tool"]["mcp"]["connection"]["url"] = json!(url);
            let problems = Event::parse_tool_before(&event.to_string()).expect_err(&url);
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].path, "/tool/mcp/connection/url");
            assert!(!format!("{problems:?}").contains(marker), "{problems:?}");
            assert!(
                !format!("{problems:?}").contains("mcp.example"),
                "{problems:?}"
            );
        }
        event["tool"]["mcp"]["connection"]["url"] = json!("https://mcp.example/x?tenant=a");
        assert!(Event::parse_tool_before(&event.to_string()).is_ok());
    }

    /// An extension transport's `address` in the `url` form is held to the same rule, and
    /// to user info: the shape this host's own adapter writes (`_undisclosed`).
    #[test]
    fn an_extension_transports_url_address_carries_no_credential() {
        let mut event = fixture_event(fixture!("http/mcp-http-gap.valid.json"));
        let at = "/tool/mcp/connection/address";
        for address in [
            "https://u:hunter2@mcp.example/",
            "https://mcp.example/?api_key=hunter2",
        ] {
            event["tool"]["mcp"]["connection"] =
                json!({"transport": "_x", "addressForm": "url", "address": address});
            let problems = Event::parse_tool_before(&event.to_string()).expect_err(address);
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].path, at, "{problems:?}");
            assert!(!format!("{problems:?}").contains("hunter2"), "{problems:?}");
        }
        // In another form an address is no URL: its text is the extension's business.
        event["tool"]["mcp"]["connection"] =
            json!({"transport": "_x", "addressForm": "name", "address": "key=1"});
        assert!(Event::parse_tool_before(&event.to_string()).is_ok());
    }

    /// Each transport's location (execution-event `$defs/mcp` `connection`): every
    /// member disclosed with its shape or named by a gap of exactly its name, and nothing
    /// the schema does not name.
    #[test]
    fn an_mcp_connection_discloses_or_names_each_member_of_its_transport() {
        let at = "/tool/mcp/connection";
        let stdio = fixture_event(fixture!("http/mcp-stdio-gap.valid.json"));
        let gap = |path: &str| json!({"path": path, "reason": "not disclosed"});
        let required = "is required, or a gap naming it when it is not disclosed";
        let cases = [
            (
                json!({"gaps": [gap("url")]}),
                vec![("/transport", "is required")],
            ),
            (
                json!({"transport": "ftp", "url": "ftp://x"}),
                vec![(
                    "/transport",
                    "must be http, sse, stdio or an extension name starting with \"_\"",
                )],
            ),
            (
                json!({"transport": "stdio", "gaps": [gap("command")]}),
                vec![("/args", required), ("/cwd", required)],
            ),
            (
                json!({"transport": "stdio", "command": "srv", "args": ["-v", 1], "cwd": ""}),
                vec![
                    ("/args", "must be an array of strings"),
                    ("/cwd", "must be a non-empty string"),
                ],
            ),
            (
                json!({"transport": "_unix"}),
                vec![("/addressForm", required), ("/address", required)],
            ),
            (
                json!({"transport": "http", "url": 7}),
                vec![("/url", "must be an http or https URL")],
            ),
            (
                json!({"transport": "sse", "url": "ftp://mcp.example/"}),
                vec![("/url", "must be an http or https URL")],
            ),
            (
                json!({"transport": "http", "gaps": [gap("/url")]}),
                vec![("/url", required)],
            ),
            (
                json!({"transport": "http", "url": "https://mcp.example/",
                       "headers": {"Authorization": "Bearer t"}}),
                vec![("/headers", "is not a member of this connection")],
            ),
            (
                json!({"transport": "http", "url": "https://mcp.example/", "gaps": []}),
                vec![("/gaps", "must name at least one gap")],
            ),
            (
                json!({"transport": "http", "gaps": [{"path": "url"}]}),
                vec![("/gaps/0/reason", "is required"), ("/url", required)],
            ),
            (
                json!({"transport": "http", "gaps": [{"path": "url", "reason": "r", "x": 1}]}),
                vec![("/gaps/0/x", "is not a member of a gap")],
            ),
            // An argument carrying a credential, at its own pointer; others pass.
            (
                json!({"transport": "stdio", "command": "srv", "cwd": "/srv", "args": [
                    "--port=1", "--api-key=sk-live-123", "https://u:p@x.example/",
                    "https://x.example/?access_token=abc", "https://x.example/?tenant=a",
                    "--token", "sk-live-456", "--cache-key=v1", "--ssh-key", "id_ed25519",
                    "--secret", "MY_SECRET_NAME", "--password", "hunter2"]}),
                vec![
                    ("/args/1", CREDENTIAL_ARGUMENT),
                    ("/args/2", CREDENTIAL_ARGUMENT),
                    ("/args/3", CREDENTIAL_ARGUMENT),
                    ("/args/6", CREDENTIAL_ARGUMENT),
                    ("/args/13", CREDENTIAL_ARGUMENT),
                ],
            ),
        ];
        for (connection, expected) in cases {
            let event = edited(
                stdio.clone(),
                "/tool/mcp/connection",
                Some(connection.clone()),
            );
            let expected: Vec<(String, String)> = expected
                .into_iter()
                .map(|(path, rule)| (format!("{at}{path}"), rule.to_owned()))
                .collect();
            assert_eq!(problems(&event), expected, "{connection}");
        }
        for connection in [
            json!({"transport": "_unix", "addressForm": "path", "address": "/run/mcp.sock"}),
            json!({"transport": "stdio", "command": "srv", "args": [], "cwd": "/repo"}),
            json!({"transport": "sse", "url": "http://localhost:8080/sse"}),
        ] {
            let event = edited(
                stdio.clone(),
                "/tool/mcp/connection",
                Some(connection.clone()),
            );
            assert_eq!(problems(&event), [], "{connection}");
        }
        let mut event = stdio.clone();
        event["tool"]["mcp"]["server"]["name"] = json!(3);
        event["tool"]["mcp"]["auth"] = json!("token");
        assert_eq!(
            problems(&event),
            [
                (
                    "/tool/mcp/server/name".to_owned(),
                    "must be a non-empty string".to_owned()
                ),
                (
                    "/tool/mcp/auth".to_owned(),
                    "is not a member of an MCP descriptor".to_owned()
                )
            ]
        );
    }

    #[test]
    fn upstream_stdio_request_event_is_a_valid_tool_before() {
        let event = Event::parse_tool_before(&valid().to_string()).expect("valid");
        assert_eq!(event.id, "evt_stdio_001");
        assert_eq!(event.event_type, "tool.before");
        assert_eq!(event.session_id.as_deref(), Some("sess_123"));
        assert_eq!(event.call_id.as_deref(), Some("call_456"));
    }

    #[test]
    fn upstream_observe_tool_before_and_mcp_gap_events_are_valid() {
        for text in [
            fixture!("http/observe-tool-before.valid.json"),
            fixture!("http/mcp-stdio-gap.valid.json"),
            fixture!("http/mcp-http-gap.valid.json"),
        ] {
            let event = fixture_event(text);
            assert!(Event::parse_tool_before(&event.to_string()).is_ok());
        }
    }

    #[test]
    fn upstream_malformed_source_is_rejected() {
        let event = fixture_event(fixture!("http/source-malformed.invalid.json"));
        assert_eq!(
            only_problem(&event, "/source"),
            "must be an absolute URI (RFC 3986)"
        );
    }

    #[test]
    fn upstream_compact_timestamp_is_rejected() {
        let event = fixture_event(fixture!("http/timestamp-compact.invalid.json"));
        assert_eq!(
            only_problem(&event, "/time"),
            "must be an RFC 3339 date-time"
        );
    }

    #[test]
    fn not_json_or_not_an_object_is_a_root_problem() {
        for text in ["", "{", "[]", "\"tool.before\"", "null"] {
            let problems = Event::parse_tool_before(text).expect_err(text);
            assert_eq!(problems.len(), 1);
            assert_eq!(problems.first().map(|p| p.path.as_str()), Some(""));
        }
        // Why it is not JSON is named: here, nesting past the limit of 127 levels.
        let deep = with(
            "/tool/input/deep",
            Some(serde_json::from_str(&format!("{}{}", "[".repeat(125), "]".repeat(125))).unwrap()),
        );
        let problems = Event::parse_tool_before(&deep.to_string()).expect_err("too deep");
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0]
                .rule
                .starts_with("must be valid JSON: recursion limit exceeded"),
            "{problems:?}"
        );
    }

    /// The deepest event every message still carries: nested 125 levels, its request
    /// and notification 127, which serde_json reads. One or two levels deeper, which
    /// the strict reader reads but serde_json no request of, the event is refused at the
    /// first array or object past the limit, its pointer escaped.
    #[test]
    fn an_event_nests_no_deeper_than_its_request_can_be_read() {
        use crate::content::Content;
        let nested = |levels: usize| {
            let text = format!("{}{}", "[".repeat(levels), "]".repeat(levels));
            serde_json::from_str::<Value>(&text).expect("within serde_json's limit")
        };
        // The event, its tool and its input are three levels; `deep` adds the others.
        let deepest = with("/tool/input/deep", Some(nested(MAX_NESTING - 3)));
        let event = Event::parse_tool_before(&deepest.to_string()).expect("125 levels");
        let view = View {
            include_native: true,
            content: Content::all(Selection::Body),
        };
        let capability = events::full(ahp_vocab::InterceptableEvent::ToolBefore);
        let request = crate::wire::intercept(&event, &view, &capability, |_| String::new());
        let request: Value =
            serde_json::from_slice(request.bytes()).expect("serde_json reads the request");
        assert_eq!(request["params"]["event"], deepest);
        let notification = crate::wire::observe(&event, &view).seal(|_| String::new());
        assert!(serde_json::from_slice::<Value>(notification.bytes()).is_ok());

        // The array at level 126: `deep` is level 4.
        let past = format!("/tool/input/deep{}", "/0".repeat(MAX_NESTING + 1 - 4));
        for levels in [MAX_NESTING - 2, MAX_NESTING - 1] {
            let deeper = with("/tool/input/deep", Some(nested(levels)));
            assert_eq!(only_problem(&deeper, &past), TOO_DEEP_RULE, "{levels}");
            let request = format!(r#"{{"params":{{"event":{deeper}}}}}"#);
            assert!(serde_json::from_str::<Value>(&request).is_err(), "{levels}");
        }
        // Objects count as arrays do; a member's name is escaped in the pointer.
        let mut objects = json!({});
        for _ in 0..MAX_NESTING - 2 {
            objects = json!({"a/b~": objects});
        }
        let deeper = with("/tool/input/deep", Some(objects));
        let past = format!("/tool/input/deep{}", "/a~1b~0".repeat(MAX_NESTING + 1 - 4));
        assert_eq!(only_problem(&deeper, &past), TOO_DEEP_RULE);
    }

    /// A member named twice, at any depth, is one problem at its pointer, for both
    /// parsers: a backend reading the other occurrence would judge another call.
    #[test]
    fn a_member_named_twice_is_one_problem_at_its_pointer() {
        let extended = with("/extensions/com.example", Some(json!([{"k": 1}]))).to_string();
        for (member, repeat, path) in [
            (r#""type":"tool.before""#, r#""type":"tool.after""#, "/type"),
            (r#""name":"Bash""#, r#""name":"Read""#, "/tool/name"),
            (
                r#""command":"git push --force""#,
                r#""command":"true""#,
                "/tool/input/command",
            ),
            (r#"{"k":1}"#, r#""k":2"#, "/extensions/com.example/0/k"),
        ] {
            assert_eq!(
                extended.matches(member).count(),
                1,
                "{member} is not unique"
            );
            let text = match member.strip_suffix('}') {
                Some(open) => extended.replace(member, &format!("{open},{repeat}}}")),
                None => extended.replace(member, &format!("{member},{repeat}")),
            };
            let name = path.rsplit('/').next().unwrap_or_default();
            let expected = vec![EventProblem {
                path: path.to_owned(),
                rule: format!("duplicate member `{name}`"),
            }];
            assert_eq!(
                Event::parse_tool_before(&text),
                Err(expected.clone()),
                "{text}"
            );
            assert_eq!(Event::parse_any(&text), Err(expected), "{text}");
        }
    }

    /// `extensions` (extensions.schema.json): an object of reverse-DNS names, on any
    /// event; the same check replies get.
    #[test]
    fn extensions_must_be_an_object_of_reverse_dns_names() {
        let rule = "must be an object whose member names are reverse-DNS (AHP-EXT-001)";
        for bad in [json!("x"), json!([])] {
            let event = with("/extensions", Some(bad.clone()));
            assert_eq!(only_problem(&event, "/extensions"), rule, "{bad}");
            let mut after = fixture_event(fixture!("http/observe-tool-after.valid.json"));
            after["extensions"] = bad;
            assert_eq!(
                observed_problems(&after),
                [("/extensions".to_owned(), rule.to_owned())]
            );
        }
        // A name that is not reverse DNS is named itself, among good ones.
        let rule = "must be named in reverse DNS (AHP-EXT-001)";
        for (bad, at) in [
            (json!({"trace": 1}), "/extensions/trace"),
            (json!({"com.ex": 1, "a/b": 2}), "/extensions/a~1b"),
        ] {
            let event = with("/extensions", Some(bad.clone()));
            assert_eq!(only_problem(&event, at), rule, "{bad}");
            let mut after = fixture_event(fixture!("http/observe-tool-after.valid.json"));
            after["extensions"] = bad;
            assert_eq!(
                observed_problems(&after),
                [(at.to_owned(), rule.to_owned())]
            );
        }
        let good = json!({"com.example.trace": {"id": 3}, "org.x-y.z_": [1]});
        assert_eq!(problems(&with("/extensions", Some(good))), []);
    }

    #[test]
    fn id_must_be_a_non_empty_string() {
        assert_eq!(only_problem(&with("/id", None), "/id"), "is required");
        for bad in [json!(""), json!(7), json!(null)] {
            assert_eq!(
                only_problem(&with("/id", Some(bad)), "/id"),
                "must be a non-empty string"
            );
        }
    }

    #[test]
    fn source_must_be_an_absolute_uri() {
        only_problem(&with("/source", None), "/source");
        for bad in NOT_ABSOLUTE_URIS {
            only_problem(&with("/source", Some(json!(bad))), "/source");
        }
        // The one with user info is refused for it (a_source_with_user_info_is_refused…).
        for good in ABSOLUTE_URIS.iter().filter(|uri| !uri.contains("user:pw@")) {
            assert_eq!(
                problems(&with("/source", Some(json!(good)))),
                vec![],
                "{good}"
            );
        }
    }

    /// Digest §3.2: `source` is non-secret, and it is sent to every backend. A password
    /// in its authority is refused, and not repeated in the problem; an `@` outside an
    /// authority (a URN, a mailto) is no user info.
    #[test]
    fn a_source_with_user_info_or_a_secret_parameter_is_refused_without_echoing_it() {
        for secret in [
            "https://svc:hunter2@harness.example/",
            "https://hunter2@harness.example/runtime/42",
            "https://harness.example/runtime/42?access_token=hunter2",
        ] {
            let rule = only_problem(&with("/source", Some(json!(secret))), "/source");
            assert!(!rule.contains("hunter2"), "{rule}");
        }
        for good in ["urn:ahp:team@harness.example", "mailto:ops@harness.example"] {
            assert_eq!(problems(&with("/source", Some(json!(good)))), [], "{good}");
        }
    }

    #[test]
    fn type_must_be_tool_before() {
        only_problem(&with("/type", None), "/type");
        assert_eq!(
            only_problem(&with("/type", Some(json!("tool.after"))), "/type"),
            "must be \"tool.before\""
        );
        assert_eq!(
            only_problem(&with("/type", Some(json!(""))), "/type"),
            "must be a non-empty string"
        );
    }

    #[test]
    fn time_must_be_rfc3339_with_real_field_ranges() {
        only_problem(&with("/time", None), "/time");
        for bad in NOT_DATE_TIMES {
            only_problem(&with("/time", Some(json!(bad))), "/time");
        }
        for good in DATE_TIMES {
            assert_eq!(
                problems(&with("/time", Some(json!(good)))),
                vec![],
                "{good}"
            );
        }
    }

    /// An event of a million flaws is refused with the first [`MAX_PROBLEMS`], at once:
    /// each problem is looked up before the next is added, so an unbounded list took
    /// quadratic time (20 s for 40,000 flaws) and unbounded memory.
    #[test]
    fn an_event_is_refused_with_at_most_max_problems() {
        let ids = vec![json!(""); 500_000];
        let event = with("/batch", Some(json!({"id": "b", "callIds": ids})));
        let event = edited(event, "/gaps", Some(json!(vec![json!(1); 500_000])));
        let found = problems(&event);
        assert_eq!(found.len(), MAX_PROBLEMS);
        assert_eq!(found[0].0, "/batch/callIds/0", "{:?}", found[0]);
    }

    /// A content slot or a workspace change of a million bad entries is looked at no
    /// further than the problems an event is refused with: a flaw for each, held beside
    /// the list's two copies, ran past the component's memory.
    #[test]
    fn a_content_list_or_workspace_of_a_million_flaws_yields_max_problems() {
        use crate::content::Holds;
        let zeros = Value::Array(vec![json!(0); 1_000_000]);
        for holds in [Holds::Messages, Holds::TextParts, Holds::Items] {
            assert_eq!(holds.flaws(&zeros).len(), MAX_PROBLEMS, "{holds:?}");
        }
        let messages = json!([{"id": "m", "role": "user", "parts": zeros.clone()}]);
        assert_eq!(Holds::Messages.flaws(&messages).len(), MAX_PROBLEMS);
        let roots = json!({"workspaceRoots": vec![json!(""); 1_000_000]});
        assert_eq!(
            crate::events::workspace_flaws(&roots, true).len(),
            MAX_PROBLEMS
        );
        let event = with("/items", Some(zeros));
        let found = problems(&event);
        assert_eq!(found.len(), MAX_PROBLEMS);
        assert_eq!(found[0].0, "/items/0", "{:?}", found[0]);
    }

    /// tool.before may leave its session out (a detached call has none), but a session
    /// it names has an id.
    #[test]
    fn a_tool_before_session_is_optional_and_has_an_id() {
        let detached = Event::parse_tool_before(&with("/session", None).to_string());
        assert_eq!(detached.expect("valid").session_id, None);
        only_problem(&with("/session/id", None), "/session/id");
        only_problem(&with("/session/id", Some(json!(""))), "/session/id");
        assert_eq!(
            only_problem(&with("/session", Some(json!("sess_1"))), "/session"),
            "must be an object"
        );
    }

    #[test]
    fn call_must_be_an_object_with_an_id() {
        only_problem(&with("/call", None), "/call");
        only_problem(&with("/call", Some(json!("call_456"))), "/call");
        only_problem(&with("/call/id", None), "/call/id");
        only_problem(&with("/call/id", Some(json!(""))), "/call/id");
    }

    #[test]
    fn tool_needs_a_name() {
        only_problem(&with("/tool", None), "/tool");
        only_problem(&with("/tool/name", None), "/tool/name");
        only_problem(&with("/tool/name", Some(json!(""))), "/tool/name");
    }

    #[test]
    fn tool_input_must_be_an_object_not_an_encoded_string() {
        let encoded = json!("{\"command\":\"git push --force\"}");
        assert_eq!(
            only_problem(&with("/tool/input", Some(encoded)), "/tool/input"),
            "must be a JSON object, not an encoded string"
        );
        only_problem(&with("/tool/input", Some(json!(["git"]))), "/tool/input");
        only_problem(&with("/tool/input", None), "/tool/input");
    }

    #[test]
    fn tool_origin_must_be_native_or_mcp() {
        only_problem(&with("/tool/origin", None), "/tool/origin");
        assert_eq!(
            only_problem(&with("/tool/origin", Some(json!("plugin"))), "/tool/origin"),
            "must be \"native\" or \"mcp\""
        );
    }

    #[test]
    fn mcp_origin_requires_a_descriptor_and_native_forbids_one() {
        assert_eq!(
            only_problem(&with("/tool/origin", Some(json!("mcp"))), "/tool/mcp"),
            "is required when origin is \"mcp\""
        );
        assert_eq!(
            only_problem(
                &with("/tool/mcp", Some(json!({"toolName": "x"}))),
                "/tool/mcp"
            ),
            "must be absent when origin is \"native\""
        );
        let mut event = with("/tool/origin", Some(json!("mcp")));
        if let Some(tool) = event.pointer_mut("/tool").and_then(Value::as_object_mut) {
            tool.insert("mcp".into(), json!("server"));
        }
        assert_eq!(only_problem(&event, "/tool/mcp"), "must be an object");
    }

    #[test]
    fn path_must_be_a_non_empty_string() {
        only_problem(&with("/path", None), "/path");
        only_problem(&with("/path", Some(json!(""))), "/path");
    }

    #[test]
    fn after_only_fields_are_rejected() {
        for field in AFTER_ONLY_FIELDS {
            let event = with(&format!("/{field}"), Some(json!("ok")));
            assert_eq!(
                only_problem(&event, &format!("/{field}")),
                "must not appear on tool.before"
            );
        }
    }

    #[test]
    fn every_problem_is_reported() {
        let mut event = with("/tool/input", Some(json!("{}")));
        if let Some(object) = event.as_object_mut() {
            object.remove("path");
            object.insert("outcome".into(), json!("ok"));
            object.insert("time".into(), json!("20260101T000000Z"));
        }
        let paths: Vec<String> = problems(&event).into_iter().map(|(p, _)| p).collect();
        assert_eq!(paths, ["/time", "/tool/input", "/path", "/outcome"]);
    }

    fn observed_problems(event: &Value) -> Vec<(String, String)> {
        pairs(Event::parse_any(&event.to_string()))
    }

    /// The upstream observe fixtures: each valid one is accepted as it is, each invalid
    /// one refused at the one member it breaks.
    #[test]
    fn upstream_observe_fixtures_are_accepted_iff_valid() {
        for text in [
            fixture!("http/catalogue-hook.failure.valid.json"),
            fixture!("http/observe-session-end.valid.json"),
            fixture!("http/execution-skipped-cancelled.valid.json"),
            fixture!("http/execution-skipped-other.valid.json"),
            fixture!("http/execution-skipped-policy.valid.json"),
            fixture!("http/execution-skipped-timeout.valid.json"),
            fixture!("http/execution-supplied-tool-error.valid.json"),
        ] {
            let event = fixture_event(text);
            assert_eq!(observed_problems(&event), [], "{event}");
        }
        for (text, path, rule) in [
            (
                fixture!("http/observe-session-end-outcome.invalid.json"),
                "/outcome",
                "must be one of completed, cancelled, error, unknown",
            ),
            (
                fixture!("http/observe-session-start-tool.invalid.json"),
                "/tool",
                "must not be present on session.start",
            ),
            (
                fixture!("http/observe-unknown-event.invalid.json"),
                "/type",
                "must be an event type of the catalogue",
            ),
        ] {
            assert_eq!(
                observed_problems(&fixture_event(text)),
                [(path.to_owned(), rule.to_owned())]
            );
        }
    }

    /// Every upstream message that carries an event, read as the harness's event: a valid
    /// fixture's is accepted, an invalid one's refused at the member the fixture breaks,
    /// unless what it breaks lies outside its event (listed with why). A fixture added
    /// upstream is read here without anyone naming it, and fails it until listed.
    #[test]
    fn every_upstream_event_is_accepted_iff_its_fixture_is_valid() {
        const BROKEN_OUTSIDE_THE_EVENT: &[(&str, &str)] = &[
            (
                "intercept-request-effects-missing.invalid.json",
                "params.effects",
            ),
            (
                "intercept-request-id-mismatch.invalid.json",
                "the JSON-RPC id",
            ),
            ("observe-with-id.invalid.json", "a notification with an id"),
            ("task-return-capability.invalid.json", "params.effects"),
            (
                "tool-before-continue-capability.invalid.json",
                "params.effects",
            ),
        ];
        // Stale upstream (digest §19.5): `tool.callId` and no `call`, `path` or `origin`,
        // so invalid under the carried tool-before schema.
        const STALE: &[&str] = &["intercept-request.valid.json"];
        // Each invalid event, and the member it is refused at: the one its fixture breaks.
        const REFUSED_AT: &[(&str, &str)] = &[
            (
                "mcp-http-location-missing.invalid.json",
                "/tool/mcp/connection/url",
            ),
            (
                "mcp-stdio-location-missing.invalid.json",
                "/tool/mcp/connection/command",
            ),
            // Broken in `params.capabilities` too; its items predate canonical messages.
            ("model-response-input-target.invalid.json", "/items/0/kind"),
            ("observe-session-end-outcome.invalid.json", "/outcome"),
            ("observe-session-start-tool.invalid.json", "/tool"),
            ("observe-tool-after-error.invalid.json", "/error"),
            (
                "observe-tool-after-input-missing.invalid.json",
                "/tool/input",
            ),
            (
                "observe-tool-error-message-missing.invalid.json",
                "/error/message",
            ),
            ("observe-tool-error-output.invalid.json", "/tool/output"),
            ("observe-unknown-event.invalid.json", "/type"),
            ("parent-empty.invalid.json", "/parentEventId"),
            ("source-malformed.invalid.json", "/source"),
            ("synthesized-call-string.invalid.json", "/call/synthesized"),
            (
                "synthesized-items-string.invalid.json",
                "/items/0/synthesized",
            ),
            ("task-id-missing.invalid.json", "/task/id"),
            ("timestamp-compact.invalid.json", "/time"),
        ];
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/upstream/fixtures/draft/http"
        );
        let mut read = Vec::new();
        for entry in std::fs::read_dir(dir).expect("the upstream fixtures") {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).expect("a fixture");
            let message: Value = serde_json::from_str(&text).expect("fixture is JSON");
            let Some(event) = message.pointer("/params/event") else {
                continue;
            };
            read.push(name.clone());
            let problems = match message["method"].as_str() {
                Some("hooks/intercept") => intercepted_problems(event),
                Some("hooks/observe") => observed_problems(event),
                other => panic!("{name}: an event under method {other:?}"),
            };
            let outside = BROKEN_OUTSIDE_THE_EVENT.iter().any(|(n, _)| *n == name);
            let valid = name.ends_with(".valid.json");
            if STALE.contains(&name.as_str()) {
                assert!(!problems.is_empty(), "{name} is listed stale but accepted");
            } else if valid || outside {
                assert_eq!(problems, [], "{name}");
            } else {
                let (_, at) = REFUSED_AT
                    .iter()
                    .find(|(n, _)| *n == name)
                    .unwrap_or_else(|| panic!("{name}: say where it is refused: {problems:?}"));
                assert!(
                    problems.iter().any(|(path, _)| path == at),
                    "{name}: refused at {problems:?}, not at {at}"
                );
            }
        }
        assert!(
            read.len() >= 37,
            "only {} fixtures carry an event",
            read.len()
        );
        // A listed fixture renamed or gone upstream is a stale entry, not a pass.
        let listed = BROKEN_OUTSIDE_THE_EVENT
            .iter()
            .chain(REFUSED_AT)
            .map(|(name, _)| *name)
            .chain(STALE.iter().copied());
        for name in listed {
            assert!(
                read.iter().any(|r| r == name),
                "{name} is listed but not read"
            );
        }
    }

    /// The upstream task.change.after that lacks its task id, with one.
    fn task_change_after() -> Value {
        let mut event = fixture_event(fixture!("http/task-id-missing.invalid.json"));
        event["task"]["id"] = json!("task1");
        event
    }

    /// A task change made needs its task id as one proposed does (upstream
    /// `task-id-missing.invalid.json`); with it, the event is valid.
    #[test]
    fn upstream_task_change_after_without_its_id_is_refused() {
        let event = fixture_event(fixture!("http/task-id-missing.invalid.json"));
        assert_eq!(
            observed_problems(&event),
            [(
                "/task/id".to_owned(),
                "is required on task.change.after".to_owned()
            )]
        );
        assert_eq!(observed_problems(&task_change_after()), []);
    }

    /// The lineage members any event may carry, and the session's optional members,
    /// keep their schema shapes; so do a tool's kind, a call's duration and a model
    /// attempt's number (from one).
    #[test]
    fn lineage_session_and_payload_members_keep_their_shapes() {
        let after = || fixture_event(fixture!("http/observe-tool-after.valid.json"));
        let object = "must be an object";
        let boolean = "must be true or false";
        let text = "must be a non-empty string";
        let number = "must be a non-negative number";
        for (pointer, value, path, rule) in [
            (
                "/turn",
                json!({"synthesized": true}),
                "/turn/id",
                "is required",
            ),
            ("/turn", json!({"id": ""}), "/turn/id", text),
            ("/turn", json!("turn1"), "/turn", object),
            (
                "/turn",
                json!({"id": "t", "synthesized": "yes"}),
                "/turn/synthesized",
                boolean,
            ),
            (
                "/gaps",
                json!([{"path": "/items"}]),
                "/gaps/0/reason",
                "is required",
            ),
            (
                "/gaps",
                json!([{"reason": "r"}]),
                "/gaps/0/path",
                "is required",
            ),
            (
                "/gaps",
                json!(["items"]),
                "/gaps/0",
                "must be an object {path, reason}",
            ),
            ("/gaps", json!({}), "/gaps", "must be an array"),
            ("/synthesized", json!("true"), "/synthesized", boolean),
            (
                "/session/agent",
                json!({"type": "primary"}),
                "/session/agent/id",
                "is required",
            ),
            ("/session/agent", json!("agent1"), "/session/agent", object),
            ("/session/cwd", json!(1), "/session/cwd", "must be a string"),
            (
                "/session/workspaceRoots",
                json!(["/repo", 2]),
                "/session/workspaceRoots/1",
                "must be a string",
            ),
            (
                "/session/workspaceRoots",
                json!("/repo"),
                "/session/workspaceRoots",
                "must be an array of strings",
            ),
            (
                "/session/synthesized",
                json!(1),
                "/session/synthesized",
                boolean,
            ),
            ("/tool/kind", json!(""), "/tool/kind", text),
            ("/durationMs", json!(-1), "/durationMs", number),
            ("/durationMs", json!("5"), "/durationMs", number),
        ] {
            let event = edited(after(), pointer, Some(value.clone()));
            assert_eq!(
                intercepted_problems(&event),
                [(path.to_owned(), rule.to_owned())],
                "{pointer} {value}"
            );
        }
        let mut good = after();
        good["turn"] = json!({"id": "t", "synthesized": true});
        good["gaps"] = json!([{"path": "/items", "reason": "not exposed"}]);
        good["synthesized"] = json!(false);
        good["session"] = json!({"id": "s", "cwd": "/repo", "workspaceRoots": ["/repo"],
            "model": "m", "agent": {"id": "a", "type": "primary"}, "synthesized": true});
        good["tool"]["kind"] = json!("file_read");
        good["durationMs"] = json!(12.5);
        assert_eq!(intercepted_problems(&good), []);
        // A turn an event requires is named once, by the payload rule, and closed there.
        let turn = edited(example("turn.start"), "/turn/id", None);
        assert_eq!(
            intercepted_problems(&turn),
            [("/turn/id".to_owned(), "is required".to_owned())]
        );
        for name in ["turn.start", "turn.finish.before"] {
            let turn = edited(example(name), "/turn/x", Some(json!(1)));
            assert_eq!(
                intercepted_problems(&turn),
                [("/turn/x".to_owned(), "is not a member of turn".to_owned())],
                "{name}"
            );
        }
        let expanded = edited(example("turn.start"), "/expandedFrom", Some(json!("")));
        assert_eq!(
            intercepted_problems(&expanded)[0].0,
            "/expandedFrom",
            "{expanded}"
        );
        let attempt = edited(
            example("model.request.before"),
            "/attempt/number",
            Some(json!(0)),
        );
        assert_eq!(
            intercepted_problems(&attempt),
            [(
                "/attempt/number".to_owned(),
                "must be a positive integer".to_owned()
            )]
        );
    }

    /// A model.switch.after made from the example model.switch.before: the model left
    /// named `previous`, none proposed, and no price of a proposal.
    fn switch_after() -> Value {
        let mut event = example("model.switch.before");
        event["type"] = json!("model.switch.after");
        event["previous"] = event["current"].clone();
        event["current"] = event["proposed"].take();
        if let Some(members) = event.as_object_mut() {
            members.remove("proposed");
            members.remove("pricing");
        }
        event
    }

    /// A proposed switch's `pricing` (execution-event.schema.json@62fc780): a currency of
    /// three capital letters, two non-negative rates per million tokens, and nothing else;
    /// the rates may be left out, the currency may not.
    #[test]
    fn a_proposed_switch_s_pricing_is_checked() {
        let name = "model.switch.before";
        let priced = |pricing: Value| edited(example(name), "/pricing", Some(pricing));
        assert_eq!(
            intercepted_problems(&priced(json!({"currency": "EUR"}))),
            []
        );
        assert_eq!(
            intercepted_problems(&edited(example(name), "/pricing", None)),
            []
        );
        let flawed = [
            (
                json!({"currency": "US$"}),
                "/pricing/currency",
                "must be three capital letters",
            ),
            (
                json!({"currency": "USDT"}),
                "/pricing/currency",
                "must be three capital letters",
            ),
            (
                json!({"inputPerMillionTokens": 1}),
                "/pricing/currency",
                "is required on model.switch.before",
            ),
            (
                json!({"currency": "USD", "outputPerMillionTokens": -0.5}),
                "/pricing/outputPerMillionTokens",
                "must be a non-negative number",
            ),
            (
                json!({"currency": "USD", "inputPerMillionTokens": "0.15"}),
                "/pricing/inputPerMillionTokens",
                "must be a non-negative number",
            ),
            (
                json!({"currency": "USD", "perRequest": 1}),
                "/pricing/perRequest",
                "is not a member of pricing",
            ),
            (json!("USD 0.15"), "/pricing", "must be an object"),
        ];
        for (pricing, pointer, rule) in flawed {
            let found = intercepted_problems(&priced(pricing.clone()));
            assert_eq!(found.len(), 1, "{pricing}: {found:?}");
            assert_eq!(found[0].0, pointer, "{pricing}: {found:?}");
            assert!(found[0].1.contains(rule), "{pricing}: {found:?}");
        }
    }

    /// execution-event.schema.json@62fc780 `not` required proposed on model.switch.after:
    /// a switch made names the model it left and the one it runs, not one still proposed.
    /// The type is observed only, so the rule is its row of [`events::OBSERVED`].
    #[test]
    fn a_switch_made_refuses_a_proposed_model() {
        assert_eq!(observed_problems(&switch_after()), []);
        let proposed = edited(
            switch_after(),
            "/proposed",
            Some(json!({"id": "example-large", "provider": "example"})),
        );
        let rule = "must not be present on model.switch.after";
        assert_refused(observed_problems, &proposed, "/proposed", rule);
    }

    /// execution-event.schema.json@62fc780 `required` on model.switch.after: the model
    /// left (`previous`) and the one now run (`current`), each `$defs/model` `{id,
    /// provider}` of non-empty strings, and a non-empty `reason`.
    #[test]
    fn a_switch_made_names_the_model_it_left_the_one_it_runs_and_why() {
        let required = "is required on model.switch.after";
        let cases = [
            ("/previous", None, required),
            (
                "/previous",
                Some(json!("example-model")),
                "must be an object",
            ),
            ("/previous/id", None, required),
            (
                "/previous/provider",
                Some(json!("")),
                "must be a non-empty string",
            ),
            ("/current", None, required),
            ("/current/id", Some(json!(7)), "must be a non-empty string"),
            ("/current/provider", None, required),
            ("/reason", None, required),
            ("/reason", Some(json!("")), "must be a non-empty string"),
        ];
        for (pointer, value, rule) in cases {
            let event = edited(switch_after(), pointer, value);
            assert_refused(observed_problems, &event, pointer, rule);
        }
    }

    /// A turn.end made from the example turn.finish.before: the turn completed.
    fn turn_end() -> Value {
        let mut event = example("turn.finish.before");
        event["type"] = json!("turn.end");
        event
    }

    /// execution-event.schema.json@62fc780, turn.end's `allOf`: if its outcome is
    /// completed, `not` required error. A turn that failed may say why; one that
    /// completed has no error to report.
    #[test]
    fn a_completed_turn_reports_no_error() {
        assert_eq!(observed_problems(&turn_end()), []);
        let error = json!({"message": "overloaded", "class": "provider"});
        let failed = edited(turn_end(), "/outcome", Some(json!("failed")));
        let failed = edited(failed, "/error", Some(error.clone()));
        assert_eq!(observed_problems(&failed), []);
        let completed = edited(turn_end(), "/error", Some(error));
        let rule = "must not be present on turn.end when /outcome is \"completed\"";
        assert_refused(observed_problems, &completed, "/error", rule);
    }

    /// execution-event.schema.json@62fc780: turn.end's `error`, where present (on a turn
    /// that did not complete), is `$defs/error`, checked as model.error's own; the
    /// `lastAssistantItem` of turn.finish.before and turn.end, where present, is `{id,
    /// synthesized?}` and nothing else. Each flaw is refused at its pointer.
    #[test]
    fn a_turns_error_and_last_assistant_item_are_of_their_schema() {
        let failed = edited(turn_end(), "/outcome", Some(json!("failed")));
        let errors = [
            (json!([]), "/error", "must be an object"),
            (
                json!({"class": "provider"}),
                "/error/message",
                "is required",
            ),
            (
                json!({"message": "overloaded", "class": ""}),
                "/error/class",
                "must be a non-empty string",
            ),
            (
                json!({"message": "overloaded", "class": "provider", "retry": true}),
                "/error/retry",
                "is not a member of error",
            ),
        ];
        for (error, pointer, rule) in errors {
            let event = edited(failed.clone(), "/error", Some(error));
            assert_refused(observed_problems, &event, pointer, rule);
        }
        let item = "/lastAssistantItem";
        let flawed = [
            (json!("a1"), item, "must be an object"),
            (json!({}), "/lastAssistantItem/id", "is required"),
            (
                json!({"id": "a1", "synthesized": "yes"}),
                "/lastAssistantItem/synthesized",
                "must be true or false",
            ),
            (
                json!({"id": "a1", "role": "assistant"}),
                "/lastAssistantItem/role",
                "is not a member of lastAssistantItem",
            ),
        ];
        for (value, pointer, rule) in flawed {
            let event = edited(example("turn.finish.before"), item, Some(value.clone()));
            assert_refused(intercepted_problems, &event, pointer, rule);
            let event = edited(turn_end(), item, Some(value));
            assert_refused(observed_problems, &event, pointer, rule);
        }
        let named = json!({"id": "a1", "synthesized": true});
        let event = edited(example("turn.finish.before"), item, Some(named.clone()));
        assert_eq!(intercepted_problems(&event), []);
        assert_eq!(
            observed_problems(&edited(turn_end(), item, Some(named))),
            []
        );
    }

    /// A turn.progress made from the example turn.start: the turn's assistant item
    /// streams its first delta.
    fn turn_progress() -> Value {
        let mut event = example("turn.start");
        event["type"] = json!("turn.progress");
        if let Some(members) = event.as_object_mut() {
            members.remove("trigger");
            members.remove("items");
        }
        event["item"] = json!({"id": "a1"});
        event["delta"] = json!({"id": "a1", "role": "assistant", "parts": [
            {"id": "a1-text", "kind": "text", "mediaType": "text/plain", "selection": "body",
             "text": "Do"}
        ]});
        event["final"] = json!(false);
        event
    }

    /// execution-event.schema.json@62fc780 `required` on turn.end (turn, outcome,
    /// continuationCount, items) and turn.progress (turn, item, delta, final); a turn and
    /// an item are `{id, synthesized?}` and nothing else. Both types are observed only.
    #[test]
    fn a_turn_ended_or_in_progress_names_its_required_members() {
        let cases = [
            (turn_end(), "/turn", None, "is required on turn.end"),
            (turn_end(), "/outcome", None, "is required on turn.end"),
            (
                turn_end(),
                "/continuationCount",
                None,
                "is required on turn.end",
            ),
            (turn_end(), "/items", None, "is required on turn.end"),
            (
                turn_end(),
                "/continuationCount",
                Some(json!(-1)),
                "must be a non-negative integer",
            ),
            (
                turn_end(),
                "/turn/index",
                Some(json!(1)),
                "is not a member of turn",
            ),
            (
                turn_progress(),
                "/turn",
                None,
                "is required on turn.progress",
            ),
            (
                turn_progress(),
                "/item",
                None,
                "is required on turn.progress",
            ),
            (
                turn_progress(),
                "/delta",
                None,
                "is required on turn.progress",
            ),
            (
                turn_progress(),
                "/final",
                None,
                "is required on turn.progress",
            ),
            (
                turn_progress(),
                "/final",
                Some(json!("no")),
                "must be true or false",
            ),
            (
                turn_progress(),
                "/item/id",
                Some(json!("")),
                "must be a non-empty string",
            ),
        ];
        for (event, pointer, value, rule) in cases {
            assert_eq!(observed_problems(&event), [], "{}", event["type"]);
            let event = edited(event, pointer, value);
            assert_refused(observed_problems, &event, pointer, rule);
        }
    }

    /// Each member of a type observed only whose rules are known: missing, it is the one
    /// problem, named at its pointer; of the wrong shape, likewise.
    /// session.end's `counters` (session-end.schema.json): each count, under any name, a
    /// non-negative integer, named at its own pointer.
    #[test]
    fn a_session_ends_counters_are_non_negative_integers_each_named() {
        let end = fixture_event(fixture!("http/observe-session-end.valid.json"));
        let counters = json!({"tools": 3, "a/b": -1, "turns": "many", "big": 1e30, "ok": 0});
        let problems = observed_problems(&edited(end.clone(), "/counters", Some(counters)));
        let at: Vec<&str> = problems.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            at,
            ["/counters/a~1b", "/counters/big", "/counters/turns"],
            "{problems:?}"
        );
        assert!(problems[0].1.contains("non-negative"), "{problems:?}");
        assert!(problems[1].1.contains("too large"), "{problems:?}");
        let fine = edited(end, "/counters", Some(json!({"tools": 3, "turns": 0})));
        assert_eq!(observed_problems(&fine), []);
    }

    #[test]
    fn each_member_of_a_known_observed_type_is_named_when_missing_or_mistyped() {
        let examples = [
            fixture_event(fixture!("http/observe-session-end.valid.json")),
            fixture_event(fixture!("http/catalogue-hook.failure.valid.json")),
            task_change_after(),
            tool_observed("tool.permission.resolved"),
            tool_observed("tool.progress"),
            file_changed(),
            switch_after(),
            model_error(),
            // Failed, so that its error may be present and is checked as one.
            edited(turn_end(), "/outcome", Some(json!("failed"))),
            turn_progress(),
            config_change_after(),
            user_attention(),
            workspace_change_after(),
        ];
        let mut checked = 0;
        for (name, members) in events::OBSERVED {
            let example = examples
                .iter()
                .find(|e| e["type"] == *name)
                .unwrap_or_else(|| panic!("no example of {name}"));
            for &(pointer, shape) in *members {
                // Optional unless another member says otherwise: its own test sets that
                // member (a_completed_turn_reports_no_error).
                if let Shape::AbsentWhen(..) = shape {
                    continue;
                }
                let (wrong, rule) = mistake(name, shape);
                if shape.is_optional() {
                    let missing = edited(example.clone(), pointer, None);
                    assert_eq!(observed_problems(&missing), [], "{name} without {pointer}");
                } else if shape != Shape::Absent {
                    let missing = edited(example.clone(), pointer, None);
                    assert_eq!(
                        observed_problems(&missing),
                        [(pointer.to_owned(), format!("is required on {name}"))],
                        "{name} without {pointer}"
                    );
                }
                let mistyped = edited(example.clone(), pointer, Some(wrong));
                assert_eq!(
                    observed_problems(&mistyped),
                    [(pointer.to_owned(), rule)],
                    "{name} with a mistyped {pointer}"
                );
                checked += 1;
            }
        }
        assert_eq!(
            checked, 82,
            "the members of session.end, hook.failure, task.change.after, \
             tool.permission.resolved, tool.progress, file.changed, model.switch.after, \
             model.error, turn.end, turn.progress, config.change.after, user.attention and \
             workspace.change.after"
        );
    }

    /// A valid event of `name`, tool.permission.resolved or tool.progress, observed only
    /// (execution-event.schema.json@62fc780): the call, tool and path of the example
    /// permission request, and what `name` requires besides.
    fn tool_observed(name: &str) -> Value {
        let mut event = example("tool.permission.request");
        event["type"] = json!(name);
        if let Some(members) = event.as_object_mut() {
            members.remove("suggestions");
            members.remove("sandboxBypass");
        }
        match name {
            "tool.permission.resolved" => {
                event["decision"] = json!("deny");
                event["decidedBy"] = json!("hook");
            }
            _ => {
                event["partialOutput"] = json!({"id": "m1", "role": "tool", "parts": [
                    {"id": "p1", "kind": "text", "mediaType": "text/plain",
                     "selection": "body", "text": "building"}]});
                event["backgrounded"] = json!(false);
            }
        }
        event
    }

    /// The tool of a permission resolved and of a call's progress is the `$defs/tool`
    /// tool.before has, checked as there: a parsed input, a descriptor where the origin
    /// is MCP, no member the schema does not name (no `output` either).
    #[test]
    fn a_resolved_permission_and_a_progress_check_their_tool_as_tool_before_does() {
        for name in ["tool.permission.resolved", "tool.progress"] {
            assert_eq!(observed_problems(&tool_observed(name)), [], "{name}");
            for (pointer, value, rule) in [
                (
                    "/tool/input",
                    json!("{\"command\":\"ls\"}"),
                    "must be a JSON object, not an encoded string",
                ),
                ("/tool/name", json!(""), "must be a non-empty string"),
                ("/tool/output", json!([]), "is not a member of tool"),
            ] {
                let event = edited(tool_observed(name), pointer, Some(value));
                assert_eq!(
                    observed_problems(&event),
                    [(pointer.to_owned(), rule.to_owned())],
                    "{name} {pointer}"
                );
            }
            let mcp = edited(tool_observed(name), "/tool/origin", Some(json!("mcp")));
            assert_eq!(
                observed_problems(&mcp),
                [(
                    "/tool/mcp".to_owned(),
                    "is required when origin is \"mcp\"".to_owned()
                )],
                "{name}"
            );
        }
    }

    /// What execution-event.schema.json@62fc780 says of the members of a permission
    /// resolved (`decision` allow or deny, `decidedBy` one of five) and of a call's
    /// progress (`backgrounded` a boolean, no `outcome` or `execution`), named with the
    /// schema's words and not only with whatever the table says.
    #[test]
    fn a_resolved_permission_and_a_progress_hold_the_words_and_types_of_their_schema() {
        for (name, pointer, value, rule) in [
            (
                "tool.permission.resolved",
                "/decision",
                json!("ask"),
                "must be one of allow, deny",
            ),
            (
                "tool.permission.resolved",
                "/decidedBy",
                json!("harness"),
                "must be one of user, policy, hook, auto, classifier",
            ),
            (
                "tool.progress",
                "/backgrounded",
                json!("no"),
                "must be true or false",
            ),
            (
                "tool.progress",
                "/outcome",
                json!("ok"),
                "must not be present on tool.progress",
            ),
            (
                "tool.progress",
                "/execution",
                json!({"status": "executed"}),
                "must not be present on tool.progress",
            ),
        ] {
            let event = edited(tool_observed(name), pointer, Some(value));
            assert_eq!(
                observed_problems(&event),
                [(pointer.to_owned(), rule.to_owned())],
                "{name} {pointer}"
            );
        }
        for decided_by in ["user", "policy", "hook", "auto", "classifier"] {
            let mut event = tool_observed("tool.permission.resolved");
            event["decision"] = json!("allow");
            event["decidedBy"] = json!(decided_by);
            assert_eq!(observed_problems(&event), [], "{decided_by}");
        }
    }

    /// tool.batch.after's own `batch` is an identity (execution-event.schema.json@62fc780):
    /// `{id, synthesized?}` and nothing else — not `$defs/batch`, which a call's `batch`
    /// is, with its `callIds`.
    #[test]
    fn a_batch_after_names_its_batch_by_identity_alone() {
        let with_batch = |batch: Value| edited(example("tool.batch.after"), "/batch", Some(batch));
        let named = with_batch(json!({"id": "batch1", "synthesized": true}));
        assert_eq!(intercepted_problems(&named), []);
        for (batch, pointer, rule) in [
            (
                json!({"id": "batch1", "callIds": ["call1"]}),
                "/batch/callIds",
                "is not a member of batch",
            ),
            (json!({"synthesized": false}), "/batch/id", "is required"),
            (json!({"id": ""}), "/batch/id", "must be a non-empty string"),
            (
                json!({"id": "batch1", "synthesized": "yes"}),
                "/batch/synthesized",
                "must be true or false",
            ),
        ] {
            assert_eq!(
                intercepted_problems(&with_batch(batch.clone())),
                [(pointer.to_owned(), rule.to_owned())],
                "{batch}"
            );
        }
    }

    /// Each of tool.batch.after's `calls` is a resolved call (execution-event.schema.json
    /// @62fc780): `{call, tool, path, batch?, outcome, execution}` and nothing else, its
    /// call, tool, outcome and execution checked as tool.after's, each flaw named at its
    /// own pointer; the list names at least one.
    #[test]
    fn each_of_a_batchs_calls_is_a_closed_resolved_call() {
        let batch = |calls: Value| edited(example("tool.batch.after"), "/calls", Some(calls));
        let call = || example("tool.batch.after")["calls"][0].clone();
        let with_call =
            |pointer: &str, value: Option<Value>| batch(json!([edited(call(), pointer, value)]));
        let mut denied = call();
        denied["outcome"] = json!("denied");
        denied["execution"] = json!({"status": "skipped", "reason": "policy"});
        denied["batch"] = json!({"id": "batch1", "callIds": ["call1", "call2"]});
        assert_eq!(intercepted_problems(&batch(json!([call(), denied]))), []);
        let cases = [
            (batch(json!([])), "/calls", "must name at least one call"),
            (
                batch(json!(["call1"])),
                "/calls/0",
                "must be an object {call, tool, path, outcome, execution}",
            ),
            (
                with_call("/call/id", None),
                "/calls/0/call/id",
                "is required",
            ),
            (
                with_call("/call/parent", Some(json!("c0"))),
                "/calls/0/call/parent",
                "is not a member of call",
            ),
            (with_call("/tool", None), "/calls/0/tool", "is required"),
            (
                with_call("/tool/input", Some(json!("{\"command\":\"ls\"}"))),
                "/calls/0/tool/input",
                "must be a JSON object, not an encoded string",
            ),
            (
                with_call("/tool/output", Some(json!([]))),
                "/calls/0/tool/output",
                "is not a member of tool",
            ),
            (
                with_call("/tool/origin", Some(json!("mcp"))),
                "/calls/0/tool/mcp",
                "is required when origin is \"mcp\"",
            ),
            (
                with_call("/path", Some(json!(""))),
                "/calls/0/path",
                "must be a non-empty string",
            ),
            (
                with_call("/outcome", Some(json!("done"))),
                "/calls/0/outcome",
                "must be ok, error, denied, cancelled or timeout",
            ),
            (
                with_call("/execution", None),
                "/calls/0/execution",
                "is required",
            ),
            (
                with_call("/outcome", Some(json!("denied"))),
                "/calls/0/execution/status",
                "must be \"skipped\" when outcome is \"denied\"",
            ),
            (
                with_call(
                    "/execution",
                    Some(json!({"status": "skipped", "reason": "later"})),
                ),
                "/calls/0/execution/reason",
                "must be supplied_result, policy, cancelled, timeout or other",
            ),
            (
                with_call("/items", Some(json!([unselected_part()]))),
                "/calls/0/items",
                "is not a member of a resolved call",
            ),
        ];
        for (event, path, rule) in cases {
            assert_eq!(
                intercepted_problems(&event),
                [(path.to_owned(), rule.to_owned())],
                "{path}"
            );
        }
        // A second call is checked as the first is.
        let second = batch(json!([call(), edited(call(), "/path", None)]));
        assert_eq!(
            intercepted_problems(&second),
            [("/calls/1/path".to_owned(), "is required".to_owned())]
        );
    }

    /// An execution is one of the closed branches of execution-event.schema.json@62fc780
    /// `$defs/execution`: executed, or skipped for a supplied result, both with nothing
    /// more, or skipped for another reason with an optional non-empty `detail`. So on
    /// tool.after and on each of a batch's calls.
    #[test]
    fn an_execution_holds_only_the_members_of_its_branch() {
        let skipped = |reason: &str, detail: Value| {
            let mut execution = json!({"status": "skipped", "reason": reason});
            execution["detail"] = detail;
            execution
        };
        // tool.after, and tool.batch.after's call, with this execution and outcome.
        let events = |execution: &Value, outcome: &str| {
            let mut after = fixture_event(fixture!("http/observe-tool-after.valid.json"));
            after["outcome"] = json!(outcome);
            after["execution"] = execution.clone();
            let mut call = example("tool.batch.after")["calls"][0].clone();
            call["outcome"] = json!(outcome);
            call["execution"] = execution.clone();
            let batch = edited(example("tool.batch.after"), "/calls", Some(json!([call])));
            [(after, "/execution"), (batch, "/calls/0/execution")]
        };
        let skips = [
            ("policy", "denied"),
            ("cancelled", "cancelled"),
            ("timeout", "timeout"),
            ("other", "cancelled"),
        ];
        for (reason, outcome) in skips {
            for execution in [
                json!({"status": "skipped", "reason": reason}),
                skipped(reason, json!("by the user")),
            ] {
                for (event, _) in events(&execution, outcome) {
                    assert_eq!(intercepted_problems(&event), [], "{execution}");
                }
            }
        }
        let cases = [
            (
                json!({"status": "executed", "detail": "ran"}),
                "ok",
                "/detail",
            ),
            (
                json!({"status": "executed", "reason": "other"}),
                "ok",
                "/reason",
            ),
            (skipped("supplied_result", json!("cached")), "ok", "/detail"),
            (skipped("cancelled", json!("")), "cancelled", "/detail"),
            (skipped("other", json!(7)), "cancelled", "/detail"),
            (
                json!({"status": "skipped", "reason": "timeout", "by": "x"}),
                "timeout",
                "/by",
            ),
        ];
        for (execution, outcome, member) in cases {
            for (event, at) in events(&execution, outcome) {
                let problems = intercepted_problems(&event);
                assert_eq!(problems.len(), 1, "{execution}: {problems:?}");
                assert_eq!(problems[0].0, format!("{at}{member}"), "{execution}");
            }
        }
    }

    /// A model.error made from the example model.response.after: the call ran and
    /// failed, with an error and no finish reason or items.
    fn model_error() -> Value {
        let mut event = example("model.response.after");
        event["type"] = json!("model.error");
        if let Some(members) = event.as_object_mut() {
            members.remove("finishReason");
            members.remove("items");
        }
        event["error"] = json!({"message": "overloaded", "class": "provider"});
        event
    }

    /// execution-event.schema.json@62fc780 `required` on model.error: the model called
    /// and the attempt that failed (`$defs/model`, `$defs/attempt`, as on its response),
    /// and the error (`$defs/error`, closed, as tool.after's own); and `not` required
    /// finishReason: a call that failed finished for no reason a response gives.
    #[test]
    fn a_model_error_names_its_model_attempt_and_error_and_no_finish_reason() {
        assert_eq!(observed_problems(&model_error()), []);
        let required = "is required on model.error";
        let cases = [
            ("/model", None, required),
            ("/model", Some(json!("example-model")), "must be an object"),
            ("/model/id", None, required),
            (
                "/model/provider",
                Some(json!("")),
                "must be a non-empty string",
            ),
            ("/attempt", None, required),
            ("/attempt/id", Some(json!(1)), "must be a non-empty string"),
            (
                "/attempt/number",
                Some(json!(0)),
                "must be a positive integer",
            ),
            ("/error", None, required),
            ("/error", Some(json!("overloaded")), "must be an object"),
            ("/error/class", None, "is required"),
            (
                "/error/message",
                Some(json!("")),
                "must be a non-empty string",
            ),
            (
                "/error/retryAfter",
                Some(json!(3)),
                "is not a member of error",
            ),
            (
                "/finishReason",
                Some(json!("error")),
                "must not be present on model.error",
            ),
        ];
        for (pointer, value, rule) in cases {
            let event = edited(model_error(), pointer, value);
            assert_refused(observed_problems, &event, pointer, rule);
        }
    }

    /// The execution of a model response, a model error and a compaction result is
    /// execution-event.schema.json@62fc780 `$defs/execution`, each branch closed as on
    /// tool.after, and narrowed by each event's `allOf`: a response or a compaction skips
    /// only for a supplied result, and a model error was executed.
    #[test]
    fn a_model_call_or_a_compaction_holds_an_execution_of_its_branch() {
        let events = [
            example("model.response.after"),
            example("context.compact.after"),
            model_error(),
        ];
        let supplied = json!({"status": "skipped", "reason": "supplied_result"});
        for event in events {
            let name = event["type"].as_str().unwrap_or_default().to_owned();
            assert_eq!(observed_problems(&event), [], "{name}");
            let mut cases = vec![
                (
                    json!({"status": "executed", "detail": "ran"}),
                    "/detail",
                    None,
                ),
                (
                    json!({"status": "executed", "reason": "other"}),
                    "/reason",
                    None,
                ),
                (json!({"status": "executed", "by": "x"}), "/by", None),
            ];
            match name.as_str() {
                "model.error" => {
                    let executed = "must be \"executed\" on model.error";
                    cases.push((supplied.clone(), "/status", Some(executed.to_owned())));
                    let policy = json!({"status": "skipped", "reason": "policy"});
                    cases.push((policy, "/status", Some(executed.to_owned())));
                }
                _ => {
                    let event = edited(event.clone(), "/execution", Some(supplied.clone()));
                    assert_eq!(observed_problems(&event), [], "{name}: {supplied}");
                    let rule = format!("must be supplied_result on {name}");
                    for reason in ["policy", "cancelled", "timeout", "other"] {
                        let skipped = json!({"status": "skipped", "reason": reason});
                        cases.push((skipped, "/reason", Some(rule.clone())));
                    }
                    let cached = json!({"status": "skipped", "reason": "supplied_result",
                                        "detail": "cached"});
                    cases.push((cached, "/detail", None));
                }
            }
            for (execution, member, rule) in cases {
                let event = edited(event.clone(), "/execution", Some(execution.clone()));
                let problems = observed_problems(&event);
                assert_eq!(problems.len(), 1, "{name}: {execution}: {problems:?}");
                assert_eq!(
                    problems[0].0,
                    format!("/execution{member}"),
                    "{name}: {execution}"
                );
                if let Some(rule) = rule {
                    assert_eq!(problems[0].1, rule, "{name}: {execution}");
                }
            }
        }
    }

    /// execution-event.schema.json@62fc780, model.response.after's `allOf`: if its
    /// execution was skipped, `not` any of usage, latencyMs. A response supplied in
    /// place of the call used no tokens and took no time the call could report.
    #[test]
    fn a_skipped_model_call_reports_no_usage_or_latency() {
        let name = "model.response.after";
        let usage = json!({"kind": "amount", "scope": "attempt", "completeness": "complete",
                           "provenance": "provider", "inputTokens": 3});
        let measured = [("/usage", usage), ("/latencyMs", json!(12))];
        let supplied = json!({"status": "skipped", "reason": "supplied_result"});
        for (pointer, value) in measured {
            let ran = edited(example(name), pointer, Some(value.clone()));
            assert_eq!(
                intercepted_problems(&ran),
                [],
                "{pointer} of a call that ran"
            );
            let skipped = edited(ran, "/execution", Some(supplied.clone()));
            let rule =
                format!("must not be present on {name} when /execution/status is \"skipped\"");
            assert_refused(intercepted_problems, &skipped, pointer, &rule);
        }
        let skipped = edited(example(name), "/execution", Some(supplied));
        assert_eq!(intercepted_problems(&skipped), []);
    }

    /// execution-event.schema.json@62fc780, model.response.after's `allOf`: `not`
    /// required error. A call that failed is a model.error, not a response.
    #[test]
    fn a_model_response_refuses_an_error() {
        let error = json!({"message": "overloaded", "class": "provider"});
        assert_forbidden_on("model.response.after", "/error", error);
    }

    /// execution-event.schema.json@62fc780 `$defs/model` (`{id, provider}`) and
    /// `$defs/attempt` (`{id, number, synthesized?}`) are closed: on every model.* event
    /// a member either does not name is refused at its pointer.
    #[test]
    fn a_model_and_an_attempt_hold_nothing_the_schema_does_not_name() {
        let synthesized = edited(
            example("model.request.before"),
            "/attempt/synthesized",
            Some(json!(true)),
        );
        assert_eq!(intercepted_problems(&synthesized), []);
        let intercepted = [
            ("model.request.before", "/model/version", "model"),
            ("model.request.before", "/attempt/retry", "attempt"),
            ("model.response.after", "/model/region", "model"),
            ("model.response.after", "/attempt/retry", "attempt"),
            ("model.switch.before", "/current/region", "model"),
            ("model.switch.before", "/proposed/region", "model"),
        ];
        for (name, pointer, what) in intercepted {
            let event = edited(example(name), pointer, Some(json!("x")));
            let rule = format!("is not a member of {what}");
            assert_refused(intercepted_problems, &event, pointer, &rule);
        }
        let observed = [
            (model_error(), "/model/region", "model"),
            (model_error(), "/attempt/retry", "attempt"),
            (switch_after(), "/previous/region", "model"),
            (switch_after(), "/current/region", "model"),
        ];
        for (event, pointer, what) in observed {
            let event = edited(event, pointer, Some(json!("x")));
            let rule = format!("is not a member of {what}");
            assert_refused(observed_problems, &event, pointer, &rule);
        }
    }

    /// execution-event.schema.json@62fc780 `$defs/attempt`: `synthesized`, where present,
    /// is a boolean. On every model.* event with an attempt anything else is refused at
    /// its pointer.
    #[test]
    fn an_attempt_says_it_was_synthesized_by_true_or_false() {
        let events = [
            ("model.request.before", example("model.request.before")),
            ("model.response.after", example("model.response.after")),
            ("model.error", model_error()),
        ];
        for (name, event) in events {
            let problems_of = match name {
                "model.error" => observed_problems,
                _ => intercepted_problems,
            };
            for flag in [true, false] {
                let event = edited(event.clone(), "/attempt/synthesized", Some(json!(flag)));
                assert_eq!(problems_of(&event), [], "{name}: {flag}");
            }
            for wrong in [json!("yes"), json!(1), json!(null)] {
                let event = edited(event.clone(), "/attempt/synthesized", Some(wrong));
                let rule = "must be true or false";
                assert_refused(problems_of, &event, "/attempt/synthesized", rule);
            }
        }
    }

    /// A count or an attempt's number that is a whole number past the largest held
    /// (`u64::MAX`) is an integer to the schema: refused for its size, at its pointer,
    /// not as no integer. `u64::MAX` itself is held.
    #[test]
    fn a_count_too_large_to_hold_is_refused_as_too_large() {
        let usage = |tokens: &Value| {
            json!({"kind": "amount", "scope": "attempt", "completeness": "complete",
                "provenance": "provider", "inputTokens": tokens})
        };
        let turn_usage = |tokens: &Value| {
            json!({"kind": "total", "scope": "turn", "completeness": "complete",
                "provenance": "mixed", "outputTokens": tokens})
        };
        let rule = format!("is too large: at most {}", u64::MAX);
        // 2^64 is 18446744073709551616, one past the largest held.
        for huge in [json!(1e20), json!(2f64.powi(64)), json!(u64::MAX)] {
            let held = huge.as_u64().is_some();
            let cases = [
                (
                    "model.request.before",
                    "/attempt/number",
                    huge.clone(),
                    "/attempt/number",
                ),
                (
                    "model.response.after",
                    "/usage",
                    usage(&huge),
                    "/usage/inputTokens",
                ),
                (
                    "turn.finish.before",
                    "/usage",
                    turn_usage(&huge),
                    "/usage/outputTokens",
                ),
                (
                    "turn.finish.before",
                    "/continuationCount",
                    huge.clone(),
                    "/continuationCount",
                ),
                (
                    "context.compact.before",
                    "/tokenCounts",
                    json!({"before": huge}),
                    "/tokenCounts/before",
                ),
                (
                    "context.compact.after",
                    "/tokenCounts",
                    json!({"after": huge}),
                    "/tokenCounts/after",
                ),
            ];
            for (name, at, value, pointer) in cases {
                let event = edited(example(name), at, Some(value));
                if held {
                    assert_eq!(intercepted_problems(&event), [], "{name}: {huge}");
                } else {
                    assert_refused(intercepted_problems, &event, pointer, &rule);
                }
            }
        }
    }

    /// execution-event.schema.json@62fc780 enumerates these words: turn.start's and
    /// context.compact.before's `trigger`, turn.finish.before's and turn.end's
    /// `outcome`. Any other word is refused at its pointer, naming the ones allowed.
    #[test]
    fn a_turns_or_a_compactions_word_is_one_the_schema_names() {
        let outcomes = "must be one of completed, failed, cancelled, max_iterations";
        let intercepted = [
            ("turn.start", "/trigger", "continuation", "resume"),
            ("turn.finish.before", "/outcome", "max_iterations", "done"),
            ("context.compact.before", "/trigger", "hook", "startup"),
        ];
        for (name, pointer, allowed, other) in intercepted {
            let event = edited(example(name), pointer, Some(json!(allowed)));
            assert_eq!(intercepted_problems(&event), [], "{name}: {allowed}");
            let event = edited(example(name), pointer, Some(json!(other)));
            let rule = match name {
                "turn.start" => "must be one of user, continuation, hook, external",
                "turn.finish.before" => outcomes,
                _ => "must be one of auto, manual, hook",
            };
            assert_refused(intercepted_problems, &event, pointer, rule);
        }
        let cancelled = edited(turn_end(), "/outcome", Some(json!("cancelled")));
        assert_eq!(observed_problems(&cancelled), []);
        let ended = edited(turn_end(), "/outcome", Some(json!("done")));
        assert_refused(observed_problems, &ended, "/outcome", outcomes);
    }

    /// execution-event.schema.json@62fc780 `$defs/usage`, closed, in its two forms: a
    /// model call's (`attemptUsage`: an amount for the attempt, from the provider or an
    /// estimate) on model.response.after and model.error, a turn's (`turnUsage`: a total
    /// for the turn) on turn.finish.before and turn.end. Optional, and checked where
    /// present, each flaw at its pointer.
    #[test]
    fn a_usage_report_is_of_its_events_form() {
        let attempt = json!({"kind": "amount", "scope": "attempt", "completeness": "complete",
            "provenance": "provider", "inputTokens": 12, "outputTokens": 3,
            "cacheReadTokens": 0, "cacheWriteTokens": 0,
            "cost": {"amount": 0.01, "currency": "USD", "basis": "billed"}});
        let turn = json!({"kind": "total", "scope": "turn", "completeness": "partial",
            "provenance": "mixed"});
        let with = |event: Value, usage: &Value| edited(event, "/usage", Some(usage.clone()));
        let response = with(example("model.response.after"), &attempt);
        assert_eq!(intercepted_problems(&response), []);
        let finish = with(example("turn.finish.before"), &turn);
        assert_eq!(intercepted_problems(&finish), []);
        assert_eq!(observed_problems(&with(model_error(), &attempt)), []);
        assert_eq!(observed_problems(&with(turn_end(), &turn)), []);
        let cases = [
            (&response, "/usage", Some(json!(12)), "must be an object"),
            (
                &response,
                "/usage/kind",
                Some(json!("total")),
                "must be \"amount\"",
            ),
            (&response, "/usage/scope", None, "is required"),
            (
                &response,
                "/usage/completeness",
                Some(json!("exact")),
                "must be one of complete, partial, unknown",
            ),
            (
                &response,
                "/usage/provenance",
                Some(json!("mixed")),
                "must be one of provider, estimate",
            ),
            (
                &response,
                "/usage/inputTokens",
                Some(json!(-1)),
                "must be a non-negative integer",
            ),
            (
                &response,
                "/usage/tokens",
                Some(json!(15)),
                "is not a member of usage",
            ),
            (
                &response,
                "/usage/cost/amount",
                Some(json!(-0.5)),
                "must be a non-negative number",
            ),
            (
                &response,
                "/usage/cost/currency",
                Some(json!("usd")),
                "must be three capital letters",
            ),
            (
                &response,
                "/usage/cost/basis",
                Some(json!("guessed")),
                "must be one of billed, reported, estimated",
            ),
            (&response, "/usage/cost/basis", None, "is required"),
            (
                &response,
                "/usage/cost/discount",
                Some(json!(0)),
                "is not a member of cost",
            ),
            (
                &finish,
                "/usage/kind",
                Some(json!("amount")),
                "must be \"total\"",
            ),
            (
                &finish,
                "/usage/scope",
                Some(json!("attempt")),
                "must be \"turn\"",
            ),
        ];
        for (event, pointer, value, rule) in cases {
            let event = edited(event.clone(), pointer, value);
            assert_refused(intercepted_problems, &event, pointer, rule);
        }
        let provenance = edited(
            with(model_error(), &attempt),
            "/usage/provenance",
            Some(json!("mixed")),
        );
        let rule = "must be one of provider, estimate";
        assert_refused(observed_problems, &provenance, "/usage/provenance", rule);
        let kind = edited(
            with(turn_end(), &turn),
            "/usage/kind",
            Some(json!("amount")),
        );
        assert_refused(observed_problems, &kind, "/usage/kind", "must be \"total\"");
    }

    /// execution-event.schema.json@62fc780 `latencyMs` on model.response.after and
    /// model.error: optional, a number no less than zero (a fraction of a millisecond
    /// allowed), refused at its pointer otherwise.
    #[test]
    fn a_model_calls_latency_is_a_non_negative_number() {
        let response = example("model.response.after");
        for latency in [json!(0), json!(812), json!(12.5)] {
            let event = edited(response.clone(), "/latencyMs", Some(latency.clone()));
            assert_eq!(intercepted_problems(&event), [], "{latency}");
            let event = edited(model_error(), "/latencyMs", Some(latency.clone()));
            assert_eq!(observed_problems(&event), [], "{latency}");
        }
        let rule = "must be a non-negative number";
        for latency in [json!(-1), json!(-0.5), json!("812"), json!(null)] {
            let event = edited(response.clone(), "/latencyMs", Some(latency.clone()));
            assert_refused(intercepted_problems, &event, "/latencyMs", rule);
            let event = edited(model_error(), "/latencyMs", Some(latency));
            assert_refused(observed_problems, &event, "/latencyMs", rule);
        }
    }

    /// execution-event.schema.json@62fc780 context.compact.after `removed`: a list,
    /// possibly empty, of the items the compaction replaces, each `{id}` (a non-empty
    /// string) and nothing else; each flaw is refused at its entry.
    #[test]
    fn a_compaction_names_each_item_it_removed_by_id_alone() {
        let name = "context.compact.after";
        let removed = json!([{"id": "m1"}, {"id": "a1"}]);
        let event = edited(example(name), "/removed", Some(removed));
        assert_eq!(intercepted_problems(&event), []);
        let cases = [
            ("/removed/1", Some(json!("a1")), "must be an object"),
            ("/removed/1/id", None, "is required"),
            (
                "/removed/1/id",
                Some(json!("")),
                "must be a non-empty string",
            ),
            (
                "/removed/1/synthesized",
                Some(json!(true)),
                "is not a member of a removed item",
            ),
        ];
        for (pointer, value, rule) in cases {
            let flawed = match pointer {
                "/removed/1" => {
                    let mut flawed = event.clone();
                    flawed["removed"][1] = value.clone().unwrap_or_default();
                    flawed
                }
                _ => edited(event.clone(), pointer, value.clone()),
            };
            assert_refused(intercepted_problems, &flawed, pointer, rule);
        }
    }

    /// execution-event.schema.json@62fc780 `$defs/tokenCounts` on context.compact.before
    /// and context.compact.after: optional, `{before?, after?}`, each a non-negative
    /// integer, and nothing else; each flaw is refused at its pointer.
    #[test]
    fn a_compactions_token_counts_are_non_negative_integers() {
        let cases = [
            (json!(12), "/tokenCounts", "must be an object"),
            (
                json!({"before": -1}),
                "/tokenCounts/before",
                "must be a non-negative integer",
            ),
            (
                json!({"before": 1.5}),
                "/tokenCounts/before",
                "must be a non-negative integer",
            ),
            (
                json!({"before": 1200, "saved": 900}),
                "/tokenCounts/saved",
                "is not a member of tokenCounts",
            ),
        ];
        for name in ["context.compact.before", "context.compact.after"] {
            let counted = edited(example(name), "/tokenCounts", Some(json!({"before": 1200})));
            assert_eq!(intercepted_problems(&counted), [], "{name}");
            for (counts, pointer, rule) in &cases {
                let event = edited(example(name), "/tokenCounts", Some(counts.clone()));
                assert_refused(intercepted_problems, &event, pointer, rule);
            }
        }
        let name = "context.compact.after";
        let counts = json!({"before": 1200, "after": 300});
        let both = edited(example(name), "/tokenCounts", Some(counts));
        assert_eq!(intercepted_problems(&both), []);
        let after = edited(both, "/tokenCounts/after", Some(json!("300")));
        let rule = "must be a non-negative integer";
        assert_refused(intercepted_problems, &after, "/tokenCounts/after", rule);
    }

    /// execution-event.schema.json@62fc780, context.compact.before's `allOf`: `not` any
    /// of summary, removed, execution, and a `tokenCounts` without `after`. A compaction
    /// asked for has no result yet: its summary, what it removed, how it ran and the
    /// count after it are context.compact.after's.
    #[test]
    fn a_compaction_asked_for_refuses_its_result() {
        let name = "context.compact.before";
        let result = example("context.compact.after");
        let forbidden = [
            ("/summary", result["summary"].clone()),
            ("/removed", result["removed"].clone()),
            ("/execution", result["execution"].clone()),
        ];
        for (pointer, value) in forbidden {
            assert_forbidden_on(name, pointer, value);
        }
        let counted = edited(example(name), "/tokenCounts", Some(json!({"before": 1200})));
        assert_eq!(intercepted_problems(&counted), []);
        let after = edited(counted, "/tokenCounts/after", Some(json!(300)));
        let rule = format!("must not be present on {name}");
        assert_refused(intercepted_problems, &after, "/tokenCounts/after", &rule);
    }

    /// The call of a permission asked or resolved and of a call's progress is the one
    /// tool.before has (execution-event.schema.json@62fc780: `{id, synthesized?}`,
    /// `additionalProperties: false`), checked by the same rule: a member the schema does
    /// not name, or a flag that is no boolean, is refused at its pointer.
    #[test]
    fn the_call_of_a_permission_or_a_progress_is_closed_as_tool_befores() {
        for event in [
            example("tool.permission.request"),
            tool_observed("tool.permission.resolved"),
            tool_observed("tool.progress"),
        ] {
            let name = event["type"].clone();
            let flagged = edited(event.clone(), "/call/synthesized", Some(json!(true)));
            assert_eq!(observed_problems(&flagged), [], "{name}");
            for (pointer, value, rule) in [
                ("/call/parent", json!("c0"), "is not a member of call"),
                ("/call/synthesized", json!("yes"), "must be true or false"),
                ("/call/id", json!(""), "must be a non-empty string"),
            ] {
                let event = edited(event.clone(), pointer, Some(value));
                assert_eq!(
                    observed_problems(&event),
                    [(pointer.to_owned(), rule.to_owned())],
                    "{name} {pointer}"
                );
            }
        }
    }

    /// A batch of many calls is checked in one pass, not by comparing each id with every
    /// one before it: 50,000 distinct ids are accepted, and one listed again after them
    /// is refused at its own index.
    #[test]
    fn a_large_batch_is_checked_for_duplicates_by_set() {
        let mut ids: Vec<Value> = (0..50_000).map(|i| json!(format!("call{i}"))).collect();
        let with = |ids: &[Value]| {
            let batch = json!({"id": "b1", "callIds": ids});
            edited(example("tool.before"), "/batch", Some(batch))
        };
        assert_eq!(observed_problems(&with(&ids)), []);
        ids.push(json!("call49999"));
        assert_eq!(
            observed_problems(&with(&ids)),
            [(
                "/batch/callIds/50000".to_owned(),
                "is listed twice".to_owned()
            )]
        );
    }

    /// The batch a call belongs to is `$defs/batch` (execution-event.schema.json@62fc780,
    /// closed) wherever the schemas put one beside a call: tool.before and tool.after,
    /// tool.permission.request, tool.permission.resolved, tool.progress and each of
    /// tool.batch.after's calls. `{id, callIds, synthesized?}`, with at least one call id,
    /// each a non-empty string listed once.
    #[test]
    fn a_calls_batch_is_checked_wherever_a_call_is() {
        let batch = json!({"id": "b1", "callIds": ["call1", "call2"], "synthesized": false});
        let ids = |ids: Value| edited(batch.clone(), "/callIds", Some(ids));
        let cases = [
            (json!("b1"), "", "must be an object"),
            (edited(batch.clone(), "/id", None), "/id", "is required"),
            (
                edited(batch.clone(), "/callIds", None),
                "/callIds",
                "is required",
            ),
            (
                ids(json!("call1")),
                "/callIds",
                "must be an array of call ids",
            ),
            (ids(json!([])), "/callIds", "must name at least one call"),
            (
                ids(json!(["call1", ""])),
                "/callIds/1",
                "must be a non-empty string",
            ),
            (
                ids(json!(["call1", 2])),
                "/callIds/1",
                "must be a non-empty string",
            ),
            (
                ids(json!(["call1", "call2", "call1"])),
                "/callIds/2",
                "is listed twice",
            ),
            (
                edited(batch.clone(), "/synthesized", Some(json!("no"))),
                "/synthesized",
                "must be true or false",
            ),
            (
                edited(batch.clone(), "/size", Some(json!(2))),
                "/size",
                "is not a member of batch",
            ),
        ];
        let places = [
            (example("tool.before"), "/batch"),
            (example("tool.after"), "/batch"),
            (example("tool.permission.request"), "/batch"),
            (tool_observed("tool.permission.resolved"), "/batch"),
            (tool_observed("tool.progress"), "/batch"),
            (example("tool.batch.after"), "/calls/0/batch"),
        ];
        for (event, at) in places {
            let name = event["type"].clone();
            let holding = |batch: &Value| edited(event.clone(), at, Some(batch.clone()));
            assert_eq!(observed_problems(&holding(&batch)), [], "{name}");
            for (batch, inner, rule) in &cases {
                assert_eq!(
                    observed_problems(&holding(batch)),
                    [(format!("{at}{inner}"), rule.to_string())],
                    "{name} {at}{inner}"
                );
            }
        }
    }

    /// A valid file.changed (task-workspace-event.schema.json@8f91ac4), with the one
    /// change of upstream `catalogue-file.changed.valid.json` (not carried).
    fn file_changed() -> Value {
        json!({"id": "evt1", "source": "urn:test:harness", "type": "file.changed",
               "time": "2026-09-15T12:00:00Z",
               "changes": [{"path": "/workspace/example.txt", "operation": "update",
                            "agentCaused": true}]})
    }

    /// Each of file.changed's `changes` is `{path, operation, agentCaused, before?,
    /// after?}` and nothing else (task-workspace-event.schema.json@8f91ac4, which the
    /// carried event union reaches through catalogue-event.schema.json), and the list
    /// names at least one: a member the schema does not name could carry a snapshot no
    /// check reaches.
    #[test]
    fn each_change_of_a_file_changed_is_closed_as_its_schema_says() {
        let event = |changes: Value| edited(file_changed(), "/changes", Some(changes));
        assert_eq!(observed_problems(&file_changed()), []);
        let body = json!({"id": "p", "kind": "text", "mediaType": "text/plain",
                          "selection": "body", "text": "x"});
        let valid = json!([
            {"path": "a.txt", "operation": "create", "agentCaused": true, "after": body},
            {"path": "b.txt", "operation": "update", "agentCaused": false,
             "before": body, "after": body},
            {"path": "c.txt", "operation": "remove", "agentCaused": true, "before": body}
        ]);
        assert_eq!(observed_problems(&event(valid)), []);
        assert_eq!(
            observed_problems(&event(json!([]))),
            [(
                "/changes".to_owned(),
                "must name at least one change".to_owned()
            )]
        );
        let invalid = json!([
            "a.txt",
            {"operation": "create", "agentCaused": true},
            {"path": "b.txt", "operation": "modified", "agentCaused": true},
            {"path": "c.txt", "operation": "update"},
            {"path": "d.txt", "operation": "update", "agentCaused": "yes"},
            {"path": "e.txt", "operation": "update", "agentCaused": true,
             "change": "moved", "diff": [unselected_part()]}
        ]);
        let found: Vec<String> = observed_problems(&event(invalid))
            .into_iter()
            .map(|(at, rule)| format!("{at}: {rule}"))
            .collect();
        assert_eq!(
            found,
            [
                "/changes/0: must be an object {path, operation, agentCaused}",
                "/changes/1/path: is required",
                "/changes/2/operation: must be create, update or remove",
                "/changes/3/agentCaused: is required",
                "/changes/4/agentCaused: must be true or false",
                "/changes/5/change: is not a member of a file change",
                "/changes/5/diff: is not a member of a file change",
            ]
        );
    }

    /// A config.change.after made from the example config.change.before: the change
    /// proposed, made.
    fn config_change_after() -> Value {
        let mut event = example("config.change.before");
        event["type"] = json!("config.change.after");
        event
    }

    /// A workspace.change.after made from the example workspace.change.before: the
    /// change proposed, made.
    fn workspace_change_after() -> Value {
        let mut event = example("workspace.change.before");
        event["type"] = json!("workspace.change.after");
        event
    }

    /// A valid user.attention (interaction-event.schema.json@2b5da58): its kind, and a
    /// message and a title of text parts.
    fn user_attention() -> Value {
        let text = |id: &str, text: &str| {
            json!([{"id": id, "kind": "text", "mediaType": "text/plain",
                    "selection": "body", "text": text}])
        };
        json!({"id": "evt1", "source": "urn:test:harness", "type": "user.attention",
               "time": "2026-09-15T12:00:00Z",
               "attention": {"kind": "permission_prompt",
                             "message": text("t1", "The agent asks to run a command."),
                             "title": text("t2", "Permission needed")}})
    }

    /// interaction-event.schema.json@2b5da58: a configuration change made is one
    /// proposed that may also list its `mcpServers`, native descriptors each an object
    /// open by design; one proposed lists none.
    #[test]
    fn a_configuration_change_made_may_list_its_mcp_servers_each_an_object() {
        let servers =
            |event: Value, servers: Value| edited(event, "/change/mcpServers", Some(servers));
        let listed = servers(
            config_change_after(),
            json!([{"name": "x"}, {"name": "y", "command": "y-server", "any": [1]}]),
        );
        assert_eq!(observed_problems(&listed), []);
        assert_eq!(
            observed_problems(&servers(config_change_after(), json!([]))),
            []
        );
        let not_an_object = servers(config_change_after(), json!([{"name": "x"}, 1]));
        let rule = "must be an object";
        assert_refused(
            observed_problems,
            &not_an_object,
            "/change/mcpServers/1",
            rule,
        );
        let first = servers(config_change_after(), json!([1]));
        assert_refused(observed_problems, &first, "/change/mcpServers/0", rule);
        let proposed = servers(example("config.change.before"), json!([{"name": "x"}]));
        let rule = "is not a member of change";
        assert_refused(intercepted_problems, &proposed, "/change/mcpServers", rule);
    }

    /// The nested payloads of the types observed only whose upstream schemas close them
    /// (`additionalProperties: false`) name nothing else: a configuration change made, an
    /// attention, a workspace change made and a hook failure.
    #[test]
    fn nested_payloads_of_observed_types_name_nothing_else() {
        let failure = fixture_event(fixture!("http/catalogue-hook.failure.valid.json"));
        for (event, object, what) in [
            (config_change_after(), "/change", "change"),
            (user_attention(), "/attention", "attention"),
            (workspace_change_after(), "/workspace", "workspace"),
            (
                workspace_change_after(),
                "/workspace/change",
                "a workspace change",
            ),
            (failure, "/failure", "failure"),
        ] {
            assert_eq!(observed_problems(&event), [], "{}", event["type"]);
            let at = format!("{object}/note");
            let event = edited(event, &at, Some(json!("x")));
            let rule = format!("is not a member of {what}");
            assert_refused(observed_problems, &event, &at, &rule);
        }
    }

    /// A workspace change made is of the words and shapes of one proposed
    /// (task-workspace-event.schema.json@8f91ac4).
    #[test]
    fn a_workspace_change_made_is_checked_as_one_proposed() {
        let moved = edited(
            workspace_change_after(),
            "/workspace/kind",
            Some(json!("moved")),
        );
        let rule = "must be one of cwd, roots, switch";
        assert_refused(observed_problems, &moved, "/workspace/kind", rule);
        let roots = json!({"workspaceRoots": ["/a", "/a"]});
        let repeated = edited(workspace_change_after(), "/workspace/change", Some(roots));
        let at = "/workspace/change/workspaceRoots/1";
        assert_refused(observed_problems, &repeated, at, "repeats a root");
    }

    /// An attention's message and title are required lists, and their parts are checked
    /// as text parts by their content slots: a part no selection would find is refused
    /// at its own pointer.
    #[test]
    fn an_attentions_message_and_title_are_text_parts() {
        for slot in ["message", "title"] {
            let at = format!("/attention/{slot}");
            let missing = edited(user_attention(), &at, None);
            let rule = "is required on user.attention";
            assert_refused(observed_problems, &missing, &at, rule);
            let unselected = edited(user_attention(), &at, Some(json!([unselected_part()])));
            let part = format!("{at}/0/selection");
            assert_refused(observed_problems, &unselected, &part, "is required");
        }
    }

    #[test]
    fn parse_any_checks_the_envelope_and_an_interceptable_payload() {
        let after = fixture_event(fixture!("http/observe-tool-after.valid.json"));
        let event = Event::parse_any(&after.to_string()).expect("tool.after is a valid event");
        assert_eq!(event.event_type, "tool.after");
        assert_eq!(event.call_id.as_deref(), Some("call_observe_456"));
        // Observers are owed the payload rules of an interceptable type too.
        for (text, path) in [
            (
                fixture!("http/observe-tool-after-input-missing.invalid.json"),
                "/tool/input",
            ),
            (
                fixture!("http/observe-tool-after-error.invalid.json"),
                "/error",
            ),
        ] {
            let problems = Event::parse_any(&fixture_event(text).to_string()).expect_err(path);
            assert!(
                problems.iter().any(|p| p.path == path),
                "{path}: {problems:?}"
            );
        }

        // A type observed only: its own payload rules (events::OBSERVED), and the
        // envelope's, where a session is optional.
        let mut ended = with("/session", None);
        ended["type"] = json!("config.change.after");
        assert_eq!(
            pairs(Event::parse_any(&ended.to_string())),
            [(
                "/change".to_owned(),
                "is required on config.change.after".to_owned()
            )]
        );
        ended["change"] = config_change_after()["change"].clone();
        let event = Event::parse_any(&ended.to_string()).expect("session is optional");
        assert_eq!(event.session_id, None);
        ended["session"] = json!({});
        let problems = Event::parse_any(&ended.to_string()).expect_err("a session needs an id");
        assert_eq!(
            problems.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            ["/session/id: is required"]
        );
        ended["session"] = json!({"id": "s"});
        ended["time"] = json!("20260101T000000Z");
        assert!(Event::parse_any(&ended.to_string()).is_err());
    }

    /// The event as [`Event::write_wire`] writes it.
    fn wire(event: &Event, include_native: bool) -> String {
        let content = crate::content::Content::all(crate::content::Selection::Body);
        let mut out = Vec::new();
        event.write_wire(
            &View {
                include_native,
                content,
            },
            &mut out,
        );
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn the_wire_event_drops_native_unless_included_and_keeps_unknown_fields() {
        let mut source = valid();
        if let Some(object) = source.as_object_mut() {
            object.insert("native".into(), json!({"hook_event_name": "PreToolUse"}));
            object.insert("com.example.unknown".into(), json!([1, 2]));
        }
        let event = Event::parse_tool_before(&source.to_string()).expect("valid");

        let mut without = source.clone();
        if let Some(object) = without.as_object_mut() {
            object.remove("native");
        }
        let read = |text: String| serde_json::from_str::<Value>(&text).expect("JSON");
        assert_eq!(read(wire(&event, false)), without);
        assert_eq!(read(wire(&event, true)), source);
    }

    /// The provider payload a tool error carries (`error.native`) leaves, like the
    /// event's own, only where the subscription includes native data.
    #[test]
    fn the_native_payload_of_an_error_leaves_only_when_included() {
        let mut source = fixture_event(fixture!("http/observe-tool-error.valid.json"));
        source["error"]["native"] = json!({"stderr": "token=hunter2"});
        let text = source.to_string();
        let event = Event::parse_any(&text).expect("valid");
        assert_eq!(wire(&event, true), text, "sent as it came with native");
        let sent: Value = serde_json::from_str(&wire(&event, false)).unwrap();
        let mut without = source.clone();
        without["error"].as_object_mut().unwrap().remove("native");
        assert_eq!(sent, without);
        assert!(!wire(&event, false).contains("hunter2"));
        // Projected for a selection below body, the same.
        let mut view = View {
            include_native: false,
            content: crate::content::Content::all(crate::content::Selection::Omit),
        };
        let mut out = Vec::new();
        source["items"] = json!([{"id": "m", "role": "tool", "parts": [{"id": "p",
            "kind": "text", "mediaType": "text/plain", "selection": "body", "text": "x"}]}]);
        let event = Event::parse_any(&source.to_string()).expect("valid");
        event.write_wire(&view, &mut out);
        let sent: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(sent["error"], without["error"]);
        assert_eq!(sent["items"][0]["parts"][0]["selection"], "omit");
        view.include_native = true;
        out.clear();
        event.write_wire(&view, &mut out);
        let sent: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(sent["error"], source["error"]);
    }

    #[test]
    fn a_one_line_event_goes_as_the_harness_wrote_it() {
        // Member order, spacing, an escaped name and a number's spelling: all kept.
        let text = valid()
            .to_string()
            .replacen('{', r#"{ "z.ext" : 1.50E1 , "\u0061" : "x" ,"#, 1);
        let event = Event::parse_tool_before(&format!("  {text}\t")).expect("valid");
        assert_eq!(wire(&event, false), text);
        assert_eq!(wire(&event, true), text);
    }

    #[test]
    fn an_event_with_line_breaks_or_a_native_payload_to_drop_is_encoded_again() {
        let pretty = serde_json::to_string_pretty(&valid()).unwrap();
        let event = Event::parse_tool_before(&pretty.replace('\n', "\r\n")).expect("valid");
        assert_eq!(
            wire(&event, false),
            valid().to_string(),
            "one line, re-encoded"
        );

        let mut source = valid();
        source["native"] = json!({"raw": "provider payload"});
        let text = source.to_string().replacen('{', "{ ", 1);
        let event = Event::parse_tool_before(&text).expect("valid");
        assert_eq!(wire(&event, true), text, "kept with native when it is sent");
        let without: Value = serde_json::from_str(&wire(&event, false)).unwrap();
        assert_eq!(without.get("native"), None);
        assert_eq!(without["id"], source["id"]);
    }

    #[test]
    fn a_line_break_is_found_at_every_offset() {
        for len in 0..20 {
            let mut text = vec![b' '; len];
            assert!(!has_line_break(&text));
            for at in 0..len {
                for byte in [b'\n', b'\r', b'\t', 0x0B, 0x0E, 0x8A, 0xFF] {
                    text[at] = byte;
                    let expected = byte == b'\n' || byte == b'\r';
                    assert_eq!(
                        has_line_break(&text),
                        expected,
                        "{byte:#x} at {at} of {len}"
                    );
                }
                text[at] = b' ';
            }
        }
    }

    #[test]
    fn a_modified_event_is_encoded_from_its_document() {
        let text = valid().to_string().replacen('{', "{ ", 1);
        let event = Event::parse_tool_before(&text).expect("valid");
        let changed = event.with_value("/tool/input", json!({"command": "pwd"}));
        let sent: Value = serde_json::from_str(&wire(&changed, false)).unwrap();
        assert_eq!(sent["tool"]["input"], json!({"command": "pwd"}));
        assert_ne!(wire(&changed, false), text);
        assert_ne!(changed, event);
    }

    #[test]
    fn events_are_equal_by_their_documents_not_their_texts() {
        let compact = Event::parse_tool_before(&valid().to_string()).expect("valid");
        let spaced = valid().to_string().replacen('{', "{ ", 1);
        let spaced = Event::parse_tool_before(&spaced).expect("valid");
        assert_ne!(
            wire(&spaced, false),
            wire(&compact, false),
            "kept texts differ"
        );
        assert_eq!(spaced, compact);
        let pretty = serde_json::to_string_pretty(&valid()).unwrap();
        assert_eq!(Event::parse_tool_before(&pretty).expect("valid"), compact);
    }

    #[test]
    fn problem_display_is_path_colon_rule() {
        let problem = EventProblem {
            path: "/tool/input".into(),
            rule: "must be a JSON object".into(),
        };
        assert_eq!(problem.to_string(), "/tool/input: must be a JSON object");
    }
}
