//! The instance pool, its admission queue, and the guarded component call.
//!
//! A call takes a ready instance (the registration was loaded once, when the instance
//! was made), bounds the component's CPU (epochs) and wall time, and returns the
//! instance to the pool only after a normal return: an instance that trapped or overran
//! its bound is dropped, never reused. Every failure here is an engine failure, which the
//! caller settles as a denial.
//!
//! Backpressure: at most `max_instances` instances of a pool exist at once (idle or
//! busy), so the Engine's pooling allocator is never asked for more than it has.
//! Calls beyond that wait, first come first served (tokio's semaphores are fair), in
//! two lanes:
//! - the main lane, all but a few permits: a call waits there until an instance frees
//!   up or its first deadline passes (`started` + the first interceptor's `timeoutMs`,
//!   or the budget), or it is interrupted;
//! - the settle lane, a few permits held back for calls whose time ran out while they
//!   waited. The component is told when the call started, finds the first deadline (or
//!   the budget) used up, and settles by the subscription's own policy — `deadline-exceeded`
//!   in phase `queue`, or `budget-expired` — before any I/O: it never waits behind
//!   calls doing I/O. Calls that start no I/O in the component at all (observe, an event
//!   no intercept subscription selects, an event the component will reject) use it too.
//!   A settle-lane call does I/O only when a fail-open first interceptor ran out in the
//!   queue and a later interceptor follows, which gets its own full timeout. So the
//!   settle lane can be busy too: a call waiting there that is interrupted, whose budget
//!   runs out, or whose interceptor shuts down, stops waiting and is settled by the host
//!   (`interrupted`, `budget-expired`, `shutdown`), never as an engine failure.
//!
//! The queue has no length bound of its own: every waiter leaves the main lane by its
//! first deadline, so its length is bounded by the arrival rate times the longest first
//! `timeoutMs`, and each waiter holds no instance, only its future.

use crate::backends::Backends;
use crate::bindings::{interceptor as wit, Plugin};
use crate::convert::from_wit;
use crate::interrupt::Interrupt;
use crate::runtime::Runtime;
use crate::state::HostState;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, SemaphorePermit};
use wasmtime::component::ResourceAny;
use wasmtime::Store;

/// The most idle instances a pool keeps. The Engine's instance slots are shared by every
/// interceptor on it (the default Engine's by every default `Interceptor` of the
/// process), and each idle instance holds one, and its memory: kept without a bound, the
/// instances one burst needed would make another interceptor's calls fail to
/// instantiate afterwards. A call finding none idle makes one (instantiating and loading
/// the registration), so under a steady load the idle list stays short anyway.
const IDLE_KEPT: usize = 32;

/// How long a call from the settle lane may run at least: it has no I/O left to do, only
/// the settlement, however late it got its instance.
const SETTLE_BOUND: Duration = Duration::from_millis(250);

/// Time the component gets after its last deadline to settle and return. Generous
/// enough that a loaded 2-core machine does not turn a late but honest settlement into an
/// engine failure (50 ms did, seen at 528 ms for a 300 ms timeout); a runaway component
/// is still cut off by then.
const GRACE: Duration = Duration::from_millis(250);

/// How long the component may run (CPU and wall time) once a call has its instance.
pub(crate) struct Limit {
    /// The longest a call may legitimately run (`engine.bound-ms`, the sum of the
    /// chain's timeouts). It counts from when the call gets its instance: the first
    /// interceptor's deadline runs from the call's start, every later one's from its own
    /// start, so a call that waited in the queue may still run `bound` after it.
    pub bound: Duration,
    /// The call's budget, which nothing outlasts.
    pub budget: Option<Instant>,
}

impl Limit {
    /// The limit of a call that got its instance at `admitted`.
    fn from(&self, admitted: Instant) -> Instant {
        let own = admitted + self.bound;
        self.budget.map_or(own, |budget| budget.min(own)) + GRACE
    }
}

/// How a call waits for an instance when none is free.
pub(crate) enum Admission<'a> {
    /// An intercept call that began at `started`: it waits for the main lane until its
    /// first deadline, `started` + the first timeout of `event`'s type, or `budget`.
    Intercept {
        event: &'a str,
        started: Instant,
        budget: Option<Instant>,
    },
    /// Starts no I/O in the component (observe): the settle lane at once, waiting there
    /// no longer than `budget`.
    NoIo { budget: Option<Instant> },
}

/// Why a call got no instance and was not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unserved {
    /// No instance could be made, or the component trapped or overran its bound (logged).
    EngineFailure,
    /// Interrupted while it waited for an instance.
    Interrupted,
    /// Its budget ran out while it waited.
    BudgetExpired,
    /// The interceptor shut down while it waited.
    ShutDown,
}

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
    /// Per event type, the first interceptor's timeout (`engine.first-timeouts`).
    first_timeouts: HashMap<String, Duration>,
    /// Instances for calls with time left; a permit per live instance.
    main: Semaphore,
    /// Instances held back for settling calls whose time ran out in the queue.
    settle: Semaphore,
}

#[derive(Default)]
struct Idle {
    /// Once closed, no instance is kept.
    closed: bool,
    ready: Vec<Ready>,
}

impl Pool {
    /// A pool of at most `instances` (at least 2) live instances, `first_timeouts` as
    /// the component gave them.
    pub fn new(
        runtime: Arc<Runtime>,
        registration: String,
        declaration: Vec<wit::EventCapability>,
        backends: Arc<Backends>,
        closing: Interrupt,
        instances: usize,
        first_timeouts: Vec<(String, u64)>,
    ) -> Pool {
        let settle = (instances / 16).max(1);
        Pool {
            runtime,
            registration,
            declaration,
            backends,
            closing,
            idle: Mutex::default(),
            first_timeouts: first_timeouts
                .into_iter()
                .map(|(event, ms)| (event, Duration::from_millis(ms)))
                .collect(),
            main: Semaphore::new(instances - settle),
            settle: Semaphore::new(settle),
        }
    }

