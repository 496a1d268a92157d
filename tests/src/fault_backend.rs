//! A loopback HTTP/1.1 policy backend that misbehaves on demand.
//!
//! The harness must classify every way an AHP backend can fail (digest §7, §9): refused
//! connections, resets, silent peers, slow bodies, non-200 statuses, malformed JSON-RPC.
//! A real HTTP server library would refuse to produce most of these, so this one is plain
//! tokio TCP with a hand-written minimal parser: each request gets the next [`Behaviour`]
//! of a script, and the backend records every request *before* acting on it, so a test
//! can prove a request was sent even when the reply is a reset.
//!
//! ```no_run
//! # async fn demo() {
//! use ahp_tests::fault_backend::{Behaviour, FaultBackend};
//! let backend = FaultBackend::start(vec![Behaviour::Reset, Behaviour::NoEffect]).await;
//! // point the harness at backend.url(); the first attempt is reset, the retry succeeds
//! assert!(backend.wait_for_requests(2, std::time::Duration::from_secs(5)).await);
//! # }
//! ```
//!
//! Limits, on purpose: requests must carry `Content-Length` (a chunked request drops the
//! connection and logs why), and heads are capped at 64 KiB.

use std::future::pending;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// Largest request head the backend accepts before dropping the connection.
const MAX_HEAD: usize = 64 * 1024;

/// What the backend does with one request.
#[derive(Clone, Debug)]
pub enum Behaviour {
    /// 200 `application/json`, `{"jsonrpc":"2.0","id":<echoed id>,"result":
    /// {"protocolVersion":"draft","effects":[]}}`.
    NoEffect,
    /// Like [`Behaviour::NoEffect`] with effects `[{"type":"deny","reason":<reason>}]`.
    Deny(String),
    /// 200 `application/json`, result `{"protocolVersion":"draft","effects":<value>}`.
    Effects(Value),
    /// Any status, optional content type and body. Every `$ID$` in the body becomes the
    /// request's JSON-RPC id serialized as JSON, e.g. `"evt_1"` (quotes included) or `7`.
    Reply {
        /// HTTP status code.
        status: u16,
        /// `Content-Type` header value; `None` sends no such header.
        content_type: Option<String>,
        /// Body template.
        body: Vec<u8>,
    },
    /// Writes these exact bytes after reading the request, then closes: malformed HTTP.
    RawThenClose(Vec<u8>),
    /// Reads the request and never answers; the socket stays open until the backend drops.
    Blackhole,
    /// Accepts the connection but never reads from it. Decided when a connection is
    /// accepted; if the slot instead falls to a request on a reused keep-alive connection,
    /// that request has already been read, so it acts as [`Behaviour::Blackhole`].
    AcceptNoRead,
    /// Reads the request, then resets the connection (`SO_LINGER` 0, then close: RST).
    Reset,
    /// Sends part of `inner`'s response, waits for it to be taken, then resets the
    /// connection as [`Behaviour::Reset`] does: a reset mid-response. `inner` must produce
    /// a response, as for [`Behaviour::Trickle`].
    ResetMidResponse {
        /// The response cut short.
        inner: Box<Behaviour>,
        /// Where it is cut.
        cut: Cut,
    },
    /// Reads the request, then closes cleanly without answering (FIN).
    Close,
    /// Waits, then behaves as the inner behaviour.
    Delay(Duration, Box<Behaviour>),
    /// Sends the head of `inner`'s response at once (with the right `Content-Length`),
    /// then the body one byte per `every`. `inner` must produce a response: `NoEffect`,
    /// `Deny`, `Effects`, `Reply` or `Oversized`.
    Trickle {
        /// Pause before each body byte.
        every: Duration,
        /// The response to trickle.
        inner: Box<Behaviour>,
    },
    /// A 200 whose body is exactly this many bytes: leading spaces, then a valid
    /// [`Behaviour::NoEffect`] JSON (just the JSON if that is already longer). For
    /// response-size caps: the body is valid, only its size is wrong.
    Oversized(usize),
}

