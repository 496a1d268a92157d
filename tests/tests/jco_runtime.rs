//! A second runtime (issue 13): the same component under Node.js through jco, hosted by
//! `tests/jco-host/host.mjs`, a JS implementation of the documented imports (README,
//! "Hosting the component elsewhere"), against the fault-injecting loopback backend, and
//! on the hostile test component (`tests/runaway-guest`) for what the host must bound or
//! refuse.
//!
//! Needs Node.js [`NODE_VERSIONS`] (`tests/jco-host/.node/bin/node` if there, else `node`
//! on PATH: see [`node`]) and `npm ci --prefix tests/jco-host` (the README's test command
//! runs `tests/install-test-deps.sh`, which sees to both); without them these tests fail
//! and say so.

use ahp_host::{Decision, EffectKind, EMBEDDED_COMPONENT};
use ahp_tests::fault_backend::{Behaviour, FaultBackend, Recorded};
use ahp_tests::support::{
    assert_nothing_sent, attempt_results, event, interceptor, one_json_line, record_json,
    registration, runaway_component, CrossCredential, Http, CROSS_TOKEN, CROSS_TOKEN_ENV, SLACK,
    SYNTHETIC_REASON,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

const BACKEND: &str = "com.example.policy";

fn jco_host_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jco-host")
}

/// The Node.js these tests run, and its version, checked once against [`NODE_VERSIONS`]:
/// the one `tests/install-test-deps.sh` puts at `tests/jco-host/.node/bin/node` when the
/// system's is missing or too old, else `node` on PATH. The one definition of which node.
fn node_binary() -> &'static Path {
    static NODE: OnceLock<PathBuf> = OnceLock::new();
    NODE.get_or_init(|| {
        let local = jco_host_dir().join(".node/bin/node");
        let (node, which) = if local.exists() {
            let which = local.display().to_string();
            (local, which)
        } else {
            (PathBuf::from("node"), "`node` on PATH".to_owned())
        };
        let output = std::process::Command::new(&node)
            .arg("--version")
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {which} ({e}): the jco tests need Node.js {NODE_VERSIONS} \
                     (tests/install-test-deps.sh installs it)"
                )
            });
        let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        assert!(
            output.status.success() && node_version_fits(&version),
            "{which} is Node.js {version:?}: the jco tests need Node.js {NODE_VERSIONS} \
             (tests/install-test-deps.sh installs one in tests/jco-host/.node)"
        );
        node
    })
}

/// Whether `node --version`'s `version` (`v20.19.0`) is in [`NODE_VERSIONS`].
fn node_version_fits(version: &str) -> bool {
    let mut parts = version.trim_start_matches('v').split('.');
    let mut next = || parts.next().and_then(|part| part.parse::<u32>().ok());
    match (next(), next()) {
        (Some(major), Some(minor)) => {
            (major == 20 && minor >= 19) || (major == 22 && minor >= 12) || major > 22
        }
        _ => false,
    }
}

fn node() -> std::process::Command {
    std::process::Command::new(node_binary())
}

/// [`node`], to be awaited.
fn node_async() -> tokio::process::Command {
    tokio::process::Command::from(node())
}

