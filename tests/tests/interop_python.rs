//! Interop with the official Python AHP SDK (`agenthooksprotocol` 0.10.1) as a backend:
//! the real component and host against `tests/peers/python_backend.py`, an independently
//! written server, over HTTP (with and without bearer auth) and over stdio in both
//! lifecycles.
//!
//! The interpreter comes from `AHP_PYTHON`, else `<workspace>/.venv-peers/bin/python`;
//! with neither, every test prints `SKIPPED` and passes. An `AHP_PYTHON` that names no
//! file is a misconfiguration and fails.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ahp_host::{DecidedBy, Decision, Interceptor, Settlement};
use ahp_tests::support::{event, interceptor, registration, Http};
use serde_json::{json, Value};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/python_backend.py");
const ID: &str = "com.example.python";
const DENY_REASON: &str = "python peer denies rm -rf";
const SYNTHETIC_REASON: &str = "Required policy backend unavailable.";
/// Generous: the interpreter starts in ~700 ms, and a per-event child starts every call.
const PY_TIMEOUT_MS: u64 = 5_000;

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
    // Straight to stderr: the test harness captures `eprintln!` of passing tests, and a
    // skip must be seen.
    let _ = writeln!(
        std::io::stderr().lock(),
        "SKIPPED: python peer not installed (set AHP_PYTHON or create {}): {test}",
        default.display()
    );
    None
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// A `tool.before` event whose Bash command is `command`.
///
/// It carries `harness`, which the draft `tool-before.schema.json` bundled with the SDK
/// requires (and `support::event` omits): the peer validates every request against that
/// schema and answers an event without it with JSON-RPC error -32602.
fn tool_event(id: &str, command: &str) -> String {
    let mut value: Value = serde_json::from_str(&event(id)).expect("support::event is JSON");
    value["tool"]["input"]["command"] = json!(command);
    value["harness"] = json!({"name": "ahp-e2e", "version": "0.1.0"});
    value.to_string()
}

async fn call(hooks: &Interceptor, id: &str, command: &str) -> Settlement {
    hooks
        .intercept(&tool_event(id, command), &["deny"], None)
        .await
        .expect("a valid event settles")
}

/// The single interceptor entry of a settlement record.
fn only_interceptor(settled: &Settlement) -> &Value {
    let interceptors = settled.record["interceptors"]
        .as_array()
        .expect("interceptors is an array");
    assert_eq!(
        interceptors.len(),
        1,
        "one interceptor in {}",
        settled.record
    );
    &interceptors[0]
}

/// The peer answered without objection.
fn assert_allowed(settled: &Settlement, case: &str) {
    let record = &settled.record;
    assert_eq!(
        (
            settled.decision,
            settled.decided_by,
            settled.reason.as_deref()
        ),
        (Decision::Allow, DecidedBy::NoObjection, None),
        "{case}: {record}"
    );
    assert_eq!(
        record["decidedBy"],
        json!("no-objection"),
        "{case}: {record}"
    );
    let entry = only_interceptor(settled);
    assert_eq!(entry["outcome"], json!("no-effect"), "{case}: {record}");
    assert_eq!(entry.get("failure"), None, "{case}: {record}");
}

/// The peer explicitly denied, with its own reason.
fn assert_denied(settled: &Settlement, case: &str) {
    let record = &settled.record;
    assert_eq!(
        (
            settled.decision,
            settled.decided_by,
            settled.reason.as_deref()
        ),
        (Decision::Deny, DecidedBy::BackendDeny, Some(DENY_REASON)),
        "{case}: {record}"
    );
    assert_eq!(
        record["decidedBy"],
        json!("backend-deny"),
        "{case}: {record}"
    );
    let entry = only_interceptor(settled);
    assert_eq!(entry["outcome"], json!("deny"), "{case}: {record}");
    assert_eq!(entry.get("failure"), None, "{case}: {record}");
}

/// The Python peer serving HTTP; killed and reaped on drop.
struct HttpPeer {
    child: Child,
    port: u16,
}

