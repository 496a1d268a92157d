//! HTTP delivery: one JSON-RPC message per POST over a kept-alive HTTP/1.1 connection.
//!
//! Each backend has its own small pool of idle connections. Every phase (DNS, connect,
//! TLS, send, wait for the head, read the body) runs inside the one absolute deadline the
//! component passed in, and the phase the deadline hit is reported. Redirects are never
//! followed (a 3xx is just a non-success status), bodies are capped, plain `http` is
//! allowed only to loopback unless the host configuration says otherwise, and `https` is
//! verified by rustls.

use super::lookup::Lookups;
use super::zone::Zone;
use crate::bindings::delivery::Reply;
use crate::bindings::host_types::{DeliveryError, IoPhase};
use crate::types::Secret;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{
    HeaderValue, ACCEPT_ENCODING, AUTHORIZATION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE,
    HOST, TRANSFER_ENCODING,
};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{sleep_until, timeout_at, Instant, Sleep};
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;

/// Idle connections kept per backend.
const MAX_IDLE: usize = 8;

/// How long a connection may stay idle and still take a request, when the server did not
/// say (undici's default): servers commonly close an idle connection after 5 s (Node.js,
/// uvicorn), and a request written as the server closes it is lost after it went out,
/// which no resend may repair: the call would fail on a healthy backend.
const IDLE_UNSAID: Duration = Duration::from_secs(4);

/// Kept under the idle time a server's `Keep-Alive: timeout=N` names.
const IDLE_MARGIN: Duration = Duration::from_secs(1);

/// The longest a connection stays idle and still takes a request, whatever its server
/// says: a NAT or firewall on the way forgets a quiet connection, and a request sent into
/// one waits out its deadline.
const IDLE_LONGEST: Duration = Duration::from_secs(60);

/// How one backend may be reached.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// The largest response body read; a larger one is `response-too-large`.
    pub max_body_bytes: usize,
    /// Allow plain `http` to non-loopback addresses (local development only; set per
    /// backend).
    pub allow_insecure_http: bool,
    /// TLS settings for `https` backends.
    pub tls: Arc<ClientConfig>,
    /// The innermost zone a connection may reach ([`Zone`]): `Loopback`, anywhere, for
    /// the URLs of the registration; an OAuth token endpoint, which the issuer named,
    /// no further inside than the issuer. Resolved addresses further inside are never
    /// connected to; a name that gives no other is `not-permitted`.
    pub innermost: Zone,
}

/// One request for [`HttpBackend::send`].
#[derive(Clone)]
pub struct Outgoing<'a> {
    pub method: Method,
    pub content_type: Option<&'static str>,
    /// Marked sensitive, so hyper never logs it.
    pub authorization: Option<HeaderValue>,
    pub body: &'a [u8],
}

/// An `Authorization` header value, marked sensitive. A value that is not a valid header
/// (it came from a secret store) is refused rather than sent altered.
pub fn authorization(value: &str) -> Result<HeaderValue, DeliveryError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| DeliveryError::NotPermitted)?;
    value.set_sensitive(true);
    Ok(value)
}

/// What came back from one request.
pub struct Received {
    pub reply: Reply,
    /// The address that answered.
    pub peer: IpAddr,
    /// A 401's `WWW-Authenticate` fields, joined as one list (RFC 9110 §5.3).
    pub challenge: Option<String>,
}

/// One HTTP backend: its parsed URL and its connection pool.
pub struct HttpBackend {
    uri: Uri,
    /// What every request carries, parsed once: the request target (path and query) and
    /// the `Host` header.
    target: Uri,
    authority: HeaderValue,
    host: String,
    tls: bool,
    options: HttpOptions,
    /// Kept-alive connections; `None` once closed (shutdown): none is kept after, so an
    /// exchange that ends late leaves no socket behind.
    idle: Mutex<Option<Vec<Connection>>>,
    /// The host's name lookups, one at a time.
    lookups: Lookups,
}

/// One HTTP/1.1 connection: the request handle, the task driving the socket, and the
/// timer of its exchange's deadline. Dropping it aborts the task and closes the socket,
/// so an exchange abandoned at its deadline or by interruption never leaves a connection
/// waiting for a reply nobody will read.
struct Connection {
    sender: SendRequest<Full<Bytes>>,
    /// Ends with why the connection failed, if it did.
    driver: tokio::task::JoinHandle<Option<hyper::Error>>,
    /// How `driver` ended, once awaited ([`driver_end`]): a finished task's handle cannot
    /// be polled again.
    ended: Option<Option<hyper::Error>>,
    /// The address at the other end: who answers on this connection.
    peer: IpAddr,
    /// What the socket has written: the phase a deadline hit while an exchange waited.
    outflow: Arc<Outflow>,
    /// Stays armed between exchanges and is moved to each new deadline. A fresh timer
    /// per exchange finds tokio's timer wheel empty and wakes the runtime's driver to
    /// re-arm it: an eventfd write and a spurious wake-up per call (another worker's, on a
    /// multi-thread runtime). Moving a pending timer later wakes nothing.
    timer: Pin<Box<Sleep>>,
    /// Past this, idle, it takes no other request ([`idle_limit`]).
    reusable_until: Instant,
}

/// Why a connection's task ended (`None`: cleanly, or it panicked), once it has; kept in
/// `ended`, so that it can be asked again.
async fn driver_end<'e>(
    driver: &mut tokio::task::JoinHandle<Option<hyper::Error>>,
    ended: &'e mut Option<Option<hyper::Error>>,
) -> Option<&'e hyper::Error> {
    if ended.is_none() {
        *ended = Some(driver.await.ok().flatten());
    }
    ended.as_ref().and_then(Option::as_ref)
}

/// What became of a request handed to a connection.
enum Handed<T> {
    /// Its response, or why none came.
    Sent(T),
    /// Nothing: the connection's task ended without taking it. A request handed over as
    /// the task closes its channel can stay in it, never answered, until the connection
    /// is dropped (tokio's channel can keep a message sent as its receiver goes away), so
    /// waiting for its answer would wait out the deadline: the task's end is watched too.
    Orphaned,
}

/// `sending`'s outcome, or [`Handed::Orphaned`] once the connection's task has ended
/// without answering it (everything its channel held when it ended was answered by then).
async fn handed<T>(
    sending: impl Future<Output = T>,
    driver: &mut tokio::task::JoinHandle<Option<hyper::Error>>,
    ended: &mut Option<Option<hyper::Error>>,
) -> Handed<T> {
    let mut sending = std::pin::pin!(sending);
    tokio::select! {
        biased;
        sent = &mut sending => Handed::Sent(sent),
        _ = driver_end(driver, ended) => {
            // Polled outside tokio's task budget: one spent already would make an answered
            // request look unanswered, and it would be sent again.
            let mut once = std::pin::pin!(tokio::task::unconstrained(sending.as_mut()));
            match std::future::poll_fn(|cx| Poll::Ready(once.as_mut().poll(cx))).await {
                Poll::Ready(sent) => Handed::Sent(sent),
                Poll::Pending => Handed::Orphaned,
            }
        }
    }
}

/// `work`, or `None` if `timer` fires first; `work` is polled first, as `timeout_at` does.
async fn within<T>(timer: Pin<&mut Sleep>, work: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        biased;
        done = work => Some(done),
        () = timer => None,
    }
}

