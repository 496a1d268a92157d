//! A hostile component (`tests/runaway-guest`) that spins forever or panics: the host must
//! settle every call as an `engine-failure` denial within the call's bound (the
//! component's `bound-ms`, 100 ms, the 1 s it may take to prepare observers, and the
//! host's 250 ms grace), and stay usable.

use ahp_host::{
    BoxFuture, DecidedBy, Decision, EffectKind, Interceptor, Interrupt, Options, Settlement,
    Transport, TransportError, TransportReply, TransportRequest,
};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    assert_settled, assert_settled_at, event, record_json, registration, runaway_component,
    timed_call, Http, SLACK,
};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The runaway component's bound, the time to prepare observers and the host's grace: no
/// call can settle earlier.
const BOUND: Duration = Duration::from_millis(100 + 1000 + 250);
/// A trap settles at once: well before the bound would have cut the call off (half of
/// it leaves a loaded machine room and still tells the two apart).
const AT_ONCE: Duration = Duration::from_millis(675);
const ENGINE_FAILURE_REASON: &str = "Policy evaluation failed.";

/// An interceptor running the runaway component; `backend_id` containing "panic" makes it panic.
async fn runaway(backend_id: &str) -> Interceptor {
    let reg = registration(&[Http::new(backend_id, "http://127.0.0.1:9/hooks").timeout_ms(100)]);
    let options = Options {
        component: Some(runaway_component()),
        ..Options::default()
    };
    Interceptor::new(&reg, options)
        .await
        .expect("the runaway component accepts any registration")
}

/// Call `id` settled as an engine-failure denial, with no interceptor entry.
fn assert_engine_failure(settled: &Settlement, id: &str) {
    assert_settled(
        settled,
        Decision::Deny,
        DecidedBy::EngineFailure,
        Some(ENGINE_FAILURE_REASON),
    );
    let record = &record_json(settled);
    assert_eq!(
        record["event"],
        json!({"id": id, "type": "tool.before", "session": "sess_e2e", "call": format!("call_{id}")})
    );
    assert_eq!(record["interceptors"], json!([]));
}

/// A panicking call settled at once, before [`AT_ONCE`].
fn assert_settled_at_once(elapsed: Duration, case: &str) {
    println!("{case}: settled in {elapsed:?}");
    assert!(elapsed < AT_ONCE, "{case} settled in {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spinning_component_is_denied_as_engine_failure_at_its_bound() {
    let interceptor = runaway("com.example.spin").await;
    let (settled, elapsed) = timed_call(&interceptor, "evt_spin", None).await;
    assert_engine_failure(&settled, "evt_spin");
    assert_settled_at(elapsed, BOUND, "spin");
}

/// A component's `bound-ms` is its word: one that claims forever and spins is cut off
/// where the registration's timeouts end (100 ms here), as a truthful one is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_claiming_forever_is_bound_by_the_registration() {
    let interceptor = runaway("com.example.claims-forever").await;
    let calling = timed_call(&interceptor, "evt_claims_forever", None);
    let (settled, elapsed) = tokio::time::timeout(BOUND * 10, calling)
        .await
        .expect("the call was cut off at the registration's bound");
    assert_engine_failure(&settled, "evt_claims_forever");
    assert_settled_at(elapsed, BOUND, "claims forever");
}