/// How much of a response [`Behaviour::ResetMidResponse`] sends before the reset.
#[derive(Clone, Copy, Debug)]
pub enum Cut {
    /// The first this many bytes of the head, and never all of it: the status line and
    /// some headers, say.
    InHead(usize),
    /// The whole head (with the full `Content-Length`) and the body but its last this
    /// many bytes.
    BodyShortBy(usize),
}

/// How long [`Behaviour::ResetMidResponse`] waits between its last byte and the reset, so
/// that the bytes reach the client before the RST (which discards what is still unsent).
const BEFORE_RESET: Duration = Duration::from_millis(50);

impl Behaviour {
    /// HTTP 401 with a JSON-RPC error body: the backend refuses the credential.
    pub fn unauthorized() -> Behaviour {
        Behaviour::Reply {
            status: 401,
            content_type: Some("application/json".into()),
            body:
                br#"{"jsonrpc":"2.0","id":$ID$,"error":{"code":-32001,"message":"unauthorized"}}"#
                    .to_vec(),
        }
    }
}

/// One request the backend fully received.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Request method, e.g. `POST`.
    pub method: String,
    /// Request target, e.g. `/hooks`.
    pub path: String,
    /// Headers in arrival order, names lowercased, duplicates kept.
    pub headers: Vec<(String, String)>,
    /// The body, exactly as received.
    pub body: Vec<u8>,
    /// When the last byte of the request arrived.
    pub at: Instant,
}

impl Recorded {
    /// Every value of header `name` (case-insensitive), in arrival order.
    pub fn header_values(&self, name: &str) -> Vec<&str> {
        header_values(&self.headers, name).collect()
    }

    /// The body parsed as JSON. Panics if it is not JSON: this is for test assertions.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("recorded request body is not JSON: {e}"))
    }
}

/// A running backend on `127.0.0.1`. Dropping it stops the server and every connection.
pub struct FaultBackend {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl FaultBackend {
    /// Binds `127.0.0.1:0` and serves `script`: the i-th request (counting requests and
    /// [`Behaviour::AcceptNoRead`] connections) gets `script[min(i, len - 1)]`.
    ///
    /// Panics on an empty script or a `Trickle` wrapping a behaviour without a response,
    /// so a mistaken script fails its test loudly instead of looking like a network fault.
    pub async fn start(script: Vec<Behaviour>) -> FaultBackend {
        assert!(
            !script.is_empty(),
            "a FaultBackend needs at least one behaviour"
        );
        script.iter().for_each(check_trickles);
        FaultBackend::serve(Script::Sequence(script)).await
    }

    /// Binds `127.0.0.1:0` and answers each request as `choose` says from its JSON body
    /// (e.g. by event id): for concurrent calls, whose requests arrive in no fixed order.
    /// [`Behaviour::AcceptNoRead`] is decided before any request is read, so here it acts
    /// as [`Behaviour::Blackhole`].
    pub async fn choosing(
        choose: impl Fn(&Value) -> Behaviour + Send + Sync + 'static,
    ) -> FaultBackend {
        FaultBackend::serve(Script::PerRequest(Box::new(choose))).await
    }

