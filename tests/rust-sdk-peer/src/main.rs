//! An AHP backend built on the official Rust SDK (`agenthooksprotocol` 0.10.1): an
//! independently written server for `tests/tests/interop_rust.rs`.
//!
//! Its policy, as SDK handlers: deny a `tool.before` whose `tool.input.command` contains
//! `rm -rf`, with [`DENY_REASON`]; answer anything else with no effect.
//!
//! - `rust-sdk-peer stdio`: one JSON-RPC frame per line on stdin/stdout until EOF, so it
//!   serves both stdio lifecycles.
//! - `rust-sdk-peer http`: serves `POST /hooks` on `127.0.0.1:<free port>` through the
//!   SDK's axum adapter. It prints `PORT <n>` on stdout once listening, then
//!   `ANSWER <status> <body bytes>` for every request before sending the response, and
//!   exits when its stdin reaches EOF (so it never outlives the test that started it).
//!   When `AHP_PEER_TOKEN` is set, the SDK's `Authenticator` accepts exactly
//!   `Authorization: Bearer <that token>`; the SDK answers anything else with a bodyless
//!   401.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use agenthooksprotocol::adapters::{axum as ahp_axum, stdio};
use agenthooksprotocol::server::{
    callback, Authenticator, HandlerSet, Principal, Server, ToolBeforeContext,
};
use agenthooksprotocol::{DenyEffect, ToolBeforeEffect, ToolBeforeEvent};
use axum::body::Body;
use axum::http::Request;
use tokio::io::AsyncReadExt;

/// The reason the peer gives for its denials.
const DENY_REASON: &str = "rust peer denies rm -rf";

/// Largest frame (stdio) or body (HTTP) the peer accepts.
const MAX_BYTES: usize = 1 << 20;

/// Who may call: anyone, or only the holder of one bearer token.
struct Credentials {
    token: Option<String>,
}

impl Authenticator for Credentials {
    fn authenticate(&self, authorization: Option<&str>) -> Result<Principal, String> {
        let Some(token) = &self.token else {
            return Ok(Principal {
                subject: "anyone".into(),
            });
        };
        match authorization.and_then(|value| value.strip_prefix("Bearer ")) {
            Some(presented) if presented == token => Ok(Principal {
                subject: "bearer".into(),
            }),
            _ => Err("unknown credential".into()),
        }
    }
}

/// The peer's policy: one `tool.before` interceptor.
fn handlers() -> HandlerSet {
    let mut handlers = HandlerSet::default();
    handlers.intercept.tool_before = Some(callback(
        |ctx: ToolBeforeContext, event: ToolBeforeEvent| async move {
            let command = event
                .tool
                .input
                .additional_properties
                .get("command")
                .and_then(|command| command.as_str())
                .unwrap_or_default();
            if command.contains("rm -rf") {
                Ok(ctx
                    .reply()
                    .effect(ToolBeforeEffect::from(DenyEffect::new(DENY_REASON))))
            } else {
                Ok(ctx.reply())
            }
        },
    ));
    handlers
}

fn server(token: Option<String>) -> Server<Credentials> {
    Server {
        handlers: handlers(),
        authenticator: Credentials { token },
        max_body_bytes: MAX_BYTES,
    }
}

/// One line on stdout, flushed at once. A closed stdout (the test is gone) is ignored:
/// the stdin watch ends the process.
fn announce(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
}

async fn serve_stdio() -> std::io::Result<()> {
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    stdio::serve_tokio(&server(None), stdin, tokio::io::stdout(), None, MAX_BYTES).await
}

async fn serve_http() -> std::io::Result<()> {
    let server = Arc::new(server(std::env::var("AHP_PEER_TOKEN").ok()));
    let route = axum::routing::post(move |request: Request<Body>| {
        let server = server.clone();
        async move {
            let response = ahp_axum::handle(&*server, request).await;
            // Buffer the body to report its size, then hand the same bytes on.
            let (parts, body) = response.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX)
                .await
                .unwrap_or_default();
            announce(&format!("ANSWER {} {}", parts.status.as_u16(), bytes.len()));
            axum::response::Response::from_parts(parts, Body::from(bytes))
        }
    });
    let router = axum::Router::new().route("/hooks", route);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    announce(&format!("PORT {}", listener.local_addr()?.port()));
    tokio::select! {
        served = axum::serve(listener, router) => served,
        () = stdin_closed() => Ok(()),
    }
}

/// Resolves when stdin reaches EOF or fails: the parent closed it or died.
async fn stdin_closed() {
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 256];
    while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let served = match std::env::args().nth(1).as_deref() {
        Some("stdio") => serve_stdio().await,
        Some("http") => serve_http().await,
        _ => {
            eprintln!("usage: rust-sdk-peer http|stdio");
            return ExitCode::from(64);
        }
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("rust-sdk-peer: {error}");
            ExitCode::FAILURE
        }
    }
}