/// On an Engine of the embedder's whose epoch the embedder advances itself
/// (`Epochs::External`), a spinning component is still stopped at its bound: the crate's
/// callback reads the real clock at each of the embedder's ticks, and yields there to
/// the call's own timer. They come every 10 ms, ten times slower than the crate's own
/// ticker: the bound holds, coarser by a tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spinning_component_is_stopped_at_its_bound_under_the_embedders_epochs() {
    let mut config = ahp_host::wasmtime::Config::new();
    config.epoch_interruption(true);
    let engine = ahp_host::wasmtime::Engine::new(&config).expect("an Engine");
    let ticking = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let ticker = {
        let (engine, ticking) = (engine.clone(), ticking.clone());
        std::thread::spawn(move || {
            while ticking.load(std::sync::atomic::Ordering::Relaxed) {
                engine.increment_epoch();
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let reg =
        registration(&[Http::new("com.example.spin", "http://127.0.0.1:9/hooks").timeout_ms(100)]);
    let options = Options {
        component: Some(runaway_component()),
        ..Options::default()
    };
    let interceptor = ahp_host::InterceptorBuilder::new()
        .engine(&engine)
        .epochs(ahp_host::Epochs::External)
        .options(options)
        .build(&reg)
        .await
        .expect("the runaway component accepts any registration");
    let (settled, elapsed) = timed_call(&interceptor, "evt_spin_external", None).await;
    ticking.store(false, std::sync::atomic::Ordering::Relaxed);
    ticker.join().expect("the embedder's ticker");
    assert_engine_failure(&settled, "evt_spin_external");
    assert_settled_at(elapsed, BOUND, "spin under external epochs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_component_is_denied_as_engine_failure_at_once() {
    let interceptor = runaway("com.example.panic").await;
    let (settled, elapsed) = timed_call(&interceptor, "evt_panic", None).await;
    assert_engine_failure(&settled, "evt_panic");
    assert_settled_at_once(elapsed, "panic");
}

/// An instance whose settlement the host did not trust is not used again: the runaway
/// component's `untrusted-once` mode contradicts itself in an instance's first call only,
/// so a second call on the same instance would be allowed; on a fresh one it is refused
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_settlement_was_not_trusted_is_not_used_again() {
    let options = Options {
        component: Some(runaway_component()),
        ..Options::default()
    };
    let interceptor = Interceptor::new("untrusted-once", options)
        .await
        .expect("the runaway component loads");
    for n in 0..3 {
        let id = format!("evt_untrusted_{n}");
        let settled = interceptor
            .intercept(&event(&id), &[EffectKind::Deny], None)
            .await
            .expect("a valid event settles");
        assert_engine_failure(&settled, &id);
    }
}

/// An aborted instance is not reused; the next calls get a fresh one and fail the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interceptor_stays_usable_after_a_runaway_call() {
    let interceptor = runaway("com.example.spin").await;
    for n in 1..=3 {
        let id = format!("evt_again_{n}");
        let (settled, elapsed) = timed_call(&interceptor, &id, None).await;
        assert_engine_failure(&settled, &id);
        assert_settled_at(elapsed, BOUND, &id);
    }
}

/// After a trap the next call still reaches the component: an event that makes it spin
/// instead of panic runs until the bound, which only a live instance can do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interceptor_stays_usable_after_a_panicking_call() {
    let interceptor = runaway("com.example.panic").await;
    for (id, timing) in [
        (
            "evt_panic_first",
            assert_settled_at_once as fn(Duration, &str),
        ),
        ("evt_spin_after_panic", |elapsed, case| {
            assert_settled_at(elapsed, BOUND, case)
        }),
        ("evt_panic_again", assert_settled_at_once),
    ] {
        let (settled, elapsed) = timed_call(&interceptor, id, None).await;
        assert_engine_failure(&settled, id);
        timing(elapsed, id);
    }
}

/// Four spinning calls at once, on two worker threads: every one is cut off at its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runaway_calls_all_settle_within_the_bound() {
    let interceptor = runaway("com.example.spin").await;
    let started = Instant::now();
    let calls: Vec<_> = (0..4)
        .map(|n| {
            let interceptor = interceptor.clone();
            tokio::spawn(async move {
                let id = format!("evt_concurrent_{n}");
                let begun = started.elapsed();
                let (settled, elapsed) = timed_call(&interceptor, &id, None).await;
                (id, settled, begun, elapsed)
            })
        })
        .collect();
    for call in calls {
        let (id, settled, begun, elapsed) = call.await.expect("the call task");
        assert_engine_failure(&settled, &id);
        assert_settled_at(elapsed, BOUND, &format!("{id} (began after {begun:?})"));
    }
    // Each call is bounded from its own start (asserted above). A task spawned from outside
    // the runtime can start late: it waits in tokio's global queue, which workers busy with
    // spinning guests (yielding every 1 ms epoch tick) check only every 61 polls.
    let all = started.elapsed();
    println!("4 concurrent: all settled in {all:?}");
    let queueing = Duration::from_millis(100);
    assert!(
        all < BOUND + SLACK + queueing,
        "4 concurrent calls took {all:?}"
    );
}

/// A component that spins while it loads the registration is stopped by the 5 s that
/// instantiation and loading get (`bound_cpu`): building the interceptor fails as a
/// setup error, never hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_that_spins_while_it_loads_fails_to_build_at_its_bound() {
    let reg = registration(&[Http::new(
        "com.example.spin-on-load",
        "http://127.0.0.1:9/hooks",
    )]);
    let options = Options {
        component: Some(runaway_component()),
        ..Options::default()
    };
    let began = Instant::now();
    let built = tokio::time::timeout(Duration::from_secs(30), Interceptor::new(&reg, options))
        .await
        .expect("loading is bounded");
    let elapsed = began.elapsed();
    let error = built
        .err()
        .expect("a component that never loads builds nothing");
    assert!(error.is_setup(), "{error}");
    assert!(
        elapsed >= Duration::from_secs(5) && elapsed < Duration::from_secs(15),
        "failed after {elapsed:?}, its bound 5 s"
    );
}

