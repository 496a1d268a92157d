//! JSON-RPC messages, encoded once.
//!
//! A [`Message`] is built from a validated event and then frozen: it exposes its bytes
//! and their SHA-256, and nothing that could change them. A retry therefore resends the
//! exact bytes of the first attempt (same event id, JSON-RPC id, session, call and
//! content) by construction, not by care (failure-semantics.md, "Duplicate delivery and
//! retries").

use crate::event::{Event, WireEvent};
use ahp_vocab::{EventCapability, FlowCapability, PROTOCOL_VERSION};
use serde::Serialize;
use serde_json::{json, Map, Value};

/// The buffer a request is encoded into: one hook call's request fits, so the encoder
/// does not grow (and copy) it as it goes.
const REQUEST_CAPACITY: usize = 1024;

/// An encoded message. Immutable once built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    bytes: Vec<u8>,
    sha256: String,
}

impl Message {
    /// `sha256` is [`crate::host_api::Host::sha256`]: the host hashes.
    fn encode(request: &Request<'_>, sha256: impl FnOnce(&[u8]) -> String) -> Message {
        // Serializing borrowed strings and `Value`s cannot fail, and serde_json never
        // emits a raw newline, so the same bytes are also a valid stdio frame.
        let mut bytes = Vec::with_capacity(REQUEST_CAPACITY);
        if serde_json::to_writer(&mut bytes, request).is_err() {
            bytes.clear();
        }
        let sha256 = sha256(&bytes);
        Message { bytes, sha256 }
    }

    /// The exact bytes to deliver, on every attempt.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Lowercase hex SHA-256 of [`Message::bytes`], for the audit record.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
}

/// A JSON-RPC request or notification, serialized straight from borrowed parts.
#[derive(Serialize)]
struct Request<'a> {
    jsonrpc: &'static str,
    /// Absent for a notification.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    method: &'static str,
    params: Params<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Params<'a> {
    protocol_version: &'static str,
    event: WireEvent<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    capabilities: Option<Capabilities<'a>>,
}

/// `params.capabilities` (capabilities.schema.json): the call's narrowed declaration,
/// each effect's option block present exactly when the effect is.
#[derive(Serialize)]
struct Capabilities<'a> {
    effects: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    modify: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    flow: Option<&'a FlowCapability>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inject: Option<Value>,
}

