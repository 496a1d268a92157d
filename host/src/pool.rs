//! The instance pool, its admission queue, and the guarded component call.
//!
//! A call takes a ready instance (the registration was loaded once, when the instance
//! was made), bounds the component's CPU (epochs) and wall time, and returns the
//! instance to the pool only after a normal return: an instance that trapped or overran
//! its bound is dropped, never reused. A trap, an overrun or an instance that cannot be
//! made is an engine failure; a wait for an instance that ends first (interruption,
//! budget, shutdown) is settled by the host as such. Either way, a denial.
//!
//! Backpressure: at most `max_instances` instances of a pool exist at once (idle or
//! busy). Calls beyond that wait, first come first served, in the two lanes of `lanes`:
//! the main lane until the call's next deadline passes (or its budget), then the settle
//! lane, a few instances held back for calls whose time ran out while they waited. A
//! waiting call uses up its interceptors' deadlines in turn, as the component counts
//! them: the first at `started` + the first `timeoutMs`, each later one that much
//! later again (`engine.chain-timeouts`). The component is told when the call started,
//! finds the deadlines (or the budget) used up, and settles each by the subscription's
//! own policy — `deadline-exceeded` in phase `queue`, or `budget-expired` — before any
//! I/O. Calls that start no I/O in the component at all (observe, an event no intercept
//! subscription selects, an event the component will reject) use the settle lane too.
//!
//! No call does I/O on a settle-lane instance (its permit, or its Engine slot, is the
//! settle lane's), so a call waiting there never waits behind I/O. When an interceptor
//! that ran out in the queue failed open and a later one still has time, the call has
//! I/O to do after all: the host stops it at its first I/O (`state`), nothing sent,
//! discards what the component made of it, gives the instance back and has it wait again
//! in the main lane until that later deadline. So every wait in the main lane ends by
//! the call's last deadline (or budget), and a call runs at most once per interceptor,
//! plus once. The settle lane's wait has no deadline of its own: its few instances
//! settle one call at a time each, without I/O, so a burst of calls whose time ran out
//! settles late by the settling of those ahead (their policies still decide). Making a new instance is the one wait the deadlines do not end: the call needs
//! an instance to settle at all, so it waits for the make until its interruption,
//! shutdown, its budget or [`MAKE_BOUND`]; the component then finds the deadlines the
//! make used up and settles them (`deadline-exceeded` in phase `queue`), late by the
//! make's time (the shipped component's `load` does no I/O: milliseconds).
//!
//! On this crate's own Engine, a new instance also needs one of the Engine's slots, which
//! every pool on it shares (`slots`): waited for the same way, so that several
//! interceptors together never ask the pooling allocator for more than it has.
//!
//! The queue has no length bound of its own, and each waiter holds no instance, only its
//! future. A waiter leaves the main lane by its last deadline, so their number there is
//! bounded by the arrival rate times the longest sum of a chain's `timeoutMs`.

use crate::backends::Backends;
use crate::bindings::{interceptor as wit, Plugin};
use crate::convert::from_wit;
use crate::interrupt::Interrupt;
use crate::lanes::{Admitted, Lanes, Place, Route, Unserved, Wait};
use crate::runtime::Runtime;
use crate::slots::Slot;
use crate::state::HostState;
use ahp_vocab::OBSERVER_PREPARE_MS;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::OwnedSemaphorePermit;
use wasmtime::component::ResourceAny;
use wasmtime::Store;

/// The most idle instances a pool keeps. Each holds its memory and one of the Engine's
/// instance slots, shared by every interceptor on it: on an Engine of the embedder's,
/// whose slots this crate does not track, idle instances kept without a bound after one
/// burst would make another interceptor's calls fail to instantiate; on this crate's own,
/// they would be evicted then, but hold their memory until. A call finding none idle
/// makes one (instantiating and loading the registration), so under a steady load the
/// idle list stays short anyway.
const IDLE_KEPT: usize = 32;

