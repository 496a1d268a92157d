//! Shutdown: admission stops (later calls fail locally with a `shutdown` denial),
//! in-flight calls end as denials, repeated and concurrent shutdown is safe, and the
//! interceptor's connections are released.

use ahp_host::{DecidedBy, Decision, EffectKind, Interceptor, Options};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{event, record_json, registration, Http};
use std::time::{Duration, Instant};

fn fd_targets() -> Vec<String> {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_admission_ends_in_flight_calls_and_releases_sockets() {
    // Warm the process-wide runtime first (compiled component, memory images), which
    // lives for the whole process; what is counted is what one interceptor holds. The
    // backends are created after the count and dropped before the final one, so only
    // the interceptor's own descriptors can make a difference.
    {
        let warm_backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let warm = Interceptor::new(
            &registration(&[Http::new("com.example.warm", warm_backend.url())]),
            Options::default(),
        )
        .await
        .unwrap();
        warm.intercept(&event("evt_sd_0"), &[EffectKind::Deny], None)
            .await
            .unwrap();
        warm.shutdown();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let fds_before = open_fds();
    let quiet = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let stuck = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let hooks = Interceptor::new(
        &registration(&[
            Http::new("com.example.quiet", quiet.url()),
            Http::new("com.example.stuck", stuck.url())
                .timeout_ms(10_000)
                .policy("fail-open"),
        ]),
        Options::default(),
    )
    .await
    .unwrap();

    // An in-flight call: the first backend answers, the second never does.
    let in_flight = {
        let hooks = hooks.clone();
        tokio::spawn(async move {
            hooks
                .intercept(&event("evt_sd_1"), &[EffectKind::Deny], None)
                .await
        })
    };
    assert!(stuck.wait_for_requests(1, Duration::from_secs(5)).await);
    let started = Instant::now();
    // Repeated and concurrent shutdown is safe.
    let (a, b) = (hooks.clone(), hooks.clone());
    let concurrent = [
        tokio::spawn(async move { a.shutdown() }),
        tokio::spawn(async move { b.shutdown() }),
    ];
    hooks.shutdown();
    for task in concurrent {
        task.await.unwrap();
    }
    let settled = in_flight
        .await
        .unwrap()
        .expect("an in-flight call still settles");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "in-flight call took {:?}",
        started.elapsed()
    );
    assert_eq!(settled.decision, Decision::Deny, "{}", settled.record);
    assert_eq!(settled.decided_by, DecidedBy::Shutdown);
    assert_eq!(record_json(&settled)["decidedBy"], "shutdown");

    // Admission has stopped: a later call fails locally, as a denial, sending nothing.
    let requests_before = quiet.requests().len();
    match hooks
        .intercept(&event("evt_sd_2"), &[EffectKind::Deny], None)
        .await
    {
        Err(e) if e.is_shut_down() => {
            let settled = e.shutdown_settlement().expect("the local shutdown denial");
            assert_eq!(settled.decision, Decision::Deny);
            assert_eq!(settled.decided_by, DecidedBy::Shutdown);
            assert!(e.problems().is_empty());
        }
        other => panic!("a call after shutdown must fail locally, got {other:?}"),
    }
    assert_eq!(quiet.requests().len(), requests_before);

    // Dropping the last handle releases the pooled connections.
    drop(hooks);
    drop((quiet, stuck));
    let deadline = Instant::now() + Duration::from_secs(2);
    while open_fds() > fds_before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        open_fds() <= fds_before,
        "leaked descriptors: {} > {}: {:?}",
        open_fds(),
        fds_before,
        fd_targets()
    );
}
