//! Bearer credentials end to end: resolved by the host at dispatch (environment variable
//! or `file:` reference), sent as exactly one `Authorization` header, never sent when
//! missing (an auth failure under the subscription's policy), re-resolved once after a
//! 401, and never written to a settlement, a reason, logs or the audit file.

use ahp_host::{DecidedBy, Decision, Settlement};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    ahp_binary, event, interceptor, only_interceptor, registration, traced_intercept_command, Http,
};
use serde_json::{json, Value};
use std::time::Duration;

const SYNTHETIC_REASON: &str = "Required policy backend unavailable.";
const BACKEND: &str = "com.example.policy";

async fn call(interceptor: &ahp_host::Interceptor, id: &str) -> Settlement {
    interceptor
        .intercept(&event(id), &["deny"], None)
        .await
        .expect("a valid event settles")
}

/// The secret appears nowhere in what the harness may show or store.
fn assert_no_secret(settled: &Settlement, secret: &str) {
    assert!(
        !settled.record.to_string().contains(secret),
        "token in the record: {}",
        settled.record
    );
    if let Some(reason) = &settled.reason {
        assert!(!reason.contains(secret), "token in the reason: {reason}");
    }
    assert!(
        !format!("{settled:?}").contains(secret),
        "token in the Debug form"
    );
}

/// A registration with one bearer `tokenRef` backend, written by hand.
fn token_ref_registration(url: &str, reference: &str, policy: &str, timeout_ms: u64) -> String {
    json!({
        "protocolVersion": "draft",
        "hooks": [{
            "id": BACKEND,
            "transport": {"type": "http", "url": url},
            "authentication": {"type": "bearer", "tokenRef": reference},
            "subscriptions": [{
                "events": ["tool.before"], "mode": "intercept",
                "timeoutMs": timeout_ms, "failurePolicy": policy,
                "content": {"default": "metadata"}
            }]
        }]
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_env_is_sent_as_exactly_one_bearer_header() {
    let name = "AHP_E2E_BEARER_ENV_SENT";
    let token = "tok-env-sent-5f1c9a";
    std::env::set_var(name, token);
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let reg = registration(&[Http::new(BACKEND, backend.url()).token_env(name)]);
    let interceptor = interceptor(&reg).await;

    let settled = call(&interceptor, "evt_env").await;
    assert_eq!(
        (settled.decision, settled.decided_by),
        (Decision::Allow, DecidedBy::NoObjection)
    );
    assert_eq!(
        only_interceptor(&settled.record)["outcome"],
        json!("no-effect")
    );
    let requests = backend.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].header_values("authorization"),
        [format!("Bearer {token}")]
    );
    assert_no_secret(&settled, token);
}

/// A missing token is an auth failure at dispatch: nothing at all reaches the backend.
async fn unset_env_case(policy: &str, name: &str) {
    assert!(std::env::var_os(name).is_none(), "{name} must not be set");
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let reg = registration(&[Http::new(BACKEND, backend.url())
        .policy(policy)
        .token_env(name)]);
    let interceptor = interceptor(&reg).await;

    let settled = call(&interceptor, "evt_unset").await;
    let entry = only_interceptor(&settled.record);
    assert_eq!(entry["failure"]["class"], json!("auth-failed"));
    assert_eq!(entry["failure"]["phase"], json!("acquire-credential"));
    match policy {
        "fail-open" => {
            assert_eq!(
                (
                    settled.decision,
                    settled.decided_by,
                    settled.reason.as_deref()
                ),
                (Decision::Allow, DecidedBy::NoObjection, None)
            );
            assert_eq!(entry["outcome"], json!("failed-open"));
        }
        _ => {
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
                )
            );
            assert_eq!(entry["outcome"], json!("failed-closed"));
        }
    }
    // Give a wrongly sent request time to arrive before asserting there was none.
    assert!(
        !backend
            .wait_for_requests(1, Duration::from_millis(200))
            .await
    );
    assert_eq!(backend.requests().len(), 0);
    assert_eq!(backend.connections(), 0, "not even a connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unset_token_env_fails_open_without_sending_anything() {
    unset_env_case("fail-open", "AHP_E2E_BEARER_UNSET_OPEN").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unset_token_env_fails_closed_without_sending_anything() {
    unset_env_case("fail-closed", "AHP_E2E_BEARER_UNSET_CLOSED").await;
}

/// A 401 gets one re-resolution and one resend of the same bytes, then auth-failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthorized_is_retried_once_with_the_same_body_then_auth_failed() {
    let name = "AHP_E2E_BEARER_401";
    let token = "tok-401-8e2d77";
    std::env::set_var(name, token);
    let backend = FaultBackend::start(vec![Behaviour::unauthorized()]).await;
    let reg = registration(&[Http::new(BACKEND, backend.url())
        .policy("fail-closed")
        .token_env(name)]);
    let interceptor = interceptor(&reg).await;

    let settled = call(&interceptor, "evt_401").await;
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
        )
    );
    let entry = only_interceptor(&settled.record);
    assert_eq!(entry["outcome"], json!("failed-closed"));
    assert_eq!(
        entry["failure"],
        json!({"class": "auth-failed", "phase": "await-response", "httpStatus": 401})
    );
    let results: Vec<&Value> = entry["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["result"])
        .collect();
    assert_eq!(results, [&json!("unauthorized"), &json!("unauthorized")]);
    // No third attempt arrives later either.
    assert!(
        !backend
            .wait_for_requests(3, Duration::from_millis(200))
            .await
    );
    let requests = backend.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].body, requests[1].body,
        "the resend is byte-identical"
    );
    for request in &requests {
        assert_eq!(
            request.header_values("authorization"),
            [format!("Bearer {token}")]
        );
    }
    assert_no_secret(&settled, token);
}