/// How long a call may run at least once it has its instance: one whose budget ran out
/// while it waited (in a lane, or for its instance to be made) has no I/O left to do,
/// only the settlement, however late it got its instance.
const SETTLE_BOUND: Duration = Duration::from_millis(250);

/// How long a make may take, for the call waiting for it or, once none does, on its
/// own: the 5 s a load's CPU is bounded by, and as much again for its host calls.
const MAKE_BOUND: Duration = Duration::from_secs(10);

/// Time the component gets after its last deadline to settle and return. Generous
/// enough that a loaded 2-core machine does not turn a late but honest settlement into an
/// engine failure (50 ms did, seen at 528 ms for a 300 ms timeout); a runaway component
/// is still cut off by then.
const GRACE: Duration = Duration::from_millis(250);

/// Time the component gets past its chain's bound (or the budget, if that ends first) to
/// prepare the call's observe notifications. It begins none [`OBSERVER_PREPARE_MS`]
/// after the decision is settled, nor past the budget; the rest is for one begun just
/// before, which for an event of several MiB can take a few hundred milliseconds on a
/// loaded machine. Without it a decision settled just before the budget could be lost
/// to an `engine-failure` denial while an observer's notification was being encoded.
const PREPARE: Duration = Duration::from_millis(4 * OBSERVER_PREPARE_MS);

/// How long the component may run past a call's bound (`engine.bound-ms`) or its budget,
/// whichever ends first: 1 s to prepare its observe notifications and 250 ms of grace to
/// settle. An embedder at the linker level gives `HostState::begin_call` the same.
pub const BOUND_MARGIN: Duration = PREPARE.saturating_add(GRACE);

/// How long the component may run (CPU and wall time) once a call has its instance.
pub(crate) struct Limit {
    /// The longest a call's chain may legitimately run (`engine.bound-ms`, the sum of
    /// its timeouts; zero for an observe call). It counts from when the call gets its
    /// instance, which is generous: a call that waited has used up some of its deadlines
    /// in the queue.
    pub bound: Duration,
    /// The call's budget: the chain's I/O ends by it, and no notification is begun past
    /// it.
    pub budget: Option<Instant>,
}

impl Limit {
    /// The limit of a call that got its instance at `admitted`.
    fn from(&self, admitted: Instant) -> Instant {
        let own = admitted + self.bound;
        self.budget.map_or(own, |budget| budget.min(own)) + BOUND_MARGIN
    }
}

/// How a call waits for an instance when none is free.
pub(crate) enum Admission<'a> {
    /// An intercept call that began at `started`: it waits for the main lane until its
    /// next deadline (the first is `started` + the first timeout of `event`'s type), or
    /// `budget`.
    Intercept {
        event: &'a str,
        started: Instant,
        budget: Option<Instant>,
    },
    /// Starts no I/O in the component (observe): the settle lane at once, waiting there
    /// no longer than `budget`.
    NoIo { budget: Option<Instant> },
}

/// How one run of a call in the component ended.
enum Ran<T> {
    /// The component's result, the call's.
    Settled(T),
    /// The call reached I/O on a settle-lane instance and was stopped there, nothing
    /// sent; the component's result is discarded.
    GaveWay,
}

/// An instance whose engine resource already holds the loaded registration.
pub(crate) struct Ready {
    pub store: Store<HostState>,
    pub plugin: Plugin,
    pub engine: ResourceAny,
    /// Its slot of the Engine, if the runtime tracks them. Last: fields drop in order,
    /// and the slot may be given to another call only once the store has freed it.
    slot: Option<Slot>,
}

/// Ready instances of one registration.
pub(crate) struct Pool {
    /// Shared with a make that outlives the call that began it.
    maker: Arc<Maker>,
    /// Per event type, its interceptors' timeouts in chain order
    /// (`engine.chain-timeouts`).
    chain_timeouts: HashMap<String, Vec<Duration>>,
    /// A permit per call in an instance.
    lanes: Lanes,
}