/// `wasm` transpiled by `jco transpile ahp_interceptor.wasm -o out --instantiation
/// async`: the directory, and the entry module in it.
fn transpile(wasm: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let jco = jco_host_dir().join("node_modules/@bytecodealliance/jco/dist/jco.js");
    assert!(
        jco.exists(),
        "jco is not installed at {}: run tests/install-test-deps.sh (its `npm ci --prefix tests/jco-host`)",
        jco.display()
    );
    let dir = tempfile::tempdir().expect("a temporary directory");
    let component = dir.path().join("ahp_interceptor.wasm");
    std::fs::write(&component, wasm).expect("write the component");
    let out = dir.path().join("out");
    let output = node()
        .arg(&jco)
        .arg("transpile")
        .arg(&component)
        .arg("-o")
        .arg(&out)
        .args([
            "--instantiation",
            "async",
            "--name",
            "ahp_interceptor",
            "--quiet",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{}` ({e})", node_binary().display()));
    assert!(
        output.status.success(),
        "jco transpile under `{}` failed: {}",
        node_binary().display(),
        String::from_utf8_lossy(&output.stderr)
    );
    // The generated module is ESM; Node needs to be told so.
    std::fs::write(out.join("package.json"), r#"{"type":"module"}"#).expect("package.json");
    let entry = out.join("ahp_interceptor.js");
    (dir, entry)
}

/// The Node.js versions jco's bundler runs on (`tests/jco-host/package.json`'s engines).
const NODE_VERSIONS: &str = "^20.19.0 || >=22.12.0";

/// The embedded component, transpiled once per test binary; the entry module.
fn transpiled() -> &'static Path {
    static OUT: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &OUT.get_or_init(|| transpile(EMBEDDED_COMPONENT)).1
}

/// The hostile component (`tests/runaway-guest`: its `intercept` traps or spins),
/// transpiled once per test binary; the entry module.
fn runaway() -> &'static Path {
    static OUT: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &OUT.get_or_init(|| transpile(&runaway_component())).1
}

/// Far longer than any call here takes: a host that hangs fails its test instead of
/// holding the test run.
const HOST_LIMIT: Duration = Duration::from_secs(30);

/// One hook call for event `id` through the JS host; its printed settlement.
async fn call(registration: &str, id: &str) -> Value {
    call_on(transpiled(), registration, id).await
}

/// One hook call for event `id` through the JS host on the transpiled component `entry`;
/// its printed settlement, after checking that the exit code is the decision's.
async fn call_on(entry: &Path, registration: &str, id: &str) -> Value {
    call_with_env(entry, registration, id, &[]).await.0
}

/// [`call_on`], with these variables added to the host's environment; the settlement, and
/// what the host wrote to stderr.
async fn call_with_env(
    entry: &Path,
    registration: &str,
    id: &str,
    env: &[(&str, &str)],
) -> (Value, String) {
    call_with_event(entry, registration, &event(id), id, env).await
}

/// [`call_with_env`] for the event `text`, whose id is `id`.
async fn call_with_event(
    entry: &Path,
    registration: &str,
    text: &str,
    id: &str,
    env: &[(&str, &str)],
) -> (Value, String) {
    let output = run_host(entry, registration, text, env).await;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    // Exit 1 is a refusal (no settlement), or the host itself failed.
    assert!(
        matches!(output.status.code(), Some(0 | 2 | 3)),
        "host.mjs failed ({}): {stderr}",
        output.status
    );
    let settled = one_json_line(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(settled["audit"]["event"]["id"], json!(id), "{settled}");
    let code = match settled["decision"].as_str() {
        Some("allow") => 0,
        Some("deny") => 2,
        Some("ask") => 3,
        other => panic!("no decision: {other:?} in {settled}"),
    };
    assert_eq!(output.status.code(), Some(code), "{settled} {stderr}");
    (settled, stderr)
}

/// Runs `node host.mjs` for the event `text` on the transpiled component `entry`, with
/// `env` added to its environment, killed past [`HOST_LIMIT`].
async fn run_host(
    entry: &Path,
    registration: &str,
    text: &str,
    env: &[(&str, &str)],
) -> std::process::Output {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = dir.path().join("registration.json");
    let evt = dir.path().join("event.json");
    std::fs::write(&reg, registration).expect("write registration");
    std::fs::write(&evt, text).expect("write event");
    let running = node_async()
        .arg(jco_host_dir().join("host.mjs"))
        .arg(entry)
        .arg(&reg)
        .arg(&evt)
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(HOST_LIMIT, running)
        .await
        .unwrap_or_else(|_| panic!("host.mjs still running after {HOST_LIMIT:?}: killed"))
        .expect("run node")
}

fn one_backend(backend: &FaultBackend, policy: &str, timeout_ms: u64) -> String {
    registration(&[Http::new(BACKEND, backend.url())
        .policy(policy)
        .timeout_ms(timeout_ms)])
}

/// The audit entry of the one interceptor.
fn entry(settled: &Value) -> &Value {
    let interceptors = settled["audit"]["interceptors"]
        .as_array()
        .expect("interceptors");
    assert_eq!(interceptors.len(), 1, "{settled}");
    &interceptors[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_allows_when_the_backend_has_no_objection() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let settled = call(
        &one_backend(&backend, "fail-closed", 2000),
        "evt_node_allow",
    )
    .await;
    assert_eq!(settled["decision"], json!("allow"), "{settled}");
    assert_eq!(settled["decidedBy"], json!("no-objection"));
    assert_eq!(entry(&settled)["outcome"], json!("no-effect"));
    let sent = backend.requests_with_method("hooks/intercept");
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].json()["params"]["event"]["id"],
        json!("evt_node_allow")
    );
    assert_eq!(sent[0].header_values("content-type"), ["application/json"]);
    assert_eq!(sent[0].header_values("accept-encoding"), ["identity"]);
}

/// A settlement whose observers past the component's observer limit are withheld
/// (an empty delivery, recorded `withheld`) is trusted by the Node host as by the Rust
/// host: twenty observers of a 4 MiB event, the last five withheld, and the allow stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_trusts_withheld_observers_as_the_rust_host_does() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let mut reg: Value =
        serde_json::from_str(&one_backend(&backend, "fail-closed", 10_000)).unwrap();
    let hooks = reg["hooks"].as_array_mut().unwrap();
    for n in 0..20 {
        hooks.push(json!({"id": format!("com.example.watch{n}"),
            "transport": {"type": "http", "url": backend.url()},
            "subscriptions": [{"events": ["tool.before"], "mode": "observe",
                "content": {"default": "metadata"}}]}));
    }
    let reg = reg.to_string();
    let id = "evt_node_withheld";
    let mut large: Value = serde_json::from_str(&event(id)).unwrap();
    large["tool"]["input"]["command"] = json!("x".repeat(4 << 20));
    let large = large.to_string();
    let results = |audit: &Value| -> Vec<Value> {
        let observers = audit["observers"].as_array().expect("observers");
        observers.iter().map(|o| o["result"].clone()).collect()
    };

    let (settled, stderr) = call_with_event(transpiled(), &reg, &large, id, &[]).await;
    assert_eq!(settled["decision"], json!("allow"), "{stderr}");
    assert_eq!(settled["decidedBy"], json!("no-objection"));
    // The Node host sends no observers: only the component's own `withheld` is recorded.
    let mut expected = vec![Value::Null; 15];
    expected.extend(vec![json!("withheld"); 5]);
    assert_eq!(results(&settled["audit"]), expected);

    let rust = interceptor(&reg).await;
    let settled = rust
        .intercept(&large, &[EffectKind::Deny], None)
        .await
        .expect("the call settles");
    assert_eq!(settled.decision, Decision::Allow);
    let withheld = results(&record_json(&settled));
    assert_eq!(withheld[15..], expected[15..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_returns_an_explicit_deny_with_the_backends_reason() {
    let backend = FaultBackend::start(vec![Behaviour::Deny("no rm -rf".into())]).await;
    let settled = call(&one_backend(&backend, "fail-open", 2000), "evt_node_deny").await;
    assert_eq!(settled["decision"], json!("deny"), "{settled}");
    assert_eq!(settled["decidedBy"], json!("backend-deny"));
    assert_eq!(settled["reason"], json!("no rm -rf"));
    assert_eq!(entry(&settled)["outcome"], json!("deny"));
}

/// A settlement line longer than a pipe holds (a 200 KiB deny reason, which the line
/// carries twice) reaches a reader that is slow to read it whole: the host exits once the
/// line is out, not as soon as it is handed to the pipe, which cut it at 64 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_prints_a_long_settlement_whole_to_a_slow_reader() {
    use tokio::io::AsyncReadExt as _;
    let reason = "r".repeat(200 << 10);
    let backend = FaultBackend::start(vec![Behaviour::Deny(reason.clone())]).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (reg, evt) = (
        dir.path().join("registration.json"),
        dir.path().join("event.json"),
    );
    std::fs::write(&reg, one_backend(&backend, "fail-open", 2000)).expect("write registration");
    std::fs::write(&evt, event("evt_node_long")).expect("write event");
    let mut host = node_async()
        .arg(jco_host_dir().join("host.mjs"))
        .arg(transpiled())
        .arg(&reg)
        .arg(&evt)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node");
    let mut stdout = host.stdout.take().expect("piped stdout");
    // Nothing read until the call settled and the host filled the pipe with its line.
    assert!(
        ahp_tests::support::eventually(Duration::from_secs(30), || pipe_is_full(&stdout)).await,
        "the host never filled its stdout"
    );
    let mut printed = String::new();
    let reading = stdout.read_to_string(&mut printed);
    tokio::time::timeout(HOST_LIMIT, reading)
        .await
        .expect("the host's output ends")
        .expect("UTF-8 output");
    let status = host.wait().await.expect("the host's exit");
    let settled = one_json_line(&printed);
    assert_eq!(
        settled["reason"],
        json!(reason),
        "{} bytes printed",
        printed.len()
    );
    assert_eq!(status.code(), Some(2));
}

/// Whether the pipe `stdout` reads holds as much as it can: its writer is blocked.
#[cfg(target_os = "linux")]
fn pipe_is_full(stdout: &tokio::process::ChildStdout) -> bool {
    use std::os::fd::AsRawFd as _;
    let fd = stdout.as_raw_fd();
    // SAFETY: fcntl(2) on our own pipe's descriptor; it touches no memory of ours.
    let capacity = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    let mut held: libc::c_int = 0;
    // SAFETY: ioctl(2) FIONREAD on that descriptor writes one int, `held`.
    let asked = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut held) };
    capacity > 0 && asked == 0 && held >= capacity
}

/// Elsewhere, a pipe's capacity cannot be asked: three seconds stand for it.
#[cfg(not(target_os = "linux"))]
fn pipe_is_full(_: &tokio::process::ChildStdout) -> bool {
    static SINCE: OnceLock<std::time::Instant> = OnceLock::new();
    SINCE.get_or_init(std::time::Instant::now).elapsed() >= Duration::from_secs(3)
}

/// A silent backend, 200 ms: settled by `policy` at the deadline, in the JS host too.
async fn timeout_case(policy: &str, id: &str) -> Value {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let settled = call(&one_backend(&backend, policy, 200), id).await;
    let entry = entry(&settled);
    assert_eq!(
        entry["failure"],
        json!({"class": "deadline-exceeded", "phase": "await-response"}),
        "{settled}"
    );
    let elapsed = settled["audit"]["elapsedMs"].as_u64().expect("elapsedMs");
    let bound = 200 + SLACK.as_millis() as u64;
    assert!(
        (200..=bound).contains(&elapsed),
        "settled at {elapsed} ms, deadline 200 ms (+{} ms slack)",
        SLACK.as_millis()
    );
    assert_eq!(backend.requests().len(), 1, "sent once");
    settled
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_times_out_fail_open_as_allow_at_the_deadline() {
    let settled = timeout_case("fail-open", "evt_node_timeout_open").await;
    assert_eq!(settled["decision"], json!("allow"), "{settled}");
    assert_eq!(entry(&settled)["outcome"], json!("failed-open"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_times_out_fail_closed_as_the_synthetic_denial_at_the_deadline() {
    let settled = timeout_case("fail-closed", "evt_node_timeout_closed").await;
    assert_eq!(settled["decision"], json!("deny"), "{settled}");
    assert_eq!(settled["decidedBy"], json!("synthetic-deny"));
    assert_eq!(settled["reason"], json!(SYNTHETIC_REASON));
    assert_eq!(entry(&settled)["outcome"], json!("failed-closed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_fails_a_malformed_reply_closed() {
    let backend = FaultBackend::start(vec![Behaviour::Reply {
        status: 200,
        content_type: Some("application/json".into()),
        body: b"{\"jsonrpc\":\"2.0\",\"id\":$ID$,\"result\":".to_vec(),
    }])
    .await;
    let settled = call(
        &one_backend(&backend, "fail-closed", 2000),
        "evt_node_malformed",
    )
    .await;
    assert_eq!(settled["decision"], json!("deny"), "{settled}");
    assert_eq!(settled["decidedBy"], json!("synthetic-deny"));
    assert_eq!(settled["reason"], json!(SYNTHETIC_REASON));
    let entry = entry(&settled);
    assert_eq!(entry["outcome"], json!("failed-closed"));
    assert_eq!(
        entry["failure"]["class"],
        json!("malformed-json"),
        "{settled}"
    );
}

/// What stops a connection being made is classified as in the Rust host: a refused
/// port, a missing route and an address the socket cannot take (a link-local one without
/// its interface: EINVAL on Linux, once `connection-lost` in Node, and connected through an
/// interface of libuv's choosing from Node 22 on until the JS host refused it itself) are
/// `connection-refused` in `connect`, a name that does not resolve has detail
/// `unresolved-host`; each settled by the policy (fail-open here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_classifies_a_connection_never_made_as_the_rust_host_does() {
    let refused = ahp_tests::fault_backend::refused_url();
    let cases = [
        (refused.as_str(), None),
        ("https://224.0.0.1:9/hooks", None),
        ("https://[fe80::1]:9/hooks", None),
        ("https://ahp-backend.invalid/hooks", Some("unresolved-host")),
    ];
    for (i, (url, detail)) in cases.into_iter().enumerate() {
        assert_never_connected(url, &format!("evt_node_unconnected_{i}"), detail).await;
    }
}

/// One fail-open call to `url`, which takes no request: allowed, its failure
/// `connection-refused` in `connect`, with `detail` if any, in both hosts.
async fn assert_never_connected(url: &str, id: &str, detail: Option<&str>) {
    let reg = registration(&[Http::new(BACKEND, url).policy("fail-open").timeout_ms(5000)]);
    let settled = call(&reg, id).await;
    assert_eq!(settled["decision"], json!("allow"), "{url}: {settled}");
    let mut expected = json!({"class": "connection-refused", "phase": "connect"});
    if let Some(detail) = detail {
        expected["detail"] = json!(detail);
    }
    assert_eq!(entry(&settled)["failure"], expected, "{url}: {settled}");
    let rust = in_rust_host(&reg, id).await;
    assert_eq!(rust["failure"], expected, "{url}, ahp-host");
}

/// The TLS handshake's failures are classified as in the Rust host: a peer that hangs up
/// in it is `connection-refused`, a certificate Node does not trust is the TLS failure
/// (detail `tls`); both in `connect`, nothing sent. So is a TLS 1.3 server that requires a
/// client certificate (neither host offers one), with its CA trusted by both: it refuses
/// only after the client's handshake has ended, with an alert Node took for a lost
/// connection. That the handshake is trusted shows in a server with the same certificate
/// that requires none: both hosts are answered through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_classifies_tls_failures_as_the_rust_host_does() {
    let hang_up = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hang_up_port = hang_up.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = hang_up.accept().await {
            let mut hello = [0u8; 512];
            let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut hello).await;
        }
    });
    let pki = ahp_tests::pki::Pki::generate();
    let untrusted_port = handshake_only(pki.acceptor()).await;
    let cases = [(hang_up_port, None), (untrusted_port, Some("tls"))];
    for (i, (port, detail)) in cases.into_iter().enumerate() {
        let url = format!("https://localhost:{port}/hooks");
        assert_never_connected(&url, &format!("evt_node_tls_{i}"), detail).await;
    }

    let roots = pki.trust_roots_file();
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let trusted_port = pki.tls_front(backend.addr()).await;
    let answered = json!({
        "decision": "allow",
        "decidedBy": "no-objection",
        "reason": null,
        "outcome": "no-effect",
        "failure": null,
    });
    assert_both_hosts_trusting(roots.path(), trusted_port, &answered).await;
    assert_eq!(backend.requests().len(), 2, "answered once in each host");
    let mtls_port = handshake_only(pki.acceptor_requiring_a_client_certificate()).await;
    let refused = json!({
        "decision": "allow",
        "decidedBy": "no-objection",
        "reason": null,
        "outcome": "failed-open",
        "failure": {"class": "connection-refused", "phase": "connect", "detail": "tls"},
    });
    assert_both_hosts_trusting(roots.path(), mtls_port, &refused).await;
}

/// A loopback port whose server takes the TLS handshake by `acceptor`, then closes the
/// connection: it answers no request.
async fn handshake_only(acceptor: tokio_rustls::TlsAcceptor) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = acceptor.accept(stream).await;
        }
    });
    port
}

/// One fail-open call to `https://localhost:{port}` has the `expected` [`verdict`] in the
/// Node host (`NODE_EXTRA_CA_CERTS`) and in ahp-host (`trust_roots`), both trusting the
/// CA certificates in `roots`.
async fn assert_both_hosts_trusting(roots: &Path, port: u16, expected: &Value) {
    let url = format!("https://localhost:{port}/hooks");
    let reg = registration(&[Http::new(BACKEND, &url)
        .policy("fail-open")
        .timeout_ms(5000)]);
    let id = format!("evt_node_tls_{port}");
    let ca = [("NODE_EXTRA_CA_CERTS", roots.to_str().expect("a UTF-8 path"))];
    let (settled, stderr) = call_with_env(transpiled(), &reg, &id, &ca).await;
    assert_eq!(&verdict(&settled["audit"]), expected, "{url}: {stderr}");
    let options = ahp_host::Options {
        trust_roots: Some(roots.to_path_buf()),
        ..ahp_host::Options::default()
    };
    let rust = ahp_host::Interceptor::new(&reg, options)
        .await
        .expect("a valid registration");
    let rust = record_json(&ahp_tests::support::call(&rust, &id).await);
    assert_eq!(&verdict(&rust), expected, "{url}, ahp-host");
}

/// A timeout longer than a Node timer can wait (2^31-1 ms; a longer delay fires after
/// 1 ms) still runs to its deadline, and so does the call's bound (their sum): the
/// backend's deny, 100 ms late, decides. An exchange given up at once would fail open, as
/// an allow; a bound that fired at once would be an engine failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_waits_for_a_backend_under_a_timeout_longer_than_a_node_timer() {
    let slow_deny = Behaviour::Delay(
        Duration::from_millis(100),
        Box::new(Behaviour::Deny("late but in time".into())),
    );
    let backend = FaultBackend::start(vec![slow_deny]).await;
    let reg = one_backend(&backend, "fail-open", 3_000_000_000);
    let settled = call(&reg, "evt_node_long_timeout").await;
    assert_eq!(settled["decision"], json!("deny"), "{settled}");
    assert_eq!(settled["decidedBy"], json!("backend-deny"));
    assert_eq!(settled["reason"], json!("late but in time"));
}

/// The timer behind every host-side deadline fires only once its instant has passed.
/// Node's timers count whole milliseconds and fire up to ~2 ms early: trusted as they
/// are, a silent backend's call would settle before its deadline (and the timeout tests
/// above would fail at random).
#[test]
fn the_node_hosts_deadline_timer_never_fires_early() {
    let script = r#"
        const { pathToFileURL } = await import('node:url');
        const { atDeadline } = await import(pathToFileURL(process.argv[1]).href);
        let early = 0;
        for (let i = 0; i < 100; i++) {
          // 0.1 ms to 3.1 ms ahead, at fractions of a millisecond.
          const deadline = process.hrtime.bigint() + BigInt(100_000 + i * 30_303);
          await new Promise((done) => atDeadline(deadline, () => {
            if (process.hrtime.bigint() < deadline) early += 1;
            done();
          }));
        }
        console.log(early);
    "#;
    let module = jco_host_dir().join("deadline.mjs");
    let output = node()
        .args(["--input-type=module", "-e", script])
        .arg(&module)
        .output()
        .expect("run node");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let early = String::from_utf8_lossy(&output.stdout);
    assert_eq!(early.trim(), "0", "fired early, of 100");
}

/// The exchange worker sends nothing on a connection that comes up past the deadline, as
/// ahp-host sends nothing past it (http.rs `send`): each exchange here is handed to the
/// worker with its deadline already passed (as when the worker is slow to take it), to a
/// backend that takes the connection at once; each is `deadline-exceeded` in `connect`,
/// and no request reaches the backend. The body used to be handed to Node with the
/// request, which wrote it as soon as the socket connected, before the deadline's timer
/// (whole milliseconds) fired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sends_nothing_on_a_connection_made_past_the_deadline() {
    const ROUNDS: usize = 20;
    let script = r#"
        const { pathToFileURL } = await import('node:url');
        const { MessageChannel, Worker } = await import('node:worker_threads');
        const { once } = await import('node:events');
        const [dir, url, rounds] = process.argv.slice(1);
        const module = (name) => pathToFileURL(`${dir}/${name}`);
        const { newResultBuffer, waitResult } = await import(module('shared-result.mjs').href);
        // As host.mjs starts it, but without this script's --input-type, which a worker
        // from a file refuses.
        const { port1, port2: exchanges } = new MessageChannel();
        new Worker(module('exchange-worker.mjs'), {
          execArgv: [],
          workerData: { component: port1 },
          transferList: [port1],
        });
        await once(exchanges, 'message');
        const results = [];
        for (let i = 0; i < Number(rounds); i++) {
          const shared = newResultBuffer();
          const body = new TextEncoder().encode('{}');
          exchanges.postMessage({ url, body, headers: {}, deadline: process.hrtime.bigint(), shared });
          results.push(waitResult(shared, 5000)?.meta ?? null);
        }
        console.log(JSON.stringify(results));
        process.exit(0);
    "#;
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let running = node_async()
        .args(["--input-type=module", "-e", script])
        .arg(jco_host_dir())
        .arg(backend.url())
        .arg(ROUNDS.to_string())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(HOST_LIMIT, running)
        .await
        .expect("the script ends")
        .expect("run node");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let results: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    let expected = json!({"error": "deadline-exceeded", "phase": "connect"});
    assert_eq!(results, json!(vec![expected; ROUNDS]), "{stderr}");
    // Every socket came up: each request was held back at its connect, not by a refusal.
    assert!(
        ahp_tests::support::eventually(Duration::from_secs(5), || backend.connections() == ROUNDS)
            .await,
        "{} connections of {ROUNDS}",
        backend.connections()
    );
    assert!(
        !backend
            .wait_for_requests(1, Duration::from_millis(200))
            .await,
        "{} of {ROUNDS} requests sent past the deadline",
        backend.requests().len()
    );
}

/// A reply whose Content-Type is ~5000 characters is read as it is, and its deny decides,
/// as in the Rust host: the result the exchange worker hands over has room for any head
/// Node accepts, so a backend's header never runs into the body and breaks it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_reads_a_reply_with_a_long_content_type() {
    let deny = r#"{"type":"deny","reason":"long type"}"#;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":$ID$,"result":{{"protocolVersion":"draft","effects":[{deny}]}}}}"#
    );
    let backend = FaultBackend::start(vec![Behaviour::Reply {
        status: 200,
        content_type: Some(format!("application/json; x={}", "a".repeat(5000))),
        body: body.into_bytes(),
    }])
    .await;
    let reg = one_backend(&backend, "fail-open", 2000);
    let settled = call(&reg, "evt_node_long_type").await;
    assert_eq!(settled["decision"], json!("deny"), "{settled}");
    assert_eq!(settled["decidedBy"], json!("backend-deny"));
    assert_eq!(settled["reason"], json!("long type"));
}

