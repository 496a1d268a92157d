//! The wasmtime side: an Engine with the pooling allocator and epoch interruption (ours,
//! or the embedder's), the compiled component, an `InstancePre` with every import
//! linked, and ONE epoch ticker thread per Engine (never one per call).
//!
//! Guest CPU is bounded by epochs: each call sets `cpu_deadline` in its store, and the
//! epoch callback compares against the real clock (ticks drift), yielding to the executor
//! in between so the host's outer timeout can also fire.

use crate::bindings::{Plugin, PluginPre};
use crate::linker::{add_to_linker, AhpView};
use crate::options::DEFAULT_MAX_INSTANCES;
use crate::slots::Slots;
use crate::state::HostState;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::component::{Component, Linker};
use wasmtime::error::Context as _;
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, UpdateDeadline,
};

/// The component this crate was built with.
pub const EMBEDDED_COMPONENT: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ahp_interceptor.wasm"));

/// The WIT package the component implements, `ahp:interceptor@0.1.3`, encoded as a
/// binary WIT package (`wit/` at build time).
pub const EMBEDDED_WIT_PACKAGE: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ahp_interceptor.wit.wasm"));

/// How often the epoch advances; the granularity of guest CPU enforcement.
const TICK: Duration = Duration::from_millis(1);

/// Who advances the Engine's epoch, which bounds the component's CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Epochs {
    /// This crate: one shared ticker thread per Engine, every millisecond while a call
    /// is in the component (parked when the Engine is idle). The epoch is the Engine's:
    /// stores of your own on it whose epoch deadlines assume a slower tick of yours see
    /// it advance faster while a call runs; drive the epoch yourself (`External`) then.
    #[default]
    Ticker,
    /// The embedder already calls `Engine::increment_epoch` regularly (about every
    /// millisecond; a slower tick makes the CPU bound coarser, never absent).
    External,
}

/// A compiled component, ready to instantiate many times.
pub struct Runtime {
    engine: Engine,
    pre: PluginPre<HostState>,
    /// The Engine's ticker, which ticks while a call of this runtime is in the component
    /// ([`Runtime::ticking`]); `None` when the embedder advances the epoch.
    ticker: Option<Arc<TickerThread>>,
    /// The Engine's instance slots, shared by every pool of this runtime; `None` on an
    /// Engine of the embedder's, whose capacity this crate does not know.
    slots: Option<Slots>,
}

impl Runtime {
    /// The runtime for the embedded component on this crate's default Engine, compiled
    /// once per process.
    pub fn embedded() -> wasmtime::Result<Arc<Runtime>> {
        static EMBEDDED: OnceLock<Arc<Runtime>> = OnceLock::new();
        if let Some(runtime) = EMBEDDED.get() {
            return Ok(runtime.clone());
        }
        let runtime = Arc::new(Runtime::new(EMBEDDED_COMPONENT)?);
        Ok(EMBEDDED.get_or_init(|| runtime).clone())
    }

    /// Compiles `component` (a `.wasm` component) for this host, on a default Engine.
    pub fn new(component: &[u8]) -> wasmtime::Result<Runtime> {
        let engine = default_engine()?;
        let component = compile(&engine, component)?;
        Ok(Runtime::with_component(&engine, &component, Epochs::Ticker)?.on_default_engine())
    }

    /// This runtime, its Engine made by [`default_engine`] for it: the runtime tracks the
    /// Engine's instance slots, whose number it knows.
    pub(crate) fn on_default_engine(self) -> Runtime {
        Runtime {
            slots: Some(Slots::new(DEFAULT_MAX_INSTANCES)),
            ..self
        }
    }

    /// Links `component`, compiled for `engine`, with every import.
    pub fn with_component(
        engine: &Engine,
        component: &Component,
        epochs: Epochs,
    ) -> wasmtime::Result<Runtime> {
        let mut linker: Linker<HostState> = Linker::new(engine);
        add_to_linker(&mut linker)?;
        let pre = PluginPre::new(linker.instantiate_pre(component)?)?;
        let ticker = match epochs {
            Epochs::Ticker => Some(
                TickerThread::for_engine(engine)
                    .map_err(|e| wasmtime::format_err!("start the epoch ticker thread: {e}"))?,
            ),
            Epochs::External => None,
        };
        Ok(Runtime {
            engine: engine.clone(),
            pre,
            ticker,
            slots: None,
        })
    }

