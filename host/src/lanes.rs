//! Waiting for a share of a bounded capacity in two lanes, in order: an interceptor's
//! instances (`pool`) and an Engine's instance slots (`slots`) are both handed out
//! this way.
//!
//! - The main lane, all but a few permits: a call waits there until a permit frees up or
//!   its next deadline passes, or it is interrupted.
//! - The settle lane, a few permits held back for calls whose time ran out while they
//!   waited, and for calls with no deadline to wait for (no I/O to do). Such a call takes
//!   the first permit of either lane; the component then settles it by its
//!   subscription's own policy, so running out of time in a queue is never an engine
//!   failure. Waiting there ends with the call's interruption, its budget or shutdown,
//!   for the host to settle (`interrupted`, `budget-expired`, `shutdown`).
//!
//! No I/O is done on a settle-lane permit: the host stops a call at its first I/O there,
//! nothing sent, and the call waits again in the main lane until its next deadline (see
//! `pool`). So a settle-lane permit is held only while a component settles a call (or its
//! instance is made), never while a backend is asked, and a call waiting for one never
//! waits behind I/O. (A main-lane permit that comes first to a call on the settle path is
//! the main lane's: I/O may run on it.)
//!
//! tokio's semaphores are fair: permits go to waiters first come, first served. A call
//! keeps its [`Place`] in a pool's main lane while it waits for the settle lane, and
//! across a run on a settle-lane permit that gave way, so it does not queue there again
//! at the back. (Its wait for an Engine slot, see `slots`, starts afresh on each run; and
//! a call that ran on a pool's main permit but only a settle-lane Engine slot, the
//! Engine full, used its turn: after giving way it queues at the back of the pool.)

use crate::interrupt::Interrupt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

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

/// Which lanes a waiting call takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// The main lane until this instant (the call's next deadline, or its budget), then
    /// the first permit of either lane.
    MainUntil(Instant),
    /// The first permit of either lane at once: the call has no I/O to do (or no time
    /// left for any), only its settlement.
    Either,
}

/// What ends a call's wait for a permit.
pub(crate) struct Wait<'a> {
    /// Which lanes the call takes.
    pub route: Route,
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
        // The call's own interruption first: a call found both interrupted and shut down
        // when the wait is looked at is recorded as interrupted, as the component's
        // settlement is (not one or the other at random).
        tokio::select! {
            biased;
            () = self.interrupt.wait() => Unserved::Interrupted,
            () = self.closing.wait() => Unserved::ShutDown,
            () = out_of_budget => Unserved::BudgetExpired,
        }
    }

    /// This wait for a call that came by a settle lane: no main-lane wait any more.
    pub fn settling(self) -> Wait<'a> {
        Wait {
            route: Route::Either,
            ..self
        }
    }
}

/// A call's place in the main lane's queue, once it has had to wait: kept for as long as
/// the call lives, it keeps the call's turn.
#[derive(Default)]
pub(crate) struct Place(Option<Pin<Box<MainAcquire>>>);

/// Waiting for a main-lane permit.
type MainAcquire = dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send;

/// A permit, and whether it is one of the settle lane's (the call's time ran out while
/// it waited, or it had no deadline to wait for, and a settle-lane permit came first): a
/// call may settle on it, but start no I/O. Otherwise it is a main-lane permit.
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

    /// A permit: a free one of the main lane at once, else as the call's [`Route`] says:
    /// the first in the main lane's queue until the deadline passes (or it is
    /// interrupted), then the first of either lane, the settle lane first; or either lane
    /// at once. `waiting` says which and until when as of when it is asked, only for a
    /// call that has to wait (a pool's deadline reads the event). The call waits in the
    /// main lane from its `place` there, taken now if it has none; a main-lane permit
    /// empties it.
    pub async fn admit<'w>(
        &self,
        place: &mut Place,
        waiting: impl Fn() -> Wait<'w>,
    ) -> Result<Admitted, Unserved> {
        if place.0.is_none() {
            if let Some(admitted) = self.try_main() {
                return Ok(admitted);
            }
        }
        let wait = waiting();
        let main = place
            .0
            .get_or_insert_with(|| Box::pin(self.main.clone().acquire_owned()));
        let in_time = match wait.route {
            Route::MainUntil(until) => tokio::select! {
                acquired = main.as_mut() => Some(acquired),
                () = tokio::time::sleep_until(until.into()) => None,
                () = wait.interrupt.wait() => None,
                () = wait.closing.wait() => None,
            },
            Route::Either => None,
        };
        // Only a call with a deadline still to come, as the main-lane wait ended, may
        // give way after settling and come back: not one whose last deadline or budget
        // passed, nor one interrupted or shut down.
        let may_return = in_time.is_none()
            && !wait.interrupt.is_set()
            && !wait.closing.is_set()
            && matches!(waiting().route, Route::MainUntil(_));
        // A free permit comes first: the component then settles the call itself.
        let (acquired, settling) = match in_time {
            Some(acquired) => (acquired, false),
            None => tokio::select! {
                biased;
                acquired = self.settle.clone().acquire_owned() => (acquired, true),
                acquired = main.as_mut() => (acquired, false),
                ended = wait.ended() => return Err(ended),
            },
        };
        // A call settled in the settle lane that cannot come back lets its place in the
        // main lane go: held, the next main permit would be handed to it and sit unused
        // for the whole settle run while the calls behind it wait.
        if !settling || !may_return {
            place.0 = None;
        }
        admitted(acquired, settling)
    }
}

