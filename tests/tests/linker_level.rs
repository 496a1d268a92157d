//! The linker level (issue 11 item 1) run end to end, as an embedder with its own Engine,
//! Linker and Store uses it: the component's imports added to the embedder's `Linker`,
//! the registration loaded through the generated bindings, each call prepared with
//! `HostState::begin_call` (its CPU bound and its interruption), and the settlement's
//! audit record read as the component wrote it.

use ahp_host::wasmtime::component::ResourceTable;
use ahp_host::wasmtime::component::{Component, Linker, ResourceAny};
use ahp_host::wasmtime::{Config, Engine, Store};
use ahp_host::wasmtime_wasi::{HostMonotonicClock, WasiCtx, WasiCtxView, WasiView};
use ahp_host::{
    AhpView, EpochTicker, HostState, Interceptor, Interrupt, Options, Plugin, Settlement,
};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{event, registration, runaway_component, Http};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const REASON: &str = "the linker level asked the backend";

/// The embedder's store data, holding the component's host state among its own: here
/// also a WASI context of the embedder's, whose clock must never be the component's.
struct MyData {
    ahp: HostState,
    wasi: WasiCtx,
    table: ResourceTable,
}

impl AhpView for MyData {
    fn ahp(&mut self) -> &mut HostState {
        &mut self.ahp
    }
}

impl WasiView for MyData {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// A monotonic clock hours ahead of the host state's: a component reading it would see
/// its first deadline spent before anything was sent.
struct HoursAhead;

impl HostMonotonicClock for HoursAhead {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        ahp_host::component_instant(Instant::now()) + 3_600 * 1_000_000_000
    }
}

/// `component` instantiated through `linker` in a store of the embedder's, serving
/// `interceptor`'s backends, its CPU bounded from the first instruction.
async fn instantiate(
    linker: &Linker<MyData>,
    component: &[u8],
    interceptor: &Interceptor,
) -> (Store<MyData>, Plugin) {
    let engine = linker.engine();
    let component = Component::new(engine, component).unwrap();
    let pre = ahp_host::PluginPre::new(linker.instantiate_pre(&component).unwrap()).unwrap();
    let data = MyData {
        ahp: interceptor.host_state(),
        wasi: ahp_host::wasmtime_wasi::WasiCtxBuilder::new()
            .monotonic_clock(HoursAhead)
            .build(),
        table: ResourceTable::new(),
    };
    let mut store = Store::new(engine, data);
    ahp_host::bound_cpu(&mut store);
    let plugin = pre.instantiate_async(&mut store).await.unwrap();
    (store, plugin)
}

/// An embedder's Engine (its epoch ticking), Linker and store serving the backends of an
/// interceptor of `registration` (which provides those the component's imports deliver
/// to), the embedded component instantiated in it and `registration` loaded for
/// everything the component can intercept.
struct Embedded {
    interceptor: Interceptor,
    _ticker: std::sync::Arc<EpochTicker>,
    linker: Linker<MyData>,
    store: Store<MyData>,
    plugin: Plugin,
    loaded: ResourceAny,
}

async fn embedded(registration: &str) -> Embedded {
    let interceptor = Interceptor::new(registration, Options::default())
        .await
        .expect("valid registration");
    let mut config = Config::new();
    config.epoch_interruption(true);
    let engine = Engine::new(&config).unwrap();
    let ticker = EpochTicker::for_engine(&engine).expect("the ticker thread");
    let mut linker = Linker::<MyData>::new(&engine);
    ahp_host::add_to_linker(&mut linker).unwrap();
    let (mut store, plugin) =
        instantiate(&linker, ahp_host::EMBEDDED_COMPONENT, &interceptor).await;
    let api = plugin.ahp_interceptor_interceptor().engine();
    let declaration = api.call_interceptable(&mut store).await.unwrap();
    let loaded = api
        .call_load(&mut store, interceptor.registration(), &declaration)
        .await
        .unwrap()
        .expect("the registration loads");
    Embedded {
        interceptor,
        _ticker: ticker,
        linker,
        store,
        plugin,
        loaded,
    }
}

/// One intercept call on `store`, prepared with `cpu_deadline` and `interrupt`: its
/// settlement's record, its audit text first passed to `tamper` (which runs after the
/// component returned, before the host reads what it returned), then checked as the
/// owned interceptor checks it (`Settlement::from_component`).
async fn intercept(
    store: &mut Store<MyData>,
    plugin: &Plugin,
    engine: ResourceAny,
    cpu_deadline: Instant,
    interrupt: &Interrupt,
    tamper: impl FnOnce(&mut String),
) -> ahp_host::wasmtime::Result<Value> {
    store.data_mut().ahp().begin_call(cpu_deadline, interrupt);
    let arrived = Instant::now();
    let started = ahp_host::component_instant(arrived);
    let api = plugin.ahp_interceptor_interceptor().engine();
    let event = event("evt_linker");
    let mut settled = api
        .call_intercept(&mut *store, engine, &event, &[], None, started)
        .await?
        .expect("a valid event");
    tamper(&mut settled.audit);
    let state = &store.data().ahp;
    let (settlement, _observers) = Settlement::from_component(settled, &event, arrived, state);
    Ok(serde_json::to_value(&settlement.record).expect("a record"))
}