    /// Keeps the epoch advancing while the result lives: hold it over every stretch in
    /// which this runtime's component code may run (instantiation and calls).
    pub(crate) fn ticking(&self) -> Option<Demand<'_>> {
        self.ticker.as_deref().map(TickerThread::demand)
    }

    /// The Engine's instance slots, if this crate made the Engine and so knows them.
    pub(crate) fn slots(&self) -> Option<&Slots> {
        self.slots.as_ref()
    }

    /// A new instance with its own store; CPU-bounded from the first instruction.
    pub async fn instantiate(
        &self,
        state: HostState,
    ) -> wasmtime::Result<(Store<HostState>, Plugin)> {
        let mut store = self.store(state);
        let plugin = self.pre.instantiate_async(&mut store).await?;
        Ok((store, plugin))
    }

    /// A store for an instance: its memory, tables and CPU bounded by `state`.
    fn store(&self, state: HostState) -> Store<HostState> {
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limits);
        bound_cpu(&mut store);
        store
    }
}

/// Bounds the component's CPU in `store` by its [`HostState`]'s CPU deadline, from the
/// first instruction (5 s until a call sets its own). Call before instantiating. The
/// bound is checked at each epoch tick: only while the Engine's epoch advances (see
/// [`crate::check_engine`]). On an Engine that consumes fuel, the store is given all
/// there is: the epochs bound the component, and a store without fuel would trap at its
/// first instruction, every call an engine failure.
///
/// It replaces the store's epoch deadline and callback (and its fuel): the interceptor
/// component needs a `Store` of its own. Other code in the same store would lose its own
/// callback and fuel limit, or, arming its own after, leave the component unbounded.
pub fn bound_cpu<T: AhpView + 'static>(store: &mut Store<T>) {
    if store.get_fuel().is_ok() {
        let _ = store.set_fuel(u64::MAX);
    }
    store.data_mut().ahp().cpu_deadline = std::time::Instant::now() + Duration::from_secs(5);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| {
        if std::time::Instant::now() >= ctx.data_mut().ahp().cpu_deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
}

/// The most a memory of the component may hold, 256 MiB: in the pool's slots, and in
/// every store this crate makes on any other Engine.
pub(crate) const MAX_MEMORY_BYTES: usize = 256 << 20;

/// The most elements a table of the component may hold: in the pool's slots, and in
/// every store this crate makes on any other Engine.
pub(crate) const MAX_TABLE_ELEMENTS: usize = 20_000;

/// This crate's Engine: epoch interruption, the pooling allocator, no component-model
/// concurrency. The pool reserves the address space of all its memories up front (some
/// 4 TiB: each memory's 4 GiB and guards); where that cannot be had — an address-space
/// limit (`ulimit -v`), or the many Engines of one process — instances are allocated on
/// demand instead, each reserving its own when made.
pub fn default_engine() -> wasmtime::Result<Engine> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    // The component uses no component-model async: without concurrency support,
    // `call_async` runs the call straight on a fiber instead of through wasmtime's
    // task machinery (`run_concurrent`, a host task per import call), about 5 µs of the
    // ~30 µs a call spends in the component (tests/harness-bench, host/benches).
    config.concurrency_support(false);
    let mut pooling = PoolingAllocationConfig::default();
    // One interceptor's pool at its default size fills it; beyond, calls wait (slots.rs).
    pooling
        .total_component_instances(DEFAULT_MAX_INSTANCES as u32)
        .total_core_instances(2048)
        .total_memories(1024)
        .total_tables(2048)
        .max_memory_size(MAX_MEMORY_BYTES)
        .table_elements(MAX_TABLE_ELEMENTS);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    Engine::new(&config).or_else(|e| {
        tracing::warn!(error = %format!("{e:#}"), "the instance pool could not be set up; instances are allocated on demand");
        config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
        // Each memory reserves what it may hold and a small guard, not 4 GiB and more:
        // the code checks bounds, and an instance fits a tight address-space limit. Its
        // compiled code is another (cached apart: `ahp precompile` warms the pool's),
        // compiled on one thread, since every thread's allocator arena takes address
        // space too.
        config
            .memory_reservation(MAX_MEMORY_BYTES as u64)
            .memory_reservation_for_growth(0)
            .memory_guard_size(64 << 10)
            .guard_before_linear_memory(false)
            .parallel_compilation(false);
        Engine::new(&config)
    })
}

/// Compiles `bytes` (a `.wasm` component) for `engine`: the one place the component is
/// compiled.
pub(crate) fn compile(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
    #[cfg(test)]
    tests::COMPILED_ON
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(std::thread::current().id());
    crate::compile_cache::load(engine, bytes).context("compile the interceptor component")
}