/// What makes a pool's instances and keeps the idle ones.
struct Maker {
    runtime: Arc<Runtime>,
    registration: String,
    /// The declaration the registration was loaded with, for every later instance.
    declaration: Vec<wit::EventCapability>,
    backends: Arc<Backends>,
    /// Set by shutdown: ends every call in every instance.
    closing: Interrupt,
    /// Set when the pool is dropped (its interceptor with it, shut down or not): a make
    /// left [`finish`](Maker::finish)ing ends, and lets go of the backends (an
    /// embedder's injected transports) now rather than at [`MAKE_BOUND`].
    dropped: Interrupt,
    /// Shared with the runtime's slots, which may evict from it.
    idle: Arc<Mutex<Idle>>,
}

/// The instances of a pool that no call is using.
#[derive(Default)]
pub(crate) struct Idle {
    /// Once closed, no instance is kept.
    closed: bool,
    ready: Vec<Ready>,
}

impl Idle {
    /// One of the idle instances, the last returned.
    pub fn take_one(&mut self) -> Option<Ready> {
        self.ready.pop()
    }
}

impl Pool {
    /// The registration every instance has loaded.
    pub fn registration(&self) -> &str {
        &self.maker.registration
    }

    /// A pool of at most `instances` (at least 2) live instances, `chain_timeouts` as
    /// the component gave them.
    pub fn new(
        runtime: Arc<Runtime>,
        registration: String,
        declaration: Vec<wit::EventCapability>,
        backends: Arc<Backends>,
        closing: Interrupt,
        instances: usize,
        chain_timeouts: Vec<(String, Vec<u64>)>,
    ) -> Pool {
        let idle = Arc::default();
        if let Some(slots) = runtime.slots() {
            slots.register(Arc::downgrade(&idle));
        }
        Pool {
            maker: Arc::new(Maker {
                runtime,
                registration,
                declaration,
                backends,
                closing,
                dropped: Interrupt::new(),
                idle,
            }),
            chain_timeouts: chain_timeouts
                .into_iter()
                .map(|(event, timeouts)| {
                    let timeouts = timeouts.into_iter().map(Duration::from_millis).collect();
                    (event, timeouts)
                })
                .collect(),
            lanes: Lanes::new(instances),
        }
    }

    /// Runs `call` on a ready instance once `admission` lets it have one, with
    /// `interrupt` as the call's signal and the component's CPU (epochs) and wall time
    /// bounded by `limit` from then (at least [`SETTLE_BOUND`]). Making a new instance
    /// counts as waiting for one: interruption, shutdown and the budget end the call's
    /// wait there too, and the instance is still finished and pooled for the next call.
    /// The instance goes back to the pool only after a normal return. A call that
    /// reached I/O on a settle-lane instance is run again, waiting in the main lane until
    /// its next deadline (see the module): only the last run's result counts. Every
    /// [`Unserved`] is a denial for the caller to settle: never permission.
    pub async fn in_component<T>(
        &self,
        admission: Admission<'_>,
        limit: Limit,
        interrupt: &Interrupt,
        call: impl AsyncFnOnce(&mut Ready) -> wasmtime::Result<T> + Clone,
    ) -> Result<T, Unserved> {
        // Kept across runs: a call that gave way waits on from its turn in the queue.
        let mut place = Place::default();
        let mut gave_way = 0;
        loop {
            let run = self.run_once(&admission, &mut place, &limit, interrupt, call.clone());
            match run.await? {
                Ran::Settled(value) => return Ok(value),
                // Only a settle-lane run gives way, when a later deadline is still ahead:
                // the next wait ends there at the latest. So each time it is a later
                // interceptor that gives way, and a component that gives way more often
                // than its chain has interceptors is not counting its deadlines (or does
                // I/O where it has none to do): it would never settle.
                Ran::GaveWay if gave_way < self.chain(&admission).len() => {
                    gave_way += 1;
                    tracing::debug!(
                        "a call reached I/O on a settle-lane instance: it waits in the main lane"
                    );
                }
                Ran::GaveWay => {
                    tracing::error!("the component started I/O after its call's time ran out");
                    return Err(Unserved::EngineFailure);
                }
            }
        }
    }

