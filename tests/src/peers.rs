//! The interop contract every official-SDK peer backend must meet, shared by
//! `interop_rust` and `interop_python`.
//!
//! A [`Peer`] says how to start one peer (program, leading arguments) and how it denies;
//! the scenarios here (one per behaviour, named like the tests that run them) drive the
//! real component and host against it over HTTP, with and without bearer auth, and over
//! stdio in both lifecycles, and assert the decision, `decidedBy`, the interceptor outcome
//! and the failure class. Each test file keeps only what is specific to its peer: how the
//! process is found and launched, and what it reports about itself (the HTTP scenarios
//! return the still running [`HttpPeer`] for that).
//!
//! Every peer implements the same policy, by what the Bash command of a `tool.before`
//! contains: `rm -rf` is denied with the peer's own reason, `git push` is an `ask`,
//! `sudo ` is a `modify` replacing the input with the command minus `sudo `, `crash` makes
//! its callback fail (the SDK answers a JSON-RPC error); anything else has no effect. Its
//! HTTP mode prints `PORT <n>` as its first stdout line and refuses a request without
//! `Authorization: Bearer <token>` when `AHP_PEER_TOKEN` is set. Given a log file after
//! its mode (`http LOG`, `stdio LOG`), its observe handler appends
//! `OBSERVED <event type> <event id>` to it for every notification the SDK accepted.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ahp_host::{DecidedBy, Decision, EffectKind, Interceptor, Settlement};
use serde_json::{json, Value};

use crate::hook::run_hook;
use crate::support::{
    assert_failed, event, eventually, interceptor, only_interceptor, record_json, registration,
    Http,
};

/// Generous: an interpreter starts in ~700 ms, and a per-event child starts a process on
/// every call.
const TIMEOUT_MS: u64 = 5_000;
/// How long a peer may take to announce its port, or to exit once its stdin is closed.
const PEER_WAIT: Duration = Duration::from_secs(30);

/// A peer backend built on an official AHP SDK.
#[derive(Clone, Debug)]
pub struct Peer {
    /// For messages, e.g. `rust peer`.
    pub name: &'static str,
    /// Short tag for the event ids, variable names and tokens of its tests, e.g. `rs`.
    pub tag: &'static str,
    /// The hook id in its registrations.
    pub id: &'static str,
    /// The reason it gives when it denies.
    pub deny_reason: &'static str,
    /// The program to run; the mode (`http` or `stdio`) follows `args`.
    pub program: String,
    pub args: Vec<String>,
}

impl Peer {
    /// Starts the peer in HTTP mode (requiring `token` as a bearer token when given, logging
    /// observed events to `log` when given) and waits for its `PORT <n>` line.
    fn start_http(&self, token: Option<&str>, log: Option<&Path>) -> HttpPeer {
        let mut command = Command::new(&self.program);
        command.args(&self.args).arg("http").args(log);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .env_remove("AHP_PEER_TOKEN");
        if let Some(token) = token {
            command.env("AHP_PEER_TOKEN", token);
        }
        let name = self.name;
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("the {name} starts: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
        let (port_tx, port_rx) = mpsc::channel();
        let (lines_tx, lines) = mpsc::channel();
        // Guard from here on, so a failed start still kills the process.
        let mut peer = HttpPeer {
            name,
            child,
            stdin,
            port: 0,
            lines,
        };
        // Reads to EOF, so the peer never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = port_tx.send(lines.next());
            let _ = lines_tx.send(lines.map_while(Result::ok).collect::<Vec<_>>());
        });
        let line = port_rx
            .recv_timeout(PEER_WAIT)
            .unwrap_or_else(|_| panic!("the {name} announced its port in time"))
            .unwrap_or_else(|| panic!("the {name} printed a line"))
            .unwrap_or_else(|e| panic!("the {name}'s stdout is readable: {e}"));
        peer.port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("expected `PORT <n>` from the {name}, got {line:?}"));
        peer
    }

    /// [`Peer::start_http`] off the async runtime.
    async fn serve_http(&self, token: Option<&str>) -> HttpPeer {
        self.serve_http_logged(token, None).await
    }

    /// [`Peer::start_http`] off the async runtime, logging observed events to `log`.
    async fn serve_http_logged(&self, token: Option<&str>, log: Option<&Path>) -> HttpPeer {
        let peer = self.clone();
        let token = token.map(str::to_owned);
        let log = log.map(Path::to_owned);
        tokio::task::spawn_blocking(move || peer.start_http(token.as_deref(), log.as_deref()))
            .await
            .expect("the peer start task completed")
    }

    /// One HTTP hook on `server`, fail-closed, with the peer's id.
    fn http<'a>(&'a self, server: &HttpPeer) -> Http<'a> {
        Http::new(self.id, server.url()).timeout_ms(TIMEOUT_MS)
    }

    /// One stdio hook running the peer in `lifecycle`, fail-closed.
    fn stdio_registration(&self, lifecycle: &str) -> String {
        let intercept = json!({
            "events": ["tool.before"], "mode": "intercept",
            "timeoutMs": TIMEOUT_MS, "failurePolicy": "fail-closed",
            "content": {"default": "metadata"}
        });
        let transport = self.stdio_transport(lifecycle, None);
        hook_registration(self.id, transport, intercept)
    }

    /// The transport of a stdio hook running the peer in `lifecycle`, logging observed
    /// events to `log` when given.
    fn stdio_transport(&self, lifecycle: &str, log: Option<&Path>) -> Value {
        let mut args = self.args.clone();
        args.push("stdio".to_owned());
        args.extend(log.map(|log| log.display().to_string()));
        json!({
            "type": "stdio",
            "command": self.program,
            "args": args,
            "lifecycle": lifecycle
        })
    }

    /// The id of this peer's event `name`, e.g. `evt_rs_http_allow`.
    fn event_id(&self, name: &str) -> String {
        format!("evt_{}_{name}", self.tag)
    }

    /// The peer explicitly denied, with its own reason.
    fn assert_denied(&self, settled: &Settlement, case: &str) {
        let deny = (
            Decision::Deny,
            DecidedBy::BackendDeny,
            Some(self.deny_reason),
        );
        assert_answered(settled, deny, "backend-deny", "deny", case);
    }
}

