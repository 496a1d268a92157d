//! Observer delivery: `hooks/observe` notifications, sent concurrently, each bounded by
//! its own deadline. An observer's failure is recorded, never raised, and never changes
//! a decision.

use crate::backends::Backends;
use crate::bindings::delivery::Reply;
use crate::bindings::host_types::DeliveryError;
use crate::bindings::interceptor::Delivery;
use crate::capabilities::credentials::{AuthFailure, CredentialPurpose};
use crate::clock;
use crate::interrupt::{CancelOnDrop, Interrupt};
use crate::retry::wait_to_retry;
use crate::settlement::stopped_by;
use ahp_vocab::{Failure, FailureClass, ObserverResult, Phase};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// Each delivery's result as far as it is known, in the order given: shared with the
/// caller, so that a call whose deliveries are dropped midway records those that ended.
pub(crate) type Results = Arc<Mutex<Vec<ObserverResult>>>;

/// Sends the call's observe notifications concurrently, each bounded by its own
/// deadline and by `timeout`; the call's interruption and the interceptor's shutdown
/// (`closing`) cancel them. One the component withheld ([`withheld`]) is not sent.
/// Results are in the order given, in `results` too as each delivery ends: until then
/// `not-sent` while its task has not started (a call dropped at once sent nothing), and
/// `interrupted` once it has (a delivery that never ends was cut off). One whose task
/// starts with the call already interrupted or the interceptor closing stays `not-sent`:
/// a stop that came while the component prepared the notifications, or before
/// `HookCall::complete`, sends none of them.
pub(crate) async fn deliver_observers(
    backends: &Arc<Backends>,
    deliveries: Vec<Delivery>,
    timeout: Duration,
    interrupt: &Interrupt,
    closing: &Interrupt,
    results: &Results,
) -> Vec<ObserverResult> {
    let lock = || results.lock().unwrap_or_else(PoisonError::into_inner);
    *lock() = deliveries
        .iter()
        .map(|d| match withheld(d) {
            true => ObserverResult::Withheld,
            false => ObserverResult::NotSent,
        })
        .collect();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, delivery) in deliveries.into_iter().enumerate() {
        if withheld(&delivery) {
            continue;
        }
        let (backends, results) = (backends.clone(), results.clone());
        let (interrupt, closing) = (interrupt.clone(), closing.clone());
        // A timeout past the end of time (`Duration::MAX`) leaves the component's bound.
        let bound = Instant::now().checked_add(timeout);
        tasks.spawn(async move {
            // Recorded by the task itself, here and as it ends: a call dropped before it
            // was joined still has it. Unless the call's drop took the results already
            // (an aborted task still running on another worker gets here afterwards):
            // nothing to record into.
            let record = |result| {
                if let Some(slot) = results
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_mut(i)
                {
                    *slot = result;
                }
            };
            // Stopped before it started: it stays `not-sent`.
            if stopped_by(&interrupt, &closing).is_some() {
                return;
            }
            record(ObserverResult::Interrupted);
            let deadline = Instant::from_std(clock::to_instant(delivery.deadline));
            let deadline = bound.map_or(deadline, |bound| deadline.min(bound));
            // A stop from here on cuts it off (`interrupted`): checked first, also when
            // the notification could go at once.
            let result = tokio::select! {
                biased;
                () = interrupt.wait() => ObserverResult::Interrupted,
                () = closing.wait() => ObserverResult::Interrupted,
                r = notify(&backends, &delivery.backend, &delivery.message, deadline) => r,
            };
            record(result);
        });
    }
    while let Some(joined) = tasks.join_next().await {
        // A delivery that panicked (a host bug: an embedder's provider or transport is
        // caught already) stays `interrupted`, and says why here.
        if let Err(e) = joined {
            tracing::error!("an observer delivery ended without a result: {e}");
        }
    }
    lock().clone()
}

/// Whether the component withheld `delivery`: a notification past the call's observer
/// limits (memory, time to prepare), recorded so, whose bytes it did not hand over (a
/// notification is never empty).
pub(crate) fn withheld(delivery: &Delivery) -> bool {
    delivery.message.is_empty()
}

