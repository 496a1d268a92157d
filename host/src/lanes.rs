//! Waiting for a share of a bounded capacity in two lanes, in order: an interceptor's
//! instances (`pool`) and an Engine's instance slots (`slots`) are both handed out
//! this way.
//!
//! - The main lane, all but a few permits: a call waits there until a permit frees up or
//!   its first deadline passes, or it is interrupted.
//! - The settle lane, a few permits held back for calls whose time ran out while they
//!   waited, and for calls with no deadline to wait for (no I/O to do). Such a call takes
//!   the first permit of either lane; the component then settles it by its
//!   subscription's own policy, so running out of time in a queue is never an engine
//!   failure. Waiting there ends with the call's interruption, its budget or shutdown,
//!   for the host to settle (`interrupted`, `budget-expired`, `shutdown`).
//!
//! tokio's semaphores are fair: permits go to waiters first come, first served.

use crate::interrupt::Interrupt;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// One permit in every this many is held back for the settle lane (at least one).
const SETTLE_SHARE: usize = 16;

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

/// A capacity of `main` + `settle` permits.
pub(crate) struct Lanes {
    main: Arc<Semaphore>,
    settle: Arc<Semaphore>,
}

/// What ends a call's wait for a permit.
pub(crate) struct Wait<'a> {
    /// Until when the call waits in the main lane; `None`: it goes to either lane at once.
    pub first_deadline: Option<Instant>,
    /// The call's budget: waiting ends there.
    pub budget: Option<Instant>,
    /// The call's interruption.
    pub interrupt: &'a Interrupt,
    /// The shutdown of the interceptor the call belongs to.
    pub closing: &'a Interrupt,
}

impl<'a> Wait<'a> {
    /// When the call stops waiting for good, and why: its interruption, shutdown or its
    /// budget, each for the host to settle.
    pub async fn ended(&self) -> Unserved {
        let out_of_budget = async {
            match self.budget {
                Some(budget) => tokio::time::sleep_until(budget.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = self.interrupt.wait() => Unserved::Interrupted,
            () = self.closing.wait() => Unserved::ShutDown,
            () = out_of_budget => Unserved::BudgetExpired,
        }
    }

    /// This wait for a call that came by a settle lane: no main-lane wait any more.
    pub fn settling(self) -> Wait<'a> {
        Wait {
            first_deadline: None,
            ..self
        }
    }
}

/// A permit, and whether the call came by the settle path (its time ran out while it
/// waited, or it had no deadline to wait for); if not, the permit is a main-lane one.
pub(crate) struct Admitted {
    pub permit: OwnedSemaphorePermit,
    pub settling: bool,
}

impl Lanes {
    /// `capacity` permits (at least 2), one in [`SETTLE_SHARE`] held back for settling.
    pub fn new(capacity: usize) -> Lanes {
        let settle = (capacity / SETTLE_SHARE).max(1);
        Lanes {
            main: Arc::new(Semaphore::new(capacity - settle)),
            settle: Arc::new(Semaphore::new(settle)),
        }
    }

    /// A free main-lane permit, if there is one and nobody waits before this call.
    pub fn try_main(&self) -> Option<Admitted> {
        let permit = self.main.clone().try_acquire_owned().ok()?;
        Some(Admitted {
            permit,
            settling: false,
        })
    }

    /// A permit: a free one of the main lane at once, else the first in the main lane's
    /// queue until the first deadline passes (or it is interrupted), then the first of
    /// either lane, the settle lane first. `wait` says until when, asked only for a call
    /// that has to wait (a pool's first deadline reads the event).
    pub async fn admit<'w>(&self, wait: impl FnOnce() -> Wait<'w>) -> Result<Admitted, Unserved> {
        if let Some(admitted) = self.try_main() {
            return Ok(admitted);
        }
        let wait = wait();
        if let Some(until) = wait.first_deadline {
            tokio::select! {
                acquired = self.main.clone().acquire_owned() => {
                    if let Ok(permit) = acquired {
                        return Ok(Admitted { permit, settling: false });
                    }
                }
                () = tokio::time::sleep_until(until.into()) => {}
                () = wait.interrupt.wait() => {}
                () = wait.closing.wait() => {}
            }
        }
        // A free permit comes first: the component then settles the call itself.
        let acquired = tokio::select! {
            biased;
            acquired = self.settle.clone().acquire_owned() => acquired,
            acquired = self.main.clone().acquire_owned() => acquired,
            ended = wait.ended() => return Err(ended),
        };
        match acquired {
            Ok(permit) => Ok(Admitted {
                permit,
                settling: true,
            }),
            Err(_closed) => {
                tracing::error!("the instance semaphores are closed");
                Err(Unserved::EngineFailure)
            }
        }
    }
}