/// A 200 answering event `id` with `effects`, its head `fields` (whole lines) and its own
/// Content-Length, then the connection closed.
fn reply_with_fields(id: &str, fields: &[String], effects: Value) -> Behaviour {
    let result = json!({"protocolVersion": "draft", "effects": effects});
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    let mut head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n", body.len());
    for field in fields {
        head.push_str(field);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    Behaviour::RawThenClose([head.into_bytes(), body.into_bytes()].concat())
}

/// What the two hosts must agree on of a call's record: the decision, who made it, the
/// reason, and the one interceptor's outcome and failure.
fn verdict(record: &Value) -> Value {
    let entry = &record["interceptors"][0];
    json!({
        "decision": record["decision"],
        "decidedBy": record["decidedBy"],
        "reason": record["reason"],
        "outcome": entry["outcome"],
        "failure": entry["failure"],
    })
}

/// The [`verdict`] of the same call in ahp-host, on the embedded component.
async fn in_rust_host(registration: &str, id: &str) -> Value {
    let settled = ahp_tests::support::call(&interceptor(registration).await, id).await;
    verdict(&record_json(&settled))
}

/// Call `id` under `reg` has the `expected` [`verdict`] in the Node host and in ahp-host.
async fn assert_both_hosts(reg: &str, id: &str, expected: &Value, case: &str) {
    let settled = call(reg, id).await;
    assert_eq!(&verdict(&settled["audit"]), expected, "{case}: {settled}");
    assert_eq!(&in_rust_host(reg, id).await, expected, "{case}, ahp-host");
}

/// Plain http to a loopback address written IPv4-mapped (`[::ffff:127.0.0.1]`) is
/// loopback in both hosts: the backend is asked and its deny decides, under fail-open,
/// where a refusal would have been an allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sends_plain_http_to_an_ipv4_mapped_loopback_address() {
    let backend = FaultBackend::start(vec![Behaviour::Deny("mapped".into())]).await;
    let url = format!("http://[::ffff:127.0.0.1]:{}/hooks", backend.addr().port());
    let reg = registration(&[Http::new(BACKEND, url).policy("fail-open").timeout_ms(5000)]);
    let denied = json!({
        "decision": "deny",
        "decidedBy": "backend-deny",
        "reason": "mapped",
        "outcome": "deny",
        "failure": null,
    });
    assert_both_hosts(&reg, "evt_node_mapped", &denied, "IPv4-mapped loopback").await;
    assert_eq!(backend.requests().len(), 2, "each host asked the backend");
}