    /// Runs `call` on a ready instance once `admission` lets it have one, with
    /// `interrupt` as the call's signal and the component's CPU (epochs) and wall time
    /// bounded by `limit` from then (at least [`SETTLE_BOUND`] for a settle-lane call).
    /// The instance goes back to the pool only after a normal return. Every [`Unserved`]
    /// is a denial for the caller to settle: never permission.
    pub async fn in_component<T>(
        &self,
        admission: Admission<'_>,
        limit: Limit,
        interrupt: &Interrupt,
        call: impl AsyncFnOnce(&mut Ready) -> wasmtime::Result<T>,
    ) -> Result<T, Unserved> {
        let (_permit, settling) = self.admit(admission, interrupt).await?;
        let admitted = Instant::now();
        let limit = match settling {
            true => limit.from(admitted).max(admitted + SETTLE_BOUND),
            false => limit.from(admitted),
        };
        let _ticking = self.runtime.ticking();
        let mut ready = match self.take().await {
            Ok(ready) => ready,
            Err(e) => {
                tracing::error!(error = %e, "could not prepare a component instance");
                return Err(Unserved::EngineFailure);
            }
        };
        ready.store.data_mut().begin_call(limit, interrupt);
        ready.store.set_epoch_deadline(1);
        match tokio::time::timeout_at(limit.into(), call(&mut ready)).await {
            Ok(Ok(value)) => {
                self.put(ready);
                Ok(value)
            }
            Ok(Err(trap)) => {
                tracing::error!(error = %trap, "component trapped");
                Err(Unserved::EngineFailure)
            }
            Err(_elapsed) => {
                tracing::error!("component exceeded its call bound");
                Err(Unserved::EngineFailure)
            }
        }
    }

    /// A permit for one live instance: a free one of the main lane at once, else the
    /// first in the main lane's queue until the call's first deadline passes or it is
    /// interrupted, then the first of either lane, with the component to settle the call
    /// whenever an instance is free. Says whether the call came by the settle lane (its
    /// time ran out, or it has no I/O to do). Waiting there ends with the call's
    /// interruption, its budget or shutdown, for the caller to settle without one.
    async fn admit(
        &self,
        admission: Admission<'_>,
        interrupt: &Interrupt,
    ) -> Result<(SemaphorePermit<'_>, bool), Unserved> {
        if let Ok(permit) = self.main.try_acquire() {
            return Ok((permit, false));
        }
        if let Some(until) = self.first_deadline(&admission) {
            tokio::select! {
                acquired = self.main.acquire() => {
                    if let Ok(permit) = acquired {
                        return Ok((permit, false));
                    }
                }
                () = tokio::time::sleep_until(until.into()) => {}
                () = interrupt.wait() => {}
                () = self.closing.wait() => {}
            }
        }
        let (Admission::Intercept { budget, .. } | Admission::NoIo { budget }) = admission;
        let out_of_budget = async {
            match budget {
                Some(budget) => tokio::time::sleep_until(budget.into()).await,
                None => std::future::pending().await,
            }
        };
        // A free instance comes first: the component then settles the call itself.
        let acquired = tokio::select! {
            biased;
            acquired = self.settle.acquire() => acquired,
            acquired = self.main.acquire() => acquired,
            () = interrupt.wait() => return Err(Unserved::Interrupted),
            () = self.closing.wait() => return Err(Unserved::ShutDown),
            () = out_of_budget => return Err(Unserved::BudgetExpired),
        };
        match acquired {
            Ok(permit) => Ok((permit, true)),
            Err(_closed) => {
                tracing::error!("the instance semaphores are closed");
                Err(Unserved::EngineFailure)
            }
        }
    }

    /// When a waiting intercept call's first deadline passes; `None` when it starts no
    /// I/O (no intercept subscription selects its event type, or the event has no
    /// readable type and the component will reject it).
    fn first_deadline(&self, admission: &Admission) -> Option<Instant> {
        let Admission::Intercept {
            event,
            started,
            budget,
        } = admission
        else {
            return None;
        };
        let first = *self.first_timeouts.get(&event_type(event)?)?;
        let own = *started + first;
        Some(budget.map_or(own, |b| b.min(own)))
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

    /// Returns an instance whose call completed normally, unless the pool is closed or
    /// already keeps [`IDLE_KEPT`] idle ones: the instance is then dropped, which gives its
    /// slot back to the Engine.
    fn put(&self, ready: Ready) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if !idle.closed && idle.ready.len() < IDLE_KEPT {
            idle.ready.push(ready);
        }
    }
}

/// The `type` member of an event, read leniently: only to know how long the call may
/// wait for an instance. The component reads the event strictly and has the last word.
fn event_type(event: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Typed {
        #[serde(rename = "type")]
        event_type: String,
    }
    serde_json::from_str::<Typed>(event)
        .ok()
        .map(|t| t.event_type)
}

#[cfg(test)]
mod tests {
    use super::event_type;

    #[test]
    fn the_event_type_is_read_leniently_and_only_the_type() {
        let event = r#"{"id":"e","type":"tool.before","tool":{"type":"x"}}"#;
        assert_eq!(event_type(event).as_deref(), Some("tool.before"));
        assert_eq!(event_type(r#"{"type":7}"#), None);
        assert_eq!(event_type("not json"), None);
        // Two types: the component rejects the event; the host does not guess.
        assert_eq!(event_type(r#"{"type":"a","type":"b"}"#), None);
    }
}
