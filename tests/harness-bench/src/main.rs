//! A hook call as an independent harness makes it: its own tokio current-thread runtime,
//! `ahp-host` as a library, the policy backend on its own OS thread. Rows, interleaved
//! round by round against the same backend:
//!
//! - a raw keep-alive POST (hyper) of the exact bytes the component sends, twice: after
//!   the round before's last call, and after a raw POST (the floor the target is read
//!   against, as `hook_call`'s is);
//! - the hook call through the component (`Interceptor::intercept`);
//! - with the `sdk` feature, the official Rust SDK's harness client (`agenthooksprotocol`
//!   0.10.1, `Client::tool_before` over its `HttpHook`), on a keep-alive hyper transport
//!   like the raw row's, so the row measures the SDK and not a different HTTP client;
//!
//! - with `--split`, the hook call over the raw row's kind of connection, the bench's own
//!   (an injected transport, `OverBenchConnection`), and that call split into its parts:
//!   the component's and host's work before the POST, the POST, and their work after
//!   the reply. The host's HTTP client is then the difference to the hook call's row;
//!
//! then throughput at concurrency 8 (decisions/s), raw and hook rounds alternating.
//!
//! `cargo run --release --locked --manifest-path tests/harness-bench/Cargo.toml
//! [--features sdk] -- [N] [--split]` (N calls per row, default 3000).

// The loopback backend, raw POST, hook call and figures, shared with
// `host/benches/hook_call.rs`.
#[allow(dead_code)] // shared by the benches; this one uses a part
#[path = "../../../host/benches/loopback/mod.rs"]
mod loopback;

use ahp_host::{Interceptor, Options, Transport};
use loopback::{
    backend_thread, connect, first_body, hook, post, print_ratio, registration, throughput, timed,
    OverBenchConnection, Rows, CONCURRENCY,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .filter_map(|a| a.parse().ok())
        .next()
        .unwrap_or(3_000);
    let split = std::env::args().any(|a| a == "--split");
    let addr = backend_thread();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build the harness runtime")
        .block_on(run(n, addr, split));
}

async fn run(n: usize, addr: SocketAddr, split: bool) {
    let url = format!("http://{addr}/hooks");
    let registration = registration(&url);
    let interceptor = Interceptor::new(&registration, Options::default())
        .await
        .expect("build the interceptor");
    // The first call goes through the component, so the raw row sends its exact bytes.
    hook(&interceptor).await;
    let body = first_body();
    let mut raw = connect(addr).await;
    let over = match split {
        true => Some(SplitRow::new(addr, &registration).await),
        false => None,
    };
    #[cfg(feature = "sdk")]
    let sdk = sdk_row::client(addr, &url).await;

    // Two raw POSTs a round: the first comes after the round before's last call, a hook
    // call (whose work evicts the network path's code and data:
    // host/benches/after_component.rs),
    // the second after a raw POST, as the hook call does. The target is read against
    // the second, as `hook_call`'s is.
    let mut names = vec![
        "raw keep-alive POST (hyper)",
        "raw keep-alive POST after a raw POST",
        "hook call through the component",
    ];
    if over.is_some() {
        names.extend(SplitRow::NAMES);
    }
    #[cfg(feature = "sdk")]
    names.push("Rust SDK harness client (0.10.1)");
    let mut rows = Rows::new(names, n);
    while rows.more() {
        let mut times = vec![
            timed(post(&mut raw, addr, body.clone())).await.1,
            timed(post(&mut raw, addr, body.clone())).await.1,
            timed(hook(&interceptor)).await.1,
        ];
        if let Some(over) = &over {
            times.extend(over.call().await);
        }
        #[cfg(feature = "sdk")]
        times.push(timed(sdk_row::call(&sdk)).await.1);
        rows.record(times);
    }
    let figures = rows.report(&format!(
        "current-thread harness, backend on its own thread, loopback; {n} calls per row, interleaved"
    ));
    let mut ratios = vec![(2, "hook call through the component")];
    if over.is_some() {
        ratios.push((3, "hook call over the bench's connection"));
    }
    #[cfg(feature = "sdk")]
    ratios.push((figures.len() - 1, "Rust SDK harness client"));
    for (row, name) in ratios {
        print_ratio(
            &format!("ratio to raw after raw (the target's): {name}"),
            figures[row],
            figures[1],
        );
        print_ratio(&format!("ratio to raw: {name}"), figures[row], figures[0]);
    }
    throughput(&interceptor, addr, &body, n.max(CONCURRENCY)).await;
    interceptor.shutdown_async().await;
}

/// The `--split` rows: a hook call whose transport is the bench's own connection, and
/// its three parts.
struct SplitRow {
    interceptor: Interceptor,
    transport: Arc<OverBenchConnection>,
}

impl SplitRow {
    const NAMES: [&'static str; 4] = [
        "hook call over the bench's connection",
        "  its component and host before the POST",
        "  its POST (the raw row's)",
        "  its component and host after the reply",
    ];

    async fn new(addr: SocketAddr, registration: &str) -> SplitRow {
        let transport = Arc::new(OverBenchConnection::new(addr).await);
        let mut options = Options::default();
        let injected: Arc<dyn Transport> = transport.clone();
        options.transports.insert("dev.ahp.bench".into(), injected);
        let interceptor = Interceptor::new(registration, options)
            .await
            .expect("build the interceptor over the bench's connection");
        SplitRow {
            interceptor,
            transport,
        }
    }

    /// One hook call: its time, then its parts' ([`SplitRow::NAMES`]).
    async fn call(&self) -> [std::time::Duration; 4] {
        let started = Instant::now();
        hook(&self.interceptor).await;
        let ended = Instant::now();
        let (handed, read) = self.transport.take_last().expect("the call made its POST");
        [
            ended - started,
            handed - started,
            read - handed,
            ended - read,
        ]
    }
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
