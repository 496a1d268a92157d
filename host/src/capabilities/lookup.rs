//! An HTTP backend's name lookups, one at a time. `getaddrinfo` runs on a blocking
//! thread that nothing can stop: with a resolver that no longer answers, every call that
//! needs a new connection would hold one thread until the resolver gives up (10 s and
//! more), each call giving up at its own deadline and the next one starting another,
//! until tokio's blocking pool is full and every file read and lookup of the process
//! waits behind them. So a call that needs the name while a lookup of it is under way
//! waits for that one, only until its own deadline (the caller bounds it); the first
//! call after it ended asks again: nothing is cached, the resolver's own lifetimes stand.
//! A lookup is a [`Flight`] joined for its bound at most (30 s): one that hangs (a stuck
//! name service module) holds one thread per bound, and does not fail the backend's new
//! connections for good.

use super::flight::{Flight, FLIGHT_BOUND};
use crate::bindings::host_types::DeliveryError;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::{timeout_at, Instant};

/// The lookups of one backend's host and port.
pub(super) struct Lookups {
    host: String,
    port: u16,
    /// How long a lookup is joined ([`FLIGHT_BOUND`]).
    bound: Duration,
    /// The lookup under way, or the last one (ended once its task has).
    last: Mutex<Option<Flight<Arc<[SocketAddr]>, DeliveryError>>>,
}

impl Lookups {
    pub fn new(host: &str, port: u16) -> Lookups {
        Lookups {
            host: host.to_owned(),
            port,
            bound: FLIGHT_BOUND,
            last: Mutex::new(None),
        }
    }

