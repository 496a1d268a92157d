//! Small builders shared by the end-to-end tests: registrations, events, components, one
//! measured call, and the assertions every contract file makes about a settled call.

use crate::fault_backend::Behaviour;
use crate::fault_backend::FaultBackend;
use ahp_host::{
    DecidedBy, Decision, EffectKind, HookCall, Interceptor, Interrupt, Options, Settlement,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The reason of every synthetic deny: generic, never backend text.
pub const SYNTHETIC_REASON: &str = "Required policy backend unavailable.";

/// Scheduling slack allowed beyond a deadline or bound before a call must have settled
/// (a correctness bound, not a benchmark).
pub const SLACK: Duration = Duration::from_millis(150);

/// One HTTP interceptor in a test registration.
#[derive(Clone, Debug)]
pub struct Http<'a> {
    pub id: &'a str,
    pub url: String,
    pub policy: &'a str,
    pub timeout_ms: u64,
    /// `Some(name)`: bearer token from that environment variable.
    pub token_env: Option<&'a str>,
    /// Any other `authentication` binding, verbatim (overrides `token_env`).
    pub authentication: Option<Value>,
}

impl<'a> Http<'a> {
    /// A fail-closed interceptor with a 1 s timeout.
    pub fn new(id: &'a str, url: impl Into<String>) -> Http<'a> {
        Http {
            id,
            url: url.into(),
            policy: "fail-closed",
            timeout_ms: 1_000,
            token_env: None,
            authentication: None,
        }
    }

    pub fn policy(mut self, policy: &'a str) -> Self {
        self.policy = policy;
        self
    }

    pub fn timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = timeout_ms;
        self
    }

    pub fn token_env(mut self, name: &'a str) -> Self {
        self.token_env = Some(name);
        self
    }

    pub fn authentication(mut self, binding: Value) -> Self {
        self.authentication = Some(binding);
        self
    }

    /// A bearer token read from `reference` (`file:PATH` or `env:NAME`) at every dispatch.
    pub fn token_ref(self, reference: &str) -> Self {
        self.authentication(json!({"type": "bearer", "tokenRef": reference}))
    }
}

/// A registration with the given interceptors on `tool.before`, in order.
pub fn registration(backends: &[Http]) -> String {
    registration_on(backends, &["tool.before"])
}

/// A registration with the given interceptors, in order, each intercepting `events`.
pub fn registration_on(backends: &[Http], events: &[&str]) -> String {
    let hooks: Vec<Value> = backends
        .iter()
        .map(|b| {
            let mut hook = json!({
                "id": b.id,
                "transport": {"type": "http", "url": b.url},
                "subscriptions": [{
                    "events": events, "mode": "intercept",
                    "timeoutMs": b.timeout_ms, "failurePolicy": b.policy,
                    "content": {"default": "metadata"}
                }]
            });
            if let Some(name) = b.token_env {
                hook["authentication"] = json!({"type": "bearer", "tokenEnv": name});
            }
            if let Some(binding) = &b.authentication {
                hook["authentication"] = binding.clone();
            }
            hook
        })
        .collect();
    json!({"protocolVersion": "draft", "hooks": hooks}).to_string()
}

/// `ahp intercept --registration R --event E --audit A`, logging at trace level, killed if
/// the test drops it; add host options and environment, then run it.
pub fn traced_intercept_command(
    registration: &Path,
    event: &Path,
    audit: &Path,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::from(ahp_command());
    command
        .arg("intercept")
        .arg("--registration")
        .arg(registration)
        .arg("--event")
        .arg(event)
        .arg("--audit")
        .arg(audit)
        .env("AHP_LOG", TRACE_FILTER)
        .kill_on_drop(true);
    command
}

/// `stdout` is exactly one line holding one JSON object.
pub fn one_json_line(stdout: &str) -> Value {
    assert!(
        stdout.ends_with('\n'),
        "stdout ends with a newline: {stdout:?}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line: {stdout:?}");
    let record: Value = serde_json::from_str(lines[0]).expect("the line is JSON");
    assert!(record.is_object(), "a JSON object: {record}");
    record
}