    /// The event whose interceptors' timeouts add up to the most, and that sum (of events
    /// tied, the first by name).
    #[cfg(feature = "cli")]
    pub fn longest_chain(&self) -> Option<(&str, Duration)> {
        self.chain_timeouts
            .iter()
            .map(|(event, timeouts)| (event.as_str(), chain_length(timeouts)))
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
    }

    /// The timeouts of a call's chain, as far as the host knows: none for a call that
    /// starts no I/O in the component (observe, an event no intercept subscription
    /// selects, or one with no readable type, which the component will reject).
    fn chain(&self, admission: &Admission) -> &[Duration] {
        let Admission::Intercept { event, .. } = admission else {
            return &[];
        };
        event_type(event)
            .and_then(|event_type| self.chain_timeouts.get(&event_type))
            .map_or(&[], Vec::as_slice)
    }

    /// One run of `call`, as [`Pool::in_component`] says.
    async fn run_once<T>(
        &self,
        admission: &Admission<'_>,
        place: &mut Place,
        limit: &Limit,
        interrupt: &Interrupt,
        call: impl AsyncFnOnce(&mut Ready) -> wasmtime::Result<T>,
    ) -> Result<Ran<T>, Unserved> {
        let (Admission::Intercept { budget, .. } | Admission::NoIo { budget }) = admission;
        // Only for a call that has to wait: its next deadline reads the event's type.
        let wait = || Wait {
            route: match self.next_deadline(admission, Instant::now()) {
                Some(until) => Route::MainUntil(until),
                None => Route::Either,
            },
            budget: *budget,
            interrupt,
            closing: &self.maker.closing,
        };
        let Admitted { permit, settling } = self.lanes.admit(place, wait).await?;
        let idle = self
            .maker
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take_one();
        // A new instance needs one of the Engine's slots, where the runtime tracks them.
        let slot = match (&idle, self.maker.runtime.slots()) {
            (None, Some(slots)) => {
                let slot = slots
                    .admit(|| if settling { wait().settling() } else { wait() })
                    .await?;
                Some(slot)
            }
            _ => None,
        };
        let _ticking = self.maker.runtime.ticking();
        // The permit goes back as this returns, after the instance is back in the pool or
        // dropped (bindings drop in reverse order: `ready`, a trapped store, goes first).
        let (_permit, mut ready) = match idle {
            Some(ready) => (Some(permit), ready),
            // Making the instance is waiting for it: it ends as the queue's wait does.
            None => {
                let mut making = Making::start(&self.maker, slot, permit);
                let made = tokio::select! {
                    biased;
                    made = making.made() => made,
                    // The make finishes on its own (`Making`'s drop), as when the
                    // caller drops the call.
                    ended = async { wait().ended().await } => return Err(ended),
                    // A call with no budget is not held by a make that never ends (a
                    // component whose `load` waits on something): the make is dropped,
                    // an engine failure.
                    () = tokio::time::sleep(MAKE_BOUND) => {
                        making.abandon();
                        tracing::error!("making a component instance took longer than {MAKE_BOUND:?}");
                        return Err(Unserved::EngineFailure);
                    }
                };
                let permit = making.permit();
                let ready = made.map_err(|e| {
                    tracing::error!(error = %e, "could not prepare a component instance");
                    Unserved::EngineFailure
                })?;
                (permit, ready)
            }
        };
        // A stop that came as the instance was made ends the call as it ends a wait: a
        // shutdown that failed the make's own I/O can let the make finish first.
        if interrupt.is_set() || self.maker.closing.is_set() {
            self.maker.put(ready);
            return Err(wait().ended().await);
        }
        // Held back for settling, by the pool or by the Engine: the call starts no I/O.
        let settling = settling || ready.slot.as_ref().is_some_and(|slot| slot.0.settling);
        // The bound counts from here. A call whose budget ran out while it waited (in the
        // queue, or for its instance to be made) still gets the settle bound, to settle
        // by its subscription's policy before any I/O.
        let admitted = Instant::now();
        let limit = limit.from(admitted).max(admitted + SETTLE_BOUND);
        let state = ready.store.data_mut();
        state.begin_call(limit, interrupt);
        if settling {
            state.settle_only();
        }
        ready.store.set_epoch_deadline(1);
        // A host function's panic (an embedder's future that panics as it is dropped, a
        // bug in delivery) comes back out of the component call: caught here, it is an
        // engine failure, the instance dropped, never an unwind into the caller.
        let called = crate::caught::caught(|| call(&mut ready));
        match tokio::time::timeout_at(limit.into(), called).await {
            Ok(Err(())) => {
                tracing::error!("a host function panicked during the component call");
                Err(Unserved::EngineFailure)
            }
            Ok(Ok(Ok(value))) => {
                let gave_way = ready.store.data().gave_way();
                self.maker.put(ready);
                // The permit goes back as this returns, before the call waits again.
                Ok(if gave_way {
                    Ran::GaveWay
                } else {
                    Ran::Settled(value)
                })
            }
            Ok(Ok(Err(trap))) => {
                tracing::error!(error = %trap, "component trapped");
                Err(Unserved::EngineFailure)
            }
            Err(_elapsed) => {
                tracing::error!("component exceeded its call bound");
                Err(Unserved::EngineFailure)
            }
        }
    }