    /// The port every address found is given.
    #[cfg(test)]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The addresses of the host, by `deadline`: an IP address as it is, a name as the
    /// system resolver gives it (shared with any lookup of it under way); none is
    /// `unresolved-host`.
    pub async fn resolve(&self, deadline: Instant) -> Result<Vec<SocketAddr>, DeliveryError> {
        if let Ok(ip) = self.host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, self.port)]);
        }
        let (host, port) = (self.host.clone(), self.port);
        self.shared(deadline, || async move {
            tokio::net::lookup_host((host.as_str(), port))
                .await
                .ok()
                .map(|found| found.collect())
        })
        .await
    }

    /// `lookup`'s outcome by `deadline`: of the one under way if there is one (its task
    /// not ended), else of a new one, a flight ended at its bound.
    async fn shared<L, F>(
        &self,
        deadline: Instant,
        lookup: L,
    ) -> Result<Vec<SocketAddr>, DeliveryError>
    where
        L: FnOnce() -> F,
        F: Future<Output = Option<Vec<SocketAddr>>> + Send + 'static,
    {
        let outcome = {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            match last.as_ref() {
                Some(under_way) if !under_way.is_finished() => under_way.outcome(),
                _ => {
                    let (lookup, until) = (lookup(), Instant::now() + self.bound);
                    let flight = Flight::start(move |bound| async move {
                        match timeout_at(bound.min(until), lookup).await {
                            Ok(Some(found)) if !found.is_empty() => Ok(Arc::from(found)),
                            // A name with no address is as unresolved as one the lookup
                            // refused, or gave no answer to in time.
                            _ => Err(DeliveryError::UnresolvedHost),
                        }
                    });
                    last.insert(flight).outcome()
                }
            }
        };
        outcome.wait(deadline).await.map(|found| found.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A deadline no test reaches: a call that gives up does so by its own timeout.
    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    /// A lookup that takes 300 ms and counts how many were started.
    fn slow(started: &Arc<AtomicUsize>) -> impl Future<Output = Option<Vec<SocketAddr>>> {
        started.fetch_add(1, Ordering::SeqCst);
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Some(vec![SocketAddr::from(([127, 0, 0, 1], 8080))])
        }
    }

    /// Calls that need the name while it is being looked up share that lookup, those
    /// that give up at their deadline too (it goes on for the others); a call after it
    /// ended starts another: nothing is kept.
    #[tokio::test]
    async fn calls_share_the_lookup_under_way_and_the_next_one_asks_again() {
        let lookups = Arc::new(Lookups::new("policy.example", 8080));
        let started = Arc::new(AtomicUsize::new(0));
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..8 {
            let (lookups, started) = (lookups.clone(), started.clone());
            calls.spawn(async move {
                let resolve = lookups.shared(far(), || slow(&started));
                match i % 2 {
                    // Half give up long before the lookup ends.
                    0 => tokio::time::timeout(Duration::from_millis(20), resolve)
                        .await
                        .ok(),
                    _ => Some(resolve.await),
                }
            });
        }
        let answers: Vec<_> = calls.join_all().await.into_iter().flatten().collect();
        assert_eq!(
            started.load(Ordering::SeqCst),
            1,
            "one lookup for all eight"
        );
        assert_eq!(answers.len(), 4, "the four that waited: {answers:?}");
        for answer in answers {
            let expected = vec![SocketAddr::from(([127, 0, 0, 1], 8080))];
            assert!(
                matches!(answer, Ok(ref addrs) if *addrs == expected),
                "{answer:?}"
            );
        }
        let again = lookups.shared(far(), || slow(&started)).await;
        assert!(again.is_ok(), "{again:?}");
        assert_eq!(
            started.load(Ordering::SeqCst),
            2,
            "a new lookup once it ended"
        );
    }

    /// A lookup that never ends is joined for its bound, then left to itself: the next
    /// call starts another.
    #[tokio::test]
    async fn a_lookup_that_hangs_is_joined_only_for_its_bound() {
        let bound = Duration::from_millis(300);
        let lookups = Lookups {
            bound,
            ..Lookups::new("policy.example", 443)
        };
        let started = Arc::new(AtomicUsize::new(0));
        let hang = || {
            started.fetch_add(1, Ordering::SeqCst);
            std::future::pending()
        };
        for _ in 0..3 {
            let waited =
                tokio::time::timeout(Duration::from_millis(20), lookups.shared(far(), hang)).await;
            assert!(waited.is_err(), "{waited:?}");
        }
        assert_eq!(started.load(Ordering::SeqCst), 1, "joined within its bound");
        tokio::time::sleep(bound).await;
        let waited =
            tokio::time::timeout(Duration::from_millis(20), lookups.shared(far(), hang)).await;
        assert!(waited.is_err(), "{waited:?}");
        assert_eq!(started.load(Ordering::SeqCst), 2, "another past it");
    }

    fn dies() -> Option<Vec<SocketAddr>> {
        panic!("the resolver's task died")
    }

    /// A name that does not resolve, or resolves to nothing, or whose lookup's task
    /// ended without an outcome, is `unresolved-host`; an IP address is not looked up.
    #[tokio::test]
    async fn no_address_is_unresolved_and_an_ip_address_is_its_own() {
        let lookups = Lookups::new("policy.example", 443);
        for found in [None, Some(Vec::new())] {
            let answer = lookups.shared(far(), || async move { found }).await;
            assert!(
                matches!(answer, Err(DeliveryError::UnresolvedHost)),
                "{answer:?}"
            );
        }
        let panicked = lookups.shared(far(), || async { dies() }).await;
        assert!(
            matches!(panicked, Err(DeliveryError::UnresolvedHost)),
            "{panicked:?}"
        );
        // Ended without an outcome, it is not joined: the next call asks again.
        let addr = SocketAddr::from(([192, 0, 2, 1], 443));
        let after = lookups
            .shared(far(), || async move { Some(vec![addr]) })
            .await;
        assert!(
            matches!(after, Ok(ref addrs) if *addrs == [addr]),
            "{after:?}"
        );
        let literal = Lookups::new("::1", 443).resolve(far()).await;
        let expected: Vec<SocketAddr> = vec!["[::1]:443".parse().unwrap()];
        assert!(
            matches!(literal, Ok(ref addrs) if *addrs == expected),
            "{literal:?}"
        );
    }
}
