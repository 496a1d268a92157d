//! Retries after transient failures: how many a backend gets, and the wait before each.
//!
//! A retry resends the very bytes of the first attempt (the component encodes a message
//! once) and must start inside the original deadline: the budget is the deadline, not a
//! count of attempts, so a retry that could not start in time is not made at all.

use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// Retries after transient failures, from the host configuration (off by default).
#[derive(Clone, Debug, Default)]
pub struct RetryPolicy {
    /// Retries per exchange for every backend.
    pub default: u32,
    /// Per-backend overrides, by backend id.
    pub per_backend: HashMap<String, u32>,
}

impl RetryPolicy {
    /// The retries allowed per exchange to backend `id`.
    pub(crate) fn for_backend(&self, id: &str) -> u32 {
        self.per_backend.get(id).copied().unwrap_or(self.default)
    }
}

/// Waits the backoff before retry number `attempt` (1 is the first), and says whether to
/// make it: only while `allowed` (the backend's retries) permits one more, and only if
/// the wait ends before `deadline` (a retry that could not start in time is no retry).
/// Attempt 0 is no retry's number (a component asking for it gets none, retries or not).
pub(crate) async fn wait_to_retry(allowed: u32, attempt: u32, deadline: Instant) -> bool {
    let wake = Instant::now() + backoff(attempt);
    if attempt == 0 || attempt > allowed || wake >= deadline {
        return false;
    }
    tokio::time::sleep_until(wake).await;
    true
}

/// The backoff before retry number `attempt`: exponential from 10 ms, capped at 200 ms,
/// with full jitter in its upper half so retrying callers do not move in lockstep.
fn backoff(attempt: u32) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let ceiling_ms = (10u64 << attempt.saturating_sub(1).min(5)).min(200);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(attempt);
    let jitter = hasher.finish() % (ceiling_ms * 500 + 1);
    Duration::from_micros(ceiling_ms * 500 + jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_numbered_retry_within_the_allowance_and_the_deadline_is_made() {
        let far = Instant::now() + Duration::from_secs(5);
        assert!(!wait_to_retry(0, 0, far).await, "no retries, attempt 0");
        assert!(!wait_to_retry(2, 0, far).await, "attempt 0 is no retry");
        assert!(wait_to_retry(2, 1, far).await);
        assert!(wait_to_retry(2, 2, far).await);
        assert!(!wait_to_retry(2, 3, far).await, "past the allowance");
        assert!(
            !wait_to_retry(2, 1, Instant::now()).await,
            "past the deadline"
        );
    }
}