    async fn serve(script: Script) -> FaultBackend {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener
            .local_addr()
            .expect("local address of the listener");
        let shared = Arc::new(Shared {
            script,
            state: Mutex::default(),
            received: watch::Sender::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        FaultBackend {
            addr,
            shared,
            accept,
        }
    }

    /// The endpoint URL: `http://127.0.0.1:PORT/hooks`.
    pub fn url(&self) -> String {
        format!("http://{}/hooks", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The requests whose JSON-RPC `method` is `method` (e.g. `hooks/intercept`).
    pub fn requests_with_method(&self, method: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.json()["method"] == method)
            .collect()
    }

    /// Every request fully received so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.state().requests.clone()
    }

    /// TCP connections accepted so far; lets tests assert keep-alive reuse.
    pub fn connections(&self) -> usize {
        self.shared.state().connections
    }

    /// TCP connections accepted and not yet ended: a client's pooled connection shows
    /// here until the client closes it.
    pub fn open_connections(&self) -> usize {
        let state = self.shared.state();
        state.connections - state.closed
    }

    /// Waits until at least `n` requests were received; false if `within` ran out first.
    pub async fn wait_for_requests(&self, n: usize, within: Duration) -> bool {
        let mut received = self.shared.received.subscribe();
        tokio::time::timeout(within, received.wait_for(|&count| count >= n))
            .await
            .is_ok_and(|waited| waited.is_ok())
    }
}

impl Drop for FaultBackend {
    /// Aborting the accept task drops its `JoinSet`, which aborts every connection task.
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// An `http://127.0.0.1:PORT/hooks` URL where nothing listens: connecting is refused.
/// The port stays taken by a socket bound and never listening, one for the whole
/// process (its one descriptor opened at the first call): a port merely freed could be
/// taken by another test's backend, which would then answer the "refused" call.
pub fn refused_url() -> String {
    // Not handed to the processes tests start, from the moment it exists on Linux (a
    // thread forking meanwhile would hand it on otherwise).
    #[cfg(target_os = "linux")]
    const SOCKET_KIND: i32 = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    #[cfg(not(target_os = "linux"))]
    const SOCKET_KIND: i32 = libc::SOCK_STREAM;
    static PORT: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    let port = PORT.get_or_init(|| {
        use std::os::fd::FromRawFd as _;
        // SAFETY: socket(2) takes no memory of ours; its result is checked.
        let fd = unsafe { libc::socket(libc::AF_INET, SOCKET_KIND, 0) };
        assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
        // Where it could not be made so at once. SAFETY: fcntl(2) on the socket alone.
        #[cfg(not(target_os = "linux"))]
        assert_eq!(
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) },
            0,
            "fcntl"
        );
        // SAFETY: a descriptor just returned, owned by nothing else.
        let socket = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let mut address: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        address.sin_family = libc::AF_INET as libc::sa_family_t;
        address.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let size = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let raw = std::ptr::addr_of_mut!(address).cast::<libc::sockaddr>();
        // SAFETY: bind(2) reads `size` bytes of `address`, a valid sockaddr_in.
        assert_eq!(
            unsafe { libc::bind(fd, raw, size) },
            0,
            "bind: {}",
            io::Error::last_os_error()
        );
        let mut length = size;
        // SAFETY: getsockname(2) writes at most `length` bytes into `address`.
        assert_eq!(
            unsafe { libc::getsockname(fd, raw, &mut length) },
            0,
            "getsockname"
        );
        // Kept for the process's life: the port stays taken.
        std::mem::forget(socket);
        u16::from_be(address.sin_port)
    });
    format!("http://127.0.0.1:{port}/hooks")
}

/// What the backend does with each request.
enum Script {
    /// The i-th request gets the i-th behaviour (the last one repeats).
    Sequence(Vec<Behaviour>),
    /// Each request gets what this function says of its JSON body.
    PerRequest(Box<dyn Fn(&Value) -> Behaviour + Send + Sync>),
}

/// State shared by the accept loop, the connection tasks and the test.
struct Shared {
    script: Script,
    state: Mutex<State>,
    /// Number of recorded requests, for [`FaultBackend::wait_for_requests`].
    received: watch::Sender<usize>,
}

#[derive(Default)]
struct State {
    /// Index of the next script slot to hand out.
    next: usize,
    connections: usize,
    /// Connections ended so far, by either side.
    closed: usize,
    requests: Vec<Recorded>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a new connection; true if it takes an `AcceptNoRead` slot and must not be read.
    fn accept(&self) -> bool {
        let mut state = self.state();
        state.connections += 1;
        let Script::Sequence(script) = &self.script else {
            return false;
        };
        let unread = matches!(slot(script, state.next), Behaviour::AcceptNoRead);
        state.next += usize::from(unread);
        unread
    }