/// A backend's reply whose head is `malformed-http`, under `policy`.
fn malformed_http(policy: &str) -> Value {
    let (decision, decided_by, reason, outcome) = match policy {
        "fail-open" => ("allow", "no-objection", None, "failed-open"),
        _ => (
            "deny",
            "synthetic-deny",
            Some(SYNTHETIC_REASON),
            "failed-closed",
        ),
    };
    json!({
        "decision": decision,
        "decidedBy": decided_by,
        "reason": reason,
        "outcome": outcome,
        "failure": {"class": "http-status", "phase": "await-response", "detail": "malformed-http"},
    })
}

/// A response head is read as far as ahp-host reads one (hyper 1.x's default buffer,
/// 8192 + 4096 * 100 bytes) and no further: a deny with a 20 KiB header field, or a
/// ~400 KiB Content-Type, decides in both hosts; a 1 MiB head is `malformed-http` in
/// both. Node's own cap of 16 KiB made the first two a failure, and fail-open an allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_reads_a_response_head_as_far_as_the_rust_host_does() {
    let json_type = "Content-Type: application/json".to_string();
    let padding = |bytes: usize| format!("X-Padding: {}", "a".repeat(bytes));
    let long_type = format!(
        "Content-Type: application/json; x={}",
        "a".repeat(400 << 10)
    );
    let denied = json!({
        "decision": "deny",
        "decidedBy": "backend-deny",
        "reason": "big head",
        "outcome": "deny",
        "failure": null,
    });
    let cases = [
        (vec![json_type.clone(), padding(20 << 10)], denied.clone()),
        (vec![long_type], denied),
        (
            vec![json_type, padding(1 << 20)],
            malformed_http("fail-open"),
        ),
    ];
    for (i, (fields, expected)) in cases.into_iter().enumerate() {
        let id = format!("evt_node_head_{i}");
        let deny = json!([{"type": "deny", "reason": "big head"}]);
        let backend = FaultBackend::start(vec![reply_with_fields(&id, &fields, deny)]).await;
        let reg = one_backend(&backend, "fail-open", 2000);
        assert_both_hosts(&reg, &id, &expected, &format!("case {i}")).await;
    }
}

/// A 200 in a content coding (gzip) is no answer to a request that accepts only
/// `identity`, nor one in a transfer coding but chunked (it sends no `TE`): `malformed-http`
/// in both hosts, settled by the policy, however readable its bytes (here a valid deny);
/// labelled `identity` or `chunked`, the same reply's deny decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_content_coded_reply_is_malformed_http_in_both_hosts() {
    let json_type = "Content-Type: application/json".to_string();
    let denied = json!({
        "decision": "deny",
        "decidedBy": "backend-deny",
        "reason": "coded",
        "outcome": "deny",
        "failure": null,
    });
    let cases = [
        ("Content-Encoding: gzip", malformed_http("fail-closed")),
        ("Content-Encoding: identity", denied.clone()),
        // A transfer coding but chunked, which the request never offers (no `TE`).
        (
            "Transfer-Encoding: gzip, chunked",
            malformed_http("fail-closed"),
        ),
        ("Transfer-Encoding: chunked", denied),
    ];
    for (i, (coding, expected)) in cases.into_iter().enumerate() {
        let id = format!("evt_node_coded_{i}");
        let deny = json!([{"type": "deny", "reason": "coded"}]);
        let fields = [json_type.clone(), coding.to_string()];
        let reply = match coding.starts_with("Transfer-Encoding") {
            true => chunked_reply_with_fields(&id, &fields, deny),
            false => reply_with_fields(&id, &fields, deny),
        };
        let backend = FaultBackend::start(vec![reply]).await;
        let reg = one_backend(&backend, "fail-closed", 2000);
        assert_both_hosts(&reg, &id, &expected, coding).await;
    }
}