/// After a 401 the reference is resolved again: a rotated token goes out on the resend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthorized_re_resolves_a_rotated_token_ref() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("token");
    std::fs::write(&file, "tok-stale-41aa\n").unwrap();
    let late_401 = Behaviour::Delay(
        Duration::from_millis(300),
        Box::new(Behaviour::unauthorized()),
    );
    let backend = FaultBackend::start(vec![late_401, Behaviour::NoEffect]).await;
    let reg = token_ref_registration(
        &backend.url(),
        &format!("file:{}", file.display()),
        "fail-closed",
        3_000,
    );
    let interceptor = interceptor(&reg).await;

    let pending = tokio::spawn({
        let interceptor = interceptor.clone();
        async move { call(&interceptor, "evt_rotate_401").await }
    });
    assert!(backend.wait_for_requests(1, Duration::from_secs(2)).await);
    std::fs::write(&file, "tok-fresh-93bb\n").unwrap();
    let settled = pending.await.expect("the call task");

    assert_eq!(
        (settled.decision, settled.decided_by),
        (Decision::Allow, DecidedBy::NoObjection)
    );
    let entry = only_interceptor(&settled.record);
    assert_eq!(entry["outcome"], json!("no-effect"));
    let results: Vec<&Value> = entry["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["result"])
        .collect();
    assert_eq!(results, [&json!("unauthorized"), &json!("accepted")]);
    let requests = backend.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].header_values("authorization"),
        ["Bearer tok-stale-41aa"]
    );
    assert_eq!(
        requests[1].header_values("authorization"),
        ["Bearer tok-fresh-93bb"]
    );
    assert_eq!(requests[0].body, requests[1].body);
    assert_no_secret(&settled, "tok-stale-41aa");
    assert_no_secret(&settled, "tok-fresh-93bb");
}