/// A peer serving HTTP in a child process; killed and reaped on drop.
pub struct HttpPeer {
    name: &'static str,
    child: Child,
    /// Closing it tells a peer that watches its stdin to exit.
    stdin: Option<ChildStdin>,
    port: u16,
    /// Every stdout line after the port line, sent once stdout reaches EOF.
    lines: mpsc::Receiver<Vec<String>>,
}

impl HttpPeer {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hooks", self.port)
    }

    /// Closes the peer's stdin and returns every line it printed after `PORT <n>`, once it
    /// has exited. Only for a peer that exits when its stdin closes.
    pub fn finish(mut self) -> Vec<String> {
        drop(self.stdin.take());
        let name = self.name;
        self.lines
            .recv_timeout(PEER_WAIT)
            .unwrap_or_else(|_| panic!("the {name} exited once its stdin closed"))
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `tool.before` event whose Bash command is `command`.
///
/// It carries `harness`, which both SDKs require (and `support::event` omits): the peers
/// validate every request against the draft `tool-before.schema.json` bundled with the
/// SDK, and answer an event without it with JSON-RPC error -32602.
fn tool_event(id: &str, command: &str) -> String {
    let mut value: Value = serde_json::from_str(&event(id)).expect("support::event is JSON");
    value["tool"]["input"]["command"] = json!(command);
    value["harness"] = json!({"name": "ahp-e2e", "version": "0.1.0"});
    value.to_string()
}

/// A registration of one hook, `id` over `transport`, with one `subscription`.
fn hook_registration(id: &str, transport: Value, subscription: Value) -> String {
    json!({
        "protocolVersion": "draft",
        "hooks": [{"id": id, "transport": transport, "subscriptions": [subscription]}]
    })
    .to_string()
}

/// An observe subscription to `tool.before`.
fn observe_tool_before() -> Value {
    json!({"events": ["tool.before"], "mode": "observe", "content": {"default": "metadata"}})
}

/// Intercepts [`tool_event`]`(id, command)` with a harness that can enforce `deny`.
async fn call(hooks: &Interceptor, id: &str, command: &str) -> Settlement {
    call_enforcing(hooks, id, command, &[EffectKind::Deny]).await
}

/// Intercepts [`tool_event`]`(id, command)` with a harness that can enforce `effects`.
async fn call_enforcing(
    hooks: &Interceptor,
    id: &str,
    command: &str,
    effects: &[EffectKind],
) -> Settlement {
    hooks
        .intercept(&tool_event(id, command), effects, None)
        .await
        .expect("a valid event settles")
}

/// The single interceptor entry of a settlement record.
/// How a call settled: decision, who decided it, reason.
fn verdict(settled: &Settlement) -> (Decision, DecidedBy, Option<&str>) {
    (
        settled.decision,
        settled.decided_by,
        settled.reason.as_deref(),
    )
}

/// The peer answered, without failure: the call settled as `expected`, which the record
/// names `decided_by`, and the interceptor's outcome is `outcome`.
fn assert_answered(
    settled: &Settlement,
    expected: (Decision, DecidedBy, Option<&str>),
    decided_by: &str,
    outcome: &str,
    case: &str,
) {
    let record = &record_json(settled);
    assert_eq!(verdict(settled), expected, "{case}: {record}");
    assert_eq!(record["decidedBy"], json!(decided_by), "{case}: {record}");
    let entry = only_interceptor(record);
    assert_eq!(entry["outcome"], json!(outcome), "{case}: {record}");
    assert_eq!(entry.get("failure"), None, "{case}: {record}");
}

/// The peer answered without objection.
fn assert_allowed(settled: &Settlement, case: &str) {
    let allow = (Decision::Allow, DecidedBy::NoObjection, None);
    assert_answered(settled, allow, "no-objection", "no-effect", case);
}

/// `token` appears nowhere in the record.
fn assert_token_absent(settled: &Settlement, token: &str) {
    assert!(
        !settled.record.to_string().contains(token),
        "token in the record: {}",
        settled.record
    );
}

/// Over HTTP, an allowed command settles as no objection. Returns the running peer.
pub async fn http_allow_is_no_objection(peer: &Peer) -> HttpPeer {
    let server = peer.serve_http(None).await;
    let hooks = interceptor(&registration(&[peer.http(&server)])).await;
    let settled = call(&hooks, &peer.event_id("http_allow"), "make test").await;
    hooks.shutdown();
    assert_allowed(&settled, "http allow");
    server
}

/// Over HTTP, the peer's deny settles as a backend deny with its reason. Returns the
/// running peer.
pub async fn http_deny_is_a_backend_deny_with_the_peer_reason(peer: &Peer) -> HttpPeer {
    let server = peer.serve_http(None).await;
    let hooks = interceptor(&registration(&[peer.http(&server)])).await;
    let settled = call(&hooks, &peer.event_id("http_deny"), "rm -rf /").await;
    hooks.shutdown();
    peer.assert_denied(&settled, "http deny");
    server
}

/// With the bearer token the peer requires, it allows and denies as without auth, and
/// the token stays out of the records. Returns the running peer (two calls).
pub async fn http_bearer_token_is_accepted(peer: &Peer) -> HttpPeer {
    let name = format!("AHP_E2E_{}_BEARER_ACCEPTED", peer.tag.to_uppercase());
    let token = format!("tok-{}-accepted-5e21c7", peer.tag);
    std::env::set_var(&name, &token);
    let server = peer.serve_http(Some(&token)).await;
    let hooks = interceptor(&registration(&[peer.http(&server).token_env(&name)])).await;
    let allowed = call(&hooks, &peer.event_id("bearer_allow"), "make test").await;
    let denied = call(&hooks, &peer.event_id("bearer_deny"), "rm -rf /").await;
    hooks.shutdown();
    assert_allowed(&allowed, "bearer allow");
    peer.assert_denied(&denied, "bearer deny");
    for settled in [&allowed, &denied] {
        assert_token_absent(settled, &token);
    }
    server
}

/// A bearer token the peer refuses (HTTP 401) is `auth-failed` in the await-response
/// phase and, fail-closed, a synthetic deny; the token stays out of the record. Returns
/// the running peer.
pub async fn http_wrong_bearer_token_is_auth_failed_and_fails_closed(peer: &Peer) -> HttpPeer {
    let name = format!("AHP_E2E_{}_BEARER_REJECTED", peer.tag.to_uppercase());
    let token = format!("tok-{}-wrong-9f03b4", peer.tag);
    std::env::set_var(&name, &token);
    let server = peer
        .serve_http(Some(&format!("tok-{}-right-18ad6e", peer.tag)))
        .await;
    let hooks = interceptor(&registration(&[peer
        .http(&server)
        .policy("fail-closed")
        .token_env(&name)]))
    .await;
    // A command the peer would allow: any deny comes from the rejected credential.
    let settled = call(&hooks, &peer.event_id("bearer_wrong"), "make test").await;
    hooks.shutdown();
    let failure = assert_failed(&settled, "fail-closed", "auth-failed", "bearer wrong");
    assert_eq!(
        failure,
        json!({"class": "auth-failed", "phase": "await-response", "httpStatus": 401}),
        "{}",
        settled.record
    );
    assert_token_absent(&settled, &token);
    server
}

/// A persistent stdio peer allows and denies, and keeps answering after a deny. The first
/// call starts the process and must already be a valid allow.
pub async fn stdio_persistent_allows_and_denies(peer: &Peer) {
    let hooks = interceptor(&peer.stdio_registration("persistent")).await;
    let warm = call(&hooks, &peer.event_id("persistent_warm"), "true").await;
    let allowed = call(&hooks, &peer.event_id("persistent_allow"), "make test").await;
    let denied = call(&hooks, &peer.event_id("persistent_deny"), "rm -rf /").await;
    let after = call(&hooks, &peer.event_id("persistent_after"), "ls").await;
    hooks.shutdown();
    assert_allowed(&warm, "persistent warm-up");
    assert_allowed(&allowed, "persistent allow");
    peer.assert_denied(&denied, "persistent deny");
    assert_allowed(&after, "persistent allow after a deny");
}

/// A per-event stdio peer (a process per call) allows and denies.
pub async fn stdio_per_event_allows_and_denies(peer: &Peer) {
    let hooks = interceptor(&peer.stdio_registration("per_event")).await;
    let allowed = call(&hooks, &peer.event_id("per_event_allow"), "make test").await;
    let denied = call(&hooks, &peer.event_id("per_event_deny"), "rm -rf /").await;
    hooks.shutdown();
    assert_allowed(&allowed, "per_event allow");
    peer.assert_denied(&denied, "per_event deny");
}

/// Behind `ahp hook claude-code`, the peer decides a tool call: the event the adapter
/// builds from Claude Code's payload is one the SDK accepts (it refuses one without
/// `harness`, -32602, which fail-closed would have made every call's denial), and its
/// deny reaches Claude Code with its own reason, an allow as no answer at all.
pub async fn hook_claude_code_is_decided_by_the_peer(peer: &Peer) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("registration.json");
    std::fs::write(&path, peer.stdio_registration("per_event")).expect("the registration");
    let pre_tool = |command: &str| {
        json!({"session_id": format!("sess_{}_hook", peer.tag), "transcript_path": "/dev/null",
            "cwd": "/", "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": command}, "tool_use_id": "toolu_peer_1"})
        .to_string()
    };
    let denied = run_hook("claude-code", &path, &[], pre_tool("rm -rf /").as_bytes()).await;
    let output = serde_json::from_str::<Value>(&denied.stdout)
        .map(|answer| answer["hookSpecificOutput"].clone())
        .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {denied:?}", peer.name));
    assert_eq!(
        output["permissionDecision"], "deny",
        "{}: {denied:?}",
        peer.name
    );
    assert_eq!(
        output["permissionDecisionReason"],
        json!(peer.deny_reason),
        "{}: {denied:?}",
        peer.name
    );
    let allowed = run_hook("claude-code", &path, &[], pre_tool("make test").as_bytes()).await;
    assert_eq!(
        (allowed.code, allowed.stdout.trim()),
        (0, ""),
        "{}: {allowed:?}",
        peer.name
    );
}