/// As [`reply_with_fields`], its body in one chunk (and no Content-Length).
fn chunked_reply_with_fields(id: &str, fields: &[String], effects: Value) -> Behaviour {
    let result = json!({"protocolVersion": "draft", "effects": effects});
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    let mut raw = String::from("HTTP/1.1 200 OK\r\n");
    for field in fields {
        raw.push_str(field);
        raw.push_str("\r\n");
    }
    raw.push_str(&format!("\r\n{:x}\r\n{body}\r\n0\r\n\r\n", body.len()));
    Behaviour::RawThenClose(raw.into_bytes())
}

/// A chunked 503 whose body runs past the cap is that 503 in both hosts (`http-status`,
/// settled by the policy), not a response too large; a 200 whose Content-Type holds a
/// byte past ASCII (obs-text in a quoted parameter) is read, and its deny decides, in
/// both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_reads_a_large_error_and_a_latin1_content_type_as_the_rust_host_does() {
    let megabyte = format!("{:x}\r\n{}\r\n", 1 << 20, " ".repeat(1 << 20));
    let unavailable = format!(
        "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n\
         {megabyte}{megabyte}0\r\n\r\n"
    );
    let id = "evt_node_large_503";
    let backend =
        FaultBackend::start(vec![Behaviour::RawThenClose(unavailable.into_bytes())]).await;
    let reg = one_backend(&backend, "fail-closed", 2000);
    let node = verdict(&call(&reg, id).await["audit"]);
    let rust = in_rust_host(&reg, id).await;
    assert_eq!(rust["failure"]["class"], json!("http-status"), "{rust}");
    assert_eq!(node, rust);

    let id = "evt_node_latin1_type";
    let deny = json!([{"type": "deny", "reason": "latin"}]);
    let mut reply = reply_with_fields(
        id,
        &["Content-Type: application/json; x=\"caf\u{e9}\"".into()],
        deny,
    );
    if let Behaviour::RawThenClose(bytes) = &mut reply {
        // The field as Latin-1 puts it on the wire: é as the one byte 0xE9.
        *bytes = String::from_utf8_lossy(bytes)
            .replace('\u{e9}', "\u{1}")
            .into_bytes();
        let at = bytes.iter().position(|b| *b == 1).expect("the marked byte");
        bytes[at] = 0xe9;
    }
    let backend = FaultBackend::start(vec![reply]).await;
    let reg = one_backend(&backend, "fail-open", 2000);
    let node = verdict(&call(&reg, id).await["audit"]);
    let rust = in_rust_host(&reg, id).await;
    assert_eq!(rust["decidedBy"], json!("backend-deny"), "{rust}");
    assert_eq!(node, rust);
}

/// A body cut short leaves a status that settles the call by itself as it is, in both
/// hosts: a 503 that declares 100 bytes and closes after 4, and one whose chunk framing
/// is garbled, are that 503 (`http-status`), not a connection lost or malformed HTTP (so
/// a 401 still has its token dropped, a 503 is still retried); a 200 cut short, whose
/// body is the decision, is the connection lost in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_hosts_keep_the_status_of_an_error_whose_body_is_cut_short() {
    let head = |status: &str, length: &str| {
        format!("HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{length}\r\n\r\n")
    };
    let cut = |status: &str| head(status, "Content-Length: 100") + "{\"er";
    let garbled =
        head("503 Service Unavailable", "Transfer-Encoding: chunked") + "4\r\n{\"er\r\nzz\r\n";
    for (case, raw, class) in [
        ("cut_503", cut("503 Service Unavailable"), "http-status"),
        ("garbled_503", garbled, "http-status"),
        ("cut_200", cut("200 OK"), "connection-lost"),
    ] {
        let id = format!("evt_node_{case}");
        let backend = FaultBackend::start(vec![Behaviour::RawThenClose(raw.into_bytes())]).await;
        let reg = one_backend(&backend, "fail-closed", 2000);
        let node = verdict(&call(&reg, &id).await["audit"]);
        let rust = in_rust_host(&reg, &id).await;
        assert_eq!(rust["failure"]["class"], json!(class), "{case}: {rust}");
        assert_eq!(node, rust, "{case}");
    }
}

/// A `101 Switching Protocols` (an upgrade this client never asked for) is that status in
/// both hosts, at once: `http-status`, settled by the policy. Node hands a 101 only to an
/// `upgrade` listener, so without one the Node host waited out the deadline and recorded
/// `deadline-exceeded`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_hosts_take_an_unasked_upgrade_as_its_status_at_once() {
    let id = "evt_node_upgrade";
    let raw = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n";
    let backend = FaultBackend::start(vec![Behaviour::RawThenClose(raw.into())]).await;
    let reg = one_backend(&backend, "fail-open", 5000);
    let started = std::time::Instant::now();
    let node = verdict(&call(&reg, id).await["audit"]);
    let took = started.elapsed();
    let rust = in_rust_host(&reg, id).await;
    assert_eq!(rust["failure"]["class"], json!("http-status"), "{rust}");
    assert_eq!(rust["outcome"], json!("failed-open"), "{rust}");
    assert_eq!(node, rust);
    assert!(
        took < std::time::Duration::from_secs(4),
        "the Node host took {took:?}"
    );
}

/// A reply whose length is given twice over — Transfer-Encoding beside Content-Length,
/// Content-Length twice, or as a list — is `malformed-http` in both hosts (RFC 9112
/// §6.3: "ought to be handled as an error"), though its deny would decide were it framed
/// once: Node refused it and ahp-host read it, so under fail-open one host allowed what
/// the other denied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_hosts_refuse_a_length_given_twice_over() {
    for (i, framing) in ["chunked-and-length", "length-twice", "length-list"]
        .into_iter()
        .enumerate()
    {
        let id = format!("evt_node_length_{i}");
        let result = json!({"protocolVersion": "draft",
            "effects": [{"type": "deny", "reason": "framed twice"}]});
        let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        let n = body.len();
        let (lengths, framed) = match framing {
            "chunked-and-length" => (
                format!("Transfer-Encoding: chunked\r\nContent-Length: {n}\r\n"),
                format!("{n:x}\r\n{body}\r\n0\r\n\r\n"),
            ),
            "length-twice" => (
                format!("Content-Length: {n}\r\nContent-Length: {n}\r\n"),
                body,
            ),
            _ => (format!("Content-Length: {n}, {n}\r\n"), body),
        };
        let raw =
            format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{lengths}\r\n{framed}");
        let backend = FaultBackend::start(vec![Behaviour::RawThenClose(raw.into_bytes())]).await;
        let reg = one_backend(&backend, "fail-open", 2000);
        assert_both_hosts(&reg, &id, &malformed_http("fail-open"), framing).await;
    }
}

/// A body declared past the 1 MiB cap and then sent slowly is not read in either host:
/// at 200 the reply is too large at once, at 503 it is that status at once (retried,
/// then settled by the policy) — not a wait for the body until the deadline, which Node
/// did, recording `deadline-exceeded` (the body would take 5 million seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_hosts_leave_a_body_declared_past_the_cap_unread() {
    let slow = |inner: Behaviour| Behaviour::Trickle {
        every: Duration::from_secs(1),
        inner: Box::new(inner),
    };
    let unavailable = Behaviour::Reply {
        status: 503,
        content_type: Some("application/json".into()),
        body: vec![b' '; 2 << 20],
    };
    for (i, (reply, class)) in [
        (Behaviour::Oversized(5_000_000), "malformed-json"),
        (unavailable, "http-status"),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("evt_node_declared_{i}");
        let backend = FaultBackend::start(vec![slow(reply)]).await;
        let reg = one_backend(&backend, "fail-closed", 3_000);
        let settled = call(&reg, &id).await;
        let node = verdict(&settled["audit"]);
        assert_eq!(node["failure"]["class"], json!(class), "{class}: {settled}");
        assert_eq!(in_rust_host(&reg, &id).await, node, "{class}, ahp-host");
    }
}