/// `AHP_LOG` for everything at trace level except Cranelift's code generator. Those
/// targets only log the compilation of the embedded component, which happens before any
/// credential is resolved and cannot contain one; left on, they print about 1.7 GB per
/// run (some 25 s each).
pub const TRACE_FILTER: &str =
    "trace,cranelift_codegen=off,cranelift_frontend=off,wasmtime_internal_cranelift=off";

/// The audit entry of the one interceptor in `record` (asserts there is exactly one).
pub fn only_interceptor(record: &Value) -> &Value {
    let interceptors = record["interceptors"]
        .as_array()
        .expect("interceptors is an array");
    assert_eq!(interceptors.len(), 1, "one interceptor in {record}");
    &interceptors[0]
}

/// Lowercase hex SHA-256 of `bytes`, as the audit's `requestSha256` names what was sent.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("{:x}", sha2::Sha256::digest(bytes))
}

/// The `attempts` of an interceptor's audit entry, in order.
pub fn attempts(entry: &Value) -> &[Value] {
    entry["attempts"].as_array().expect("attempts is an array")
}

/// The `result` of each attempt of an interceptor's audit entry, in order.
pub fn attempt_results(entry: &Value) -> Vec<&str> {
    attempts(entry)
        .iter()
        .map(|a| a["result"].as_str().expect("each attempt has a result"))
        .collect()
}

/// The `failure` of the only interceptor's audit entry (`null` if it did not fail).
pub fn only_failure(settled: &Settlement) -> Value {
    only_interceptor(&record_json(settled))["failure"].clone()
}

/// The `result` of each attempt of the only interceptor, in order.
pub fn only_attempt_results(settled: &Settlement) -> Vec<String> {
    let record = record_json(settled);
    let results = attempt_results(only_interceptor(&record));
    results.into_iter().map(str::to_string).collect()
}

/// One call with the `tool.before` event `id`, deny the only effect the harness enforces.
pub async fn call(interceptor: &Interceptor, id: &str) -> Settlement {
    timed_call(interceptor, id, None).await.0
}

/// The event `id` settled by `interceptor` (deny enforceable, within `budget`), its owned
/// observers not yet run: [`HookCall::complete`] or drop it.
pub async fn settle(interceptor: &Interceptor, id: &str, budget: Option<Duration>) -> HookCall {
    interceptor
        .settle(&event(id), &[EffectKind::Deny], budget, &Interrupt::new())
        .await
        .expect("a valid event")
}

/// [`call`] within an optional hook-call `budget`, measured from start to settlement.
pub async fn timed_call(
    interceptor: &Interceptor,
    id: &str,
    budget: Option<Duration>,
) -> (Settlement, Duration) {
    let started = Instant::now();
    let settled = interceptor
        .intercept(&event(id), &[EffectKind::Deny], budget)
        .await
        .expect("a valid event settles");
    (settled, started.elapsed())
}

/// The settlement's audit record as JSON: what the CLI prints and the audit log stores,
/// so the tests check the record's wire form, not only its Rust type.
pub fn record_json(settled: &Settlement) -> Value {
    serde_json::to_value(&settled.record).expect("a record serializes")
}

/// The call settled as `decision`, by `decided_by`, with `reason`, and its record says the
/// same (`"reason": null` when `reason` is `None`).
pub fn assert_settled(
    settled: &Settlement,
    decision: Decision,
    decided_by: DecidedBy,
    reason: Option<&str>,
) {
    assert_settled_in("settled", settled, decision, decided_by, reason);
}

