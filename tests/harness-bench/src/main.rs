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

// The loopback backend, raw POST, hook call and figures, shared with
// `host/benches/hook_call.rs`.
#[allow(dead_code)] // shared by the benches; this one uses a part
#[path = "../../../host/benches/loopback/mod.rs"]
mod loopback;

use ahp_host::{Interceptor, Options};
use loopback::{
    backend_thread, connect, first_body, hook, post, print_ratio, registration, throughput, timed,
    Rows, CONCURRENCY,
};
use std::net::SocketAddr;

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
    let registration = registration(&url);
    let interceptor = Interceptor::new(&registration, Options::default())
        .await
        .expect("build the interceptor");
    // The first call goes through the component, so the raw row sends its exact bytes.
    hook(&interceptor).await;
    let body = first_body();
    let mut raw = connect(addr).await;
    #[cfg(feature = "sdk")]
    let sdk = sdk_row::client(addr, &url).await;

    #[allow(unused_mut)] // the SDK row is a feature
    let mut names = vec![
        "raw keep-alive POST (hyper)",
        "hook call through the component",
    ];
    #[cfg(feature = "sdk")]
    names.push("Rust SDK harness client (0.10.1)");
    let mut rows = Rows::new(names, n);
    while rows.more() {
        #[allow(unused_mut)] // the SDK row is a feature
        let mut times = vec![
            timed(post(&mut raw, addr, body.clone())).await.1,
            timed(hook(&interceptor)).await.1,
        ];
        #[cfg(feature = "sdk")]
        times.push(timed(sdk_row::call(&sdk)).await.1);
        rows.record(times);
    }
    let figures = rows.report(&format!(
        "current-thread harness, backend on its own thread, loopback; {n} calls per row, interleaved"
    ));
    for (name, figure) in ["hook call through the component", "Rust SDK harness client"]
        .iter()
        .zip(&figures[1..])
    {
        print_ratio(&format!("ratio to raw: {name}"), *figure, figures[0]);
    }
    throughput(&interceptor, addr, &body, n.max(CONCURRENCY)).await;
    interceptor.shutdown_async().await;
}

/// The Rust SDK row: its harness client, over the same kind of connection as the raw row.
#[cfg(feature = "sdk")]
mod sdk_row {
    use crate::loopback::{connect, post, EVENT};
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
        // The SDK's bundled draft schemas require the harness's identity on tool.before,
        // and it checks its own request against them before sending.
        object.insert(
            "harness".into(),
            json!({"name": "ahp-harness-bench", "version": "0.1.0"}),
        );
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
