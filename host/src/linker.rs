//! The linker level, in the manner of wasmtime-wasi: the embedder owns the `Engine`, the
//! `Linker<T>` and the `Store<T>`, and this crate adds the component's imports over a
//! view of the embedder's store data ([`AhpView`]).

use crate::bindings;
use crate::state::HostState;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::error::Context as _;
use wasmtime::Engine;
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView as _};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;

/// `at` as the component's `instant` (WIT `host-types.instant`): nanoseconds on the one
/// monotonic clock the component and the host share, for `engine.intercept`'s `started`
/// and `budget`. Take `started` per call, when the call arrives: the component counts
/// every deadline from it, so a stale one (reused from an earlier call) finds them
/// passed, and each fail-open subscription lets the call through unasked.
pub fn component_instant(at: std::time::Instant) -> u64 {
    crate::clock::to_nanos(at)
}

/// Store data that holds the component's [`HostState`].
pub trait AhpView: Send {
    /// The component's host state in this store.
    fn ahp(&mut self) -> &mut HostState;
}

impl AhpView for HostState {
    fn ahp(&mut self) -> &mut HostState {
        self
    }
}

/// Adds every import of the component to `linker`, each served from the [`HostState`]
/// the store data's [`AhpView`] gives: the monotonic clock (wasmtime-wasi p2), then
/// `host-types`, `credentials` and `delivery`. The clock is the host state's, never the
/// store data's own WASI context: every deadline and `started` is a reading of that one
/// clock, and another (one counting from a different origin, or running ahead) would make
/// the component see its first deadline spent before anything was sent, and every
/// fail-open subscription allow unasked.
///
/// So the interceptor needs a Linker without WASI's monotonic clock: not the one
/// `wasmtime_wasi::p2::add_to_linker_async` filled, but one of its own. Fails, naming the
/// clock and that remedy, where the Linker already defines it (or another of the
/// component's imports), under `Linker::allow_shadowing(true)` too: there the
/// interceptor's clock would replace WASI's for the embedder's own components. What is
/// added after cannot be checked: on a Linker that allows shadowing, WASI's clock added
/// after this one replaces it unnoticed, which is wrong for the reason above. Fails,
/// naming the setting, if the Engine cannot bound the component's CPU (see
/// [`check_engine`]).
///
/// # Example
///
/// ```no_run
/// use ahp_host::wasmtime::component::{Component, Linker};
/// use ahp_host::wasmtime::{Config, Engine, Store};
/// use ahp_host::{AhpView, HostState, InterceptorBuilder};
///
/// struct MyData {
///     ahp: HostState,
/// }
/// impl AhpView for MyData {
///     fn ahp(&mut self) -> &mut HostState {
///         &mut self.ahp
///     }
/// }
///
/// # async fn demo(registration: &str, event: &str) -> ahp_host::wasmtime::Result<()> {
/// # use std::time::{Duration, Instant};
/// let mut config = Config::new();
/// config.epoch_interruption(true);
/// let engine = Engine::new(&config)?;
/// let _ticker = ahp_host::EpochTicker::for_engine(&engine)?;
/// let component = Component::new(&engine, ahp_host::EMBEDDED_COMPONENT)?;
/// // The interceptor whose backends the component's imports deliver to, on the same
/// // Engine and component (compiled once; it shares the Engine's ticker).
/// let interceptor = InterceptorBuilder::new()
///     .engine(&engine)
///     .component(component.clone())
///     .build(registration)
///     .await
///     .map_err(|e| ahp_host::wasmtime::format_err!("{e}"))?;
/// let mut linker = Linker::<MyData>::new(&engine);
/// ahp_host::add_to_linker(&mut linker)?;
/// let pre = ahp_host::PluginPre::new(linker.instantiate_pre(&component)?)?;
/// let mut store = Store::new(&engine, MyData { ahp: interceptor.host_state() });
/// ahp_host::bound_cpu(&mut store);
/// let plugin = pre.instantiate_async(&mut store).await?;
/// let api = plugin.ahp_interceptor_interceptor().engine();
/// let declaration = api.call_interceptable(&mut store).await?;
/// let loaded = api
///     .call_load(&mut store, interceptor.registration(), &declaration)
///     .await?
///     .map_err(|_| ahp_host::wasmtime::format_err!("registration rejected"))?;
/// // Before each call: its bound and its interruption signal. The bound is the longest
/// // the registration lets a call run (its chain of deadlines; the interceptor's, which
/// // takes no more than the registration's timeouts from the component's `bound-ms`),
/// // plus the time the crate allows past it to prepare observers and settle. `started`
/// // is taken per call, when it arrives: the time it waited counts.
/// let bound = interceptor.call_bound();
/// let interrupt = ahp_host::Interrupt::new();
/// let arrived = Instant::now();
/// store.data_mut().ahp.begin_call(arrived + bound + ahp_host::BOUND_MARGIN, &interrupt);
/// let started = ahp_host::component_instant(arrived);
/// // Epochs stop a component that computes; one waiting in an import (an exchange with a
/// // far deadline) is stopped by a timeout around the call: past it, a denial, and the
/// // store is not used again.
/// let calling = api.call_intercept(&mut store, loaded, event, &[], None, started);
/// let settled = tokio::time::timeout(bound + Duration::from_secs(2), calling)
///     .await
///     .map_err(|_| ahp_host::wasmtime::format_err!("past its bound: a denial"))??
///     .map_err(|_| ahp_host::wasmtime::format_err!("event rejected"))?;
/// // A trap (an `Err` above) is a denial, never permission. The WIT settlement is
/// // checked as the owned `Interceptor` checks it (one that contradicts itself is an
/// // engine-failure denial, and the call's interruption or the interceptor's shutdown
/// // since overrides an allow). Act on its decision, then send the observe deliveries
/// // it owns, which records how each ended.
/// let state = &store.data().ahp;
/// let (settlement, observers) =
///     ahp_host::Settlement::from_component(settled, event, arrived, state);
/// let settlement = interceptor.send_observers(settlement, observers, &interrupt).await;
/// let record_line = settlement.to_json();
/// # let _ = record_line; Ok(()) }
/// ```
pub fn add_to_linker<T: AhpView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    check_engine(linker.engine())?;
    // First on a copy that may not shadow: one that may would take ours in place of a
    // definition already there, without a word.
    let mut unshadowed = linker.clone();
    unshadowed.allow_shadowing(false);
    link(&mut unshadowed)?;
    link(linker)
}