impl<'a> Capabilities<'a> {
    fn of(capability: &'a EventCapability) -> Capabilities<'a> {
        Capabilities {
            effects: capability.effects.iter().map(|e| e.as_str()).collect(),
            modify: capability.modify.map(|m| {
                let ops = json!({"replace": m.replace, "merge": m.merge});
                Map::from_iter([(m.target.as_str().to_owned(), ops)])
            }),
            flow: capability.flow.as_ref(),
            inject: (!capability.inject.is_empty())
                .then(|| json!({"context": {"append": true, "deliverAt": capability.inject}})),
        }
    }
}

/// `hooks/intercept` for one subscription: JSON-RPC id == event id, and what the
/// embedding harness enforces for this event as `capabilities`.
pub fn intercept(
    event: &Event,
    include_native: bool,
    capability: &EventCapability,
    sha256: impl FnOnce(&[u8]) -> String,
) -> Message {
    Message::encode(
        &Request {
            jsonrpc: "2.0",
            id: Some(&event.id),
            method: "hooks/intercept",
            params: Params {
                protocol_version: PROTOCOL_VERSION,
                event: event.to_wire(include_native),
                capabilities: Some(Capabilities::of(capability)),
            },
        },
        sha256,
    )
}

/// `hooks/observe`: a notification, so it has no JSON-RPC id.
pub fn observe(
    event: &Event,
    include_native: bool,
    sha256: impl FnOnce(&[u8]) -> String,
) -> Message {
    Message::encode(
        &Request {
            jsonrpc: "2.0",
            id: None,
            method: "hooks/observe",
            params: Params {
                protocol_version: PROTOCOL_VERSION,
                event: event.to_wire(include_native),
                capabilities: None,
            },
        },
        sha256,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effect::EffectKind;
    use sha2::{Digest, Sha256};

    /// What a host's `sha256` returns.
    fn sha256(bytes: &[u8]) -> String {
        format!("{:x}", Sha256::digest(bytes))
    }

    const EVENT: &str = r#"{"id":"evt_1","source":"urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d",
        "type":"tool.before","time":"2026-08-24T08:51:14Z","session":{"id":"sess_1"},
        "tool":{"name":"Bash","input":{"command":"ls\nrm"},"origin":"native"},
        "call":{"id":"call_1"},"path":"native","native":{"raw":"provider payload"}}"#;

    fn event() -> Event {
        Event::parse_tool_before(EVENT).expect("valid event")
    }

    /// tool.before's capability advertising only `effects`.
    fn only(effects: &[EffectKind]) -> EventCapability {
        let full = crate::events::full(ahp_vocab::InterceptableEvent::ToolBefore);
        crate::events::narrow(&full, effects).expect("a narrowing")
    }

    #[test]
    fn capabilities_carry_each_advertised_effects_options() {
        let full = crate::events::full(ahp_vocab::InterceptableEvent::ToolBefore);
        let v: Value =
            serde_json::from_slice(intercept(&event(), false, &full, sha256).bytes()).unwrap();
        assert_eq!(
            v["params"]["capabilities"],
            json!({
                "effects": ["deny", "allow", "ask", "modify", "inject", "flow", "return", "message"],
                "modify": {"input": {"replace": true, "merge": true}},
                "flow": {"operations": ["stop"]},
                "inject": {"context": {"append": true, "deliverAt": ["now", "next_turn"]}},
            })
        );
    }

    #[test]
    fn intercept_request_correlates_id_with_event_id_and_advertises_effects() {
        let msg = intercept(
            &event(),
            false,
            &only(&[EffectKind::Deny, EffectKind::Ask]),
            sha256,
        );
        let v: Value = serde_json::from_slice(msg.bytes()).unwrap();
        assert_eq!(v["jsonrpc"], "2.0");
        assert_eq!(v["method"], "hooks/intercept");
        assert_eq!(v["id"], "evt_1");
        assert_eq!(v["params"]["event"]["id"], v["id"]);
        assert_eq!(v["params"]["protocolVersion"], "draft");
        assert_eq!(
            v["params"]["capabilities"]["effects"],
            json!(["deny", "ask"])
        );
    }

    #[test]
    fn native_payload_is_sent_only_when_enabled() {
        let without: Value = serde_json::from_slice(
            intercept(&event(), false, &only(&[EffectKind::Deny]), sha256).bytes(),
        )
        .unwrap();
        assert!(without["params"]["event"].get("native").is_none());
        let with: Value = serde_json::from_slice(
            intercept(&event(), true, &only(&[EffectKind::Deny]), sha256).bytes(),
        )
        .unwrap();
        assert_eq!(with["params"]["event"]["native"]["raw"], "provider payload");
    }

    #[test]
    fn encoding_is_deterministic_single_line_and_hashed() {
        let a = intercept(&event(), false, &only(&[EffectKind::Deny]), sha256);
        let b = intercept(&event(), false, &only(&[EffectKind::Deny]), sha256);
        assert_eq!(a, b);
        assert!(
            !a.bytes().contains(&b'\n'),
            "a stdio frame must be one line"
        );
        assert_eq!(a.sha256().len(), 64);
        assert_eq!(a.sha256(), sha256(a.bytes()));
    }

    #[test]
    fn observe_is_a_notification_without_id() {
        let v: Value = serde_json::from_slice(observe(&event(), false, sha256).bytes()).unwrap();
        assert_eq!(v["method"], "hooks/observe");
        assert!(v.get("id").is_none());
        assert_eq!(v["params"]["protocolVersion"], "draft");
    }
}