    /// When the next deadline after `now` of a waiting intercept call passes (or its
    /// budget, if sooner): its interceptors' deadlines pass in turn while it waits, each
    /// a timeout after the one before, the first a timeout after `started`. `None` when
    /// it has no I/O left to do: every deadline (or its budget) passed, or it has no
    /// chain ([`Pool::chain`]).
    fn next_deadline(&self, admission: &Admission, now: Instant) -> Option<Instant> {
        let Admission::Intercept {
            started, budget, ..
        } = admission
        else {
            return None;
        };
        let next = self
            .chain(admission)
            .iter()
            .scan(*started, |deadline, timeout| {
                // No overflow before a deadline passes `now`: each timeout fits in u64 ms.
                *deadline = deadline.checked_add(*timeout)?;
                Some(*deadline)
            })
            .find(|deadline| *deadline > now)?;
        let next = budget.map_or(next, |b| b.min(next));
        (next > now).then_some(next)
    }

    /// Drops every idle instance and keeps none from now on (shutdown).
    pub fn close(&self) {
        self.maker
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed = true;
        self.discard_idle();
    }

    /// Drops every idle instance, the pool staying open: after a settlement the host did
    /// not trust, whatever state in its instance led there is not carried into a later
    /// call (the instance went back as its call returned, before the settlement was
    /// read; the others go with it, one component alike).
    pub fn discard_idle(&self) {
        let dropped = std::mem::take(
            &mut self
                .maker
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .ready,
        );
        // Out of the lock, which eviction may be waiting for.
        drop(dropped);
    }
}

