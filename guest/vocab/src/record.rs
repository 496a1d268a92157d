//! The settlement record: one JSON object per hook call (DESIGN.md §4). The CLI prints
//! exactly this, and the audit log holds exactly this.

use crate::{
    DecidedBy, Decision, DeliverAt, EffectKind, Failure, FailureClass, FailurePolicy,
    FlowOperation, Outcome,
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The record of one hook call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "RecordText")]
pub struct Record {
    pub event: EventRef,
    pub decision: Decision,
    pub decided_by: DecidedBy,
    /// Shown to the model: the backend's own reason for an explicit deny, or the generic
    /// reason of a synthetic one; never transport details.
    pub reason: Option<String>,
    /// `message` effects accepted from backends, in chain order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
    /// What the harness must enforce besides the decision, all from accepted effects.
    #[serde(flatten)]
    pub enforce: Enforce,
    pub elapsed_ms: u64,
    pub interceptors: Vec<InterceptorEntry>,
    pub observers: Vec<ObserverEntry>,
}

/// A [`Record`] as read: [`Enforce`]'s members at the top level, named one by one.
/// `#[serde(flatten)]` would read the whole record into a generic buffered tree first and
/// then read the fields from that; the host reads a record back on every hook call. The
/// compiler keeps the two lists in step: `From` names every field of both.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecordText {
    event: EventRef,
    decision: Decision,
    decided_by: DecidedBy,
    reason: Option<String>,
    #[serde(default)]
    messages: Vec<String>,
    #[serde(default)]
    effective: serde_json::Map<String, serde_json::Value>,
    #[serde(default, deserialize_with = "present")]
    returned: Option<serde_json::Value>,
    #[serde(default)]
    injections: Vec<Injection>,
    #[serde(default)]
    flow: Option<Flow>,
    elapsed_ms: u64,
    interceptors: Vec<InterceptorEntry>,
    observers: Vec<ObserverEntry>,
}

impl From<RecordText> for Record {
    fn from(text: RecordText) -> Record {
        Record {
            event: text.event,
            decision: text.decision,
            decided_by: text.decided_by,
            reason: text.reason,
            messages: text.messages,
            enforce: Enforce {
                effective: text.effective,
                returned: text.returned,
                injections: text.injections,
                flow: text.flow,
            },
            elapsed_ms: text.elapsed_ms,
            interceptors: text.interceptors,
            observers: text.observers,
        }
    }
}

/// The accepted `modify`, `return`, `inject` and `flow` effects of a call, composed in
/// chain order: what the harness must apply. Every member is absent when empty, so a
/// call without such effects has the record it always had.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforce {
    /// The accepted effective value of each modified target, keyed by the target word
    /// (`effective.input`): what the operation must use instead of the original.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub effective: serde_json::Map<String, serde_json::Value>,
    /// A supplied result: the original execution is skipped, policy still applies. A
    /// `null` result is one (`"returned": null`), told apart from none (no member).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub returned: Option<serde_json::Value>,
    /// Context to append, in chain order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub injections: Vec<Injection>,
    /// The settled flow operation, when a backend asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Flow>,
}

/// A member that is there is `Some`, `null` included: serde reads a `null` `Option` as
/// none, and a backend's supplied result of `null` would be read back as no result,
/// so the operation it replaces would run.
fn present<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(deserializer).map(Some)
}

/// One accepted `inject`: canonical messages appended to the context.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Injection {
    pub deliver_at: DeliverAt,
    pub value: serde_json::Value,
}

/// The settled `flow`: stop (with the backend's reason) beats continue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flow {
    pub operation: FlowOperation,
    /// A stop's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A continue's instructions: every accepted continue's, in chain order (the request
    /// state's `instructions[]`), so that no backend's is dropped for a later one's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instructions: Vec<String>,
}

impl Record {
    /// A denial the host settles itself (engine failure, shutdown), with the generic
    /// reason of `decided_by` and no interceptor ever called.
    pub fn host_denial(event: EventRef, decided_by: DecidedBy, elapsed_ms: u64) -> Record {
        Record {
            event,
            decision: Decision::Deny,
            decided_by,
            reason: decided_by.generic_reason().map(str::to_string),
            messages: Vec::new(),
            enforce: Enforce::default(),
            elapsed_ms,
            interceptors: Vec::new(),
            observers: Vec::new(),
        }
    }