/// Adds the component's imports to `linker`; fails naming the one already defined there.
fn link<T: AhpView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    // The component's only WASI import is the monotonic clock (host/componentize.rs says
    // why).
    monotonic_clock::add_to_linker::<T, WasiClocks>(linker, |t| t.ahp().clocks()).context(
        "the Linker already defines `wasi:clocks/monotonic-clock` (WASI's, as \
         `wasmtime_wasi::p2::add_to_linker_async` adds it, or an earlier `add_to_linker`'s): \
         the interceptor component's clock must be the host state's, on which every deadline \
         is read; add the interceptor to a Linker of its own, or to one without WASI's \
         monotonic clock",
    )?;
    bindings::Plugin::add_to_linker::<T, HasSelf<HostState>>(linker, T::ahp).context(
        "the Linker already defines the interceptor component's `ahp:interceptor` imports; \
         add the interceptor to a Linker of its own",
    )
}

/// Whether `engine` can run the component safely: it needs `Config::epoch_interruption
/// (true)`, without which a spinning component could never be cut off. (Async support
/// is always on in wasmtime 48.) The setting alone does not cut anything off: something
/// must advance the Engine's epoch — an [`crate::EpochTicker`] held as long as the
/// Engine runs the component, or the embedder's own `Engine::increment_epoch` — or a
/// spinning component is never stopped, and holds its thread (so no timeout of the
/// embedder's can fire either).
pub fn check_engine(engine: &Engine) -> wasmtime::Result<()> {
    if !engine.get_epoch_interruption() {
        wasmtime::bail!(
            "the Engine lacks `Config::epoch_interruption(true)`, which bounds the \
             interceptor component's CPU; enable it on the Engine's Config"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_without_epochs_is_refused_by_name() {
        let plain = Engine::new(&wasmtime::Config::new()).unwrap();
        let error = check_engine(&plain).unwrap_err().to_string();
        assert!(error.contains("epoch_interruption"), "{error}");
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        check_engine(&Engine::new(&config).unwrap()).unwrap();
    }
}
