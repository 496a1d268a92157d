//! The wasmtime side: one Engine with the pooling allocator and epoch interruption, the
//! compiled component, an `InstancePre` with every import linked, and ONE epoch ticker
//! thread for the Engine (never one per call).
//!
//! Guest CPU is bounded by epochs: each call sets `cpu_deadline` in its store, and the
//! epoch callback compares against the real clock (ticks drift), yielding to the executor
//! in between so the host's outer timeout can also fire.

use crate::bindings::{self, PluginPre};
use crate::capabilities::HostState;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::error::Context as _;
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, UpdateDeadline,
};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView as _};

/// The component this crate was built with.
pub const EMBEDDED_COMPONENT: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ahp_interceptor.wasm"));

/// The WIT package the component implements, `ahp:interceptor@0.1.0`, encoded as a
/// binary WIT package (`wit/` at build time).
pub const EMBEDDED_WIT_PACKAGE: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ahp_interceptor.wit.wasm"));

/// How often the epoch advances; the granularity of guest CPU enforcement.
const TICK: Duration = Duration::from_millis(1);

/// A compiled component, ready to instantiate many times.
pub struct Runtime {
    engine: Engine,
    pre: PluginPre<HostState>,
    ticker: Option<Ticker>,
}

impl Runtime {
    /// The runtime for the embedded component, compiled once per process.
    pub fn embedded() -> wasmtime::Result<Arc<Runtime>> {
        static EMBEDDED: OnceLock<Arc<Runtime>> = OnceLock::new();
        if let Some(runtime) = EMBEDDED.get() {
            return Ok(runtime.clone());
        }
        let runtime = Arc::new(Runtime::new(EMBEDDED_COMPONENT)?);
        Ok(EMBEDDED.get_or_init(|| runtime).clone())
    }

    /// Compiles `component` (a `.wasm` component) for this host.
    pub fn new(component: &[u8]) -> wasmtime::Result<Runtime> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        let mut pooling = PoolingAllocationConfig::default();
        pooling
            .total_component_instances(512)
            .total_core_instances(2048)
            .total_memories(1024)
            .total_tables(2048)
            .max_memory_size(256 << 20);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
        let engine = Engine::new(&config)?;
        let component =
            Component::new(&engine, component).context("compile the interceptor component")?;
        let mut linker: Linker<HostState> = Linker::new(&engine);
        // The component's only WASI import is the monotonic clock (host/componentize.rs
        // says why), backed by the clock every deadline is measured on.
        wasmtime_wasi::p2::bindings::clocks::monotonic_clock::add_to_linker::<HostState, WasiClocks>(
            &mut linker,
            |s| s.clocks(),
        )?;
        bindings::host_types::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
        bindings::credentials::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
        bindings::delivery::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
        let pre = PluginPre::new(linker.instantiate_pre(&component)?)?;
        let ticker = Some(Ticker::start(engine.clone()));
        Ok(Runtime {
            engine,
            pre,
            ticker,
        })
    }

    /// A new instance with its own store; CPU-bounded from the first instruction.
    pub async fn instantiate(
        &self,
        state: HostState,
    ) -> wasmtime::Result<(Store<HostState>, bindings::Plugin)> {
        let mut store = Store::new(&self.engine, state);
        store.data_mut().cpu_deadline = std::time::Instant::now() + Duration::from_secs(5);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| {
            if std::time::Instant::now() >= ctx.data().cpu_deadline {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        let plugin = self.pre.instantiate_async(&mut store).await?;
        Ok((store, plugin))
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.stop();
        }
    }
}

/// The one thread that advances an Engine's epoch.
struct Ticker {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Ticker {
    fn start(engine: Engine) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ahp-epoch-ticker".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawn the epoch ticker thread");
        Ticker { stop, thread }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}