/// What a harness that can enforce `ask` and `modify` besides `deny` advertises.
const ASK_AND_MODIFY: &[EffectKind] = &[EffectKind::Deny, EffectKind::Ask, EffectKind::Modify];

/// The peer's `ask` (to `git push`) settles as a backend ask; its `modify` (of a `sudo`
/// command) leaves the call allowed, with the input it asked for as the effective input.
async fn assert_asks_and_modifies(peer: &Peer, hooks: &Interceptor, transport: &str) {
    let ask_id = peer.event_id(&format!("{transport}_ask"));
    let asked = call_enforcing(hooks, &ask_id, "git push origin main", ASK_AND_MODIFY).await;
    let modify_id = peer.event_id(&format!("{transport}_modify"));
    let modified = call_enforcing(hooks, &modify_id, "sudo make install", ASK_AND_MODIFY).await;
    hooks.shutdown();
    let ask = (Decision::Ask, DecidedBy::BackendAsk, None);
    let case = format!("{transport} ask");
    assert_answered(&asked, ask, "backend-ask", "ask", &case);
    assert_eq!(record_json(&asked).get("effective"), None, "{case}");
    let case = format!("{transport} modify");
    let allow = (Decision::Allow, DecidedBy::NoObjection, None);
    assert_answered(&modified, allow, "no-objection", "no-effect", &case);
    let record = &record_json(&modified);
    assert_eq!(
        record["effective"],
        json!({"input": {"command": "make install"}}),
        "{case}: {record}"
    );
}

