//! The shared scenarios of the `ahp hook HARNESS` contract files: each file describes its
//! harness's payload samples and answer format in a [`Contract`], and runs these against
//! the real `ahp` binary and the fault backend.

use crate::fault_backend::{Behaviour, FaultBackend};
use crate::support::{ahp_binary, registration, runaway_component, Http, SYNTHETIC_REASON};
use serde_json::{json, Value};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The reason of every denial the adapter makes itself.
pub const FAILED_REASON: &str = "Policy evaluation failed.";

/// The reason of a fail-closed denial when the call's budget ran out first.
pub const BUDGET_REASON: &str = "Policy evaluation did not finish within the hook call budget.";

/// The reason of the `ask` a replaced input goes out with, where the harness has no
/// way to apply it without a decision.
pub const MODIFIED_REASON: &str =
    "A policy backend changed this call's input; approve the changed call.";

/// The payloads of one tool call before and after it runs: `common` with the event
/// name under `event_key` (`pre` / `post`) and, after, `response` under its key.
pub fn tool_payloads(
    common: Value,
    event_key: &str,
    (pre, post): (&str, &str),
    response: (&str, Value),
) -> (Value, Value) {
    let mut before = common.clone();
    before[event_key] = json!(pre);
    let mut after = common;
    after[event_key] = json!(post);
    after[response.0] = response.1;
    (before, after)
}

/// Asserts the process exited `code` with exactly `expected` as JSON on stdout.
pub fn assert_json(ran: &Ran, code: i32, expected: Value) {
    assert_eq!(ran.code, code, "{ran:?}");
    assert_eq!(ran.json(), expected, "{ran:?}");
}

/// How one harness's hook contract looks.
pub struct Contract {
    /// The `ahp hook` harness name.
    pub harness: &'static str,
    /// A pre-tool payload (a `Bash`-like call) and the extra arguments it needs.
    pub pre_tool: (Value, &'static [&'static str]),
    /// A post-tool payload for the same call.
    pub post_tool: (Value, &'static [&'static str]),
    /// The native tool name, input and session id in `pre_tool`.
    pub tool: (&'static str, Value, &'static str),
    /// The harness's tool-use id in `pre_tool`; `None`: it has none, the id is synthesized.
    pub call_id: Option<&'static str>,
    /// The effects advertised before a tool runs.
    pub advertised: &'static [&'static str],
    /// Asserts the answer is this harness's denial with `reason`.
    pub assert_deny: fn(&Ran, &str),
    /// Asserts the answer is "no objection" (never a grant the harness would read as one).
    pub assert_no_objection: fn(&Ran),
    /// Asserts the answer is this harness's ask; `None`: the harness has no ask.
    pub assert_ask: Option<fn(&Ran)>,
    /// Asserts the answer runs the tool with this input instead, with no grant: where
    /// the harness needs a decision to apply it, that is `ask`; `None`: the harness
    /// cannot apply a changed input without a grant, so `modify` is not advertised.
    pub assert_modified: Option<fn(&Ran, &Value)>,
    /// The `modify` operations advertised on the input (`merge`, `replace`); the others
    /// are unadvertised.
    pub modify_operations: &'static [&'static str],
    /// Asserts the answer puts this text in the harness's context field; `None`: the
    /// harness has none before a tool, so neither `message` nor `inject` is advertised.
    pub assert_context: Option<fn(&Ran, &str)>,
    /// Native events besides the tool call that the harness blocks, so the adapter
    /// intercepts them.
    pub intercepted: Vec<Intercepted>,
    /// Asserts the answer is this harness's block with `reason` where no event is known
    /// (no payload was read): exit 2 with the reason on stderr, the block every harness
    /// reads ([`assert_exit_2_block`]), and for a harness that needs more, that too.
    pub assert_blocked_before_the_event: fn(&Ran, &str),
}

/// A native event other than `tool.before` that the adapter intercepts.
pub struct Intercepted {
    /// The payload and the extra arguments it needs.
    pub payload: (Value, &'static [&'static str]),
    /// The AHP event it becomes.
    pub event: &'static str,
    /// The effects advertised there.
    pub advertised: &'static [&'static str],
    /// Asserts the answer is the harness's block at this event with `reason`.
    pub assert_block: fn(&Ran, &str),
}

/// One finished `ahp hook` process.
#[derive(Debug)]
pub struct Ran {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
    /// What it wrote to its log file (`AHP_LOG_FILE`).
    pub log: String,
}

/// Compiles the component into the user's cache once (`ahp precompile`), so a timed
/// scenario measures the hook's budget, not the first process's Cranelift compile.
fn warm_compile_cache() {
    static WARM: std::sync::Once = std::sync::Once::new();
    WARM.call_once(|| {
        let status = std::process::Command::new(ahp_binary())
            .arg("precompile")
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run ahp precompile");
        assert!(status.success(), "ahp precompile failed: {status}");
    });
}

/// Asserts stderr, which a harness shows the model on exit 2, holds what the answer
/// writes there and nothing else: on exit 2 `reason`, else nothing — never a log line or
/// a failure's details, which go to the log file.
pub fn assert_stderr_is_the_answer(ran: &Ran, reason: &str) {
    let answer = match ran.code {
        2 => format!("{reason}\n"),
        _ => String::new(),
    };
    assert_eq!(ran.stderr, answer, "{ran:?}");
}

/// The answer of a harness whose "no objection" is silence: exit 0, nothing on stdout
/// (never an `allow` that would skip the harness's own permission prompt).
pub fn assert_silent_no_objection(ran: &Ran) {
    assert_eq!((ran.code, ran.stdout.as_str()), (0, ""), "{ran:?}");
}

