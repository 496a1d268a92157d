//! The instance pool and the guarded component call.
//!
//! A call takes a ready instance (the registration was loaded once, when the instance
//! was made), bounds the component's CPU (epochs) and wall time, and returns the
//! instance to the pool only after a normal return: an instance that trapped or overran
//! its bound is dropped, never reused. Every failure here is an engine failure, which the
//! caller settles as a denial.

use crate::backends::Backends;
use crate::bindings::{interceptor as wit, Plugin};
use crate::convert::from_wit;
use crate::interrupt::Interrupt;
use crate::runtime::Runtime;
use crate::state::HostState;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime::component::ResourceAny;
use wasmtime::Store;

/// An instance whose engine resource already holds the loaded registration.
pub(crate) struct Ready {
    pub store: Store<HostState>,
    pub plugin: Plugin,
    pub engine: ResourceAny,
}

/// Ready instances of one registration.
pub(crate) struct Pool {
    runtime: Arc<Runtime>,
    registration: String,
    /// The declaration the registration was loaded with, for every later instance.
    declaration: Vec<wit::EventCapability>,
    backends: Arc<Backends>,
    /// Set by shutdown: ends every call in every instance.
    closing: Interrupt,
    idle: Mutex<Idle>,
}

#[derive(Default)]
struct Idle {
    /// Once closed, no instance is kept.
    closed: bool,
    ready: Vec<Ready>,
}

impl Pool {
    pub fn new(
        runtime: Arc<Runtime>,
        registration: String,
        declaration: Vec<wit::EventCapability>,
        backends: Arc<Backends>,
        closing: Interrupt,
    ) -> Pool {
        Pool {
            runtime,
            registration,
            declaration,
            backends,
            closing,
            idle: Mutex::default(),
        }
    }

    /// Runs `call` on a ready instance, with `interrupt` as the call's signal and the
    /// component's CPU (epochs) and wall time bounded by `limit`. The instance goes back
    /// to the pool only after a normal return. `None` is an engine failure (no instance,
    /// a trap, or the bound overrun), already logged: never permission.
    pub async fn in_component<T>(
        &self,
        limit: Instant,
        interrupt: &Interrupt,
        call: impl AsyncFnOnce(&mut Ready) -> wasmtime::Result<T>,
    ) -> Option<T> {
        let _ticking = self.runtime.ticking();
        let mut ready = match self.take().await {
            Ok(ready) => ready,
            Err(e) => {
                tracing::error!(error = %e, "could not prepare a component instance");
                return None;
            }
        };
        ready.store.data_mut().cpu_deadline = limit;
        ready.store.data_mut().interrupt = interrupt.clone();
        ready.store.set_epoch_deadline(1);
        match tokio::time::timeout_at(limit.into(), call(&mut ready)).await {
            Ok(Ok(value)) => {
                self.put(ready);
                Some(value)
            }
            Ok(Err(trap)) => {
                tracing::error!(error = %trap, "component trapped");
                None
            }
            Err(_elapsed) => {
                tracing::error!("component exceeded its call bound");
                None
            }
        }
    }

    /// Drops every idle instance and keeps none from now on (shutdown).
    pub fn close(&self) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.closed = true;
        idle.ready.clear();
    }

    async fn take(&self) -> wasmtime::Result<Ready> {
        if let Some(ready) = self
            .idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ready
            .pop()
        {
            return Ok(ready);
        }
        let state = HostState::new(self.backends.clone(), self.closing.clone());
        let (mut store, plugin) = self.runtime.instantiate(state).await?;
        store.data_mut().cpu_deadline = Instant::now() + Duration::from_secs(5);
        let engine = plugin
            .ahp_interceptor_interceptor()
            .engine()
            .call_load(&mut store, &self.registration, &self.declaration)
            .await?
            .map_err(|problems| {
                let problems: Vec<String> =
                    from_wit(problems).iter().map(ToString::to_string).collect();
                wasmtime::format_err!("registration rejected on reload: {}", problems.join("; "))
            })?;
        Ok(Ready {
            store,
            plugin,
            engine,
        })
    }

    /// Returns an instance whose call completed normally, unless the pool is closed.
    fn put(&self, ready: Ready) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if !idle.closed {
            idle.ready.push(ready);
        }
    }
}
