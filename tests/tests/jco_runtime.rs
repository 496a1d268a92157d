//! A second runtime (issue 13): the same component under Node.js through jco, hosted by
//! `tests/jco-host/host.mjs`, a JS implementation of the documented imports (README,
//! "Hosting the component elsewhere"), against the fault-injecting loopback backend.
//!
//! Needs `node` and `npm ci --prefix tests/jco-host` (the README's test command runs it);
//! without them these tests fail and say so.

use ahp_host::EMBEDDED_COMPONENT;
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{event, one_json_line, registration, Http, SLACK, SYNTHETIC_REASON};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const BACKEND: &str = "com.example.policy";

fn jco_host_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jco-host")
}

fn node() -> std::process::Command {
    std::process::Command::new("node")
}

/// The embedded component transpiled once per test binary by
/// `jco transpile ahp_interceptor.wasm -o out --instantiation async`; the entry module.
fn transpiled() -> &'static Path {
    static OUT: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &OUT.get_or_init(|| {
        let jco = jco_host_dir().join("node_modules/@bytecodealliance/jco/dist/jco.js");
        assert!(
            jco.exists(),
            "jco is not installed at {}: run `npm ci --prefix tests/jco-host`",
            jco.display()
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let wasm = dir.path().join("ahp_interceptor.wasm");
        std::fs::write(&wasm, EMBEDDED_COMPONENT).expect("write the component");
        let out = dir.path().join("out");
        let output = node()
            .arg(&jco)
            .arg("transpile")
            .arg(&wasm)
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
            .unwrap_or_else(|e| panic!("cannot run `node` ({e}): install Node.js 20 or later"));
        assert!(
            output.status.success(),
            "jco transpile failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // The generated module is ESM; Node needs to be told so.
        std::fs::write(out.join("package.json"), r#"{"type":"module"}"#).expect("package.json");
        let entry = out.join("ahp_interceptor.js");
        (dir, entry)
    })
    .1
}

/// One hook call for event `id` through the JS host; its printed settlement.
async fn call(registration: &str, id: &str) -> Value {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = dir.path().join("registration.json");
    let evt = dir.path().join("event.json");
    std::fs::write(&reg, registration).expect("write registration");
    std::fs::write(&evt, event(id)).expect("write event");
    let entry = transpiled();
    let output = tokio::process::Command::new("node")
        .arg(jco_host_dir().join("host.mjs"))
        .arg(entry)
        .arg(&reg)
        .arg(&evt)
        .kill_on_drop(true)
        .output()
        .await
        .expect("run node");
    assert!(
        output.status.success(),
        "host.mjs failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let settled = one_json_line(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(settled["audit"]["event"]["id"], json!(id), "{settled}");
    settled
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
/// port and a missing route are `connection-refused` in `connect`, a name that does not
/// resolve has detail `unresolved-host`; each settled by the policy (fail-open here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_classifies_a_connection_never_made_as_the_rust_host_does() {
    let refused = ahp_tests::fault_backend::refused_url();
    let cases = [
        (refused.as_str(), None),
        ("https://224.0.0.1:9/hooks", None),
        ("https://ahp-backend.invalid/hooks", Some("unresolved-host")),
    ];
    for (i, (url, detail)) in cases.into_iter().enumerate() {
        assert_never_connected(url, &format!("evt_node_unconnected_{i}"), detail).await;
    }
}

/// One fail-open call to `url`, which takes no request: allowed, its failure
/// `connection-refused` in `connect`, with `detail` if any.
async fn assert_never_connected(url: &str, id: &str, detail: Option<&str>) {
    let reg = registration(&[Http::new(BACKEND, url).policy("fail-open").timeout_ms(5000)]);
    let settled = call(&reg, id).await;
    assert_eq!(settled["decision"], json!("allow"), "{url}: {settled}");
    let mut expected = json!({"class": "connection-refused", "phase": "connect"});
    if let Some(detail) = detail {
        expected["detail"] = json!(detail);
    }
    assert_eq!(entry(&settled)["failure"], expected, "{url}: {settled}");
}

/// The TLS handshake's failures are classified as in the Rust host: a peer that hangs up
/// in it is `connection-refused`, a certificate Node does not trust is the TLS failure
/// (detail `tls`); both in `connect`, nothing sent.
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
    let acceptor = pki.acceptor();
    let untrusted = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let untrusted_port = untrusted.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = untrusted.accept().await {
            let _ = acceptor.accept(stream).await;
        }
    });
    let cases = [(hang_up_port, None), (untrusted_port, Some("tls"))];
    for (i, (port, detail)) in cases.into_iter().enumerate() {
        let url = format!("https://localhost:{port}/hooks");
        assert_never_connected(&url, &format!("evt_node_tls_{i}"), detail).await;
    }
}
