//! The wasmtime side: an Engine with the pooling allocator and epoch interruption (ours,
//! or the embedder's), the compiled component, an `InstancePre` with every import
//! linked, and ONE epoch ticker thread per Engine (never one per call).
//!
//! Guest CPU is bounded by epochs: each call sets `cpu_deadline` in its store, and the
//! epoch callback compares against the real clock (ticks drift), yielding to the executor
//! in between so the host's outer timeout can also fire.

use crate::bindings::{Plugin, PluginPre};
use crate::linker::{add_to_linker, AhpView};
use crate::state::HostState;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// The WIT package the component implements, `ahp:interceptor@0.1.0`, encoded as a
/// binary WIT package (`wit/` at build time).
pub const EMBEDDED_WIT_PACKAGE: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ahp_interceptor.wit.wasm"));

/// How often the epoch advances; the granularity of guest CPU enforcement.
const TICK: Duration = Duration::from_millis(1);

/// Who advances the Engine's epoch, which bounds the component's CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Epochs {
    /// This crate: one shared [`EpochTicker`] thread per Engine, every millisecond.
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
    /// Keeps the Engine's ticker running while this runtime lives.
    _ticker: Option<Arc<EpochTicker>>,
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
        Runtime::with_component(&engine, &component, Epochs::Ticker)
    }

    /// Links `component`, compiled for `engine`, with every import.
    pub fn with_component(
        engine: &Engine,
        component: &Component,
        epochs: Epochs,
    ) -> wasmtime::Result<Runtime> {
        let mut linker: Linker<HostState> = Linker::new(engine);
        add_to_linker(&mut linker, |s| s)?;
        let pre = PluginPre::new(linker.instantiate_pre(component)?)?;
        let ticker = match epochs {
            Epochs::Ticker => Some(EpochTicker::for_engine(engine)),
            Epochs::External => None,
        };
        Ok(Runtime {
            engine: engine.clone(),
            pre,
            _ticker: ticker,
        })
    }

    /// A new instance with its own store; CPU-bounded from the first instruction.
    pub async fn instantiate(
        &self,
        state: HostState,
    ) -> wasmtime::Result<(Store<HostState>, Plugin)> {
        let mut store = Store::new(&self.engine, state);
        bound_cpu(&mut store);
        let plugin = self.pre.instantiate_async(&mut store).await?;
        Ok((store, plugin))
    }
}

/// Bounds the component's CPU in `store` by its [`HostState`]'s CPU deadline, from the
/// first instruction (5 s until a call sets its own). Call before instantiating.
pub fn bound_cpu<T: AhpView + 'static>(store: &mut Store<T>) {
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

/// This crate's Engine: epoch interruption and the pooling allocator.
pub fn default_engine() -> wasmtime::Result<Engine> {
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
    Engine::new(&config)
}

/// Compiles `bytes` (a `.wasm` component) for `engine`: the one place the component is
/// compiled.
pub(crate) fn compile(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
    crate::compile_cache::load(engine, bytes).context("compile the interceptor component")
}

/// The one thread that advances an Engine's epoch, shared by everything on that Engine;
/// it stops when the last holder drops it.
pub struct EpochTicker {
    engine: Engine,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// The ticker of `engine`, started on first use; every caller for the same Engine
    /// shares one thread.
    pub fn for_engine(engine: &Engine) -> Arc<EpochTicker> {
        static TICKERS: Mutex<Vec<Weak<EpochTicker>>> = Mutex::new(Vec::new());
        let mut tickers = TICKERS.lock().unwrap_or_else(|p| p.into_inner());
        tickers.retain(|t| t.strong_count() > 0);
        if let Some(ticker) = tickers
            .iter()
            .filter_map(Weak::upgrade)
            .find(|t| Engine::same(&t.engine, engine))
        {
            return ticker;
        }
        let ticker = Arc::new(EpochTicker::start(engine.clone()));
        tickers.push(Arc::downgrade(&ticker));
        ticker
    }

    fn start(engine: Engine) -> EpochTicker {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let ticking = engine.clone();
        let thread = std::thread::Builder::new()
            .name("ahp-epoch-ticker".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    ticking.increment_epoch();
                }
            })
            .expect("spawn the epoch ticker thread");
        EpochTicker {
            engine,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_ticker_per_engine() {
        let a = default_engine().unwrap();
        let b = default_engine().unwrap();
        let first = EpochTicker::for_engine(&a);
        assert!(Arc::ptr_eq(&first, &EpochTicker::for_engine(&a.clone())));
        assert!(!Arc::ptr_eq(&first, &EpochTicker::for_engine(&b)));
    }
}