/// A reply with more header fields than ahp-host reads (100, hyper 1.x's default) is
/// `malformed-http` in both hosts, failed closed here; one with 100 is read. Node itself
/// reads up to 2000 fields without a word, and took the first as no objection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_refuses_a_reply_with_more_header_fields_than_the_rust_host_reads() {
    let allowed = json!({
        "decision": "allow",
        "decidedBy": "no-objection",
        "reason": null,
        "outcome": "no-effect",
        "failure": null,
    });
    for (count, expected) in [(100, allowed), (101, malformed_http("fail-closed"))] {
        let id = format!("evt_node_fields_{count}");
        // Content-Length, Content-Type and the rest.
        let mut fields = vec!["Content-Type: application/json".to_string()];
        fields.extend((2..count).map(|n| format!("X-Field-{n}: {n}")));
        let backend = FaultBackend::start(vec![reply_with_fields(&id, &fields, json!([]))]).await;
        let reg = one_backend(&backend, "fail-closed", 2000);
        assert_both_hosts(&reg, &id, &expected, &count.to_string()).await;
    }
}

/// The engine-failure denial `ahp intercept` prints when the component could not
/// finish: no interceptor in it, the generic reason.
fn assert_engine_failure(settled: &Value) {
    assert_eq!(settled["decision"], json!("deny"), "{settled}");
    assert_eq!(settled["decidedBy"], json!("engine-failure"));
    assert_eq!(settled["reason"], json!("Policy evaluation failed."));
    let audit = &settled["audit"];
    assert_eq!(audit["decidedBy"], json!("engine-failure"), "{settled}");
    assert_eq!(audit["event"]["type"], json!("tool.before"));
    assert_eq!(audit["interceptors"], json!([]));
}

/// A registration the component refuses is still exit 1 with its problems, and no
/// settlement: only what is not the component's own refusal is an engine failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_refuses_an_invalid_registration_with_its_problems() {
    let output = run_host(
        transpiled(),
        r#"{"hooks": []}"#,
        &event("evt_node_refused"),
        &[],
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty(), "no settlement");
    assert!(stderr.contains("error: /protocolVersion: "), "{stderr}");
}

/// A component that traps in `intercept` (the runaway guest panics: a wasm
/// `unreachable`) is denied as an engine failure, exit 2, never a refusal (exit 1) that
/// a harness would let pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_denies_a_trapping_component_as_an_engine_failure() {
    let settled = call_on(runaway(), r#"{"panic": true}"#, "evt_node_trap").await;
    assert_engine_failure(&settled);
}

/// The JS host's own checks in `delivery.exchange`, as ahp-host's (`hostile_delivery.rs`):
/// the runaway guest's cross-credential mode asks to send `com.example.a`'s credential to
/// `com.example.b`, to call `com.example.a` without it, and to call a backend not in the
/// plan. Each is refused as `not-permitted`, nothing reaches either backend, and the
/// trap that follows is denied as an engine failure. The host's own record of that holds
/// no token; its stderr, where the trap and any error of the host go, holds none either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_refuses_every_delivery_a_component_must_not_make() {
    let backends = CrossCredential::start().await;
    let token = [(CROSS_TOKEN_ENV, CROSS_TOKEN)];
    let reg = backends.registration();
    let (settled, stderr) = call_with_env(runaway(), &reg, "evt_node_cross", &token).await;
    assert_engine_failure(&settled);
    backends.assert_every_delivery_refused().await;
    assert!(!stderr.contains(CROSS_TOKEN), "{stderr}");
}

/// As ahp-host (`hostile_delivery.rs`), the JS host serves no backend the registration
/// does not give: the runaway guest planning a command to run (`/bin/sh`) is refused
/// before the call, exit 1, naming the backend and the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_refuses_a_plan_the_registration_does_not_give() {
    let output = run_host(runaway(), "plans-a-command", &event("evt_node_plan"), &[]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty(), "no settlement: {stderr}");
    let said = "error: the component planned backend `com.example.planned`: its command is \
                not its registration's";
    assert!(stderr.contains(said), "{stderr}");
}

/// As ahp-host (`hostile_delivery.rs`), the JS host serves no string planned from a
/// registration it cannot read as hooks unless the text holds it whole: the runaway
/// guest's URL one character short of the registration's (a look-alike) is refused before
/// the call, exit 1, naming the URL. From a text holding it whole, it is served (the
/// call then spins: an engine failure, exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_refuses_a_url_planned_as_part_of_a_longer_one() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let look_alike = format!("plans-a-look-alike {}", backend.url());
    let output = run_host(runaway(), &look_alike, &event("evt_node_look_alike"), &[]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty(), "no settlement: {stderr}");
    let said = "error: the component planned backend `com.example.look-alike`: its URL is not \
                its registration's";
    assert!(stderr.contains(said), "{stderr}");
    let whole = format!("plans-a-look-alike {} ", backend.url());
    let output = run_host(runaway(), &whole, &event("evt_node_whole"), &[]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_engine_failure(&one_json_line(&String::from_utf8_lossy(&output.stdout)));
    assert_nothing_sent(&backend).await;
}

/// As ahp-host (`hostile_delivery.rs`), the JS host serves no credential planned from a
/// registration it cannot read as hooks: the cross-credential mode's words alone are
/// refused before the call, exit 1, naming the credential.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_refuses_a_credential_planned_from_a_text_that_is_not_json() {
    let backends = CrossCredential::start().await;
    let (a, b, report) = (backends.a.url(), backends.b.url(), backends.report.url());
    let text = format!("cross-credential {CROSS_TOKEN_ENV} {a} {b} {report}");
    let output = run_host(runaway(), &text, &event("evt_node_text"), &[]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let said = "error: the component planned backend `com.example.a`: its credential is not \
                its registration's";
    assert!(stderr.contains(said), "{stderr}");
    for backend in [&backends.a, &backends.b, &backends.report] {
        assert_nothing_sent(backend).await;
    }
}

/// A backend this host can never reach is refused with the plan, exit 1, not served as
/// a failure on every call: each subscription here fails open, so every call would be
/// let through unasked. A stdio backend, a bearer token by reference, plain http to a
/// host that is not loopback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_refuses_a_plan_it_cannot_serve() {
    let subscription = json!([{"events": ["tool.before"], "mode": "intercept",
        "timeoutMs": 500, "failurePolicy": "fail-open", "content": {"default": "metadata"}}]);
    let stdio = json!({"type": "stdio", "command": "policy", "lifecycle": "per_event"});
    let loopback = json!({"type": "http", "url": "http://127.0.0.1:9/hooks"});
    let by_reference = json!({"type": "bearer", "tokenRef": "file:/run/token"});
    let cases = [
        (json!({"transport": stdio}), "transport"),
        (
            json!({"transport": {"type": "http", "url": "http://policy.example/hooks"}}),
            "URL",
        ),
        (
            json!({"transport": loopback, "authentication": by_reference}),
            "authentication",
        ),
    ];
    for (mut hook, field) in cases {
        hook["id"] = json!("com.example.unserved");
        hook["subscriptions"] = subscription.clone();
        let reg = json!({"protocolVersion": "draft", "hooks": [hook]}).to_string();
        let output = run_host(transpiled(), &reg, &event("evt_node_unserved"), &[]).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{field}: {stderr}");
        assert!(output.stdout.is_empty(), "{field}: no settlement: {stderr}");
        let said = format!(
            "error: the component planned backend `com.example.unserved`: its {field} is not \
             one this host serves"
        );
        assert!(stderr.contains(&said), "{stderr}");
    }
}

/// A backend this host cannot reach that only observes decides nothing (this host sends
/// no notification): the plan is served, and the interceptor beside it decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_serves_a_plan_whose_unreachable_backend_only_observes() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let mut reg: Value =
        serde_json::from_str(&registration(&[Http::new("com.example.a", backend.url())])).unwrap();
    reg["hooks"].as_array_mut().unwrap().push(json!({
        "id": "com.example.watcher",
        "transport": {"type": "stdio", "command": "/bin/cat", "lifecycle": "per_event"},
        "subscriptions": [{"events": ["tool.before"], "mode": "observe",
                           "content": {"default": "metadata"}}]}));
    let settled = call(&reg.to_string(), "evt_node_observer_unserved").await;
    assert_eq!(settled["decidedBy"], json!("no-objection"), "{settled}");
    assert_eq!(backend.requests().len(), 1);
}

