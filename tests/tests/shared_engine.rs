//! Interceptors on one Engine share its instance slots: every default `Interceptor` of a
//! process runs on the default Engine (512 slots). A burst on one interceptor leaves only
//! a few idle instances behind, so another interceptor's calls still get instances
//! afterwards instead of failing to instantiate (an `engine-failure` denial).
//!
//! A test binary of its own: it fills the process's default Engine.

use ahp_host::{DecidedBy, EffectKind, Interceptor, Options, DEFAULT_MAX_INSTANCES};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{event, registration, Http};
use std::time::Duration;
use tokio::task::JoinSet;

/// `calls` concurrent calls on `interceptor`; how each was decided.
async fn burst(interceptor: &Interceptor, name: &str, calls: usize) -> Vec<DecidedBy> {
    let mut running = JoinSet::new();
    for n in 0..calls {
        let interceptor = interceptor.clone();
        let id = format!("evt_{name}_{n}");
        running.spawn(async move {
            let settled = interceptor
                .intercept(&event(&id), &[EffectKind::Deny], None)
                .await
                .expect("a valid event settles");
            settled.decided_by
        });
    }
    let mut decided = Vec::new();
    while let Some(joined) = running.join_next().await {
        decided.push(joined.expect("a call task completes"));
    }
    decided
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_on_one_interceptor_leaves_instances_for_another() {
    let slow = || Behaviour::Delay(Duration::from_millis(300), Box::new(Behaviour::NoEffect));
    let first = FaultBackend::start(vec![slow()]).await;
    let second = FaultBackend::start(vec![slow()]).await;
    let interceptor = |id: &'static str, url: String| async move {
        let reg = registration(&[Http::new(id, url).timeout_ms(20_000)]);
        Interceptor::new(&reg, Options::default())
            .await
            .expect("valid registration")
    };
    let busy = interceptor("com.example.busy", first.url()).await;
    let other = interceptor("com.example.other", second.url()).await;

    // As many calls as the Engine has slots: the busy interceptor makes every instance
    // its call lane allows, all at once.
    let decided = burst(&busy, "busy", DEFAULT_MAX_INSTANCES).await;
    assert!(
        decided.iter().all(|d| *d == DecidedBy::NoObjection),
        "{decided:?}"
    );

    // Then the other interceptor needs more instances than it has.
    let decided = burst(&other, "other", 64).await;
    let failed = decided
        .iter()
        .filter(|d| **d == DecidedBy::EngineFailure)
        .count();
    assert_eq!(failed, 0, "{decided:?}");
    assert!(
        decided.iter().all(|d| *d == DecidedBy::NoObjection),
        "{decided:?}"
    );
    busy.shutdown_async().await;
    other.shutdown_async().await;
}
