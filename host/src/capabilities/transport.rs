//! Injected transports: an embedder's own delivery for one backend id, in place of the
//! registration's `http` or `stdio` binding. The host still owns everything around the
//! exchange — the absolute deadline (it stops waiting at it, at the transport's next
//! yield: [`Transport`] must not block the thread), cancellation, retries with
//! the same bytes, policy and audit — and only borrows the transport ([`Transport`] says
//! when it lets go).

use super::credentials::BoxFuture;
use crate::bindings::delivery::Reply;
use crate::bindings::host_types::{DeliveryError, IoPhase};
use crate::interrupt::Interrupt;
use crate::types::Secret;
use std::fmt;

/// One exchange an injected [`Transport`] is asked to carry.
#[derive(Clone, Copy, Debug)]
pub struct TransportRequest<'a> {
    /// The backend id from the registration.
    pub backend: &'a str,
    /// The JSON-RPC message, exactly as encoded once by the component (a retry carries
    /// the same bytes).
    pub message: &'a [u8],
    /// The backend's credential, if it has one (it never goes anywhere else).
    pub credential: Option<&'a Secret>,
    /// The subscription's absolute deadline: the host stops waiting at it.
    pub deadline: std::time::Instant,
    /// Set whenever this exchange ends for the host: when the hook call is interrupted
    /// or the interceptor shuts down (the host stops waiting at once), at the deadline,
    /// and after the reply was taken too. It lets a transport stop its own work; it does
    /// not mean the reply was discarded.
    pub cancelled: &'a Interrupt,
}

/// What the backend answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransportReply {
    /// The HTTP status, for transports that have one (`None`: like stdio, the body is
    /// the whole answer).
    pub status: Option<u16>,
    /// The reply's media type, if the transport has one.
    pub content_type: Option<String>,
    /// The reply body: one JSON-RPC response (empty for an acknowledged notification).
    pub body: Vec<u8>,
}

/// Why an exchange failed: the WIT `delivery-error` classes an embedder's transport can
/// report. Each settles under the subscription's failure policy like the built-in
/// transports' failures; the transient ones (refused, reset, lost) are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportError {
    /// The deadline passed (the host also enforces it, as `await-response`).
    DeadlineExceeded,
    /// The transport noticed cancellation and stopped. Only the host's signal
    /// ([`TransportRequest::cancelled`]) makes this an interruption; returned while the
    /// call goes on, it is a failure like [`TransportError::ConnectionLost`].
    Cancelled,
    /// Nobody took the message (refused, no route); nothing was sent.
    ConnectionRefused,
    /// The backend's name did not resolve; nothing was sent.
    UnresolvedHost,
    /// The peer reset the channel mid-exchange.
    ConnectionReset,
    /// The peer went away before a complete reply.
    ConnectionLost,
    /// A backend process could not be started.
    LaunchFailed,
    /// A backend process exited, with its status if it had one.
    AbnormalExit(Option<i32>),
    /// A secure channel could not be set up; nothing was sent.
    TlsFailed,
    /// The reply was not valid framing for the transport (recorded as `malformed-json`,
    /// detail `malformed-framing`: no JSON text could be had from it).
    Malformed,
    /// The reply was larger than the transport accepts.
    ResponseTooLarge,
    /// The transport refuses this delivery.
    NotPermitted,
}

/// An embedder's own delivery for one backend, injected through `Options::transports`.
///
/// It stays the embedder's: shutdown never closes it, and the host's `Arc` goes with the
/// interceptor, once its last clone, its `HookCall`s and the `host_state()`s handed out
/// are dropped. At once, but for work left in the background, which the drop (or
/// shutdown, earlier) tells to stop and which lets go of it when the runtime next polls
/// it, shortly after the drop rather than within it: an instance still being made for a
/// call that stopped waiting for it, and observer deliveries aborted with their call.
///
/// `exchange` and its future run on the hook call's own task, and the host can stop
/// waiting (at the deadline, an interruption, shutdown) only between two polls of it. So
/// neither may block the thread — a synchronous policy engine, a blocking client, a lock
/// held long: run such work on a thread of its own and await it, as below. A future that
/// blocks holds the call past its deadline for as long as it blocks (its reply is then
/// late, and the policy settles the call), and on a current-thread runtime every other
/// task waits too.
///
/// ```no_run
/// use ahp_host::{BoxFuture, Interceptor, Options, Transport, TransportError};
/// use ahp_host::{TransportReply, TransportRequest};
/// use std::sync::Arc;
///
/// /// A policy engine in the harness's own process.
/// struct InProcess;
///
/// /// The engine's decision: CPU work, synchronous.
/// fn decide(message: &[u8]) -> Result<TransportReply, TransportError> {
///     let _ = message;
///     Err(TransportError::ConnectionRefused)
/// }
///
/// impl Transport for InProcess {
///     fn exchange<'a>(
///         &'a self,
///         request: TransportRequest<'a>,
///     ) -> BoxFuture<'a, Result<TransportReply, TransportError>> {
///         let message = request.message.to_vec();
///         Box::pin(async move {
///             // On a thread of its own: the host stops waiting at `request.deadline`.
///             let decided = tokio::task::spawn_blocking(move || decide(&message)).await;
///             decided.map_err(|_| TransportError::ConnectionLost)?
///         })
///     }
/// }
///
/// # async fn build(registration: &str) -> Result<(), ahp_host::Error> {
/// let mut options = Options::default();
/// let engine: Arc<dyn Transport> = Arc::new(InProcess);
/// options.transports.insert("com.example.policy".into(), engine);
/// let interceptor = Interceptor::new(registration, options).await?;
/// # Ok(()) }
/// ```
pub trait Transport: Send + Sync {
    /// Carries `request.message` to the backend and returns its reply.
    fn exchange<'a>(
        &'a self,
        request: TransportRequest<'a>,
    ) -> BoxFuture<'a, Result<TransportReply, TransportError>>;
}

