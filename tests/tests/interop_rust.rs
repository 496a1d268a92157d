//! Interop with the official Rust AHP SDK (`agenthooksprotocol` 0.10.1) as a backend:
//! the real component and host against an independently written server, over HTTP (with
//! and without bearer auth) and over stdio in both lifecycles.
//!
//! The peer is `tests/rust-sdk-peer`, its own crate and workspace (the SDK switches
//! serde_json features, which must not reach this workspace), built by `tests/build.rs`
//! into `RUST_SDK_PEER`. Its policy: deny a command containing `rm -rf` with the peer's
//! reason, otherwise no effect. In HTTP mode it reports each answer's status and body
//! size, so a test also sees what the SDK sent. Unlike the Python peer, nothing here is
//! optional: these tests always run.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ahp_host::{DecidedBy, Decision, Interceptor, Settlement};
use ahp_tests::support::{event, interceptor, registration, Http};
use serde_json::{json, Value};

const PEER: &str = env!("RUST_SDK_PEER");
const ID: &str = "com.example.rust";
const DENY_REASON: &str = "rust peer denies rm -rf";
const SYNTHETIC_REASON: &str = "Required policy backend unavailable.";
/// Generous for a per-event child, which starts a process on every call.
const TIMEOUT_MS: u64 = 5_000;
/// How long the peer may take to start, or to exit once its stdin is closed.
const PEER_WAIT: Duration = Duration::from_secs(30);

/// A `tool.before` event whose Bash command is `command`.
///
/// It carries `harness`, which the SDK requires as the Python one does: its generated
/// `ToolBeforeEvent` has a non-optional `harness`, and the server validates every
/// request against the bundled draft schema, answering an event without it with
/// JSON-RPC error -32602 (`support::event` omits it).
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

/// One answer of the HTTP peer: status and body size in bytes.
type Answer = (u16, usize);

/// The SDK peer serving HTTP in a child process; killed and reaped on drop.
struct HttpPeer {
    child: Child,
    /// Closing it tells the peer to exit.
    stdin: Option<ChildStdin>,
    port: u16,
    /// Every answer the peer reported, sent once its stdout reaches EOF.
    answers: mpsc::Receiver<Vec<Answer>>,
}

