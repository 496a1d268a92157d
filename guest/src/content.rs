//! Content selection (AHP-CONTENT-002): what one subscription may see of the content parts
//! of an event.
//!
//! A registration gives each subscription a `content` selection, `body`, `metadata` or
//! `omit` per category with a required default, and each backend is sent the event with
//! every part lowered to its own subscription's selection. A part never rises: a
//! selection limits what a backend sees and grants nothing. A part lowered to `metadata`
//! keeps its description (id, kind, media type, category, size, hash) without `text`,
//! `body` or `gap`; one lowered to `omit` keeps only what names it (the schema allows a
//! stub or no part; a stub keeps the message's shape and ids).
//!
//! A part is an object with a `kind` of `text` or `attachment`, a string `id` and
//! `mediaType` and a `selection` (content-item.schema.json). It may sit in any content
//! slot (`items`, `message.messages`, `instructions`, a single part, an effect's value),
//! so every member of the event is searched, except two the selection does not govern:
//! `native` (the event's, and a tool error's), which goes only where the registration
//! includes it, and a tool's `input`, the arguments the policy decides on (the event's
//! tool, and each of a batch's calls').
//! A tool is never lowered as a part: its own `kind` is a free word.
//!
//! Two guards keep a part from passing a selection untouched:
//! - The content slots of an event ([`crate::events::content`]) are checked against
//!   their shapes ([`Holds`]) before anything is sent, and so are the closed objects
//!   around them (`tool`, a file change), so every part there names its selection and
//!   carries nothing the schema does not name.
//! - What an event leaves open cannot be checked that way: an `extensions` value may be
//!   any JSON, the envelope keeps members it does not know, some objects are open
//!   (`params`, a permission suggestion) and an event observed only is checked no
//!   further than its known rules (its `tool`, say). There, any object whose `kind` is
//!   `text` or `attachment` is lowered as a part, whatever else it has or lacks; one
//!   without a selection claims none, and is lowered to the subscription's. A part is
//!   lowered by what it keeps, not by what it loses, so a member no schema names never
//!   outlives a lowering; what it keeps is searched as any member, so a part held in
//!   another (there, one may be) keeps to its own selection, whatever its holder claims.
//!
//! What is neither a part nor in one (a bare string in an extension, say) is no content
//! to a selection: the harness puts content in parts.

use crate::json::{self, Node, Object};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};
use std::fmt;

/// How much of a part a backend sees, least first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Selection {
    Omit,
    Metadata,
    Body,
}

impl Selection {
    /// The registration's and the part's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Selection::Omit => "omit",
            Selection::Metadata => "metadata",
            Selection::Body => "body",
        }
    }

    fn parse(word: &str) -> Option<Selection> {
        [Selection::Omit, Selection::Metadata, Selection::Body]
            .into_iter()
            .find(|s| s.as_str() == word)
    }
}

/// A subscription's `content`: a selection per named category, the default for others.
/// By name: a part's category is looked up once per part, and a registration may name
/// many.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Content {
    pub default: Selection,
    pub categories: BTreeMap<String, Selection>,
}

/// The members that name a part: all that a part lowered to `omit` keeps.
const NAMING: [&str; 6] = [
    "id",
    "kind",
    "mediaType",
    "selection",
    "category",
    "synthesized",
];
/// What a part lowered to `metadata` keeps besides: its size and hash.
const SIZE_AND_HASH: [&str; 2] = ["size", "sha256"];
/// What only a `body` part may carry: its content, or why it is missing.
const BODY: [&str; 3] = ["text", "body", "gap"];

impl Content {
    /// `selection` for every category.
    pub fn all(selection: Selection) -> Content {
        Content {
            default: selection,
            categories: BTreeMap::new(),
        }
    }

    /// Every part as the harness sent it: nothing to lower.
    pub fn is_all_body(&self) -> bool {
        self.default == Selection::Body && self.categories.values().all(|s| *s == Selection::Body)
    }

    /// `document` with every part lowered to this selection; `None` when no part changes.
    pub fn project(&self, document: &Map<String, Value>) -> Option<Map<String, Value>> {
        let place = Place::of_event(document.get("type").and_then(Value::as_str));
        let mut projected = document.clone();
        let changed = projected.iter_mut().fold(false, |changed, (key, value)| {
            self.lower_member(key, value, place) | changed
        });
        changed.then_some(projected)
    }

    /// Lowers every part in a member of the event or of one of a batch's calls (its
    /// `place`) but where the selection does not govern: `native` and a tool's input,
    /// and a tool is searched as one, never lowered as a part.
    fn lower_member(&self, key: &str, value: &mut Value, place: Place) -> bool {
        match (key, value) {
            ("native", _) => false,
            ("tool", Value::Object(tool)) if place.tool => self.lower_all_but(tool, "input"),
            ("error", Value::Object(error)) => self.lower_all_but(error, "native"),
            ("calls", Value::Array(calls)) if place.calls => {
                calls.iter_mut().fold(false, |changed, call| {
                    let lowered = match call {
                        Value::Object(call) => call.iter_mut().fold(false, |changed, (k, v)| {
                            self.lower_member(k, v, Place::CALL) | changed
                        }),
                        call => self.lower_within(call),
                    };
                    lowered | changed
                })
            }
            (_, value) => self.lower_within(value),
        }
    }

    /// Lowers every part in `object`'s members but `skipped`; whether anything changed.
    fn lower_all_but(&self, object: &mut Map<String, Value>, skipped: &str) -> bool {
        object
            .iter_mut()
            .filter(|(key, _)| *key != skipped)
            .fold(false, |changed, (_, v)| self.lower_within(v) | changed)
    }

