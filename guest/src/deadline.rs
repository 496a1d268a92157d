//! Deadlines: one absolute instant per subscription, derived once and never extended.
//!
//! A subscription's deadline is `min(start + timeoutMs, budget)` (failure-semantics.md,
//! "Deadlines" and "Enclosing operation budgets"): it covers credentials, delivery,
//! parsing and acceptance, and every retry happens inside it. Writing that arithmetic in
//! one place keeps every caller from re-deriving it, and records which of the two bounds
//! won, because a deadline set by the enclosing budget settles as budget expiry rather
//! than by the subscription's own policy.

use crate::host_api::{Instant, NANOS_PER_MS};

/// An absolute deadline on the host's monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    at: Instant,
    budget_binds: bool,
}

impl Deadline {
    /// `timeout_ms` from `now`, cut short by the enclosing `budget` if that ends first.
    pub fn within(now: Instant, timeout_ms: u64, budget: Option<Instant>) -> Deadline {
        let own = now.saturating_add(timeout_ms.saturating_mul(NANOS_PER_MS));
        match budget {
            Some(budget) if budget < own => Deadline {
                at: budget,
                budget_binds: true,
            },
            _ => Deadline {
                at: own,
                budget_binds: false,
            },
        }
    }

    /// The instant itself, as it crosses the boundary.
    pub fn at(self) -> Instant {
        self.at
    }

    /// Whether the enclosing budget, not the subscription's own timeout, set it.
    pub fn budget_binds(self) -> bool {
        self.budget_binds
    }
}

/// Whole milliseconds from `from` to `to` (0 if `to` is earlier), for the audit record.
pub fn elapsed_ms(from: Instant, to: Instant) -> u64 {
    to.saturating_sub(from) / NANOS_PER_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Instant = 5_000 * NANOS_PER_MS;

    #[test]
    fn the_own_timeout_sets_the_deadline_unless_the_budget_ends_first() {
        let own = Deadline::within(T0, 750, None);
        assert_eq!(
            (own.at(), own.budget_binds()),
            (T0 + 750 * NANOS_PER_MS, false)
        );
        let later_budget = Deadline::within(T0, 750, Some(T0 + 900 * NANOS_PER_MS));
        assert_eq!(later_budget, own);
        let tight = Deadline::within(T0, 750, Some(T0 + 300 * NANOS_PER_MS));
        assert_eq!(
            (tight.at(), tight.budget_binds()),
            (T0 + 300 * NANOS_PER_MS, true)
        );
        // A budget equal to the own deadline does not bind: the subscription's policy applies.
        let equal = Deadline::within(T0, 750, Some(T0 + 750 * NANOS_PER_MS));
        assert!(!equal.budget_binds());
    }

    #[test]
    fn huge_timeouts_saturate_instead_of_wrapping() {
        let far = Deadline::within(u64::MAX - 10, u64::MAX, None);
        assert_eq!(far.at(), u64::MAX);
        assert_eq!(elapsed_ms(T0, T0 - 1), 0);
        assert_eq!(elapsed_ms(T0, T0 + 2 * NANOS_PER_MS + 1), 2);
    }
}
