//! A hook call as an independent harness makes it: its own tokio current-thread runtime,
//! `ahp-host` as a library, the policy backend on its own OS thread. Rows, interleaved
//! round by round against the same backend:
//!
//! - a raw keep-alive POST (hyper) of the exact bytes the component sends: the floor;
//! - the hook call through the component (`Interceptor::intercept`);
//! - with the `sdk` feature, the official Rust SDK's harness client (`agenthooksprotocol`
//!   0.10.1, `Client::tool_before` over its `HttpHook`), on a keep-alive hyper transport
//!   like the raw row's, so the row measures the SDK and not a different HTTP client;
//!
//! then throughput at concurrency 8 (decisions/s), raw and hook rounds alternating.
//!
//! `cargo run --release --locked --manifest-path tests/harness-bench/Cargo.toml
//! [--features sdk] -- [N]` (N calls per row, default 3000).

use ahp_host::{Decision, EffectKind, Interceptor, Options};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};

const EVENT: &str = r#"{"id":"evt_bench","source":"urn:ahp:bench","type":"tool.before","time":"2026-11-30T12:00:00Z","session":{"id":"sess_bench"},"call":{"id":"call_bench"},"tool":{"name":"Bash","input":{"command":"ls -la /tmp"},"origin":"native"},"path":"native"}"#;

/// The first request body the backend received: the component's, for the raw row.
static FIRST_BODY: OnceLock<Bytes> = OnceLock::new();

/// Concurrent callers in the throughput rounds.
const CONCURRENCY: usize = 8;
/// Throughput rounds per row, alternating raw and hook.
const THROUGHPUT_ROUNDS: usize = 5;

fn main() {
    let n: usize = std::env::args()
        .filter_map(|a| a.parse().ok())
        .next()
        .unwrap_or(3_000);
    let addr = backend_thread();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build the harness runtime")
        .block_on(run(n, addr));
}

async fn run(n: usize, addr: SocketAddr) {
    let url = format!("http://{addr}/hooks");
    let registration = json!({
        "protocolVersion": "draft",
        "hooks": [{"id": "dev.ahp.bench", "transport": {"type": "http", "url": url},
            "subscriptions": [{"events": ["tool.before"], "mode": "intercept", "timeoutMs": 1000,
                "failurePolicy": "fail-closed", "content": {"default": "metadata"}}]}]
    })
    .to_string();
    let interceptor = Interceptor::new(&registration, Options::default())
        .await
        .expect("build the interceptor");
    // The first call goes through the component, so the raw row sends its exact bytes.
    hook(&interceptor).await;
    let body = FIRST_BODY
        .get()
        .expect("the backend saw the hook call")
        .clone();
    let mut raw = connect(addr).await;
    #[cfg(feature = "sdk")]
    let sdk = sdk_row::client(addr, &url).await;

    let mut rows: Vec<(&str, Vec<Duration>)> = vec![
        ("raw keep-alive POST (hyper)", Vec::new()),
        ("hook call through the component", Vec::new()),
    ];
    #[cfg(feature = "sdk")]
    rows.push(("Rust SDK harness client (0.10.1)", Vec::new()));
    for round in 0..(n + n / 10) {
        let t = Instant::now();
        post(&mut raw, addr, body.clone()).await;
        let mut times = vec![t.elapsed()];
        let t = Instant::now();
        hook(&interceptor).await;
        times.push(t.elapsed());
        #[cfg(feature = "sdk")]
        {
            let t = Instant::now();
            sdk_row::call(&sdk).await;
            times.push(t.elapsed());
        }
        if round >= n / 10 {
            for ((_, row), t) in rows.iter_mut().zip(times) {
                row.push(t);
            }
        }
    }
    println!("current-thread harness, backend on its own thread, loopback; {n} calls per row, interleaved");
    println!("{:<40} {:>10} {:>10}", "", "median µs", "p99 µs");
    let figures: Vec<(&str, (f64, f64))> = rows
        .iter_mut()
        .map(|(name, row)| (*name, stats(row)))
        .collect();
    for (name, (med, p99)) in &figures {
        println!("{name:<40} {med:>10.1} {p99:>10.1}");
    }
    let (_, (raw_med, raw_p99)) = figures[0];
    for (name, (med, p99)) in &figures[1..] {
        println!(
            "ratio to raw: {name:<26} {:>10.2} {:>10.2}",
            med / raw_med,
            p99 / raw_p99
        );
    }

    let per_round = n.max(CONCURRENCY);
    let mut raw_rates = Vec::new();
    let mut hook_rates = Vec::new();
    let mut connections = Vec::new();
    for _ in 0..CONCURRENCY {
        connections.push(connect(addr).await);
    }
    for _ in 0..THROUGHPUT_ROUNDS {
        raw_rates.push(raw_throughput(&mut connections, addr, &body, per_round).await);
        hook_rates.push(hook_throughput(&interceptor, per_round).await);
    }
    println!("throughput at concurrency {CONCURRENCY}, {per_round} decisions per round, median of {THROUGHPUT_ROUNDS} alternating rounds");
    println!(
        "{:<40} {:>10.0}",
        "raw keep-alive POST, requests/s",
        median(&mut raw_rates)
    );
    println!(
        "{:<40} {:>10.0}",
        "hook calls, decisions/s",
        median(&mut hook_rates)
    );
    interceptor.shutdown_async().await;
}