/// How long the ticker goes on after the last call left the component before it parks:
/// a stream of calls never waits for it to wake, an idle process is never woken by it.
const LINGER_TICKS: u32 = 100;

/// A hold on an Engine's ticker thread: while any [`EpochTicker`] of an Engine lives, its
/// epoch advances every millisecond. Every holder on the same Engine shares one thread.
pub struct EpochTicker {
    thread: Arc<TickerThread>,
}

impl EpochTicker {
    /// A hold on the ticker of `engine`, started on first use; every holder for the same
    /// Engine shares one thread, which ticks as long as any hold lives. `Err` if the
    /// thread cannot be started (the system refuses a thread): without it no component
    /// call on `engine` would ever be cut off.
    pub fn for_engine(engine: &Engine) -> std::io::Result<Arc<EpochTicker>> {
        let thread = TickerThread::for_engine(engine)?;
        thread.enter();
        Ok(Arc::new(EpochTicker { thread }))
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.thread.leave();
    }
}

/// The one thread that advances an Engine's epoch. It ticks while it has demand — the
/// calls in the component (see [`Runtime::ticking`]) and every [`EpochTicker`] —
/// and for [`LINGER_TICKS`] after, then parks until demand returns. It stops when the
/// last user drops it.
pub(crate) struct TickerThread {
    engine: Engine,
    state: Arc<TickerState>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct TickerState {
    /// Calls in the component plus live [`EpochTicker`] holds.
    demand: AtomicUsize,
    stop: AtomicBool,
}

/// One unit of a [`TickerThread`]'s demand, released on drop.
pub(crate) struct Demand<'a>(&'a TickerThread);

impl Drop for Demand<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

impl TickerThread {
    fn for_engine(engine: &Engine) -> std::io::Result<Arc<TickerThread>> {
        static TICKERS: Mutex<Vec<Weak<TickerThread>>> = Mutex::new(Vec::new());
        let mut tickers = TICKERS.lock().unwrap_or_else(|p| p.into_inner());
        tickers.retain(|t| t.strong_count() > 0);
        if let Some(ticker) = tickers
            .iter()
            .filter_map(Weak::upgrade)
            .find(|t| Engine::same(&t.engine, engine))
        {
            return Ok(ticker);
        }
        let ticker = Arc::new(TickerThread::start(engine.clone())?);
        tickers.push(Arc::downgrade(&ticker));
        Ok(ticker)
    }

    fn start(engine: Engine) -> std::io::Result<TickerThread> {
        let state = Arc::new(TickerState::default());
        let shared = state.clone();
        let ticking = engine.clone();
        let thread = std::thread::Builder::new()
            .name("ahp-epoch-ticker".into())
            .spawn(move || {
                let mut idle = 0;
                while !shared.stop.load(Ordering::SeqCst) {
                    if shared.demand.load(Ordering::SeqCst) > 0 {
                        idle = 0;
                    } else if idle < LINGER_TICKS {
                        idle += 1;
                    } else {
                        // `enter` unparks after raising demand, so a call that arrives
                        // between the check and here makes `park` return at once.
                        std::thread::park();
                        idle = 0;
                        continue;
                    }
                    std::thread::sleep(TICK);
                    ticking.increment_epoch();
                }
            })?;
        Ok(TickerThread {
            engine,
            state,
            thread: Some(thread),
        })
    }