/// The runaway component in its `hanging-load` mode, whose `load` waits on `loads` (a
/// pool of at most `max_instances`, if given).
async fn hanging_load(loads: &FaultBackend, max_instances: Option<usize>) -> Interceptor {
    let options = Options {
        component: Some(runaway_component()),
        max_instances,
        ..Options::default()
    };
    Interceptor::new(&format!("hanging-load {}", loads.url()), options)
        .await
        .expect("the runaway component loads its hanging-load mode")
}

/// Making an instance for a call (instantiating and loading the registration) is part of
/// the call's wait for one: the budget and interruption end it there as they end a wait
/// in the queue, settled by the host, never held until the instance is ready. The
/// runaway component's `hanging-load` mode waits in `load` for a backend that never
/// answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn making_an_instance_ends_with_the_budget_or_the_interruption() {
    let hang = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let hooks = hanging_load(&hang, None).await;
    let budget = Duration::from_millis(200);
    let calling = timed_call(&hooks, "evt_load_budget", Some(budget));
    let (settled, elapsed) = tokio::time::timeout(Duration::from_secs(5), calling)
        .await
        .expect("the budget ends the wait for the instance");
    assert_eq!(
        (settled.decision, settled.decided_by),
        (Decision::Deny, DecidedBy::BudgetExpired)
    );
    assert_settled_at(elapsed, budget, "budget while the instance is made");

    let interrupt = Interrupt::new();
    let trigger = interrupt.clone();
    let after = Duration::from_millis(200);
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        trigger.interrupt();
    });
    let started = Instant::now();
    let cut = event("evt_load_cut");
    let calling = hooks.intercept_with(&cut, &[EffectKind::Deny], None, &interrupt);
    let settled = tokio::time::timeout(Duration::from_secs(5), calling)
        .await
        .expect("interruption ends the wait for the instance")
        .expect("a valid event");
    assert_eq!(settled.decided_by, DecidedBy::Interrupted);
    assert_settled_at(
        started.elapsed(),
        after,
        "interrupted while the instance is made",
    );
}

