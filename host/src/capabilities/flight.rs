//! A "flight": one acquisition (a token, a discovered binding) that every call needing it
//! shares. It runs on a task of its own, so a call that gives up (its deadline, an
//! interruption) never cancels it for the others, and each call waits for it only until
//! its own deadline. The OAuth client's token acquisitions, a backend's discovery after
//! its challenge and an http backend's name lookups are flights.

use super::credentials::AuthFailure;
use crate::bindings::host_types::{DeliveryError, IoPhase};
use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::{timeout_at, Instant};

/// The longest a flight may run; each call still waits only until its own deadline
/// (30 s is the largest `timeoutMs` a harness should support).
pub(super) const FLIGHT_BOUND: Duration = Duration::from_secs(30);

/// How a flight fails its waiters when it has nothing else to say.
pub(super) trait FlightError: Clone + Send + Sync + 'static {
    /// A waiter's own deadline came before the outcome.
    fn deadline_exceeded() -> Self;
    /// The flight was stopped, or its task ended, without an outcome.
    fn no_outcome() -> Self;
}

/// An acquisition's: `deadline-exceeded`, `acquisition-failed`.
impl FlightError for AuthFailure {
    fn deadline_exceeded() -> Self {
        AuthFailure::DeadlineExceeded
    }
    fn no_outcome() -> Self {
        AuthFailure::AcquisitionFailed
    }
}

/// A name lookup's, before any connection: `deadline-exceeded` (connect),
/// `unresolved-host`.
impl FlightError for DeliveryError {
    fn deadline_exceeded() -> Self {
        DeliveryError::DeadlineExceeded(IoPhase::Connect)
    }
    fn no_outcome() -> Self {
        DeliveryError::UnresolvedHost
    }
}

/// A running (or ended) flight, whose outcome is `Result<T, E>`.
pub(super) struct Flight<T, E = AuthFailure> {
    outcome: Outcome<T, E>,
    task: AbortHandle,
}

/// A call's share of a flight's outcome, to wait for.
pub(super) struct Outcome<T, E = AuthFailure>(watch::Receiver<Option<Result<T, E>>>);

impl<T: Clone + Send + Sync + 'static, E: FlightError> Flight<T, E> {
    /// Starts `work` on a task of its own (on the current Tokio runtime), given the
    /// instant [`FLIGHT_BOUND`] from now by which it must end. Whatever `work` does with
    /// its outcome (caching it, changing a state) is done before the waiting calls see it.
    pub fn start<W, F>(work: W) -> Flight<T, E>
    where
        W: FnOnce(Instant) -> F,
        F: Future<Output = Result<T, E>> + Send + 'static,
    {
        let (publish, outcome) = watch::channel(None);
        let work = work(Instant::now() + FLIGHT_BOUND);
        let task = tokio::spawn(async move {
            let _ = publish.send(Some(work.await));
        });
        Flight {
            outcome: Outcome(outcome),
            task: task.abort_handle(),
        }
    }

    /// A share of the outcome, for a call to wait on once it has let go of any lock.
    pub fn outcome(&self) -> Outcome<T, E> {
        Outcome(self.outcome.0.clone())
    }

    /// Whether the task ended, or was stopped and dropped.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops it (shutdown): calls waiting for it fail.
    pub fn abort(&self) {
        self.task.abort();
    }
}

impl<T: Clone, E: FlightError> Outcome<T, E> {
    /// The flight's outcome, or [`FlightError::deadline_exceeded`] once `deadline` comes
    /// first; a flight stopped before its end (shutdown) or whose task ended without an
    /// outcome is [`FlightError::no_outcome`].
    pub async fn wait(mut self, deadline: Instant) -> Result<T, E> {
        timeout_at(deadline, self.0.wait_for(Option::is_some))
            .await
            .map_err(|_| E::deadline_exceeded())?
            .map_err(|_| E::no_outcome())?
            .clone()
            .unwrap_or_else(|| Err(E::no_outcome()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_call_gets_the_outcome_and_one_that_stops_waiting_stops_nothing() {
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let flight = Flight::start(|bound| async move {
            assert!(bound > Instant::now() + FLIGHT_BOUND / 2);
            let _ = released.await;
            Ok(7)
        });
        let impatient = flight.outcome().wait(Instant::now()).await;
        assert_eq!(impatient, Err(AuthFailure::DeadlineExceeded));
        let patient = flight.outcome();
        release.send(()).unwrap();
        let later = Instant::now() + Duration::from_secs(5);
        assert_eq!(patient.wait(later).await, Ok(7));
        assert_eq!(
            flight.outcome().wait(later).await,
            Ok(7),
            "after it ended too"
        );
        assert!(flight.is_finished());
    }

    #[tokio::test]
    async fn a_stopped_flight_fails_its_calls() {
        let flight: Flight<u8> = Flight::start(|_| std::future::pending());
        let waiting = flight.outcome();
        flight.abort();
        let later = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            waiting.wait(later).await,
            Err(AuthFailure::AcquisitionFailed)
        );
        let failed = Flight::<u8>::start(|_| async { Err(AuthFailure::Unresolved) });
        assert_eq!(
            failed.outcome().wait(later).await,
            Err(AuthFailure::Unresolved)
        );
    }
}