/// Over HTTP, the peer's `ask` is a backend ask and its `modify` the effective input.
/// Returns the running peer (two calls).
pub async fn http_ask_and_modify_are_settled_as_the_peer_answers(peer: &Peer) -> HttpPeer {
    let server = peer.serve_http(None).await;
    let hooks = interceptor(&registration(&[peer.http(&server)])).await;
    assert_asks_and_modifies(peer, &hooks, "http").await;
    server
}

/// Over persistent stdio, the peer's `ask` is a backend ask and its `modify` the
/// effective input.
pub async fn stdio_ask_and_modify_are_settled_as_the_peer_answers(peer: &Peer) {
    let hooks = interceptor(&peer.stdio_registration("persistent")).await;
    assert_asks_and_modifies(peer, &hooks, "stdio").await;
}

/// Over HTTP, a callback that fails is the SDK's JSON-RPC error, which fail-closed makes
/// a synthetic deny recording `failure`, which depends on how the SDK answers it.
/// Returns the running peer.
pub async fn http_failing_callback_fails_closed(peer: &Peer, failure: Value) -> HttpPeer {
    let server = peer.serve_http(None).await;
    let hooks = interceptor(&registration(&[peer.http(&server)])).await;
    let settled = call(&hooks, &peer.event_id("http_crash"), "crash now").await;
    hooks.shutdown();
    assert_failed_with(&settled, failure, "http crash");
    server
}

