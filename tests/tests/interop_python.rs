//! Interop with the official Python AHP SDK (`agenthooksprotocol` 0.10.1) as a backend:
//! the real component and host against `tests/peers/python_backend.py`, an independently
//! written server, over HTTP (with and without bearer auth) and over stdio in both
//! lifecycles. The scenarios and their assertions are the shared peer contract
//! (`ahp_tests::peers`); this file says how the peer is launched.
//!
//! The interpreter comes from `AHP_PYTHON`, else `<workspace>/.venv-peers/bin/python`;
//! with neither, every test fails naming the install step (the README's test command
//! makes the venv), unless `AHP_SKIP_PEERS=1` says to skip them: then each prints
//! `SKIPPED` and passes. An `AHP_PYTHON` that names no file is a misconfiguration and
//! fails. In HTTP mode the peer reports, after its port, the SDK version it loaded, and
//! exits when its stdin closes.

use std::io::Write;
use std::path::{Path, PathBuf};

use ahp_tests::peers::{self, Peer};
use serde_json::json;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/python_backend.py");
/// The exact versions the peer's venv is installed from.
const REQUIREMENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/requirements.txt");

/// The peer's interpreter, or `None` (after a visible message) when it is not installed.
fn python(test: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("AHP_PYTHON") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "AHP_PYTHON={} is not a file",
            path.display()
        );
        return Some(path);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is inside the workspace");
    let default = workspace.join(".venv-peers/bin/python");
    if default.is_file() {
        return Some(default);
    }
    // A missing install step must not pass unseen: skipping is asked for by name.
    assert!(
        std::env::var_os("AHP_SKIP_PEERS").is_some_and(|v| v == "1"),
        "python peer not installed: create {} as the README's test command does (or set \
         AHP_PYTHON; AHP_SKIP_PEERS=1 skips these tests): {test}",
        default.display()
    );
    // Straight to stderr: the test harness captures `eprintln!` of passing tests, and a
    // skip must be seen.
    let _ = writeln!(
        std::io::stderr().lock(),
        "SKIPPED: python peer not installed (set AHP_PYTHON or create {}): {test}",
        default.display()
    );
    None
}

/// The Python SDK peer, `<python> python_backend.py http|stdio`, or `None` when no
/// interpreter is installed.
fn peer(test: &str) -> Option<Peer> {
    let python = python(test)?;
    Some(Peer {
        name: "python peer",
        tag: "py",
        id: "com.example.python",
        deny_reason: "python peer denies rm -rf",
        program: python
            .to_str()
            .expect("a UTF-8 interpreter path")
            .to_owned(),
        args: vec![SCRIPT.to_owned()],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_allow_is_no_objection() {
    if let Some(peer) = peer("http_allow_is_no_objection") {
        peers::http_allow_is_no_objection(&peer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_deny_is_a_backend_deny_with_the_peer_reason() {
    if let Some(peer) = peer("http_deny_is_a_backend_deny_with_the_peer_reason") {
        peers::http_deny_is_a_backend_deny_with_the_peer_reason(&peer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_bearer_token_is_accepted() {
    if let Some(peer) = peer("http_bearer_token_is_accepted") {
        peers::http_bearer_token_is_accepted(&peer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_wrong_bearer_token_is_auth_failed_and_fails_closed() {
    if let Some(peer) = peer("http_wrong_bearer_token_is_auth_failed_and_fails_closed") {
        peers::http_wrong_bearer_token_is_auth_failed_and_fails_closed(&peer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_persistent_allows_and_denies() {
    if let Some(peer) = peer("stdio_persistent_allows_and_denies") {
        peers::stdio_persistent_allows_and_denies(&peer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_per_event_allows_and_denies() {
    if let Some(peer) = peer("stdio_per_event_allows_and_denies") {
        peers::stdio_per_event_allows_and_denies(&peer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_claude_code_is_decided_by_the_peer() {
    if let Some(peer) = peer("hook_claude_code_is_decided_by_the_peer") {
        peers::hook_claude_code_is_decided_by_the_peer(&peer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_ask_and_modify_are_settled_as_the_peer_answers() {
    if let Some(peer) = peer("http_ask_and_modify_are_settled_as_the_peer_answers") {
        peers::http_ask_and_modify_are_settled_as_the_peer_answers(&peer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_ask_and_modify_are_settled_as_the_peer_answers() {
    if let Some(peer) = peer("stdio_ask_and_modify_are_settled_as_the_peer_answers") {
        peers::stdio_ask_and_modify_are_settled_as_the_peer_answers(&peer).await;
    }
}

/// The SDK answers a raising callback with JSON-RPC error -32004 (backend internal
/// error) in an HTTP 200: `jsonrpc-error`, with the code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_failing_callback_fails_closed() {
    if let Some(peer) = peer("http_failing_callback_fails_closed") {
        let failure = json!({"class": "jsonrpc-error", "phase": "parse", "rpcCode": -32004});
        peers::http_failing_callback_fails_closed(&peer, failure).await;
    }
}

/// Over stdio the same error, recorded the same; the peer keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_failing_callback_fails_closed() {
    if let Some(peer) = peer("stdio_failing_callback_fails_closed") {
        peers::stdio_failing_callback_fails_closed(&peer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_observe_reaches_the_peer_handler() {
    if let Some(peer) = peer("http_observe_reaches_the_peer_handler") {
        peers::http_observe_reaches_the_peer_handler(&peer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_observe_reaches_the_peer_handler() {
    if let Some(peer) = peer("stdio_observe_reaches_the_peer_handler") {
        peers::stdio_observe_reaches_the_peer_handler(&peer).await;
    }
}

/// The peer runs the SDK version `tests/peers/requirements.txt` pins: its HTTP mode prints
/// `SDK <version>` (from `importlib.metadata`) after its port, and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_loads_the_sdk_version_requirements_pins() {
    if let Some(peer) = peer("the_peer_loads_the_sdk_version_requirements_pins") {
        let requirements = std::fs::read_to_string(REQUIREMENTS).expect("requirements.txt");
        let pinned = requirements
            .lines()
            .find_map(|line| line.strip_prefix("agenthooksprotocol[http]=="))
            .expect("requirements.txt pins agenthooksprotocol[http] exactly");
        let server = peers::http_allow_is_no_objection(&peer).await;
        assert_eq!(server.finish(), [format!("SDK {}", pinned.trim())]);
    }
}
