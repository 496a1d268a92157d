//! A call's `hooks/observe` notifications, prepared so that observers cannot change
//! its decision by the memory or the time they take.
//!
//! Each notification holds the whole event, and the component prepares them all before
//! it hands the settlement over, inside the instance's memory (256 MiB) and the call's
//! time bound. Many observers of a large event would exhaust either, and the call would
//! end as an `engine-failure` denial. So the notifications of one event are encoded
//! once per distinct view (observers that see the same get a copy of the same bytes,
//! with the digest already taken); together they hold at most [`OBSERVER_BYTES`], and
//! no view is encoded, nor an event made to be notified, once [`OBSERVER_PREPARE_MS`]
//! have passed since preparing began.
//! A notification past either is withheld: recorded so, and neither sent nor hashed.
//! The host allows a call that time, and more for an encoding begun just before.

use crate::deadline::Deadline;
use crate::event::Event;
use crate::host_api::{Host, Instant};
use crate::registration::{Backend, Subscription, View};
use crate::settlement::{observer_deadline, ObserverDelivery};
use crate::wire::{self, Message};
use ahp_vocab::{ObserverKind, OBSERVER_PREPARE_MS};

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

/// A call's observe notifications, in order, within [`OBSERVER_BYTES`] and the time to
/// prepare them.
#[derive(Debug)]
pub struct Observers {
    deliveries: Vec<ObserverDelivery>,
    bytes: usize,
    /// When the last view may begin to be encoded.
    prepare_by: Instant,
}

/// A view already met in the current batch, and the place of the first delivery for it
/// (its message, unless it was withheld).
struct Encoded<'v> {
    view: &'v View,
    at: usize,
}

impl Observers {
    /// Notifications prepared from `now` on: no view is encoded past
    /// [`OBSERVER_PREPARE_MS`] from then, nor past `budget`.
    pub fn from(now: Instant, budget: Option<Instant>) -> Observers {
        Observers {
            deliveries: Vec::new(),
            bytes: 0,
            prepare_by: Deadline::within(now, OBSERVER_PREPARE_MS, budget).at(),
        }
    }

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
            let message = match encoded.iter().find(|e| e.view == view) {
                Some(e) => self.copy(e.at),
                None => {
                    encoded.push(Encoded {
                        view,
                        at: self.deliveries.len(),
                    });
                    self.encode(host, event, view)
                }
            };
            self.push((why, backend, subscription), message, deadline);
        }
    }

    /// Whether preparing is over: its time is up, or the call was interrupted
    /// ("Scheduling or processing best-effort observers must not delay interruption",
    /// observation-disposition.md; the call then sends none). A view would no longer be
    /// encoded, so an event made only to be notified (a `hook.failure` report, which
    /// copies the parent's session and harness) need not be made either.
    pub fn preparing_ended<H: Host>(&self, host: &H) -> bool {
        host.now() >= self.prepare_by || host.interrupted()
    }

    /// Adds one withheld notification for each of `targets`, in order, recorded as
    /// [`Observers::of_event`] would record them past the time to prepare, but with no
    /// event: one that is not encoded need not be built, and building it is work after
    /// the decision that no clock bounds.
    pub fn withhold<'r>(
        &mut self,
        now: Instant,
        budget: Option<Instant>,
        targets: impl IntoIterator<Item = Target<'r>>,
    ) {
        let deadline = observer_deadline(now, budget);
        for target in targets {
            self.push(target, None, deadline);
        }
    }

    /// Adds the delivery of `message` (`None`: withheld) to `target`: the one place a
    /// delivery is made, so a withheld one is recorded like any other.
    fn push(&mut self, target: Target, message: Option<Message>, deadline: Instant) {
        let (why, backend, subscription) = target;
        self.deliveries.push(ObserverDelivery {
            backend: backend.id.clone(),
            subscription: subscription.index,
            kind: why.kind,
            reports: why.reports,
            message,
            deadline,
        });
    }

    /// `event` as `view` sees it, if there is still time to encode it and room to hold it.
    fn encode<H: Host>(&mut self, host: &H, event: &Event, view: &View) -> Option<Message> {
        if self.preparing_ended(host) {
            return None;
        }
        let notification = wire::observe(event, view);
        self.hold(notification.size())
            .then(|| notification.seal(|bytes| host.sha256(bytes)))
    }

    /// A copy of the message at `at`, if there is room to hold it. A copy of a withheld
    /// one is withheld: whatever kept it out still does (the total only grows).
    fn copy(&mut self, at: usize) -> Option<Message> {
        let len = self.deliveries[at].message.as_ref()?.bytes().len();
        self.hold(len)
            .then(|| self.deliveries[at].message.clone())
            .flatten()
    }

    /// Counts `len` more bytes held, if they fit within [`OBSERVER_BYTES`].
    fn hold(&mut self, len: usize) -> bool {
        match self.bytes.checked_add(len) {
            Some(total) if total <= OBSERVER_BYTES => {
                self.bytes = total;
                true
            }
            _ => false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.deliveries.is_empty()
    }

    pub fn into_vec(self) -> Vec<ObserverDelivery> {
        self.deliveries
    }
}
