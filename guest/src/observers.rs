//! A call's `hooks/observe` notifications, prepared so that observers cannot change
//! its decision by the memory they take, and take little time.
//!
//! Each notification holds the whole event, and the component prepares them all before
//! it hands the settlement over, inside the instance's memory (256 MiB) and the call's
//! time bound. Many observers of a large event would exhaust either, and the call would
//! end as an `engine-failure` denial. So the notifications of one event are encoded
//! once per distinct view (observers that see the same get a copy of the same bytes,
//! with the digest already taken), and together they hold at most [`OBSERVER_BYTES`]:
//! one that would go past it is withheld, recorded with its digest and not sent. A
//! withheld notification of a view not encoded before is still encoded once, for its
//! length and digest, and then freed: many distinct views of a very large event can
//! still take the call past its time bound.

use crate::event::Event;
use crate::host_api::{Host, Instant};
use crate::registration::{Backend, Subscription, View};
use crate::settlement::{observer_deadline, ObserverDelivery};
use crate::wire;
use ahp_vocab::ObserverKind;

/// How many bytes of notifications one call may hold: a quarter of the instance's
/// memory, leaving the rest to the event, its interceptors' requests and the record.
pub const OBSERVER_BYTES: usize = 64 << 20;

/// Why a notification is sent: its kind, and for a `hook.failure` the place in the
/// chain of the failure it reports.
#[derive(Clone, Copy)]
pub struct Why {
    pub kind: ObserverKind,
    pub reports: Option<usize>,
}

impl Why {
    pub fn kind(kind: ObserverKind) -> Why {
        Why {
            kind,
            reports: None,
        }
    }

    /// Each of `subscriptions` (a backend and one of its observe subscriptions) as a
    /// target, for this reason.
    pub fn targets<'r>(
        self,
        subscriptions: impl IntoIterator<Item = (&'r Backend, &'r Subscription)>,
    ) -> impl Iterator<Item = Target<'r>> {
        subscriptions
            .into_iter()
            .map(move |(backend, subscription)| (self, backend, subscription))
    }
}

/// One notification to prepare: why, for which backend, for which of its observe
/// subscriptions.
pub type Target<'r> = (Why, &'r Backend, &'r Subscription);

/// A call's observe notifications, in order, within [`OBSERVER_BYTES`].
#[derive(Debug, Default)]
pub struct Observers {
    deliveries: Vec<ObserverDelivery>,
    bytes: usize,
}

/// A notification already encoded in the current batch: its view, its length, and the
/// place of the delivery that holds it (its bytes, unless it was withheld).
struct Encoded<'v> {
    view: &'v View,
    len: usize,
    at: usize,
}

impl Observers {
    /// Adds one notification of `event` for each of `targets`, in order, each bounded
    /// by the observer timeout from `now` and by `budget`. All the notifications of one
    /// event go in one batch: the batch is what shares an encoding.
    pub fn of_event<'r, H: Host>(
        &mut self,
        host: &H,
        event: &Event,
        now: Instant,
        budget: Option<Instant>,
        targets: impl IntoIterator<Item = Target<'r>>,
    ) {
        let deadline = observer_deadline(now, budget);
        let mut encoded: Vec<Encoded> = Vec::new();
        for (why, backend, subscription) in targets {
            let view = &subscription.view;
            let (message, len) = match encoded.iter().find(|e| e.view == view) {
                Some(e) => (self.deliveries[e.at].message.clone(), e.len),
                None => {
                    let message = wire::observe(event, view, |bytes| host.sha256(bytes));
                    let len = message.bytes().len();
                    encoded.push(Encoded {
                        view,
                        len,
                        at: self.deliveries.len(),
                    });
                    (message, len)
                }
            };
            self.push(
                ObserverDelivery {
                    backend: backend.id.clone(),
                    subscription: subscription.index,
                    kind: why.kind,
                    reports: why.reports,
                    message,
                    deadline,
                },
                len,
            );
        }
    }

    /// Adds `delivery`, whose message is `len` bytes long (its bytes may be a withheld
    /// copy's, empty), or withholds it if it would take the call past the limit.
    fn push(&mut self, mut delivery: ObserverDelivery, len: usize) {
        match self.bytes.checked_add(len) {
            Some(total) if total <= OBSERVER_BYTES => self.bytes = total,
            // Never a copy of a withheld one: the total only grows.
            _ => delivery.message.release_bytes(),
        }
        self.deliveries.push(delivery);
    }

    pub fn into_vec(self) -> Vec<ObserverDelivery> {
        self.deliveries
    }
}
