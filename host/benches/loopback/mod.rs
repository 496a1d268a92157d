//! The loopback pieces the hook-call benches share: `host/benches/hook_call.rs` (a
//! multi-thread runtime), `host/benches/call_cost.rs` (instruction counts) and
//! `tests/harness-bench` (an independent current-thread harness, which takes this file
//! by `#[path]`), `host/benches/after_component.rs`; each uses a part. One backend
//! answering no objection (over loopback HTTP, or in process as an injected transport),
//! the raw keep-alive POST that is the floor, the hook call, throughput at
//! [`CONCURRENCY`], and the figures.

use ahp_host::{BoxFuture, Decision, EffectKind, Interceptor, Options};
use ahp_host::{Transport, TransportError, TransportReply, TransportRequest};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};

pub const EVENT: &str = r#"{"id":"evt_bench","source":"urn:ahp:bench","type":"tool.before","time":"2026-11-30T12:00:00Z","session":{"id":"sess_bench"},"call":{"id":"call_bench"},"tool":{"name":"Bash","input":{"command":"ls -la /tmp"},"origin":"native"},"path":"native"}"#;

/// Concurrent callers in the throughput rounds.
pub const CONCURRENCY: usize = 8;
/// Throughput rounds per row, alternating raw and hook.
const THROUGHPUT_ROUNDS: usize = 5;

/// The first request body a backend received, over HTTP or in process: the component's
/// own bytes, which the raw row then sends.
static FIRST_BODY: OnceLock<Bytes> = OnceLock::new();

/// One fail-closed `tool.before` intercept subscription to `url`.
pub fn registration(url: &str) -> String {
    json!({
        "protocolVersion": "draft",
        "hooks": [{"id": "dev.ahp.bench", "transport": {"type": "http", "url": url},
            "subscriptions": [{"events": ["tool.before"], "mode": "intercept", "timeoutMs": 1000,
                "failurePolicy": "fail-closed", "content": {"default": "metadata"}}]}]
    })
    .to_string()
}

/// The three interceptors of `registration` the latency benches compare: to its backend
/// over the network, to the same backend id in process ([`NoObjection`]), and one that no
/// interceptor matches (a component call alone: validation, settlement, audit record).
pub struct Interceptors {
    pub network: Interceptor,
    pub in_process: Interceptor,
    pub idle: Interceptor,
}

impl Interceptors {
    /// The three interceptors of `registration`, after one hook call over the network so
    /// that [`first_body`] holds the component's request bytes.
    pub async fn new(registration: &str) -> Interceptors {
        let mut options = Options::default();
        let answer: Arc<dyn Transport> = Arc::new(NoObjection);
        options.transports.insert("dev.ahp.bench".into(), answer);
        let idle = registration.replace("\"tool.before\"", "\"session.start\"");
        let build = async |registration: &str, options| {
            Interceptor::new(registration, options)
                .await
                .expect("build the interceptor")
        };
        let interceptors = Interceptors {
            network: build(registration, Options::default()).await,
            in_process: build(registration, options).await,
            idle: build(&idle, Options::default()).await,
        };
        hook(&interceptors.network).await;
        interceptors
    }
}

/// The bytes of the first request the backend received (after a first hook call).
pub fn first_body() -> Bytes {
    FIRST_BODY
        .get()
        .expect("the backend saw the hook call")
        .clone()
}

/// One hook call, which the backend's no objection settles as allow.
pub async fn hook(interceptor: &Interceptor) {
    let settled = interceptor
        .intercept(EVENT, &[EffectKind::Deny], None)
        .await
        .expect("the hook call settles");
    assert_eq!(settled.decision, Decision::Allow);
}

/// `total` decisions through `interceptor` by [`CONCURRENCY`] concurrent callers, per
/// second.
pub async fn hook_throughput(interceptor: &Interceptor, total: usize) -> f64 {
    let t = Instant::now();
    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENCY {
        let interceptor = interceptor.clone();
        callers.spawn(async move {
            for _ in 0..total / CONCURRENCY {
                hook(&interceptor).await;
            }
        });
    }
    callers.join_all().await;
    (total / CONCURRENCY * CONCURRENCY) as f64 / t.elapsed().as_secs_f64()
}

