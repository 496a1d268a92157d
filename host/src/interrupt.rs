//! Interruption of a hook call by the embedding harness.
//!
//! A cheap, clonable signal: setting it wakes every pending wait at once, and stays set.
//! The host checks it around every capability call; the component re-checks it just
//! before accepting a response, so an interrupted call can never publish a decision.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// The interruption signal of a hook call; clones share one signal.
#[derive(Clone, Debug, Default)]
pub struct Interrupt(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    set: AtomicBool,
    notify: Notify,
}

impl Interrupt {
    /// A signal that is not set.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Interrupts the call: pending decision requests end now, and the call settles as
    /// a denial (`decidedBy: "interrupted"`).
    pub fn interrupt(&self) {
        self.0.set.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    /// Whether the call has been interrupted.
    pub fn is_set(&self) -> bool {
        self.0.set.load(Ordering::SeqCst)
    }

    /// Resolves once interrupted.
    pub async fn wait(&self) {
        loop {
            let notified = self.0.notify.notified();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }
}

/// The signal an injected transport or credential provider is handed for one exchange,
/// set when the exchange ends however it ends — interrupted, past its deadline, or
/// dropped with its call — so work the embedder spawned to wait for it stops too.
pub(crate) struct CancelOnDrop(pub(crate) Interrupt);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.interrupt();
    }
}