/// The block by exit code alone: exit 2, nothing on stdout (Claude Code ignores it on
/// exit 2) and stderr, which the model reads, `reason` alone.
pub fn assert_exit_2_block(ran: &Ran, reason: &str) {
    assert_eq!((ran.code, ran.stdout.as_str()), (2, ""), "{ran:?}");
    assert_eq!(ran.stderr, format!("{reason}\n"), "{ran:?}");
}

impl Ran {
    /// What `command`, an `ahp hook` run, printed and exited with, and its log.
    pub fn of(output: &std::process::Output, command: &tokio::process::Command) -> Ran {
        Ran {
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            code: output.status.code().expect("exited, not killed"),
            log: log_of(command),
        }
    }

    /// stdout as one JSON value.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

/// Runs `ahp hook HARNESS --registration R ARGS` with `stdin`.
pub async fn run_hook(harness: &str, registration: &Path, args: &[&str], stdin: &[u8]) -> Ran {
    run_hook_with(harness, registration, args, stdin, true).await
}

/// As [`run_hook`]; with `close` false stdin stays open until the process has answered,
/// as a harness that never closes it would leave it.
pub async fn run_hook_with(
    harness: &str,
    registration: &Path,
    args: &[&str],
    stdin: &[u8],
    close: bool,
) -> Ran {
    run_command(hook_command(harness, registration, args), stdin, close).await
}

/// The `ahp hook HARNESS --registration R ARGS` process, its stdio piped (a test may
/// point stdout or stderr elsewhere), with the operator's log on (`AHP_LOG=warn`) in a
/// new file of its own (`AHP_LOG_FILE`, see [`log_of`]): a failure's details are there,
/// never on stderr, which a harness shows the model.
pub fn hook_command(harness: &str, registration: &Path, args: &[&str]) -> HookCommand {
    let mut command = logged(ahp_binary(), ["hook", harness]);
    command.arg("--registration").arg(registration).args(args);
    command
}

/// `program ARGS` as [`hook_command`] runs `ahp hook`: stdio piped, `AHP_LOG=warn` into a
/// new log file of its own, removed when the command is dropped.
pub fn logged(
    program: impl AsRef<OsStr>,
    args: impl IntoIterator<Item = impl AsRef<OsStr>>,
) -> HookCommand {
    let log = LogFile::new();
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .env("AHP_LOG", "warn")
        .env("AHP_LOG_FILE", &*log.0)
        .kill_on_drop(true);
    HookCommand { command, _log: log }
}

/// A command of [`hook_command`] or [`logged`] (it derefs to the
/// [`tokio::process::Command`]) with the log file it names, which goes with it: removed
/// when this is dropped, whether the test passed, failed an assertion or panicked.
pub struct HookCommand {
    command: tokio::process::Command,
    _log: LogFile,
}

impl std::ops::Deref for HookCommand {
    type Target = tokio::process::Command;

    fn deref(&self) -> &tokio::process::Command {
        &self.command
    }
}

impl std::ops::DerefMut for HookCommand {
    fn deref_mut(&mut self) -> &mut tokio::process::Command {
        &mut self.command
    }
}

/// A new, empty log file in the temporary directory (`ahp-hook-XXXXXX.log`, private),
/// removed on drop. Dropped while its test panics, it puts its path and what the process
/// logged in the test's output first, which the failure report shows: the log of a
/// failing test is not lost with the file.
struct LogFile(tempfile::TempPath);

impl LogFile {
    fn new() -> LogFile {
        let file = tempfile::Builder::new()
            .prefix("ahp-hook-")
            .suffix(".log")
            .tempfile()
            .expect("a log file in the temporary directory");
        LogFile(file.into_temp_path())
    }
}

impl Drop for LogFile {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&*self.0).unwrap_or_default();
            eprintln!(
                "the ahp hook log {} (now removed):\n{log}",
                self.0.display()
            );
        }
    }
}

/// What the finished `command` wrote to its `AHP_LOG_FILE` (empty without one). The file
/// is left as it is: one [`hook_command`] named goes when the command is dropped.
pub fn log_of(command: &tokio::process::Command) -> String {
    let path = command
        .as_std()
        .get_envs()
        .find_map(|(name, value)| (name == "AHP_LOG_FILE").then_some(value)?);
    path.and_then(|path| std::fs::read_to_string(path).ok())
        .unwrap_or_default()
}

/// Runs `command` with `stdin`, left open until it has answered unless `close`.
pub async fn run_command(mut command: HookCommand, stdin: &[u8], close: bool) -> Ran {
    use tokio::io::AsyncWriteExt as _;
    let mut child = command.spawn().expect("start ahp hook");
    let mut input = child.stdin.take().expect("stdin is piped");
    input.write_all(stdin).await.expect("write the payload");
    let held = (!close).then_some(input);
    let output = child.wait_with_output().await.expect("ahp hook finishes");
    drop(held);
    Ran::of(&output, &command)
}

/// Sends `signal` (`TERM`, `HUP`, …) to a running `ahp hook` and waits (10 s at most) for
/// its answer, which it must give itself: killed by the signal, it would be a crashed
/// hook to the harness, which runs the tool.
pub async fn answer_after_signal(
    hook: tokio::process::Child,
    signal: &str,
) -> std::process::Output {
    use std::os::unix::process::ExitStatusExt as _;
    let pid = hook.id().expect("running").to_string();
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let output = tokio::time::timeout(std::time::Duration::from_secs(10), hook.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("ahp hook answers after SIG{signal}"))
        .expect("ahp hook finishes");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.signal(),
        None,
        "handled, not killed: {stderr}"
    );
    output
}

/// Runs `ahp hook HARNESS ARGS` with `payload` against a registration whose interceptor
/// fails open at a backend nothing listens on: a call that reaches the interceptor gets
/// no objection, one that does not is denied.
pub async fn run_unreachable(harness: &str, args: &[&str], payload: &Value) -> Ran {
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = write_unreachable(dir.path());
    run_hook(harness, &registration, args, payload.to_string().as_bytes()).await
}