    /// The record as JSON on one line for any reader, as the CLI prints it and the audit
    /// log stores it (without the newline). serde_json writes U+2028, U+2029, NEL, DEL
    /// and the other C1 controls raw, and readers that split on Unicode line breaks
    /// (Python's `splitlines`, some log shippers) would see a line end inside a backend's
    /// reason, and the text after it as a record of its own. They can only stand inside
    /// strings, so their `\u` escapes give the same JSON value on one line.
    pub fn to_line(&self) -> serde_json::Result<String> {
        use std::fmt::Write as _;
        let json = serde_json::to_string(self)?;
        let mut line = String::with_capacity(json.len());
        for c in json.chars() {
            if is_line_break_to_escape(c) {
                // Writing to a String cannot fail.
                let _ = write!(line, "\\u{:04x}", c as u32);
            } else {
                line.push(c);
            }
        }
        Ok(line)
    }
}

fn is_line_break_to_escape(c: char) -> bool {
    matches!(c, '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}')
}

impl std::fmt::Display for Record {
    /// [`Record::to_line`].
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let line = self.to_line().map_err(|_| std::fmt::Error)?;
        f.write_str(&line)
    }
}

/// Identity of the event a record is about. Every field is optional: a record the host
/// settles for an event it could not parse carries what could be read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRef {
    pub id: Option<String>,
    #[serde(rename = "type")]
    pub event_type: Option<String>,
    pub session: Option<String>,
    pub call: Option<String>,
}

impl EventRef {
    /// As much identity as can be read from event text that may be invalid: the record
    /// of a call that failed before or around the component still names its event.
    pub fn read(event: &str) -> EventRef {
        EventRef::of(&serde_json::from_str(event).unwrap_or_default())
    }

    /// [`EventRef::read`] of an event in hand: nothing to parse, so nothing (a nesting
    /// deeper than a parser takes) to lose.
    pub fn of(event: &serde_json::Value) -> EventRef {
        let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
        EventRef {
            id: text(&event["id"]),
            event_type: text(&event["type"]),
            session: text(&event["session"]["id"]),
            call: text(&event["call"]["id"]),
        }
    }
}

/// The audit entry of one matching intercept subscription.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterceptorEntry {
    pub backend: String,
    /// Position within its backend's `subscriptions` (the local subscription id).
    pub subscription: usize,
    pub policy: FailurePolicy,
    pub timeout_ms: u64,
    pub outcome: Outcome,
    /// The reverse-DNS policy code of the backend's `deny`, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The kinds of the effects accepted from this interceptor, each once, in reply
    /// order: who modified, returned or injected, which `outcome` alone does not say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<EffectKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    pub attempts: Vec<AttemptEntry>,
    /// SHA-256 of the exact request bytes; absent when no request was encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_sha256: Option<String>,
}

/// One delivery attempt of an intercept request. Every retry resends the same bytes, so
/// each attempt names the same `requestSha256`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptEntry {
    pub n: u32,
    pub elapsed_ms: u64,
    pub result: AttemptResult,
    /// A failed attempt's HTTP status and JSON-RPC error code (local diagnostics, as in
    /// [`Failure`]): an earlier attempt's would otherwise be lost to the last one's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_code: Option<i64>,
    pub request_sha256: Option<String>,
}

/// How one attempt ended: accepted, a 401, interrupted, or a failure class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptResult {
    Accepted,
    /// HTTP 401: the credential was dropped; one re-acquisition may follow.
    Unauthorized,
    Interrupted,
    Failed(FailureClass),
}

/// Why an observe notification was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ObserverKind {
    /// A matching interceptor that a deny or fail-closed stop kept from being called
    /// gets the event as a best-effort observe (digest §6.1).
    ShortCircuit,
    /// An observe subscription matching the hook call's own event, sent by the call
    /// after its decision is handed out (digest §8, delivery ownership).
    Owned,
    /// A `hook.failure` the call reports to another backend's observe subscription: an
    /// interceptor's operational failure, settled by its policy (digest §14, conformance
    /// O10).
    HookFailure,
}