/// ahp-host's settlement of event `id` on the runaway component: its `decidedBy`.
async fn rust_decides_on_runaway(registration: &str, id: &str) -> Value {
    let options = ahp_host::Options {
        component: Some(runaway_component()),
        ..ahp_host::Options::default()
    };
    let interceptor = ahp_host::Interceptor::new(registration, options)
        .await
        .expect("the runaway component loads");
    record_json(&ahp_tests::support::call(&interceptor, id).await)["decidedBy"].clone()
}

/// A settlement ahp-host does not trust (`from_component`) Node does not trust either:
/// the call is an engine failure, exit 2, in both hosts. The runaway component allows
/// with a record that does not parse (`{}`); with a well-formed, consistent one that
/// lists no observer while it asks for an observe notification; with one that says deny;
/// with one whose interceptor entry has only its outcome, which ahp-host's record type
/// does not read (`InterceptorEntry` requires backend, subscription, policy, timeoutMs
/// and attempts); with one whose interceptor entry contradicts the allow (a fail-closed
/// subscription that failed open, a backend that asked, one never reached); with one
/// whose withheld observer entry has no subscription (`ObserverEntry` requires it), which
/// with its subscription both hosts trust; and with one that gives a member twice, a
/// denial first and the allow last (`decision`, the same under an escaped spelling, an
/// entry's `outcome`), which JSON.parse read as the allow; and with a synthetic denial
/// no interceptor failed closed for, or in the component's own words, not the generic
/// reason; and with a denial that hands on what would get around it (a supplied result,
/// a continue), an interrupted one that hands on a message it staged, or an allow that
/// carries a flow stop or a flow of no known operation. The Node host
/// sends no observe notification, trusted or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_denies_a_settlement_it_cannot_trust() {
    let observer = ahp_tests::fault_backend::refused_url();
    let cases = [
        format!("untrusted-observer {observer}"),
        format!("unlisted-observer {observer}"),
        "contradicting-record".to_string(),
        "incomplete-entry".to_string(),
        "failed-open-under-fail-closed".to_string(),
        "allow-over-ask".to_string(),
        "allow-over-not-reached".to_string(),
        "mislabelled-failure".to_string(),
        format!("withheld-observer-without-subscription {observer}"),
        "duplicated-decision".to_string(),
        "respelled-decision".to_string(),
        "duplicated-outcome".to_string(),
        "uncredited-synthetic-deny".to_string(),
        "own-words-synthetic-deny".to_string(),
        "interrupted-with-a-message".to_string(),
        "deny-with-a-supplied-result".to_string(),
        "deny-with-a-continue".to_string(),
        "allow-with-a-stop".to_string(),
        "allow-with-an-unknown-flow".to_string(),
        "allow-with-a-modification".to_string(),
        "allow-with-an-injection".to_string(),
        "allow-with-a-result".to_string(),
        "allow-with-a-continue".to_string(),
        "allow-with-a-message".to_string(),
        "oversized-record".to_string(),
        format!("withheld-twice {observer}"),
    ];
    for (i, reg) in cases.iter().enumerate() {
        let id = format!("evt_node_untrusted_{i}");
        assert_engine_failure(&call_on(runaway(), reg, &id).await);
        let rust = rust_decides_on_runaway(reg, &id).await;
        assert_eq!(rust, json!("engine-failure"), "{reg}, ahp-host");
    }
    // Trusted by both (the runaway's own record names no event, which `call_on`
    // checks): a withheld observer with its subscription; a synthetic denial credited to
    // the interceptor that failed closed, in its generic words (so the two above are
    // refused for what they change); a backend's denial that keeps its message (so the
    // three above are refused for what they hand on, not for being denials that say more).
    let trusted = [
        (format!("withheld-observer {observer}"), "no-objection", 0),
        ("synthetic-deny".to_string(), "synthetic-deny", 2),
        ("deny-with-a-message".to_string(), "backend-deny", 2),
    ];
    for (i, (reg, decided_by, code)) in trusted.iter().enumerate() {
        let id = format!("evt_node_trusted_{i}");
        let output = run_host(runaway(), reg, &event(&id), &[]).await;
        let settled = one_json_line(&String::from_utf8_lossy(&output.stdout));
        assert_eq!(settled["decidedBy"], json!(decided_by), "{reg}: {settled}");
        assert_eq!(output.status.code(), Some(*code), "{reg}: {settled}");
        let rust = rust_decides_on_runaway(reg, &id).await;
        assert_eq!(rust, json!(decided_by), "{reg}, ahp-host");
    }
}

/// A component that spins while it loads the registration is stopped past the 5 s that
/// ahp-host gives loading, plus the grace, and denied as an engine failure: before the
/// call has begun there is no bound-ms to stop it by.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_stops_a_component_that_spins_while_it_loads() {
    let began = std::time::Instant::now();
    let settled = call_on(runaway(), r#"{"spin-on-load": true}"#, "evt_node_load").await;
    assert_engine_failure(&settled);
    let elapsed = began.elapsed();
    assert!(
        elapsed >= Duration::from_millis(5_250) && elapsed < Duration::from_secs(20),
        "ended after {elapsed:?}, its bound 5.25 s"
    );
}

/// A component that spins in `intercept` is stopped past its bound (the runaway guest's
/// bound-ms, 100, within the registration's 100 ms of timeouts), the 1 s to prepare
/// observers and the 250 ms grace, and denied as an engine failure: the host does not
/// wait for it forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_stops_a_spinning_component_at_its_bound() {
    stopped_at_the_registrations_bound(json!({}), "evt_node_spin").await;
}

/// A component whose bound-ms claims forever (the runaway guest's `claims-forever`) is
/// stopped where the registration's timeouts end (100 ms), plus the 1.25 s past it, as
/// ahp-host stops it: the host does not take the component's word for its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_bounds_a_component_claiming_forever_by_the_registration() {
    stopped_at_the_registrations_bound(json!({"claims-forever": true}), "evt_node_forever").await;
}

/// The runaway guest on `registration` (its own mode's members) with one intercept
/// subscription of 100 ms, spinning in event `id`: denied as an engine failure once that
/// 100 ms and the 1.25 s past it have passed, well before the host's own limit.
async fn stopped_at_the_registrations_bound(mut registration: Value, id: &str) {
    registration["hooks"] = json!([{"subscriptions": [{"mode": "intercept", "timeoutMs": 100}]}]);
    let began = std::time::Instant::now();
    let settled = call_on(runaway(), &registration.to_string(), id).await;
    assert_engine_failure(&settled);
    let elapsed = began.elapsed();
    assert!(
        elapsed >= Duration::from_millis(1_350) && elapsed < Duration::from_secs(10),
        "{id}: ended after {elapsed:?}, its bound 1.35 s"
    );
}

/// A bearer token with a control character is no token, as ahp-host reads one
/// (credentials.rs `usable`): A fails open as `auth-failed` without being called, and B's
/// deny, next in the chain, stands. Node used to throw building A's request, which ended
/// its exchange thread: B then waited out its deadline and its deny was lost to an allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_refuses_a_token_that_cannot_be_a_header() {
    let a = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let b = FaultBackend::start(vec![Behaviour::Deny("no".into())]).await;
    let reg = registration(&[
        Http::new("com.example.a", a.url())
            .policy("fail-open")
            .timeout_ms(1000)
            .token_env("AHP_TEST_NODE_BAD_TOKEN"),
        Http::new("com.example.b", b.url())
            .policy("fail-open")
            .timeout_ms(1000),
    ]);
    let env = [("AHP_TEST_NODE_BAD_TOKEN", "tok\nen")];
    let (settled, _) = call_with_env(transpiled(), &reg, "evt_node_bad_token", &env).await;
    assert_eq!(settled["decidedBy"], json!("backend-deny"), "{settled}");
    assert_eq!(settled["reason"], json!("no"));
    let failure = &settled["audit"]["interceptors"][0]["failure"];
    assert_eq!(failure["class"], json!("auth-failed"), "{settled}");
    assert_eq!(failure["phase"], json!("acquire-credential"), "{settled}");
    assert_nothing_sent(&a).await;
}