/// A [`write_registration`] whose backend is down (nothing listens on port 9), under
/// fail-open: a call that reached the interceptor would be no objection, so a block
/// comes from the adapter itself.
pub fn write_unreachable(dir: &Path) -> PathBuf {
    write_registration(dir, "http://127.0.0.1:9/hooks", "fail-open", false)
}

/// A registration file in `dir`: one interceptor on tool.before at `backend`, with
/// `policy` and a 300 ms timeout, plus an observer of every other event at the same URL.
/// With `include_native` the interceptor selects `body` for every category too: native
/// data beside a lowering selection is refused at load.
pub fn write_registration(dir: &Path, url: &str, policy: &str, include_native: bool) -> PathBuf {
    let mut document: Value =
        serde_json::from_str(&registration(&[Http::new("com.example.policy", url)
            .policy(policy)
            .timeout_ms(300)]))
        .expect("a JSON registration");
    let subscriptions = document["hooks"][0]["subscriptions"]
        .as_array_mut()
        .expect("subscriptions");
    subscriptions[0]["includeNative"] = json!(include_native);
    if include_native {
        subscriptions[0]["content"] = json!({"default": "body"});
    }
    subscriptions.push(json!({
        "events": ["tool.after", "turn.*", "session.*"], "mode": "observe",
        "content": {"default": "metadata"}
    }));
    let path = dir.join("registration.json");
    std::fs::write(&path, document.to_string()).expect("write the registration");
    path
}

/// A registration file in `dir` with one fail-`policy` interceptor of `events` at
/// `url`, under `timeout_ms`.
pub fn write_intercepting(
    dir: &Path,
    url: &str,
    policy: &str,
    events: &[&str],
    timeout_ms: u64,
) -> PathBuf {
    let mut document: Value =
        serde_json::from_str(&registration(&[Http::new("com.example.policy", url)
            .policy(policy)
            .timeout_ms(timeout_ms)]))
        .expect("a JSON registration");
    document["hooks"][0]["subscriptions"][0]["events"] = json!(events);
    let path = dir.join("intercepting.json");
    std::fs::write(&path, document.to_string()).expect("write the registration");
    path
}

/// Runs `ahp hook HARNESS ARGS` with `payload` under a 300 ms budget, its component
/// pulled from a registry that accepts and never answers: the payload is read and its
/// event known, then the call outlives its budget and only the watchdog answers.
pub async fn run_past_budget(harness: &str, args: &[&str], payload: &Value) -> Ran {
    let registry = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let component = format!("oci://{}/ahp/interceptor:0.1", registry.addr());
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--budget-ms", "300", "--component", &component]);
    let ran = run_unreachable(harness, &all, payload).await;
    assert!(registry.connections() > 0, "the pull was tried: {ran:?}");
    ran
}

