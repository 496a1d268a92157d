//! The settled decision of one hook call and its audit record (DESIGN.md §4).
//!
//! The record is the same object the CLI prints and the audit log stores, written with
//! the shared [`ahp_vocab::Record`] type. It tells an explicit backend denial
//! (`backend-deny`) apart from a synthetic fail-closed one (`synthetic-deny`), and budget
//! expiry apart from interruption. It never holds a secret, and the `reason` never holds
//! transport details or backend error text.

use crate::deadline::{elapsed_ms, Deadline};
use crate::host_api::Instant;
use crate::wire::Message;
use ahp_vocab::{
    DecidedBy, Decision, Enforce, EventRef, InterceptorEntry, ObserverEntry, ObserverKind,
    ObserverResult, Record, OBSERVER_TIMEOUT_MS,
};

/// When an observe notification prepared at `now` must be done: the observer timeout,
/// or the call's budget if that ends first.
pub fn observer_deadline(now: Instant, budget: Option<Instant>) -> Instant {
    Deadline::within(now, OBSERVER_TIMEOUT_MS, budget).at()
}

/// A prepared `hooks/observe` notification owned by the hook call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObserverDelivery {
    pub backend: String,
    /// Its subscription's position within the backend's `subscriptions`.
    pub subscription: usize,
    /// Why it is sent: a short-circuited interceptor, or an observer of the call's event.
    pub kind: ObserverKind,
    /// For a `hook.failure`: the place in the chain of the failure it reports.
    pub reports: Option<usize>,
    /// The notification, or `None` if it was withheld (see `observers`): not sent, and
    /// recorded so. It crosses the WIT as an empty message, which a notification never is.
    pub message: Option<Message>,
    pub deadline: Instant,
}

impl ObserverDelivery {
    pub fn withheld(&self) -> bool {
        self.message.is_none()
    }
}

/// The outcome of one hook call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settlement {
    pub decision: Decision,
    pub decided_by: DecidedBy,
    pub reason: Option<String>,
    pub messages: Vec<String>,
    /// What the harness must apply besides the decision (effective values, a returned
    /// value, injections, flow).
    pub enforce: Enforce,
    pub event: EventRef,
    pub elapsed_ns: u64,
    pub interceptors: Vec<InterceptorEntry>,
    pub observers: Vec<ObserverDelivery>,
}

impl Settlement {
    /// The audit record. Observer entries name each prepared delivery; the host adds
    /// their results once it has sent them, but for those withheld here.
    pub fn record(&self) -> Record {
        self.clone().into_record().0
    }

    /// The audit record and the prepared observer deliveries it names, moved out
    /// rather than copied: the component hands both over at the end of every call (a
    /// withheld one with no bytes, which the host does not send).
    pub fn into_record(self) -> (Record, Vec<ObserverDelivery>) {
        let observers = self
            .observers
            .iter()
            .map(|o| ObserverEntry {
                backend: o.backend.clone(),
                subscription: o.subscription,
                kind: o.kind,
                reports: o.reports,
                request_sha256: o.message.as_ref().map(|m| m.sha256().to_owned()),
                result: o.withheld().then_some(ObserverResult::Withheld),
            })
            .collect();
        let record = Record {
            event: self.event,
            decision: self.decision,
            decided_by: self.decided_by,
            reason: self.reason,
            messages: self.messages,
            enforce: self.enforce,
            elapsed_ms: elapsed_ms(0, self.elapsed_ns),
            interceptors: self.interceptors,
            observers,
        };
        (record, self.observers)
    }
}