/// One best-effort observe notification owned by the hook call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObserverEntry {
    pub backend: String,
    /// Position within its backend's `subscriptions` (the local subscription id): a
    /// backend with two observe subscriptions gets one entry for each.
    pub subscription: usize,
    pub kind: ObserverKind,
    /// For a `hook-failure`: the place in `interceptors` of the failure it reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reports: Option<usize>,
    /// The digest of the notification's bytes; absent exactly when it was withheld
    /// (never sent, and not hashed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_sha256: Option<String>,
    /// Set by the host once the delivery ended; in the component's own record, absent
    /// but for a notification the component withheld ([`ObserverResult::Withheld`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ObserverResult>,
}

/// How one observer delivery ended. Failures use the intercept failure classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObserverResult {
    Delivered,
    /// Never started: the call was interrupted, shut down or dropped before completion.
    NotSent,
    Interrupted,
    /// Never sent: the call's notifications had already taken up the component's
    /// observer limit and this one would have gone past it, or the time to prepare them
    /// had run out before it. The component sets it; an observer must not change a
    /// decision by exhausting the instance's memory or the call's time.
    Withheld,
    Failed(FailureClass),
}

/// `words!`-like spelling for the two result enums that embed a failure class.
macro_rules! spelled_with_class {
    ($name:ident { $($variant:ident = $word:literal),* }) => {
        impl $name {
            /// The word the audit records: its own, or the failure class.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $word, )*
                    $name::Failed(class) => class.as_str(),
                }
            }

            /// The result spelled `word`, if any.
            pub fn parse(word: &str) -> Option<$name> {
                match word {
                    $( $word => Some($name::$variant), )*
                    _ => FailureClass::parse(word).map($name::Failed),
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let word = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                $name::parse(&word).ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        concat!("unknown ", stringify!($name), " `{}`"),
                        word
                    ))
                })
            }
        }
    };
}

