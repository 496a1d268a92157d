//! Strict decoding and atomic acceptance of one `hooks/intercept` reply.
//!
//! Backends are untrusted input even when authenticated, so a reply is accepted only if
//! every part of it is valid: transport framing, JSON-RPC envelope, id correlation,
//! `result` fields and every single effect (ahp-digest §4.3). Anything else is exactly
//! one [`Failure`], and the subscription's failure policy applies once. Nothing is ever
//! salvaged from a rejected reply (fixture `atomic-unknown.invalid`), which is why
//! [`decode`] returns the whole effect list or nothing.
//!
//! Envelopes are lenient (unknown `result` fields are ignored, and `extensions` only
//! checked for its shape: an object of reverse-DNS names, its values any JSON); effects
//! are strict (an unknown field rejects the reply), as AHP-CORE-003 asks. A [`Failure`]
//! only ever holds this module's fixed vocabulary: a backend's error message, error data
//! or rejected effect text never reaches the audit or the model.

use crate::content;
use crate::effect::{self, Effect, EffectKind};
use crate::host_api::Reply;
use crate::json::{self, Node, Object};
use crate::syntax::{is_extensions, is_reverse_dns};
use ahp_vocab::{
    DeliverAt, Detail, EventCapability, Failure, FailureClass, FlowOperation, ModifyOperation,
    ModifyTarget, Phase, PROTOCOL_VERSION,
};
use serde_json::Value;

/// Decodes one reply to the request whose JSON-RPC id is `expected_id` (the event id, a JSON string),
/// accepting it only if every part is valid. Err = exactly one Failure (class + phase Parse or Accept).
pub fn decode(
    reply: &Reply,
    expected_id: &str,
    advertised: &EventCapability,
) -> Result<Vec<Effect>, Failure> {
    check_http(reply)?;
    let message = parse_body(&reply.body)?;
    let response = check_envelope(&message)?;
    check_id(response, expected_id)?;
    if let Some(error) = response.get("error") {
        return Err(classify_error(error));
    }
    let effects = check_result(response.get("result"))?;
    accept_effects(effects, advertised)
}

fn parse_failure(class: FailureClass) -> Failure {
    Failure::new(class, Phase::Parse)
}

fn malformed(detail: Detail) -> Failure {
    parse_failure(FailureClass::MalformedJsonrpc).with_detail(detail)
}

fn invalid(detail: Detail) -> Failure {
    Failure::new(FailureClass::InvalidEffects, Phase::Accept).with_detail(detail)
}

/// HTTP success is exactly 200 with a JSON body (DESIGN §5): a 202/204 carries no
/// decision, redirects are never followed, and a 200 with an empty body is no answer
/// (conformance F5 counts it a non-success status). stdio replies have no status and
/// skip this.
fn check_http(reply: &Reply) -> Result<(), Failure> {
    let Some(status) = reply.status else {
        return Ok(());
    };
    let failure = parse_failure(FailureClass::HttpStatus).with_http_status(status);
    if status != 200 {
        // The code is a local diagnostic only; the class stays http-status.
        return Err(match error_code(&reply.body) {
            Some(code) => failure.with_rpc_code(code),
            None => failure,
        });
    }
    if reply.body.is_empty() {
        return Err(failure.with_detail(Detail::EmptyBody));
    }
    if !reply
        .content_type
        .as_deref()
        .is_some_and(is_json_media_type)
    {
        return Err(failure.with_detail(Detail::ContentType));
    }
    Ok(())
}

/// `error.code` of a JSON-RPC error body, if the body is one. Read by the capped reader
/// a 200's body goes through: a non-200 body is as large as the host lets any reply be,
/// and read whole without the cap it could run the component out of memory, an engine
/// failure (a denial) in place of the http-status failure its policy settles. Past the
/// cap, or not strict JSON, it has no code.
fn error_code(body: &[u8]) -> Option<i64> {
    let message = json::read_keeping_inexact(std::str::from_utf8(body).ok()?).ok()?;
    message.get("error")?.get("code")?.as_i64()
}

/// `application/json` or `application/<name>+json`, any case, parameters allowed.
fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let Some(subtype) = essence.strip_prefix("application/") else {
        return false;
    };
    subtype == "json"
        || subtype.strip_suffix("+json").is_some_and(|name| {
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
        })
}

/// AHP messages are UTF-8 JSON; an empty body is not JSON. A member named twice at any
/// depth is malformed too: keeping either one would let the backend say two things. A
/// whole number past 64 bits is kept as read, refused only in an effect's value
/// ([`written_back`]): anywhere else it changes nothing, and its reply is schema-valid.
fn parse_body(body: &[u8]) -> Result<Node<'_>, Failure> {
    let text = std::str::from_utf8(body).map_err(|_| parse_failure(FailureClass::MalformedUtf8))?;
    json::read_keeping_inexact(text).map_err(|error| {
        let failure = parse_failure(FailureClass::MalformedJson);
        match error {
            json::Error::Duplicate(_) => failure.with_detail(Detail::DuplicateKey),
            json::Error::Inexact(_) | json::Error::Syntax(_) | json::Error::TooMany => failure,
        }
    })
}

/// One JSON-RPC 2.0 response object: no batch (AHP-RPC-002), not a request or
/// notification, and exactly one of `result` and `error`.
///
/// A request or notification has `method` and `params` (common.schema.json); a `method`
/// with neither `result` nor `error` is one too, cut short. A `method` beside a result or
/// an error alone is no request: json-rpc-message.schema.json reads the message as a
/// response, whose unknown members are ignored (conformance B6). An echoed request
/// (`method` and `params` beside a `result`) is refused: it is a request and a response
/// at once, which that schema's `oneOf` allows no message to be.
fn check_envelope<'m, 'a>(message: &'m Node<'a>) -> Result<&'m Object<'a>, Failure> {
    let response = match message {
        Node::Object(response) => response,
        Node::Array(_) => return Err(malformed(Detail::Batch)),
        _ => return Err(malformed(Detail::NotObject)),
    };
    if response.get("jsonrpc").and_then(Node::as_str) != Some("2.0") {
        return Err(malformed(Detail::JsonrpcVersion));
    }
    let answers = response.contains_key("result") || response.contains_key("error");
    if response.contains_key("method") && (response.contains_key("params") || !answers) {
        return Err(malformed(Detail::NotAResponse));
    }
    match (
        response.contains_key("result"),
        response.contains_key("error"),
    ) {
        (true, true) => Err(malformed(Detail::ResultAndError)),
        (false, false) => Err(malformed(Detail::NoResultOrError)),
        _ => Ok(response),
    }
}