fn assert_settled_in(
    case: &str,
    settled: &Settlement,
    decision: Decision,
    decided_by: DecidedBy,
    reason: Option<&str>,
) {
    let record = &record_json(settled);
    assert_eq!(
        (
            settled.decision,
            settled.decided_by,
            settled.reason.as_deref()
        ),
        (decision, decided_by, reason),
        "{case}: {record}"
    );
    let decision = match decision {
        Decision::Allow => "allow",
        Decision::Ask => "ask",
        Decision::Deny => "deny",
    };
    assert_eq!(record["decision"], json!(decision), "{case}: {record}");
    // The audit words spelled out here, not taken from `DecidedBy::as_str`, which is what
    // the host itself writes them with.
    let decided_by = match decided_by {
        DecidedBy::NoObjection => "no-objection",
        DecidedBy::BackendDeny => "backend-deny",
        DecidedBy::BackendAsk => "backend-ask",
        DecidedBy::SyntheticDeny => "synthetic-deny",
        DecidedBy::Interrupted => "interrupted",
        DecidedBy::BudgetExpired => "budget-expired",
        DecidedBy::EngineFailure => "engine-failure",
        DecidedBy::Shutdown => "shutdown",
        other => panic!("{case}: no audit word known for {other:?}"),
    };
    assert_eq!(record["decidedBy"], json!(decided_by), "{case}: {record}");
    assert_eq!(record["reason"], json!(reason), "{case}: {record}");
}

/// The one interceptor failed operationally with `class`, and the call settled as its
/// `policy` says: fail-open allows with no objection and no reason (outcome
/// `failed-open`), fail-closed is a synthetic deny (outcome `failed-closed`). Returns the
/// entry's `failure` object, for the phase and details.
pub fn assert_failed(settled: &Settlement, policy: &str, class: &str, case: &str) -> Value {
    let record = &record_json(settled);
    let entry = only_interceptor(record);
    assert_eq!(entry["failure"]["class"], json!(class), "{case}: {record}");
    assert_eq!(entry["policy"], json!(policy), "{case}: {record}");
    let (decision, decided_by, reason, outcome) = match policy {
        "fail-open" => (Decision::Allow, DecidedBy::NoObjection, None, "failed-open"),
        "fail-closed" => (
            Decision::Deny,
            DecidedBy::SyntheticDeny,
            Some(SYNTHETIC_REASON),
            "failed-closed",
        ),
        other => panic!("{case}: unknown policy {other}"),
    };
    assert_settled_in(case, settled, decision, decided_by, reason);
    assert_eq!(entry["outcome"], json!(outcome), "{case}: {record}");
    entry["failure"].clone()
}

/// The call settled at `deadline`: no earlier, and before `deadline` + [`SLACK`].
pub fn assert_settled_at(elapsed: Duration, deadline: Duration, case: &str) {
    println!("{case}: settled in {elapsed:?} (deadline {deadline:?})");
    assert!(
        elapsed >= deadline,
        "{case}: settled in {elapsed:?}, before the {deadline:?} deadline"
    );
    assert_settled_by(elapsed, deadline, case);
}

/// The call settled by `deadline`: before `deadline` + [`SLACK`].
pub fn assert_settled_by(elapsed: Duration, deadline: Duration, case: &str) {
    assert!(
        elapsed < deadline + SLACK,
        "{case}: settled in {elapsed:?}, later than {deadline:?} + {SLACK:?}"
    );
}

/// The call's first deadline ran out while it waited for a component instance: its one
/// interceptor failed as `deadline-exceeded` in phase `queue`, settled by `policy` (see
/// [`assert_failed`]), and nothing was sent.
pub fn assert_settled_in_queue(settled: &Settlement, policy: &str, case: &str) {
    let failure = assert_failed(settled, policy, "deadline-exceeded", case);
    assert_eq!(
        failure,
        json!({"class": "deadline-exceeded", "phase": "queue"}),
        "{case}"
    );
    let record = record_json(settled);
    let entry = only_interceptor(&record);
    assert_eq!(entry["attempts"], json!([]), "nothing was sent: {record}");
    assert!(entry.get("requestSha256").is_none(), "{record}");
}

/// Nothing reached `backend`, not even a connection, after waiting 200 ms for a wrongly
/// sent request to arrive.
pub async fn assert_nothing_sent(backend: &FaultBackend) {
    assert!(
        !backend
            .wait_for_requests(1, Duration::from_millis(200))
            .await,
        "a request arrived"
    );
    assert_eq!(backend.requests().len(), 0);
    assert_eq!(backend.connections(), 0, "not even a connection");
}

