//! Strict JSON through the public API: a member named twice is never resolved, and a
//! whole number past 64 bits is never rounded, at any of the three entry points
//! (registration, event, backend reply).
//!
//! The attack this closes: a backend answers with `"result"` twice, a deny first and an
//! empty effect list second. A last-wins reader sees no objection and allows the call; a
//! first-wins reader sees a deny. Neither reading may decide, so the reply is
//! `malformed-json` and the subscription's failure policy applies: fail-closed denies,
//! synthetically. The host here is a fake in the style of `tests/chain.rs`: a virtual
//! clock, one scripted reply per backend, every request recorded.

use ahp_interceptor::effect::EffectKind;
use ahp_interceptor::engine::Engine;
use ahp_interceptor::host_api::{AuthError, DeliveryError, Host, Instant, Reply, NANOS_PER_MS};
use ahp_interceptor::settlement::Settlement;
use ahp_interceptor::vocab::{
    DecidedBy, Decision, Detail, Failure, FailureClass, Outcome, Phase, Problem,
};
use std::collections::HashMap;

const EVENT_ID: &str = "evt_1";
const A: &str = "com.example.a";
const B: &str = "com.example.b";
const SYNTHETIC_REASON: &str = "Required policy backend unavailable.";
const EFFECTS: &[EffectKind] = &[EffectKind::Deny, EffectKind::Allow];

/// A host whose backends each answer once, as scripted, in one virtual millisecond.
#[derive(Default)]
struct FakeHost {
    now: Instant,
    replies: HashMap<String, Reply>,
    sent: Vec<String>,
}

impl FakeHost {
    fn on(mut self, backend: &str, body: &str) -> FakeHost {
        let reply = Reply {
            status: Some(200),
            content_type: Some("application/json".into()),
            body: body.into(),
        };
        self.replies.insert(backend.into(), reply);
        self
    }
}

impl Host for FakeHost {
    type Credential = ();

    fn now(&self) -> Instant {
        self.now
    }

    fn acquire(&mut self, _backend: &str, _deadline: Instant) -> Result<Option<()>, AuthError> {
        Ok(None)
    }

    fn reject(&mut self, _credential: &()) {}

    fn exchange(
        &mut self,
        backend: &str,
        _message: &[u8],
        _credential: Option<&()>,
        _deadline: Instant,
    ) -> Result<Reply, DeliveryError> {
        self.sent.push(backend.into());
        self.now += NANOS_PER_MS;
        let reply = self.replies.remove(backend);
        Ok(reply.unwrap_or_else(|| panic!("unscripted exchange with {backend}")))
    }

    fn interrupted(&self) -> bool {
        false
    }

    fn retry_after(&mut self, _backend: &str, _attempt: u32, _deadline: Instant) -> bool {
        false
    }

    fn sha256(&self, bytes: &[u8]) -> String {
        use sha2::Digest;
        format!("{:x}", sha2::Sha256::digest(bytes))
    }
}

/// `hooks` of two http backends, each with one `tool.before` intercept subscription.
fn registration(policy_a: &str, policy_b: &str) -> String {
    let backend = |id: &str, policy: &str| {
        format!(
            r#"{{"id":"{id}","transport":{{"type":"http","url":"https://{id}/ahp"}},
                "subscriptions":[{{"events":["tool.before"],"mode":"intercept","timeoutMs":500,
                "failurePolicy":"{policy}","content":{{"default":"body"}}}}]}}"#
        )
    };
    format!(
        r#"{{"protocolVersion":"draft","hooks":[{},{}]}}"#,
        backend(A, policy_a),
        backend(B, policy_b)
    )
}

fn event(tool: &str) -> String {
    format!(
        r#"{{"id":"{EVENT_ID}","source":"urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d",
            "type":"tool.before","time":"2026-08-24T08:51:14Z","session":{{"id":"sess_1"}},
            "tool":{tool},"call":{{"id":"call_1"}},"path":"native"}}"#
    )
}

const BASH: &str = r#"{"name":"Bash","input":{"command":"rm -rf build"},"origin":"native"}"#;

fn reply(members: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":"{EVENT_ID}",{members}}}"#)
}

