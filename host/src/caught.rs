//! An embedder's code — an injected transport or credential provider — run so that its
//! panic ends that one exchange as a failure, settled under the subscription's policy,
//! never an unwind through the interceptor into the harness's own `.await` (which would
//! leave the call without a decision, and its record saying `interrupted`).

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Poll;

/// The output of the future `make` gives, or `Err(())` if making or polling it panicked.
pub(crate) async fn caught<F: Future>(make: impl FnOnce() -> F) -> Result<F::Output, ()> {
    let future = catch_unwind(AssertUnwindSafe(make)).map_err(drop)?;
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        },
    )
    .await
}