    /// Lowers every part in `value`; whether anything changed.
    fn lower_within(&self, value: &mut Value) -> bool {
        match value {
            Value::Object(object) if is_part(|key| object.get(key).and_then(Value::as_str)) => {
                self.lower(object)
            }
            Value::Object(object) => object
                .values_mut()
                .fold(false, |changed, v| self.lower_within(v) | changed),
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, v| self.lower_within(v) | changed),
            _ => false,
        }
    }

    /// Lowers one part to the smaller of its own selection and this one for its category,
    /// and every part in what stays of it.
    fn lower(&self, part: &mut Map<String, Value>) -> bool {
        let own = claimed(|key| part.get(key).and_then(Value::as_str));
        let to = own.min(self.for_part(part));
        let mut changed = false;
        if to < Selection::Body {
            // What stays is named, never what goes: a member no schema names (a part in a
            // slot the event checks could not reach) goes too, whatever it holds, and so
            // does a named one not of the schema's type (an `id` object could hold anything).
            let members = part.len();
            part.retain(|key, value| keeps(to, key, value));
            changed = part.len() != members;
            if part.get("selection").and_then(Value::as_str) != Some(to.as_str()) {
                part.insert("selection".into(), Value::from(to.as_str()));
                changed = true;
            }
        }
        // Where no check reached, a part may hold another in any member, even one that
        // names it (an extension holds any JSON): that one keeps to its own selection,
        // though the part that holds it claims more.
        part.values_mut()
            .fold(changed, |changed, v| self.lower_within(v) | changed)
    }

    /// Whether `value` holds content this selection does not show whole: a part it, or
    /// the part's own claim, lowers below body, or a body part with a `gap` instead of
    /// its content. A whole-list replacement of such a target would drop what its
    /// backend never saw (composition.md@8f91ac4: "MUST NOT be advertised or accepted
    /// when the target contains text withheld by metadata/omit selection or a content
    /// gap").
    pub fn withholds(&self, value: &Value) -> bool {
        match value {
            Value::Object(object) if is_part(|key| object.get(key).and_then(Value::as_str)) => {
                !self.shows_whole(object) || object.values().any(|member| self.withholds(member))
            }
            Value::Object(object) => object.values().any(|member| self.withholds(member)),
            Value::Array(items) => items.iter().any(|item| self.withholds(item)),
            _ => false,
        }
    }

    /// Whether every attachment part in `values` (effects' canonical content) is one of
    /// `event`'s, unchanged, that this selection shows whole (composition.md@8f91ac4:
    /// "Message values MAY contain unchanged immutable attachment references only after
    /// runtime validation of their existing identity and authorization. No effect may edit
    /// referenced bytes or masquerade new text as an attachment"): a backend may keep,
    /// move or drop an attachment it was shown, never make one up, point one at other
    /// bytes, or hand on one it was not shown. The event is read only when a value holds
    /// an attachment. Each part is looked up by its text ([`text_of`]), so the look costs
    /// what the reply and the event weigh: compared one by one, a reply repeating a part
    /// thousands of times against an event of thousands cost seconds and ran the
    /// component past its bound.
    pub fn shows_attachments<'v>(
        &self,
        values: impl IntoIterator<Item = &'v Value>,
        event: &crate::event::Event,
    ) -> bool {
        let mut given = Vec::new();
        values.into_iter().for_each(|v| attachments(v, &mut given));
        if given.is_empty() {
            return true;
        }
        let mut held = Vec::new();
        for (key, value) in event.document() {
            if key != "native" {
                attachments(value, &mut held);
            }
        }
        // Only a part of the schema's shape can be one a reply holds (each passed it), and
        // such a part is flat: what an event holds elsewhere under `kind: attachment`
        // (in a tool's input, nested a hundred deep) is never written out.
        let held: HashSet<String> = held
            .into_iter()
            .filter(|part| self.shows_whole(part))
            .filter(|part| object_part_flaw(part, &["attachment"]).is_none())
            .filter_map(text_of)
            .collect();
        given
            .iter()
            .all(|part| text_of(part).is_some_and(|text| held.contains(&text)))
    }

    /// Whether a part is shown whole: body by its own claim and by this selection, with
    /// no gap instead of its content.
    fn shows_whole(&self, part: &Map<String, Value>) -> bool {
        let own = claimed(|key| part.get(key).and_then(Value::as_str));
        own.min(self.for_part(part)) == Selection::Body && !part.contains_key("gap")
    }

    /// This selection for a part (content-selection.schema.json): reasoning takes its own
    /// category, everything else the class of its kind and media type, each where this
    /// selection lists it, else the default. A category of its own the part names decides
    /// where this selection lists it. One it does not list ("unlisted categories use the
    /// default") gets the lesser of the default and the class's selection: a label is
    /// never a way past either. A label that names a class (`images` on a text part) is
    /// no category of its own, and the part is its class's.
    fn for_part(&self, part: &Map<String, Value>) -> Selection {
        let listed = |category: &str| self.categories.get(category).copied();
        let by_class = listed(class(part)).unwrap_or(self.default);
        let own = part
            .get("category")
            .and_then(Value::as_str)
            .filter(|named| !CLASSES.contains(named));
        match own {
            None => by_class,
            Some(named) => listed(named).unwrap_or(by_class.min(self.default)),
        }
    }
}

/// Whether an object is lowered as a content part, given its string members by name:
/// whether its `kind` is a part's. Nothing else is asked, so that a part no check
/// reached (in an extension, or a member the envelope does not know) is lowered even
/// without its `selection`, `id` or `mediaType`: refusing such an event instead would
/// refuse valid ones, as an extension may hold any JSON. An object that only shares the
/// word is lowered too, which hides from a subscription that asked for less than body
/// what it may not have needed hidden, and never shows it more.
fn is_part<'a>(text: impl Fn(&str) -> Option<&'a str>) -> bool {
    matches!(text("kind"), Some("text" | "attachment"))
}

/// A part's text with every object's members in order of name, whatever order a `Map`
/// keeps (serde_json's `preserve_order` keeps the text's): equal parts write the same.
fn text_of(part: &Map<String, Value>) -> Option<String> {
    struct Sorted<'v>(&'v Value);
    impl Serialize for Sorted<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            match self.0 {
                Value::Object(members) => by_name(members, serializer),
                Value::Array(items) => serializer.collect_seq(items.iter().map(Sorted)),
                scalar => scalar.serialize(serializer),
            }
        }
    }
    fn by_name<S: Serializer>(
        members: &Map<String, Value>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let members: BTreeMap<&String, Sorted> = members
            .iter()
            .map(|(name, value)| (name, Sorted(value)))
            .collect();
        serializer.collect_map(members)
    }
    struct Part<'v>(&'v Map<String, Value>);
    impl Serialize for Part<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            by_name(self.0, serializer)
        }
    }
    serde_json::to_string(&Part(part)).ok()
}

/// Every attachment part in `value`, at any depth, into `found`.
fn attachments<'v>(value: &'v Value, found: &mut Vec<&'v Map<String, Value>>) {
    match value {
        Value::Object(object) => {
            if object.get("kind").and_then(Value::as_str) == Some("attachment") {
                found.push(object);
            }
            object
                .values()
                .for_each(|member| attachments(member, found));
        }
        Value::Array(items) => items.iter().for_each(|item| attachments(item, found)),
        _ => {}
    }
}

