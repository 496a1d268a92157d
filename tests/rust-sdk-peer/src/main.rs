//! An AHP backend built on the official Rust SDK (`agenthooksprotocol` 0.10.1): an
//! independently written server for `tests/tests/interop_rust.rs`.
//!
//! Its policy, as SDK handlers, by what the `tool.input.command` of a `tool.before`
//! contains: `rm -rf` is denied with [`DENY_REASON`]; `git push` is an `ask`; `sudo ` is a
//! `modify` replacing the input with the command minus `sudo `; `crash` makes the
//! callback fail (the SDK answers a JSON-RPC error); anything else has no effect.
//!
//! With a `LOG` path after the mode, an observe handler appends
//! `OBSERVED <event type> <event id>` to that file for every notification the SDK accepts.
//!
//! - `rust-sdk-peer stdio [LOG]`: one JSON-RPC frame per line on stdin/stdout until EOF,
//!   so it serves both stdio lifecycles.
//! - `rust-sdk-peer http [LOG]`: serves `POST /hooks` on `127.0.0.1:<free port>` through the
//!   SDK's axum adapter. It prints `PORT <n>` on stdout once listening, then
//!   `ANSWER <status> <body bytes>` for every request before sending the response, and
//!   exits when its stdin reaches EOF (so it never outlives the test that started it).
//!   When `AHP_PEER_TOKEN` is set, the SDK's `Authenticator` accepts exactly
//!   `Authorization: Bearer <that token>`; the SDK answers anything else with a bodyless
//!   401.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use agenthooksprotocol::adapters::{axum as ahp_axum, stdio};
use agenthooksprotocol::generated::JsonValue;
use agenthooksprotocol::server::{
    callback, AnyObserveContext, Authenticator, HandlerSet, Principal, Server, ToolBeforeContext,
};
use agenthooksprotocol::{
    AskEffect, DenyEffect, ToolBeforeEffect, ToolBeforeEvent, ToolBeforeModifyEffect,
    ToolBeforeModifyEffectOperationReplace, ToolBeforeModifyEffectValue,
};
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

/// The peer's policy: one `tool.before` interceptor and, given a log, an observer.
fn handlers(log: Option<PathBuf>) -> HandlerSet {
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
            let reply = ctx.reply();
            if command.contains("rm -rf") {
                Ok(reply.effect(ToolBeforeEffect::from(DenyEffect::new(DENY_REASON))))
            } else if command.contains("git push") {
                Ok(reply.effect(ToolBeforeEffect::from(AskEffect::new())))
            } else if command.contains("sudo ") {
                let mut input = ToolBeforeModifyEffectValue::new();
                input
                    .additional_properties
                    .insert("command".into(), command.replace("sudo ", "").into());
                let replace = ToolBeforeModifyEffectOperationReplace::new();
                Ok(
                    reply.effect(ToolBeforeEffect::from(ToolBeforeModifyEffect::new(
                        replace, input,
                    ))),
                )
            } else if command.contains("crash") {
                Err("rust peer callback crashed".into())
            } else {
                Ok(reply)
            }
        },
    ));
    if let Some(log) = log {
        handlers.observe.any = Some(callback(move |ctx: AnyObserveContext, _| {
            let log = log.clone();
            async move { record_observed(&log, &ctx.request()["params"]["event"]) }
        }));
    }
    handlers
}

/// Appends `OBSERVED <type> <id>` for an observed `event` to `log`.
fn record_observed(log: &Path, event: &JsonValue) -> Result<(), String> {
    let word = |member: &str| event[member].as_str().unwrap_or("?").to_owned();
    let line = format!("OBSERVED {} {}\n", word("type"), word("id"));
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut file| file.write_all(line.as_bytes()))
        .map_err(|error| format!("log {}: {error}", log.display()))
}

fn server(token: Option<String>, log: Option<PathBuf>) -> Server<Credentials> {
    Server {
        handlers: handlers(log),
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

async fn serve_stdio(log: Option<PathBuf>) -> std::io::Result<()> {
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let server = server(None, log);
    stdio::serve_tokio(&server, stdin, tokio::io::stdout(), None, MAX_BYTES).await
}

async fn serve_http(log: Option<PathBuf>) -> std::io::Result<()> {
    let server = Arc::new(server(std::env::var("AHP_PEER_TOKEN").ok(), log));
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    let log = args.get(1).map(PathBuf::from);
    let served = match args.first().map(String::as_str) {
        Some("stdio") if args.len() <= 2 => serve_stdio(log).await,
        Some("http") if args.len() <= 2 => serve_http(log).await,
        _ => {
            eprintln!("usage: rust-sdk-peer http|stdio [LOG]");
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