/// The records of an audit log, one JSON value per line.
pub fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("the audit log exists")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each audit line is JSON"))
        .collect()
}

/// An interceptor writing to `audit` with one interceptor, `id` at `url`, under
/// `policy`.
pub async fn audited(audit: &Path, id: &str, url: &str, policy: &str) -> Interceptor {
    let options = Options {
        audit_path: Some(audit.to_path_buf()),
        ..Options::default()
    };
    let reg = registration(&[Http::new(id, url.to_string()).policy(policy)]);
    Interceptor::new(&reg, options).await.expect("valid")
}

/// The records of an audit log once it holds `n` (waiting up to 5 s for a record still
/// being written: a dropped call's, or one that waited for the file's lock), and 300 ms
/// more: a record written twice, the second a little later, is then counted too.
pub async fn audit_lines_once(path: &Path, n: usize) -> Vec<Value> {
    let waited = Instant::now();
    while audit_lines(path).len() < n && waited.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    audit_lines(path)
}

/// Polls `condition` every 5 ms until it holds or `within` passes; whether it held.
pub async fn eventually(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A hold on the audit file at `path` as another process's would be, as far as this one
/// can tell: a second open file's `flock`, released by `unlock` or when dropped.
pub fn locked_elsewhere(path: &Path) -> std::fs::File {
    let holder = std::fs::File::open(path).expect("the audit file exists");
    holder.lock().expect("lock the audit file");
    holder
}

/// A valid `tool.before` event with the given id.
pub fn event(id: &str) -> String {
    json!({
        "id": id,
        "source": "urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d",
        "type": "tool.before",
        "time": "2026-11-30T12:00:00Z",
        "session": {"id": "sess_e2e"},
        "call": {"id": format!("call_{id}")},
        "tool": {"name": "Bash", "input": {"command": "make test"}, "origin": "native"},
        "path": "native"
    })
    .to_string()
}

/// A valid event of the interceptable type `event_type` with the given id: the example
/// of `valid_events.json` (shared with the component's unit tests), which holds every
/// member the type requires and the value of its modify target, in an envelope.
pub fn valid_event(event_type: &str, id: &str) -> String {
    static EXAMPLES: OnceLock<Value> = OnceLock::new();
    let examples = EXAMPLES.get_or_init(|| {
        serde_json::from_str(include_str!("valid_events.json")).expect("the examples are JSON")
    });
    let mut event = examples
        .get(event_type)
        .unwrap_or_else(|| panic!("no example of {event_type}"))
        .clone();
    event["id"] = json!(id);
    event["source"] = json!("urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d");
    event["type"] = json!(event_type);
    event["time"] = json!("2026-11-30T12:00:00Z");
    event["session"] = json!({"id": "sess_e2e"});
    event.to_string()
}

/// The hostile test component (`tests/runaway-guest`): spins or panics in `intercept`.
pub fn runaway_component() -> Vec<u8> {
    std::fs::read(env!("RUNAWAY_COMPONENT"))
        .expect("the runaway component was built by tests/build.rs")
}

/// The variable the runaway component's cross-credential mode reads `com.example.a`'s
/// bearer token from.
pub use ahp_runaway_guest::CROSS_TOKEN_ENV;

/// `com.example.a`'s token in the cross-credential mode: looks like a secret, and must
/// reach no other backend and no audit record.
pub const CROSS_TOKEN: &str = "tok-cross-7d41e0b9c2f8";

/// The loopback backends of the runaway component's cross-credential mode: `a`, whose
/// bearer token is [`CROSS_TOKEN_ENV`], `b`, without authentication, and `report`, which
/// hears what the host answered to each delivery the component must not be granted.
pub struct CrossCredential {
    pub a: FaultBackend,
    pub b: FaultBackend,
    pub report: FaultBackend,
}

impl CrossCredential {
    /// Three backends that would each have no objection.
    pub async fn start() -> CrossCredential {
        CrossCredential {
            a: FaultBackend::start(vec![Behaviour::NoEffect]).await,
            b: FaultBackend::start(vec![Behaviour::NoEffect]).await,
            report: FaultBackend::start(vec![Behaviour::NoEffect]).await,
        }
    }

    /// The registration that selects the mode: a JSON document whose hooks are the
    /// three backends the component plans (a host serves no credential from a text it
    /// cannot read as hooks), the mode's words in a member of its own (the runaway
    /// component parses no JSON).
    pub fn registration(&self) -> String {
        let (a, b, report) = (self.a.url(), self.b.url(), self.report.url());
        let http = |url: &str| serde_json::json!({"type": "http", "url": url});
        serde_json::json!({"hooks": [
            {"id": "com.example.a", "transport": http(&a),
             "authentication": {"type": "bearer", "tokenEnv": CROSS_TOKEN_ENV}},
            {"id": "com.example.b", "transport": http(&b)},
            {"id": "com.example.report", "transport": http(&report)},
        ], "x-runaway": format!("cross-credential {CROSS_TOKEN_ENV} {a} {b} {report}")})
        .to_string()
    }

    /// Neither `a` nor `b` got a request, nor even a connection (so `b` never saw `a`'s
    /// token, and `a` was never called without it), and the component heard
    /// `not-permitted` for each of the three deliveries, not a trap or another error, and
    /// `deadline-exceeded` for a credential asked for past its deadline (none acquired).
    pub async fn assert_every_delivery_refused(&self) {
        assert_nothing_sent(&self.a).await;
        assert_nothing_sent(&self.b).await;
        assert!(
            self.report
                .wait_for_requests(1, Duration::from_secs(5))
                .await,
            "the component reported what the host answered"
        );
        let reports = self.report.requests();
        assert_eq!(reports.len(), 1, "one report");
        assert_eq!(
            reports[0].json(),
            json!({
                "cross-credential": "not-permitted",
                "unauthenticated": "not-permitted",
                "unknown-backend": "not-permitted",
                "past-deadline": "deadline-exceeded",
            })
        );
        assert!(reports[0].header_values("authorization").is_empty());
    }
}

/// Builds an interceptor with the embedded component and default options.
pub async fn interceptor(registration: &str) -> Interceptor {
    Interceptor::new(registration, ahp_host::Options::default())
        .await
        .expect("valid test registration")
}

/// Makes a FIFO at `path` (`mkfifo`): opening it for reading blocks until a writer
/// comes, a file that never reads (a mount gone away, a slow credential).
pub fn make_fifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(
        made.expect("run mkfifo").success(),
        "mkfifo {}",
        path.display()
    );
}

