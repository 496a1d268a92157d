//! The demo's built-in policy backend, on loopback.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;

/// How long the `/slow` route sleeps: longer than any scripted timeout.
const SLOW: Duration = Duration::from_millis(1_500);

/// The built-in backend: `/policy` denies recursive deletion and allows the rest,
/// `/slow` answers after [`SLOW`], `/garbled` answers with broken JSON.
pub(super) async fn serve() -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        while let Ok((stream, _)) = listener.accept().await {
            connections.spawn(async move {
                let service = hyper::service::service_fn(answer);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((addr, task))
}

async fn answer(
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let route = request.uri().path().trim_start_matches('/').to_string();
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = message["id"].clone();
    let reply = match route.as_str() {
        "slow" => {
            tokio::time::sleep(SLOW).await;
            no_effect(&id)
        }
        "garbled" => br#"{"jsonrpc":"2.0","id":"#.to_vec(),
        _ => {
            let command = message["params"]["event"]["tool"]["input"]["command"]
                .as_str()
                .unwrap_or("");
            if command.contains("rm -rf") {
                let deny =
                    json!({"type": "deny", "reason": "Recursive deletion needs a human review."});
                json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "draft", "effects": [deny]}})
                    .to_string()
                    .into_bytes()
            } else {
                no_effect(&id)
            }
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(reply)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

fn no_effect(id: &Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "draft", "effects": []}})
        .to_string()
        .into_bytes()
}