async fn hook(interceptor: &Interceptor) {
    let settled = interceptor
        .intercept(EVENT, &[EffectKind::Deny], None)
        .await
        .expect("the hook call settles");
    assert_eq!(settled.decision, Decision::Allow);
}

/// `total` decisions through `interceptor` by [`CONCURRENCY`] concurrent callers, per
/// second.
async fn hook_throughput(interceptor: &Interceptor, total: usize) -> f64 {
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
async fn raw_throughput(
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

async fn connect(addr: SocketAddr) -> SendRequest<Full<Bytes>> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    sender
}

/// One POST of `body`; the status and the body of the answer.
async fn post(
    sender: &mut SendRequest<Full<Bytes>>,
    addr: SocketAddr,
    body: Bytes,
) -> (u16, Vec<u8>) {
    let request = Request::post("/hooks")
        .header("content-type", "application/json")
        .header("host", addr.to_string())
        .body(Full::new(body))
        .expect("request");
    sender.ready().await.expect("connection ready");
    let response = sender.send_request(request).await.expect("response");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.expect("body");
    (status, body.to_bytes().to_vec())
}

/// The Rust SDK row: its harness client, over the same kind of connection as the raw row.
#[cfg(feature = "sdk")]
mod sdk_row {
    use super::{connect, post, EVENT};
    use agenthooksprotocol::adapters::http_hook::HttpHook;
    use agenthooksprotocol::client::{Client, FailurePolicy, Subscription, ToolContext};
    use agenthooksprotocol::transport::{self as sdk, TransportError};
    use bytes::Bytes;
    use http_body_util::Full;
    use hyper::client::conn::http1::SendRequest;
    use serde_json::{json, Value};
    use std::future::Future;
    use std::net::SocketAddr;
    use std::pin::Pin;
    use std::time::Duration;

    /// The SDK's harness client with one fail-closed `tool.before` subscription to the
    /// backend, over [`KeepAlive`].
    pub async fn client(addr: SocketAddr, url: &str) -> Client {
        let mut context: Value = serde_json::from_str(EVENT).expect("event");
        let object = context.as_object_mut().expect("an object");
        object.remove("type");
        object["tool"]
            .as_object_mut()
            .expect("tool")
            .remove("input");
        let transport = KeepAlive {
            sender: tokio::sync::Mutex::new(connect(addr).await),
            addr,
        };
        Client::new(ToolContext::new(context)).with_subscription(
            Subscription::intercept(
                "dev.ahp.bench",
                FailurePolicy::Closed,
                HttpHook {
                    http: transport,
                    endpoint: url.to_string(),
                    authorization: "Bearer bench".into(),
                },
            )
            .timeout(Duration::from_secs(1)),
        )
    }

    /// One `tool.before` through the SDK, which must settle without a failure.
    pub async fn call(client: &Client) {
        let result = client
            .tool_before(json!({"command": "ls -la /tmp"}))
            .await
            .expect("the SDK call settles");
        assert!(result.outcome.failures.is_empty(), "the SDK call failed");
    }

    /// The SDK's `Http` over one keep-alive hyper connection, as the raw row uses.
    struct KeepAlive {
        sender: tokio::sync::Mutex<SendRequest<Full<Bytes>>>,
        addr: SocketAddr,
    }

    impl sdk::Http for KeepAlive {
        fn send(
            &self,
            request: sdk::Request,
        ) -> Pin<Box<dyn Future<Output = Result<sdk::Response, TransportError>> + Send + '_>>
        {
            Box::pin(async move {
                let mut sender = self.sender.lock().await;
                let (status, body) = post(&mut sender, self.addr, Bytes::from(request.body)).await;
                Ok(sdk::Response {
                    status,
                    headers: [("content-type".to_string(), "application/json".to_string())].into(),
                    body,
                })
            })
        }
    }
}

fn stats(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (
        us(samples[samples.len() / 2]),
        us(samples[samples.len() * 99 / 100]),
    )
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Serves the backend on its own OS thread and runtime; returns its address.
fn backend_thread() -> SocketAddr {
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
                    while let Ok((stream, _)) = listener.accept().await {
                        let _ = stream.set_nodelay(true);
                        tokio::spawn(async move {
                            let service = hyper::service::service_fn(answer);
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        });
                    }
                });
        })
        .expect("spawn the backend thread");
    rx.recv().expect("the backend's address")
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
    let id = serde_json::from_slice::<Value>(&body)
        .map(|v| v["id"].clone())
        .unwrap_or(Value::Null);
    let reply =
        json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "draft", "effects": []}});
    let mut response = Response::new(Full::new(Bytes::from(reply.to_string())));
    response
        .headers_mut()
        .insert("content-type", "application/json".parse().expect("header"));
    Ok(response)
}
