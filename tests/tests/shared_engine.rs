//! Interceptors sharing one Engine: every default `Interceptor` of a process runs on the
//! default Engine, whose pooling allocator has 512 component-instance slots. Together
//! they never ask it for more: a call beyond its capacity waits for a slot (in order,
//! the wait counted against its deadlines in turn), idle instances of other interceptors
//! are given up for it, and a wait that outlasts the call's first deadline is settled
//! by its subscription's own policy in phase `queue`. Never an engine failure.
//!
//! Each test fills the Engine, so they run one at a time (`SERIAL`), in a process of
//! their own (this file).

use ahp_host::{DecidedBy, Decision, EffectKind, Interceptor, Options, Settlement};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    assert_settled, assert_settled_in_queue, event, record_json, registration, valid_event, Http,
};
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::task::JoinSet;

static SERIAL: Mutex<()> = Mutex::const_new(());

/// The default Engine's component-instance slots (`ahp_host::DEFAULT_MAX_INSTANCES`).
const ENGINE_SLOTS: usize = ahp_host::DEFAULT_MAX_INSTANCES;

/// An interceptor on the default Engine with at most `max_instances` instances.
async fn interceptor(registration: &str, max_instances: usize) -> Interceptor {
    let options = Options {
        max_instances: Some(max_instances),
        ..Options::default()
    };
    Interceptor::new(registration, options)
        .await
        .expect("valid test registration")
}

/// A backend answering no objection after `delay`, and a registration of it with a
/// timeout far beyond any queueing here (20 s).
async fn slow_backend(delay: Duration) -> (FaultBackend, String) {
    let slow = Behaviour::Delay(delay, Box::new(Behaviour::NoEffect));
    let backend = FaultBackend::start(vec![slow]).await;
    let reg = registration(&[Http::new("com.example.policy", backend.url()).timeout_ms(20_000)]);
    (backend, reg)
}

/// Starts `calls` concurrent `tool.before` calls on `interceptor`, ids `evt_{tag}_{n}`.
fn spawn_calls(set: &mut JoinSet<Settlement>, interceptor: &Interceptor, tag: &str, calls: usize) {
    for n in 0..calls {
        let interceptor = interceptor.clone();
        let id = format!("evt_{tag}_{n}");
        set.spawn(async move {
            interceptor
                .intercept(&event(&id), &[EffectKind::Deny], None)
                .await
                .expect("a valid event settles")
        });
    }
}

/// Every call of `set` got the backend's own answer (no objection), none an engine
/// failure; returns how many there were.
async fn all_answered_by_the_backend(set: &mut JoinSet<Settlement>) -> usize {
    let mut engine_failures = 0;
    let mut settled = 0;
    while let Some(joined) = set.join_next().await {
        let call = joined.expect("a call task completes");
        engine_failures += usize::from(call.decided_by == DecidedBy::EngineFailure);
        if call.decided_by != DecidedBy::EngineFailure {
            assert_settled(&call, Decision::Allow, DecidedBy::NoObjection, None);
        }
        settled += 1;
    }
    assert_eq!(engine_failures, 0, "of {settled} calls");
    settled
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_interceptors_bursting_past_the_engines_slots_wait_for_them() {
    let _serial = SERIAL.lock().await;
    let (backend, reg) = slow_backend(Duration::from_millis(500)).await;
    // 400 instances each, 800 wanted at once from 512 slots: each within its own
    // `max_instances`, together beyond the Engine.
    let first = interceptor(&reg, 400).await;
    let second = interceptor(&reg, 400).await;
    let mut calls = JoinSet::new();
    spawn_calls(&mut calls, &first, "first", 400);
    spawn_calls(&mut calls, &second, "second", 400);
    assert_eq!(all_answered_by_the_backend(&mut calls).await, 800);
    assert_eq!(
        backend.requests().len(),
        800,
        "each call reached the backend once"
    );
    first.shutdown_async().await;
    second.shutdown_async().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_instances_of_other_interceptors_give_up_their_slots() {
    let _serial = SERIAL.lock().await;
    let (_backend, reg) = slow_backend(Duration::from_millis(300)).await;
    // Sixteen interceptors, each keeping the 32 instances of its burst idle afterwards:
    // every slot of the Engine is held by an idle instance.
    let mut keepers = Vec::new();
    let mut calls = JoinSet::new();
    for n in 0..ENGINE_SLOTS / 32 {
        let keeper = interceptor(&reg, 64).await;
        spawn_calls(&mut calls, &keeper, &format!("keeper{n}"), 32);
        keepers.push(keeper);
    }
    all_answered_by_the_backend(&mut calls).await;
    // Another interceptor can still be made (its set-up needs an instance), and its
    // calls run.
    let late = interceptor(&reg, 64).await;
    spawn_calls(&mut calls, &late, "late", 40);
    assert_eq!(all_answered_by_the_backend(&mut calls).await, 40);
    for interceptor in keepers.iter().chain([&late]) {
        interceptor.shutdown_async().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_the_engine_past_the_first_deadline_is_settled_by_policy_in_phase_queue() {
    let _serial = SERIAL.lock().await;
    let holders_backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let holding = registration(&[Http::new("com.example.holder", holders_backend.url())
        .timeout_ms(30_000)
        .policy("fail-open")]);
    // Two interceptors of 256 instances each hold every slot of the Engine for calls
    // with time left (and wait for the rest): each within its own `max_instances`.
    let holders = [
        interceptor(&holding, 256).await,
        interceptor(&holding, 256).await,
    ];
    let mut held = JoinSet::new();
    for (n, holder) in holders.iter().enumerate() {
        spawn_calls(&mut held, holder, &format!("holder{n}"), 256);
    }
    let in_flight = ENGINE_SLOTS - ENGINE_SLOTS / 16;
    assert!(
        holders_backend
            .wait_for_requests(in_flight, Duration::from_secs(10))
            .await,
        "the holders' calls fill the Engine"
    );

    for policy in ["fail-open", "fail-closed"] {
        let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let reg = registration(&[Http::new("com.example.policy", backend.url())
            .timeout_ms(200)
            .policy(policy)]);
        // Its set-up probe needs an instance too: it gets one of the slots held back.
        let queued = interceptor(&reg, 8).await;
        let id = format!("evt_engine_queue_{policy}");
        let settled = queued
            .intercept(&event(&id), &[EffectKind::Deny], None)
            .await
            .expect("a valid event settles");
        assert_settled_in_queue(&settled, policy, &id);
        assert!(backend.requests().is_empty(), "nothing was sent: {id}");
        // An observe-only event, with no deadline to wait for, is served at once.
        let observed = queued
            .observe(
                &valid_event("session.start", &format!("evt_obs_{policy}")),
                None,
            )
            .await
            .expect("observed");
        assert!(!observed.engine_failure, "{observed:?}");
        queued.shutdown_async().await;
    }

    for holder in &holders {
        holder.shutdown_async().await;
    }
    while let Some(joined) = held.join_next().await {
        let call = joined.expect("a holder's call completes");
        assert_ne!(
            call.decided_by,
            DecidedBy::EngineFailure,
            "{:?}",
            record_json(&call)
        );
    }
}
