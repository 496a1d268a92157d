//! The data of one component instance's store: what the capability impls
//! (`credentials_impl`, `delivery_impl`, `host_types_impl`) serve the component from.

use crate::backends::Backends;
use crate::clock;
use crate::interrupt::Interrupt;
use std::sync::Arc;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The data of one component instance's store.
pub struct HostState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) backends: Arc<Backends>,
    /// The interruption signal of the hook call currently running in this instance.
    pub(crate) interrupt: Interrupt,
    /// Set when the interceptor shuts down: ends every in-flight call.
    pub(crate) shutdown: Interrupt,
    /// When the component's CPU time for the current call runs out (epoch check).
    pub(crate) cpu_deadline: std::time::Instant,
    /// The current call holds an instance held back for settling (`lanes`): it may
    /// settle, but start no I/O.
    settle_only: bool,
    /// The current call reached I/O while `settle_only`: stopped there, nothing sent, for
    /// the pool to run it again from the main lane.
    gave_way: bool,
    /// Each memory's and table's bound ([`crate::runtime::MAX_MEMORY_BYTES`],
    /// [`crate::runtime::MAX_TABLE_ELEMENTS`]) in a store this crate makes, on any
    /// Engine: the pool's slots have them, instances made on demand need them.
    pub(crate) limits: wasmtime::StoreLimits,
}

impl HostState {
    /// A store's data serving `backends`; `shutdown` ends every call in it when set.
    pub(crate) fn new(backends: Arc<Backends>, shutdown: Interrupt) -> HostState {
        let wasi = wasmtime_wasi::WasiCtxBuilder::new()
            .monotonic_clock(clock::SharedMonotonicClock)
            .build();
        HostState {
            wasi,
            table: ResourceTable::new(),
            backends,
            interrupt: Interrupt::new(),
            shutdown,
            cpu_deadline: std::time::Instant::now(),
            settle_only: false,
            gave_way: false,
            // One memory: the component has one, and another build made of many core
            // modules, each with a memory, would otherwise hold 256 MiB per module.
            limits: wasmtime::StoreLimitsBuilder::new()
                .memories(1)
                .memory_size(crate::runtime::MAX_MEMORY_BYTES)
                .table_elements(crate::runtime::MAX_TABLE_ELEMENTS)
                .build(),
        }
    }

    /// Prepares this store for its next export call: the component is stopped (a trap)
    /// at the first epoch check once the clock passes `until` (the epoch callback of
    /// [`crate::bound_cpu`] checks it), and `interrupt` is the call's signal, which ends
    /// its pending requests. `until` is a point in wall-clock time, not CPU
    /// time: the component's time waiting on its backends counts, and a call still
    /// running past it traps on its way back from an import, a denial. So give it no
    /// less than the call may legitimately take: the start plus `engine.bound-ms` (the
    /// longest its chain of deadlines, or its budget, allows) plus a little to settle.
    /// Every call needs it: a store's first bound, set by `bound_cpu`, lasts 5 s.
    pub fn begin_call(&mut self, until: std::time::Instant, interrupt: &Interrupt) {
        self.cpu_deadline = until;
        self.interrupt = interrupt.clone();
        self.settle_only = false;
        self.gave_way = false;
    }

    /// After [`HostState::begin_call`]: the call runs on an instance held back for
    /// settling, where it starts no I/O (see [`HostState::may_start_io`]).
    pub(crate) fn settle_only(&mut self) {
        self.settle_only = true;
    }

    /// Whether the call may start I/O (acquire a credential, exchange, wait to retry):
    /// not on an instance held back for settling. There the call gives way instead: it
    /// is stopped, as if interrupted, with nothing sent, and its result is the pool's to
    /// discard.
    pub(crate) fn may_start_io(&mut self) -> bool {
        self.gave_way |= self.settle_only;
        !self.gave_way
    }

    /// Whether the current call gave way (see [`HostState::may_start_io`]).
    pub(crate) fn gave_way(&self) -> bool {
        self.gave_way
    }

    /// Whether the call was interrupted or the interceptor is shutting down.
    pub(crate) fn stopped(&self) -> bool {
        self.interrupt.is_set() || self.shutdown.is_set()
    }

    /// Resolves when the call is interrupted or the interceptor shuts down.
    pub(crate) fn when_stopped(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (call, shutdown) = (self.interrupt.clone(), self.shutdown.clone());
        async move {
            tokio::select! {
                () = call.wait() => {}
                () = shutdown.wait() => {}
            }
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