impl Connection {
    /// Why a fresh connection's request got no response head (`error`). A TLS 1.3 server
    /// refusing this client says so only now ([`refused_by_tls`]): in the error, or, when
    /// hyper's says only that the connection was not ready to take the request, in the
    /// failure that ended the connection as it came up, waited for until the deadline
    /// (`phase` then).
    async fn fresh_failure(&mut self, error: &hyper::Error, phase: IoPhase) -> DeliveryError {
        if refused_by_tls(error) {
            return DeliveryError::TlsFailed;
        }
        let told = classify(error);
        if !error.is_canceled() || !matches!(told, DeliveryError::ConnectionLost) {
            return told;
        }
        match within(
            self.timer.as_mut(),
            driver_end(&mut self.driver, &mut self.ended),
        )
        .await
        {
            Some(Some(ended)) if refused_by_tls(ended) => DeliveryError::TlsFailed,
            Some(_) => told,
            None => DeliveryError::DeadlineExceeded(phase),
        }
    }

    /// The failure of a fresh connection whose task ended without taking the request
    /// ([`Handed::Orphaned`]): why the task ended, a TLS refusal above all.
    fn orphaned(&self) -> DeliveryError {
        match self.ended.as_ref().and_then(Option::as_ref) {
            Some(ended) if refused_by_tls(ended) => DeliveryError::TlsFailed,
            Some(ended) => classify(ended),
            None => DeliveryError::ConnectionLost,
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl std::fmt::Debug for HttpBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpBackend")
            .field("uri", &format_args!("{}", Shown(&self.uri.to_string())))
            .finish_non_exhaustive()
    }
}

/// A URL as logs and errors show it: without its query or fragment, which may carry a
/// key. A registration refuses user info and a parameter named as a secret
/// (`?api_key=…`), but a key under another name (`?k=…`) cannot be told from a tenant.
pub(crate) struct Shown<'a>(pub &'a str);

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.split_once(['?', '#']) {
            Some((before, _)) => write!(f, "{before}?…"),
            None => f.write_str(self.0),
        }
    }
}

impl HttpBackend {
    /// Prepares a backend for `url`; `Err` names what is wrong with the URL.
    pub fn new(url: &str, options: HttpOptions) -> Result<HttpBackend, String> {
        let uri: Uri = url.parse().map_err(|e| format!("invalid URL: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err("URL scheme must be http or https".into()),
        };
        let host = uri
            .host()
            .ok_or("URL has no host")?
            .trim_matches(['[', ']'])
            .to_string();
        // The authority without user info: `Host` names the server, never a password.
        let host_port = uri
            .authority()
            .map_or("", |a| a.as_str())
            .rsplit('@')
            .next()
            .unwrap_or_default();
        let names_a_port = host_port
            .rsplit_once(']')
            .map_or(host_port, |(_, after)| after)
            .contains(':');
        // A port the URL names but that is no port (`:99999`, `:abc`) is an error: read as
        // none, the scheme's default would send the event to another service.
        let port = match uri.port_u16() {
            Some(port) if port > 0 => port,
            None if !names_a_port => {
                if tls {
                    443
                } else {
                    80
                }
            }
            _ => return Err("URL port must be a number from 1 to 65535".into()),
        };
        // The request target is the URL's path and query; an empty path is `/`, with the
        // query if there is one (`https://policy.example?tenant=a` asks for
        // `/?tenant=a`: `?tenant=a` alone is no request target).
        let target = match uri.path_and_query().map(|p| p.as_str()) {
            None | Some("") => Ok(Uri::from_static("/")),
            Some(query) if query.starts_with('?') => format!("/{query}").parse(),
            Some(path) => path.parse(),
        }
        .map_err(|e| format!("invalid URL path: {e}"))?;
        let authority =
            HeaderValue::from_str(host_port).map_err(|e| format!("invalid URL host: {e}"))?;
        Ok(HttpBackend {
            uri,
            target,
            authority,
            lookups: Lookups::new(&host, port),
            host,
            tls,
            options,
            idle: Mutex::new(Some(Vec::new())),
        })
    }

    /// The host, when this backend is plain `http` to something that is not obviously
    /// loopback (a name other than `localhost`, or a non-loopback address).
    pub fn insecure_host(&self) -> Option<&str> {
        let loopback = self.host.eq_ignore_ascii_case("localhost")
            || self.host.parse::<IpAddr>().is_ok_and(is_loopback);
        (!self.tls && !loopback).then_some(self.host.as_str())
    }

    /// Whether this backend's URL is `https`.
    pub fn is_https(&self) -> bool {
        self.tls
    }

    /// Whether plain `http` may go to a non-loopback address.
    pub fn allows_insecure_http(&self) -> bool {
        self.options.allow_insecure_http
    }

    /// POSTs the JSON `body`, with the bearer token if any, and returns what came back,
    /// all by `deadline`.
    pub async fn exchange(
        &self,
        body: &[u8],
        bearer: Option<&Secret>,
        deadline: Instant,
    ) -> Result<Received, DeliveryError> {
        let authorization = match bearer {
            Some(token) => Some(authorization(&format!("Bearer {}", token.expose()))?),
            None => None,
        };
        let request = Outgoing {
            method: Method::POST,
            content_type: Some("application/json"),
            authorization,
            body,
        };
        self.send(request, deadline).await
    }

    /// Sends one request to this URL and returns what came back, all by `deadline`.
    pub async fn send(
        &self,
        outgoing: Outgoing<'_>,
        deadline: Instant,
    ) -> Result<Received, DeliveryError> {
        let mut request = self.request(outgoing.clone());
        // Connecting is boxed: its state (DNS, TLS) is large, and a kept-alive connection
        // should not pay for moving it with every exchange.
        let (mut connection, mut reused) = match self.take_idle() {
            // A pooled connection that turns out closed is replaced; nothing was sent on it.
            Some(mut connection) => {
                connection.timer.as_mut().reset(deadline);
                match within(connection.timer.as_mut(), connection.sender.ready()).await {
                    Some(Ok(())) => (connection, true),
                    Some(Err(_)) => (Box::pin(self.connect(deadline)).await?, false),
                    None => return Err(DeliveryError::DeadlineExceeded(IoPhase::Connect)),
                }
            }
            None => (Box::pin(self.connect(deadline)).await?, false),
        };
        let response = loop {
            // Connecting or a pooled connection's readiness may finish in the poll in
            // which the deadline passes, and a request handed to the connection goes out
            // at once: nothing is sent past the deadline. The connection stays usable.
            if Instant::now() >= deadline {
                self.put_idle(connection);
                return Err(DeliveryError::DeadlineExceeded(IoPhase::Connect));
            }
            let written_before = connection.outflow.written();
            let sending = connection.sender.try_send_request(request);
            let Connection {
                driver,
                ended,
                timer,
                ..
            } = &mut connection;
            let sent = within(timer.as_mut(), handed(sending, driver, ended))
                .await
                .ok_or_else(|| {
                    DeliveryError::DeadlineExceeded(connection.outflow.phase(written_before))
                })?;
            let sent = match sent {
                Handed::Sent(sent) => sent,
                // Nothing of it went out: on a pooled connection, as one found closed; on
                // a fresh one, the connection's failure.
                Handed::Orphaned if reused => {
                    request = self.request(outgoing.clone());
                    connection = Box::pin(self.connect(deadline)).await?;
                    reused = false;
                    continue;
                }
                Handed::Orphaned => return Err(connection.orphaned()),
            };
            match sent {
                Ok(response) => break response,
                // A pooled connection the server had already closed: the request never left,
                // so sending it on a fresh connection is not a retry of the exchange.
                Err(mut e) if reused => match e.take_message() {
                    Some(unsent) => {
                        request = unsent;
                        connection = Box::pin(self.connect(deadline)).await?;
                        reused = false;
                    }
                    None => return Err(classify(e.error())),
                },
                Err(e) => {
                    let phase = connection.outflow.phase(written_before);
                    return Err(connection.fresh_failure(e.error(), phase).await);
                }
            }
        };
        // A length given twice over (Transfer-Encoding beside Content-Length, or more than
        // one Content-Length) is how responses are split and smuggled, which RFC 9112 §6.3
        // says "ought to be handled as an error": malformed, as Node's parser has it too,
        // not a guess at which length is meant.
        if ambiguous_length(response.headers()) {
            return Err(DeliveryError::MalformedHttp);
        }
        let status = response.status().as_u16();
        // Every request accepts the body as it is (`identity`, chunked at most), so a 200
        // in another coding (gzip) is not an answer to it: its bytes would reach the
        // component as they came, and a backend's deny would be `malformed-utf8`, a
        // fail-open allow.
        if status == 200 && coded(response.headers()) {
            return Err(DeliveryError::MalformedHttp);
        }
        let challenge = (status == 401)
            .then(|| super::www_authenticate::joined(response.headers()))
            .flatten();
        // Bytes past ASCII are allowed in a field value (obs-text, in a quoted parameter):
        // refused, the reply would have had no content type, and a backend's deny would
        // have been a failure, let through by a fail-open policy.
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        // A body declared too large is not read (a chunked one, with no Content-Length
        // beside it, is read and capped).
        let declared = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let too_large = declared.is_some_and(|n| n > self.options.max_body_bytes as u64);
        let idle_limit = idle_limit(response.headers());
        if too_large && status == 200 {
            return Err(DeliveryError::ResponseTooLarge);
        }
        // Any other status settles the call as that status (a 503 is retried, a 401 has
        // the credential acquired again), however its body is framed: the body, read only
        // for the audit's diagnostics, is then left unread or cut at the cap, and the
        // connection with it. But a 202's is read (and cut) whatever it declares: an
        // observe notification's success is a 202 with no body, and one left unread would
        // look like none.
        // Nor does a body cut short, by the peer or by garbled framing, unsettle it: the
        // reply keeps its status and the bytes that came (a 401's token is still dropped,
        // a 503 still retried). Only the deadline ends it first, as any reply.
        let mut body = Vec::new();
        let whole = match too_large && status != 202 {
            true => false,
            false => {
                let reading =
                    read_capped(response.into_body(), self.options.max_body_bytes, &mut body);
                match within(connection.timer.as_mut(), reading).await {
                    None => return Err(DeliveryError::DeadlineExceeded(IoPhase::ReadResponse)),
                    Some(Ok(whole)) => whole,
                    Some(Err(_)) if settled_by_its_status(status) => false,
                    Some(Err(e)) => return Err(e),
                }
            }
        };
        if !whole && status == 200 {
            return Err(DeliveryError::ResponseTooLarge);
        }
        let peer = connection.peer;
        // A reply that came before all of the request went out (the peer stopped reading
        // it, its socket full): the connection takes no other request until the rest is
        // out, which may be never, and the next call would wait out its deadline on it.
        if whole && !connection.outflow.is_blocked() {
            connection.reusable_until = Instant::now() + idle_limit;
            self.put_idle(connection);
        }
        let reply = Reply {
            status: Some(status),
            content_type,
            body,
        };
        Ok(Received {
            reply,
            peer,
            challenge,
        })
    }

    /// The request, from parts checked when the backend was made: nothing is parsed
    /// again per call.
    fn request(&self, outgoing: Outgoing<'_>) -> Request<Full<Bytes>> {
        // A GET without content says no length (RFC 9110 §8.6: strict front ends refuse
        // one); every other request says its own.
        let says_length = outgoing.method != Method::GET || !outgoing.body.is_empty();
        let mut request = Request::new(Full::new(Bytes::copy_from_slice(outgoing.body)));
        *request.method_mut() = outgoing.method;
        *request.uri_mut() = self.target.clone();
        let headers = request.headers_mut();
        headers.insert(HOST, self.authority.clone());
        if says_length {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(outgoing.body.len()));
        }
        if let Some(content_type) = outgoing.content_type {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        }
        if let Some(value) = outgoing.authorization {
            headers.insert(AUTHORIZATION, value);
        }
        // Without it a server may answer in any content coding (RFC 9110 §12.5.3).
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        request
    }