impl HttpPeer {
    /// Starts the peer (requiring `token` as a bearer token when given) and waits for its
    /// `PORT <n>` line.
    fn start(token: Option<&str>) -> HttpPeer {
        let mut command = Command::new(PEER);
        command
            .arg("http")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .env_remove("AHP_PEER_TOKEN");
        if let Some(token) = token {
            command.env("AHP_PEER_TOKEN", token);
        }
        let mut child = command.spawn().expect("the rust peer starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
        let (port_tx, port_rx) = mpsc::channel();
        let (answers_tx, answers) = mpsc::channel();
        // Guard from here on, so a failed start still kills the process.
        let mut peer = HttpPeer {
            child,
            stdin,
            port: 0,
            answers,
        };
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = port_tx.send(lines.next());
            let mut answers = Vec::new();
            for line in lines.map_while(Result::ok) {
                let answer = line.strip_prefix("ANSWER ").and_then(|rest| {
                    let (status, size) = rest.split_once(' ')?;
                    Some((status.parse().ok()?, size.parse().ok()?))
                });
                answers.push(answer.unwrap_or_else(|| panic!("unexpected peer line {line:?}")));
            }
            let _ = answers_tx.send(answers);
        });
        let line = port_rx
            .recv_timeout(PEER_WAIT)
            .expect("the rust peer announced its port in time")
            .expect("the rust peer printed a line")
            .expect("the rust peer's stdout is readable");
        peer.port = line
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("expected `PORT <n>` from the rust peer, got {line:?}"));
        peer
    }

    async fn spawn(token: Option<&'static str>) -> HttpPeer {
        tokio::task::spawn_blocking(move || HttpPeer::start(token))
            .await
            .expect("the peer start task completed")
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hooks", self.port)
    }

    /// Stops the peer (closes its stdin, so it exits) and returns every answer it sent,
    /// in order. Complete: each is reported before its response is sent, and the list
    /// arrives only at EOF on the peer's stdout.
    fn finish(mut self) -> Vec<Answer> {
        drop(self.stdin.take());
        self.answers
            .recv_timeout(PEER_WAIT)
            .expect("the rust peer exited once its stdin closed")
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One stdio hook running the SDK peer, fail-closed.
fn stdio_registration(lifecycle: &str) -> String {
    json!({
        "protocolVersion": "draft",
        "hooks": [{
            "id": ID,
            "transport": {
                "type": "stdio",
                "command": PEER,
                "args": ["stdio"],
                "lifecycle": lifecycle
            },
            "subscriptions": [{
                "events": ["tool.before"], "mode": "intercept",
                "timeoutMs": TIMEOUT_MS, "failurePolicy": "fail-closed",
                "content": {"default": "metadata"}
            }]
        }]
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_allow_is_no_objection() {
    let peer = HttpPeer::spawn(None).await;
    let hooks = interceptor(&registration(&[
        Http::new(ID, peer.url()).timeout_ms(TIMEOUT_MS)
    ]))
    .await;
    let settled = call(&hooks, "evt_rs_http_allow", "make test").await;
    hooks.shutdown();
    assert_allowed(&settled, "http allow");
    let statuses: Vec<u16> = peer.finish().iter().map(|(status, _)| *status).collect();
    assert_eq!(statuses, [200], "{}", settled.record);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_deny_is_a_backend_deny_with_the_peer_reason() {
    let peer = HttpPeer::spawn(None).await;
    let hooks = interceptor(&registration(&[
        Http::new(ID, peer.url()).timeout_ms(TIMEOUT_MS)
    ]))
    .await;
    let settled = call(&hooks, "evt_rs_http_deny", "rm -rf /").await;
    hooks.shutdown();
    assert_denied(&settled, "http deny");
    let statuses: Vec<u16> = peer.finish().iter().map(|(status, _)| *status).collect();
    assert_eq!(statuses, [200], "{}", settled.record);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_bearer_token_is_accepted() {
    let name = "AHP_E2E_RS_BEARER_ACCEPTED";
    let token = "tok-rs-accepted-5e21c7";
    std::env::set_var(name, token);
    let peer = HttpPeer::spawn(Some(token)).await;
    let hooks = interceptor(&registration(&[Http::new(ID, peer.url())
        .timeout_ms(TIMEOUT_MS)
        .token_env(name)]))
    .await;
    let allowed = call(&hooks, "evt_rs_bearer_allow", "make test").await;
    let denied = call(&hooks, "evt_rs_bearer_deny", "rm -rf /").await;
    hooks.shutdown();
    assert_allowed(&allowed, "bearer allow");
    assert_denied(&denied, "bearer deny");
    let statuses: Vec<u16> = peer.finish().iter().map(|(status, _)| *status).collect();
    assert_eq!(statuses, [200, 200]);
    for settled in [&allowed, &denied] {
        assert!(
            !settled.record.to_string().contains(token),
            "token in the record: {}",
            settled.record
        );
    }
}

/// The SDK refuses a credential before any JSON-RPC processing: its `Authenticator`
/// error becomes a bodyless HTTP 401 (no JSON-RPC error object, so no code). The
/// component reads 401 as a rejected credential, acquires the token once more (the same
/// wrong one, from the environment), is refused again, and records `auth-failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_wrong_bearer_token_is_auth_failed_and_fails_closed() {
    let name = "AHP_E2E_RS_BEARER_REJECTED";
    let token = "tok-rs-wrong-9f03b4";
    std::env::set_var(name, token);
    let peer = HttpPeer::spawn(Some("tok-rs-right-18ad6e")).await;
    let hooks = interceptor(&registration(&[Http::new(ID, peer.url())
        .policy("fail-closed")
        .timeout_ms(TIMEOUT_MS)
        .token_env(name)]))
    .await;
    // A command the peer would allow: any deny comes from the rejected credential.
    let settled = call(&hooks, "evt_rs_bearer_wrong", "make test").await;
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
    // What the peer did: refused both attempts, bodyless.
    assert_eq!(peer.finish(), [(401, 0), (401, 0)], "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_persistent_allows_and_denies() {
    let hooks = interceptor(&stdio_registration("persistent")).await;
    let allowed = call(&hooks, "evt_rs_persistent_allow", "make test").await;
    let denied = call(&hooks, "evt_rs_persistent_deny", "rm -rf /").await;
    let after = call(&hooks, "evt_rs_persistent_after", "ls").await;
    hooks.shutdown();
    assert_allowed(&allowed, "persistent allow");
    assert_denied(&denied, "persistent deny");
    assert_allowed(&after, "persistent allow after a deny");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_per_event_allows_and_denies() {
    let hooks = interceptor(&stdio_registration("per_event")).await;
    let allowed = call(&hooks, "evt_rs_per_event_allow", "make test").await;
    let denied = call(&hooks, "evt_rs_per_event_deny", "rm -rf /").await;
    hooks.shutdown();
    assert_allowed(&allowed, "per_event allow");
    assert_denied(&denied, "per_event deny");
}
