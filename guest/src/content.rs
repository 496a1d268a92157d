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
//! A part is an object with a string `id` and `mediaType`, a `kind` of `text` or
//! `attachment` and a string `selection` (content-item.schema.json). It may sit in any
//! content slot (`items`, `message.messages`, `instructions`, a single part, an effect's
//! value), so every member of the event is searched, except two the selection does not
//! govern: `native`, which goes only where the registration includes it, and the tool's
//! `input`, the arguments the policy decides on.

use crate::json::{Node, Object};
use serde_json::{Map, Value};

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Content {
    pub default: Selection,
    pub categories: Vec<(String, Selection)>,
}

/// The members a part loses at each selection below `body`.
const WITHOUT_BODY: [&str; 3] = ["text", "body", "gap"];
const WITHOUT_DESCRIPTION: [&str; 2] = ["size", "sha256"];

impl Content {
    /// `selection` for every category.
    pub fn all(selection: Selection) -> Content {
        Content {
            default: selection,
            categories: Vec::new(),
        }
    }

    /// Every part as the harness sent it: nothing to lower.
    pub fn is_all_body(&self) -> bool {
        self.default == Selection::Body
            && self.categories.iter().all(|(_, s)| *s == Selection::Body)
    }

    /// `document` with every part lowered to this selection; `None` when no part changes.
    pub fn project(&self, document: &Map<String, Value>) -> Option<Map<String, Value>> {
        let mut projected = document.clone();
        let mut changed = false;
        for (key, value) in projected.iter_mut() {
            match (key.as_str(), value) {
                ("native", _) => {}
                ("tool", Value::Object(tool)) => {
                    for (_, value) in tool.iter_mut().filter(|(key, _)| *key != "input") {
                        changed |= self.lower_within(value);
                    }
                }
                (_, value) => changed |= self.lower_within(value),
            }
        }
        changed.then_some(projected)
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

    /// Lowers one part to the smaller of its own selection and this one for its category.
    fn lower(&self, part: &mut Map<String, Value>) -> bool {
        let own = part
            .get("selection")
            .and_then(Value::as_str)
            .and_then(Selection::parse)
            // A word the schema does not know claims nothing: it is lowered like a body.
            .unwrap_or(Selection::Body);
        let allowed = self.for_category(&category(part));
        let to = own.min(allowed);
        if to == Selection::Body {
            return false;
        }
        let mut removed: Vec<&str> = WITHOUT_BODY.to_vec();
        if to == Selection::Omit {
            removed.extend(WITHOUT_DESCRIPTION);
        }
        let mut changed = removed
            .iter()
            .fold(false, |changed, key| part.remove(*key).is_some() | changed);
        if part.get("selection").and_then(Value::as_str) != Some(to.as_str()) {
            part.insert("selection".into(), Value::from(to.as_str()));
            changed = true;
        }
        changed
    }

    fn for_category(&self, category: &str) -> Selection {
        self.categories
            .iter()
            .find(|(name, _)| name == category)
            .map_or(self.default, |(_, s)| *s)
    }
}

/// Whether an object is a content part, given its string members by name: `kind` is read
/// first, which rules out almost every other object at once.
fn is_part<'a>(text: impl Fn(&str) -> Option<&'a str>) -> bool {
    matches!(text("kind"), Some("text" | "attachment"))
        && ["id", "mediaType", "selection"]
            .iter()
            .all(|key| text(key).is_some())
}

