//! An Engine's component-instance slots, shared by every interceptor on it.
//!
//! The pooling allocator has a fixed number of instance slots
//! (`PoolingAllocationConfig::total_component_instances`), and this crate's default
//! Engine is shared by every default `Interceptor` of the process. Each pool bounds its
//! own instances (`max_instances`), but pools together could ask for more than the Engine
//! has, and an instantiation beyond it fails: an engine failure, a denial even under
//! fail-open, where waiting was asked for. So on an Engine whose capacity this crate knows
//! (its own), every live instance, idle or busy, holds one of its slots, and a pool that
//! needs a new instance:
//! 1. takes a free slot, else an idle instance of any pool on the Engine off its list
//!    (dropping it frees its slot), as often as that frees one;
//! 2. else waits in order, in the two lanes of `lanes`, its wait counted against the
//!    call's deadlines and budget like the wait for the pool's own instances.
//!
//! While any call waits here, no pool keeps an instance idle: each one returned frees its
//! slot at once, for the first waiter. Simple and never leaves a waiter behind an idle
//! instance, at a price only while the Engine is full: returned instances are made anew
//! rather than reused (instantiation and the registration's load) until nobody waits. An
//! instance made on a settle-lane slot is never kept idle either, so idle instances hold
//! main-lane slots only, and evicting one serves any waiter. A call on a settle-lane slot
//! does no I/O there, as on a pool's settle-lane permit (`lanes`, `pool`).

use crate::interrupt::Interrupt;
use crate::lanes::{Admitted, Lanes, Place, Route, Unserved, Wait};
use crate::pool::Idle;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// The instance slots of one Engine.
pub(crate) struct Slots {
    lanes: Lanes,
    /// Calls waiting for a slot: while there are any, returned instances are dropped.
    waiting: AtomicUsize,
    /// The idle lists of the pools on this Engine, for eviction.
    pools: Mutex<Vec<Weak<Mutex<Idle>>>>,
}

/// One slot of the Engine, held by one live instance; given back when dropped, so it must
/// be dropped after the instance's store (whose drop frees the allocator's slot). A slot
/// of the settle lane (`lanes`) is not kept idle.
pub(crate) struct Slot(pub Admitted);

impl Slots {
    /// The slots of an Engine whose pooling allocator has `capacity` component instances.
    pub fn new(capacity: usize) -> Slots {
        Slots {
            lanes: Lanes::new(capacity),
            waiting: AtomicUsize::new(0),
            pools: Mutex::default(),
        }
    }

    /// Makes the idle instances of a pool evictable for other pools' calls.
    pub fn register(&self, idle: Weak<Mutex<Idle>>) {
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        pools.retain(|pool| pool.strong_count() > 0);
        pools.push(idle);
    }

    /// Whether an instance being returned to its pool should be dropped instead, to free
    /// its slot for a waiting call.
    pub fn wanted(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// A slot for a new instance of a call waiting as `wait` says (see the module).
    pub async fn admit<'w>(&self, wait: impl Fn() -> Wait<'w>) -> Result<Slot, Unserved> {
        if let Some(admitted) = self.lanes.try_main() {
            return Ok(Slot(admitted));
        }
        // Counted before evicting: an instance returned after this is dropped, not kept,
        // and one returned before is on an idle list for `evict_one` to find.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        while self.evict_one() {
            if let Some(admitted) = self.lanes.try_main() {
                return Ok(Slot(admitted));
            }
        }
        self.lanes
            .admit(&mut Place::default(), wait)
            .await
            .map(Slot)
    }

    /// A slot for an instance outside any call (an interceptor's set-up probe). It frees
    /// an idle instance if it must, then takes the first free slot of either lane (the
    /// probe does no I/O and is short, like a settling call); with none free it waits as
    /// long as the calls holding them run, which their own bounds limit. Dropping the
    /// future ends the wait.
    pub async fn for_setup(&self) -> wasmtime::Result<Slot> {
        let never = Interrupt::new();
        let wait = || Wait {
            route: Route::Either,
            budget: None,
            interrupt: &never,
            closing: &never,
        };
        self.admit(wait)
            .await
            .map_err(|unserved| wasmtime::format_err!("no instance slot: {unserved:?}"))
    }

    /// Drops one idle instance of some pool on the Engine; false when none is idle.
    fn evict_one(&self) -> bool {
        // The pools are held outside the registry's lock: dropping the last hold on a
        // pool drops its idle instances, not to be done under a lock.
        let pools: Vec<Arc<Mutex<Idle>>> = self
            .pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let evicted = pools.iter().find_map(|pool| {
            let mut idle = pool.lock().unwrap_or_else(PoisonError::into_inner);
            idle.take_one()
        });
        // Dropped here, out of the locks: its store, then its slot.
        evicted.is_some()
    }
}

/// One waiting call, counted in [`Slots::waiting`] while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
