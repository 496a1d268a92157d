//! Composition of effects across interceptors, when the harness can enforce more than
//! deny: deny beats ask beats allow, `allow` never grants beyond "no objection", an
//! accepted earlier answer survives a later fail-open failure, and conflicting effects in
//! one response reject that response.

use ahp_host::{DecidedBy, Decision, EffectKind, Settlement};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{event, interceptor, record_json, registration, Http};
use serde_json::json;
use Behaviour::Effects;

const ALL: &[EffectKind] = &[
    EffectKind::Deny,
    EffectKind::Ask,
    EffectKind::Allow,
    EffectKind::Message,
    EffectKind::Return,
];

/// Registers `hooks` in order and settles event `event_id`, declaring every effect.
async fn settle(hooks: &[Http<'_>], event_id: &str) -> Settlement {
    interceptor(&registration(hooks))
        .await
        .intercept(&event(event_id), ALL, None)
        .await
        .expect("call")
}

/// Runs A then B (both fail-open) and returns the settlement.
async fn chain(a: Behaviour, b: Behaviour) -> Settlement {
    let (first, second) = (
        FaultBackend::start(vec![a]).await,
        FaultBackend::start(vec![b]).await,
    );
    let hooks = [
        Http::new("com.example.a", first.url()).policy("fail-open"),
        Http::new("com.example.b", second.url()).policy("fail-open"),
    ];
    settle(&hooks, "evt_comp").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composition_table() {
    let allow = || Effects(json!([{"type": "allow"}]));
    let ask = || Effects(json!([{"type": "ask"}]));
    let deny = || Behaviour::Deny("B says no".into());
    let message = |text: &str| Effects(json!([{"type": "message", "text": text}]));
    let cases: Vec<(&str, Behaviour, Behaviour, Decision, DecidedBy)> = vec![
        (
            "allow then deny",
            allow(),
            deny(),
            Decision::Deny,
            DecidedBy::BackendDeny,
        ),
        (
            "ask then allow",
            ask(),
            allow(),
            Decision::Ask,
            DecidedBy::BackendAsk,
        ),
        (
            "allow then ask",
            allow(),
            ask(),
            Decision::Ask,
            DecidedBy::BackendAsk,
        ),
        (
            "ask then deny",
            ask(),
            deny(),
            Decision::Deny,
            DecidedBy::BackendDeny,
        ),
        (
            "allow then nothing",
            allow(),
            Behaviour::NoEffect,
            Decision::Allow,
            DecidedBy::NoObjection,
        ),
        (
            "ask then fail-open failure",
            ask(),
            Behaviour::Reset,
            Decision::Ask,
            DecidedBy::BackendAsk,
        ),
        (
            "message then deny",
            message("heads up"),
            deny(),
            Decision::Deny,
            DecidedBy::BackendDeny,
        ),
    ];
    for (name, a, b, decision, decided_by) in cases {
        let settled = chain(a, b).await;
        assert_eq!(
            (settled.decision, settled.decided_by),
            (decision, decided_by),
            "{name}: {}",
            settled.record
        );
        assert_eq!(
            record_json(&settled)["decision"],
            json!(format!("{decision:?}").to_lowercase()),
            "{name}"
        );
        // A denial is the denying backend's, in its words, whatever came before it.
        if decision == Decision::Deny {
            assert_eq!(settled.reason.as_deref(), Some("B says no"), "{name}");
        }
        // A message accepted before a deny stays (only interruption clears them).
        if name == "message then deny" {
            let messages = &record_json(&settled)["messages"];
            assert!(
                messages.to_string().contains("heads up"),
                "{name}: {messages}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_messages_are_recorded_and_a_rejected_response_shows_none() {
    let settled = chain(
        Effects(json!([{"type": "message", "text": "from A"}])),
        Behaviour::NoEffect,
    )
    .await;
    assert_eq!(record_json(&settled)["messages"], json!(["from A"]));
    // A message followed by an unknown effect: the whole response is rejected, the
    // message is never shown.
    let settled = chain(
        Effects(
            json!([{"type": "message", "text": "never shown"}, {"type": "com.example.unknown"}]),
        ),
        Behaviour::NoEffect,
    )
    .await;
    assert!(
        record_json(&settled).get("messages").is_none(),
        "{}",
        settled.record
    );
    assert_eq!(
        record_json(&settled)["interceptors"][0]["failure"]["class"],
        "invalid-effects"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicting_effects_in_one_response_are_invalid_under_either_policy() {
    let allow_and_deny = json!([{"type": "allow"}, {"type": "deny", "reason": "x"}]);
    let two_results = json!([
        {"type": "return", "value": "one result"},
        {"type": "deny", "reason": "x"},
        {"type": "return", "value": "another"}
    ]);
    for (policy, decision, decided_by, reply) in [
        (
            "fail-open",
            Decision::Allow,
            DecidedBy::NoObjection,
            &allow_and_deny,
        ),
        (
            "fail-closed",
            Decision::Deny,
            DecidedBy::SyntheticDeny,
            &allow_and_deny,
        ),
        (
            "fail-open",
            Decision::Allow,
            DecidedBy::NoObjection,
            &two_results,
        ),
        (
            "fail-closed",
            Decision::Deny,
            DecidedBy::SyntheticDeny,
            &two_results,
        ),
    ] {
        let backend = FaultBackend::start(vec![Effects(reply.clone())]).await;
        let hook = Http::new("com.example.a", backend.url()).policy(policy);
        let settled = settle(&[hook], "evt_conflict").await;
        assert_eq!(settled.decision, decision, "{policy}: {}", settled.record);
        let failure = &record_json(&settled)["interceptors"][0]["failure"];
        assert_eq!(failure["class"], "invalid-effects");
        assert_eq!(failure["detail"], "conflicting-effects");
        assert_ne!(
            settled.decided_by,
            DecidedBy::BackendDeny,
            "a deny is never salvaged from an invalid list"
        );
        assert_eq!(
            settled.decided_by, decided_by,
            "{policy}: {}",
            settled.record
        );
    }
}