/// A part's category: its own `category`, else text, or by media type for an attachment.
fn category(part: &Map<String, Value>) -> String {
    if let Some(named) = part.get("category").and_then(Value::as_str) {
        return named.to_owned();
    }
    if part.get("kind").and_then(Value::as_str) == Some("text") {
        return "text".into();
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
    .into()
}

/// The roles a canonical message may have.
const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

/// Whether `value` is a list of canonical messages (content-item.schema.json
/// `messages`): what a backend's `inject`, and its `modify` of a message list, must be.
pub fn is_messages(value: &Value) -> bool {
    value
        .as_array()
        .is_some_and(|items| items.iter().all(is_message))
}

/// Whether `value` is a list of text parts (`textParts`): what a `modify` of
/// `instructions` or `summary` must be.
pub fn is_text_parts(value: &Value) -> bool {
    value.as_array().is_some_and(|parts| {
        parts
            .iter()
            .all(|part| is_valid_part(part) && part["kind"] == "text")
    })
}

/// `{id, role, parts, synthesized?}`, nothing else.
fn is_message(value: &Value) -> bool {
    let Some(message) = value.as_object() else {
        return false;
    };
    message
        .keys()
        .all(|key| ["id", "role", "parts", "synthesized"].contains(&key.as_str()))
        && non_empty(message.get("id"))
        && message
            .get("role")
            .and_then(Value::as_str)
            .is_some_and(|role| ROLES.contains(&role))
        && message
            .get("parts")
            .and_then(Value::as_array)
            .is_some_and(|parts| parts.iter().all(is_valid_part))
        && message.get("synthesized").is_none_or(Value::is_boolean)
}

/// One of the schema's eight part shapes: a text or attachment part whose `selection`
/// decides what it carries — a body part its `text` (text) or `body` reference
/// (attachment), or a `gap` saying why not; a metadata or omitted part neither, only
/// an optional size and hash.
fn is_valid_part(value: &Value) -> bool {
    let Some(part) = value.as_object() else {
        return false;
    };
    let kind = part.get("kind").and_then(Value::as_str);
    let media_type = part.get("mediaType").and_then(Value::as_str);
    let typed = match (kind, media_type) {
        (Some("text"), Some(media_type)) => media_type == "text/plain",
        (Some("attachment"), Some(media_type)) => is_attachment_media_type(media_type),
        _ => false,
    };
    let selection = part
        .get("selection")
        .and_then(Value::as_str)
        .and_then(Selection::parse);
    let carried: &[&str] = match (selection, kind) {
        (Some(Selection::Body), _) if part.contains_key("gap") => &["gap", "size", "sha256"],
        (Some(Selection::Body), Some("text")) => &["text"],
        (Some(Selection::Body), _) => &["body"],
        (Some(_), _) => &["size", "sha256"],
        (None, _) => return false,
    };
    let known = [
        "id",
        "kind",
        "mediaType",
        "selection",
        "category",
        "synthesized",
    ];
    typed
        && part
            .keys()
            .all(|key| known.contains(&key.as_str()) || carried.contains(&key.as_str()))
        && non_empty(part.get("id"))
        && part.get("category").is_none_or(|c| non_empty(Some(c)))
        && part.get("synthesized").is_none_or(Value::is_boolean)
        && part.get("size").is_none_or(Value::is_u64)
        && part.get("sha256").is_none_or(is_sha256)
        && match carried {
            ["text"] => part.get("text").is_some_and(Value::is_string),
            ["body"] => part.get("body").is_some_and(is_reference),
            ["gap", ..] => part.get("gap").is_some_and(is_gap),
            _ => true,
        }
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

/// Whether the checked event holds any part a selection could lower: read once, from the
/// tree the checks read, so that an event without parts is never projected.
pub fn holds_parts(event: &Object) -> bool {
    event.members().any(|(key, node)| match (key, node) {
        ("native", _) => false,
        ("tool", Node::Object(tool)) => tool
            .members()
            .any(|(key, node)| key != "input" && node_holds_parts(node)),
        (_, node) => node_holds_parts(node),
    })
}

fn node_holds_parts(node: &Node) -> bool {
    match node {
        Node::Object(object) => {
            is_part(|key| object.get(key).and_then(Node::as_str))
                || object.members().any(|(_, node)| node_holds_parts(node))
        }
        Node::Array(items) => items.iter().any(node_holds_parts),
        _ => false,
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
            Node::Object(object) => holds_parts(&object),
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
    fn the_category_is_named_or_taken_from_kind_and_media_type() {
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
        // The unknown category `tool_result` takes the default.
        assert_eq!(selections, ["body", "metadata", "body", "omit", "omit"]);
        assert_eq!(projected["items"][0]["parts"][0]["text"], "a");
        assert_eq!(projected["items"][0]["parts"][2]["body"]["ref"], "r1");
        assert!(projected["items"][0]["parts"][1].get("text").is_none());
    }

    #[test]
    fn native_and_the_tool_input_are_not_searched() {
        let event = json!({"tool": {"name": "x", "input": {"p": text_part("p1", "body")}},
                           "native": {"p": text_part("p2", "body")}});
        assert!(!holds(&event));
        assert_eq!(
            content(Selection::Omit, &[]).project(&document(event)),
            None
        );
        let with_output = json!({"tool": {"name": "x", "output": [text_part("p3", "body")]}});
        assert!(holds(&with_output));
        let projected = content(Selection::Omit, &[])
            .project(&document(with_output))
            .unwrap();
        assert_eq!(projected["tool"]["output"][0]["selection"], "omit");
    }

    #[test]
    fn an_object_missing_a_part_member_is_not_a_part() {
        for missing in ["id", "kind", "mediaType", "selection"] {
            let mut part = text_part("p", "body");
            part.as_object_mut().unwrap().remove(missing);
            let event = json!({"items": [part]});
            assert!(!holds(&event), "{missing}");
            assert_eq!(
                content(Selection::Omit, &[]).project(&document(event)),
                None
            );
        }
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
            image(json!({"selection": "body", "gap": {"reason": "not uploaded"}})),
            image(json!({"selection": "metadata", "size": 4})),
            image(json!({"selection": "omit", "sha256": hash})),
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
