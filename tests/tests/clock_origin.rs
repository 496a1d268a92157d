//! The clock the component and the host share starts a day before its first use, so an
//! instant an embedder took before anything read it (a hook call that arrived while its
//! backend was being started) keeps its distance from the instants after.
//!
//! Its own test binary with a single test: the check holds only where it makes the
//! clock's first use in the process.

use std::time::{Duration, Instant};

#[test]
fn an_instant_from_before_the_clocks_first_use_keeps_its_distance() {
    let arrived = Instant::now();
    std::thread::sleep(Duration::from_millis(20));
    let waited = ahp_host::component_instant(Instant::now())
        .saturating_sub(ahp_host::component_instant(arrived));
    assert!(
        waited >= 20_000_000,
        "an instant from before the clock's first use counts from when it was: {waited} ns"
    );
}