/// What the names of a member mean where it sits (execution-event.schema.json@62fc780):
/// elsewhere a member named `tool` is no tool and one named `calls` no calls, and each is
/// searched as any other.
#[derive(Clone, Copy)]
struct Place {
    /// `tool` is the tool being called, whose input the policy decides on.
    tool: bool,
    /// `calls` are a batch's calls, each with a tool of its own.
    calls: bool,
}

impl Place {
    /// Inside one of a batch's calls.
    const CALL: Place = Place {
        tool: true,
        calls: false,
    };

    /// At the top of an event of this type.
    fn of_event(event_type: Option<&str>) -> Place {
        Place {
            tool: matches!(
                event_type,
                Some(
                    "tool.before"
                        | "tool.after"
                        | "tool.permission.request"
                        | "tool.permission.resolved"
                        | "tool.progress"
                )
            ),
            calls: event_type == Some("tool.batch.after"),
        }
    }
}

/// The selection a part claims, given its string members by name: its own, or body when
/// it names none or a word the schema does not know (it claims nothing, and is lowered
/// like a body).
fn claimed<'a>(text: impl Fn(&str) -> Option<&'a str>) -> Selection {
    text("selection")
        .and_then(Selection::parse)
        .unwrap_or(Selection::Body)
}

/// Whether a part lowered `to` less than body keeps `key`: a member that names it, and
/// for metadata its size and hash, each only of the type the schema gives it.
fn keeps(to: Selection, key: &str, value: &Value) -> bool {
    let typed = match key {
        "synthesized" => value.is_boolean(),
        "size" => value.is_number(),
        _ => value.is_string(),
    };
    typed && (NAMING.contains(&key) || (to == Selection::Metadata && SIZE_AND_HASH.contains(&key)))
}

/// The category a part falls in whatever else it names: reasoning, where it says so;
/// else text, or for an attachment the class of its media type.
/// The categories a part is classed into by [`class`], which a part's own `category`
/// cannot name as one of its own.
const CLASSES: [&str; 6] = ["reasoning", "text", "images", "audio", "video", "files"];

fn class(part: &Map<String, Value>) -> &'static str {
    if part.get("category").and_then(Value::as_str) == Some("reasoning") {
        return "reasoning";
    }
    if part.get("kind").and_then(Value::as_str) == Some("text") {
        return "text";
    }
    let media_type = part
        .get("mediaType")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let family = media_type.split('/').next().unwrap_or_default();
    match family.to_ascii_lowercase().as_str() {
        "image" => "images",
        "audio" => "audio",
        "video" => "video",
        _ => "files",
    }
}

/// The roles a canonical message may have.
const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

/// What a content slot of an event or effect holds (content-item.schema.json). Each
/// shape is closed: a member the schema does not name is a flaw, so no content can ride
/// in a member the selection does not know to lower, and every part names the selection
/// it was prepared for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holds {
    /// `messages`: canonical messages `{id, role, parts, synthesized?}`.
    Messages,
    /// Canonical messages all of this one role: a user message's at its boundary
    /// (interaction-event.schema.json@2b5da58: `user` inbound, `assistant` outbound).
    MessagesOf(&'static str),
    /// One canonical message: a progress event's model-visible item.
    Message,
    /// `textParts`: a list of text parts.
    TextParts,
    /// `textPart`: one text part.
    TextPart,
    /// The schema's root: one part, text or attachment.
    Part,
    /// A list of messages or parts: the `items` of an event whose schema this project
    /// does not carry, which upstream types either as model-visible messages or as the
    /// schema's root parts. Either shape is closed, so either keeps content where the
    /// selection finds it.
    Items,
}

/// Where a value breaks its content shape: a JSON Pointer below the value, and the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flaw {
    pub at: String,
    pub rule: &'static str,
}

impl Flaw {
    fn new(at: &str, rule: &'static str) -> Flaw {
        Flaw {
            at: at.to_owned(),
            rule,
        }
    }

    /// This flaw seen from the value that holds it at `step` (a member name or index).
    fn under(self, step: impl fmt::Display) -> Flaw {
        let step = crate::json::segment(&step.to_string());
        Flaw {
            at: format!("/{step}{}", self.at),
            rule: self.rule,
        }
    }
}

impl Holds {
    /// Every flaw of `value` in this shape, at most one per part or message: the first,
    /// as the rest of a broken part may only follow from it.
    pub fn flaws(self, value: &Value) -> Vec<Flaw> {
        match self {
            Holds::Messages => each(value, "must be an array of canonical messages", message),
            Holds::MessagesOf(role) => {
                let of_role = |value: &Value| match message(value) {
                    flaws if !flaws.is_empty() => flaws,
                    _ if value["role"] == role => vec![],
                    _ => vec![Flaw::new("/role", ROLE_AT_THE_BOUNDARY)],
                };
                each(value, "must be an array of canonical messages", of_role)
            }
            Holds::Message => message(value),
            Holds::TextParts => each(value, "must be an array of text parts", text_part),
            Holds::TextPart => text_part(value),
            Holds::Part => part(value, &["text", "attachment"]),
            Holds::Items => each(value, "must be an array of messages or parts", item),
        }
    }
}

/// Whether `value` is a list of canonical messages (content-item.schema.json
/// `messages`): what a backend's `inject`, and its `modify` of a message list, must be.
pub fn is_messages(value: &Value) -> bool {
    Holds::Messages.flaws(value).is_empty()
}

/// Whether `value` is a list of text parts (`textParts`): what a `modify` of
/// `instructions` or `summary` must be.
pub fn is_text_parts(value: &Value) -> bool {
    Holds::TextParts.flaws(value).is_empty()
}

/// The rule a message of [`Holds::MessagesOf`] breaks with another role.
const ROLE_AT_THE_BOUNDARY: &str =
    "must be the event's one role (user on user.message.inbound, assistant on outbound)";

/// The flaws of each entry of the list `value`, at its index: no more than an event is
/// refused with ([`MAX_PROBLEMS`](crate::event::MAX_PROBLEMS)), looked for no further. A
/// list of millions of bad entries would otherwise hold a flaw for each, beside the
/// list's own two copies, past the component's memory.
fn each(value: &Value, rule: &'static str, entry: impl Fn(&Value) -> Vec<Flaw>) -> Vec<Flaw> {
    let Some(entries) = value.as_array() else {
        return vec![Flaw::new("", rule)];
    };
    let indexed = entries.iter().enumerate();
    indexed
        .flat_map(|(i, value)| entry(value).into_iter().map(move |f| f.under(i)))
        .take(crate::event::MAX_PROBLEMS)
        .collect()
}

