//! JSON-RPC messages, encoded once.
//!
//! A [`Message`] is built from a validated event and then frozen: it exposes its bytes
//! and their SHA-256, and nothing that could change them. A retry therefore resends the
//! exact bytes of the first attempt (same event id, JSON-RPC id, session, call and
//! content) by construction, not by care (failure-semantics.md, "Duplicate delivery and
//! retries").

use crate::event::Event;
use crate::registration::View;
use ahp_vocab::{Capabilities, EventCapability, PROTOCOL_VERSION};
use serde::ser::Serialize;

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
    /// `{"jsonrpc":"2.0","id":…,"method":…,"params":{"protocolVersion":…,"event":…,
    /// "capabilities":…}}`, `id` and `capabilities` only when given. Written part by
    /// part so that the event can go as the harness wrote it (see [`Event::write_wire`]).
    /// Every part is one line, so the message is also a valid stdio frame.
    fn write(
        id: Option<&str>,
        method: &str,
        event: &Event,
        view: &View,
        capabilities: Option<Capabilities<'_>>,
    ) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(REQUEST_CAPACITY);
        bytes.extend_from_slice(br#"{"jsonrpc":"2.0","#);
        if let Some(id) = id {
            bytes.extend_from_slice(br#""id":"#);
            write_json(&mut bytes, id);
            bytes.push(b',');
        }
        bytes.extend_from_slice(br#""method":"#);
        write_json(&mut bytes, method);
        bytes.extend_from_slice(br#","params":{"protocolVersion":"#);
        write_json(&mut bytes, PROTOCOL_VERSION);
        bytes.extend_from_slice(br#","event":"#);
        event.write_wire(view, &mut bytes);
        if let Some(capabilities) = capabilities {
            bytes.extend_from_slice(br#","capabilities":"#);
            write_json(&mut bytes, &capabilities);
        }
        bytes.extend_from_slice(b"}}");
        bytes
    }

    /// The message of `bytes`, frozen with their digest. `sha256` is
    /// [`crate::host_api::Host::sha256`]: the host hashes.
    fn sealed(bytes: Vec<u8>, sha256: impl FnOnce(&[u8]) -> String) -> Message {
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

    /// The bytes, moved out: the component hands them over without a copy.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// An encoded `hooks/observe` notification, not yet hashed: whether it is sent at all
/// depends on its length (see `observers`), and one that is not is never hashed.
pub struct Notification(Vec<u8>);

impl Notification {
    /// How many bytes it holds.
    pub fn size(&self) -> usize {
        self.0.len()
    }

    /// The message to send, frozen with its digest.
    pub fn seal(self, sha256: impl FnOnce(&[u8]) -> String) -> Message {
        Message::sealed(self.0, sha256)
    }
}

/// Appends `value` as compact JSON. Strings, words and the declaration's blocks cannot
/// fail to serialize into a `Vec`.
fn write_json(out: &mut Vec<u8>, value: &(impl Serialize + ?Sized)) {
    let _ = serde_json::to_writer(out, value);
}

/// `hooks/intercept` for one subscription: JSON-RPC id == event id, and what the
/// embedding harness enforces for this event as `capabilities`.
pub fn intercept(
    event: &Event,
    view: &View,
    capability: &EventCapability,
    sha256: impl FnOnce(&[u8]) -> String,
) -> Message {
    let bytes = Message::write(
        Some(&event.id),
        "hooks/intercept",
        event,
        view,
        Some(Capabilities(capability)),
    );
    Message::sealed(bytes, sha256)
}

/// `hooks/observe`: a notification, so it has no JSON-RPC id. Its buffer is cut to its
/// length: a call holds many (`observers`), and a grown buffer can be twice as long.
pub fn observe(event: &Event, view: &View) -> Notification {
    let mut bytes = Message::write(None, "hooks/observe", event, view, None);
    bytes.shrink_to_fit();
    Notification(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::{Content, Selection};
    use crate::effect::EffectKind;
    use serde_json::{json, Value};
    use sha2::{Digest, Sha256};

    /// What one subscription sees: every part's description, `native` if included.
    fn view(include_native: bool) -> View {
        View {
            include_native,
            content: Content::all(Selection::Metadata),
        }
    }

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
            serde_json::from_slice(intercept(&event(), &view(false), &full, sha256).bytes())
                .unwrap();
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
            &view(false),
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
            intercept(&event(), &view(false), &only(&[EffectKind::Deny]), sha256).bytes(),
        )
        .unwrap();
        assert!(without["params"]["event"].get("native").is_none());
        let with: Value = serde_json::from_slice(
            intercept(&event(), &view(true), &only(&[EffectKind::Deny]), sha256).bytes(),
        )
        .unwrap();
        assert_eq!(with["params"]["event"]["native"]["raw"], "provider payload");
    }

    #[test]
    fn encoding_is_deterministic_single_line_and_hashed() {
        let a = intercept(&event(), &view(false), &only(&[EffectKind::Deny]), sha256);
        let b = intercept(&event(), &view(false), &only(&[EffectKind::Deny]), sha256);
        assert_eq!(a, b);
        assert!(
            !a.bytes().contains(&b'\n'),
            "a stdio frame must be one line"
        );
        assert_eq!(a.sha256().len(), 64);
        assert_eq!(a.sha256(), sha256(a.bytes()));
    }

    #[test]
    fn the_envelope_is_written_around_the_events_own_text() {
        let text = r#"{"id":"e\"1","source":"urn:x","type":"tool.before","time":"2026-08-24T08:51:14Z","session":{"id":"s"},"call":{"id":"c"},"tool":{"name":"Bash","input":{},"origin":"native"},"path":"native"}"#;
        let event = Event::parse_tool_before(text).expect("valid event");
        let sent = intercept(&event, &view(false), &only(&[EffectKind::Deny]), sha256);
        let expected = format!(
            r#"{{"jsonrpc":"2.0","id":"e\"1","method":"hooks/intercept","params":{{"protocolVersion":"draft","event":{text},"capabilities":{{"effects":["deny"]}}}}}}"#
        );
        assert_eq!(String::from_utf8_lossy(sent.bytes()), expected);
        let notification = observe(&event, &view(false)).seal(sha256);
        let expected = format!(
            r#"{{"jsonrpc":"2.0","method":"hooks/observe","params":{{"protocolVersion":"draft","event":{text}}}}}"#
        );
        assert_eq!(String::from_utf8_lossy(notification.bytes()), expected);
    }

    /// A call holds many notifications: each holds no more memory than its bytes (an
    /// event of 100,000 bytes grows the buffer past twice that before it is cut).
    #[test]
    fn an_observe_notification_holds_no_more_than_its_bytes() {
        let mut large: Value = serde_json::from_str(EVENT).unwrap();
        large["tool"]["input"]["command"] = json!("x".repeat(100_000));
        let event = Event::parse_tool_before(&large.to_string()).unwrap();
        let message = observe(&event, &view(true)).seal(sha256);
        assert_eq!(message.bytes.capacity(), message.bytes.len());
        assert!(message.bytes.len() > 100_000);
    }

    #[test]
    fn observe_is_a_notification_without_id() {
        let v: Value =
            serde_json::from_slice(observe(&event(), &view(false)).seal(sha256).bytes()).unwrap();
        assert_eq!(v["method"], "hooks/observe");
        assert!(v.get("id").is_none());
        assert_eq!(v["params"]["protocolVersion"], "draft");
    }
}