/// The component's audit text as it wrote it.
fn untouched(_: &mut String) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_component_runs_in_the_embedders_engine_and_store() {
    let backend = FaultBackend::start(vec![Behaviour::Deny(REASON.into())]).await;
    let registration = registration(&[Http::new("dev.ahp.linker", backend.url())]);
    let Embedded {
        interceptor,
        _ticker,
        linker,
        mut store,
        plugin,
        loaded,
    } = embedded(&registration).await;
    let api = plugin.ahp_interceptor_interceptor().engine();
    let declaration = api.call_interceptable(&mut store).await.unwrap();

    // A declaration naming events the component does not know: each is named at its own
    // index, not only the first.
    let mut unknown = declaration.clone();
    unknown[0].event = "nope.one".into();
    unknown[2].event = "nope.two".into();
    let problems = api
        .call_load(&mut store, &registration, &unknown)
        .await
        .unwrap()
        .expect_err("a declaration of unknown events");
    let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths, ["declaration[0]/event", "declaration[2]/event"]);

    // The backend's own denial, through the embedder's store: the component measured
    // its deadline on the host state's clock, not on the embedder's WASI clock.
    let bound = || Instant::now() + Duration::from_secs(5);
    let record = intercept(
        &mut store,
        &plugin,
        loaded,
        bound(),
        &Interrupt::new(),
        untouched,
    )
    .await
    .unwrap();
    assert_eq!(record["decidedBy"], "backend-deny", "{record}");
    assert_eq!(record["reason"], REASON, "{record}");

    // A settlement whose record contradicts it (as a faulty or foreign component's
    // might) is checked as the owned interceptor checks it: an engine-failure denial.
    let contradicted: fn(&mut String) = |audit| {
        *audit = audit.replace("\"backend-deny\"", "\"no-objection\"");
    };
    let record = intercept(
        &mut store,
        &plugin,
        loaded,
        bound(),
        &Interrupt::new(),
        contradicted,
    )
    .await
    .unwrap();
    assert_eq!(
        (&record["decision"], &record["decidedBy"]),
        (&json!("deny"), &json!("engine-failure")),
        "{record}"
    );

    // `begin_call` hands each call its own signal: one already interrupted is denied
    // as interrupted, nothing sent.
    let interrupted = Interrupt::new();
    interrupted.interrupt();
    let record = intercept(
        &mut store,
        &plugin,
        loaded,
        bound(),
        &interrupted,
        untouched,
    )
    .await
    .unwrap();
    assert_eq!(record["decidedBy"], "interrupted", "{record}");
    assert_eq!(backend.requests().len(), 2);

    // And its CPU bound: a component that spins (tests/runaway-guest) is stopped at the
    // call's own bound, not at the 5 s `bound_cpu` first gave the store — a trap, which
    // the embedder settles as a denial, never as permission.
    let (mut store, plugin) = instantiate(&linker, &runaway_component(), &interceptor).await;
    let api = plugin.ahp_interceptor_interceptor().engine();
    let spinning = api
        .call_load(&mut store, "{}", &[])
        .await
        .unwrap()
        .expect("the runaway loads anything");
    let bound = Duration::from_millis(300);
    let started = Instant::now();
    let trapped = intercept(
        &mut store,
        &plugin,
        spinning,
        started + bound,
        &Interrupt::new(),
        untouched,
    )
    .await;
    let took = started.elapsed();
    assert!(trapped.is_err(), "{trapped:?}");
    assert!(took >= bound && took < Duration::from_secs(3), "{took:?}");
    interceptor.shutdown_async().await;
}

/// A call interrupted after the component returned its allow, while the embedder had not
/// yet read it, is denied as interrupted when `Settlement::from_component` reads it, as
/// the owned interceptor's is: interruption never turns into permission. Uninterrupted,
/// the same call is the backend's allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interruption_while_the_settlement_is_read_overrides_an_allow() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let registration =
        registration(&[Http::new("dev.ahp.linker", backend.url()).policy("fail-open")]);
    let mut embedder = embedded(&registration).await;
    let bound = Instant::now() + Duration::from_secs(5);
    for interrupted in [false, true] {
        let interrupt = Interrupt::new();
        let after = |_: &mut String| {
            if interrupted {
                interrupt.interrupt();
            }
        };
        let record = intercept(
            &mut embedder.store,
            &embedder.plugin,
            embedder.loaded,
            bound,
            &interrupt,
            after,
        )
        .await
        .unwrap();
        let expected = match interrupted {
            true => ("deny", "interrupted"),
            false => ("allow", "no-objection"),
        };
        assert_eq!(
            (&record["decision"], &record["decidedBy"]),
            (&json!(expected.0), &json!(expected.1)),
            "{record}"
        );
    }
    // Each call reached the backend: the component had settled before the interruption.
    assert_eq!(backend.requests().len(), 2);
    embedder.interceptor.shutdown_async().await;
}