/// An entry of [`Holds::Items`]: a message when it has a role or parts, else a part.
fn item(value: &Value) -> Vec<Flaw> {
    match value.as_object() {
        Some(o) if o.contains_key("role") || o.contains_key("parts") => message(value),
        Some(_) => part(value, &["text", "attachment"]),
        None => vec![Flaw::new("", "must be a message or a part")],
    }
}

fn text_part(value: &Value) -> Vec<Flaw> {
    part(value, &["text"])
}

/// `{id, role, parts, synthesized?}`, nothing else; each part one of the schema's.
fn message(value: &Value) -> Vec<Flaw> {
    let Some(message) = value.as_object() else {
        return vec![Flaw::new("", "must be a message {id, role, parts}")];
    };
    let known = ["id", "role", "parts", "synthesized"];
    let first = unknown(message, &known, "is not a member of a message")
        .or_else(|| required_text(message, "id"))
        .or_else(|| match message.get("role").map(Value::as_str) {
            None => Some(Flaw::new("/role", "is required")),
            Some(Some(role)) if ROLES.contains(&role) => None,
            Some(_) => Some(Flaw::new(
                "/role",
                "must be system, developer, user, assistant or tool",
            )),
        })
        .or_else(|| boolean(message, "synthesized"));
    if let Some(flaw) = first {
        return vec![flaw];
    }
    let parts = message.get("parts").unwrap_or(&Value::Null);
    let rule = "must be an array of parts";
    let flaws = each(parts, rule, |p| part(p, &["text", "attachment"]));
    flaws.into_iter().map(|f| f.under("parts")).collect()
}

/// One of the schema's eight part shapes, of one of `kinds`: a text or attachment part
/// whose `selection` decides what it carries — a body part its `text` (text) or `body`
/// reference with an optional size and hash (attachment), or a `gap` saying why not; a
/// metadata or omitted part neither, only an optional size and hash.
fn part(value: &Value, kinds: &[&str]) -> Vec<Flaw> {
    part_flaw(value, kinds).into_iter().collect()
}

fn part_flaw(value: &Value, kinds: &[&str]) -> Option<Flaw> {
    let Some(part) = value.as_object() else {
        return Some(Flaw::new("", "must be a part object"));
    };
    object_part_flaw(part, kinds)
}

/// [`part_flaw`] of an object.
fn object_part_flaw(part: &Map<String, Value>, kinds: &[&str]) -> Option<Flaw> {
    let kind = part.get("kind").and_then(Value::as_str);
    let Some(kind) = kind.filter(|kind| kinds.contains(kind)) else {
        return Some(Flaw::new(
            "/kind",
            match kinds {
                ["text"] => "must be \"text\"",
                _ => "must be \"text\" or \"attachment\"",
            },
        ));
    };
    let selection = part.get("selection");
    let Some(selection) = selection.and_then(Value::as_str).and_then(Selection::parse) else {
        let rule = match selection {
            None => "is required",
            Some(_) => "must be body, metadata or omit",
        };
        return Some(Flaw::new("/selection", rule));
    };
    let carried: &[&str] = match (selection, kind) {
        (Selection::Body, _) if part.contains_key("gap") => &["gap", "size", "sha256"],
        (Selection::Body, "text") => &["text"],
        (Selection::Body, _) => &["body", "size", "sha256"],
        _ => &["size", "sha256"],
    };
    let named = |key: &str| NAMING.contains(&key) || carried.contains(&key);
    if let Some(key) = part.keys().find(|key| !named(key)) {
        let key = key.as_str();
        let rule = match BODY.contains(&key) || SIZE_AND_HASH.contains(&key) {
            true => "is not allowed with this part's selection",
            false => "is not a member of a part",
        };
        return Some(Flaw::new("", rule).under(key));
    }
    required_text(part, "id")
        .or_else(|| media_type_flaw(part, kind))
        .or_else(|| optional_text(part, "category"))
        .or_else(|| boolean(part, "synthesized"))
        .or_else(|| {
            let size = part.get("size");
            // `4.0` is a size: JSON Schema's integer is any number with a zero fraction.
            let bad = size.is_some_and(|size| json::integer_value::<u64>(size).is_none());
            bad.then(|| Flaw::new("/size", "must be a non-negative integer"))
        })
        .or_else(|| {
            let bad = part.get("sha256").is_some_and(|hash| !is_sha256(hash));
            bad.then(|| Flaw::new("/sha256", "must be 64 lowercase hexadecimal digits"))
        })
        .or_else(|| match carried {
            ["text"] => match part.get("text") {
                Some(Value::String(_)) => None,
                Some(_) => Some(Flaw::new("/text", "must be a string")),
                None => Some(Flaw::new("/text", "is required with selection \"body\"")),
            },
            ["body", ..] => (!part.get("body").is_some_and(is_reference))
                .then(|| Flaw::new("/body", "must be {ref} with a non-empty ref")),
            ["gap", ..] => (!part.get("gap").is_some_and(is_gap))
                .then(|| Flaw::new("/gap", "must be {reason, path?}, each non-empty")),
            _ => None,
        })
}

/// A text part's media type is `text/plain`; an attachment's neither text nor JSON
/// (those go inline as text).
fn media_type_flaw(part: &Map<String, Value>, kind: &str) -> Option<Flaw> {
    let Some(media_type) = part.get("mediaType") else {
        return Some(Flaw::new("/mediaType", "is required"));
    };
    let media_type = media_type.as_str().unwrap_or_default();
    match kind {
        "text" if media_type != "text/plain" => Some(Flaw::new(
            "/mediaType",
            "must be \"text/plain\" for a text part",
        )),
        "attachment" if !is_attachment_media_type(media_type) => Some(Flaw::new(
            "/mediaType",
            "must be a media type neither text nor JSON for an attachment",
        )),
        _ => None,
    }
}

/// The first member of `object` not among `known`.
fn unknown(object: &Map<String, Value>, known: &[&str], rule: &'static str) -> Option<Flaw> {
    let key = object.keys().find(|key| !known.contains(&key.as_str()))?;
    Some(Flaw::new("", rule).under(key))
}