/// A permit acquired, of the settle lane if `settling`, or an engine failure if its
/// semaphore was closed (they never are).
fn admitted(
    acquired: Result<OwnedSemaphorePermit, tokio::sync::AcquireError>,
    settling: bool,
) -> Result<Admitted, Unserved> {
    match acquired {
        Ok(permit) => Ok(Admitted { permit, settling }),
        Err(_closed) => {
            tracing::error!("the instance semaphores are closed");
            Err(Unserved::EngineFailure)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::Poll;

    /// Whether `future` is still pending after one poll.
    async fn pending<F: Future>(future: std::pin::Pin<&mut F>) -> bool {
        let mut future = Some(future);
        std::future::poll_fn(|cx| {
            let pending = future.take().is_some_and(|f| f.poll(cx).is_pending());
            Poll::Ready(pending)
        })
        .await
    }

    /// A wait by `route` with no budget, ended by `interrupt` or `closing`.
    fn wait_by<'a>(
        route: Route,
        interrupt: &'a Interrupt,
        closing: &'a Interrupt,
    ) -> impl Fn() -> Wait<'a> {
        move || Wait {
            route,
            budget: None,
            interrupt,
            closing,
        }
    }

    #[tokio::test]
    async fn only_a_call_with_nothing_but_its_settlement_takes_a_settle_permit() {
        // One permit per lane; the main one held by a call doing I/O.
        let lanes = Lanes::new(2);
        let held = lanes.try_main().expect("the main permit is free");
        let (interrupt, closing) = (Interrupt::new(), Interrupt::new());
        let wait = |route| wait_by(route, &interrupt, &closing);

        // Settling only: the free settle permit, at once.
        let settling = lanes
            .admit(&mut Place::default(), wait(Route::Either))
            .await
            .expect("a permit");
        assert!(settling.settling);
        drop(settling);

        // I/O to do: the free settle permit is not for it; the main one is, once free.
        let later = Instant::now() + std::time::Duration::from_secs(3600);
        let mut place = Place::default();
        let mut waiting = std::pin::pin!(lanes.admit(&mut place, wait(Route::MainUntil(later))));
        assert!(pending(waiting.as_mut()).await);
        drop(held);
        let main = waiting.await.expect("the main permit");
        assert!(!main.settling);

        // A main permit that comes first on the settle path is a main-lane one: I/O may
        // run on it. The settle permit taken first, the main one freed next.
        let taken = lanes
            .admit(&mut Place::default(), wait(Route::Either))
            .await
            .expect("a permit");
        assert!(taken.settling);
        let mut place = Place::default();
        let mut next = std::pin::pin!(lanes.admit(&mut place, wait(Route::Either)));
        assert!(pending(next.as_mut()).await);
        drop(main);
        assert!(!next.await.expect("the main permit").settling);
    }

    /// A call both interrupted and shut down while it waits ends as interrupted, every
    /// time (the component's settlement says the same), not one or the other at random;
    /// shut down alone, as shut down.
    #[tokio::test]
    async fn a_wait_both_interrupted_and_shut_down_ends_as_interrupted() {
        let (interrupt, closing) = (Interrupt::new(), Interrupt::new());
        closing.interrupt();
        let wait = wait_by(Route::Either, &interrupt, &closing)();
        assert!(matches!(wait.ended().await, Unserved::ShutDown));
        interrupt.interrupt();
        for _ in 0..32 {
            let wait = wait_by(Route::Either, &interrupt, &closing)();
            assert!(matches!(wait.ended().await, Unserved::Interrupted));
        }
    }

    /// A call that took the settle permit with no deadline to come back for gives up its
    /// place in the main lane: the next main permit goes to the call behind it, at once.
    #[tokio::test]
    async fn a_call_settled_for_good_leaves_the_main_lane_to_the_next() {
        let lanes = Lanes::new(2);
        let held = lanes.try_main().expect("the main permit is free");
        let (interrupt, closing) = (Interrupt::new(), Interrupt::new());
        let wait = |route| wait_by(route, &interrupt, &closing);
        let mut first = Place::default();
        let settling = lanes
            .admit(&mut first, wait(Route::Either))
            .await
            .expect("a permit");
        assert!(settling.settling);
        assert!(first.0.is_none(), "its place in the main lane is given up");
        let later = Instant::now() + std::time::Duration::from_secs(3600);
        let mut second = Place::default();
        let mut next = std::pin::pin!(lanes.admit(&mut second, wait(Route::MainUntil(later))));
        assert!(pending(next.as_mut()).await);
        drop(held);
        let main = tokio::time::timeout(std::time::Duration::from_secs(5), next)
            .await
            .expect("the freed main permit reaches the next call");
        assert!(!main.expect("the main permit").settling);
        drop(settling);
    }

    /// A call that waited in the main lane and settles in the settle lane with no
    /// deadline to come back for (interrupted here; or its last deadline or budget
    /// passed) gives up its place there too: the freed main permit goes to the call
    /// behind it, not to a place nobody will use.
    #[tokio::test]
    async fn a_main_lane_wait_settled_for_good_leaves_the_main_lane_to_the_next() {
        let lanes = Lanes::new(2);
        let held = lanes.try_main().expect("the main permit is free");
        let (interrupt, closing, never) = (Interrupt::new(), Interrupt::new(), Interrupt::new());
        let later = Instant::now() + std::time::Duration::from_secs(3600);
        let mut first = Place::default();
        let settling = {
            let mut waiting = std::pin::pin!(lanes.admit(
                &mut first,
                wait_by(Route::MainUntil(later), &interrupt, &closing)
            ));
            assert!(pending(waiting.as_mut()).await);
            interrupt.interrupt();
            waiting.await.expect("the settle permit")
        };
        assert!(settling.settling);
        assert!(first.0.is_none(), "its place in the main lane is given up");
        let mut second = Place::default();
        let mut next = std::pin::pin!(lanes.admit(
            &mut second,
            wait_by(Route::MainUntil(later), &never, &closing)
        ));
        assert!(pending(next.as_mut()).await);
        drop(held);
        let main = tokio::time::timeout(std::time::Duration::from_secs(5), next)
            .await
            .expect("the freed main permit reaches the next call");
        assert!(!main.expect("the main permit").settling);
        drop(settling);
    }

    #[tokio::test]
    async fn an_interrupted_main_lane_wait_settles_in_the_settle_lane_or_ends_there() {
        let lanes = Lanes::new(2);
        let _held = lanes.try_main().expect("the main permit is free");
        let (interrupt, closing) = (Interrupt::new(), Interrupt::new());
        let later = Instant::now() + std::time::Duration::from_secs(3600);
        let wait = || wait_by(Route::MainUntil(later), &interrupt, &closing)();
        // Long before its deadline: the free settle permit, for the component to settle
        // the interrupted call.
        let mut place = Place::default();
        let mut waiting = std::pin::pin!(lanes.admit(&mut place, wait));
        assert!(pending(waiting.as_mut()).await);
        interrupt.interrupt();
        let settling = waiting.await.expect("the settle permit");
        assert!(settling.settling);
        // With no permit free in either lane, the interruption ends the wait.
        assert_eq!(
            lanes.admit(&mut Place::default(), wait).await.err(),
            Some(Unserved::Interrupted)
        );
        drop(settling);
    }

    #[tokio::test]
    async fn a_call_that_went_to_the_settle_lane_keeps_its_turn_in_the_main_lane() {
        let lanes = Lanes::new(2);
        let held = lanes.try_main().expect("the main permit is free");
        let (interrupt, closing) = (Interrupt::new(), Interrupt::new());
        let until = |route| wait_by(route, &interrupt, &closing);
        let later = Instant::now() + std::time::Duration::from_secs(3600);
        // The first call queues for the main lane, then its deadline passes: it takes the
        // settle permit, and gives way (drops it) with I/O to do.
        let mut first = Place::default();
        let soon = Instant::now() + std::time::Duration::from_millis(20);
        let settling = lanes
            .admit(&mut first, until(Route::MainUntil(soon)))
            .await
            .expect("the settle permit");
        assert!(settling.settling);
        // A second call queues for the main lane meanwhile.
        let mut second = Place::default();
        let mut next = std::pin::pin!(lanes.admit(&mut second, until(Route::MainUntil(later))));
        assert!(pending(next.as_mut()).await);
        drop(settling);
        // The main permit comes free: it is the first call's, which queued first.
        drop(held);
        let again = lanes.admit(&mut first, until(Route::MainUntil(later)));
        let again = tokio::time::timeout(std::time::Duration::from_secs(5), again)
            .await
            .expect("the first call is served before the second")
            .expect("the main permit");
        assert!(!again.settling);
        assert!(
            pending(next.as_mut()).await,
            "the second call waits its turn"
        );
        drop(again);
        assert!(!next.await.expect("then the second's").settling);
    }
}