impl HttpPeer {
    /// Starts the peer (requiring `token` as a bearer token when given) and waits for its
    /// `PORT <n>` line.
    fn start(python: &Path, token: Option<&str>) -> HttpPeer {
        let mut command = Command::new(python);
        command
            .arg(SCRIPT)
            .arg("http")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .env_remove("AHP_PEER_TOKEN");
        if let Some(token) = token {
            command.env("AHP_PEER_TOKEN", token);
        }
        let mut child = command.spawn().expect("the python peer starts");
        let stdout = child.stdout.take().expect("piped stdout");
        // Guard from here on, so a failed start still kills the process.
        let mut peer = HttpPeer { child, port: 0 };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let read = reader.read_line(&mut line).map(|_| line);
            let _ = tx.send(read);
            // Keep draining so the peer never blocks on a full pipe.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the python peer announced its port within 30 s")
            .expect("the python peer's stdout is readable");
        peer.port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("expected `PORT <n>` from the python peer, got {line:?}"));
        peer
    }

    async fn spawn(python: PathBuf, token: Option<&'static str>) -> HttpPeer {
        tokio::task::spawn_blocking(move || HttpPeer::start(&python, token))
            .await
            .expect("the peer start task completed")
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hooks", self.port)
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One stdio hook running the Python peer, fail-closed.
fn stdio_registration(python: &Path, lifecycle: &str) -> String {
    json!({
        "protocolVersion": "draft",
        "hooks": [{
            "id": ID,
            "transport": {
                "type": "stdio",
                "command": path_str(python),
                "args": [SCRIPT, "stdio"],
                "lifecycle": lifecycle
            },
            "subscriptions": [{
                "events": ["tool.before"], "mode": "intercept",
                "timeoutMs": PY_TIMEOUT_MS, "failurePolicy": "fail-closed",
                "content": {"default": "metadata"}
            }]
        }]
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_allow_is_no_objection() {
    let Some(python) = python("http_allow_is_no_objection") else {
        return;
    };
    let peer = HttpPeer::spawn(python, None).await;
    let hooks = interceptor(&registration(&[
        Http::new(ID, peer.url()).timeout_ms(PY_TIMEOUT_MS)
    ]))
    .await;
    let settled = call(&hooks, "evt_py_http_allow", "make test").await;
    hooks.shutdown();
    assert_allowed(&settled, "http allow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_deny_is_a_backend_deny_with_the_peer_reason() {
    let Some(python) = python("http_deny_is_a_backend_deny_with_the_peer_reason") else {
        return;
    };
    let peer = HttpPeer::spawn(python, None).await;
    let hooks = interceptor(&registration(&[
        Http::new(ID, peer.url()).timeout_ms(PY_TIMEOUT_MS)
    ]))
    .await;
    let settled = call(&hooks, "evt_py_http_deny", "rm -rf /").await;
    hooks.shutdown();
    assert_denied(&settled, "http deny");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_bearer_token_is_accepted() {
    let Some(python) = python("http_bearer_token_is_accepted") else {
        return;
    };
    let name = "AHP_E2E_PY_BEARER_ACCEPTED";
    let token = "tok-py-accepted-3b81e0";
    std::env::set_var(name, token);
    let peer = HttpPeer::spawn(python, Some(token)).await;
    let hooks = interceptor(&registration(&[Http::new(ID, peer.url())
        .timeout_ms(PY_TIMEOUT_MS)
        .token_env(name)]))
    .await;
    let allowed = call(&hooks, "evt_py_bearer_allow", "make test").await;
    let denied = call(&hooks, "evt_py_bearer_deny", "rm -rf /").await;
    hooks.shutdown();
    assert_allowed(&allowed, "bearer allow");
    assert_denied(&denied, "bearer deny");
    for settled in [&allowed, &denied] {
        assert!(
            !settled.record.to_string().contains(token),
            "token in the record: {}",
            settled.record
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_wrong_bearer_token_is_auth_failed_and_fails_closed() {
    let Some(python) = python("http_wrong_bearer_token_is_auth_failed_and_fails_closed") else {
        return;
    };
    let name = "AHP_E2E_PY_BEARER_REJECTED";
    let token = "tok-py-wrong-c4a912";
    std::env::set_var(name, token);
    let peer = HttpPeer::spawn(python, Some("tok-py-right-77d0f5")).await;
    let hooks = interceptor(&registration(&[Http::new(ID, peer.url())
        .policy("fail-closed")
        .timeout_ms(PY_TIMEOUT_MS)
        .token_env(name)]))
    .await;
    // A command the peer would allow: any deny comes from the rejected credential.
    let settled = call(&hooks, "evt_py_bearer_wrong", "make test").await;
    hooks.shutdown();
    let record = &settled.record;
    assert_eq!(
        (
            settled.decision,
            settled.decided_by,
            settled.reason.as_deref()
        ),
        (
            Decision::Deny,
            DecidedBy::SyntheticDeny,
            Some(SYNTHETIC_REASON)
        ),
        "{record}"
    );
    let entry = only_interceptor(&settled);
    assert_eq!(entry["outcome"], json!("failed-closed"), "{record}");
    assert_eq!(
        entry["failure"],
        json!({"class": "auth-failed", "phase": "await-response", "httpStatus": 401}),
        "{record}"
    );
    assert!(
        !record.to_string().contains(token),
        "token in the record: {record}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_persistent_allows_and_denies() {
    let Some(python) = python("stdio_persistent_allows_and_denies") else {
        return;
    };
    let hooks = interceptor(&stdio_registration(&python, "persistent")).await;
    // Warm-up: starts the interpreter once; it must already be a valid allow.
    let warm = call(&hooks, "evt_py_persistent_warm", "true").await;
    let allowed = call(&hooks, "evt_py_persistent_allow", "make test").await;
    let denied = call(&hooks, "evt_py_persistent_deny", "rm -rf /").await;
    let after = call(&hooks, "evt_py_persistent_after", "ls").await;
    hooks.shutdown();
    assert_allowed(&warm, "persistent warm-up");
    assert_allowed(&allowed, "persistent allow");
    assert_denied(&denied, "persistent deny");
    assert_allowed(&after, "persistent allow after a deny");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_per_event_allows_and_denies() {
    let Some(python) = python("stdio_per_event_allows_and_denies") else {
        return;
    };
    let hooks = interceptor(&stdio_registration(&python, "per_event")).await;
    let allowed = call(&hooks, "evt_py_per_event_allow", "make test").await;
    let denied = call(&hooks, "evt_py_per_event_deny", "rm -rf /").await;
    hooks.shutdown();
    assert_allowed(&allowed, "per_event allow");
    assert_denied(&denied, "per_event deny");
}
