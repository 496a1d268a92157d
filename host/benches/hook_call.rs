//! Cost of one hook call through the component against a loopback backend, next to a raw
//! keep-alive POST of the same bytes to the same backend, in the same run.
//!
//! `cargo bench -p ahp-host --bench hook_call` (optionally `-- N` for N calls each).

use ahp_host::EffectKind;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};

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
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);

    let mut raw = Vec::with_capacity(n);
    let mut hook = Vec::with_capacity(n);
    let mut alone = Vec::with_capacity(n);
    for round in 0..(n + n / 10) {
        let warmup = round < n / 10;
        let t = Instant::now();
        let req = Request::post("/hooks")
            .header("content-type", "application/json")
            .header("host", addr.to_string())
            .body(Full::new(Bytes::from(request_body.clone())))
            .unwrap();
        sender.ready().await.unwrap();
        let resp = sender.send_request(req).await.unwrap();
        let _ = resp.into_body().collect().await.unwrap();
        let raw_t = t.elapsed();
        let t = Instant::now();
        let settled = interceptor
            .intercept(EVENT, &[EffectKind::Deny], None)
            .await
            .unwrap();
        let hook_t = t.elapsed();
        assert_eq!(settled.decision, ahp_host::Decision::Allow);
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
    interceptor.shutdown();
}

fn stats(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (
        us(samples[samples.len() / 2]),
        us(samples[samples.len() * 99 / 100]),
    )
}

async fn serve() -> std::net::SocketAddr {
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