    /// Ticks until the returned demand is dropped (and a moment after).
    pub(crate) fn demand(&self) -> Demand<'_> {
        self.enter();
        Demand(self)
    }

    fn enter(&self) {
        if self.state.demand.fetch_add(1, Ordering::SeqCst) == 0 {
            if let Some(thread) = &self.thread {
                thread.thread().unpark();
            }
        }
    }

    fn leave(&self) {
        self.state.demand.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for TickerThread {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The threads [`compile`] ran on, in this test process.
    pub(super) static COMPILED_ON: std::sync::Mutex<Vec<std::thread::ThreadId>> =
        std::sync::Mutex::new(Vec::new());

    /// Building an interceptor compiles its component on the blocking pool, never on the
    /// caller's async worker: on a current-thread runtime a compile (some 0.4 s of CPU)
    /// would stall every other task meanwhile, other calls' deadline timers included.
    #[tokio::test(flavor = "current_thread")]
    async fn building_compiles_on_the_blocking_pool() {
        let engine = engine_with(|config| config);
        let interceptor = unreachable_on(&engine).await;
        let compiled_on = COMPILED_ON
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        assert!(!compiled_on.is_empty(), "nothing was compiled");
        assert!(
            !compiled_on.contains(&std::thread::current().id()),
            "compiled on the caller's thread"
        );
        interceptor.shutdown_async().await;
    }

    /// An Engine with epoch interruption (which the crate needs) and whatever else
    /// `configure` sets.
    fn engine_with(configure: impl FnOnce(&mut Config) -> &mut Config) -> Engine {
        let mut config = Config::new();
        configure(config.epoch_interruption(true));
        Engine::new(&config).unwrap()
    }

    /// An interceptor on `engine` whose one interceptor, of tool.before, fails open and
    /// is unreachable.
    async fn unreachable_on(engine: &Engine) -> crate::Interceptor {
        unreachable_by(crate::InterceptorBuilder::new().engine(engine))
            .await
            .expect("built on the Engine")
    }

    /// [`unreachable_on`], built by `builder`.
    async fn unreachable_by(
        builder: crate::InterceptorBuilder,
    ) -> Result<crate::Interceptor, crate::Error> {
        let registration = r#"{"protocolVersion": "draft", "hooks": [{"id": "com.example.a",
            "transport": {"type": "http", "url": "http://127.0.0.1:9/ahp"},
            "subscriptions": [{"events": ["tool.before"], "mode": "intercept",
                "timeoutMs": 500, "failurePolicy": "fail-open",
                "content": {"default": "body"}}]}]}"#;
        builder.build(registration).await
    }

    /// A call to such an interceptor runs in the component and is let through, its
    /// backend unreachable.
    async fn assert_lets_a_call_through(interceptor: &crate::Interceptor) {
        let event = r#"{"id": "evt_fuel", "source": "urn:ahp:test", "type": "tool.before",
            "time": "2026-11-30T12:00:00Z", "call": {"id": "c1"}, "path": "native",
            "tool": {"name": "Bash", "input": {"command": "ls"}, "origin": "native"}}"#;
        let settled = interceptor.intercept(event, &[], None).await.unwrap();
        assert_eq!(
            (settled.decision, settled.decided_by),
            (crate::Decision::Allow, crate::DecidedBy::NoObjection),
            "{}",
            settled.to_json()
        );
    }

    /// On an embedder's Engine that consumes fuel, the crate's stores are given all there
    /// is: the calls run (bounded by epochs) instead of trapping at their first
    /// instruction, every one an engine failure.
    #[tokio::test]
    async fn an_engine_that_consumes_fuel_runs_the_component() {
        let engine = engine_with(|config| config.consume_fuel(true));
        let interceptor = unreachable_on(&engine).await;
        assert_lets_a_call_through(&interceptor).await;
        interceptor.shutdown_async().await;
    }

    /// A `Component` given without its Engine runs on that Engine (not on one the
    /// builder would make, where it could not be instantiated), once that Engine is
    /// checked as a given one is: without epoch interruption, refused by name.
    #[tokio::test]
    async fn a_component_alone_runs_on_the_engine_it_was_compiled_for() {
        let engine = engine_with(|config| config);
        let component = Component::new(&engine, EMBEDDED_COMPONENT).unwrap();
        let built = unreachable_by(crate::InterceptorBuilder::new().component(component));
        let interceptor = built.await.expect("built on the Component's Engine");
        assert_lets_a_call_through(&interceptor).await;
        interceptor.shutdown_async().await;

        let plain = Engine::new(&Config::new()).unwrap();
        let component = Component::new(&plain, "(component)").unwrap();
        let built = unreachable_by(crate::InterceptorBuilder::new().component(component));
        let error = built.await.err().expect("refused").to_string();
        assert!(error.contains("epoch_interruption"), "{error}");
    }

    /// Every store this crate makes bounds each memory to 256 MiB and each table to
    /// 20,000 elements on an Engine that allocates on demand too (the fallback where the
    /// pool cannot reserve its address space, or an embedder's Engine): a grow past the
    /// bound fails, as in the pool. And it holds one memory, the component's: a second
    /// (another build of many core modules, each with one) is refused.
    #[tokio::test]
    async fn the_crates_stores_bound_memory_and_tables_on_any_engine() {
        let engine = engine_with(|config| config.concurrency_support(false));
        let interceptor = unreachable_on(&engine).await;
        let component = compile(&engine, EMBEDDED_COMPONENT).unwrap();
        let runtime = Runtime::with_component(&engine, &component, Epochs::Ticker).unwrap();
        let (mut with_component, _plugin) =
            runtime.instantiate(interceptor.host_state()).await.unwrap();
        let second = wasmtime::Module::new(&engine, "(module (memory 1))").unwrap();
        let refused = wasmtime::Instance::new_async(&mut with_component, &second, &[]).await;
        assert!(refused.is_err(), "a second memory in the component's store");
        let mut store = runtime.store(interceptor.host_state());
        let module = wasmtime::Module::new(
            &engine,
            r#"(module (memory 1) (table 1 funcref)
                 (func (export "grow") (param i32) (result i32) local.get 0 memory.grow)
                 (func (export "grow_table") (param i32) (result i32)
                   ref.null func local.get 0 table.grow 0))"#,
        )
        .unwrap();
        let instance = wasmtime::Instance::new_async(&mut store, &module, &[])
            .await
            .unwrap();
        let grow = instance
            .get_typed_func::<i32, i32>(&mut store, "grow")
            .unwrap();
        let _ticking = runtime.ticking();
        let pages = i32::try_from(MAX_MEMORY_BYTES >> 16).unwrap();
        assert_eq!(grow.call_async(&mut store, pages - 1).await.unwrap(), 1);
        assert_eq!(
            grow.call_async(&mut store, 1).await.unwrap(),
            -1,
            "past the bound"
        );
        let grow_table = instance
            .get_typed_func::<i32, i32>(&mut store, "grow_table")
            .unwrap();
        let elements = i32::try_from(MAX_TABLE_ELEMENTS).unwrap();
        assert_eq!(
            grow_table
                .call_async(&mut store, elements - 1)
                .await
                .unwrap(),
            1
        );
        assert_eq!(grow_table.call_async(&mut store, 1).await.unwrap(), -1);
        interceptor.shutdown();
    }

    #[test]
    fn one_ticker_per_engine() {
        let a = default_engine().unwrap();
        let b = default_engine().unwrap();
        let first = EpochTicker::for_engine(&a).unwrap();
        assert!(Arc::ptr_eq(
            &first.thread,
            &EpochTicker::for_engine(&a.clone()).unwrap().thread
        ));
        assert!(!Arc::ptr_eq(
            &first.thread,
            &EpochTicker::for_engine(&b).unwrap().thread
        ));
    }

    /// A runtime on an Engine that has a ticker shares it (an embedder's `EpochTicker`,
    /// another runtime's), and one whose embedder drives the epochs starts none.
    #[test]
    fn runtimes_share_their_engines_ticker_and_external_epochs_start_none() {
        let embedded = Runtime::embedded().unwrap();
        let engine = embedded.engine.clone();
        let component = embedded.pre.instance_pre().component().clone();
        let held = EpochTicker::for_engine(&engine).unwrap();
        let shared = Runtime::with_component(&engine, &component, Epochs::Ticker).unwrap();
        let thread = shared.ticker.as_ref().expect("a ticker");
        assert!(Arc::ptr_eq(thread, &held.thread));
        assert!(Arc::ptr_eq(thread, embedded.ticker.as_ref().unwrap()));
        let external = Runtime::with_component(&engine, &component, Epochs::External).unwrap();
        assert!(external.ticker.is_none());
    }

    /// A ticker parked for lack of demand wakes for the next call: a spinning guest
    /// that starts after a long idle stretch is still cut off at the next tick.
    #[test]
    fn a_parked_ticker_wakes_for_a_call() {
        let engine = default_engine().unwrap();
        let ticker = TickerThread::for_engine(&engine).unwrap();
        let module =
            wasmtime::Module::new(&engine, r#"(module (func (export "spin") (loop br 0)))"#)
                .unwrap();
        // Idle well past the linger: the thread has parked.
        std::thread::sleep(TICK * (LINGER_TICKS + 50));
        // On a thread of its own, so that a ticker that never wakes fails the test
        // instead of spinning it for ever.
        let (sent, trapped) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _call = ticker.demand();
            let mut store = Store::new(&engine, ());
            store.set_epoch_deadline(1);
            let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
            let spin = instance
                .get_typed_func::<(), ()>(&mut store, "spin")
                .unwrap();
            let trap = spin.call(&mut store, ()).unwrap_err();
            let _ = sent.send(trap.downcast_ref::<wasmtime::Trap>().copied());
        });
        let trap = trapped
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the spin is cut off at the next tick");
        assert_eq!(trap, Some(wasmtime::Trap::Interrupt));
    }
}
