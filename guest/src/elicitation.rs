//! `modify(content)` at `user.elicitation.result` (interaction-payloads.md@8f91ac4): the
//! target is the MCP answer, the `content` of the `ElicitResult` serialized in the result
//! part's text, not the part itself. Only an accepted form result whose part is selected
//! as `body` exposes it, and only while its `content` is an answer or absent; the answer
//! is an object of strings, numbers, booleans and string lists ("never content items"),
//! and the edited result goes back into the part's text, its action and everything else
//! as they were.

use crate::event::Event;
use crate::json;
use serde_json::{Map, Value};
use std::collections::HashSet;

/// The answer a modification at `pointer` starts from: `None` when the event exposes no
/// answer to modify, `Some(None)` when its result holds none yet (a merge then sets it).
/// An owned copy: a reply's modifications are all applied to it (`effect::apply`) before
/// [`with_answer`] writes it back once.
pub fn answer_to_modify(event: &Event, pointer: &str) -> Option<Option<Value>> {
    let (_, mut result) = exposed(event, pointer)?;
    Some(result.remove("content"))
}

/// The result part at `pointer` with `answer` as its result's `content`, the action and
/// everything else as they were; `None` when the event exposes no answer. The caller
/// has checked that `answer` is one ([`is_answer`]).
pub fn with_answer(event: &Event, pointer: &str, answer: Value) -> Option<Value> {
    let (part, mut result) = exposed(event, pointer)?;
    result.insert("content".to_owned(), answer);
    let text = serde_json::to_string(&result).ok()?;
    let mut part = part.clone();
    part.as_object_mut()?
        .insert("text".to_owned(), Value::String(text));
    Some(part)
}

/// Whether `event` exposes an answer to modify: an accepted form result whose part at
/// `pointer` is selected as body and serializes a result whose `content` is an answer,
/// or absent.
pub fn exposes_answer(event: &Event, pointer: &str) -> bool {
    exposed(event, pointer).is_some()
}

/// The result part at `pointer` and the `ElicitResult` it serializes, where the event
/// exposes its answer. A `content` that is no answer MCP allows (`null`, a string, a
/// nested object) is not exposed: no merge into it could leave an answer, and the
/// backend would be blamed (invalid-effects) for the harness's result.
fn exposed<'e>(event: &'e Event, pointer: &str) -> Option<(&'e Value, Map<String, Value>)> {
    let word = |at: &str| event.value_at(at).and_then(Value::as_str);
    if word("/elicitation/action") != Some("accept") || word("/elicitation/mode") != Some("form") {
        return None;
    }
    let part = event.value_at(pointer)?;
    let result = result_in(part)?;
    let answerable = result.get("content").is_none_or(is_answer);
    answerable.then_some((part, result))
}

/// The answer in a result `part`, if it holds one.
pub fn answer(part: &Value) -> Option<Value> {
    result_in(part)?.remove("content")
}

/// Whether `value` has the shape of an MCP form answer: an object whose values are
/// strings, numbers, booleans or lists of strings.
pub fn is_answer(value: &Value) -> bool {
    value.as_object().is_some_and(|answer| {
        answer.values().all(|member| match member {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => true,
            Value::Array(items) => items.iter().all(Value::is_string),
            Value::Null | Value::Object(_) => false,
        })
    })
}

/// Whether `value` has the shape of an MCP `ElicitResult` (interaction-payloads.md@8f91ac4):
/// an object whose `action` is accept, decline or cancel, with a `content` answer only
/// when accepted ("present only for accepted form data"); `_meta` and other members
/// stay open.
pub fn is_result(value: &Value) -> bool {
    let Some(result) = value.as_object() else {
        return false;
    };
    match (
        result.get("action").and_then(Value::as_str),
        result.get("content"),
    ) {
        (Some("accept"), content) => content.is_none_or(is_answer),
        (Some("decline" | "cancel"), None) => true,
        _ => false,
    }
}

/// Whether `result`, a backend's supplied `ElicitResult` at a `user.elicitation.request`,
/// can answer that request (interaction-payloads.md@8f91ac4: `content` "is present only
/// for accepted form data and must satisfy the requesting form schema; decline/cancel
/// and URL results omit it"): a URL request's result carries no `content`, and a form
/// request's answer satisfies its `requestedSchema` ([`satisfies`]) where the event
/// holds the request (its part selected as body). Its shape is [`is_result`]'s.
pub fn answers(event: &Event, result: &Value) -> bool {
    let url = event.value_at("/elicitation/mode").and_then(Value::as_str) == Some("url");
    let accepted = result.get("action").and_then(Value::as_str) == Some("accept");
    match (result.get("content"), url) {
        (Some(_), true) => false,
        (Some(answer), false) => requested_schema(event).is_none_or(|s| satisfies(answer, &s)),
        // A form accepted with no answer gives none of the fields it requires.
        (None, false) if accepted => {
            requested_schema(event).is_none_or(|s| satisfies(&Value::Object(Map::new()), &s))
        }
        (None, _) => true,
    }
}