impl fmt::Debug for dyn Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Transport")
    }
}

/// One exchange through `transport`, bounded by `deadline` whatever the transport does
/// between its polls (one that blocks the thread is not cut off: [`Transport`]).
/// A transport that panics has ended abnormally, as a backend process that died would:
/// `abnormal-exit`, not retried, settled under the policy ([`crate::caught`]); one that
/// panics only as it is dropped at the deadline is caught there, and its exchange is the
/// deadline's failure. Its reply is held to `max_body` as [`capped`] says.
pub(crate) async fn exchange(
    transport: &dyn Transport,
    request: TransportRequest<'_>,
    max_body: usize,
) -> Result<Reply, DeliveryError> {
    let deadline = tokio::time::Instant::from_std(request.deadline);
    let exchanged = crate::caught::caught(|| transport.exchange(request));
    match tokio::time::timeout_at(deadline, exchanged).await {
        Ok(Ok(Ok(reply))) => capped(reply, max_body),
        Ok(Ok(Err(e))) => Err(to_wit(e)),
        Ok(Err(())) => {
            tracing::error!("an injected transport panicked");
            Err(DeliveryError::AbnormalExit(None))
        }
        Err(_) => Err(DeliveryError::DeadlineExceeded(IoPhase::AwaitResponse)),
    }
}

/// `reply` held to `max_body` bytes as the built-in HTTP transport holds one: an answer
/// (a 200, or a reply with no status, whose body is the whole answer) with a longer body
/// is `response-too-large`; any other status stands, its body (read only for the audit's
/// diagnostics) cut at `max_body`, so that a 503 is still retried and a 401 still has the
/// credential acquired again. The media type is held to `max_body` on its own (a header
/// over HTTP, which hyper bounds): copied into the component, either could exhaust its
/// memory, an engine failure that no fail-open policy would settle.
fn capped(reply: TransportReply, max_body: usize) -> Result<Reply, DeliveryError> {
    let answer = matches!(reply.status, None | Some(200));
    let media_type = reply.content_type.as_ref().map_or(0, String::len);
    if media_type > max_body || (answer && reply.body.len() > max_body) {
        return Err(DeliveryError::ResponseTooLarge);
    }
    let mut body = reply.body;
    body.truncate(max_body);
    Ok(Reply {
        status: reply.status,
        content_type: reply.content_type,
        body,
    })
}

fn to_wit(error: TransportError) -> DeliveryError {
    match error {
        TransportError::DeadlineExceeded => DeliveryError::DeadlineExceeded(IoPhase::AwaitResponse),
        TransportError::Cancelled => DeliveryError::Cancelled,
        TransportError::ConnectionRefused => DeliveryError::ConnectionRefused,
        TransportError::UnresolvedHost => DeliveryError::UnresolvedHost,
        TransportError::ConnectionReset => DeliveryError::ConnectionReset,
        TransportError::ConnectionLost => DeliveryError::ConnectionLost,
        TransportError::LaunchFailed => DeliveryError::LaunchFailed,
        TransportError::AbnormalExit(status) => DeliveryError::AbnormalExit(status),
        TransportError::TlsFailed => DeliveryError::TlsFailed,
        TransportError::Malformed => DeliveryError::MalformedFraming,
        TransportError::ResponseTooLarge => DeliveryError::ResponseTooLarge,
        TransportError::NotPermitted => DeliveryError::NotPermitted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn too_large(status: Option<u16>, media_type: usize, body: usize) -> bool {
        let reply = TransportReply {
            status,
            content_type: Some("x".repeat(media_type)),
            body: vec![b' '; body],
        };
        matches!(capped(reply, 8), Err(DeliveryError::ResponseTooLarge))
    }

    /// An answer without a status is the whole answer, held to the cap as a 200 is; a
    /// media type is held to the cap on its own, whatever the status.
    #[test]
    fn a_status_less_answer_and_a_long_media_type_are_too_large() {
        assert!(too_large(None, 0, 9));
        assert!(!too_large(None, 8, 8));
        assert!(too_large(Some(503), 9, 0));
        assert!(!too_large(Some(503), 8, 9));
    }

    /// Another status's body is cut at the cap: copied into the component, it is held to
    /// it as an answer is.
    #[test]
    fn an_error_statuss_body_is_cut_at_the_cap() {
        let reply = TransportReply {
            status: Some(503),
            content_type: None,
            body: vec![b' '; 9],
        };
        let cut = capped(reply, 8).map(|reply| reply.body.len());
        assert!(matches!(cut, Ok(8)), "{cut:?}");
    }
}