/// Sends one `hooks/observe` notification by `deadline`, with the backend's credential
/// if it has one (never without it, but for a backend registered without one, before its
/// challenge). A transient failure (refused, reset, lost, HTTP
/// 502–504) is retried with the same bytes as the backend's retry policy allows. Each
/// acquisition and each attempt tells an injected provider or transport to stop its own
/// work when it ends, however it ends (the delivery aborted with its task too), as an
/// interceptor's do: not only when the whole delivery does.
pub(crate) async fn notify(
    backends: &Backends,
    backend: &str,
    message: &[u8],
    deadline: Instant,
) -> ObserverResult {
    let Some(target) = backends.get(backend) else {
        return ObserverResult::Failed(FailureClass::ConnectionRefused);
    };
    let acquire = async || match &target.credentials {
        // Past the deadline no credential work begins (an OAuth token request would send
        // the client secret for a notification that can no longer go).
        Some(_) if Instant::now() >= deadline => {
            Err(ObserverResult::Failed(FailureClass::DeadlineExceeded))
        }
        Some(source) => {
            let cancelled = CancelOnDrop(Interrupt::new());
            let acquired = source
                .acquire(backend, CredentialPurpose::Observe, deadline, &cancelled.0)
                .await;
            acquired.map_err(|failure| {
                // A credential the deadline cut short is the deadline's failure, not the
                // credential's. An interceptor's entry says `auth-failed` with detail
                // `deadline-exceeded`; an observer's result is a class alone, and the
                // class is the deadline.
                ObserverResult::Failed(match failure {
                    AuthFailure::DeadlineExceeded => FailureClass::DeadlineExceeded,
                    _ => FailureClass::AuthFailed,
                })
            })
        }
        None => Ok(None),
    };
    let mut bearer = match acquire().await {
        Ok(bearer) => bearer,
        Err(failed) => return failed,
    };
    let mut reacquired = false;
    // Failed attempts so far; the resend that answers a 401 is not one of the retries.
    let mut failed = 0;
    loop {
        let cancelled = CancelOnDrop(Interrupt::new());
        let sent = target
            .exchange(backend, message, bearer.as_ref(), deadline, &cancelled.0)
            .await;
        drop(cancelled);
        if matches!(&sent, Ok(reply) if reply.status == Some(401)) {
            // As for an interceptor: the rejected token leaves any cache, and one token
            // (a fresh one, or the answer to the challenge of a backend that has no
            // binding) may resend the same bytes; a second 401, or none to send, fails.
            if let (Some(source), Some(token)) = (&target.credentials, &bearer) {
                source.reject(backend, token);
            }
            if reacquired {
                return ObserverResult::Failed(FailureClass::AuthFailed);
            }
            reacquired = true;
            bearer = match acquire().await {
                Ok(Some(bearer)) => Some(bearer),
                Ok(None) => return ObserverResult::Failed(FailureClass::AuthFailed),
                Err(failed) => return failed,
            };
            continue;
        }
        let (result, transient) = classify(sent);
        failed += 1;
        if !transient || !wait_to_retry(target.retries, failed, deadline).await {
            return result;
        }
    }
}

/// The result of one attempt at an observe notification, and whether it may be retried.
fn classify(sent: Result<Reply, DeliveryError>) -> (ObserverResult, bool) {
    let failure = match sent {
        Ok(reply) => match reply.status {
            None => return (ObserverResult::Delivered, false),
            // Observe success is 202 or 204 with no body.
            Some(202 | 204) if reply.body.is_empty() => return (ObserverResult::Delivered, false),
            Some(status) => Failure::new(FailureClass::HttpStatus, Phase::AwaitResponse)
                .with_http_status(status),
        },
        // Only the call's interruption or the interceptor's closing is an interruption,
        // and either ends the delivery before it gets here: a transport's own
        // cancellation is a lost exchange, retried as for an interceptor.
        Err(DeliveryError::Cancelled) => {
            Failure::new(FailureClass::ConnectionLost, Phase::AwaitResponse)
        }
        Err(e) => crate::convert::delivery_error(e).failure(),
    };
    (
        ObserverResult::Failed(failure.class),
        failure.is_transient(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deliveries to a backend the interceptor does not have (refused at once, if sent),
    /// the second one withheld.
    fn deliveries() -> Vec<Delivery> {
        let delivery = |message: &[u8]| Delivery {
            backend: "com.example.obs".into(),
            message: message.to_vec(),
            deadline: 0,
        };
        vec![delivery(b"{}"), delivery(b"")]
    }

    async fn delivered(interrupt: &Interrupt, closing: &Interrupt) -> Vec<ObserverResult> {
        let backends = Arc::new(Backends::default());
        let timeout = Duration::from_secs(2);
        let results = Results::default();
        deliver_observers(
            &backends,
            deliveries(),
            timeout,
            interrupt,
            closing,
            &results,
        )
        .await
    }

    /// With the call already interrupted, or the interceptor closing, when the
    /// deliveries start (a shutdown while the component prepared them), none is sent:
    /// each is `not-sent`, never `interrupted`, and a withheld one stays `withheld`.
    #[tokio::test]
    async fn deliveries_stopped_before_they_start_are_not_sent() {
        let set = || {
            let stop = Interrupt::new();
            stop.interrupt();
            stop
        };
        let unsent = [ObserverResult::NotSent, ObserverResult::Withheld];
        assert_eq!(delivered(&set(), &Interrupt::new()).await, unsent);
        assert_eq!(delivered(&Interrupt::new(), &set()).await, unsent);
        // Unstopped, the first one is sent, and refused.
        let refused = ObserverResult::Failed(FailureClass::ConnectionRefused);
        assert_eq!(
            delivered(&Interrupt::new(), &Interrupt::new()).await,
            [refused, ObserverResult::Withheld]
        );
    }
}