    /// Records a request, then hands out the behaviour of its slot.
    fn record(&self, message: &Message) -> Behaviour {
        let mut state = self.state();
        state.requests.push(Recorded {
            method: message.start.first().cloned().unwrap_or_default(),
            path: message.start.get(1).cloned().unwrap_or_default(),
            headers: message.headers.clone(),
            body: message.body.clone(),
            at: Instant::now(),
        });
        self.received.send_replace(state.requests.len());
        state.next += 1;
        match &self.script {
            Script::Sequence(script) => slot(script, state.next - 1).clone(),
            Script::PerRequest(choose) => {
                let body = serde_json::from_slice(&message.body).unwrap_or(Value::Null);
                choose(&body)
            }
        }
    }
}

/// Counts its connection ended when dropped: however `serve` returns.
struct Ended(Arc<Shared>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.state().closed += 1;
    }
}

/// The behaviour of request (or unread connection) number `index`.
fn slot(script: &[Behaviour], index: usize) -> &Behaviour {
    &script[index.min(script.len() - 1)]
}

fn check_trickles(behaviour: &Behaviour) {
    match behaviour {
        Behaviour::Delay(_, inner) => check_trickles(inner),
        Behaviour::Trickle { inner, .. } => assert!(
            response(inner, &Value::Null, false).is_some(),
            "Trickle must wrap NoEffect, Deny, Effects, Reply or Oversized, not {inner:?}"
        ),
        Behaviour::ResetMidResponse { inner, .. } => assert!(
            response(inner, &Value::Null, false).is_some(),
            "ResetMidResponse must wrap NoEffect, Deny, Effects, Reply or Oversized, not {inner:?}"
        ),
        _ => {}
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Trickled bytes must leave one by one, not wait for Nagle.
                    let _ = stream.set_nodelay(true);
                    // Decided here, in accept order, not racing in the spawned tasks.
                    let unread = shared.accept();
                    connections.spawn(serve(stream, shared.clone(), unread));
                }
                Err(e) => {
                    eprintln!("fault_backend: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            // Reap finished connections so the set does not grow for the whole test.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Serves one connection: request after request until EOF, a closing behaviour, or an
/// error (which is logged, since it usually means the test sent something unsupported).
async fn serve(mut stream: TcpStream, shared: Arc<Shared>, unread: bool) {
    let _counted = Ended(shared.clone());
    if unread {
        return pending().await;
    }
    let mut buf = Vec::new();
    loop {
        let message = match read_message(&mut stream, &mut buf).await {
            Ok(Some(message)) => message,
            Ok(None) => return,
            Err(e) => return eprintln!("fault_backend: dropping connection: {e}"),
        };
        let close = header_values(&message.headers, "connection")
            .flat_map(|v| v.split(','))
            .any(|token| token.trim().eq_ignore_ascii_case("close"));
        let id = rpc_id(&message.body);
        let behaviour = shared.record(&message);
        match act(&mut stream, &behaviour, &id, close).await {
            Ok(true) if !close => {}
            Ok(_) => return,
            Err(e) => return eprintln!("fault_backend: connection ended: {e}"),
        }
    }
}

/// The request's JSON-RPC id, or `null` if the body is not a JSON object with one.
fn rpc_id(body: &[u8]) -> Value {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|request| request.get("id").cloned())
        .unwrap_or(Value::Null)
}

/// Carries out one behaviour; `Ok(true)` if the connection may serve another request.
/// `close` (the client sent `Connection: close`) is echoed in the response head.
async fn act(
    stream: &mut TcpStream,
    behaviour: &Behaviour,
    id: &Value,
    close: bool,
) -> io::Result<bool> {
    match behaviour {
        Behaviour::Delay(delay, inner) => {
            tokio::time::sleep(*delay).await;
            Box::pin(act(stream, inner, id, close)).await
        }
        Behaviour::Trickle { every, inner } => {
            let (head, body) = response(inner, id, close)
                .ok_or_else(|| invalid("Trickle wraps a behaviour without a response"))?;
            stream.write_all(&head).await?;
            for byte in body {
                tokio::time::sleep(*every).await;
                stream.write_all(&[byte]).await?;
            }
            Ok(true)
        }
        Behaviour::RawThenClose(bytes) => {
            stream.write_all(bytes).await?;
            stream.shutdown().await?;
            Ok(false)
        }
        Behaviour::Blackhole | Behaviour::AcceptNoRead => pending().await,
        Behaviour::Reset => {
            // With a zero linger, closing the socket (when `serve` returns) sends RST.
            stream.set_zero_linger()?;
            Ok(false)
        }
        Behaviour::Close => {
            stream.shutdown().await?;
            Ok(false)
        }
        Behaviour::ResetMidResponse { inner, cut } => {
            let (head, body) = response(inner, id, close)
                .ok_or_else(|| invalid("ResetMidResponse wraps a behaviour without a response"))?;
            let sent = match *cut {
                Cut::InHead(n) => head[..n.min(head.len() - 1)].to_vec(),
                Cut::BodyShortBy(n) => [&head[..], &body[..body.len().saturating_sub(n)]].concat(),
            };
            stream.write_all(&sent).await?;
            stream.flush().await?;
            tokio::time::sleep(BEFORE_RESET).await;
            stream.set_zero_linger()?;
            Ok(false)
        }
        other => {
            let (head, body) =
                response(other, id, close).ok_or_else(|| invalid("behaviour has no response"))?;
            stream.write_all(&head).await?;
            stream.write_all(&body).await?;
            Ok(true)
        }
    }
}

/// Head and body of the HTTP response a behaviour sends, if it sends one at all.
fn response(behaviour: &Behaviour, id: &Value, close: bool) -> Option<(Vec<u8>, Vec<u8>)> {
    let json = "application/json";
    let (status, content_type, body) = match behaviour {
        Behaviour::NoEffect => (200, Some(json), rpc_result(id, &Value::Array(Vec::new()))),
        Behaviour::Deny(reason) => {
            let effects = serde_json::json!([{ "type": "deny", "reason": reason }]);
            (200, Some(json), rpc_result(id, &effects))
        }
        Behaviour::Effects(effects) => (200, Some(json), rpc_result(id, effects)),
        Behaviour::Reply {
            status,
            content_type,
            body,
        } => {
            let id = serde_json::to_vec(id).unwrap_or_default();
            (*status, content_type.as_deref(), replace_id(body, &id))
        }
        Behaviour::Oversized(size) => {
            let valid = rpc_result(id, &Value::Array(Vec::new()));
            let mut body = vec![b' '; size.saturating_sub(valid.len())];
            body.extend_from_slice(&valid);
            (200, Some(json), body)
        }
        _ => return None,
    };
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    if let Some(content_type) = content_type {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    head.push_str(if close {
        "Connection: close\r\n\r\n"
    } else {
        "\r\n"
    });
    Some((head.into_bytes(), body))
}

/// A JSON-RPC success in the field order of the spec's examples (digest §18).
fn rpc_result(id: &Value, effects: &Value) -> Vec<u8> {
    let result = format!(r#"{{"protocolVersion":"draft","effects":{effects}}}"#);
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#).into_bytes()
}

fn replace_id(template: &[u8], id: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = find(rest, b"$ID$") {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(id);
        rest = &rest[at + 4..];
    }
    out.extend_from_slice(rest);
    out
}

/// Clients ignore the reason phrase; a few real ones keep captured traffic readable.
fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        401 => "Unauthorized",
        503 => "Service Unavailable",
        _ => "Scripted",
    }
}

/// One HTTP/1.1 message: start line split in three, headers, `Content-Length` body.
/// Used for requests by the backend and for responses by the tests below.
#[derive(Debug)]
struct Message {
    start: Vec<String>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Reads one message from `stream`; `buf` keeps bytes of the next (pipelined) message.
/// `Ok(None)` is a clean EOF between messages.
async fn read_message(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Option<Message>> {
    let head_end = loop {
        if let Some(at) = find(buf, b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(invalid("message head over 64 KiB"));
        }
        if read_more(stream, buf).await? == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let start = lines.next().unwrap_or_default();
    let start = start.splitn(3, ' ').map(str::to_owned).collect();
    let headers: Vec<(String, String)> = lines
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            (name.trim().to_ascii_lowercase(), value.trim().to_owned())
        })
        .collect();
    if headers.iter().any(|(name, _)| name == "transfer-encoding") {
        return Err(invalid(
            "Transfer-Encoding is unsupported; send Content-Length",
        ));
    }
    let length = header_values(&headers, "content-length")
        .next()
        .unwrap_or("0");
    let length: usize = length.parse().map_err(|_| invalid("bad Content-Length"))?;
    while buf.len() < head_end + length {
        if read_more(stream, buf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    let body = buf[head_end..head_end + length].to_vec();
    buf.drain(..head_end + length);
    Ok(Some(Message {
        start,
        headers,
        body,
    }))
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 8192];
    let n = stream.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n)
}

fn header_values<'a, 'n>(
    headers: &'a [(String, String)],
    name: &'n str,
) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
    headers
        .iter()
        .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A POST to `/hooks` with `body` and extra header lines (each ending in CRLF).
    fn post_body(body: &str, extra_headers: &str) -> Vec<u8> {
        let head = format!("POST /hooks HTTP/1.1\r\nHost: x\r\n{extra_headers}");
        format!("{head}Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    /// A `hooks/intercept` POST whose JSON-RPC id is `id`, written as raw JSON.
    fn post(id: &str, extra_headers: &str) -> Vec<u8> {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"hooks/intercept"}}"#);
        post_body(&body, extra_headers)
    }

    async fn send(backend: &FaultBackend, request: &[u8]) -> TcpStream {
        let mut stream = TcpStream::connect(backend.addr()).await.unwrap();
        stream.write_all(request).await.unwrap();
        stream
    }

    /// Reads one response: its status and the parsed message.
    async fn response_of(stream: &mut TcpStream) -> (u16, Message) {
        let message = read_message(stream, &mut Vec::new()).await.unwrap();
        let message = message.expect("a response before EOF");
        (message.start[1].parse().unwrap(), message)
    }

    fn body_json(message: &Message) -> Value {
        serde_json::from_slice(&message.body).unwrap()
    }

    fn header<'m>(message: &'m Message, name: &str) -> Vec<&'m str> {
        header_values(&message.headers, name).collect()
    }

    /// True if nothing (not even EOF) arrives within 200 ms.
    async fn stays_silent(stream: &mut TcpStream) -> bool {
        let mut byte = [0];
        let read = stream.read(&mut byte);
        tokio::time::timeout(Duration::from_millis(200), read)
            .await
            .is_err()
    }

    /// Ids are echoed as JSON of the same type, and one kept-alive connection serves the script.
    #[tokio::test]
    async fn answers_echo_ids_over_one_kept_alive_connection() {
        let allow = json!([{"type": "allow"}]);
        let backend = FaultBackend::start(vec![
            Behaviour::NoEffect,
            Behaviour::Deny("no".into()),
            Behaviour::Effects(allow.clone()),
        ])
        .await;
        let mut stream = send(&backend, &post(r#""evt_1""#, "")).await;
        let (status, first) = response_of(&mut stream).await;
        assert_eq!(status, 200);
        assert_eq!(header(&first, "content-type"), ["application/json"]);
        let result = json!({"protocolVersion": "draft", "effects": []});
        let expected = json!({"jsonrpc": "2.0", "id": "evt_1", "result": result});
        assert_eq!(body_json(&first), expected);

        stream.write_all(&post("7", "")).await.unwrap();
        let denied = body_json(&response_of(&mut stream).await.1);
        assert_eq!(denied["id"], json!(7));
        assert_eq!(
            denied["result"]["effects"],
            json!([{"type": "deny", "reason": "no"}])
        );

        stream.write_all(&post("8", "")).await.unwrap();
        assert_eq!(
            body_json(&response_of(&mut stream).await.1)["result"]["effects"],
            allow
        );
        // The last entry repeats; a client's `Connection: close` is honoured.
        stream
            .write_all(&post("9", "Connection: close\r\n"))
            .await
            .unwrap();
        let (_, last) = response_of(&mut stream).await;
        assert_eq!(
            (body_json(&last)["id"].clone(), header(&last, "connection")),
            (json!(9), vec!["close"])
        );
        assert_eq!(stream.read(&mut [0; 64]).await.unwrap(), 0);
        assert_eq!(backend.connections(), 1);
        assert_eq!(backend.requests().len(), 4);
    }

    /// `Reply` sends any status and body; `$ID$` becomes the id, `null` for a non-JSON body.
    #[tokio::test]
    async fn reply_fills_the_id_template() {
        let error = br#"{"jsonrpc":"2.0","id":$ID$,"error":{"code":-32003,"message":"x"}}"#;
        let backend = FaultBackend::start(vec![
            Behaviour::Reply {
                status: 503,
                content_type: Some("application/json".into()),
                body: error.to_vec(),
            },
            Behaviour::Reply {
                status: 200,
                content_type: None,
                body: b"$ID$|$ID$".to_vec(),
            },
        ])
        .await;
        let mut stream = send(&backend, &post(r#""evt_1""#, "")).await;
        let (status, reply) = response_of(&mut stream).await;
        assert_eq!(status, 503);
        assert_eq!(body_json(&reply)["id"], json!("evt_1"));
        assert_eq!(body_json(&reply)["error"]["code"], json!(-32003));

        stream.write_all(&post_body("not json", "")).await.unwrap();
        let (_, reply) = response_of(&mut stream).await;
        assert_eq!(reply.body, b"null|null");
        assert!(header(&reply, "content-type").is_empty());
    }

    /// Malformed HTTP goes out byte for byte, followed by EOF.
    #[tokio::test]
    async fn raw_bytes_are_sent_verbatim_then_closed() {
        let raw = b"HTTP/1.1 banana\r\n\r\n{".to_vec();
        let backend = FaultBackend::start(vec![Behaviour::RawThenClose(raw.clone())]).await;
        let mut stream = send(&backend, &post("1", "")).await;
        let mut received = Vec::new();
        stream.read_to_end(&mut received).await.unwrap();
        assert_eq!(received, raw);
    }

    /// A reset surfaces as ECONNRESET and a clean close as EOF; both requests were recorded.
    #[tokio::test]
    async fn reset_and_close_end_the_connection_differently() {
        let backend = FaultBackend::start(vec![Behaviour::Reset, Behaviour::Close]).await;
        let mut reset = send(&backend, &post("1", "")).await;
        let error = reset.read(&mut [0; 64]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);

        let mut closed = send(&backend, &post("2", "")).await;
        assert_eq!(closed.read(&mut [0; 64]).await.unwrap(), 0);
        let ids: Vec<Value> = backend
            .requests()
            .iter()
            .map(|r| r.json()["id"].clone())
            .collect();
        assert_eq!(ids, [json!(1), json!(2)]);
    }

    /// A reset mid-response: the bytes before the cut arrive, then ECONNRESET, not EOF.
    #[tokio::test]
    async fn reset_mid_response_sends_the_part_before_the_cut_then_resets() {
        let inner = Box::new(Behaviour::NoEffect);
        let backend = FaultBackend::start(vec![
            Behaviour::ResetMidResponse {
                inner: inner.clone(),
                cut: Cut::InHead(17),
            },
            Behaviour::ResetMidResponse {
                inner,
                cut: Cut::BodyShortBy(5),
            },
        ])
        .await;
        let expected = rpc_result(&json!(1), &json!([]));
        for (n, part) in [(1, 17), (2, expected.len() - 5)] {
            let mut stream = send(&backend, &post("1", "")).await;
            let mut buf = Vec::new();
            let error = loop {
                match read_more(&mut stream, &mut buf).await {
                    Ok(0) => panic!("request {n}: EOF instead of a reset"),
                    Ok(_) => {}
                    Err(e) => break e,
                }
            };
            assert_eq!(error.kind(), io::ErrorKind::ConnectionReset, "request {n}");
            if n == 1 {
                assert_eq!(buf, b"HTTP/1.1 200 OK\r\n", "request {n}");
            } else {
                let head_end = find(&buf, b"\r\n\r\n").expect("the whole head") + 4;
                let length = format!("Content-Length: {}\r\n", expected.len());
                assert!(find(&buf[..head_end], length.as_bytes()).is_some());
                assert_eq!(&buf[head_end..], &expected[..part], "request {n}");
            }
        }
        assert_eq!(backend.requests().len(), 2);
    }

    /// A blackhole reads (and records) but never answers; `AcceptNoRead` does not even read,
    /// and only holds its own connection: the next one is served.
    #[tokio::test]
    async fn silent_peers_send_nothing() {
        let blackhole = FaultBackend::start(vec![Behaviour::Blackhole]).await;
        let mut stream = send(&blackhole, &post("1", "")).await;
        assert!(stays_silent(&mut stream).await);
        assert_eq!(blackhole.requests().len(), 1);

        let unread = FaultBackend::start(vec![Behaviour::AcceptNoRead, Behaviour::NoEffect]).await;
        let mut held = send(&unread, &post("1", "")).await;
        let mut served = send(&unread, &post("2", "")).await;
        assert!(stays_silent(&mut held).await);
        assert_eq!(response_of(&mut served).await.0, 200);
        assert_eq!(unread.connections(), 2);
        assert_eq!(unread.requests().len(), 1);
    }

    #[tokio::test]
    async fn delay_holds_the_answer_back() {
        let delay = Duration::from_millis(300);
        let backend =
            FaultBackend::start(vec![Behaviour::Delay(delay, Box::new(Behaviour::NoEffect))]).await;
        let started = Instant::now();
        let mut stream = send(&backend, &post("1", "")).await;
        assert_eq!(response_of(&mut stream).await.0, 200);
        assert!(started.elapsed() >= delay);
    }

    /// The head arrives at once with the full length; the body byte by byte, so a
    /// body-phase deadline can expire mid-response.
    #[tokio::test]
    async fn trickle_spreads_the_body_over_time() {
        let every = Duration::from_millis(5);
        let inner = Box::new(Behaviour::NoEffect);
        let backend = FaultBackend::start(vec![Behaviour::Trickle { every, inner }]).await;
        let expected = rpc_result(&json!(1), &json!([]));
        let mut stream = send(&backend, &post("1", "")).await;
        let mut buf = Vec::new();
        let head_end = loop {
            assert!(read_more(&mut stream, &mut buf).await.unwrap() > 0);
            if let Some(at) = find(&buf, b"\r\n\r\n") {
                break at + 4;
            }
        };
        let mut first_body_byte = (buf.len() > head_end).then(Instant::now);
        let length = format!("Content-Length: {}\r\n", expected.len());
        assert!(find(&buf[..head_end], length.as_bytes()).is_some());
        while buf.len() < head_end + expected.len() {
            assert!(read_more(&mut stream, &mut buf).await.unwrap() > 0);
            first_body_byte.get_or_insert_with(Instant::now);
        }
        let spread = first_body_byte.unwrap().elapsed();
        assert_eq!(&buf[head_end..], expected.as_slice());
        assert!(
            spread >= every * (expected.len() as u32 - 1) / 2,
            "body arrived in {spread:?}"
        );
    }

    #[tokio::test]
    async fn oversized_sends_exactly_n_valid_bytes() {
        let backend = FaultBackend::start(vec![Behaviour::Oversized(100_000)]).await;
        let mut stream = send(&backend, &post(r#""big""#, "")).await;
        let (status, reply) = response_of(&mut stream).await;
        assert_eq!(status, 200);
        assert_eq!(header(&reply, "content-length"), ["100000"]);
        assert_eq!(reply.body.len(), 100_000);
        assert_eq!(body_json(&reply)["id"], json!("big"));
    }

    /// Tests assert on exact headers (one `Authorization`, say), so order and duplicates count.
    #[tokio::test]
    async fn requests_are_recorded_with_duplicate_headers_in_order() {
        let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let _stream = send(&backend, &post("1", "X-Dup: a\r\nx-dup: b\r\n")).await;
        assert!(backend.wait_for_requests(1, Duration::from_secs(5)).await);
        assert!(
            !backend
                .wait_for_requests(2, Duration::from_millis(50))
                .await
        );
        let request = &backend.requests()[0];
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/hooks")
        );
        assert_eq!(request.header_values("X-DUP"), ["a", "b"]);
        assert_eq!(request.json()["id"], json!(1));
    }

    /// No leaked tasks: dropping the backend closes even a blackholed connection.
    #[tokio::test]
    async fn dropping_the_backend_closes_its_connections() {
        let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
        let mut stream = send(&backend, &post("1", "")).await;
        assert!(backend.wait_for_requests(1, Duration::from_secs(5)).await);
        drop(backend);
        let mut byte = [0];
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte));
        assert_eq!(read.await.unwrap().unwrap(), 0);
    }

    #[tokio::test]
    async fn refused_url_refuses_and_its_port_stays_taken() {
        let url = refused_url();
        let addr = url.trim_start_matches("http://").trim_end_matches("/hooks");
        let error = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused);
        let taken = std::net::TcpListener::bind(addr).map(drop).unwrap_err();
        assert_eq!(taken.kind(), io::ErrorKind::AddrInUse);
        assert_eq!(refused_url(), url);
    }
}
