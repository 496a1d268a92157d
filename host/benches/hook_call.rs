//! Cost of one hook call through the component against a loopback backend, next to a raw
//! keep-alive POST of the same bytes to the same backend, in the same run; then
//! throughput at concurrency 8 (decisions/s), raw and hook rounds alternating.
//!
//! `cargo bench -p ahp-host --bench hook_call` (optionally `-- N` for N calls each).
//! The current-thread harness setup is `tests/harness-bench`.

use ahp_host::EffectKind;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};

/// Concurrent callers in the throughput rounds.
const CONCURRENCY: usize = 8;
/// Throughput rounds per row, alternating raw and hook.
const THROUGHPUT_ROUNDS: usize = 5;

const EVENT: &str = r#"{"id":"evt_bench","source":"urn:ahp:bench","type":"tool.before","time":"2026-11-30T12:00:00Z","session":{"id":"sess_bench"},"call":{"id":"call_bench"},"tool":{"name":"Bash","input":{"command":"ls -la /tmp"},"origin":"native"},"path":"native"}"#;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .filter_map(|a| a.parse().ok())
        .next()
        .unwrap_or(5_000);
    let addr = serve().await;
    let url = format!("http://{addr}/hooks");
    let registration = json!({
        "protocolVersion": "draft",
        "hooks": [{"id": "dev.ahp.bench", "transport": {"type": "http", "url": url},
            "subscriptions": [{"events": ["tool.before"], "mode": "intercept", "timeoutMs": 1000,
                "failurePolicy": "fail-closed", "content": {"default": "metadata"}}]}]
    })
    .to_string();
    let interceptor = ahp_host::Interceptor::new(&registration, ahp_host::Options::default())
        .await
        .expect("build the interceptor");
    // The same component and event with no matching interceptor: the cost of the
    // component call alone (validation, settlement, audit record), no I/O.
    let idle_registration = registration.replace("\"tool.before\"", "\"session.start\"");
    let idle = ahp_host::Interceptor::new(&idle_registration, ahp_host::Options::default())
        .await
        .expect("build the idle interceptor");

    // The exact bytes the component sends, for the raw POST.
    let request_body = json!({"jsonrpc": "2.0", "id": "evt_bench", "method": "hooks/intercept",
        "params": {"protocolVersion": "draft", "event": serde_json::from_str::<Value>(EVENT).unwrap(),
                   "capabilities": {"effects": ["deny"]}}})
    .to_string();
    let request_body = Bytes::from(request_body);
    let mut sender = connect(addr).await;

    let mut raw = Vec::with_capacity(n);
    let mut hook = Vec::with_capacity(n);
    let mut alone = Vec::with_capacity(n);
    for round in 0..(n + n / 10) {
        let warmup = round < n / 10;
        let t = Instant::now();
        post(&mut sender, addr, request_body.clone()).await;
        let raw_t = t.elapsed();
        let t = Instant::now();
        call(&interceptor).await;
        let hook_t = t.elapsed();
        let t = Instant::now();
        let settled = idle
            .intercept(EVENT, &[EffectKind::Deny], None)
            .await
            .unwrap();
        let alone_t = t.elapsed();
        assert!(settled.record.interceptors.is_empty());
        if !warmup {
            raw.push(raw_t);
            hook.push(hook_t);
            alone.push(alone_t);
        }
    }
    let (raw_med, raw_p99) = stats(&mut raw);
    let (hook_med, hook_p99) = stats(&mut hook);
    let (alone_med, alone_p99) = stats(&mut alone);
    println!("{n} calls each, interleaved, one keep-alive connection each, loopback");
    println!("{:<34} {:>10} {:>10}", "", "median µs", "p99 µs");
    println!(
        "{:<34} {:>10.1} {:>10.1}",
        "raw keep-alive POST (hyper)", raw_med, raw_p99
    );
    println!(
        "{:<34} {:>10.1} {:>10.1}",
        "hook call through the component", hook_med, hook_p99
    );
    println!(
        "{:<34} {:>10.2} {:>10.2}",
        "ratio",
        hook_med / raw_med,
        hook_p99 / raw_p99
    );
    println!(
        "{:<34} {:>10.1} {:>10.1}",
        "component call, no interceptor", alone_med, alone_p99
    );

    let per_round = n.max(CONCURRENCY);
    let mut connections = Vec::new();
    for _ in 0..CONCURRENCY {
        connections.push(connect(addr).await);
    }
    let (mut raw_rates, mut hook_rates) = (Vec::new(), Vec::new());
    for _ in 0..THROUGHPUT_ROUNDS {
        raw_rates.push(raw_throughput(&mut connections, addr, &request_body, per_round).await);
        hook_rates.push(hook_throughput(&interceptor, per_round).await);
    }
    println!(
        "throughput at concurrency {CONCURRENCY}, {per_round} per round, median of {THROUGHPUT_ROUNDS} alternating rounds"
    );
    println!(
        "{:<34} {:>10.0}",
        "raw keep-alive POST, requests/s",
        median(&mut raw_rates)
    );
    println!(
        "{:<34} {:>10.0}",
        "hook calls, decisions/s",
        median(&mut hook_rates)
    );
    interceptor.shutdown();
}

async fn call(interceptor: &ahp_host::Interceptor) {
    let settled = interceptor
        .intercept(EVENT, &[EffectKind::Deny], None)
        .await
        .unwrap();
    assert_eq!(settled.decision, ahp_host::Decision::Allow);
}

/// `total` decisions by [`CONCURRENCY`] concurrent callers of one interceptor, per second.
async fn hook_throughput(interceptor: &ahp_host::Interceptor, total: usize) -> f64 {
    let t = Instant::now();
    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENCY {
        let interceptor = interceptor.clone();
        callers.spawn(async move {
            for _ in 0..total / CONCURRENCY {
                call(&interceptor).await;
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
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

async fn post(sender: &mut SendRequest<Full<Bytes>>, addr: SocketAddr, body: Bytes) {
    let request = Request::post("/hooks")
        .header("content-type", "application/json")
        .header("host", addr.to_string())
        .body(Full::new(body))
        .unwrap();
    sender.ready().await.unwrap();
    let response = sender.send_request(request).await.unwrap();
    let _ = response.into_body().collect().await.unwrap();
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn stats(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (
        us(samples[samples.len() / 2]),
        us(samples[samples.len() * 99 / 100]),
    )
}

async fn serve() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
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
    addr
}

async fn answer(
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let id = serde_json::from_slice::<Value>(&body)
        .map(|v| v["id"].clone())
        .unwrap_or(Value::Null);
    let reply =
        json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "draft", "effects": []}});
    let mut response = Response::new(Full::new(Bytes::from(reply.to_string())));
    response
        .headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    Ok(response)
}