/// A call in the embedder's store after the interceptor shut down is a `shutdown`
/// denial, its backend never asked, however fail-open its subscription: the store's host
/// state ends its calls with the interceptor's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_after_the_interceptor_shut_down_is_denied_unasked() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let registration =
        registration(&[Http::new("dev.ahp.linker", backend.url()).policy("fail-open")]);
    let mut embedder = embedded(&registration).await;
    assert_eq!(embedder.interceptor.registration(), registration);
    embedder.interceptor.shutdown_async().await;
    let record = intercept(
        &mut embedder.store,
        &embedder.plugin,
        embedder.loaded,
        Instant::now() + Duration::from_secs(5),
        &Interrupt::new(),
        untouched,
    )
    .await
    .unwrap();
    assert_eq!(
        (&record["decision"], &record["decidedBy"]),
        (&json!("deny"), &json!("shutdown")),
        "{record}"
    );
    assert!(backend.requests().is_empty());
}

/// At the linker level the call's own observers come back from
/// `Settlement::from_component`; `Interceptor::send_observers` sends them through the
/// interceptor's backends and records each one's result, the decision unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calls_own_observers_are_sent_and_recorded_at_the_linker_level() {
    let allowing = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let watching = FaultBackend::start(vec![Behaviour::Reply {
        status: 204,
        content_type: None,
        body: Vec::new(),
    }])
    .await;
    let mut document: Value = serde_json::from_str(&registration(&[Http::new(
        "dev.ahp.linker",
        allowing.url(),
    )]))
    .unwrap();
    document["hooks"].as_array_mut().unwrap().push(json!({
        "id": "dev.ahp.watcher", "transport": {"type": "http", "url": watching.url()},
        "subscriptions": [{"events": ["tool.before"], "mode": "observe",
                           "content": {"default": "metadata"}}]}));
    let registration = document.to_string();
    let mut embedder = embedded(&registration).await;
    let interrupt = Interrupt::new();
    let arrived = Instant::now();
    embedder
        .store
        .data_mut()
        .ahp()
        .begin_call(arrived + Duration::from_secs(5), &interrupt);
    let event = event("evt_linker_observed");
    let started = ahp_host::component_instant(arrived);
    let api = embedder.plugin.ahp_interceptor_interceptor().engine();
    let settled = api
        .call_intercept(
            &mut embedder.store,
            embedder.loaded,
            &event,
            &[],
            None,
            started,
        )
        .await
        .unwrap()
        .expect("a valid event");
    let state = &embedder.store.data().ahp;
    let (settlement, observers) = Settlement::from_component(settled, &event, arrived, state);
    assert_eq!(observers.len(), 1, "{}", settlement.to_json());
    assert!(
        watching.requests().is_empty(),
        "nothing sent before it is asked"
    );
    let settlement = embedder
        .interceptor
        .send_observers(settlement, observers, &interrupt)
        .await;
    let record = serde_json::to_value(&settlement.record).unwrap();
    assert_eq!(
        (&record["decision"], &record["decidedBy"]),
        (&json!("allow"), &json!("no-objection")),
        "{record}"
    );
    assert_eq!(
        record["observers"][0]["backend"], "dev.ahp.watcher",
        "{record}"
    );
    assert_eq!(record["observers"][0]["result"], "delivered", "{record}");
    let sent = watching.requests();
    assert_eq!(sent.len(), 1);
    let notification: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(notification["method"], "hooks/observe");
    assert_eq!(notification["params"]["event"]["id"], "evt_linker_observed");
    embedder.interceptor.shutdown_async().await;
}

/// The wasi-http pattern, WASI p2 and the interceptor on one Linker, is refused naming
/// the clock and the remedy (not wasmtime's bare "defined twice"): the interceptor's
/// clock must be the host state's. With shadowing allowed too, where the interceptor's
/// clock would have replaced WASI's for the embedder's own components. (Reads no clock.)
#[test]
fn a_linker_with_wasis_clock_is_refused_naming_the_clock_and_the_remedy() {
    let mut config = Config::new();
    config.epoch_interruption(true);
    let engine = Engine::new(&config).unwrap();
    for shadowing in [false, true] {
        let mut linker = Linker::<MyData>::new(&engine);
        linker.allow_shadowing(shadowing);
        ahp_host::wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        let error = ahp_host::add_to_linker(&mut linker)
            .expect_err("WASI's clock is there")
            .to_string();
        assert!(
            error.contains("wasi:clocks/monotonic-clock") && error.contains("a Linker of its own"),
            "shadowing {shadowing}: {error}"
        );
    }
}