fn required_text(object: &Map<String, Value>, key: &'static str) -> Option<Flaw> {
    match object.get(key) {
        None => Some(Flaw::new("", "is required").under(key)),
        value => optional_text_value(value, key),
    }
}

fn optional_text(object: &Map<String, Value>, key: &'static str) -> Option<Flaw> {
    optional_text_value(object.get(key), key)
}

fn optional_text_value(value: Option<&Value>, key: &'static str) -> Option<Flaw> {
    let bad = value.is_some_and(|v| !non_empty(Some(v)));
    bad.then(|| Flaw::new("", "must be a non-empty string").under(key))
}

fn boolean(object: &Map<String, Value>, key: &'static str) -> Option<Flaw> {
    let bad = object.get(key).is_some_and(|v| !v.is_boolean());
    bad.then(|| Flaw::new("", "must be true or false").under(key))
}

/// An attachment's media type: never text, never JSON (those go inline as text).
fn is_attachment_media_type(media_type: &str) -> bool {
    let lower = media_type.to_ascii_lowercase();
    let essence = lower.split(';').next().unwrap_or_default().trim();
    let subtype = essence.split_once('/').map_or("", |(_, subtype)| subtype);
    !media_type.is_empty()
        && !lower.starts_with("text/")
        && subtype != "json"
        && !subtype.ends_with("+json")
}

/// `{ref}`: a receiver-allocated reference, nothing else.
fn is_reference(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|r| r.len() == 1 && non_empty(r.get("ref")))
}

/// `{reason, path?}`, each non-empty.
fn is_gap(value: &Value) -> bool {
    value.as_object().is_some_and(|gap| {
        gap.keys().all(|key| key == "reason" || key == "path")
            && non_empty(gap.get("reason"))
            && gap.get("path").is_none_or(|p| non_empty(Some(p)))
    })
}

fn is_sha256(value: &Value) -> bool {
    value.as_str().is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn non_empty(value: Option<&Value>) -> bool {
    value
        .and_then(Value::as_str)
        .is_some_and(|text| !text.is_empty())
}

/// The least selection a part claims anywhere in `values`, `None` without parts: what a
/// modification brings into an event. Looked for everywhere, where a projection lowers
/// nothing too (a tool's input, `native`): a lower claim than the event's only costs a
/// projection that changes nothing.
pub fn least_claimed_in<'v>(values: impl IntoIterator<Item = &'v Value>) -> Option<Selection> {
    fn within(value: &Value) -> Option<Selection> {
        match value {
            Value::Object(object) if is_part(|key| object.get(key).and_then(Value::as_str)) => {
                let own = claimed(|key| object.get(key).and_then(Value::as_str));
                Some(object.values().filter_map(within).fold(own, Selection::min))
            }
            Value::Object(object) => object.values().filter_map(within).min(),
            Value::Array(items) => items.iter().filter_map(within).min(),
            _ => None,
        }
    }
    values.into_iter().filter_map(within).min()
}

/// The least selection a part of the checked event claims, `None` when it holds no part:
/// read once, from the tree the checks read, so that an event without parts is never
/// projected, nor, for a subscription that allows body, one whose parts all claim body
/// (only a part that claims less can change then: it never rises to the subscription's).
/// Searched as [`Content::project`] searches.
pub fn least_claimed(event: &Object) -> Option<Selection> {
    let place = Place::of_event(event.get("type").and_then(Node::as_str));
    let found = event
        .members()
        .filter_map(|(key, node)| least_in_member(key, node, place));
    found.min()
}

fn least_in_member(key: &str, node: &Node, place: Place) -> Option<Selection> {
    match (key, node) {
        ("native", _) => None,
        ("tool", Node::Object(tool)) if place.tool => least_in_all_but(tool, "input"),
        ("error", Node::Object(error)) => least_in_all_but(error, "native"),
        ("calls", Node::Array(calls)) if place.calls => {
            let least_in_call = |call: &Node| match call {
                Node::Object(call) => call
                    .members()
                    .filter_map(|(key, node)| least_in_member(key, node, Place::CALL))
                    .min(),
                call => least_within(call),
            };
            calls.iter().filter_map(least_in_call).min()
        }
        (_, node) => least_within(node),
    }
}

fn least_in_all_but(object: &Object, skipped: &str) -> Option<Selection> {
    let members = object.members().filter(|(key, _)| *key != skipped);
    members.filter_map(|(_, node)| least_within(node)).min()
}

