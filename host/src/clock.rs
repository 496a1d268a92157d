//! The one monotonic clock shared by the host and the component.
//!
//! Deadlines cross the WIT boundary as absolute nanosecond instants. The component reads
//! them from `wasi:clocks/monotonic-clock`, which the host backs with this clock, so an
//! instant means the same moment on both sides of the boundary and in every store.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The clock's zero: a day before its first use, so an instant an embedder took before
/// that use (a hook call's arrival, then its wait for an instance) keeps its distance
/// from later ones instead of all of it reading as zero.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(|| {
        let now = Instant::now();
        now.checked_sub(Duration::from_secs(24 * 60 * 60))
            .unwrap_or(now)
    })
}

/// Now, as a boundary instant (nanoseconds since the process's clock origin).
pub fn now() -> u64 {
    to_nanos(Instant::now())
}

/// A host instant as a boundary instant.
pub fn to_nanos(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(origin()).as_nanos()).unwrap_or(u64::MAX)
}

/// A boundary instant as a host instant.
pub fn to_instant(nanos: u64) -> Instant {
    origin() + Duration::from_nanos(nanos)
}

/// The clock the component sees.
pub struct SharedMonotonicClock;

impl wasmtime_wasi::HostMonotonicClock for SharedMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        now()
    }
}
