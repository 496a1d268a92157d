//! Every interceptable event through the real component and host, against loopback fault
//! backends (digest §6 rule 6, §4.4, §8; failure-semantics.md).
//!
//! The events and the effects each allows are read from the upstream
//! `capabilities.schema.json`, not from the component's own table, and each event is the
//! shared example of `tests/src/valid_events.json` (every required member, and the value
//! of its modify target). For each of the 19 events: it is intercepted (the request
//! carries the event and exactly the advertised effects); a backend deny is the backend's
//! deny where the event has one; an accepted flow stop is a deny where the event has
//! flow; a deadline is a synthetic deny under fail-closed and passes under fail-open; an
//! unadvertised effect is `invalid-effects`, settled by the policy.
//!
//! One backend per behaviour serves every event; each registration subscribes one
//! interceptor to all 19 events, and the calls run concurrently.

use ahp_host::vocab::InterceptableEvent;
use ahp_host::{DecidedBy, Decision, EffectKind, Interceptor, Settlement};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    interceptor, record_json, registration_on, valid_event, Http, SYNTHETIC_REASON,
};
use serde_json::{json, Value};

const ID: &str = "com.example.every";
/// Short: the deadline cases wait it out.
const DEADLINE_MS: u64 = 150;
/// Long: nineteen calls at once on a loaded machine never come near it.
const TIMEOUT_MS: u64 = 10_000;
const POLICIES: [&str; 2] = ["fail-closed", "fail-open"];
const STOP_REASON: &str = "Enough for this turn.";
const DENY_REASON: &str = "Not on this event.";

/// Every interceptable event and the effects its capabilities allow, from upstream.
fn upstream_events() -> Vec<(String, Vec<String>)> {
    let schema: Value = serde_json::from_str(include_str!(
        "../upstream/schema/draft/capabilities.schema.json"
    ))
    .expect("the schema is JSON");
    let defs = schema["$defs"].as_object().expect("$defs");
    defs.iter()
        .map(|(name, def)| {
            let effects = def["allOf"][1]["properties"]["effects"]["items"]["enum"]
                .as_array()
                .expect("each event lists its effects")
                .iter()
                .map(|e| e.as_str().expect("an effect word").to_owned())
                .collect();
            (name.clone(), effects)
        })
        .collect()
}

/// One event and what it allows.
#[derive(Clone)]
struct Event {
    name: String,
    allows: Vec<String>,
}

impl Event {
    fn has(&self, effect: EffectKind) -> bool {
        self.allows.iter().any(|e| e == effect.as_str())
    }

    /// `wanted`, kept where the event allows them, with deny first wherever it has one
    /// (a call must keep deny where the event can be denied).
    fn effects(&self, wanted: &[EffectKind]) -> Vec<EffectKind> {
        let mut effects: Vec<EffectKind> = Vec::new();
        if self.has(EffectKind::Deny) {
            effects.push(EffectKind::Deny);
        }
        effects.extend(
            wanted
                .iter()
                .copied()
                .filter(|&k| k != EffectKind::Deny && self.has(k)),
        );
        effects
    }
}

fn events() -> Vec<Event> {
    upstream_events()
        .into_iter()
        .map(|(name, allows)| Event { name, allows })
        .collect()
}

/// One interceptor under `policy` at `url`, subscribed to every event.
async fn every_event_on(url: &str, policy: &str) -> Interceptor {
    every_event_within(url, policy, TIMEOUT_MS).await
}

/// [`every_event_on`] with the subscription's `timeoutMs`.
async fn every_event_within(url: &str, policy: &str, timeout_ms: u64) -> Interceptor {
    let names: Vec<String> = events().into_iter().map(|e| e.name).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let backend = Http::new(ID, url).policy(policy).timeout_ms(timeout_ms);
    interceptor(&registration_on(&[backend], &names)).await
}

/// What one call settled as, with its case name and record.
struct Settled {
    case: String,
    event: Event,
    settled: Settlement,
    record: Value,
}

/// Calls `hooks` once per event, all at once, advertising `effects(event)`.
async fn each_event(
    hooks: &Interceptor,
    label: &str,
    only: impl Fn(&Event) -> bool,
    effects: impl Fn(&Event) -> Vec<EffectKind>,
) -> Vec<Settled> {
    let mut calls = Vec::new();
    for event in events().into_iter().filter(|e| only(e)) {
        let hooks = hooks.clone();
        let id = format!("evt_{label}_{}", event.name.replace('.', "_"));
        let advertised = effects(&event);
        let case = format!("{label} / {}", event.name);
        calls.push(tokio::spawn(async move {
            let settled = hooks
                .intercept(&valid_event(&event.name, &id), &advertised, None)
                .await
                .unwrap_or_else(|e| panic!("{case}: the call could not be made: {e}"));
            let record = record_json(&settled);
            assert_eq!(record["event"]["id"], json!(id), "{case}: {record}");
            assert_eq!(record["event"]["type"], json!(event.name), "{case}");
            Settled {
                case,
                event,
                settled,
                record,
            }
        }));
    }
    let mut settled = Vec::new();
    for call in calls {
        settled.push(call.await.expect("a call task"));
    }
    settled
}