/// The id must be the request's id, exactly: the string `expected_id`, never a number
/// that looks like it. Only an error may carry `null`, since a backend that could not
/// parse the request cannot know its id (JSON-RPC 2.0 §5).
fn check_id(response: &Object, expected_id: &str) -> Result<(), Failure> {
    match response.get("id") {
        Some(Node::Text(id)) if id == expected_id => Ok(()),
        Some(Node::Null) if response.contains_key("error") => Ok(()),
        Some(_) => Err(parse_failure(FailureClass::IdMismatch)),
        None => Err(malformed(Detail::IdMissing)),
    }
}

/// Any JSON-RPC error is an operational failure; the reserved AHP codes get their own
/// class. Only the numeric code is kept: `message` and `data` are backend text.
fn classify_error(error: &Node) -> Failure {
    let code = error.get("code").and_then(Node::as_i64);
    let has_message = error.get("message").is_some_and(Node::is_string);
    let (Some(code), true) = (code, has_message) else {
        return malformed(Detail::ErrorObject);
    };
    let class = match code {
        -32001 => FailureClass::UnsupportedVersion,
        -32002 => FailureClass::UnsupportedEvent,
        _ => FailureClass::JsonrpcError,
    };
    parse_failure(class).with_rpc_code(code)
}

/// The success `result`: our protocol version, an `effects` member, and no discovery
/// `manifest` (discovery and interception payloads are never mixed).
fn check_result<'m, 'a>(result: Option<&'m Node<'a>>) -> Result<&'m Node<'a>, Failure> {
    let Some(Node::Object(result)) = result else {
        return Err(malformed(Detail::ResultNotObject));
    };
    let missing = |field| parse_failure(FailureClass::MissingResultFields).with_detail(field);
    let version = result
        .get("protocolVersion")
        .ok_or(missing(Detail::ProtocolVersion))?;
    if version.as_str() != Some(PROTOCOL_VERSION) {
        return Err(parse_failure(FailureClass::UnsupportedVersion));
    }
    let effects = result.get("effects").ok_or(missing(Detail::Effects))?;
    if result.contains_key("manifest") {
        return Err(malformed(Detail::ManifestInResult));
    }
    // Known fields are validated (AHP-CORE-003): extensions.schema.json.
    if result.get("extensions").is_some_and(|e| !is_extensions(e)) {
        return Err(malformed(Detail::ResultExtensions));
    }
    Ok(effects)
}

