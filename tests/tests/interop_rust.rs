//! Interop with the official Rust AHP SDK (`agenthooksprotocol` 0.10.1) as a backend:
//! the real component and host against an independently written server, over HTTP (with
//! and without bearer auth) and over stdio in both lifecycles. The scenarios and their
//! assertions are the shared peer contract (`ahp_tests::peers`); this file says how the
//! peer is launched and checks what it reports.
//!
//! The peer is `tests/rust-sdk-peer`, its own crate and workspace (the SDK switches
//! serde_json features, which must not reach this workspace), built by `tests/build.rs`
//! into `RUST_SDK_PEER`. In HTTP mode it reports each answer's status and body size, and
//! exits when its stdin closes, so a test also sees what the SDK sent. Unlike the Python
//! peer, nothing here is optional: these tests always run.
//!
//! Found by running it: the SDK answers a failing callback with HTTP 500 (not 400) and
//! JSON-RPC error -32004, and an observe notification with a bodyless 204.

use ahp_tests::peers::{self, HttpPeer, Peer};
use serde_json::json;

/// The Rust SDK peer: `rust-sdk-peer http|stdio`.
fn peer() -> Peer {
    Peer {
        name: "rust peer",
        tag: "rs",
        id: "com.example.rust",
        deny_reason: "rust peer denies rm -rf",
        program: env!("RUST_SDK_PEER").to_owned(),
        args: Vec::new(),
    }
}

/// One answer of the HTTP peer: status and body size in bytes.
type Answer = (u16, usize);

/// Stops the HTTP peer and returns every answer it sent, in order. Complete: each is
/// reported (`ANSWER <status> <body bytes>`) before its response is sent, and the list
/// arrives only at EOF on the peer's stdout.
fn answers(server: HttpPeer) -> Vec<Answer> {
    let parse = |line: &str| {
        let (status, size) = line.strip_prefix("ANSWER ")?.split_once(' ')?;
        Some((status.parse().ok()?, size.parse().ok()?))
    };
    server
        .finish()
        .iter()
        .map(|line| parse(line).unwrap_or_else(|| panic!("unexpected peer line {line:?}")))
        .collect()
}

fn statuses(server: HttpPeer) -> Vec<u16> {
    answers(server).iter().map(|(status, _)| *status).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_allow_is_no_objection() {
    let server = peers::http_allow_is_no_objection(&peer()).await;
    assert_eq!(statuses(server), [200]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_deny_is_a_backend_deny_with_the_peer_reason() {
    let server = peers::http_deny_is_a_backend_deny_with_the_peer_reason(&peer()).await;
    assert_eq!(statuses(server), [200]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_bearer_token_is_accepted() {
    let server = peers::http_bearer_token_is_accepted(&peer()).await;
    assert_eq!(statuses(server), [200, 200]);
}

/// The SDK refuses a credential before any JSON-RPC processing: its `Authenticator`
/// error becomes a bodyless HTTP 401 (no JSON-RPC error object, so no code). The
/// component reads 401 as a rejected credential, acquires the token once more (the same
/// wrong one, from the environment), is refused again, and records `auth-failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_wrong_bearer_token_is_auth_failed_and_fails_closed() {
    let server = peers::http_wrong_bearer_token_is_auth_failed_and_fails_closed(&peer()).await;
    // What the peer did: refused both attempts, bodyless.
    assert_eq!(answers(server), [(401, 0), (401, 0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_persistent_allows_and_denies() {
    peers::stdio_persistent_allows_and_denies(&peer()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_per_event_allows_and_denies() {
    peers::stdio_per_event_allows_and_denies(&peer()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_claude_code_is_decided_by_the_peer() {
    peers::hook_claude_code_is_decided_by_the_peer(&peer()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_ask_and_modify_are_settled_as_the_peer_answers() {
    let server = peers::http_ask_and_modify_are_settled_as_the_peer_answers(&peer()).await;
    assert_eq!(statuses(server), [200, 200]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_ask_and_modify_are_settled_as_the_peer_answers() {
    peers::stdio_ask_and_modify_are_settled_as_the_peer_answers(&peer()).await;
}

/// The SDK answers a callback's error with JSON-RPC error -32004 (backend internal
/// error) carried by HTTP 500: the component classifies it by the status, `http-status`,
/// and records the code it read from the body as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_failing_callback_fails_closed() {
    let failure =
        json!({"class": "http-status", "phase": "parse", "httpStatus": 500, "rpcCode": -32004});
    let server = peers::http_failing_callback_fails_closed(&peer(), failure).await;
    assert_eq!(statuses(server), [500]);
}

/// Over stdio the same error has no status to carry it: `jsonrpc-error`, code -32004.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_failing_callback_fails_closed() {
    peers::stdio_failing_callback_fails_closed(&peer()).await;
}

/// The notification is answered 204, with no body; that it reached the handler is the
/// peer's log line, checked by the scenario.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_observe_reaches_the_peer_handler() {
    let server = peers::http_observe_reaches_the_peer_handler(&peer()).await;
    assert_eq!(statuses(server), [204]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_observe_reaches_the_peer_handler() {
    peers::stdio_observe_reaches_the_peer_handler(&peer()).await;
}
