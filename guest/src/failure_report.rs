//! `hook.failure`: an interceptor's operational failure, reported to the other observers
//! (digest §14, conformance O10).
//!
//! When a failure is settled by its subscription's policy (fail-open or fail-closed),
//! every observe subscription that selects `hook.failure` is sent one, except those of the
//! backend that failed: the report must reach someone else, so its routing never depends
//! on the failing backend receiving its own failure. A call interrupted or out of budget
//! reports nothing, as it starts no other observation. The event is the component's own,
//! made from the event it failed on (the parent):
//!
//! - `id`: the parent's, `/hook.failure/` and the interceptor's place in the chain: one per
//!   failure, the same bytes on every retry of its delivery;
//! - `source` and `session`: the parent's (the component speaks for the harness);
//! - `time`: the parent's plus the time from the hook call's start to the failure's
//!   settlement, as the sandbox has no wall clock and the parent's time is the harness's;
//! - `failure.reason`: the failure class (failure-semantics.md's word), never a backend's
//!   text, an address or an error, like the synthetic denial's reason.

use crate::chain::Call;
use crate::deadline::elapsed_ms;
use crate::event::Event;
use crate::host_api::{Host, Instant};
use crate::observers::{Observers, Why};
use ahp_vocab::{InterceptorEntry, ObserverKind};
use serde_json::{json, Value};

/// The event type.
pub const HOOK_FAILURE: &str = "hook.failure";

/// Adds to `observers` the `hook.failure` deliveries for the failures settled by policy,
/// each its place among `records` (the chain's, in order) and when it was settled,
/// prepared at `now` for a call that began at `started`. A report not begun within the
/// time to prepare observers is withheld, as a view not begun in it is.
pub fn reports<H: Host>(
    host: &H,
    call: &Call,
    started: Instant,
    now: Instant,
    records: &[InterceptorEntry],
    settled: &[(usize, Instant)],
    observers: &mut Observers,
) {
    for &(place, settled_at) in settled {
        let Some(record) = records.get(place) else {
            continue;
        };
        let mut selected = call
            .registration
            .observers(HOOK_FAILURE)
            .filter(|(backend, _)| backend.id != record.backend)
            .peekable();
        if selected.peek().is_none() {
            continue;
        }
        let why = Why {
            kind: ObserverKind::HookFailure,
            reports: Some(place),
        };
        // Making the report copies, writes and reads again the parent's session and
        // harness, which can be MiB, and none of it reads the clock: past the time to
        // prepare, its notifications would be withheld anyway, so they are withheld
        // without it, and many failures cannot hold the decision past that time.
        if observers.preparing_ended(host) {
            observers.withhold(now, call.budget, why.targets(selected));
            continue;
        }
        let elapsed = elapsed_ms(started, settled_at);
        let Some(event) = report(call.event, place, record, elapsed) else {
            continue;
        };
        observers.of_event(host, &event, now, call.budget, why.targets(selected));
    }
}

/// The `hook.failure` event of the interceptor at `place` in the chain, whose failure is
/// `record`, `elapsed_ms` after the parent's call began. `None` only if the parent's
/// time is past what a date-time can say by then, or the event would not pass the
/// component's own reading, which an observer is owed as much as the harness's events.
fn report(
    parent: &Event,
    place: usize,
    record: &InterceptorEntry,
    elapsed_ms: u64,
) -> Option<Event> {
    let failure = record.failure.as_ref()?;
    let time = parent
        .value_at("/time")
        .and_then(Value::as_str)
        .and_then(|time| crate::syntax::later(time, elapsed_ms))?;
    let mut event = json!({
        "id": format!("{}/{HOOK_FAILURE}/{place}", parent.id),
        "source": parent.value_at("/source"),
        "time": time,
        "type": HOOK_FAILURE,
        "failure": {
            "backendId": record.backend,
            "reason": failure.class.as_str(),
            "policy": record.policy.as_str(),
        },
        "parentEventId": parent.id,
    });
    // The parent's session and harness, where it names them: the SDKs' schemas require
    // `harness` on every event, this one too, and an observer built on them drops one
    // without it.
    for member in ["session", "harness"] {
        if let Some(value) = parent.value_at(&format!("/{member}")) {
            event[member] = value.clone();
        }
    }
    Event::parse_any(&event.to_string()).ok()
}
