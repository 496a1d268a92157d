//! Bearer credentials end to end: resolved by the host at dispatch (environment variable
//! or `file:` reference), sent as exactly one `Authorization` header, never sent when
//! missing (an auth failure under the subscription's policy), re-resolved once after a
//! 401, and never written to a settlement, a reason, logs or the audit file.

use ahp_host::{DecidedBy, Decision, Settlement};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    ahp_binary, assert_failed, assert_nothing_sent, assert_settled, attempt_results, audit_lines,
    call, event, interceptor, one_json_line, only_interceptor, record_json, registration,
    traced_intercept_command, Http,
};
use serde_json::json;
use std::time::Duration;

const BACKEND: &str = "com.example.policy";

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

/// `backend` received one request per token, in order, each carrying exactly one
/// `Authorization` header: that token as a bearer credential.
fn assert_bearer_tokens(backend: &FaultBackend, tokens: &[&str]) {
    let requests = backend.requests();
    let sent: Vec<Vec<&str>> = requests
        .iter()
        .map(|request| request.header_values("authorization"))
        .collect();
    let expected: Vec<Vec<String>> = tokens
        .iter()
        .map(|token| vec![format!("Bearer {token}")])
        .collect();
    assert_eq!(sent, expected);
}

/// A fail-closed registration with one backend whose bearer token is read from `file`.
fn token_file_registration(url: String, file: &std::path::Path, timeout_ms: u64) -> String {
    let reference = format!("file:{}", file.display());
    registration(&[Http::new(BACKEND, url)
        .timeout_ms(timeout_ms)
        .token_ref(&reference)])
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
    assert_settled(&settled, Decision::Allow, DecidedBy::NoObjection, None);
    assert_eq!(
        only_interceptor(&record_json(&settled))["outcome"],
        json!("no-effect")
    );
    assert_bearer_tokens(&backend, &[token]);
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
    let failure = assert_failed(&settled, policy, "auth-failed", name);
    assert_eq!(failure["phase"], json!("acquire-credential"));
    assert_nothing_sent(&backend).await;
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
    let failure = assert_failed(&settled, "fail-closed", "auth-failed", "401");
    assert_eq!(
        failure,
        json!({"class": "auth-failed", "phase": "await-response", "httpStatus": 401})
    );
    assert_eq!(
        attempt_results(only_interceptor(&record_json(&settled))),
        ["unauthorized", "unauthorized"]
    );
    // No third attempt arrives later either.
    assert!(
        !backend
            .wait_for_requests(3, Duration::from_millis(200))
            .await
    );
    assert_bearer_tokens(&backend, &[token, token]);
    let requests = backend.requests();
    assert_eq!(
        requests[0].body, requests[1].body,
        "the resend is byte-identical"
    );
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
    let reg = token_file_registration(backend.url(), &file, 3_000);
    let interceptor = interceptor(&reg).await;

    let pending = tokio::spawn({
        let interceptor = interceptor.clone();
        async move { call(&interceptor, "evt_rotate_401").await }
    });
    assert!(backend.wait_for_requests(1, Duration::from_secs(2)).await);
    std::fs::write(&file, "tok-fresh-93bb\n").unwrap();
    let settled = pending.await.expect("the call task");

    assert_settled(&settled, Decision::Allow, DecidedBy::NoObjection, None);
    let record = record_json(&settled);
    let entry = only_interceptor(&record);
    assert_eq!(entry["outcome"], json!("no-effect"));
    assert_eq!(attempt_results(entry), ["unauthorized", "accepted"]);
    assert_bearer_tokens(&backend, &["tok-stale-41aa", "tok-fresh-93bb"]);
    let requests = backend.requests();
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
    let reg = token_file_registration(backend.url(), &file, 1_000);
    let interceptor = interceptor(&reg).await;

    let first = call(&interceptor, "evt_file_1").await;
    assert_settled(&first, Decision::Allow, DecidedBy::NoObjection, None);
    std::fs::write(&file, "tok-file-two-0d3e").unwrap();
    let second = call(&interceptor, "evt_file_2").await;
    assert_settled(&second, Decision::Allow, DecidedBy::NoObjection, None);

    assert_bearer_tokens(&backend, &["tok-file-one-77c1", "tok-file-two-0d3e"]);
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
    let reg = token_file_registration(backend.url(), &missing, 1_000);
    let interceptor = interceptor(&reg).await;

    let settled = call(&interceptor, "evt_file_missing").await;
    let failure = assert_failed(&settled, "fail-closed", "auth-failed", "missing file");
    assert_eq!(failure["phase"], json!("acquire-credential"));
    assert_nothing_sent(&backend).await;
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

        let record = one_json_line(&stdout);
        assert_eq!(record["decision"], json!(expected_decision));
        let audited = std::fs::read_to_string(&audit).expect("the audit file was written");
        assert!(
            !audited.contains(token),
            "token in the audit file: {audited}"
        );
        assert_eq!(audit_lines(&audit), [record]);

        // The token really was sent, so its absence above means something.
        let sends = if expected_exit == 0 { 1 } else { 2 };
        assert_bearer_tokens(&backend, &vec![token; sends]);
    }
}