    fn take_idle(&self) -> Option<Connection> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let idle = idle.as_mut()?;
        let now = Instant::now();
        while let Some(connection) = idle.pop() {
            if !connection.sender.is_closed() && now < connection.reusable_until {
                return Some(connection);
            }
        }
        None
    }

    /// Keeps `connection` for reuse, and lets go of the idle ones past reuse: calls take
    /// the newest, so after a burst the older ones would otherwise stay open for as long
    /// as the server keeps them, some never closing an idle connection.
    fn put_idle(&self, connection: Connection) {
        if connection.sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let Some(idle) = idle.as_mut() else {
            return;
        };
        let now = Instant::now();
        idle.retain(|kept| !kept.sender.is_closed() && now < kept.reusable_until);
        if idle.len() < MAX_IDLE {
            idle.push(connection);
        }
    }

    /// Closes every idle connection and keeps none from now on (shutdown).
    pub fn close_idle(&self) {
        *self.idle.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    async fn connect(&self, deadline: Instant) -> Result<Connection, DeliveryError> {
        let connect = async {
            let addrs = self.lookups.resolve(deadline).await?;
            let plain_ok = self.tls || self.options.allow_insecure_http;
            if !plain_ok && !addrs.iter().all(|a| is_loopback(a.ip())) {
                return Err(DeliveryError::NotPermitted);
            }
            let addrs = within_zone(addrs, self.options.innermost)?;
            let (stream, peer) = connect_any(&addrs).await?;
            let _ = stream.set_nodelay(true);
            let outflow = Arc::new(Outflow::default());
            let stream = Metered {
                io: stream,
                outflow: Arc::clone(&outflow),
            };
            if self.tls {
                let name = ServerName::try_from(self.host.clone())
                    .map_err(|_| DeliveryError::NotPermitted)?;
                // Whatever ends the handshake, the request was not sent: a certificate or
                // no common protocol is the TLS failure (not retried), the peer hanging
                // up a refusal (retried like one).
                let tls = TlsConnector::from(self.options.tls.clone())
                    .connect(name, stream)
                    .await
                    .map_err(|e| match e.kind() {
                        std::io::ErrorKind::InvalidData => DeliveryError::TlsFailed,
                        _ => DeliveryError::ConnectionRefused,
                    })?;
                handshake(tls, peer, outflow, deadline).await
            } else {
                handshake(stream, peer, outflow, deadline).await
            }
        };
        timeout_at(deadline, connect)
            .await
            .map_err(|_| DeliveryError::DeadlineExceeded(IoPhase::Connect))?
    }
}