/// Opens FIFO `path` for writing, without blocking, once something has it open for
/// reading (before that, the open fails with ENXIO): returned, it proves a reader is
/// there, and a write through it never blocks on a missing one. Panics after 10 s.
pub async fn open_fifo_once_read(path: &Path) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt as _;
    let given_up = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path);
        match opened {
            Ok(file) => return file,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                assert!(
                    std::time::Instant::now() < given_up,
                    "nothing opened {} for reading in 10 s",
                    path.display()
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Err(e) => panic!("open {}: {e}", path.display()),
        }
    }
}

/// What a child runs between fork and exec (`pre_exec`) to have its file size capped at
/// `limit` bytes (RLIMIT_FSIZE): a write past it fails, and raises SIGXFSZ, whose default
/// action ends the process. Only async-signal-safe calls.
pub fn cap_file_size(limit: u64) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    move || {
        let cap = libc::rlimit {
            rlim_cur: limit as libc::rlim_t,
            rlim_max: limit as libc::rlim_t,
        };
        // SAFETY: setrlimit(2) with a valid rlimit, on this (the child's) process.
        match unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &cap) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }
}

/// The `ahp` binary of this build, built on first use.
///
/// `CARGO_BIN_EXE_*` exists only for binaries of the test's own package, and `ahp` belongs
/// to `ahp-host`, so the binary is found beside this test executable
/// (`<target>/<profile>/deps/<test>`) and built there with cargo when it is missing or
/// older than this test executable (a no-op when it is up to date).
pub fn ahp_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test executable's path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("tests run from <target>/<profile>/deps");
        let target_dir = profile_dir.parent().expect("a target directory");
        let binary = profile_dir.join(format!("ahp{}", std::env::consts::EXE_SUFFIX));
        // Missing, or older than this test (so possibly built from older host sources).
        let stale = match (
            binary.metadata().and_then(|m| m.modified()),
            exe.metadata().and_then(|m| m.modified()),
        ) {
            (Ok(built), Ok(test)) => built < test,
            _ => true,
        };
        if stale {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut build = std::process::Command::new(cargo);
            build
                .args(["build", "-p", "ahp-host", "--bin", "ahp"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .env("CARGO_TARGET_DIR", target_dir);
            // Drop what cargo set for this test process: build scripts track some of it
            // (ring: CARGO_MANIFEST_DIR), and a difference would rebuild them here and
            // again in the next outer `cargo test`.
            for (name, _) in std::env::vars_os() {
                let name = name.to_string_lossy();
                let set_for_tests = name.starts_with("CARGO_PKG_")
                    || [
                        "CARGO_MANIFEST_DIR",
                        "CARGO_MANIFEST_PATH",
                        "CARGO_CRATE_NAME",
                        "CARGO_BIN_NAME",
                        "CARGO_PRIMARY_PACKAGE",
                        "CARGO_TARGET_TMPDIR",
                        "CARGO_RUSTC_CURRENT_DIR",
                        "OUT_DIR",
                    ]
                    .contains(&name.as_ref());
                if set_for_tests {
                    build.env_remove(name.as_ref());
                }
            }
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                build.arg("--release");
            }
            let status = build.status().expect("run cargo build for the ahp binary");
            assert!(
                status.success(),
                "cargo build -p ahp-host --bin ahp failed: {status}"
            );
        }
        assert!(binary.exists(), "no ahp binary at {}", binary.display());
        binary
    })
}