/// Runs `ahp hook HARNESS ARGS` with `payload` on the hostile component: its `intercept`
/// traps, its `observe` spins until the host ends it (bounded by a 2 s budget).
pub async fn run_runaway(harness: &str, args: &[&str], payload: &Value) -> Ran {
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = dir.path().join("panic.json");
    std::fs::write(&registration, r#"{"panic": true}"#).expect("write");
    let component = dir.path().join("runaway.wasm");
    std::fs::write(&component, runaway_component()).expect("write the component");
    let component = component.display().to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--component", &component, "--budget-ms", "2000"]);
    run_hook(harness, &registration, &all, payload.to_string().as_bytes()).await
}

/// The slack a test allows a process past its budget and the watchdog's grace: far
/// more than it needs, so only a process that ignores its budget gets there.
const SLACK: Duration = Duration::from_secs(10);

impl Contract {
    /// Runs `ahp hook` for this harness with `payload` on stdin.
    async fn run(&self, registration: &Path, args: &[&str], payload: &Value) -> Ran {
        run_hook(
            self.harness,
            registration,
            args,
            payload.to_string().as_bytes(),
        )
        .await
    }

    /// Runs the pre-tool payload against a backend behaving as `script` under `policy`.
    async fn pre_tool_with(&self, script: Vec<Behaviour>, policy: &str) -> (Ran, FaultBackend) {
        let (ran, backend, _record) = self.pre_tool_audited(script, policy).await;
        (ran, backend)
    }

    /// As [`Contract::pre_tool_with`], with the settlement record from `--audit`.
    async fn pre_tool_audited(
        &self,
        script: Vec<Behaviour>,
        policy: &str,
    ) -> (Ran, FaultBackend, Option<Value>) {
        let backend = FaultBackend::start(script).await;
        let dir = tempfile::tempdir().expect("a temp dir");
        let registration = write_registration(dir.path(), &backend.url(), policy, false);
        let audit = dir.path().join("audit.jsonl");
        let (payload, args) = &self.pre_tool;
        let mut all: Vec<&str> = args.to_vec();
        let audit_arg = audit.display().to_string();
        all.extend(["--audit", &audit_arg]);
        let ran = self.run(&registration, &all, payload).await;
        let record = std::fs::read_to_string(&audit).ok().map(|text| {
            serde_json::from_str(text.lines().next().expect("one record")).expect("a JSON record")
        });
        (ran, backend, record)
    }

    /// `effects` from the backend behind a harness that does not advertise them: the
    /// reply is invalid-effects, settled by the subscription's policy — a generic denial
    /// under fail-closed, no objection under fail-open — and audited as such.
    async fn unadvertised(&self, effects: &Value) {
        for (policy, outcome) in [
            ("fail-closed", "failed-closed"),
            ("fail-open", "failed-open"),
        ] {
            let script = vec![Behaviour::Effects(effects.clone())];
            let (ran, _backend, record) = self.pre_tool_audited(script, policy).await;
            match policy {
                "fail-closed" => (self.assert_deny)(&ran, SYNTHETIC_REASON),
                _ => (self.assert_no_objection)(&ran),
            }
            let record = record.expect("the settlement is audited");
            let entry = &record["interceptors"][0];
            assert_eq!(entry["outcome"], outcome, "{record}");
            assert_eq!(entry["failure"]["class"], "invalid-effects", "{record}");
        }
    }

    /// The pre-tool event reaches the backend as a valid tool.before with the native
    /// name, the parsed input, the session, the call id (synthesized and marked when the
    /// harness has none), the kind and a stable URN source, without `native`; the
    /// post-tool event is observed as tool.after of the same call.
    pub async fn mapping(&self) {
        let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let dir = tempfile::tempdir().expect("a temp dir");
        let registration = write_registration(dir.path(), &backend.url(), "fail-closed", false);
        let (payload, args) = &self.pre_tool;
        let ran = self.run(&registration, args, payload).await;
        (self.assert_no_objection)(&ran);
        let (post, post_args) = &self.post_tool;
        let after = self.run(&registration, post_args, post).await;
        // No interceptor of tool.after: nothing to answer (Cursor always answers, `{}`).
        assert_eq!(after.code, 0, "{after:?}");
        assert!(["", "{}"].contains(&after.stdout.trim()), "{after:?}");
        let requests = backend.requests_with_method("hooks/intercept");
        assert_eq!(requests.len(), 1, "one intercept");
        let params = requests[0].json()["params"].clone();
        let event = &params["event"];
        let (name, input, session) = &self.tool;
        assert_eq!(event["type"], "tool.before", "{event}");
        assert_eq!(event["tool"]["name"], *name, "{event}");
        assert_eq!(event["tool"]["input"], *input, "{event}");
        assert_eq!(event["tool"]["kind"], "shell", "{event}");
        assert_eq!(event["session"]["id"], *session, "{event}");
        assert_eq!(event["path"], "native", "{event}");
        assert!(
            event.get("native").is_none(),
            "native without includeNative: {event}"
        );
        let source = event["source"].as_str().expect("a source");
        assert!(
            source.starts_with(&format!("urn:ahp:hook:{}:", self.harness)),
            "{source}"
        );
        match self.call_id {
            Some(id) => assert_eq!(event["call"], json!({"id": id}), "{event}"),
            None => assert_eq!(event["call"]["synthesized"], true, "{event}"),
        }
        let capabilities = &params["capabilities"];
        assert_eq!(capabilities["effects"], json!(self.advertised));
        let operations = self.modify_operations;
        let modify = self.advertised.contains(&"modify").then(|| {
            json!({"input": {"replace": operations.contains(&"replace"),
                "merge": operations.contains(&"merge")}})
        });
        assert_eq!(
            capabilities.get("modify"),
            modify.as_ref(),
            "{capabilities}"
        );
        let inject = self
            .advertised
            .contains(&"inject")
            .then(|| json!({"context": {"append": true, "deliverAt": ["now"]}}));
        assert_eq!(
            capabilities.get("inject"),
            inject.as_ref(),
            "{capabilities}"
        );
        let observed = backend.requests_with_method("hooks/observe");
        assert_eq!(observed.len(), 1, "one observe");
        let after_event = &observed[0].json()["params"]["event"];
        assert_eq!(after_event["type"], "tool.after", "{after_event}");
        assert_eq!(after_event["call"]["id"], event["call"]["id"], "same call");
        assert_eq!(after_event["source"], event["source"], "same source");
        assert_ne!(after_event["id"], event["id"], "distinct events");
    }

    /// With `includeNative` (and `body` for every category, which it requires) the
    /// provider payload goes along, untouched.
    pub async fn native_with_include_native(&self) {
        let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let dir = tempfile::tempdir().expect("a temp dir");
        let registration = write_registration(dir.path(), &backend.url(), "fail-closed", true);
        let (payload, args) = &self.pre_tool;
        self.run(&registration, args, payload).await;
        let event = backend.requests()[0].json()["params"]["event"].clone();
        assert_eq!(event["native"]["provider"], self.harness, "{event}");
        assert_eq!(event["native"]["payload"], *payload, "{event}");
    }

    /// A backend's deny is the harness's denial with the backend's reason.
    pub async fn deny(&self) {
        let (ran, _backend) = self
            .pre_tool_with(
                vec![Behaviour::Deny("force push is forbidden".into())],
                "fail-open",
            )
            .await;
        (self.assert_deny)(&ran, "force push is forbidden");
    }

    /// A backend's ask is the harness's ask; behind a harness without one, `ask` was
    /// never advertised, so the reply is unadvertised: a fail-closed denial.
    pub async fn ask(&self) {
        let (ran, _backend) = self
            .pre_tool_with(
                vec![Behaviour::Effects(json!([{"type": "ask"}]))],
                "fail-closed",
            )
            .await;
        match self.assert_ask {
            Some(assert_ask) => assert_ask(&ran),
            None => (self.assert_deny)(&ran, SYNTHETIC_REASON),
        }
    }

    /// No effects: no objection, never a grant.
    pub async fn no_objection(&self) {
        let (ran, _backend) = self
            .pre_tool_with(vec![Behaviour::NoEffect], "fail-closed")
            .await;
        (self.assert_no_objection)(&ran);
    }

    /// A backend's `modify` of the input reaches the harness as the whole effective
    /// input, merged into the original or replacing it; behind a harness that cannot
    /// apply the operation, it is unadvertised.
    pub async fn modify_merge_and_replace(&self) {
        let (_, original, _) = &self.tool;
        let mut merged = original.clone();
        merged["command"] = json!("echo safe");
        merged["timeout"] = json!(5);
        let cases = [
            (
                "merge",
                json!({"command": "echo safe", "timeout": 5}),
                merged,
            ),
            (
                "replace",
                json!({"path": "/tmp/x"}),
                json!({"path": "/tmp/x"}),
            ),
        ];
        for (operation, value, effective) in cases {
            let effects = json!([{"type": "modify", "target": "input",
                "operation": operation, "value": value}]);
            match self.assert_modified {
                Some(assert_modified) if self.modify_operations.contains(&operation) => {
                    let script = vec![Behaviour::Effects(effects)];
                    let (ran, _backend) = self.pre_tool_with(script, "fail-closed").await;
                    assert_modified(&ran, &effective);
                }
                _ => self.unadvertised(&effects).await,
            }
        }
    }

    /// A backend's `message`, and its `inject` of text, reach the harness's context
    /// field; behind a harness without one each is unadvertised. Injected content the
    /// field cannot carry (not text) is the adapter's own denial, never dropped.
    pub async fn message_and_inject(&self) {
        let injected = |part: Value| {
            json!({"type": "inject", "target": "context", "operation": "append",
                "deliverAt": "now", "value": [{"id": "m1", "role": "system", "parts": [part]}]})
        };
        let text = json!({"id": "m1-t", "kind": "text", "mediaType": "text/plain",
            "selection": "body", "text": "the repo is frozen"});
        let cases = [
            (
                json!({"type": "message", "text": "policy note"}),
                "policy note",
            ),
            (injected(text), "the repo is frozen"),
        ];
        for (effect, shown) in cases {
            let kind = effect["type"].as_str().expect("a type");
            match self.assert_context {
                Some(assert_context) if self.advertised.contains(&kind) => {
                    let script = vec![Behaviour::Effects(json!([effect]))];
                    let (ran, _backend) = self.pre_tool_with(script, "fail-closed").await;
                    assert_context(&ran, shown);
                }
                _ => self.unadvertised(&json!([effect])).await,
            }
        }
        if self.advertised.contains(&"inject") {
            // A valid attachment, which the harness has no way to show the agent.
            let image = json!({"id": "m1-i", "kind": "attachment", "mediaType": "image/png",
                "selection": "body", "body": {"ref": "blob-1"}});
            let script = vec![Behaviour::Effects(json!([injected(image)]))];
            let (ran, _backend) = self.pre_tool_with(script, "fail-open").await;
            (self.assert_deny)(&ran, FAILED_REASON);
            assert_stderr_is_the_answer(&ran, FAILED_REASON);
            assert!(ran.log.contains("other than text"), "{ran:?}");
        }
    }

    /// A backend that never answers: fail-open goes on, fail-closed denies generically.
    pub async fn timeout_under_both_policies(&self) {
        let (open, _b) = self
            .pre_tool_with(vec![Behaviour::Blackhole], "fail-open")
            .await;
        (self.assert_no_objection)(&open);
        let (closed, _b) = self
            .pre_tool_with(vec![Behaviour::Blackhole], "fail-closed")
            .await;
        (self.assert_deny)(&closed, SYNTHETIC_REASON);
    }

    /// A reply that is not JSON-RPC: fail-open goes on, fail-closed denies generically.
    pub async fn malformed_reply_under_both_policies(&self) {
        let garbage = || Behaviour::Reply {
            status: 200,
            content_type: Some("application/json".into()),
            body: b"{not json".to_vec(),
        };
        let (open, _b) = self.pre_tool_with(vec![garbage()], "fail-open").await;
        (self.assert_no_objection)(&open);
        let (closed, _b) = self.pre_tool_with(vec![garbage()], "fail-closed").await;
        (self.assert_deny)(&closed, SYNTHETIC_REASON);
    }

    /// Garbage on stdin, and a payload of the wrong shape, are denied (exit 2 with the
    /// generic reason, which every harness reads as a block), details in the log.
    pub async fn garbage_on_stdin(&self) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let registration =
            write_registration(dir.path(), "http://127.0.0.1:9/hooks", "fail-open", false);
        let (_, args) = &self.pre_tool;
        let ran = run_hook(self.harness, &registration, args, b"\x00not json{").await;
        assert_eq!(ran.code, 2, "{ran:?}");
        assert!(ran.log.contains("not JSON"), "details in the log: {ran:?}");
        assert_eq!(ran.stderr, format!("{FAILED_REASON}\n"), "{ran:?}");
        let (mut payload, args) = self.pre_tool.clone();
        for key in ["tool_input", "toolArgs"] {
            if let Some(object) = payload.as_object_mut() {
                if object.contains_key(key) {
                    object.insert(key.into(), json!(42));
                }
            }
        }
        let wrong = self.run(&registration, args, &payload).await;
        (self.assert_deny)(&wrong, FAILED_REASON);
        assert_stderr_is_the_answer(&wrong, FAILED_REASON);
        assert!(wrong.log.contains("must be"), "names the field: {wrong:?}");
    }

    /// A missing registration is the harness's denial, generic, the path in the log.
    pub async fn missing_registration(&self) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let missing = dir.path().join("absent.json");
        let (payload, args) = &self.pre_tool;
        let ran = self.run(&missing, args, payload).await;
        (self.assert_deny)(&ran, FAILED_REASON);
        assert_stderr_is_the_answer(&ran, FAILED_REASON);
        assert!(ran.log.contains("absent.json"), "{ran:?}");
    }

    /// Each intercepted non-tool event reaches the backend as an intercept of its AHP
    /// type with the harness's effects for it; a backend that never answers under
    /// fail-closed is the harness's block there, and a deny (where advertised) is the
    /// block with the backend's reason.
    pub async fn intercepted_events(&self) {
        for intercepted in &self.intercepted {
            let (payload, args) = &intercepted.payload;
            let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
            let dir = tempfile::tempdir().expect("a temp dir");
            let registration = write_intercepting(
                dir.path(),
                &backend.url(),
                "fail-closed",
                &[intercepted.event],
                300,
            );
            let stdin = payload.to_string();
            let ran = run_hook(self.harness, &registration, args, stdin.as_bytes()).await;
            (intercepted.assert_block)(&ran, SYNTHETIC_REASON);
            let requests = backend.requests_with_method("hooks/intercept");
            assert_eq!(requests.len(), 1, "{}: one intercept", intercepted.event);
            let params = requests[0].json()["params"].clone();
            assert_eq!(params["event"]["type"], intercepted.event, "{params}");
            assert_eq!(
                params["capabilities"]["effects"],
                json!(intercepted.advertised)
            );
            if intercepted.advertised.contains(&"deny") {
                let backend =
                    FaultBackend::start(vec![Behaviour::Deny("not this prompt".into())]).await;
                let registration = write_intercepting(
                    dir.path(),
                    &backend.url(),
                    "fail-open",
                    &[intercepted.event],
                    300,
                );
                let ran = run_hook(self.harness, &registration, args, stdin.as_bytes()).await;
                (intercepted.assert_block)(&ran, "not this prompt");
            }
        }
    }

    /// A registration intercepting an event the harness cannot enforce anything on is
    /// refused at load: the harness's denial, the refusal in the log.
    pub async fn undeclared_event_refused(&self) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let registration = write_intercepting(
            dir.path(),
            "http://127.0.0.1:9/hooks",
            "fail-open",
            &["tool.before", "model.request.before"],
            300,
        );
        let (payload, args) = &self.pre_tool;
        let ran = self.run(&registration, args, payload).await;
        (self.assert_deny)(&ran, FAILED_REASON);
        assert_stderr_is_the_answer(&ran, FAILED_REASON);
        assert!(
            ran.log.contains("model.request.before"),
            "names the event: {ran:?}"
        );
    }

    /// The pre-tool payload under a 300 ms budget, stdin closed or left open; it must
    /// answer within the budget, the watchdog's grace and [`SLACK`].
    async fn pre_tool_within_budget(&self, registration: &Path, close: bool) -> Ran {
        warm_compile_cache();
        let (payload, args) = &self.pre_tool;
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--budget-ms", "300"]);
        let stdin = payload.to_string();
        tokio::time::timeout(
            Duration::from_millis(300) + Duration::from_secs(1) + SLACK,
            run_hook_with(self.harness, registration, &all, stdin.as_bytes(), close),
        )
        .await
        .expect("the process answers within its budget")
    }

    /// A harness that never closes stdin: the watchdog answers a denial once the budget
    /// and its grace are over, and the process exits.
    pub async fn watchdog_on_open_stdin(&self) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let registration =
            write_registration(dir.path(), "http://127.0.0.1:9/hooks", "fail-open", false);
        let ran = self.pre_tool_within_budget(&registration, false).await;
        // The event is still unknown: exit 2 with the reason, every harness's block.
        assert_eq!(ran.code, 2, "{ran:?}");
        assert_eq!(ran.stderr, format!("{FAILED_REASON}\n"), "{ran:?}");
        assert!(ran.log.contains("past its budget"), "{ran:?}");
    }

    /// A backend that never answers under a subscription timeout longer than the
    /// process's budget: the budget wins and the call is the harness's denial.
    pub async fn budget_bounds_a_silent_backend(&self) {
        let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
        let dir = tempfile::tempdir().expect("a temp dir");
        let registration = write_intercepting(
            dir.path(),
            &backend.url(),
            "fail-closed",
            &["tool.before"],
            60_000,
        );
        let ran = self.pre_tool_within_budget(&registration, true).await;
        (self.assert_deny)(&ran, BUDGET_REASON);
    }

    /// A call that outlives its budget after the payload named its event is answered in
    /// that event's terms: the harness's denial before a tool, its block at each
    /// intercepted event — at a stop never exit 2, which would keep the agent working.
    pub async fn past_the_budget_after_the_event_is_known(&self) {
        let (payload, args) = &self.pre_tool;
        let ran = run_past_budget(self.harness, args, payload).await;
        (self.assert_deny)(&ran, FAILED_REASON);
        for intercepted in &self.intercepted {
            let (payload, args) = &intercepted.payload;
            let ran = run_past_budget(self.harness, args, payload).await;
            (intercepted.assert_block)(&ran, FAILED_REASON);
        }
    }

    /// A denial stdout cannot take (a full device) would reach the harness as silence,
    /// no objection: it goes out as exit 2 with the reason instead. A stderr that cannot
    /// take the reason leaves the exit code as it is.
    pub async fn unwritable_answer(&self) {
        let backend = FaultBackend::start(vec![Behaviour::Deny("not this".into())]).await;
        let dir = tempfile::tempdir().expect("a temp dir");
        let registration = write_registration(dir.path(), &backend.url(), "fail-open", false);
        let full = || std::fs::File::create("/dev/full").expect("open /dev/full");
        let (payload, args) = &self.pre_tool;
        let mut command = hook_command(self.harness, &registration, args);
        command.stdout(full());
        let ran = run_command(command, payload.to_string().as_bytes(), true).await;
        assert_eq!(ran.code, 2, "{ran:?}");
        assert_eq!(ran.stderr, format!("{FAILED_REASON}\n"), "{ran:?}");
        assert!(ran.log.contains("write the answer to stdout"), "{ran:?}");
        let mut command = hook_command(self.harness, &registration, args);
        command.stderr(full());
        let ran = run_command(command, b"not json", true).await;
        assert_eq!(ran.code, 2, "{ran:?}");
    }

    /// With every log line on (`AHP_LOG=debug`) and a fail-closed backend that refuses the
    /// connection, the denial's stderr holds what the harness contract writes (on exit 2
    /// the reason) and nothing else — no log line, not the backend's address — and the
    /// log lines are in `AHP_LOG_FILE`.
    pub async fn logs_go_to_the_log_file_never_to_stderr(&self) {
        let url = crate::fault_backend::refused_url();
        let dir = tempfile::tempdir().expect("a temp dir");
        let registration = write_registration(dir.path(), &url, "fail-closed", false);
        let (payload, args) = &self.pre_tool;
        let mut command = hook_command(self.harness, &registration, args);
        command.env("AHP_LOG", "debug");
        let ran = run_command(command, payload.to_string().as_bytes(), true).await;
        (self.assert_deny)(&ran, SYNTHETIC_REASON);
        assert_stderr_is_the_answer(&ran, SYNTHETIC_REASON);
        let address = url.trim_start_matches("http://").trim_end_matches("/hooks");
        for shown in [&ran.stdout, &ran.stderr] {
            assert!(!shown.contains(address), "{ran:?}");
        }
        for line in [" DEBUG ", " INFO ", "settled"] {
            assert!(ran.log.contains(line), "{line:?} in the log: {ran:?}");
        }
    }

    /// A component that traps is the harness's denial.
    pub async fn component_trap(&self) {
        let (payload, args) = &self.pre_tool;
        let ran = run_runaway(self.harness, args, payload).await;
        (self.assert_deny)(&ran, FAILED_REASON);
    }

    /// A command line clap cannot parse — an unknown flag after the harness or before it,
    /// a bad value, an extra word, `--registration` missing — is the harness's block for
    /// an unknown event, as any other failure before the payload is read: clap's exit 2
    /// and usage text would be a failed hook to some harnesses, and the text is for the
    /// operator, in the log, never on stderr, which the model reads.
    pub async fn usage_error_is_the_block_before_the_event(&self) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let registration = write_unreachable(dir.path());
        let registration = registration.to_str().expect("a UTF-8 path");
        let harness = self.harness;
        let cases: [(&[&str], &str); 5] = [
            (
                &[harness, "--registration", registration, "--no-such-flag"],
                "unexpected argument '--no-such-flag'",
            ),
            (
                &["--no-such-flag", harness, "--registration", registration],
                "unexpected argument '--no-such-flag'",
            ),
            (
                &[harness, "--registration", registration, "--budget-ms", "0"],
                "`0` is not a budget",
            ),
            (
                &[harness, "--registration", registration, "extra"],
                "'extra'",
            ),
            (&[harness], "--registration <REGISTRATION>"),
        ];
        for (args, clap_says) in cases {
            let command = logged(ahp_binary(), ["hook"].iter().chain(args));
            let ran = run_command(command, b"", true).await;
            (self.assert_blocked_before_the_event)(&ran, FAILED_REASON);
            assert_stderr_is_the_answer(&ran, FAILED_REASON);
            assert!(
                ran.log.contains("the command line: error: "),
                "{args:?}: {ran:?}"
            );
            assert!(ran.log.contains(clap_says), "{args:?}: {ran:?}");
        }
    }

    /// `ahp hook install` takes `ahp hook`'s options for the host and writes them into
    /// every hook's command, quoted for the POSIX shell the harness runs it with (read
    /// back here by `sh`, or `bash` for Copilot's `bash` entry) and with every path made
    /// absolute, given relative to where install ran.
    pub async fn install_carries_the_host_options(&self) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("the temp dir");
        let files = root.join(AWKWARD_DIR);
        std::fs::create_dir(&files).expect("a directory");
        write_unreachable(&files);
        std::fs::write(files.join("component.wasm"), b"\0asm").expect("write");
        std::fs::write(files.join("ca.pem"), crate::pki::Pki::generate().ca_pem).expect("write");
        let relative = |name: &str| format!("{AWKWARD_DIR}/{name}");
        let absolute = |name: &str| files.join(name).display().to_string();
        let given = [
            ("--registration", relative("registration.json")),
            ("--budget-ms", "2000".to_string()),
            ("--audit", relative("audit.jsonl")),
            ("--source", "urn:example:it's \"quoted\" $HOME".to_string()),
            ("--component", relative("component.wasm")),
            ("--trust-roots", relative("ca.pem")),
            (
                "--allow-insecure-http",
                "com.example.a,com.example.b".to_string(),
            ),
            ("--stdio-env", "AHP_HOOK_TEST_A,AHP_HOOK_TEST_B".to_string()),
            ("--retries", "2".to_string()),
            ("--interceptable", "tool.before,turn.start".to_string()),
        ];
        let args: Vec<&str> = given
            .iter()
            .flat_map(|(flag, value)| [*flag, value.as_str()])
            .collect();
        let snippet = install(self.harness, &root, &args);
        // In the order install writes them.
        let mut expected: Vec<String> = vec!["hook".into(), self.harness.into()];
        for (flag, value) in given {
            let value = match flag {
                "--registration" => absolute("registration.json"),
                "--audit" => absolute("audit.jsonl"),
                "--component" => absolute("component.wasm"),
                "--trust-roots" => absolute("ca.pem"),
                _ => value,
            };
            expected.extend([flag.to_string(), value]);
        }
        let entries = installed_commands(&snippet);
        assert!(entries.len() > 1, "{snippet}");
        for (event, shell, command) in entries {
            let mut words = shell_words(shell, &command);
            let program = words.remove(0);
            assert!(Path::new(&program).is_absolute(), "{command}");
            let mut expected = expected.clone();
            if shell == "bash" {
                // Copilot's payloads name no event: its command does.
                expected.extend(["--event".to_string(), event.clone()]);
            }
            assert_eq!(words, expected, "{event}: {command}");
        }
    }

    /// The installed pre-tool command, run as the harness runs it (through its shell,
    /// from another working directory, the payload on stdin), reaches an https backend
    /// signed by a CA only `--trust-roots`, given relative to where install ran, names:
    /// the backend's denial. Without the option the handshake fails and the subscription
    /// fails open: no objection.
    pub async fn installed_command_runs_with_its_host_options(&self) {
        warm_compile_cache();
        let pki = crate::pki::Pki::generate();
        let reason = "the installed hook says no";
        let backend = FaultBackend::start(vec![Behaviour::Deny(reason.into())]).await;
        let port = pki.tls_front(backend.addr()).await;
        let dir = tempfile::tempdir().expect("a temp dir");
        let files = dir.path().join(AWKWARD_DIR);
        std::fs::create_dir(&files).expect("a directory");
        let url = format!("https://localhost:{port}/hooks");
        let registration = write_intercepting(&files, &url, "fail-open", &["tool.before"], 10_000);
        let name = registration.file_name().and_then(OsStr::to_str);
        let registration = format!("{AWKWARD_DIR}/{}", name.expect("a file name"));
        std::fs::write(files.join("ca.pem"), &pki.ca_pem).expect("write the CA");
        let trust_roots = format!("{AWKWARD_DIR}/ca.pem");
        let args = [
            "--registration",
            &registration,
            "--trust-roots",
            &trust_roots,
            "--audit",
            "audit.jsonl",
        ];
        let snippet = install(self.harness, dir.path(), &args);
        let (payload, pre_args) = &self.pre_tool;
        let event = payload["hook_event_name"]
            .as_str()
            .or_else(|| {
                pre_args
                    .windows(2)
                    .find(|w| w[0] == "--event")
                    .map(|w| w[1])
            })
            .expect("the pre-tool event's name");
        let (_, shell, line) = installed_commands(&snippet)
            .into_iter()
            .find(|(native, _, _)| native == event)
            .unwrap_or_else(|| panic!("no {event} hook in {snippet}"));
        let mut command = logged(shell, ["-c", line.as_str()]);
        command.current_dir("/");
        let ran = run_command(command, payload.to_string().as_bytes(), true).await;
        (self.assert_deny)(&ran, reason);
        let audit = std::fs::read_to_string(dir.path().join("audit.jsonl"));
        let audit = audit.unwrap_or_else(|e| panic!("the audit log: {e}; {ran:?}"));
        assert_eq!(audit.lines().count(), 1, "{audit}");
        assert_eq!(backend.requests_with_method("hooks/intercept").len(), 1);
    }
}

