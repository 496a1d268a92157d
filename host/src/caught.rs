//! An embedder's code — an injected transport or credential provider — run so that its
//! panic ends that one exchange as a failure, settled under the subscription's policy,
//! never an unwind through the interceptor into the harness's own `.await` (which would
//! leave the call without a decision, and its record saying `interrupted`).

use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::Poll;

/// The output of the future `make` gives, or `Err(())` if making or polling it panicked.
/// Dropped unfinished (its caller's own timeout), the future is dropped inside
/// `catch_unwind` too: a panic there is logged, never an unwind into the caller.
pub(crate) async fn caught<F: Future>(make: impl FnOnce() -> F) -> Result<F::Output, ()> {
    let future = catch_unwind(AssertUnwindSafe(make)).map_err(drop)?;
    let mut future = DroppedCaught(ManuallyDrop::new(Box::pin(future)));
    std::future::poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| future.0.as_mut().poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        },
    )
    .await
}

/// A future that is dropped inside `catch_unwind`.
struct DroppedCaught<F: Future>(ManuallyDrop<Pin<Box<F>>>);

impl<F: Future> Drop for DroppedCaught<F> {
    fn drop(&mut self) {
        // SAFETY: taken once, here, as `self` is dropped; never used after.
        let inner = unsafe { ManuallyDrop::take(&mut self.0) };
        if catch_unwind(AssertUnwindSafe(move || drop(inner))).is_err() {
            tracing::error!("an embedder's future panicked as it was dropped");
        }
    }
}