/// As [`hook_throughput`], raw POSTs, one keep-alive connection per caller.
pub async fn raw_throughput(
    connections: &mut Vec<SendRequest<Full<Bytes>>>,
    addr: SocketAddr,
    body: &Bytes,
    total: usize,
) -> f64 {
    let t = Instant::now();
    let mut callers = tokio::task::JoinSet::new();
    for mut sender in connections.drain(..) {
        let body = body.clone();
        callers.spawn(async move {
            for _ in 0..total / CONCURRENCY {
                post(&mut sender, addr, body.clone()).await;
            }
            sender
        });
    }
    connections.extend(callers.join_all().await);
    (total / CONCURRENCY * CONCURRENCY) as f64 / t.elapsed().as_secs_f64()
}

/// A keep-alive HTTP/1 connection to `addr`, without Nagle's delay.
pub async fn connect(addr: SocketAddr) -> SendRequest<Full<Bytes>> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    sender
}

/// One POST of `body`; the status and the body of the answer.
pub async fn post(
    sender: &mut SendRequest<Full<Bytes>>,
    addr: SocketAddr,
    body: Bytes,
) -> (u16, Vec<u8>) {
    // The headers ahp-host sends, but for its content length (hyper adds one).
    let request = Request::post("/hooks")
        .header("content-type", "application/json")
        .header("accept-encoding", "identity")
        .header("host", addr.to_string())
        .body(Full::new(body))
        .expect("request");
    sender.ready().await.expect("connection ready");
    let response = sender.send_request(request).await.expect("response");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.expect("body");
    (status, body.to_bytes().to_vec())
}

/// Latency rows timed one each per round, interleaved so that every row sees the same
/// machine; the first tenth of the rounds warms up and is not kept.
pub struct Rows {
    names: Vec<&'static str>,
    warm_up: usize,
    kept: usize,
    rounds: usize,
    samples: Vec<Vec<Duration>>,
}

impl Rows {
    /// Rows named `names`, `kept` rounds each after the warm-up.
    pub fn new(names: Vec<&'static str>, kept: usize) -> Rows {
        let samples = names.iter().map(|_| Vec::with_capacity(kept)).collect();
        Rows {
            names,
            warm_up: kept / 10,
            kept,
            rounds: 0,
            samples,
        }
    }

    /// Whether another round is due.
    pub fn more(&self) -> bool {
        self.rounds < self.warm_up + self.kept
    }

    /// One round's times, one per row, in the rows' order.
    pub fn record(&mut self, times: Vec<Duration>) {
        if self.rounds >= self.warm_up {
            for (row, t) in self.samples.iter_mut().zip(times) {
                row.push(t);
            }
        }
        self.rounds += 1;
    }

    /// Prints each row's median and p99 under `title`; returns them, in µs.
    pub fn report(mut self, title: &str) -> Vec<(f64, f64)> {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!("{title}");
        println!("{:<40} {:>10} {:>10}", "", "median µs", "p99 µs");
        let mut figures = Vec::new();
        for (name, row) in self.names.iter().zip(&mut self.samples) {
            row.sort();
            let (med, p99) = (us(row[row.len() / 2]), us(row[row.len() * 99 / 100]));
            println!("{name:<40} {med:>10.1} {p99:>10.1}");
            figures.push((med, p99));
        }
        figures
    }
}

/// Prints `row`'s median and p99 as ratios to `floor`'s (each a pair from
/// [`Rows::report`]), under `label`.
pub fn print_ratio(label: &str, row: (f64, f64), floor: (f64, f64)) {
    println!(
        "{label:<40} {:>10.2} {:>10.2}",
        row.0 / floor.0,
        row.1 / floor.1
    );
}

/// Throughput at [`CONCURRENCY`]: [`THROUGHPUT_ROUNDS`] rounds of `per_round` raw POSTs of
/// `body` to `addr` and as many hook calls through `interceptor`, alternating; prints the
/// median rate of each.
pub async fn throughput(
    interceptor: &Interceptor,
    addr: SocketAddr,
    body: &Bytes,
    per_round: usize,
) {
    let mut connections = Vec::new();
    for _ in 0..CONCURRENCY {
        connections.push(connect(addr).await);
    }
    let (mut raw_rates, mut hook_rates) = (Vec::new(), Vec::new());
    for _ in 0..THROUGHPUT_ROUNDS {
        raw_rates.push(raw_throughput(&mut connections, addr, body, per_round).await);
        hook_rates.push(hook_throughput(interceptor, per_round).await);
    }
    println!(
        "throughput at concurrency {CONCURRENCY}, {per_round} per round, median of {THROUGHPUT_ROUNDS} alternating rounds"
    );
    let rate = |name: &str, rates: &mut [f64]| println!("{name:<40} {:>10.0}", median(rates));
    rate("raw keep-alive POST, requests/s", &mut raw_rates);
    rate("hook calls, decisions/s", &mut hook_rates);
}