/// `tokenRef: "file:..."` is read at every dispatch, so a rotated file is used next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_ref_file_is_sent_and_rotation_is_picked_up() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("token");
    std::fs::write(&file, "tok-file-one-77c1\n").unwrap();
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let reg = token_ref_registration(
        &backend.url(),
        &format!("file:{}", file.display()),
        "fail-closed",
        1_000,
    );
    let interceptor = interceptor(&reg).await;

    let first = call(&interceptor, "evt_file_1").await;
    assert_eq!(
        (first.decision, first.decided_by),
        (Decision::Allow, DecidedBy::NoObjection)
    );
    std::fs::write(&file, "tok-file-two-0d3e").unwrap();
    let second = call(&interceptor, "evt_file_2").await;
    assert_eq!(
        (second.decision, second.decided_by),
        (Decision::Allow, DecidedBy::NoObjection)
    );

    let requests = backend.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].header_values("authorization"),
        ["Bearer tok-file-one-77c1"]
    );
    assert_eq!(
        requests[1].header_values("authorization"),
        ["Bearer tok-file-two-0d3e"]
    );
    for settled in [&first, &second] {
        assert_no_secret(settled, "tok-file-one-77c1");
        assert_no_secret(settled, "tok-file-two-0d3e");
    }
}

/// A missing token file is an auth failure, and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_token_ref_file_fails_without_sending() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let missing = dir.path().join("absent");
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let reg = token_ref_registration(
        &backend.url(),
        &format!("file:{}", missing.display()),
        "fail-closed",
        1_000,
    );
    let interceptor = interceptor(&reg).await;

    let settled = call(&interceptor, "evt_file_missing").await;
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
        )
    );
    let entry = only_interceptor(&settled.record);
    assert_eq!(entry["failure"]["class"], json!("auth-failed"));
    assert_eq!(entry["failure"]["phase"], json!("acquire-credential"));
    assert!(
        !backend
            .wait_for_requests(1, Duration::from_millis(200))
            .await
    );
    assert_eq!(backend.connections(), 0);
}

/// The CLI at trace level never prints the token, nor writes it to the audit file —
/// neither on success nor after a 401 and its resend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_never_prints_or_audits_the_token() {
    let name = "AHP_E2E_BEARER_CLI";
    let token = "tok-cli-secret-c0ffee42";
    // Found (or built) off the async runtime before the first command needs it.
    tokio::task::spawn_blocking(ahp_binary)
        .await
        .expect("locate the ahp binary");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let event_file = dir.path().join("event.json");
    std::fs::write(&event_file, event("evt_cli_bearer")).unwrap();

    for (behaviour, expected_exit, expected_decision) in [
        (Behaviour::NoEffect, 0, "allow"),
        (Behaviour::unauthorized(), 2, "deny"),
    ] {
        let backend = FaultBackend::start(vec![behaviour]).await;
        let reg_file = dir
            .path()
            .join(format!("registration-{expected_exit}.json"));
        let audit = dir.path().join(format!("audit-{expected_exit}.jsonl"));
        let reg = registration(&[Http::new(BACKEND, backend.url())
            .policy("fail-closed")
            .token_env(name)]);
        std::fs::write(&reg_file, reg).unwrap();

        let output = traced_intercept_command(&reg_file, &event_file, &audit)
            .env(name, token)
            .output()
            .await
            .expect("run ahp intercept");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(expected_exit),
            "stdout: {stdout}\nstderr: {stderr}"
        );
        let leaks = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.contains(token))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(leaks(&stdout), Vec::<String>::new(), "token on stdout");
        assert_eq!(leaks(&stderr), Vec::<String>::new(), "token on stderr");
        assert!(stderr.contains("TRACE"), "trace logs on stderr");
        assert!(
            stderr.contains("ahp.hook_call"),
            "the host's own spans are logged"
        );

        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 1, "one JSON line: {stdout}");
        let record: Value = serde_json::from_str(lines[0]).expect("stdout is JSON");
        assert_eq!(record["decision"], json!(expected_decision));
        let audited = std::fs::read_to_string(&audit).expect("the audit file was written");
        assert!(
            !audited.contains(token),
            "token in the audit file: {audited}"
        );
        let audited: Vec<Value> = audited
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(audited, [record]);

        // The token really was sent, so its absence above means something.
        let requests = backend.requests();
        assert_eq!(requests.len(), if expected_exit == 0 { 1 } else { 2 });
        for request in &requests {
            assert_eq!(
                request.header_values("authorization"),
                [format!("Bearer {token}")]
            );
        }
    }
}