/// A directory name a shell word must quote: a space, a quote, a `$`.
const AWKWARD_DIR: &str = "it's a $dir";

/// The snippet `ahp hook install HARNESS ARGS` prints, run in `cwd`.
fn install(harness: &str, cwd: &Path, args: &[&str]) -> Value {
    let output = std::process::Command::new(ahp_binary())
        .args(["hook", "install", harness])
        .args(args)
        .current_dir(cwd)
        .env_remove("AHP_LOG")
        .output()
        .expect("run ahp hook install");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}: {stderr}");
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("the snippet is not JSON ({e}): {output:?}"))
}

/// Every hook command of a snippet: its event, the shell that runs it (`bash` for
/// Copilot's `bash` entry, else `sh`) and the command line.
fn installed_commands(snippet: &Value) -> Vec<(String, &'static str, String)> {
    let mut commands = Vec::new();
    let events = snippet["hooks"].as_object().expect("a hooks object");
    for (event, entries) in events {
        for entry in entries.as_array().expect("an array of entries") {
            // Claude Code, Codex and Gemini nest the hooks in a matcher group.
            let hooks = match entry.get("hooks") {
                Some(hooks) => hooks.as_array().expect("an array of hooks").clone(),
                None => vec![entry.clone()],
            };
            for hook in hooks {
                let (shell, line) = match (&hook["bash"], &hook["command"]) {
                    (Value::String(line), _) => ("bash", line),
                    (_, Value::String(line)) => ("sh", line),
                    _ => panic!("no command in {hook}"),
                };
                commands.push((event.clone(), shell, line.clone()));
            }
        }
    }
    commands
}