/// Whether plain `http` to `ip` stays on this machine: a loopback address, also one
/// written as an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`), which connects to the
/// same place. Not the unspecified address (`0.0.0.0`), which [`Zone`] counts as loopback
/// for the inner zone but which names no peer to trust in the clear.
fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// The resolved `addrs` a connection may take: those no further inside than `innermost`
/// ([`Zone`]), checked on the addresses themselves, after resolution, so a name that
/// resolves inside the second time (DNS rebinding) reaches nothing there; none left is
/// `not-permitted`. A host with an address of each kind (a global IPv4 and a
/// unique-local IPv6) is reached at the one allowed.
fn within_zone(addrs: Vec<SocketAddr>, innermost: Zone) -> Result<Vec<SocketAddr>, DeliveryError> {
    let allowed: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| Zone::of(a.ip()) >= innermost)
        .collect();
    match allowed.is_empty() {
        true => Err(DeliveryError::NotPermitted),
        false => Ok(allowed),
    }
}

/// How long an attempt to connect to one address has before the next address is tried
/// beside it (RFC 8305 §5's recommended delay): an address that silently drops the
/// connection (a broken IPv6 route, a full backlog) must not take the whole deadline
/// from the addresses after it.
const NEXT_ADDRESS_AFTER: Duration = Duration::from_millis(250);

/// The first address that takes the connection, with that address; the addresses are
/// tried in order, the next one as soon as an attempt fails or after
/// [`NEXT_ADDRESS_AFTER`], the attempts still pending then racing it. Whatever stops a
/// connection being made (refused, no route, the network down) means nothing was sent:
/// `connection-refused`. Dropping the future (the deadline) ends every attempt.
async fn connect_any(addrs: &[SocketAddr]) -> Result<(TcpStream, IpAddr), DeliveryError> {
    let mut untried = addrs.iter().copied();
    let mut attempts = tokio::task::JoinSet::new();
    loop {
        if let Some(addr) = untried.next() {
            attempts.spawn(async move { (TcpStream::connect(addr).await, addr.ip()) });
        }
        let ended = match untried.len() {
            0 => attempts.join_next().await,
            _ => match tokio::time::timeout(NEXT_ADDRESS_AFTER, attempts.join_next()).await {
                Ok(ended) => ended,
                Err(_) => continue,
            },
        };
        match ended {
            Some(Ok((Ok(stream), ip))) => return Ok((stream, ip)),
            // Failed: the next address, at once, or wait for the others still pending.
            Some(_) => continue,
            None => return Err(DeliveryError::ConnectionRefused),
        }
    }
}

async fn handshake<S>(
    io: S,
    peer: IpAddr,
    outflow: Arc<Outflow>,
    deadline: Instant,
) -> Result<Connection, DeliveryError>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| classify(&e))?;
    let driver = tokio::spawn(async move { connection.await.err() });
    Ok(Connection {
        sender,
        driver,
        peer,
        outflow,
        timer: Box::pin(sleep_until(deadline)),
        reusable_until: Instant::now() + IDLE_UNSAID,
        ended: None,
    })
}

/// Whether `headers` give the body a coding the request did not accept, which the HTTP
/// client leaves on its bytes: a content coding but `identity` (it asks for that alone),
/// or a transfer coding but `chunked` (it sends no `TE`: RFC 9110 §10.1.4).
fn coded(headers: &hyper::HeaderMap) -> bool {
    let other_than = |name, plain: &[u8]| {
        headers
            .get_all(name)
            .iter()
            .flat_map(|value| value.as_bytes().split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .any(|coding| !coding.is_empty() && !coding.eq_ignore_ascii_case(plain))
    };
    other_than(CONTENT_ENCODING, b"identity") || other_than(TRANSFER_ENCODING, b"chunked")
}

/// Whether `headers` give the body's length more than once: a Transfer-Encoding with a
/// Content-Length, or Content-Length repeated, as a field or as a list in one field.
fn ambiguous_length(headers: &hyper::HeaderMap) -> bool {
    let mut lengths = headers.get_all(CONTENT_LENGTH).iter();
    let first = lengths.next();
    let repeated = lengths.next().is_some() || first.is_some_and(|v| v.as_bytes().contains(&b','));
    repeated || (first.is_some() && headers.contains_key(TRANSFER_ENCODING))
}

/// How long the connection that brought a response with `headers` may stay idle and
/// still take a request: [`IDLE_MARGIN`] under the `timeout` its server names in
/// `Keep-Alive` (RFC 2068 §19.7.1, which Node.js sends), else [`IDLE_UNSAID`], at most
/// [`IDLE_LONGEST`].
fn idle_limit(headers: &hyper::HeaderMap) -> Duration {
    let said = headers
        .get("keep-alive")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            value.split(',').find_map(|parameter| {
                let (name, seconds) = parameter.split_once('=')?;
                let named = name.trim().eq_ignore_ascii_case("timeout");
                named.then(|| seconds.trim().parse::<u64>().ok()).flatten()
            })
        });
    match said {
        Some(seconds) => Duration::from_secs(seconds).saturating_sub(IDLE_MARGIN),
        None => IDLE_UNSAID,
    }
    .min(IDLE_LONGEST)
}

/// What a connection's socket has written, kept by [`Metered`]: hyper's send future
/// covers both the request going out and the wait for the answer's head, so this tells
/// the two apart when the deadline hits.
#[derive(Default)]
struct Outflow {
    /// Bytes the socket has taken.
    written: AtomicU64,
    /// The socket's last write could take nothing (its buffer full: the peer not reading).
    blocked: AtomicBool,
}

impl Outflow {
    fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    fn is_blocked(&self) -> bool {
        self.blocked.load(Ordering::Relaxed)
    }

    /// The phase of a deadline that hit after `written_before` bytes had been written
    /// when the request was handed over: `send` while the request had not started out
    /// or the socket was refusing the rest of it, `await-response` once all of it went.
    fn phase(&self, written_before: u64) -> IoPhase {
        if self.is_blocked() || self.written() == written_before {
            IoPhase::Send
        } else {
            IoPhase::AwaitResponse
        }
    }

    fn record(&self, write: &Poll<std::io::Result<usize>>) {
        match write {
            Poll::Pending => self.blocked.store(true, Ordering::Relaxed),
            Poll::Ready(Ok(n)) => {
                self.blocked.store(false, Ordering::Relaxed);
                self.written.fetch_add(*n as u64, Ordering::Relaxed);
            }
            Poll::Ready(Err(_)) => {}
        }
    }
}