const DENY: &str = r#"{"protocolVersion":"draft","effects":[{"type":"deny","reason":"no"}]}"#;
const NO_EFFECT: &str = r#"{"protocolVersion":"draft","effects":[]}"#;

fn intercept(engine: &Engine, host: &mut FakeHost) -> Settlement {
    engine
        .intercept(host, &event(BASH), EFFECTS, None)
        .expect("a valid call")
}

fn assert_failed_closed_on_a_repeat(settlement: &Settlement) {
    assert_eq!(settlement.decision, Decision::Deny);
    assert_eq!(settlement.decided_by, DecidedBy::SyntheticDeny);
    assert_eq!(settlement.reason.as_deref(), Some(SYNTHETIC_REASON));
    let first = &settlement.interceptors[0];
    assert_eq!(first.outcome, Outcome::FailedClosed);
    assert_eq!(
        first.failure,
        Some(
            Failure::new(FailureClass::MalformedJson, Phase::Parse)
                .with_detail(Detail::DuplicateKey)
        )
    );
}

#[test]
fn a_fail_closed_backend_repeating_result_is_a_synthetic_deny_whichever_comes_last() {
    for members in [
        format!(r#""result":{DENY},"result":{NO_EFFECT}"#),
        format!(r#""result":{NO_EFFECT},"result":{DENY}"#),
    ] {
        let engine = Engine::load(&registration("fail-closed", "fail-open")).expect("valid");
        let mut host = FakeHost::default()
            .on(A, &reply(&members))
            .on(B, &reply(&format!(r#""result":{NO_EFFECT}"#)));
        let settlement = intercept(&engine, &mut host);
        assert_failed_closed_on_a_repeat(&settlement);
        assert_eq!(host.sent, [A], "the chain stops at the fail-closed failure");
        let record = serde_json::to_value(settlement.record()).expect("a record serializes");
        assert_eq!(record["decidedBy"], "synthetic-deny");
        assert_eq!(
            record["interceptors"][0]["failure"]["detail"],
            "duplicate-key"
        );
    }
}

#[test]
fn a_repeat_deep_in_an_effect_is_as_malformed_as_one_at_the_top() {
    let effects = r#"[{"type":"deny","reason":"no","type":"allow"}]"#;
    let members = format!(r#""result":{{"protocolVersion":"draft","effects":{effects}}}"#);
    let engine = Engine::load(&registration("fail-closed", "fail-open")).expect("valid");
    let mut host = FakeHost::default().on(A, &reply(&members));
    assert_failed_closed_on_a_repeat(&intercept(&engine, &mut host));
}

#[test]
fn a_fail_open_backend_repeating_result_is_skipped_not_believed() {
    let members = format!(r#""result":{NO_EFFECT},"result":{DENY}"#);
    let engine = Engine::load(&registration("fail-open", "fail-open")).expect("valid");
    let mut host = FakeHost::default()
        .on(A, &reply(&members))
        .on(B, &reply(&format!(r#""result":{DENY}"#)));
    let settlement = intercept(&engine, &mut host);
    assert_eq!(host.sent, [A, B]);
    assert_eq!(settlement.interceptors[0].outcome, Outcome::FailedOpen);
    assert_eq!(settlement.decided_by, DecidedBy::BackendDeny);
    assert_eq!(settlement.reason.as_deref(), Some("no"));
}

#[test]
fn a_registration_repeating_a_failure_policy_is_rejected_at_that_member() {
    let text = registration("fail-closed", "fail-open").replacen(
        r#""failurePolicy":"fail-closed""#,
        r#""failurePolicy":"fail-closed","failurePolicy":"fail-open""#,
        1,
    );
    let problems = Engine::load(&text).expect_err("rejected");
    assert_eq!(
        problems,
        [Problem::new(
            "/hooks/0/subscriptions/0/failurePolicy",
            "duplicate member `failurePolicy`"
        )]
    );
}

#[test]
fn an_event_repeating_a_tool_member_is_rejected_and_nothing_is_sent() {
    let engine = Engine::load(&registration("fail-closed", "fail-open")).expect("valid");
    let mut host = FakeHost::default();
    let tool = r#"{"name":"Read","input":{"command":"ls","command":"rm -rf /"},"origin":"native"}"#;
    let problems = engine
        .intercept(&mut host, &event(tool), EFFECTS, None)
        .expect_err("rejected");
    assert_eq!(
        problems,
        [Problem::new(
            "event/tool/input/command",
            "duplicate member `command`"
        )]
    );
    assert!(host.sent.is_empty());
}

/// The value the tool would get and the value the backend judged must be one: a whole
/// number past 64 bits, which would be written back as a float, is refused at each entry
/// point, as a repeat is.
const HUGE: &str = "123456789012345678901234567890";
const INEXACT: &str =
    "must be a whole number of at most 64 bits: a larger one would be passed on as another number";

/// Only a reply's effect values are written back: the same number in its extensions is
/// valid JSON that changes nothing, so a fail-open backend's deny there still decides.
#[test]
fn a_reply_with_a_number_past_64_bits_in_its_extensions_is_taken_as_it_stands() {
    let members = format!(
        r#""result":{{"protocolVersion":"draft","effects":[{{"type":"deny","reason":"no"}}],"extensions":{{"com.example.n":{HUGE}}}}}"#
    );
    let engine = Engine::load(&registration("fail-open", "fail-open")).expect("valid");
    let mut host = FakeHost::default().on(A, &reply(&members));
    let settlement = intercept(&engine, &mut host);
    assert_eq!(host.sent, [A], "the deny ends the chain");
    assert_eq!(
        (settlement.decision, settlement.decided_by),
        (Decision::Deny, DecidedBy::BackendDeny)
    );
    assert_eq!(settlement.reason.as_deref(), Some("no"));
    assert_eq!(settlement.interceptors[0].failure, None);
}

#[test]
fn a_reply_modifying_the_input_with_a_number_past_64_bits_is_malformed_under_its_policy() {
    let members = format!(
        r#""result":{{"protocolVersion":"draft","effects":[{{"type":"modify","target":"input","operation":"replace","value":{{"account":{HUGE}}}}}]}}"#
    );
    let engine = Engine::load(&registration("fail-closed", "fail-open")).expect("valid");
    let mut host = FakeHost::default().on(A, &reply(&members));
    let modifying = [EffectKind::Deny, EffectKind::Allow, EffectKind::Modify];
    let settlement = engine
        .intercept(&mut host, &event(BASH), &modifying, None)
        .expect("a valid call");
    assert_eq!(
        (settlement.decision, settlement.decided_by),
        (Decision::Deny, DecidedBy::SyntheticDeny)
    );
    assert_eq!(
        settlement.interceptors[0].failure,
        Some(Failure::new(FailureClass::MalformedJson, Phase::Parse).with_effect(0))
    );
}

#[test]
fn an_event_with_a_number_past_64_bits_is_rejected_at_it_and_nothing_is_sent() {
    let engine = Engine::load(&registration("fail-closed", "fail-open")).expect("valid");
    let mut host = FakeHost::default();
    let tool = format!(r#"{{"name":"Pay","input":{{"account":{HUGE}}},"origin":"native"}}"#);
    let problems = engine
        .intercept(&mut host, &event(&tool), EFFECTS, None)
        .expect_err("rejected");
    assert_eq!(
        problems,
        [Problem::new("event/tool/input/account", INEXACT)],
        "named where it is, its digits not repeated"
    );
    assert!(host.sent.is_empty());
}

/// A registration is only read, never passed on: a count past 64 bits is refused at it
/// for its size (not as no whole number), its digits not repeated.
#[test]
fn a_registration_with_a_number_past_64_bits_is_rejected_at_it() {
    let text = registration("fail-closed", "fail-open").replacen(
        r#""timeoutMs":500"#,
        &format!(r#""timeoutMs":{HUGE}"#),
        1,
    );
    let problems = Engine::load(&text).expect_err("rejected");
    let too_large = format!("is too large: at most {} milliseconds", u64::MAX);
    assert_eq!(
        problems,
        [Problem::new(
            "/hooks/0/subscriptions/0/timeoutMs",
            &too_large
        )]
    );
}