/// Shutdown ends a call's wait for its instance to be made as it ends a wait in the
/// queue: a denial by shutdown at once, not an engine failure at the make's 10 s bound
/// nor an allow; and shutdown itself does not wait for the make.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_a_call_waiting_for_its_instance_to_be_made() {
    let hang = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let hooks = hanging_load(&hang, None).await;
    let calling = tokio::spawn({
        let hooks = hooks.clone();
        async move { timed_call(&hooks, "evt_load_shutdown", None).await }
    });
    // The call is waiting on the make (its `load` on the backend that never answers).
    assert!(
        hang.wait_for_requests(1, Duration::from_secs(5)).await,
        "the make reached the backend"
    );
    let shutting = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), hooks.shutdown_async())
        .await
        .expect("shutdown does not wait for the make");
    let (settled, _) = tokio::time::timeout(Duration::from_secs(5), calling)
        .await
        .expect("shutdown ends the wait for the instance")
        .expect("the call task");
    assert_eq!(
        (settled.decision, settled.decided_by),
        (Decision::Deny, DecidedBy::Shutdown),
        "{}",
        settled.record
    );
    assert!(
        shutting.elapsed() < Duration::from_secs(2),
        "settled {:?} after shutdown",
        shutting.elapsed()
    );
}

/// A call with no budget is not held for ever by a make that never ends (the
/// `hanging-load` mode's backend never answers): it is an engine failure at the make's
/// 10 s bound, a denial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_make_that_never_ends_is_an_engine_failure_at_its_bound() {
    let hang = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let hooks = hanging_load(&hang, None).await;
    let calling = timed_call(&hooks, "evt_load_forever", None);
    let (settled, elapsed) = tokio::time::timeout(Duration::from_secs(30), calling)
        .await
        .expect("the make's bound ends the wait");
    assert_eq!(
        (settled.decision, settled.decided_by),
        (Decision::Deny, DecidedBy::EngineFailure)
    );
    assert!(
        elapsed >= Duration::from_secs(10),
        "ended after {elapsed:?}"
    );
}

/// An instance whose call stopped waiting for it while it was being made is finished
/// anyway and pooled: the next call takes it instead of making (and loading) another,
/// so a registration that loads slower than the calls' budgets still leaves one. Here
/// the runaway component's `hanging-load` mode waits 300 ms on its backend per load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_made_too_late_for_its_call_serves_the_next() {
    let (loads, hooks) = slow_loads().await;
    let budget = Some(Duration::from_millis(100));
    let (first, _) = timed_call(&hooks, "evt_made_late", budget).await;
    assert_eq!(first.decided_by, DecidedBy::BudgetExpired);
    assert_the_made_instance_serves_the_next(&loads, &hooks, "evt_made_late_2").await;
}

/// A call its caller gives up on while its instance is being made (the caller's own
/// timeout around the call, with no budget: the future is dropped) leaves the make to
/// finish, as a call whose budget ran out does: the instance serves the next call, and no
/// second one is made. Dropped with the call, every make would be lost to a load slower
/// than the caller's timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_made_for_a_dropped_call_serves_the_next() {
    let (loads, hooks) = slow_loads().await;
    let dropped = event("evt_dropped");
    let first = hooks.intercept(&dropped, &[], None);
    let cut = tokio::time::timeout(Duration::from_millis(100), first).await;
    assert!(cut.is_err(), "the call still waited for its instance");
    assert_the_made_instance_serves_the_next(&loads, &hooks, "evt_dropped_2").await;
}

/// A `hanging-load` interceptor whose every load waits 300 ms on `loads`.
async fn slow_loads() -> (FaultBackend, Interceptor) {
    let slow = Behaviour::Delay(Duration::from_millis(300), Box::new(Behaviour::NoEffect));
    let loads = FaultBackend::start(vec![slow]).await;
    let hooks = hanging_load(&loads, None).await;
    (loads, hooks)
}

/// The instance made for a call that stopped waiting for it was loaded once, and it takes
/// the next call (`id`, whose component spins: an engine failure at its bound) with no
/// second load asked for.
async fn assert_the_made_instance_serves_the_next(
    loads: &FaultBackend,
    hooks: &Interceptor,
    id: &str,
) {
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        loads.requests().len(),
        1,
        "the first call's instance was loaded"
    );
    let (second, _) = timed_call(hooks, id, None).await;
    assert_eq!(second.decided_by, DecidedBy::EngineFailure);
    assert_eq!(loads.requests().len(), 1, "no second instance was made");
}