/// A socket that keeps its [`Outflow`].
struct Metered<S> {
    io: S,
    outflow: Arc<Outflow>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let write = Pin::new(&mut self.io).poll_write(cx, buf);
        self.outflow.record(&write);
        write
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let write = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.outflow.record(&write);
        write
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Reads the body into `out`, up to `cap` bytes: whether that is all of it (`false`: cut
/// at the cap, the rest left unread). On an error, `out` holds what came before it.
async fn read_capped(
    mut body: hyper::body::Incoming,
    cap: usize,
    out: &mut Vec<u8>,
) -> Result<bool, DeliveryError> {
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| classify(&e))?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > cap {
                out.extend_from_slice(&data[..cap - out.len()]);
                return Ok(false);
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(true)
}

/// Whether a reply of `status` is settled by the status alone, its body only the
/// audit's diagnostics: all but a 200 (the decision is in its body) and a 202 (an
/// observe notification's success, which has no body: one cut short could pass for
/// none).
fn settled_by_its_status(status: u16) -> bool {
    status != 200 && status != 202
}

/// Maps a hyper failure onto the WIT classes, by the I/O error underneath when there is one.
fn classify(error: &hyper::Error) -> DeliveryError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io_error(io);
        }
        source = e.source();
    }
    if error.is_parse() {
        DeliveryError::MalformedHttp
    } else {
        DeliveryError::ConnectionLost
    }
}

fn io_error(error: &std::io::Error) -> DeliveryError {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::ConnectionRefused => DeliveryError::ConnectionRefused,
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => DeliveryError::ConnectionReset,
        // hyper's body decoder reports bytes that are not HTTP (a chunk-size line that is
        // not hexadecimal, say) this way: the backend sent them, the connection is fine.
        // rustls reports a TLS failure with the same kinds; that stays a lost connection.
        ErrorKind::InvalidInput | ErrorKind::InvalidData if !is_tls(error) => {
            DeliveryError::MalformedHttp
        }
        _ => DeliveryError::ConnectionLost,
    }
}

/// Whether `error` is a fatal alert by which the peer's TLS layer refuses this client:
/// the TLS failure, which retrying cannot mend. In TLS 1.3 the client's handshake ends
/// before the server has checked the client's certificate, so a server that requires one
/// (this host offers none) refuses only at the client's first read of a fresh
/// connection, the request gone out or not; its application never saw it. Read so only
/// there ([`Connection::fresh_failure`]): on a connection that answered before, or in a
/// body, the request may have reached the backend.
fn refused_by_tls(error: &hyper::Error) -> bool {
    use rustls::AlertDescription as A;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let alert = std::iter::from_fn(|| {
        let current = source?;
        source = current.source();
        Some(current)
    })
    .filter_map(|e| e.downcast_ref::<std::io::Error>())
    .filter_map(|io| io.get_ref()?.downcast_ref::<rustls::Error>())
    .find_map(|tls| match tls {
        rustls::Error::AlertReceived(alert) => Some(*alert),
        _ => None,
    });
    let Some(alert) = alert else {
        return false;
    };
    matches!(
        alert,
        A::CertificateRequired
            | A::BadCertificate
            | A::UnsupportedCertificate
            | A::CertificateRevoked
            | A::CertificateExpired
            | A::CertificateUnknown
            | A::UnknownCA
            | A::AccessDenied
            | A::HandshakeFailure
    )
}