fn assert_decided(s: &Settled, decision: Decision, decided_by: DecidedBy, reason: Option<&str>) {
    assert_eq!(
        (
            s.settled.decision,
            s.settled.decided_by,
            s.settled.reason.as_deref()
        ),
        (decision, decided_by, reason),
        "{}: {}",
        s.case,
        s.record
    );
}

/// An operational failure settled by `policy`: the generic synthetic deny under
/// fail-closed, no objection under fail-open.
fn assert_settled_by_policy(s: &Settled, policy: &str) {
    match policy {
        "fail-closed" => assert_decided(
            s,
            Decision::Deny,
            DecidedBy::SyntheticDeny,
            Some(SYNTHETIC_REASON),
        ),
        _ => assert_decided(s, Decision::Allow, DecidedBy::NoObjection, None),
    }
}

#[test]
fn the_upstream_schema_lists_the_nineteen_interceptable_events() {
    let mut upstream: Vec<String> = events().into_iter().map(|e| e.name).collect();
    upstream.sort_unstable();
    let mut ours: Vec<&str> = InterceptableEvent::ALL.iter().map(|e| e.as_str()).collect();
    ours.sort_unstable();
    assert_eq!(upstream, ours);
    assert_eq!(ours.len(), 19);
}

/// Each event reaches the backend as itself, with exactly the advertised effects, and a
/// backend without objection lets it proceed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_is_intercepted_with_exactly_its_advertised_effects() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let hooks = every_event_on(&backend.url(), "fail-closed").await;
    let all = each_event(
        &hooks,
        "plain",
        |_| true,
        |e| e.effects(&[EffectKind::Message]),
    )
    .await;
    assert_eq!(all.len(), 19);
    let requests = backend.requests_with_method("hooks/intercept");
    assert_eq!(requests.len(), 19);
    for s in &all {
        assert_decided(s, Decision::Allow, DecidedBy::NoObjection, None);
        assert_eq!(
            s.record["interceptors"][0]["outcome"], "no-effect",
            "{}",
            s.case
        );
        let request = requests
            .iter()
            .map(|r| r.json())
            .find(|r| r["id"] == s.record["event"]["id"])
            .unwrap_or_else(|| panic!("{}: no request", s.case));
        let sent = &request["params"];
        assert_eq!(sent["event"]["type"], json!(s.event.name), "{}", s.case);
        assert_eq!(sent["event"]["id"], request["id"], "{}", s.case);
        let words: Vec<&str> = s
            .event
            .effects(&[EffectKind::Message])
            .iter()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            sent["capabilities"],
            json!({"effects": words}),
            "{}",
            s.case
        );
    }
    hooks.shutdown();
}

/// A backend's deny is a deny, with its reason, on every event that has deny, under
/// either policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_deny_denies_every_event_that_has_deny() {
    let backend = FaultBackend::start(vec![Behaviour::Deny(DENY_REASON.into())]).await;
    let mut denied = 0;
    for policy in POLICIES {
        let hooks = every_event_on(&backend.url(), policy).await;
        let has_deny = |e: &Event| e.has(EffectKind::Deny);
        for s in each_event(&hooks, policy, has_deny, |e| e.effects(&[])).await {
            assert_decided(
                &s,
                Decision::Deny,
                DecidedBy::BackendDeny,
                Some(DENY_REASON),
            );
            assert_eq!(s.record["interceptors"][0]["outcome"], "deny", "{}", s.case);
            denied += 1;
        }
        hooks.shutdown();
    }
    // config.change.before, turn.start, model.request.before, model.switch.before,
    // tool.before, tool.permission.request, context.compact.before, task.change.before,
    // user.elicitation.request, user.message.inbound, user.message.outbound,
    // workspace.change.before.
    assert_eq!(denied, 12 * 2);
}

/// An accepted flow stop ends decision-making as a deny on every event that has flow,
/// those without deny included: a harness reading only the decision must not proceed.
/// The audit tells it from a deny: outcome `stop`, and the flow kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_flow_stop_is_a_deny_on_every_event_that_has_flow() {
    let stop = ahp_tests::hook::flow_stop(STOP_REASON);
    let backend = FaultBackend::start(vec![Behaviour::Effects(stop)]).await;
    let hooks = every_event_on(&backend.url(), "fail-open").await;
    let has_flow = |e: &Event| e.has(EffectKind::Flow);
    let all = each_event(&hooks, "stop", has_flow, |e| e.effects(&[EffectKind::Flow])).await;
    // turn.start, turn.finish.before, model.request.before, model.response.after,
    // model.switch.before, tool.before, tool.after, tool.permission.request,
    // tool.batch.after.
    assert_eq!(all.len(), 9);
    for s in &all {
        assert_decided(s, Decision::Deny, DecidedBy::BackendDeny, Some(STOP_REASON));
        assert_eq!(s.record["interceptors"][0]["outcome"], "stop", "{}", s.case);
        assert_eq!(
            s.record["flow"],
            json!({"operation": "stop", "reason": STOP_REASON}),
            "{}",
            s.case
        );
    }
    hooks.shutdown();
}