/// What the harness's environment says cannot weaken the Node host's requests, as
/// ahp-host has no such switches: with `NODE_TLS_REJECT_UNAUTHORIZED=0` (set globally
/// behind some proxies) an untrusted certificate is still the TLS failure, nothing sent;
/// with `--insecure-http-parser` in `NODE_OPTIONS` a length given twice over is still
/// `malformed-http`, not its deny's allow under fail-open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_environment_switches_leave_verification_and_strict_parsing_on() {
    let pki = ahp_tests::pki::Pki::generate();
    let url = format!(
        "https://localhost:{}/hooks",
        handshake_only(pki.acceptor()).await
    );
    let reg = registration(&[Http::new(BACKEND, &url)
        .policy("fail-open")
        .timeout_ms(5000)]);
    let env = [("NODE_TLS_REJECT_UNAUTHORIZED", "0")];
    let (settled, stderr) = call_with_env(transpiled(), &reg, "evt_node_env_tls", &env).await;
    let tls = json!({"class": "connection-refused", "phase": "connect", "detail": "tls"});
    assert_eq!(entry(&settled)["failure"], tls, "{settled} {stderr}");

    let id = "evt_node_env_parser";
    let body = json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "draft",
        "effects": [{"type": "deny", "reason": "framed twice"}]}})
    .to_string();
    let n = body.len();
    let raw = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\
         Content-Length: {n}\r\n\r\n{n:x}\r\n{body}\r\n0\r\n\r\n"
    );
    let backend = FaultBackend::start(vec![Behaviour::RawThenClose(raw.into_bytes())]).await;
    let reg = one_backend(&backend, "fail-open", 2000);
    let env = [("NODE_OPTIONS", "--insecure-http-parser")];
    let (settled, stderr) = call_with_env(transpiled(), &reg, id, &env).await;
    let expected = malformed_http("fail-open");
    assert_eq!(verdict(&settled["audit"]), expected, "{stderr}");
}

/// A token variable is read as ahp-host reads one: one named like an `Object.prototype`
/// member (`constructor`), unset, is unresolved — `auth-failed` under the policy, the next
/// interceptor's deny standing — not the prototype's function, which threw inside the
/// component (an engine failure); and a token is trimmed as Rust's `trim` trims, so a
/// leading byte-order mark leaves it unresolved in both hosts and a NEL around it is
/// taken off in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_reads_a_token_variable_as_the_rust_host_does() {
    let b = FaultBackend::start(vec![Behaviour::Deny("no".into())]).await;
    for (i, (name, value)) in [
        ("constructor", None),
        ("AHP_TEST_NODE_BOM_TOKEN", Some("\u{feff}tok")),
        ("AHP_TEST_NODE_NEL_TOKEN", Some("\u{85}tok\u{85}")),
    ]
    .into_iter()
    .enumerate()
    {
        let a = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let reg = registration(&[
            Http::new("com.example.a", a.url())
                .policy("fail-open")
                .timeout_ms(2000)
                .token_env(name),
            Http::new("com.example.b", b.url())
                .policy("fail-open")
                .timeout_ms(2000),
        ]);
        // Both hosts read it from this process's environment (the Node host inherits it).
        if let Some(value) = value {
            std::env::set_var(name, value);
        }
        let id = format!("evt_node_token_variable_{i}");
        let (node, stderr) = call_with_env(transpiled(), &reg, &id, &[]).await;
        assert_eq!(
            node["decidedBy"],
            json!("backend-deny"),
            "{name}: {node} {stderr}"
        );
        let rust = record_json(&ahp_tests::support::call(&interceptor(&reg).await, &id).await);
        assert_eq!(
            node["audit"]["interceptors"][0]["failure"], rust["interceptors"][0]["failure"],
            "{name}"
        );
        let sent: Vec<String> = a
            .requests()
            .iter()
            .map(|r| r.header_values("authorization").join(","))
            .collect();
        match name {
            "AHP_TEST_NODE_NEL_TOKEN" => assert_eq!(sent, ["Bearer tok", "Bearer tok"], "{name}"),
            _ => {
                assert!(sent.is_empty(), "{name}: sent {sent:?}");
                let failure = &rust["interceptors"][0]["failure"];
                assert_eq!(failure["class"], json!("auth-failed"), "{name}: {rust}");
            }
        }
    }
}

/// A permitted bearer delivery carries the token as ahp-host sends it (bearer.rs): the
/// backend receives exactly one `Authorization: Bearer <token>`, once. A backend that
/// refuses the token with 401 is settled as ahp-host settles it for the same registration:
/// the same verdict and attempts, each attempt carrying that one header. The token is in
/// neither host's record, nor in what the Node host wrote to stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sends_the_bearer_token_once_and_settles_a_401_as_the_rust_host_does() {
    const TOKEN_ENV: &str = "AHP_TEST_NODE_BEARER";
    const TOKEN: &str = "tok-node-bearer-6d20c4";
    // Both hosts read it from this process's environment (the Node host inherits it).
    std::env::set_var(TOKEN_ENV, TOKEN);
    let bearer = |url: String| {
        registration(&[Http::new(BACKEND, url)
            .policy("fail-closed")
            .timeout_ms(2000)
            .token_env(TOKEN_ENV)])
    };
    let sent = |requests: &[Recorded]| -> Vec<Vec<String>> {
        let headers = |r: &Recorded| {
            r.header_values("authorization")
                .into_iter()
                .map(str::to_owned)
                .collect()
        };
        requests.iter().map(headers).collect()
    };
    let one_bearer = vec![format!("Bearer {TOKEN}")];

    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let reg = bearer(backend.url());
    let (settled, stderr) = call_with_env(transpiled(), &reg, "evt_node_bearer", &[]).await;
    assert_eq!(settled["decidedBy"], json!("no-objection"), "{settled}");
    assert_eq!(entry(&settled)["outcome"], json!("no-effect"));
    assert_eq!(sent(&backend.requests()), vec![one_bearer.clone()]);
    assert!(!settled.to_string().contains(TOKEN), "{settled}");
    assert!(!stderr.contains(TOKEN), "{stderr}");

    let refusing = FaultBackend::start(vec![Behaviour::unauthorized()]).await;
    let reg = bearer(refusing.url());
    let id = "evt_node_bearer_401";
    let (node, stderr) = call_with_env(transpiled(), &reg, id, &[]).await;
    let by_node = refusing.requests();
    let rust = record_json(&ahp_tests::support::call(&interceptor(&reg).await, id).await);
    let by_rust = refusing.requests().split_off(by_node.len());
    assert_eq!(
        rust["interceptors"][0]["failure"],
        json!({"class": "auth-failed", "phase": "await-response", "httpStatus": 401}),
        "{rust}"
    );
    assert_eq!(verdict(&node["audit"]), verdict(&rust), "{node}");
    let entry = entry(&node);
    assert_eq!(
        attempt_results(entry),
        attempt_results(&rust["interceptors"][0]),
        "{node}"
    );
    // Each attempt reached the backend with the one header.
    assert_eq!(
        sent(&by_node),
        vec![one_bearer; attempt_results(entry).len()]
    );
    assert_eq!(sent(&by_node), sent(&by_rust));
    assert!(!node.to_string().contains(TOKEN), "{node}");
    assert!(!rust.to_string().contains(TOKEN), "{rust}");
    assert!(!stderr.contains(TOKEN), "{stderr}");
}

/// SIGTERM while a backend is being waited for ends the call as `ahp intercept` ends it:
/// a printed denial, `interrupted`, exit 2. Node used to die of the signal with nothing
/// printed, which a harness reads as a crash and lets pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_denies_a_call_a_signal_ends() {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (reg, evt) = (dir.path().join("reg.json"), dir.path().join("event.json"));
    std::fs::write(&reg, one_backend(&backend, "fail-open", 5000)).expect("write registration");
    std::fs::write(&evt, event("evt_node_signal")).expect("write event");
    let host = node_async()
        .arg(jco_host_dir().join("host.mjs"))
        .arg(transpiled())
        .arg(&reg)
        .arg(&evt)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node");
    assert!(
        backend.wait_for_requests(1, Duration::from_secs(20)).await,
        "the backend was never called"
    );
    let pid = host.id().expect("still running") as libc::pid_t;
    // SAFETY: kill(2) on the child this test started and has not yet reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let output = tokio::time::timeout(HOST_LIMIT, host.wait_with_output())
        .await
        .expect("host.mjs ended after the signal")
        .expect("wait for node");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{} {stderr}", output.status);
    let settled = one_json_line(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(settled["decision"], json!("deny"), "{settled}");
    assert_eq!(settled["decidedBy"], json!("interrupted"));
    assert_eq!(
        settled["reason"],
        json!("Policy evaluation was interrupted.")
    );
    assert_eq!(settled["audit"]["decidedBy"], json!("interrupted"));
    assert_eq!(settled["audit"]["event"]["id"], json!("evt_node_signal"));
}