fn is_tls(error: &std::io::Error) -> bool {
    error
        .get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// An address that never answers (a listener whose backlog is full drops the
    /// connection silently) holds the next address back only [`NEXT_ADDRESS_AFTER`];
    /// a refused one, not at all.
    #[tokio::test]
    async fn an_address_that_never_answers_does_not_hold_the_next_one_back() {
        let full = tokio::net::TcpSocket::new_v4().unwrap();
        full.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let full = full.listen(0).unwrap();
        let silent = full.local_addr().unwrap();
        // Fills the backlog: the next connection to it is neither accepted nor refused.
        let _queued = TcpStream::connect(silent).await.unwrap();
        let refused = {
            let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            closed.local_addr().unwrap()
        };
        let open = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let working = open.local_addr().unwrap();

        let started = std::time::Instant::now();
        let bound = Duration::from_secs(3);
        let connected = tokio::time::timeout(bound, connect_any(&[silent, refused, working]))
            .await
            .expect("connected before the bound");
        let (_, peer) = connected.expect("connected");
        assert_eq!(peer, working.ip());
        let took = started.elapsed();
        assert!(took >= NEXT_ADDRESS_AFTER, "{took:?}");
        assert!(took < bound, "{took:?}");
        let alone = tokio::time::timeout(Duration::from_millis(600), connect_any(&[silent])).await;
        assert!(alone.is_err(), "the silent address alone never connects");
        assert!(matches!(
            connect_any(&[refused]).await,
            Err(DeliveryError::ConnectionRefused)
        ));
    }

    /// A loopback server answering every request on one connection with an empty JSON
    /// object; returns its URL and how many requests it has read.
    async fn counting_server() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks", listener.local_addr().unwrap());
        let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&requests);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let counted = Arc::clone(&counted);
                tokio::spawn(async move {
                    let mut buffer = vec![0; 64 * 1024];
                    // Each request is small and arrives in one read.
                    while let Ok(1..) = stream.read(&mut buffer).await {
                        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (url, requests)
    }

    /// A loopback server answering every connection's first read (a request, or its
    /// head) with `answer`, then holding the connection open, reading nothing more;
    /// returns its URL.
    async fn answering_server(answer: impl Into<Vec<u8>>) -> String {
        counted_answering_server(answer).await.0
    }

    /// [`answering_server`], with how many connections it has accepted.
    async fn counted_answering_server(
        answer: impl Into<Vec<u8>>,
    ) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        let answer: Vec<u8> = answer.into();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks", listener.local_addr().unwrap());
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&connections);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let answer = answer.clone();
                tokio::spawn(async move {
                    let mut buffer = vec![0; 64 * 1024];
                    if let Ok(1..) = stream.read(&mut buffer).await {
                        let _ = stream.write_all(&answer).await;
                        // Open, and nothing more read from it.
                        std::future::pending::<()>().await;
                    }
                });
            }
        });
        (url, connections)
    }

    /// A body declared larger than the cap is not read: at 200 the reply is too large,
    /// at another status it is that status (a 503 is retried, a response too large is
    /// not), but a 202's is read up to the cap. A chunked body is read (and capped); one
    /// whose length is given twice over (chunked and a Content-Length, or two
    /// Content-Lengths) is malformed, whichever length would have been believed.
    #[tokio::test]
    async fn a_declared_length_decides_only_where_it_is_the_bodys() {
        let far = || Instant::now() + Duration::from_secs(10);
        let huge = "content-length: 999999999\r\n";
        let ok = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{huge}\r\n");
        let unavailable = format!("HTTP/1.1 503 Service Unavailable\r\n{huge}\r\n");
        let accepted = format!("HTTP/1.1 202 Accepted\r\n{huge}\r\n{}", " ".repeat(2 << 20));
        let chunked = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                       transfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
        let twice_over = [
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{huge}\
                 transfer-encoding: chunked\r\n\r\n2\r\n{{}}\r\n0\r\n\r\n"
            ),
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\
             content-length: 2\r\n\r\n{}"
                .to_string(),
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2, 2\r\n\r\n{}"
                .to_string(),
        ];

        let backend = loopback_backend(&answering_server(ok).await);
        let received = backend.exchange(b"{}", None, far()).await;
        assert!(
            matches!(received, Err(DeliveryError::ResponseTooLarge)),
            "{:?}",
            received.map(|r| r.reply.status)
        );
        let backend = loopback_backend(&answering_server(unavailable).await);
        let received = backend.exchange(b"{}", None, far()).await.expect("a reply");
        assert_eq!(
            (received.reply.status, received.reply.body.len()),
            (Some(503), 0)
        );
        // Not an observe notification's success, which has no body: read up to the cap.
        let backend = loopback_backend(&answering_server(accepted).await);
        let received = backend.exchange(b"{}", None, far()).await.expect("a reply");
        assert_eq!(
            (received.reply.status, received.reply.body.len()),
            (Some(202), 1 << 20)
        );
        let backend = loopback_backend(&answering_server(chunked.to_string()).await);
        let received = backend.exchange(b"{}", None, far()).await.expect("a reply");
        assert_eq!(
            (received.reply.status, received.reply.body.as_slice()),
            (Some(200), &b"{}"[..])
        );
        for response in twice_over {
            let backend = loopback_backend(&answering_server(response.clone()).await);
            let received = backend.exchange(b"{}", None, far()).await;
            assert!(
                matches!(received, Err(DeliveryError::MalformedHttp)),
                "{response:?}: {:?}",
                received.map(|r| r.reply.status)
            );
        }
    }

    /// A chunked body past the cap is too large at 200 only: at another status the reply
    /// is that status (a 503 is retried, a 401 re-acquires), its body cut at the cap, as
    /// one declared too large is.
    #[tokio::test]
    async fn a_chunked_body_past_the_cap_decides_only_at_200() {
        let far = || Instant::now() + Duration::from_secs(10);
        let chunk = format!("{:x}\r\n{}\r\n", 1 << 20, " ".repeat(1 << 20));
        let chunked = |status: &str| {
            format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                 transfer-encoding: chunked\r\n\r\n{chunk}{chunk}0\r\n\r\n"
            )
        };
        let backend = loopback_backend(&answering_server(chunked("200 OK")).await);
        let received = backend.exchange(b"{}", None, far()).await;
        assert!(
            matches!(received, Err(DeliveryError::ResponseTooLarge)),
            "{:?}",
            received.map(|r| r.reply.status)
        );
        for (status, code) in [("503 Service Unavailable", 503), ("401 Unauthorized", 401)] {
            let backend = loopback_backend(&answering_server(chunked(status)).await);
            let received = backend.exchange(b"{}", None, far()).await.expect("a reply");
            assert_eq!(
                (received.reply.status, received.reply.body.len()),
                (Some(code), 1 << 20)
            );
        }
    }

    /// A reply whose body is cut short (the peer closes before its declared length, or
    /// garbles a chunk) is still the reply its status says where the status settles it:
    /// a 401 (its token dropped and one more acquired) and a 503 (retried) keep their
    /// status and the bytes that came. A 200's or a 202's cut body is the failure.
    #[tokio::test]
    async fn a_body_cut_short_keeps_a_status_that_settles_the_call() {
        let far = || Instant::now() + Duration::from_secs(10);
        // Answers once, then closes the connection.
        let closing_server = |answer: String| async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/hooks", listener.local_addr().unwrap());
            tokio::spawn(async move {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut buffer = vec![0; 64 * 1024];
                if let Ok(1..) = stream.read(&mut buffer).await {
                    let _ = stream.write_all(answer.as_bytes()).await;
                }
            });
            url
        };
        let cut = |status: &str| {
            format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                 content-length: 100\r\n\r\n{{\"er"
            )
        };
        let garbled = |status: &str| {
            format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                 transfer-encoding: chunked\r\n\r\n4\r\n{{\"er\r\nzz\r\n"
            )
        };
        for answer in [cut("401 Unauthorized"), garbled("401 Unauthorized")] {
            let backend = loopback_backend(&closing_server(answer).await);
            let received = backend.exchange(b"{}", None, far()).await.expect("a reply");
            assert_eq!(received.reply.status, Some(401));
            assert_eq!(received.reply.body, b"{\"er");
        }
        let backend = loopback_backend(&closing_server(cut("503 Service Unavailable")).await);
        let received = backend.exchange(b"{}", None, far()).await.expect("a reply");
        assert_eq!(received.reply.status, Some(503));
        // A 200's body is the decision, and a 202's must be empty: cut short, each fails.
        let failed = |answer: String| async move {
            let backend = loopback_backend(&closing_server(answer).await);
            backend.exchange(b"{}", None, far()).await.err()
        };
        let lost = failed(cut("200 OK")).await;
        assert!(
            matches!(lost, Some(DeliveryError::ConnectionLost)),
            "{lost:?}"
        );
        let lost = failed(cut("202 Accepted")).await;
        assert!(
            matches!(lost, Some(DeliveryError::ConnectionLost)),
            "{lost:?}"
        );
        let garbled = failed(garbled("200 OK")).await;
        assert!(
            matches!(garbled, Some(DeliveryError::MalformedHttp)),
            "{garbled:?}"
        );
    }

    /// Plain `http` to a loopback server written as an IPv4-mapped IPv6 address is
    /// connected to, as to `127.0.0.1`: it is the same place. (Where this machine cannot
    /// connect to that address at all, the connection is refused, never `not-permitted`.)
    #[tokio::test]
    async fn plain_http_to_a_mapped_loopback_address_is_sent() {
        let (url, requests) = counting_server().await;
        let mapped = url.replace("127.0.0.1", "[::ffff:127.0.0.1]");
        let port = url.rsplit(':').next().and_then(|p| p.split('/').next());
        let at = format!("[::ffff:127.0.0.1]:{}", port.unwrap());
        let reachable = std::net::TcpStream::connect(at.as_str()).is_ok();
        let far = Instant::now() + Duration::from_secs(10);
        let exchanged = loopback_backend(&mapped).exchange(b"{}", None, far).await;
        match (reachable, exchanged) {
            (true, Ok(received)) => {
                assert_eq!(received.reply.body, b"{}");
                assert_eq!(requests.load(Ordering::SeqCst), 1);
            }
            (false, Err(DeliveryError::ConnectionRefused)) => {}
            (reachable, other) => panic!("reachable: {reachable}, {:?}", other.err()),
        }
    }

    /// A content type holding bytes past ASCII (allowed in a quoted parameter) is kept,
    /// those bytes replaced: dropped, a backend's deny would have been read as a reply
    /// with no content type, a failure.
    #[tokio::test]
    async fn a_content_type_past_ascii_is_kept() {
        let mut answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json; x=\"caf".to_vec();
        answer.extend_from_slice(b"\xe9\"\r\ncontent-length: 2\r\n\r\n{}");
        let backend = loopback_backend(&answering_server(answer).await);
        let far = Instant::now() + Duration::from_secs(10);
        let received = backend.exchange(b"{}", None, far).await.expect("a reply");
        assert_eq!(
            received.reply.content_type.as_deref(),
            Some("application/json; x=\"caf\u{fffd}\"")
        );
    }

    /// A request handed to a pooled connection whose task ended without taking it (it
    /// stays in the task's channel, never answered: what a connection closing as the
    /// request is queued can leave) is sent on a fresh connection at once, not left to
    /// wait out its deadline (before, `DeadlineExceeded(Send)` at the deadline).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_its_connection_never_took_does_not_wait_out_its_deadline() {
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        let backend = loopback_backend(&answering_server(answer.to_string()).await);
        let (ours, _theirs) = tokio::io::duplex(1024);
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(ours))
            .await
            .unwrap();
        // The task polls its connection once, then ends with its channel open and unread.
        let driver = tokio::spawn(async move {
            let mut connection = Box::pin(connection);
            std::future::poll_fn(|cx| {
                let _ = connection.as_mut().poll(cx);
                Poll::Ready(())
            })
            .await;
            std::mem::forget(connection);
            None
        });
        while !driver.is_finished() {
            tokio::task::yield_now().await;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let orphaning = |driver| Connection {
            sender,
            driver,
            ended: None,
            peer: IpAddr::from([127, 0, 0, 1]),
            outflow: Arc::default(),
            timer: Box::pin(sleep_until(deadline)),
            reusable_until: Instant::now() + Duration::from_secs(60),
        };
        backend.put_idle(orphaning(driver));
        let started = Instant::now();
        let received = backend.exchange(b"{}", None, deadline).await;
        assert_eq!(received.expect("a reply").reply.body, b"{}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }

    /// A server that answers as soon as it has a request's head, then stops reading what
    /// is left of it (a body larger than the socket's buffers can hold): the connection
    /// cannot take another request before that rest is out, which is never, so it is not
    /// kept for the next call, which would wait out its whole deadline on it.
    #[tokio::test]
    async fn a_connection_answered_before_its_request_was_sent_is_not_kept() {
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        let backend = loopback_backend(&answering_server(answer.to_string()).await);
        let large = vec![b' '; 64 << 20];
        let far = Instant::now() + Duration::from_secs(10);
        let first = backend
            .exchange(&large, None, far)
            .await
            .expect("an early reply");
        assert_eq!(first.reply.body, b"{}");
        let soon = Instant::now() + Duration::from_secs(3);
        let second = backend.exchange(b"{}", None, soon).await;
        assert!(second.is_ok(), "{:?}", second.err());
    }

    /// A connection is reused only while its server still keeps it: a second under the
    /// idle time its `Keep-Alive` names, else 4 s, at most a minute. Here the server
    /// answers one request per connection, says it keeps connections 2 s, and never
    /// answers a second request on one: the call right after the first is sent on the
    /// same connection and waits out its deadline, a call 1.2 s later is sent on a new
    /// connection and answered.
    #[tokio::test]
    async fn a_connection_its_server_may_have_closed_takes_no_request() {
        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                      keep-alive: timeout=2\r\ncontent-length: 2\r\n\r\n{}";
        let (url, connections) = counted_answering_server(answer).await;
        let backend = loopback_backend(&url);
        let soon = || Instant::now() + Duration::from_millis(500);
        backend
            .exchange(b"{}", None, soon())
            .await
            .expect("answered");
        let reused = backend.exchange(b"{}", None, soon()).await;
        assert!(
            matches!(reused, Err(DeliveryError::DeadlineExceeded(_))),
            "the kept connection was reused: {:?}",
            reused.map(|r| r.reply.status)
        );
        assert_eq!(connections.load(Ordering::SeqCst), 1);
        backend
            .exchange(b"{}", None, soon())
            .await
            .expect("answered");
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let later = backend.exchange(b"{}", None, soon()).await;
        assert!(later.is_ok(), "{:?}", later.err());
        assert_eq!(connections.load(Ordering::SeqCst), 3);
    }

    /// After a burst, calls reuse the newest idle connection; the older ones are let go
    /// once past reuse, not kept open for as long as the server would keep them (this
    /// one never closes an idle connection). Counts the connections still open on the
    /// server's side.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_connections_past_reuse_are_let_go_after_a_burst() {
        let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                       keep-alive: timeout=2\r\ncontent-length: 2\r\n\r\n{}";
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks", listener.local_addr().unwrap());
        let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (counted, all) = (Arc::clone(&open), Arc::clone(&accepted));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                all.fetch_add(1, Ordering::SeqCst);
                let (counted, all) = (Arc::clone(&counted), Arc::clone(&all));
                tokio::spawn(async move {
                    let mut buffer = vec![0; 64 * 1024];
                    // One read is one request here (small, written at once). None is
                    // answered before the burst's connections are all open (or 2 s), so
                    // that its calls overlap however late a task is scheduled.
                    let burst = Instant::now() + Duration::from_secs(2);
                    while let Ok(1..) = stream.read(&mut buffer).await {
                        while all.load(Ordering::SeqCst) < MAX_IDLE && Instant::now() < burst {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        if stream.write_all(answer).await.is_err() {
                            break;
                        }
                    }
                    counted.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        let backend = Arc::new(loopback_backend(&url));
        let soon = || Instant::now() + Duration::from_secs(2);
        let mut burst = tokio::task::JoinSet::new();
        for _ in 0..MAX_IDLE {
            let (backend, deadline) = (Arc::clone(&backend), soon());
            burst.spawn(async move { backend.exchange(b"{}", None, deadline).await.map(drop) });
        }
        while let Some(answered) = burst.join_next().await {
            answered.unwrap().expect("answered");
        }
        assert_eq!(open.load(Ordering::SeqCst), MAX_IDLE);
        // Reusable for 1 s (the server's 2 s less one); one call every 300 ms keeps the
        // newest in use while the others pass that.
        for _ in 0..7 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            backend
                .exchange(b"{}", None, soon())
                .await
                .expect("answered");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(open.load(Ordering::SeqCst), 1);
    }

    /// A GET without content (protected resource or issuer metadata) says no length; a
    /// POST says its own, even an empty one.
    #[test]
    fn only_a_request_with_content_or_a_post_says_its_length() {
        let backend = loopback_backend("http://127.0.0.1:9/hooks");
        let length = |method: Method, body: &'static [u8]| {
            let outgoing = Outgoing {
                method,
                content_type: None,
                authorization: None,
                body,
            };
            let request = backend.request(outgoing);
            request.headers().get(CONTENT_LENGTH).cloned()
        };
        assert_eq!(length(Method::GET, b""), None);
        assert_eq!(length(Method::POST, b""), Some(HeaderValue::from(0)));
        assert_eq!(length(Method::POST, b"{}"), Some(HeaderValue::from(2)));
    }

    #[test]
    fn the_idle_limit_stays_under_what_the_server_says() {
        let limit = |value: Option<&str>| {
            let mut headers = hyper::HeaderMap::new();
            if let Some(value) = value {
                headers.insert("keep-alive", HeaderValue::from_str(value).unwrap());
            }
            idle_limit(&headers).as_secs()
        };
        assert_eq!(limit(None), 4);
        assert_eq!(limit(Some("timeout=5")), 4);
        assert_eq!(limit(Some("max=100, Timeout = 3")), 2);
        assert_eq!(limit(Some("timeout=1")), 0);
        assert_eq!(limit(Some("timeout=0")), 0);
        assert_eq!(limit(Some("timeout=600, max=5")), 60);
        assert_eq!(limit(Some("timeout=soon")), 4);
        assert_eq!(limit(Some("max=5")), 4);
    }

    /// A backend with the options of a registration's URL.
    fn loopback_backend(url: &str) -> HttpBackend {
        let options = HttpOptions {
            max_body_bytes: 1 << 20,
            allow_insecure_http: false,
            tls: Arc::new(crate::tls::client_config(None).unwrap()),
            innermost: Zone::Loopback,
        };
        HttpBackend::new(url, options).unwrap()
    }

    /// A port that is no port is refused, never read as the scheme's default; `Host` is
    /// the authority without its user info; the request target is the path and query,
    /// `/` for an empty path (with the query of a URL that has one).
    #[test]
    fn a_url_names_a_real_port_and_its_host_header_no_password() {
        let options = || HttpOptions {
            max_body_bytes: 1 << 20,
            allow_insecure_http: false,
            tls: Arc::new(crate::tls::client_config(None).unwrap()),
            innermost: Zone::Loopback,
        };
        for url in [
            "http://127.0.0.1:99999/p",
            "http://127.0.0.1:0/p",
            "http://127.0.0.1:abc/p",
            "http://127.0.0.1:/p",
            "https://[::1]:65536/p",
        ] {
            let error = HttpBackend::new(url, options()).err();
            assert_eq!(
                error.as_deref(),
                Some("URL port must be a number from 1 to 65535"),
                "{url}"
            );
        }
        for (url, port, host, target) in [
            (
                "https://u:s3cret@policy.example/p",
                443,
                "policy.example",
                "/p",
            ),
            ("http://[::1]/p", 80, "[::1]", "/p"),
            ("https://[::1]:8443/p", 8443, "[::1]:8443", "/p"),
            ("http://127.0.0.1:65535", 65535, "127.0.0.1:65535", "/"),
            (
                "https://policy.example?tenant=a",
                443,
                "policy.example",
                "/?tenant=a",
            ),
            (
                "https://policy.example/?t=a",
                443,
                "policy.example",
                "/?t=a",
            ),
            (
                "https://policy.example/v1/hooks?t=a",
                443,
                "policy.example",
                "/v1/hooks?t=a",
            ),
        ] {
            let backend = HttpBackend::new(url, options()).expect(url);
            assert_eq!(
                (
                    backend.lookups.port(),
                    backend.authority.to_str().unwrap(),
                    backend.target.to_string().as_str()
                ),
                (port, host, target),
                "{url}"
            );
        }
    }

    /// Once closed (shutdown), a backend keeps no connection: one an exchange finishes
    /// with afterwards is closed, not left open in the pool.
    #[tokio::test]
    async fn a_closed_backend_keeps_no_connection() {
        let (url, _) = counting_server().await;
        let backend = loopback_backend(&url);
        let far = Instant::now() + Duration::from_secs(10);
        backend.exchange(b"{}", None, far).await.expect("a reply");
        assert_eq!(backend.idle.lock().unwrap().as_ref().map(Vec::len), Some(1));
        backend.close_idle();
        backend.exchange(b"{}", None, far).await.expect("a reply");
        assert!(backend.idle.lock().unwrap().is_none());
    }

    /// A pooled connection is ready at once even when the deadline has passed: the
    /// request is not handed to it, and the failure is the connect phase's.
    #[tokio::test]
    async fn a_deadline_passed_before_the_send_sends_nothing() {
        let (url, requests) = counting_server().await;
        let backend = loopback_backend(&url);
        let far = Instant::now() + Duration::from_secs(10);
        let first = backend.exchange(b"{}", None, far).await.expect("a reply");
        assert_eq!(first.reply.body, b"{}");

        let late = backend.exchange(b"{}", None, Instant::now()).await;
        assert!(
            matches!(late, Err(DeliveryError::DeadlineExceeded(IoPhase::Connect))),
            "{:?}",
            late.err()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
        // The connection was kept, unused: the next exchange goes out on it.
        backend.exchange(b"{}", None, far).await.expect("a reply");
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    /// A loopback peer that takes connections and, if `reads`, reads everything sent
    /// without ever answering; otherwise reads nothing at all.
    async fn silent_peer(reads: bool) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut stream, _)) = listener.accept().await {
                if reads {
                    tokio::spawn(async move {
                        let mut sink = tokio::io::sink();
                        let _ = tokio::io::copy(&mut stream, &mut sink).await;
                    });
                } else {
                    held.push(stream);
                }
            }
        });
        url
    }

    /// The deadline of an exchange is reported in the phase it hit: `send` while a peer
    /// that reads nothing leaves the request unsent (more than the sockets' buffers hold),
    /// `await-response` once the request went out and no answer came.
    #[tokio::test]
    async fn a_deadline_names_whether_the_request_was_still_going_out() {
        let request = vec![b' '; 64 << 20];
        for (reads, phase) in [(false, IoPhase::Send), (true, IoPhase::AwaitResponse)] {
            let backend = loopback_backend(&silent_peer(reads).await);
            let deadline = Instant::now() + Duration::from_millis(1500);
            let outcome = backend.exchange(&request, None, deadline).await;
            match outcome {
                Err(DeliveryError::DeadlineExceeded(hit)) => assert_eq!(hit, phase),
                other => panic!("reads {reads}: {:?}", other.err()),
            }
        }
    }

    /// Plain `http` is taken for staying on this machine only to a loopback address,
    /// however it is written (IPv4-mapped too), never to the unspecified address.
    #[test]
    fn plain_http_is_loopback_only_to_a_loopback_address() {
        let insecure = |url: &str| loopback_backend(url).insecure_host().map(str::to_owned);
        for url in [
            "http://127.0.0.1:9/h",
            "http://127.8.9.1:9/h",
            "http://[::1]:9/h",
            "http://[::ffff:127.0.0.1]:9/h",
            "http://LocalHost:9/h",
        ] {
            assert_eq!(insecure(url), None, "{url}");
        }
        for (url, host) in [
            ("http://0.0.0.0:9/h", "0.0.0.0"),
            ("http://[::]:9/h", "::"),
            ("http://[::ffff:10.0.0.1]:9/h", "::ffff:10.0.0.1"),
            ("http://10.0.0.1:9/h", "10.0.0.1"),
            ("http://policy.example:9/h", "policy.example"),
        ] {
            assert_eq!(insecure(url).as_deref(), Some(host), "{url}");
        }
        assert_eq!(insecure("https://10.0.0.1:9/h"), None);
    }

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    /// Addresses further inside than allowed are never connected to; the rest of the
    /// name's addresses still are, and a name with none left is refused.
    #[test]
    fn only_addresses_within_the_zone_are_connected_to() {
        let mixed = addrs(&[
            "[fd00::5]:443",
            "8.8.8.8:443",
            "10.0.0.7:443",
            "127.0.0.1:443",
        ]);
        let global = within_zone(mixed.clone(), Zone::Global).unwrap();
        assert_eq!(global, addrs(&["8.8.8.8:443"]));
        let private = within_zone(mixed.clone(), Zone::Private).unwrap();
        assert_eq!(
            private,
            addrs(&["[fd00::5]:443", "8.8.8.8:443", "10.0.0.7:443"])
        );
        assert_eq!(within_zone(mixed.clone(), Zone::Loopback).unwrap(), mixed);
        let inside = addrs(&["10.0.0.7:443", "[::]:443", "0.0.0.0:443"]);
        assert!(matches!(
            within_zone(inside, Zone::Global),
            Err(DeliveryError::NotPermitted)
        ));
    }
}