/// A backend that never answers: at the deadline, fail-closed is the generic synthetic
/// deny on every event (deny or not), fail-open lets every event pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_is_settled_by_the_policy_on_every_event() {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    for policy in POLICIES {
        let hooks = every_event_within(&backend.url(), policy, DEADLINE_MS).await;
        let all = each_event(&hooks, policy, |_| true, |e| e.effects(&[])).await;
        assert_eq!(all.len(), 19);
        let mut awaited = 0;
        for s in &all {
            assert_settled_by_policy(s, policy);
            let entry = &s.record["interceptors"][0];
            assert_eq!(entry["failure"]["class"], "deadline-exceeded", "{}", s.case);
            let outcome = match policy {
                "fail-closed" => "failed-closed",
                _ => "failed-open",
            };
            assert_eq!(entry["outcome"], outcome, "{}", s.case);
            // Nineteen calls at once on a loaded machine: one may still be waiting for
            // an instance or connecting at 150 ms. One that waited for the reply was
            // sent whole: the backend has it.
            let phase = entry["failure"]["phase"].as_str().unwrap_or_default();
            let before_the_reply = ["queue", "connect", "send", "await-response"];
            assert!(before_the_reply.contains(&phase), "{}: {phase}", s.case);
            if phase == "await-response" {
                awaited += 1;
                // Sent whole; the backend's task may still be reading it.
                let id = &s.record["event"]["id"];
                let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while !backend.requests().iter().any(|r| r.json()["id"] == *id) {
                    assert!(
                        std::time::Instant::now() < until,
                        "{}: the backend has its request",
                        s.case
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            }
        }
        assert!(
            awaited > all.len() / 2,
            "most waited for a reply: {awaited}"
        );
        hooks.shutdown();
    }
}

/// An effect the call did not advertise (here `ask`, which only tool.before allows and
/// no call below advertises) rejects the whole response: `invalid-effects`, then the
/// policy, on every event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unadvertised_effect_is_invalid_effects_on_every_event() {
    let answer = json!([{"type": "message", "text": "shown only if accepted"}, {"type": "ask"}]);
    let backend = FaultBackend::start(vec![Behaviour::Effects(answer)]).await;
    for policy in POLICIES {
        let hooks = every_event_on(&backend.url(), policy).await;
        let all = each_event(
            &hooks,
            policy,
            |_| true,
            |e| e.effects(&[EffectKind::Message]),
        )
        .await;
        assert_eq!(all.len(), 19);
        for s in &all {
            assert_settled_by_policy(s, policy);
            let entry = &s.record["interceptors"][0];
            assert_eq!(
                entry["failure"],
                json!({"class": "invalid-effects", "phase": "accept",
                       "detail": "unadvertised-effect", "effect": 1}),
                "{}: {}",
                s.case,
                s.record
            );
            // An accepted message would be listed; none is, the response was rejected whole.
            assert_eq!(s.record.get("messages"), None, "{}: atomic", s.case);
        }
        hooks.shutdown();
    }
}

/// Advertising modify offers the target's value to the backend: an event without it is
/// refused before anything is sent, naming the member; without modify it is intercepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modify_target_the_event_lacks_is_refused_when_modify_is_advertised() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let hooks = every_event_on(&backend.url(), "fail-closed").await;
    let mut event: Value = serde_json::from_str(&valid_event("context.compact.before", "evt_m"))
        .expect("an event is JSON");
    if let Some(members) = event.as_object_mut() {
        members.remove("instructions");
    }
    let error = hooks
        .intercept(&event.to_string(), &[], None)
        .await
        .expect_err("modify of instructions is advertised by default");
    let problems: Vec<String> = error.problems().iter().map(|p| p.to_string()).collect();
    assert_eq!(
        problems,
        ["event/instructions: is required when modify of \"instructions\" is advertised"]
    );
    assert_eq!(backend.requests().len(), 0);
    let settled = hooks
        .intercept(&event.to_string(), &[EffectKind::Deny], None)
        .await
        .expect("without modify, instructions are optional");
    assert_eq!(settled.decision, Decision::Allow);
    // Intercepted: the backend was asked, and had no objection.
    assert_eq!(backend.requests().len(), 1);
    let record = record_json(&settled);
    assert_eq!(
        record["interceptors"][0]["outcome"], "no-effect",
        "{record}"
    );
    hooks.shutdown();
}