/// Over persistent stdio, a callback that fails is the SDK's JSON-RPC error, which
/// fail-closed makes a synthetic deny: `jsonrpc-error`, code -32004 (no status carries
/// it). The peer answers the next call.
pub async fn stdio_failing_callback_fails_closed(peer: &Peer) {
    let hooks = interceptor(&peer.stdio_registration("persistent")).await;
    let settled = call(&hooks, &peer.event_id("stdio_crash"), "crash now").await;
    let after = call(&hooks, &peer.event_id("stdio_after_crash"), "make test").await;
    hooks.shutdown();
    assert_allowed(&after, "stdio allow after a crash");
    let failure = json!({"class": "jsonrpc-error", "phase": "parse", "rpcCode": -32004});
    assert_failed_with(&settled, failure, "stdio crash");
}

/// The call settled as a fail-closed failure of the one interceptor, recorded as
/// `failure`.
fn assert_failed_with(settled: &Settlement, failure: Value, case: &str) {
    let class = failure["class"].as_str().expect("a class");
    let recorded = assert_failed(settled, "fail-closed", class, case);
    assert_eq!(recorded, failure, "{case}: {}", settled.record);
}

/// Observes a `tool.before` through `hooks` (one observe subscription of the peer,
/// logging to `log`): the delivery is reported, and the peer's observe handler saw the
/// event's type and id.
async fn assert_observed(peer: &Peer, hooks: &Interceptor, log: &Path, transport: &str) {
    let id = peer.event_id(&format!("{transport}_observe"));
    let observed = hooks
        .observe(&tool_event(&id, "make test"), None)
        .await
        .expect("a valid event is observed");
    let report = serde_json::to_value(&observed).expect("the report serializes");
    let expected = [format!("OBSERVED tool.before {id}")];
    let logged = || {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // Delivery does not wait for a stdio peer's handler.
    eventually(PEER_WAIT, || logged() == expected).await;
    hooks.shutdown();
    assert_eq!(
        report["observers"],
        json!([{"backend": peer.id, "result": "delivered"}]),
        "{transport}: {report}"
    );
    assert_eq!(logged(), expected, "{transport}: {report}");
}

/// Over HTTP, an observe notification reaches the peer's observe handler. Returns the
/// running peer.
pub async fn http_observe_reaches_the_peer_handler(peer: &Peer) -> HttpPeer {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("observed.log");
    let server = peer.serve_http_logged(None, Some(&log)).await;
    let transport = json!({"type": "http", "url": server.url()});
    let hooks = interceptor(&hook_registration(
        peer.id,
        transport,
        observe_tool_before(),
    ))
    .await;
    assert_observed(peer, &hooks, &log, "http").await;
    server
}

/// Over persistent stdio, an observe notification reaches the peer's observe handler.
pub async fn stdio_observe_reaches_the_peer_handler(peer: &Peer) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("observed.log");
    let transport = peer.stdio_transport("persistent", Some(&log));
    let hooks = interceptor(&hook_registration(
        peer.id,
        transport,
        observe_tool_before(),
    ))
    .await;
    assert_observed(peer, &hooks, &log, "stdio").await;
}