impl Maker {
    /// A new instance on `slot` (none when the runtime does not track slots), with the
    /// registration loaded.
    async fn make(self: Arc<Self>, slot: Option<Slot>) -> wasmtime::Result<Ready> {
        let _ticking = self.runtime.ticking();
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
            slot,
        })
    }

    /// Returns an instance whose call completed normally, unless the pool is closed,
    /// already keeps [`IDLE_KEPT`] idle ones, or the instance's slot is wanted by a
    /// waiting call or came by the settle path (see `slots`): the instance is then
    /// dropped, which gives its slot back to the Engine.
    fn put(&self, ready: Ready) {
        let keepable = ready.slot.as_ref().is_none_or(|slot| !slot.0.settling);
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        // Read under the lock: a call that starts waiting for a slot after this finds the
        // instance on the list (`Slots::admit` evicts after counting itself).
        let wanted = self.runtime.slots().is_some_and(|slots| slots.wanted());
        if !idle.closed && idle.ready.len() < IDLE_KEPT && keepable && !wanted {
            idle.ready.push(ready);
        }
    }

    /// Lets `making`, a make whose call stopped waiting for it, finish on its own and
    /// leave its instance in the pool: a registration that loads slower than the calls'
    /// budgets would otherwise never leave one. It keeps the call's `permit` until then,
    /// so it still counts against the pool's instances. Shutdown ends it, dropping the
    /// pool does, and so does [`MAKE_BOUND`].
    fn finish(self: &Arc<Self>, making: Pin<Box<MakeFuture>>, permit: OwnedSemaphorePermit) {
        let maker = Arc::clone(self);
        tokio::spawn(async move {
            tokio::select! {
                made = tokio::time::timeout(MAKE_BOUND, making) => match made {
                    Ok(Ok(ready)) => maker.put(ready),
                    Ok(Err(e)) => tracing::error!(error = %e, "could not prepare a component instance"),
                    Err(_) => tracing::error!("making a component instance outlasted its bound"),
                },
                () = maker.closing.wait() => {}
                () = maker.dropped.wait() => {}
            }
            drop(permit);
        });
    }
}

/// A make under way for a call, with the call's permit. A call that stops waiting for it
/// — its wait ended, or its caller dropped it (a harness's own timeout around the call) —
/// leaves it to finish on its own ([`Maker::finish`]): dropped, this does that.
struct Making {
    maker: Arc<Maker>,
    work: Option<(Pin<Box<MakeFuture>>, OwnedSemaphorePermit)>,
}

/// [`Maker::make`]'s future.
type MakeFuture = dyn Future<Output = wasmtime::Result<Ready>> + Send;

impl Making {
    fn start(maker: &Arc<Maker>, slot: Option<Slot>, permit: OwnedSemaphorePermit) -> Making {
        let making: Pin<Box<MakeFuture>> = Box::pin(Arc::clone(maker).make(slot));
        Making {
            maker: Arc::clone(maker),
            work: Some((making, permit)),
        }
    }

    /// The instance, once made.
    async fn made(&mut self) -> wasmtime::Result<Ready> {
        match &mut self.work {
            Some((making, _)) => making.await,
            None => std::future::pending().await,
        }
    }

    /// The call's permit, the make done.
    fn permit(mut self) -> Option<OwnedSemaphorePermit> {
        self.work.take().map(|(_, permit)| permit)
    }

    /// Drops the make with its permit: it is not to finish.
    fn abandon(mut self) {
        self.work = None;
    }
}

impl Drop for Making {
    fn drop(&mut self) {
        if let Some((making, permit)) = self.work.take() {
            // With no runtime to finish it on, the make goes with the call.
            if tokio::runtime::Handle::try_current().is_ok() {
                self.maker.finish(making, permit);
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.maker.dropped.interrupt();
    }
}

/// The timeouts of a chain added up, saturating: a registration may hold many huge ones
/// (warned about, not refused), and their sum must not panic.
#[cfg(feature = "cli")]
fn chain_length(timeouts: &[Duration]) -> Duration {
    timeouts
        .iter()
        .fold(Duration::ZERO, |sum, timeout| sum.saturating_add(*timeout))
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

    /// A chain of timeouts past what a Duration holds adds up to the most it holds.
    #[cfg(feature = "cli")]
    #[test]
    fn a_chain_of_huge_timeouts_saturates() {
        use std::time::Duration;
        let huge = Duration::from_millis(u64::MAX);
        assert_eq!(super::chain_length(&vec![huge; 1_001]), Duration::MAX);
        let short = [Duration::from_millis(100), Duration::from_millis(250)];
        assert_eq!(super::chain_length(&short), Duration::from_millis(350));
    }

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