/// `work`'s output and how long it took.
pub async fn timed<T>(work: impl Future<Output = T>) -> (T, Duration) {
    let t = Instant::now();
    let done = work.await;
    (done, t.elapsed())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Serves the backend on its own OS thread and runtime, as an independent policy server
/// would be; returns its address.
pub fn backend_thread() -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("backend".into())
        .spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("build the backend runtime")
                .block_on(async move {
                    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                    tx.send(listener.local_addr().expect("address"))
                        .expect("report the address");
                    serve(listener).await;
                });
        })
        .expect("spawn the backend thread");
    rx.recv().expect("the backend's address")
}

/// Serves the backend on `listener` until the runtime ends.
pub async fn serve(listener: TcpListener) {
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(answer);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// No objection, echoing the request's id.
async fn answer(
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let _ = FIRST_BODY.set(body.clone());
    let mut response = Response::new(Full::new(Bytes::from(no_objection(&body))));
    response
        .headers_mut()
        .insert("content-type", "application/json".parse().expect("header"));
    Ok(response)
}

/// The JSON-RPC answer of no objection to `request`, with its id.
fn no_objection(request: &[u8]) -> String {
    let id = serde_json::from_slice::<Value>(request)
        .map(|v| v["id"].clone())
        .unwrap_or(Value::Null);
    json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "draft", "effects": []}})
        .to_string()
}

/// The backend in the harness's own process, as an injected transport: it answers no
/// objection at once, so a hook call through it is the component and host without the
/// network.
pub struct NoObjection;

impl Transport for NoObjection {
    fn exchange<'a>(
        &'a self,
        request: TransportRequest<'a>,
    ) -> BoxFuture<'a, Result<TransportReply, TransportError>> {
        Box::pin(async move {
            let _ = FIRST_BODY.set(Bytes::copy_from_slice(request.message));
            Ok(json_reply(200, no_objection(request.message).into_bytes()))
        })
    }
}

/// The bench's own keep-alive connection to the backend as an injected transport: a hook
/// call through it makes the raw row's POST, so the time before the POST starts and after
/// it returns is the component's and the host's own, split from the network and from the
/// host's HTTP client. Calls through it must not overlap (the latency rows are serial).
pub struct OverBenchConnection {
    addr: SocketAddr,
    sender: tokio::sync::Mutex<SendRequest<Full<Bytes>>>,
    /// When the last exchange was handed the message, and when its reply was read.
    last: std::sync::Mutex<Option<(Instant, Instant)>>,
}

impl OverBenchConnection {
    /// A transport over a new keep-alive connection to `addr`.
    pub async fn new(addr: SocketAddr) -> OverBenchConnection {
        OverBenchConnection {
            addr,
            sender: tokio::sync::Mutex::new(connect(addr).await),
            last: std::sync::Mutex::new(None),
        }
    }

    /// The last exchange's start and end, taken.
    pub fn take_last(&self) -> Option<(Instant, Instant)> {
        self.last.lock().expect("not poisoned").take()
    }
}

impl Transport for OverBenchConnection {
    fn exchange<'a>(
        &'a self,
        request: TransportRequest<'a>,
    ) -> BoxFuture<'a, Result<TransportReply, TransportError>> {
        Box::pin(async move {
            let handed = Instant::now();
            let mut sender = self.sender.lock().await;
            let body = Bytes::copy_from_slice(request.message);
            let (status, body) = post(&mut sender, self.addr, body).await;
            *self.last.lock().expect("not poisoned") = Some((handed, Instant::now()));
            Ok(json_reply(status, body))
        })
    }
}

/// An injected transport's reply: `status` and a JSON `body`.
fn json_reply(status: u16, body: Vec<u8>) -> TransportReply {
    TransportReply {
        status: Some(status),
        content_type: Some("application/json".into()),
        body,
    }
}