/// An injected transport that never answers.
struct Silent;

impl Transport for Silent {
    fn exchange<'a>(
        &'a self,
        _request: TransportRequest<'a>,
    ) -> BoxFuture<'a, Result<TransportReply, TransportError>> {
        Box::pin(std::future::pending())
    }
}

/// Dropped without a shutdown, an interceptor lets go at once of a make no call waits
/// for any more (here one whose load asks an injected transport that never answers),
/// and with it of the transport, which is the embedder's alone again — not at the
/// make's 10 s bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_an_interceptor_ends_the_make_it_left_behind() {
    let silent = Arc::new(Silent);
    let transport: Arc<dyn Transport> = silent.clone();
    let options = Options {
        component: Some(runaway_component()),
        transports: [("com.example.hang".to_string(), transport)].into(),
        ..Options::default()
    };
    let hooks = Interceptor::new("hanging-load http://127.0.0.1:9/never", options)
        .await
        .expect("the runaway component loads its hanging-load mode");
    let (settled, _) = timed_call(&hooks, "evt_drop_make", Some(Duration::from_millis(100))).await;
    assert_eq!(settled.decided_by, DecidedBy::BudgetExpired);
    assert!(
        Arc::strong_count(&silent) > 1,
        "the make holds the transport"
    );
    drop(hooks);
    let let_go =
        ahp_tests::support::eventually(Duration::from_secs(3), || Arc::strong_count(&silent) == 1);
    assert!(let_go.await, "the transport is still held");
}

/// Makes that no call waits for any more still count against the interceptor's
/// `max_instances`: calls arriving faster than a load takes start no more loads than
/// the pool may hold instances (here 2), the rest wait and end with their budgets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn makes_no_call_waits_for_count_against_the_pools_instances() {
    let slow = Behaviour::Delay(Duration::from_millis(1000), Box::new(Behaviour::NoEffect));
    let loads = FaultBackend::start(vec![slow]).await;
    let hooks = hanging_load(&loads, Some(2)).await;
    for n in 0..6 {
        let budget = Some(Duration::from_millis(50));
        let (settled, _) = timed_call(&hooks, &format!("evt_pile_{n}"), budget).await;
        assert_eq!(settled.decided_by, DecidedBy::BudgetExpired, "call {n}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        loads.requests().len() <= 2,
        "{} loads for a pool of 2",
        loads.requests().len()
    );
}

/// A component that starts I/O where its call has none left to do (here: it says no
/// call has a deadline to wait for, then asks a backend anyway) is not run again and
/// again on the instance held back for settling until one doing I/O comes free: the
/// call is an engine failure, and it sent nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_doing_io_where_it_has_none_left_to_do_is_an_engine_failure() {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let options = Options {
        component: Some(runaway_component()),
        max_instances: Some(2),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&format!("io-out-of-time {}", backend.url()), options)
        .await
        .expect("the runaway component loads its io-out-of-time mode");
    // The first call holds the one instance for I/O, for a second.
    let holder = {
        let interceptor = interceptor.clone();
        tokio::spawn(async move {
            interceptor
                .intercept(&event("evt_io_holder"), &[EffectKind::Deny], None)
                .await
        })
    };
    assert!(backend.wait_for_requests(1, Duration::from_secs(5)).await);
    let late_event = event("evt_io_late");
    let late = interceptor.intercept(&late_event, &[EffectKind::Deny], None);
    let settled = tokio::time::timeout(Duration::from_secs(10), late)
        .await
        .expect("not run again and again")
        .expect("settles");
    assert_engine_failure(&settled, "evt_io_late");
    assert!(!holder.is_finished(), "it did not wait for the holder");
    let held = holder.await.expect("completes").expect("settles");
    assert_engine_failure(&held, "evt_io_holder");
    assert_eq!(backend.requests().len(), 1, "only the holder's request");
}