spelled_with_class!(AttemptResult {
    Accepted = "accepted",
    Unauthorized = "unauthorized",
    Interrupted = "interrupted"
});
spelled_with_class!(ObserverResult {
    Delivered = "delivered",
    NotSent = "not-sent",
    Interrupted = "interrupted",
    Withheld = "withheld"
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Detail, Phase};
    use serde_json::json;

    fn sample() -> Record {
        Record {
            event: EventRef {
                id: Some("evt_1".into()),
                event_type: Some("tool.before".into()),
                session: Some("sess_1".into()),
                call: None,
            },
            decision: Decision::Deny,
            decided_by: DecidedBy::SyntheticDeny,
            reason: DecidedBy::SyntheticDeny.generic_reason().map(Into::into),
            messages: Vec::new(),
            enforce: Enforce::default(),
            elapsed_ms: 751,
            interceptors: vec![InterceptorEntry {
                backend: "com.example.policy".into(),
                subscription: 0,
                policy: FailurePolicy::FailClosed,
                timeout_ms: 750,
                outcome: Outcome::FailedClosed,
                code: None,
                effects: Vec::new(),
                failure: Some(
                    Failure::new(FailureClass::AuthFailed, Phase::AcquireCredential)
                        .with_detail(Detail::DeadlineExceeded),
                ),
                attempts: vec![AttemptEntry {
                    n: 1,
                    elapsed_ms: 750,
                    result: AttemptResult::Failed(FailureClass::AuthFailed),
                    http_status: None,
                    rpc_code: None,
                    request_sha256: Some("ab".into()),
                }],
                request_sha256: Some("ab".into()),
            }],
            observers: vec![ObserverEntry {
                backend: "com.example.audit".into(),
                subscription: 1,
                kind: ObserverKind::ShortCircuit,
                reports: None,
                request_sha256: Some("cd".into()),
                result: Some(ObserverResult::Failed(FailureClass::ConnectionRefused)),
            }],
        }
    }

    #[test]
    fn the_record_has_the_documented_shape() {
        assert_eq!(
            serde_json::to_value(sample()).unwrap(),
            json!({
                "event": {"id": "evt_1", "type": "tool.before", "session": "sess_1", "call": null},
                "decision": "deny",
                "decidedBy": "synthetic-deny",
                "reason": "Required policy backend unavailable.",
                "elapsedMs": 751,
                "interceptors": [{
                    "backend": "com.example.policy", "subscription": 0,
                    "policy": "fail-closed", "timeoutMs": 750, "outcome": "failed-closed",
                    "failure": {"class": "auth-failed", "phase": "acquire-credential",
                                "detail": "deadline-exceeded"},
                    "attempts": [{"n": 1, "elapsedMs": 750, "result": "auth-failed",
                                  "requestSha256": "ab"}],
                    "requestSha256": "ab"
                }],
                "observers": [{"backend": "com.example.audit", "subscription": 1,
                               "kind": "short-circuit", "requestSha256": "cd",
                               "result": "connection-refused"}]
            })
        );
    }

    #[test]
    fn the_record_reads_back_as_written() {
        let text = serde_json::to_string(&sample()).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), sample());
    }

    /// The members of [`Enforce`] stand at the top level of the record and read back
    /// into it (fails if one is missed by the reading).
    #[test]
    fn enforced_effects_read_back_from_the_top_level() {
        let mut record = sample();
        record.enforce = Enforce {
            effective: json!({"input": {"command": "ls"}})
                .as_object()
                .cloned()
                .unwrap(),
            returned: Some(json!({"ok": true})),
            injections: vec![Injection {
                deliver_at: DeliverAt::NextTurn,
                value: json!([{"role": "user", "content": "hi"}]),
            }],
            flow: Some(Flow {
                operation: FlowOperation::Stop,
                reason: Some("done".into()),
                instructions: Vec::new(),
            }),
        };
        let value = serde_json::to_value(&record).unwrap();
        for member in ["effective", "returned", "injections", "flow"] {
            assert!(value.get(member).is_some(), "{member} at the top level");
        }
        let text = value.to_string();
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), record);
    }

    /// A supplied result of `null` is a result: it reads back as one, and a record
    /// with no `returned` member reads back with none.
    #[test]
    fn a_null_result_reads_back_as_a_result() {
        let mut record = sample();
        record.enforce.returned = Some(serde_json::Value::Null);
        let text = serde_json::to_string(&record).unwrap();
        assert!(text.contains(r#""returned":null"#), "{text}");
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), record);
        let enforce: Enforce = serde_json::from_str(r#"{"returned":null}"#).unwrap();
        assert_eq!(enforce.returned, Some(serde_json::Value::Null));
        let none = serde_json::to_string(&sample()).unwrap();
        let read = serde_json::from_str::<Record>(&none).unwrap();
        assert_eq!(read.enforce.returned, None);
    }

    #[test]
    fn unknown_words_are_refused_when_reading_a_record() {
        let mut value = serde_json::to_value(sample()).unwrap();
        value["interceptors"][0]["attempts"][0]["result"] = "maybe".into();
        let error = serde_json::from_value::<Record>(value).unwrap_err();
        assert!(
            error.to_string().contains("unknown AttemptResult `maybe`"),
            "{error}"
        );
    }

    #[test]
    fn event_identity_is_read_from_whatever_parses() {
        let full = r#"{"id":"e","type":"tool.before","session":{"id":"s"},"call":{"id":"c"}}"#;
        assert_eq!(
            EventRef::read(full),
            EventRef {
                id: Some("e".into()),
                event_type: Some("tool.before".into()),
                session: Some("s".into()),
                call: Some("c".into()),
            }
        );
        let odd = r#"{"id":7,"type":"tool.before","session":"flat"}"#;
        let read = EventRef::read(odd);
        assert_eq!(
            (read.id, read.event_type),
            (None, Some("tool.before".into()))
        );
        assert_eq!(EventRef::read("not json"), EventRef::default());
    }

    #[test]
    fn host_denials_carry_the_generic_reason() {
        let r = Record::host_denial(EventRef::default(), DecidedBy::EngineFailure, 3);
        assert_eq!(r.decision, Decision::Deny);
        assert_eq!(r.reason.as_deref(), Some("Policy evaluation failed."));
    }
}