/// The `requestedSchema` of the request a body-selected request part serializes.
fn requested_schema(event: &Event) -> Option<Map<String, Value>> {
    let part = event.value_at("/elicitation/request")?;
    if part.get("selection").and_then(Value::as_str) != Some("body") {
        return None;
    }
    match json::parse(part.get("text")?.as_str()?) {
        Ok(Value::Object(mut params)) => match params.remove("requestedSchema") {
            Some(Value::Object(schema)) => Some(schema),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `answer` satisfies a form's `schema` (MCP 2025-11-25's flat subset): every
/// required field there, each field the schema names of its type (string, number,
/// integer, boolean, or a list of strings for a multi-select) within its bounds
/// (length, range, count) and, for a choice, one of its values. A field it does not
/// name is left to JSON Schema's default, allowed (the answer's shape, primitives and
/// string lists, is [`is_answer`]'s). A `format` is not checked.
pub fn satisfies(answer: &Value, schema: &Map<String, Value>) -> bool {
    let Some(answer) = answer.as_object() else {
        return false;
    };
    let fields = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    let mut required = required.into_iter().flatten().filter_map(Value::as_str);
    required.all(|name| answer.contains_key(name))
        && answer.iter().all(|(name, value)| {
            fields
                .and_then(|fields| fields.get(name))
                .is_none_or(|field| fits(value, field))
        })
}

/// Whether `value` is of `field`'s type, within its bounds, and one of its choices.
fn fits(value: &Value, field: &Value) -> bool {
    let bound = |key: &str| field.get(key).and_then(Value::as_f64);
    let within = |n: f64, low: &str, high: &str| {
        bound(low).is_none_or(|low| n >= low) && bound(high).is_none_or(|high| n <= high)
    };
    match field.get("type").and_then(Value::as_str) {
        Some("string") => value.as_str().is_some_and(|text| {
            let length = text.chars().count() as f64;
            within(length, "minLength", "maxLength") && chosen(&choices(field), text)
        }),
        Some("number") => value
            .as_f64()
            .is_some_and(|n| within(n, "minimum", "maximum")),
        Some("integer") => value
            .as_f64()
            .is_some_and(|n| n.fract() == 0.0 && within(n, "minimum", "maximum")),
        Some("boolean") => value.is_boolean(),
        Some("array") => value.as_array().is_some_and(|items| {
            let offered = choices(field.get("items").unwrap_or(&Value::Null));
            within(items.len() as f64, "minItems", "maxItems")
                && items
                    .iter()
                    .all(|item| item.as_str().is_some_and(|text| chosen(&offered, text)))
        }),
        _ => false,
    }
}

/// The texts `field` offers to choose from (`enum`, or the `const` of each of its
/// `oneOf` or `anyOf`), or `None` where it offers no choice. A set, read once for all of
/// a multi-select's items: looked through for each, a reply's hundred thousand items
/// against a request's as many choices ran the component past its bound.
fn choices(field: &Value) -> Option<HashSet<&str>> {
    let listed = field.get("enum").and_then(Value::as_array);
    let titled = ["oneOf", "anyOf"]
        .iter()
        .find_map(|key| field.get(*key).and_then(Value::as_array));
    if listed.is_none() && titled.is_none() {
        return None;
    }
    let listed = listed.into_iter().flatten().filter_map(Value::as_str);
    let titled = titled
        .into_iter()
        .flatten()
        .filter_map(|choice| choice.get("const")?.as_str());
    Some(listed.chain(titled).collect())
}

/// Whether `text` is one of the `offered` choices ([`choices`]), or any text where there
/// are none.
fn chosen(offered: &Option<HashSet<&str>>, text: &str) -> bool {
    offered
        .as_ref()
        .is_none_or(|offered| offered.contains(text))
}

/// The `ElicitResult` a body-selected result part serializes.
fn result_in(part: &Value) -> Option<Map<String, Value>> {
    if part.get("selection").and_then(Value::as_str) != Some("body") {
        return None;
    }
    match json::parse(part.get("text")?.as_str()?) {
        Ok(Value::Object(result)) => Some(result),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_is_a_flat_object_of_primitives_and_string_lists() {
        assert!(is_answer(&json!({})));
        assert!(is_answer(
            &json!({"name": "x", "age": 3, "ok": true, "tags": ["a", "b"]})
        ));
        for not in [
            json!({"nested": {"x": 1}}),
            json!({"n": null}),
            json!({"list": [1]}),
            json!([{"name": "x"}]),
            json!("x"),
        ] {
            assert!(!is_answer(&not), "{not}");
        }
    }
}