/// The compiled-component cache of every `ahp` a test starts (its `AHP_CACHE_DIR`):
/// `<target>/tmp/ahp-cache`, beside the binary, never the user's own
/// (`~/.cache/ahp-interceptor`), which the suite would fill with an entry per component
/// build. Shared by the tests and kept between runs, so a timed scenario finds the
/// component compiled; pruned as any cache is, and gone with `cargo clean`. A test of the
/// cache itself gives its process a directory of its own.
pub fn test_cache_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let target_dir = ahp_binary()
            .parent()
            .and_then(Path::parent)
            .expect("the binary is in <target>/<profile>");
        target_dir.join("tmp").join("ahp-cache")
    })
}

/// `ahp` as the tests start it, to be given its arguments: [`ahp_binary`] with its cache
/// in [`test_cache_dir`].
pub fn ahp_command() -> std::process::Command {
    let mut command = std::process::Command::new(ahp_binary());
    command.env("AHP_CACHE_DIR", test_cache_dir());
    command
}

/// How one `ahp` run ended: its exit code and both output streams (UTF-8, as everything
/// `ahp` writes is).
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn of(output: std::process::Output) -> Run {
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("UTF-8 output");
        Run {
            code: output.status.code(),
            stdout: text(output.stdout),
            stderr: text(output.stderr),
        }
    }

    /// Asserts the exit code, showing `case` and both streams when it is wrong.
    pub fn assert_exit(&self, code: i32, case: &str) {
        assert_eq!(
            self.code,
            Some(code),
            "{case}\nstdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
    }
}

/// The first number among a bench's arguments (`cargo bench ... -- N`), or `default`.
pub fn bench_count(default: usize) -> usize {
    std::env::args()
        .filter_map(|a| a.parse().ok())
        .next()
        .unwrap_or(default)
}

/// Median and p99 of `samples`, in µs (sorts them), for the benches.
pub fn median_p99_us(samples: &mut [std::time::Duration]) -> (f64, f64) {
    samples.sort();
    let us = |d: std::time::Duration| d.as_secs_f64() * 1e6;
    (
        us(samples[samples.len() / 2]),
        us(samples[samples.len() * 99 / 100]),
    )
}