/// Decodes every member, then checks them against each other. The first bad member
/// rejects the whole list. Two supplied results are a conflict, and so are two decisions
/// that disagree — deny with allow or ask, ask with allow (DESIGN §5): the reply is an
/// operational failure (failure-semantics.md: "conflicting effects"), rejected whole and
/// settled by the subscription's policy, its deny never salvaged (digest §4.3). "Deny
/// beats ask and allow" is how the chain combines different interceptors' answers
/// (§4.4), not a reading of one answer that contradicts itself. A decision repeated is
/// one decision (DEC-001: two valid denies are a deny), kept once, the first; flow stop
/// with continue is not a conflict: stop beats it, in one reply as in the chain
/// (upstream `flow-inject.valid`).
///
/// Remembering the decision so far (and whether a result was supplied) is all the
/// checking needs, one step per member however long the list.
fn accept_effects(effects: &Node, advertised: &EventCapability) -> Result<Vec<Effect>, Failure> {
    let Node::Array(members) = effects else {
        return Err(invalid(Detail::MalformedEffect));
    };
    let decoded = members
        .iter()
        .enumerate()
        .map(|(i, member)| decode_effect(member, advertised).map_err(|f| f.with_effect(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut decision: Option<EffectKind> = None;
    let mut returned = false;
    let mut accepted: Vec<Effect> = Vec::with_capacity(decoded.len());
    for (i, effect) in decoded.into_iter().enumerate() {
        // The effect that makes the list conflict: the second decision or result.
        let conflict = || invalid(Detail::ConflictingEffects).with_effect(i);
        let kind = effect.kind();
        if effect::is_decision(kind) {
            match decision {
                Some(seen) if seen == kind => continue,
                Some(_) => return Err(conflict()),
                None => decision = Some(kind),
            }
        }
        if kind == EffectKind::Return {
            if returned {
                return Err(conflict());
            }
            returned = true;
        }
        accepted.push(effect);
    }
    Ok(accepted)
}

/// One effect: a type we know and offered, only the schema's members, each well-formed
/// and within the advertised options (modify target and operation, flow operation,
/// delivery time).
fn decode_effect(member: &Node, advertised: &EventCapability) -> Result<Effect, Failure> {
    let Some(effect) = member.as_object() else {
        return Err(invalid(Detail::MalformedEffect));
    };
    let Some(name) = effect.get("type").and_then(Node::as_str) else {
        return Err(invalid(Detail::MalformedEffect));
    };
    let kind = match EffectKind::parse(name) {
        Some(kind) if advertised.has(kind) => kind,
        Some(_) => return Err(invalid(Detail::UnadvertisedEffect)),
        // Includes reverse-DNS experimental effects: this crate never advertises any.
        None => return Err(invalid(Detail::UnknownEffect)),
    };
    if effect
        .keys()
        .any(|key| !effect::fields(kind).contains(&key))
    {
        return Err(invalid(Detail::UnknownEffectField));
    }
    let text = |key: &str| effect.get(key).and_then(Node::as_str);
    let decoded = match kind {
        EffectKind::Deny => decode_deny(effect),
        EffectKind::Allow => Some(Effect::Allow),
        EffectKind::Ask => Some(Effect::Ask { reason: None }),
        EffectKind::Message => text("text").map(|text| Effect::Message {
            text: text.to_owned(),
        }),
        EffectKind::Modify => return decode_modify(effect, advertised),
        EffectKind::Flow => return decode_flow(effect, advertised),
        EffectKind::Return => written_back(effect)?
            .filter(|value| effect::supplies(advertised.event, value))
            .map(|value| Effect::Return { value }),
        EffectKind::Inject => return decode_inject(effect, advertised),
    };
    decoded.ok_or(invalid(Detail::MalformedEffect))
}

/// The protocol word at `key`, or a malformed effect.
fn word<T>(effect: &Object, key: &str, parse: fn(&str) -> Option<T>) -> Result<T, Failure> {
    effect
        .get(key)
        .and_then(Node::as_str)
        .and_then(parse)
        .ok_or(invalid(Detail::MalformedEffect))
}

/// Fails as unadvertised unless `offered`.
fn offered(offered: bool) -> Result<(), Failure> {
    offered
        .then_some(())
        .ok_or(invalid(Detail::UnadvertisedEffect))
}

/// `{type, target, operation: replace|merge, value}`, the target being the one the
/// event advertises with this operation, the value of the target's shape. Whether the
/// target is offered is asked first: a value's shape is the advertised target's, so a
/// target the event does not offer is unadvertised, whatever value it comes with
/// (conformance C3).
fn decode_modify(effect: &Object, advertised: &EventCapability) -> Result<Effect, Failure> {
    let target = word(effect, "target", ModifyTarget::parse)?;
    let operation = word(effect, "operation", ModifyOperation::parse)?;
    offered(
        advertised
            .modify
            .is_some_and(|m| m.target == target && m.allows(operation)),
    )?;
    let value = written_back(effect)?
        .filter(|v| effect::fits(target, operation, advertised.event, v))
        .ok_or(invalid(Detail::MalformedEffect))?;
    Ok(Effect::Modify {
        target,
        operation,
        value,
    })
}

/// `{type, operation: stop, reason}` or `{type, operation: continue, instruction?}`,
/// each non-empty, the operation advertised.
fn decode_flow(effect: &Object, advertised: &EventCapability) -> Result<Effect, Failure> {
    let operation = word(effect, "operation", FlowOperation::parse)?;
    let (needed, forbidden) = match operation {
        FlowOperation::Stop => ("reason", "instruction"),
        FlowOperation::Continue => ("instruction", "reason"),
    };
    let text = match effect.get(needed) {
        Some(Node::Text(text)) if !text.is_empty() => Some(text.to_string()),
        None if operation == FlowOperation::Continue => None,
        _ => return Err(invalid(Detail::MalformedEffect)),
    };
    if effect.contains_key(forbidden) {
        return Err(invalid(Detail::UnknownEffectField));
    }
    offered(
        advertised
            .flow
            .as_ref()
            .is_some_and(|f| f.operations.contains(&operation)),
    )?;
    Ok(Effect::Flow { operation, text })
}

/// `{type, target: context, operation: append, deliverAt, value: messages}`, the
/// delivery time advertised.
fn decode_inject(effect: &Object, advertised: &EventCapability) -> Result<Effect, Failure> {
    let in_context = effect.get("target").and_then(Node::as_str) == Some("context");
    let appends = effect.get("operation").and_then(Node::as_str) == Some("append");
    let deliver_at = word(effect, "deliverAt", DeliverAt::parse)?;
    let value = written_back(effect)?.filter(content::is_messages);
    let (true, true, Some(value)) = (in_context, appends, value) else {
        return Err(invalid(Detail::MalformedEffect));
    };
    offered(advertised.inject.contains(&deliver_at))?;
    Ok(Effect::Inject { deliver_at, value })
}

/// The effect's `value`, which the harness writes back (a tool's input or output, a
/// result, messages): a whole number past 64 bits in it would be written as another
/// number, so the reply is malformed JSON, as one no reader can take.
fn written_back(effect: &Object) -> Result<Option<Value>, Failure> {
    effect
        .get("value")
        .map(|value| {
            value
                .to_value()
                .map_err(|_| parse_failure(FailureClass::MalformedJson))
        })
        .transpose()
}

/// `{type, reason: non-empty string, code?: reverse-DNS, extensions?: reverse-DNS keys}`
fn decode_deny(effect: &Object) -> Option<Effect> {
    let reason = effect.get("reason")?.as_str().filter(|r| !r.is_empty())?;
    let code = match effect.get("code") {
        Some(code) => Some(code.as_str().filter(|c| is_reverse_dns(c))?),
        None => None,
    };
    if effect.get("extensions").is_some_and(|e| !is_extensions(e)) {
        return None;
    }
    Some(Effect::Deny {
        reason: reason.to_owned(),
        code: code.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_vocab::InterceptableEvent;
    use serde_json::json;
    use FailureClass::*;

    /// `event`'s whole capability: every effect it allows, with every option.
    fn full(event: InterceptableEvent) -> EventCapability {
        crate::events::full(event)
    }

    /// tool.before advertising every effect with every option.
    fn all() -> EventCapability {
        full(InterceptableEvent::ToolBefore)
    }

    /// tool.before advertising only `effects` (unchecked: any subset).
    fn only(effects: &[EffectKind]) -> EventCapability {
        let mut capability = all();
        capability.effects.retain(|k| effects.contains(k));
        capability
    }

    fn http(body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status: Some(200),
            content_type: Some("application/json".into()),
            body: body.into(),
        }
    }

    fn stdio(body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status: None,
            content_type: None,
            body: body.into(),
        }
    }

    /// Decodes an HTTP 200 JSON reply to request `evt_1`, every effect advertised.
    fn decode_http(body: &str) -> Result<Vec<Effect>, Failure> {
        decode(&http(body), "evt_1", &all())
    }

    fn success(effects: Value) -> String {
        json!({"jsonrpc": "2.0", "id": "evt_1",
               "result": {"protocolVersion": "draft", "effects": effects}})
        .to_string()
    }

    /// A reply to `evt_1` with `members` beside `jsonrpc` and `id`, as text.
    fn reply(members: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":"evt_1",{members}}}"#)
    }

    /// The reply as it came from the fixture, and the fixture's own id as the expected one.
    fn fixture_reply(text: &str, http_transport: bool) -> (Reply, String) {
        let message: Value = serde_json::from_str(text).expect("fixture is JSON");
        let id = message["id"]
            .as_str()
            .expect("fixture id is a string")
            .to_owned();
        let reply = if http_transport {
            http(text)
        } else {
            stdio(text)
        };
        (reply, id)
    }

    fn parse(class: FailureClass) -> Failure {
        Failure::new(class, Phase::Parse)
    }

    /// `effects` is refused with `detail`, at the effect numbered `at` (from 0) when the
    /// list is one.
    fn assert_effects_rejected(effects: Value, detail: &str) {
        let detail = Detail::parse(detail).expect("a detail word");
        let expected = invalid(detail);
        match decode_http(&success(effects.clone())) {
            Err(failure) if effects.is_array() => {
                assert!(failure.effect.is_some(), "{effects}: no effect index");
                assert_eq!(
                    Failure {
                        effect: None,
                        ..failure
                    },
                    expected,
                    "{effects}"
                );
            }
            other => assert_eq!(other, Err(expected), "{effects}"),
        }
    }

    // --- upstream fixtures ---

    #[test]
    fn upstream_deny_response_is_accepted() {
        let (reply, id) = fixture_reply(fixture!("http/deny-response.valid.json"), true);
        assert_eq!(
            decode(&reply, &id, &only(&[EffectKind::Deny])),
            Ok(vec![Effect::Deny {
                reason: "Writes to this path require a separate approval.".into(),
                code: Some("com.example.policy.protected_path".into()),
            }])
        );
    }

    #[test]
    fn upstream_no_effect_response_is_accepted() {
        let (reply, id) = fixture_reply(fixture!("http/no-effect-response.valid.json"), true);
        assert_eq!(decode(&reply, &id, &only(&[EffectKind::Deny])), Ok(vec![]));
    }

    #[test]
    fn upstream_error_response_is_unsupported_version() {
        let (reply, id) = fixture_reply(fixture!("http/error-response.valid.json"), true);
        assert_eq!(
            decode(&reply, &id, &all()),
            Err(parse(UnsupportedVersion).with_rpc_code(-32001))
        );
    }

    #[test]
    fn upstream_error_with_result_is_malformed() {
        let (reply, id) = fixture_reply(fixture!("http/error-response-result.invalid.json"), true);
        assert_eq!(
            decode(&reply, &id, &all()),
            Err(malformed(Detail::ResultAndError))
        );
    }

    #[test]
    fn upstream_foreign_result_version_is_unsupported() {
        let text = fixture!("http/no-effect-response-version.invalid.json");
        let (reply, id) = fixture_reply(text, true);
        assert_eq!(decode(&reply, &id, &all()), Err(parse(UnsupportedVersion)));
    }

    #[test]
    fn upstream_atomic_unknown_rejects_the_preceding_message_too() {
        let (reply, id) = fixture_reply(fixture!("http/atomic-unknown.invalid.json"), true);
        assert_eq!(
            decode(&reply, &id, &all()),
            Err(invalid(Detail::UnknownEffect).with_effect(1))
        );
    }

    #[test]
    fn upstream_stdio_deny_and_no_effect_are_accepted() {
        let (reply, id) = fixture_reply(fixture!("stdio/deny-response.valid.jsonl"), false);
        assert_eq!(
            decode(&reply, &id, &only(&[EffectKind::Deny])),
            Ok(vec![Effect::Deny {
                reason: "Force pushes are prohibited by organization policy.".into(),
                code: Some("com.example.policy.force_push".into()),
            }])
        );
        let (reply, id) = fixture_reply(fixture!("stdio/no-effect-response.valid.jsonl"), false);
        assert_eq!(decode(&reply, &id, &only(&[EffectKind::Deny])), Ok(vec![]));
    }

    /// The stdio fixture says "never multiple effects" (the older DEC-001); under the
    /// current DEC-001 two valid denies are a deny (digest §19.3, conformance S9).
    #[test]
    fn upstream_stdio_two_denies_are_one_deny() {
        let text = fixture!("stdio/deny-response-multiple.invalid.jsonl");
        let (reply, id) = fixture_reply(text, false);
        let effects = decode(&reply, &id, &all()).expect("two valid denies");
        assert_eq!(effects.len(), 1);
        assert_eq!(effects[0].kind(), EffectKind::Deny);
    }

    // --- 1. HTTP status and media type ---

    #[test]
    fn every_status_but_200_is_http_status() {
        for status in [
            201, 202, 204, 301, 302, 307, 400, 401, 403, 404, 500, 502, 503,
        ] {
            let reply = Reply {
                status: Some(status),
                ..http(success(json!([])))
            };
            assert_eq!(
                decode(&reply, "evt_1", &all()),
                Err(parse(HttpStatus).with_http_status(status)),
                "{status}"
            );
        }
    }

    #[test]
    fn json_rpc_error_code_on_a_non_200_is_recorded_but_class_stays_http_status() {
        let body = json!({"jsonrpc": "2.0", "id": "evt_1",
                          "error": {"code": -32003, "message": "busy"}});
        let reply = Reply {
            status: Some(503),
            ..http(body.to_string())
        };
        let failure = decode(&reply, "evt_1", &all()).expect_err("503");
        assert_eq!(
            failure,
            parse(HttpStatus)
                .with_http_status(503)
                .with_rpc_code(-32003)
        );
        assert!(failure.is_transient());
    }

    /// A non-200 body is read by the capped reader: one holding more values than it
    /// reads is no JSON-RPC error, its code unread though it comes first, and the
    /// failure stays http-status (never a trap for running out of memory).
    #[test]
    fn a_non_200_body_past_the_value_cap_is_http_status_without_its_code() {
        let zeros = format!("[{}0]", "0,".repeat(json::MAX_VALUES));
        let body = reply(&format!(
            r#""error":{{"code":-32003,"message":"busy","data":{zeros}}}"#
        ));
        let reply = Reply {
            status: Some(500),
            ..http(body)
        };
        assert_eq!(
            decode(&reply, "evt_1", &all()),
            Err(parse(HttpStatus).with_http_status(500))
        );
    }

    #[test]
    fn missing_or_non_json_content_type_is_http_status() {
        for content_type in [
            None,
            Some("text/html"),
            Some("text/json"),
            Some("application/jsonx"),
            Some("application/+json"),
            Some("application/json-seq"),
            Some(""),
        ] {
            let reply = Reply {
                content_type: content_type.map(str::to_owned),
                ..http(success(json!([])))
            };
            assert_eq!(
                decode(&reply, "evt_1", &all()),
                Err(parse(HttpStatus)
                    .with_http_status(200)
                    .with_detail(Detail::ContentType)),
                "{content_type:?}"
            );
        }
    }

    #[test]
    fn a_200_with_an_empty_body_is_a_status_failure() {
        let reply = Reply {
            body: Vec::new(),
            ..http(success(json!([])))
        };
        assert_eq!(
            decode(&reply, "evt_1", &all()),
            Err(parse(HttpStatus)
                .with_http_status(200)
                .with_detail(Detail::EmptyBody))
        );
    }

    #[test]
    fn json_media_types_with_parameters_and_any_case_are_accepted() {
        for content_type in [
            "application/json",
            "Application/JSON; charset=UTF-8",
            "application/json;charset=utf-8",
            " application/json ",
            "application/vnd.ahp+json",
        ] {
            let reply = Reply {
                content_type: Some(content_type.into()),
                ..http(success(json!([])))
            };
            assert_eq!(
                decode(&reply, "evt_1", &all()),
                Ok(vec![]),
                "{content_type}"
            );
        }
    }

    #[test]
    fn stdio_replies_skip_the_http_checks() {
        assert_eq!(
            decode(&stdio(success(json!([]))), "evt_1", &all()),
            Ok(vec![])
        );
    }

    // --- 2. bytes and JSON ---

    #[test]
    fn invalid_utf8_is_malformed_utf8() {
        let mut body = success(json!([])).into_bytes();
        body.push(0xff);
        assert_eq!(
            decode(&http(body), "evt_1", &all()),
            Err(parse(MalformedUtf8))
        );
    }

    #[test]
    fn non_json_and_blank_bodies_are_malformed_json() {
        for body in ["   ", "{", "not json", "{\"jsonrpc\":\"2.0\"} trailing"] {
            assert_eq!(decode_http(body), Err(parse(MalformedJson)), "{body:?}");
        }
        // Over stdio (no status) an empty line is no JSON either.
        let empty = Reply {
            status: None,
            content_type: None,
            body: Vec::new(),
        };
        assert_eq!(decode(&empty, "evt_1", &all()), Err(parse(MalformedJson)));
    }

    /// A member named twice at any depth is malformed JSON over either transport, even
    /// where every occurrence would be valid on its own: which one a reader keeps is
    /// exactly what a backend must not get to choose.
    #[test]
    fn a_member_named_twice_is_malformed_json() {
        let deny = r#"{"type":"deny","reason":"no"}"#;
        let result =
            |effects: &str| format!(r#"{{"protocolVersion":"draft","effects":[{effects}]}}"#);
        for body in [
            reply(&format!(
                r#""result":{},"result":{}"#,
                result(deny),
                result("")
            )),
            reply(&format!(r#""result":{},"id":"evt_1""#, result(""))),
            reply(&format!(
                r#""result":{{"protocolVersion":"draft","effects":[],"effects":[{deny}]}}"#
            )),
            reply(&format!(
                r#""result":{}"#,
                result(r#"{"type":"deny","reason":"no","reason":"ok"}"#)
            )),
            reply(&format!(
                r#""result":{}"#,
                result(&format!(
                    r#"{deny},{{"type":"message","message":"a","message":"b"}}"#
                ))
            )),
            reply(&format!(
                r#""result":{},"extensions":{{"x":[{{"y":1,"y":1}}]}}"#,
                result("")
            )),
        ] {
            let expected = Err(parse(MalformedJson).with_detail(Detail::DuplicateKey));
            assert_eq!(
                decode(&http(body.as_str()), "evt_1", &all()),
                expected,
                "{body}"
            );
            assert_eq!(
                decode(&stdio(body.as_str()), "evt_1", &all()),
                expected,
                "{body}"
            );
        }
    }

    /// A whole number that no 64-bit integer holds, read exactly by no `Value`.
    const PAST_64_BITS: &str = "123456789012345678901234567890";

    /// Extension values are any JSON (extensions.schema.json), and error data and unknown
    /// members are ignored: a whole number past 64 bits there changes nothing the harness
    /// writes back, so the reply stands, its deny and its error code included.
    #[test]
    fn a_number_past_64_bits_where_nothing_is_written_back_is_ignored() {
        let n = PAST_64_BITS;
        let deny = r#"{"type":"deny","reason":"no"}"#;
        let result = |effect: &str, extensions: &str| {
            format!(r#"{{"protocolVersion":"draft","effects":[{effect}]{extensions}}}"#)
        };
        let denied = Ok(vec![Effect::Deny {
            reason: "no".into(),
            code: None,
        }]);
        for body in [
            reply(&format!(
                r#""result":{}"#,
                result(deny, &format!(r#","extensions":{{"com.example.n":{n}}}"#))
            )),
            reply(&format!(
                r#""com.example.n":[{n}],"result":{}"#,
                result(deny, "")
            )),
            reply(&format!(
                r#""result":{}"#,
                result(
                    &format!(
                        r#"{{"type":"deny","reason":"no","extensions":{{"com.example.n":{n}}}}}"#
                    ),
                    ""
                )
            )),
        ] {
            assert_eq!(decode_http(&body), denied, "{body}");
        }
        let error = reply(&format!(
            r#""error":{{"code":-32003,"message":"busy","data":{{"n":-{n}}}}}"#
        ));
        assert_eq!(
            decode_http(&error),
            Err(parse(JsonrpcError).with_rpc_code(-32003))
        );
    }

    /// An effect's value is written back (a tool's input, a result): a whole number past
    /// 64 bits there would reach the tool as another number, so the reply is refused.
    #[test]
    fn a_number_past_64_bits_in_an_effect_value_is_malformed_json() {
        let n = PAST_64_BITS;
        for effect in [
            format!(
                r#"{{"type":"modify","target":"input","operation":"replace","value":{{"account":{n}}}}}"#
            ),
            format!(r#"{{"type":"return","value":[1,{n}]}}"#),
        ] {
            let body = reply(&format!(
                r#""result":{{"protocolVersion":"draft","effects":[{{"type":"message","text":"m"}},{effect}]}}"#
            ));
            assert_eq!(
                decode_http(&body),
                Err(parse(MalformedJson).with_effect(1)),
                "{body}"
            );
        }
    }

    // --- 3. JSON-RPC envelope ---

    #[test]
    fn batch_is_malformed_jsonrpc() {
        let body = format!("[{}]", success(json!([])));
        assert_eq!(decode_http(&body), Err(malformed(Detail::Batch)));
    }

    #[test]
    fn non_object_is_malformed_jsonrpc() {
        for body in ["42", "\"evt_1\"", "null", "true"] {
            assert_eq!(decode_http(body), Err(malformed(Detail::NotObject)));
        }
    }

    #[test]
    fn wrong_or_missing_jsonrpc_version_is_malformed_jsonrpc() {
        for version in [Some(json!("1.0")), Some(json!(2.0)), None] {
            let mut body =
                json!({"id": "evt_1", "result": {"protocolVersion": "draft", "effects": []}});
            if let (Some(version), Some(object)) = (version, body.as_object_mut()) {
                object.insert("jsonrpc".into(), version);
            }
            assert_eq!(
                decode_http(&body.to_string()),
                Err(malformed(Detail::JsonrpcVersion))
            );
        }
    }

    #[test]
    fn neither_result_nor_error_is_malformed_jsonrpc() {
        let body = json!({"jsonrpc": "2.0", "id": "evt_1"});
        assert_eq!(
            decode_http(&body.to_string()),
            Err(malformed(Detail::NoResultOrError))
        );
    }

    /// A request or notification is no answer, whatever else it carries: `method` with
    /// `params` (an echoed request too, beside its result or error), or `method` alone.
    #[test]
    fn request_instead_of_response_is_malformed_jsonrpc() {
        let deny = json!({"protocolVersion": "draft",
                          "effects": [{"type": "deny", "reason": "r"}]});
        let error = json!({"code": -32003, "message": "busy"});
        for body in [
            json!({"jsonrpc": "2.0", "id": "evt_1", "method": "hooks/intercept",
                   "params": {}}),
            json!({"jsonrpc": "2.0", "method": "hooks/observe", "params": {}}),
            json!({"jsonrpc": "2.0", "id": "evt_1", "method": "hooks/intercept",
                   "params": {}, "result": deny}),
            json!({"jsonrpc": "2.0", "id": "evt_1", "method": "hooks/intercept",
                   "params": {}, "error": error}),
            json!({"jsonrpc": "2.0", "id": "evt_1", "method": "hooks/intercept"}),
        ] {
            assert_eq!(
                decode_http(&body.to_string()),
                Err(malformed(Detail::NotAResponse)),
                "{body}"
            );
        }
    }

    /// Without `params` a `method` beside a result or an error is an unknown member of a
    /// response (json-rpc-message.schema.json: a successResponse, or an errorResponse),
    /// ignored as any other (conformance B6).
    #[test]
    fn a_method_beside_a_result_or_an_error_alone_is_ignored() {
        let body = json!({"jsonrpc": "2.0", "id": "evt_1", "method": "hooks/intercept",
                          "result": {"protocolVersion": "draft",
                                     "effects": [{"type": "deny", "reason": "r"}]}});
        let deny = Effect::Deny {
            reason: "r".into(),
            code: None,
        };
        assert_eq!(decode_http(&body.to_string()), Ok(vec![deny]));
        let body = json!({"jsonrpc": "2.0", "id": "evt_1", "method": "hooks/intercept",
                          "error": {"code": -32003, "message": "busy"}});
        assert_eq!(
            decode_http(&body.to_string()),
            Err(parse(JsonrpcError).with_rpc_code(-32003))
        );
    }

    // --- 4. id correlation ---

    #[test]
    fn number_id_never_matches_a_string_id() {
        let body = json!({"jsonrpc": "2.0", "id": 7,
                          "result": {"protocolVersion": "draft", "effects": []}});
        assert_eq!(
            decode(&http(body.to_string()), "7", &all()),
            Err(parse(IdMismatch))
        );
    }

    #[test]
    fn other_string_id_is_id_mismatch() {
        assert_eq!(
            decode(&http(success(json!([]))), "evt_2", &all()),
            Err(parse(IdMismatch))
        );
    }

    #[test]
    fn null_id_with_result_is_id_mismatch() {
        let body = json!({"jsonrpc": "2.0", "id": null,
                          "result": {"protocolVersion": "draft", "effects": []}});
        assert_eq!(decode_http(&body.to_string()), Err(parse(IdMismatch)));
    }

    #[test]
    fn missing_id_is_malformed_jsonrpc() {
        let body = json!({"jsonrpc": "2.0",
                          "result": {"protocolVersion": "draft", "effects": []}});
        assert_eq!(
            decode_http(&body.to_string()),
            Err(malformed(Detail::IdMissing))
        );
    }

    #[test]
    fn error_with_null_id_is_classified_by_its_code() {
        let body = json!({"jsonrpc": "2.0", "id": null,
                          "error": {"code": -32700, "message": "Parse error"}});
        assert_eq!(
            decode_http(&body.to_string()),
            Err(parse(JsonrpcError).with_rpc_code(-32700))
        );
    }

    #[test]
    fn error_with_another_id_is_id_mismatch() {
        let body = json!({"jsonrpc": "2.0", "id": "evt_other",
                          "error": {"code": -32003, "message": "busy"}});
        assert_eq!(decode_http(&body.to_string()), Err(parse(IdMismatch)));
    }

    // --- 5. error responses ---

    fn error_reply(error: Value) -> Result<Vec<Effect>, Failure> {
        decode_http(&json!({"jsonrpc": "2.0", "id": "evt_1", "error": error}).to_string())
    }

    #[test]
    fn reserved_error_codes_get_their_own_class() {
        assert_eq!(
            error_reply(json!({"code": -32001, "message": "m"})),
            Err(parse(UnsupportedVersion).with_rpc_code(-32001))
        );
        assert_eq!(
            error_reply(json!({"code": -32002, "message": "m"})),
            Err(parse(UnsupportedEvent).with_rpc_code(-32002))
        );
    }

    #[test]
    fn any_other_error_code_is_jsonrpc_error_without_backend_text() {
        for code in [-32003, -32004, -32601, 1] {
            let failure = error_reply(json!({"code": code, "message": "SECRET token=abc",
                                             "data": {"trace": "SECRET"}}))
            .expect_err("error");
            assert_eq!(failure, parse(JsonrpcError).with_rpc_code(code));
            assert!(!format!("{failure:?}").contains("SECRET"));
        }
    }

    /// JSON has one number type: `-32003.0` is the integer -32003 (JSON Schema counts any
    /// number with a zero fraction), so it is that error, not a malformed error object.
    #[test]
    fn an_error_code_written_with_a_zero_fraction_is_that_code() {
        for (code, class, rpc) in [
            (json!(-32003.0), JsonrpcError, -32003),
            (json!(-32001.0), UnsupportedVersion, -32001),
            (
                serde_json::from_str("-3.2002e4").unwrap(),
                UnsupportedEvent,
                -32002,
            ),
        ] {
            assert_eq!(
                error_reply(json!({"code": code, "message": "m"})),
                Err(parse(class).with_rpc_code(rpc)),
                "{code}"
            );
        }
        let body = json!({"jsonrpc": "2.0", "id": "evt_1",
                          "error": {"code": -32003.0, "message": "busy"}});
        let reply = Reply {
            status: Some(503),
            ..http(body.to_string())
        };
        assert_eq!(
            decode(&reply, "evt_1", &all()),
            Err(parse(HttpStatus)
                .with_http_status(503)
                .with_rpc_code(-32003))
        );
    }

    #[test]
    fn malformed_error_object_is_malformed_jsonrpc() {
        for error in [
            json!("failed"),
            json!(null),
            json!({"message": "m"}),
            json!({"code": "-32003", "message": "m"}),
            json!({"code": -32003.5, "message": "m"}),
            json!({"code": -32003}),
            json!({"code": -32003, "message": 5}),
        ] {
            assert_eq!(error_reply(error), Err(malformed(Detail::ErrorObject)));
        }
    }

    // --- 6. result ---

    fn result_reply(result: Value) -> Result<Vec<Effect>, Failure> {
        decode_http(&json!({"jsonrpc": "2.0", "id": "evt_1", "result": result}).to_string())
    }

    #[test]
    fn non_object_result_is_malformed_jsonrpc() {
        for result in [json!([]), json!(null), json!("draft")] {
            assert_eq!(
                result_reply(result),
                Err(malformed(Detail::ResultNotObject))
            );
        }
    }

    #[test]
    fn missing_protocol_version_is_missing_result_fields() {
        assert_eq!(
            result_reply(json!({"effects": []})),
            Err(parse(MissingResultFields).with_detail(Detail::ProtocolVersion))
        );
    }

    #[test]
    fn foreign_protocol_version_is_unsupported_version() {
        for version in [json!("0.1"), json!("2026-01-01"), json!("DRAFT"), json!(1)] {
            assert_eq!(
                result_reply(json!({"protocolVersion": version, "effects": []})),
                Err(parse(UnsupportedVersion))
            );
        }
    }

    #[test]
    fn missing_effects_is_missing_result_fields() {
        assert_eq!(
            result_reply(json!({"protocolVersion": "draft"})),
            Err(parse(MissingResultFields).with_detail(Detail::Effects))
        );
    }

    #[test]
    fn manifest_in_result_is_malformed_jsonrpc() {
        assert_eq!(
            result_reply(json!({"protocolVersion": "draft", "effects": [], "manifest": {}})),
            Err(malformed(Detail::ManifestInResult))
        );
    }

    #[test]
    fn unknown_result_fields_are_ignored_and_extensions_checked() {
        let result = json!({"protocolVersion": "draft", "effects": [], "future": 1,
                            "extensions": {"com.example.trace": {"id": 3}}});
        assert_eq!(result_reply(result), Ok(vec![]));
        for extensions in [json!("x"), json!({"trace": 1}), json!([])] {
            let result = json!({"protocolVersion": "draft", "effects": [],
                                "extensions": extensions});
            assert_eq!(
                result_reply(result),
                Err(malformed(Detail::ResultExtensions)),
                "{extensions}"
            );
        }
    }

    /// Conformance B6: unknown members beside `jsonrpc`, `id` and `result` are envelope
    /// fields too, ignored whatever their value: the reply is accepted as it stands.
    #[test]
    fn unknown_top_level_members_are_ignored() {
        let body = json!({"jsonrpc": "2.0", "id": "evt_1", "x": 1,
                          "com.example.trace": {"span": [1, 2]}, "meta": null,
                          "result": {"protocolVersion": "draft",
                                     "effects": [{"type": "deny", "reason": "r"}]}});
        let deny = Effect::Deny {
            reason: "r".into(),
            code: None,
        };
        assert_eq!(decode_http(&body.to_string()), Ok(vec![deny.clone()]));
        let stdio_reply = stdio(body.to_string());
        assert_eq!(decode(&stdio_reply, "evt_1", &all()), Ok(vec![deny]));
    }

    // --- 7. effects ---

    #[test]
    fn non_array_effects_are_malformed_effect() {
        for effects in [json!({}), json!(null), json!("deny")] {
            assert_effects_rejected(effects, "malformed-effect");
        }
    }

    #[test]
    fn member_without_object_or_string_type_is_malformed_effect() {
        for member in [json!("deny"), json!(null), json!({}), json!({"type": 1})] {
            assert_effects_rejected(json!([member]), "malformed-effect");
        }
    }

    #[test]
    fn unknown_and_experimental_types_are_unknown_effect() {
        for name in ["unknown", "Deny", "", "com.example.quarantine"] {
            assert_effects_rejected(json!([{"type": name}]), "unknown-effect");
        }
    }

    #[test]
    fn effects_missing_from_advertised_are_unadvertised() {
        let body = success(json!([{"type": "allow"}]));
        assert_eq!(
            decode(&http(body), "evt_1", &only(&[EffectKind::Deny])),
            Err(invalid(Detail::UnadvertisedEffect).with_effect(0))
        );
        let body = success(json!([{"type": "deny", "reason": "r"}]));
        assert_eq!(
            decode(&http(body), "evt_1", &only(&[])),
            Err(invalid(Detail::UnadvertisedEffect).with_effect(0))
        );
    }

    /// A modify of a target the event does not offer is unadvertised whatever its value,
    /// one of that target's shape or not (tool.before offers `input`, no `output`).
    /// Upstream `modify-invalid-target`'s `parts` is no target word at all (the effect
    /// schema's enum), so a malformed effect.
    #[test]
    fn a_modify_of_an_unoffered_target_is_unadvertised_whatever_its_value() {
        for value in [json!({}), json!([]), json!("text")] {
            let modify = json!({"type": "modify", "target": "output", "operation": "replace",
                                "value": value});
            assert_effects_rejected(json!([modify]), "unadvertised-effect");
        }
        let (reply, id) = fixture_reply(fixture!("http/modify-invalid-target.invalid.json"), true);
        assert_eq!(
            decode(&reply, &id, &all()),
            Err(invalid(Detail::MalformedEffect).with_effect(0))
        );
    }

    #[test]
    fn every_decodable_effect_shape_is_accepted() {
        assert_eq!(
            decode_http(&success(json!([{"type": "deny", "reason": "no"}]))),
            Ok(vec![Effect::Deny {
                reason: "no".into(),
                code: None
            }])
        );
        assert_eq!(
            decode_http(&success(
                json!([{"type": "allow"}, {"type": "message", "text": "hi"}])
            )),
            Ok(vec![Effect::Allow, Effect::Message { text: "hi".into() }])
        );
        assert_eq!(
            decode_http(&success(json!([{"type": "ask"}]))),
            Ok(vec![Effect::Ask { reason: None }])
        );
    }

    #[test]
    fn unknown_effect_fields_are_unknown_effect_field() {
        for member in [
            json!({"type": "deny", "reason": "r", "severity": "high"}),
            json!({"type": "allow", "extensions": {}}),
            json!({"type": "ask", "reason": "check"}),
            json!({"type": "message", "text": "t", "level": "info"}),
        ] {
            assert_effects_rejected(json!([member]), "unknown-effect-field");
        }
    }

    #[test]
    fn deny_needs_a_non_empty_reason() {
        for member in [
            json!({"type": "deny"}),
            json!({"type": "deny", "reason": ""}),
            json!({"type": "deny", "reason": 3}),
        ] {
            assert_effects_rejected(json!([member]), "malformed-effect");
        }
    }

    #[test]
    fn deny_code_must_be_reverse_dns() {
        for code in [
            json!("protected_path"),
            json!("com..x"),
            json!(".com.x"),
            json!("com.9x"),
            json!(""),
            json!(42),
        ] {
            assert_effects_rejected(
                json!([{"type": "deny", "reason": "r", "code": code}]),
                "malformed-effect",
            );
        }
    }

    #[test]
    fn deny_extensions_must_be_an_object_with_reverse_dns_keys() {
        for extensions in [json!("x"), json!([]), json!({"trace": 1})] {
            assert_effects_rejected(
                json!([{"type": "deny", "reason": "r", "extensions": extensions}]),
                "malformed-effect",
            );
        }
    }

    #[test]
    fn message_needs_string_text() {
        for member in [
            json!({"type": "message"}),
            json!({"type": "message", "text": 1}),
        ] {
            assert_effects_rejected(json!([member]), "malformed-effect");
        }
    }

    /// Two supplied results, or two decisions that disagree, in whatever order and
    /// whatever lies between them, are conflicting effects: the reply is rejected whole
    /// (its deny is not salvaged).
    #[test]
    fn decisions_that_disagree_and_two_results_are_conflicting_effects() {
        let deny = json!({"type": "deny", "reason": "r"});
        let (ask, allow) = (json!({"type": "ask"}), json!({"type": "allow"}));
        let message = json!({"type": "message", "text": "m"});
        // Each with the effect that makes it conflict: the second decision or result.
        for (effects, at) in [
            (json!([allow, deny]), 1),
            (json!([deny, allow]), 1),
            (json!([deny, ask]), 1),
            (json!([ask, message, deny]), 2),
            (json!([ask, allow]), 1),
            (json!([allow, allow, ask]), 2),
            (
                json!([{"type": "return", "value": 1}, {"type": "return", "value": 2}]),
                1,
            ),
        ] {
            let failure = decode_http(&success(effects.clone())).err();
            let expected = invalid(Detail::ConflictingEffects).with_effect(at);
            assert_eq!(failure, Some(expected), "{effects}");
        }
    }

    /// A supplied result has its boundary's shape (composition.md@8f91ac4): a model
    /// result canonical messages, a compaction summary text parts, an elicitation's an
    /// MCP `ElicitResult`, a tool's any JSON. Any other is a malformed effect.
    #[test]
    fn a_supplied_result_has_the_shape_its_boundary_takes() {
        use InterceptableEvent::*;
        let messages = json!([{"id": "m1", "role": "assistant",
                               "parts": [{"kind": "text", "id": "p1", "mediaType": "text/plain",
                                          "selection": "body", "text": "done"}]}]);
        let text_parts = json!([{"kind": "text", "id": "p1", "mediaType": "text/plain",
                                 "selection": "body", "text": "summary"}]);
        let accepted = json!({"action": "accept", "content": {"name": "x", "n": 3}});
        let cases = [
            (ModelRequestBefore, messages.clone(), true),
            (ModelRequestBefore, json!(42), false),
            (ModelRequestBefore, text_parts.clone(), false),
            (ContextCompactBefore, text_parts.clone(), true),
            (ContextCompactBefore, messages.clone(), false),
            (ContextCompactBefore, json!("summary"), false),
            (UserElicitationRequest, accepted, true),
            (
                UserElicitationRequest,
                json!({"action": "decline", "_meta": {}}),
                true,
            ),
            (UserElicitationRequest, json!({"action": "accept"}), true),
            (
                UserElicitationRequest,
                json!({"action": "cancel", "content": {}}),
                false,
            ),
            (UserElicitationRequest, json!({"action": "maybe"}), false),
            (
                UserElicitationRequest,
                json!({"action": "accept", "content": {"a": {}}}),
                false,
            ),
            (UserElicitationRequest, messages, false),
            (ToolBefore, json!(42), true),
            (ToolBefore, json!({"stdout": "ok"}), true),
        ];
        for (event, value, fits) in cases {
            let effects = json!([{"type": "return", "value": value.clone()}]);
            let decoded = decode(&http(success(effects)), "evt_1", &full(event));
            let expected = match fits {
                true => Ok(vec![Effect::Return {
                    value: value.clone(),
                }]),
                false => Err(invalid(Detail::MalformedEffect).with_effect(0)),
            };
            assert_eq!(decoded, expected, "{event}: {value}");
        }
    }

    #[test]
    fn a_repeated_decision_is_one_decision_the_first() {
        let effects = json!([{"type": "deny", "reason": "a"}, {"type": "message", "text": "m"},
                             {"type": "deny", "reason": "b"}]);
        assert_eq!(
            decode_http(&success(effects)),
            Ok(vec![
                Effect::Deny {
                    reason: "a".into(),
                    code: None
                },
                Effect::Message { text: "m".into() },
            ])
        );
        let allows = json!([{"type": "allow"}, {"type": "allow"}]);
        assert_eq!(decode_http(&success(allows)), Ok(vec![Effect::Allow]));
    }

    /// A long reply (18,000 messages, then 30,000 allows: 1 MiB) is accepted as one
    /// decision after its messages, and a deny at its very end is still found to
    /// conflict with them. Each member is checked against what was seen, not against
    /// every effect before it.
    #[test]
    fn a_long_list_keeps_one_decision_and_still_finds_a_late_conflict() {
        let message = json!({"type": "message", "text": ""});
        let mut effects = vec![message; 18_000];
        effects.extend(vec![json!({"type": "allow"}); 30_000]);
        let body = success(Value::Array(effects.clone()));
        assert!(body.len() <= 1 << 20, "{} bytes", body.len());
        let accepted = decode_http(&body).expect("one decision");
        assert_eq!(accepted.len(), 18_001);
        assert_eq!(accepted[17_999], Effect::Message { text: "".into() });
        assert_eq!(accepted[18_000], Effect::Allow);
        effects.push(json!({"type": "deny", "reason": "r"}));
        let last = effects.len() - 1;
        let failure = decode_http(&success(Value::Array(effects))).err();
        let expected = invalid(Detail::ConflictingEffects).with_effect(last);
        assert_eq!(failure, Some(expected));
    }

    /// A backend's number reaches the tool as the backend wrote it: serde_json's
    /// default float reading is not correctly rounded (it read this one as
    /// ...744), so the workspace enables `float_roundtrip`.
    #[test]
    fn a_modify_value_keeps_every_digit_of_its_numbers() {
        let text = r#"{"type":"modify","target":"input","operation":"replace",
            "value":{"threshold":0.9210986675838745,"limit":1e-7}}"#;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"evt_1","result":{{"protocolVersion":"draft","effects":[{text}]}}}}"#
        );
        let Ok(effects) = decode_http(&body) else {
            panic!("{body}")
        };
        let [Effect::Modify { value, .. }] = effects.as_slice() else {
            panic!("{effects:?}")
        };
        assert_eq!(
            value.to_string(),
            r#"{"limit":1e-7,"threshold":0.9210986675838745}"#
        );
    }

    #[test]
    fn a_decision_with_messages_is_not_a_conflict() {
        let effects = json!([{"type": "message", "text": "a"},
                             {"type": "deny", "reason": "r"},
                             {"type": "message", "text": "b"}]);
        assert_eq!(decode_http(&success(effects)).map(|e| e.len()), Ok(3));
    }

    #[test]
    fn a_valid_deny_is_never_salvaged_from_an_invalid_list() {
        let effects = json!([{"type": "deny", "reason": "r"}, {"type": "deny", "reason": ""}]);
        let failure = decode_http(&success(effects)).err();
        assert_eq!(
            failure,
            Some(invalid(Detail::MalformedEffect).with_effect(1))
        );
        let effects = json!([{"type": "deny", "reason": "r"}, {"type": "com.example.x"}]);
        assert_effects_rejected(effects, "unknown-effect");
    }
}