/// The words `shell` makes of `line`, as it would run it.
fn shell_words(shell: &str, line: &str) -> Vec<String> {
    let output = std::process::Command::new(shell)
        .args(["-c", r#"eval "set -- $1"; printf '%s\0' "$@""#, "sh", line])
        .output()
        .expect("run the shell");
    assert!(output.status.success(), "{shell} -c {line}: {output:?}");
    let words = String::from_utf8(output.stdout).expect("UTF-8 words");
    words
        .strip_suffix('\0')
        .unwrap_or(&words)
        .split('\0')
        .map(str::to_string)
        .collect()
}

/// One `#[tokio::test]` per scenario of [`Contract`] for the contract built by `$contract`.
#[macro_export]
macro_rules! hook_contract_tests {
    ($contract:expr) => {
        $crate::hook_contract_tests!(@each $contract;
            mapping, native_with_include_native, deny, ask, no_objection,
            modify_merge_and_replace, message_and_inject,
            timeout_under_both_policies, malformed_reply_under_both_policies,
            garbage_on_stdin, missing_registration, component_trap, intercepted_events,
            undeclared_event_refused, watchdog_on_open_stdin, budget_bounds_a_silent_backend,
            past_the_budget_after_the_event_is_known, unwritable_answer,
            logs_go_to_the_log_file_never_to_stderr,
            usage_error_is_the_block_before_the_event, install_carries_the_host_options,
            installed_command_runs_with_its_host_options);
    };
    (@each $contract:expr; $($scenario:ident),*) => {
        $(
            #[tokio::test]
            async fn $scenario() {
                $contract.$scenario().await;
            }
        )*
    };
}