fn least_within(node: &Node) -> Option<Selection> {
    match node {
        Node::Object(object) => {
            let text = |key: &str| object.get(key).and_then(Node::as_str);
            // A part's own members are searched too: it may hold a part that claims less.
            let own = is_part(text).then(|| claimed(text));
            let within = object.members().filter_map(|(_, n)| least_within(n));
            within.chain(own).min()
        }
        Node::Array(items) => items.iter().filter_map(least_within).min(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn content(default: Selection, categories: &[(&str, Selection)]) -> Content {
        Content {
            default,
            categories: categories
                .iter()
                .map(|(n, s)| (n.to_string(), *s))
                .collect(),
        }
    }

    fn text_part(id: &str, selection: &str) -> Value {
        json!({"id": id, "kind": "text", "mediaType": "text/plain", "selection": selection,
               "text": "secret words", "size": 12})
    }

    fn document(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    fn holds(value: &Value) -> bool {
        let text = value.to_string();
        match crate::json::read(&text).unwrap() {
            Node::Object(object) => least_claimed(&object).is_some(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn metadata_drops_the_text_and_keeps_the_description() {
        let event = document(json!({"id": "e", "items": [
            {"id": "m1", "role": "user", "parts": [text_part("p1", "body")]}]}));
        let projected = content(Selection::Metadata, &[]).project(&event).unwrap();
        assert_eq!(
            projected["items"][0]["parts"][0],
            json!({"id": "p1", "kind": "text", "mediaType": "text/plain",
                   "selection": "metadata", "size": 12})
        );
        assert_eq!(projected["items"][0]["role"], "user");
    }

    #[test]
    fn omit_keeps_only_what_names_the_part() {
        let event = document(json!({"summary": [text_part("p1", "body")]}));
        let projected = content(Selection::Omit, &[]).project(&event).unwrap();
        assert_eq!(
            projected["summary"][0],
            json!({"id": "p1", "kind": "text", "mediaType": "text/plain", "selection": "omit"})
        );
    }

    #[test]
    fn a_part_never_rises_and_body_changes_nothing() {
        let clean = document(json!({"items": [{"id": "p", "kind": "text",
            "mediaType": "text/plain", "selection": "metadata"}]}));
        let body = content(Selection::Body, &[]);
        assert!(body.is_all_body());
        assert!(!content(Selection::Body, &[("images", Selection::Omit)]).is_all_body());
        assert_eq!(body.project(&clean), None);
        assert_eq!(content(Selection::Metadata, &[]).project(&clean), None);
        // A metadata part that carries its text anyway loses it, even where body is allowed.
        let leaky = document(json!({"items": [text_part("p", "metadata")]}));
        let projected = body.project(&leaky).unwrap();
        assert_eq!(projected["items"][0]["selection"], "metadata");
        assert!(projected["items"][0].get("text").is_none());
        assert_eq!(projected["items"][0]["size"], 12);
    }

    #[test]
    fn the_category_is_listed_or_taken_from_kind_and_media_type() {
        let parts = json!([
            {"id": "t", "kind": "text", "mediaType": "text/plain", "selection": "body", "text": "a"},
            {"id": "r", "kind": "text", "mediaType": "text/plain", "selection": "body",
             "category": "reasoning", "text": "b"},
            {"id": "i", "kind": "attachment", "mediaType": "image/png", "selection": "body",
             "body": {"ref": "r1"}},
            {"id": "f", "kind": "attachment", "mediaType": "application/pdf", "selection": "body",
             "body": {"ref": "r2"}},
            {"id": "u", "kind": "text", "mediaType": "text/plain", "selection": "body",
             "category": "tool_result", "text": "c"}
        ]);
        let event = document(json!({"items": [{"id": "m", "role": "assistant", "parts": parts}]}));
        let selection = content(
            Selection::Omit,
            &[
                ("text", Selection::Body),
                ("reasoning", Selection::Metadata),
                ("images", Selection::Body),
            ],
        );
        let projected = selection.project(&event).unwrap();
        let selections: Vec<&str> = projected["items"][0]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["selection"].as_str().unwrap())
            .collect();
        // `tool_result`, not listed, gets the lesser of the default and text's: omit.
        assert_eq!(selections, ["body", "metadata", "body", "omit", "omit"]);
        assert_eq!(projected["items"][0]["parts"][0]["text"], "a");
        assert_eq!(projected["items"][0]["parts"][2]["body"]["ref"], "r1");
        assert!(projected["items"][0]["parts"][1].get("text").is_none());
    }

    /// A category a part names governs it only where the selection lists that category:
    /// otherwise the part gets the lesser of the default and its class's selection, so a
    /// label is never a way past either; a label naming a class is no category of its own.
    #[test]
    fn a_named_category_not_listed_is_no_way_past_the_default_or_the_class() {
        let labelled = json!({"items": [
            {"id": "t", "kind": "text", "mediaType": "text/plain", "selection": "body",
             "category": "tool_result", "text": "SECRET"},
            {"id": "i", "kind": "attachment", "mediaType": "image/png", "selection": "body",
             "category": "tool_result", "body": {"ref": "SECRET"}}]});
        let selections = |selection: Content| {
            let projected = selection.project(&document(labelled.clone()));
            let items = projected.map_or(labelled["items"].clone(), |p| p["items"].clone());
            let parts = items.as_array().unwrap().clone();
            parts
                .into_iter()
                .map(|p| p["selection"].clone())
                .collect::<Vec<_>>()
        };
        // Text and images omitted, the rest as body: a label is no way out.
        let omitted = content(
            Selection::Body,
            &[("text", Selection::Omit), ("images", Selection::Omit)],
        );
        let projected = omitted.project(&document(labelled.clone())).unwrap();
        assert!(!Value::Object(projected).to_string().contains("SECRET"));
        assert_eq!(selections(omitted), ["omit", "omit"]);
        // Text shown, the rest omitted: unlisted, the label takes the lesser, omit.
        let text = content(Selection::Omit, &[("text", Selection::Body)]);
        assert_eq!(selections(text), ["omit", "omit"]);
        // Text as metadata, the rest as body: the lesser is metadata, the image body.
        let described = content(Selection::Body, &[("text", Selection::Metadata)]);
        assert_eq!(selections(described), ["metadata", "body"]);
        // A label naming another class is no category of its own: text stays text.
        let as_images = json!({"items": [{"id": "t", "kind": "text", "mediaType": "text/plain",
            "selection": "body", "category": "images", "text": "SECRET"}]});
        let shown_images = content(
            Selection::Body,
            &[("text", Selection::Omit), ("images", Selection::Body)],
        );
        let projected = shown_images.project(&document(as_images)).unwrap();
        assert!(!Value::Object(projected).to_string().contains("SECRET"));
        // Where the selection lists the label, the label decides.
        let listed = content(
            Selection::Omit,
            &[
                ("tool_result", Selection::Metadata),
                ("images", Selection::Body),
            ],
        );
        assert_eq!(selections(listed), ["metadata", "metadata"]);
        // Reasoning is its own category, never text's, and unlisted takes the default.
        let reasoning = document(json!({"items": [{"id": "r", "kind": "text",
            "mediaType": "text/plain", "selection": "body", "category": "reasoning",
            "text": "SECRET"}]}));
        let text_only = content(Selection::Omit, &[("text", Selection::Body)]);
        let projected = text_only.project(&reasoning).unwrap();
        assert_eq!(projected["items"][0]["selection"], "omit");
    }

    #[test]
    fn native_and_the_tool_input_are_not_searched() {
        let event = json!({"type": "tool.before",
                           "tool": {"name": "x", "input": {"p": text_part("p1", "body")}},
                           "native": {"p": text_part("p2", "body")}});
        assert!(!holds(&event));
        assert_eq!(
            content(Selection::Omit, &[]).project(&document(event)),
            None
        );
        let with_output = json!({"type": "tool.after",
                                 "tool": {"name": "x", "input": {}},
                                 "items": [{"id": "m", "role": "tool",
                                            "parts": [text_part("p3", "body")]}]});
        assert!(holds(&with_output));
        let projected = content(Selection::Omit, &[])
            .project(&document(with_output))
            .unwrap();
        assert_eq!(projected["items"][0]["parts"][0]["selection"], "omit");
        // A batch's calls each have a tool, whatever its own kind.
        let call = json!({"tool": {"name": "x", "kind": "text",
                                   "input": {"p": text_part("p4", "body")}}});
        let batch = json!({"type": "tool.batch.after", "calls": [call]});
        assert!(!holds(&batch));
        assert_eq!(
            content(Selection::Omit, &[]).project(&document(batch)),
            None
        );
        // Elsewhere, `calls` is a member like any other.
        assert!(holds(&json!({"type": "tool.before", "calls": [call]})));
        // A tool error's provider payload goes as it came where the registration includes
        // it, a part-shaped object in it too; the rest of the error is searched.
        let failed = json!({"type": "tool.after", "tool": {"name": "x", "input": {}},
                            "error": {"message": "m", "native": {"p": text_part("p5", "omit")},
                                      "detail": text_part("p6", "body")}});
        assert!(holds(&failed));
        let projected = content(Selection::Metadata, &[])
            .project(&document(failed.clone()))
            .unwrap();
        assert_eq!(projected["error"]["native"], failed["error"]["native"]);
        assert_eq!(projected["error"]["detail"]["selection"], "metadata");
        let native_only = json!({"type": "tool.after", "tool": {"name": "x", "input": {}},
                                 "error": {"message": "m", "native": {"p": text_part("p5", "omit")}}});
        assert!(!holds(&native_only));
        assert_eq!(
            content(Selection::Body, &[]).project(&document(native_only)),
            None
        );
    }

    /// Only a tool event's `tool` is the tool being called: on another type a member so
    /// named (the event leaves its members open) is searched as any other, its `input`
    /// too, so a part the harness withheld there is lowered like one anywhere else.
    #[test]
    fn a_tool_member_of_another_event_is_searched_as_any_other() {
        let tool = json!({"input": {"x": text_part("p9", "omit")}});
        for event_type in ["model.request.before", "turn.start"] {
            let event = json!({"type": event_type, "tool": tool});
            assert!(holds(&event), "{event_type}");
            for view in [
                content(Selection::Body, &[]),
                content(Selection::Metadata, &[]),
            ] {
                let projected = view.project(&document(event.clone())).unwrap();
                let lowered = &projected["tool"]["input"]["x"];
                assert_eq!(lowered["selection"], "omit", "{event_type}");
                assert!(lowered.get("text").is_none(), "{event_type}");
            }
        }
    }

    /// An object whose kind is a part's is lowered wherever no check reached it (here
    /// members the envelope does not know), though it lacks a member every part has:
    /// the part a harness forgot to select is the one that must not reach every backend.
    #[test]
    fn an_object_of_a_part_kind_is_lowered_whatever_it_lacks() {
        for missing in ["id", "mediaType", "selection"] {
            let mut part = text_part("p", "body");
            part.as_object_mut().unwrap().remove(missing);
            let event = json!({"transcript": [part]});
            assert!(holds(&event), "{missing}");
            let projected = content(Selection::Omit, &[])
                .project(&document(event))
                .unwrap();
            let lowered = &projected["transcript"][0];
            assert_eq!(lowered["selection"], "omit", "{missing}");
            assert!(lowered.get("text").is_none(), "{missing}");
            assert!(lowered.get("size").is_none(), "{missing}");
        }
        let attachment = json!({"kind": "attachment", "body": {"ref": "r1"}});
        let event = document(json!({"extensions": {"com.example.files": [attachment]}}));
        let projected = content(Selection::Metadata, &[]).project(&event).unwrap();
        assert_eq!(
            projected["extensions"]["com.example.files"][0],
            json!({"kind": "attachment", "selection": "metadata"})
        );
        // Without a part's kind an object is no part; its members are searched.
        let mut unkinded = text_part("p", "body");
        unkinded.as_object_mut().unwrap().remove("kind");
        let event = json!({"transcript": [unkinded]});
        assert!(!holds(&event));
        assert_eq!(
            content(Selection::Omit, &[]).project(&document(event)),
            None
        );
        assert!(holds(
            &json!({"deep": [{"nested": text_part("p", "body")}]})
        ));
    }

    fn part(members: Value) -> Value {
        let mut part = json!({"id": "p", "kind": "text", "mediaType": "text/plain"});
        part.as_object_mut()
            .unwrap()
            .extend(members.as_object().cloned().unwrap());
        part
    }

    fn message(parts: Value) -> Value {
        json!([{"id": "m", "role": "assistant", "parts": parts}])
    }

    #[test]
    fn messages_and_parts_take_the_schemas_shapes() {
        let hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let image = |members: Value| {
            let mut p = json!({"id": "p", "kind": "attachment", "mediaType": "image/png"});
            p.as_object_mut()
                .unwrap()
                .extend(members.as_object().cloned().unwrap());
            p
        };
        let valid = [
            part(json!({"selection": "body", "text": "x", "category": "reasoning"})),
            part(
                json!({"selection": "body", "gap": {"reason": "too large", "path": "/x"},
                        "size": 9, "sha256": hash}),
            ),
            part(json!({"selection": "metadata", "size": 1, "sha256": hash, "synthesized": true})),
            part(json!({"selection": "omit"})),
            image(json!({"selection": "body", "body": {"ref": "r1"}})),
            image(json!({"selection": "body", "body": {"ref": "r1"}, "size": 4, "sha256": hash})),
            image(json!({"selection": "body", "gap": {"reason": "not uploaded"}})),
            image(json!({"selection": "metadata", "size": 4})),
            image(json!({"selection": "omit", "sha256": hash})),
            image(json!({"selection": "metadata", "size": 4.0})),
        ];
        for p in &valid {
            assert!(is_messages(&message(json!([p]))), "{p}");
        }
        assert!(is_text_parts(&json!(valid[..4])));
        assert!(
            !is_text_parts(&json!([valid[4]])),
            "an attachment is no text part"
        );
        let invalid = [
            part(json!({"selection": "metadata", "text": "leak"})),
            part(json!({"selection": "omit", "text": "leak"})),
            part(json!({"selection": "body", "gap": {"reason": "r"}, "text": "leak"})),
            part(json!({"selection": "metadata", "body": {"ref": "r"}})),
            part(json!({"selection": "body", "text": "x", "size": 1})),
            part(json!({"selection": "body", "text": "x", "role": "user"})),
            part(json!({"selection": "body", "text": 7})),
            part(json!({"selection": "body"})),
            part(json!({"selection": "full", "text": "x"})),
            part(json!({"selection": "metadata", "sha256": format!("{hash}\n")})),
            part(json!({"selection": "metadata", "sha256": hash.to_uppercase()})),
            part(json!({"selection": "metadata", "size": -1})),
            part(json!({"selection": "metadata", "synthesized": "true"})),
            part(json!({"selection": "body", "gap": {"reason": ""}})),
            part(json!({"selection": "body", "text": "x", "mediaType": "text/markdown"})),
            image(json!({"selection": "body", "body": {"ref": "r", "size": 1}})),
            image(json!({"selection": "body", "body": {"ref": ""}})),
            image(json!({"selection": "omit", "mediaType": "application/json"})),
            image(json!({"selection": "omit", "mediaType": "application/ld+json; charset=utf-8"})),
            image(json!({"selection": "omit", "mediaType": "Text/plain"})),
            image(json!({"selection": "metadata", "size": 4.5})),
        ];
        for p in &invalid {
            assert!(!is_messages(&message(json!([p]))), "{p}");
        }
        let p = &valid[0];
        for bad in [
            json!([p]),
            json!([{"id": "m", "role": "robot", "parts": [p]}]),
            json!([{"id": "", "role": "user", "parts": [p]}]),
            json!([{"id": "m", "role": "user"}]),
            json!([{"id": "m", "role": "user", "parts": [p], "parent": "x"}]),
            json!({"id": "m", "role": "user", "parts": [p]}),
        ] {
            assert!(!is_messages(&bad), "{bad}");
        }
    }

    /// A part no check reached (here in an extension) keeps, once lowered, only the
    /// members that name it: an unnamed member holding content goes with the body.
    #[test]
    fn a_lowered_part_keeps_only_what_names_it() {
        let mut leaky = text_part("p", "body");
        leaky["preview"] = json!("secret words");
        leaky["sha256"] = json!("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
        let event = document(json!({"com.example.notes": [leaky]}));
        let metadata = content(Selection::Metadata, &[]).project(&event).unwrap();
        assert_eq!(
            metadata["com.example.notes"][0],
            json!({"id": "p", "kind": "text", "mediaType": "text/plain", "selection": "metadata",
                   "size": 12,
                   "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"})
        );
        let omitted = content(Selection::Omit, &[]).project(&event).unwrap();
        assert_eq!(
            omitted["com.example.notes"][0],
            json!({"id": "p", "kind": "text", "mediaType": "text/plain", "selection": "omit"})
        );
    }

    /// A lowered part keeps a member that names it only of the schema's type: one of
    /// another (an object under `id` or `category`) could carry anything.
    #[test]
    fn a_lowered_part_keeps_its_names_only_as_the_schema_types_them() {
        let leaky = json!({"kind": "text", "category": {"note": "SECRET"},
                           "id": {"x": "SECRET"}, "mediaType": ["SECRET"],
                           "synthesized": "SECRET", "size": {"SECRET": 1},
                           "sha256": {"SECRET": 1}, "text": "SECRET"});
        let event = document(json!({"extensions": {"com.example.notes": [leaky]}}));
        for selection in [Selection::Omit, Selection::Metadata] {
            let projected = content(selection, &[]).project(&event).unwrap();
            let sent = Value::Object(projected.clone()).to_string();
            assert!(!sent.contains("SECRET"), "{sent}");
            assert_eq!(
                projected["extensions"]["com.example.notes"][0],
                json!({"kind": "text", "selection": selection.as_str()})
            );
        }
    }

    fn flaws(holds: Holds, value: Value) -> Vec<(String, &'static str)> {
        holds
            .flaws(&value)
            .into_iter()
            .map(|f| (f.at, f.rule))
            .collect()
    }

    /// Each flaw is named at its own pointer below the slot, one per broken part or
    /// message, every broken one named.
    #[test]
    fn a_flaw_is_named_at_its_pointer() {
        let ok = part(json!({"selection": "omit"}));
        let no_selection = part(json!({"text": "x"}));
        let extra = part(json!({"selection": "omit", "a/b~c": 1}));
        assert_eq!(
            flaws(
                Holds::Messages,
                json!([{"id": "m", "role": "user", "parts": [ok, no_selection, extra]},
                       {"id": "m2", "role": "robot", "parts": [no_selection]},
                       "m3"])
            ),
            [
                ("/0/parts/1/selection".to_owned(), "is required"),
                ("/0/parts/2/a~1b~0c".to_owned(), "is not a member of a part"),
                (
                    "/1/role".to_owned(),
                    "must be system, developer, user, assistant or tool"
                ),
                ("/2".to_owned(), "must be a message {id, role, parts}"),
            ]
        );
        assert_eq!(
            flaws(Holds::Messages, json!({})),
            [(String::new(), "must be an array of canonical messages")]
        );
        // Items are messages or parts: a role or parts makes a message.
        assert_eq!(
            flaws(
                Holds::Items,
                json!([ok, {"id": "m", "role": "user", "parts": [no_selection]},
                       {"id": "m", "parts": []}])
            ),
            [
                ("/1/parts/0/selection".to_owned(), "is required"),
                ("/2/role".to_owned(), "is required"),
            ]
        );
        let image = json!({"id": "i", "kind": "attachment", "mediaType": "image/png",
                           "selection": "omit"});
        assert_eq!(flaws(Holds::Part, image.clone()), []);
        assert_eq!(
            flaws(Holds::TextPart, image),
            [("/kind".to_owned(), "must be \"text\"")]
        );
        assert_eq!(
            flaws(Holds::TextPart, part(json!({"selection": "body"}))),
            [("/text".to_owned(), "is required with selection \"body\"")]
        );
        assert_eq!(
            flaws(
                Holds::Part,
                part(json!({"selection": "body", "text": "x", "mediaType": 7}))
            ),
            [(
                "/mediaType".to_owned(),
                "must be \"text/plain\" for a text part"
            )]
        );
    }

    #[test]
    fn the_upstream_messages_are_messages() {
        let inject: Value = serde_json::from_str(fixture!("http/flow-inject.valid.json")).unwrap();
        assert!(is_messages(&inject["result"]["effects"][1]["value"]));
        let identities: Value =
            serde_json::from_str(fixture!("http/synthesized-identities.valid.json")).unwrap();
        assert!(is_messages(&identities["params"]["event"]["items"]));
        let strings: Value =
            serde_json::from_str(fixture!("http/synthesized-items-string.invalid.json")).unwrap();
        assert!(!is_messages(&strings["params"]["event"]["items"]));
    }
}
