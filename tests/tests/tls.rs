//! HTTPS backends: certificates are verified with rustls against the platform roots plus
//! an explicitly configured trust-roots file; an untrusted certificate, or a trusted CA's
//! certificate for another name or out of date, fails the TLS handshake, nothing is sent,
//! and the subscription's policy settles the call. The handshake runs under the call's
//! deadline like the rest of the connect.

use ahp_host::{DecidedBy, Decision, EffectKind, Interceptor, Options, RetryPolicy};
use ahp_tests::pki::Pki;
use ahp_tests::support::{
    ahp_binary, ahp_command, assert_failed, assert_settled, assert_settled_at, event, record_json,
    registration, timed_call, Http, SYNTHETIC_REASON,
};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// An HTTPS backend on 127.0.0.1 answering every intercept with no effect; counts the
/// requests that got through the handshake.
async fn https_backend(pki: &Pki) -> (u16, Arc<AtomicUsize>) {
    https_backend_behind(pki.acceptor()).await
}

/// [`https_backend`] behind `acceptor`.
async fn https_backend_behind(acceptor: TlsAcceptor) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let count = count.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |r| {
                    count.fetch_add(1, Ordering::SeqCst);
                    answer(r)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, served)
}

async fn answer(
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let id = serde_json::from_slice::<Value>(&body)
        .map(|v| v["id"].clone())
        .unwrap_or(Value::Null);
    let reply =
        json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "draft", "effects": []}});
    let mut response = Response::new(Full::new(Bytes::from(reply.to_string())));
    response
        .headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    Ok(response)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_backend_signed_by_a_configured_root_is_trusted() {
    let pki = Pki::generate();
    let (port, served) = https_backend(&pki).await;
    let roots = pki.trust_roots_file();
    let reg = registration(&[Http::new(
        "com.example.tls",
        format!("https://localhost:{port}/hooks"),
    )]);
    let options = Options {
        trust_roots: Some(roots.path().to_path_buf()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg, options).await.unwrap();
    let settled = interceptor
        .intercept(&event("evt_tls_ok"), &[EffectKind::Deny], None)
        .await
        .unwrap();
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    assert_eq!(
        record_json(&settled)["interceptors"][0]["outcome"],
        "no-effect"
    );
    assert_eq!(served.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_certificate_fails_the_handshake_and_sends_nothing() {
    let pki = Pki::generate();
    let (port, served) = https_backend(&pki).await;
    for (policy, decision) in [
        ("fail-closed", Decision::Deny),
        ("fail-open", Decision::Allow),
    ] {
        let reg = registration(&[Http::new(
            "com.example.tls",
            format!("https://localhost:{port}/hooks"),
        )
        .policy(policy)]);
        let interceptor = Interceptor::new(&reg, Options::default()).await.unwrap();
        let settled = interceptor
            .intercept(&event("evt_tls_bad"), &[EffectKind::Deny], None)
            .await
            .unwrap();
        assert_eq!(settled.decision, decision, "{policy}: {}", settled.record);
        if decision == Decision::Deny {
            assert_eq!(settled.decided_by, DecidedBy::SyntheticDeny);
        }
        let failure = &record_json(&settled)["interceptors"][0]["failure"];
        assert_eq!(
            failure["class"], "connection-refused",
            "{policy}: {}",
            settled.record
        );
        assert_eq!(failure["detail"], "tls");
        assert_eq!(failure["phase"], "connect");
    }
    assert_eq!(
        served.load(Ordering::SeqCst),
        0,
        "no request may pass an untrusted handshake"
    );
}

/// The test CA's `roots` trusted and two retries allowed, which a TLS failure must not
/// use: retrying cannot mend a certificate.
fn trusting_with_retries(roots: &std::path::Path) -> Options {
    Options {
        trust_roots: Some(roots.to_path_buf()),
        retries: RetryPolicy {
            default: 2,
            ..Default::default()
        },
        ..Options::default()
    }
}

/// `record`'s one interceptor failed as the TLS failure in `connect` (call `case`), in
/// one attempt: not retried.
fn assert_a_tls_failure_not_retried(record: &Value, case: &str) {
    let entry = &record["interceptors"][0];
    assert_eq!(
        entry["failure"],
        json!({"class": "connection-refused", "phase": "connect", "detail": "tls"}),
        "{case}: {record}"
    );
    let attempts = entry["attempts"].as_array().map(Vec::len);
    assert_eq!(attempts, Some(1), "{case}: not retried: {record}");
}

/// A backend presenting a certificate from `acceptor` that the trusted test CA signed but
/// that is not good for `https://localhost` (`case` names which): the handshake fails as
/// the TLS failure in `connect`, not retried (retrying cannot mend a certificate), the
/// backend serves nothing, and fail-closed denies.
async fn assert_certificate_refused(pki: &Pki, acceptor: TlsAcceptor, case: &str) {
    let (port, served) = https_backend_behind(acceptor).await;
    let roots = pki.trust_roots_file();
    // A deadline far past the refusal, which comes at once: a loaded machine's slow
    // handshake is no deadline-exceeded.
    let reg =
        registration(&[
            Http::new("com.example.tls", format!("https://localhost:{port}/hooks"))
                .timeout_ms(10_000),
        ]);
    let interceptor = Interceptor::new(&reg, trusting_with_retries(roots.path()))
        .await
        .unwrap();
    let settled = interceptor
        .intercept(&event(case), &[EffectKind::Deny], None)
        .await
        .unwrap();
    assert_settled(
        &settled,
        Decision::Deny,
        DecidedBy::SyntheticDeny,
        Some(SYNTHETIC_REASON),
    );
    assert_a_tls_failure_not_retried(&record_json(&settled), case);
    assert_eq!(
        served.load(Ordering::SeqCst),
        0,
        "{case}: no request may pass a refused certificate"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_certificate_for_another_name_fails_the_handshake_and_sends_nothing() {
    let pki = Pki::generate();
    let acceptor = pki.acceptor_for_only(&["other.example"]);
    assert_certificate_refused(&pki, acceptor, "evt_tls_other_name").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_but_expired_certificate_fails_the_handshake_and_sends_nothing() {
    let pki = Pki::generate();
    let acceptor = pki.acceptor_with_an_expired_certificate();
    assert_certificate_refused(&pki, acceptor, "evt_tls_expired").await;
}

/// A peer that takes the connection and then hangs up in the handshake, by closing or by
/// resetting: the request was never sent, so nobody took it, `connection-refused` in
/// `connect` (not a connection reset or lost while awaiting a response), retried like a
/// refusal when retries are on (not a certificate's TLS failure, which retrying cannot
/// mend).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_hanging_up_in_the_handshake_is_refused_with_nothing_sent() {
    for reset in [false, true] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                // Read the ClientHello, then hang up.
                let mut hello = [0u8; 512];
                let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut hello).await;
                if reset {
                    let _ = stream.set_zero_linger();
                }
                drop(stream);
            }
        });
        let reg = registration(&[Http::new(
            "com.example.tls",
            format!("https://localhost:{port}/hooks"),
        )
        .policy("fail-open")]);
        let options = Options {
            retries: RetryPolicy {
                default: 1,
                ..Default::default()
            },
            ..Options::default()
        };
        let interceptor = Interceptor::new(&reg, options).await.unwrap();
        let record = failed_open(&interceptor, "evt_tls_hangup").await;
        let entry = &record["interceptors"][0];
        assert_eq!(
            entry["failure"],
            json!({"class": "connection-refused", "phase": "connect"}),
            "reset {reset}: {record}"
        );
        let attempts = entry["attempts"].as_array().map(Vec::len);
        assert_eq!(attempts, Some(2), "reset {reset}: retried once: {record}");
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "reset {reset}");
    }
}

/// A peer that takes the connection and never answers the ClientHello: the handshake is
/// part of the connect, under the call's deadline, so the call settles at that deadline
/// as `deadline-exceeded` in `connect`, by either policy, not at the outer bound the host
/// puts on a call that overruns its deadlines (the deadline plus
/// [`ahp_host::BOUND_MARGIN`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_never_answered_settles_at_the_deadline_in_the_connect_phase() {
    let pki = Pki::generate();
    let roots = pki.trust_roots_file();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        // Held open, never written to, until the test ends: a closed socket would end
        // the handshake at once, a refusal.
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    let deadline = Duration::from_millis(200);
    for policy in ["fail-closed", "fail-open"] {
        let id = format!("evt_tls_silent_{policy}");
        let reg = registration(&[Http::new(
            "com.example.tls",
            format!("https://localhost:{port}/hooks"),
        )
        .policy(policy)
        .timeout_ms(200)]);
        let options = Options {
            trust_roots: Some(roots.path().to_path_buf()),
            ..Options::default()
        };
        let interceptor = Interceptor::new(&reg, options).await.unwrap();
        let (settled, elapsed) = timed_call(&interceptor, &id, None).await;
        let failure = assert_failed(&settled, policy, "deadline-exceeded", &id);
        assert_eq!(
            failure,
            json!({"class": "deadline-exceeded", "phase": "connect"}),
            "{id}: {}",
            settled.record
        );
        assert_settled_at(elapsed, deadline, &id);
    }
    // Each call's connection was taken: it was the handshake that never ended.
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

/// A TLS 1.3 backend that requires a client certificate, which this host does not
/// offer, refuses only after the client's handshake has ended, at its first read (the
/// request is out by then; the backend's application never saw it): still the TLS
/// failure in `connect`, not retried, not a connection lost while awaiting a response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_requiring_a_client_certificate_is_a_tls_failure_not_retried() {
    let pki = Pki::generate();
    let (port, served) = https_backend_behind(pki.acceptor_requiring_a_client_certificate()).await;
    let roots = pki.trust_roots_file();
    // A deadline far past the refusal, which comes at once: a loaded machine's slow
    // handshake is no deadline-exceeded.
    let reg = registration(&[Http::new(
        "com.example.mtls",
        format!("https://localhost:{port}/hooks"),
    )
    .policy("fail-open")
    .timeout_ms(10_000)]);
    let interceptor = Interceptor::new(&reg, trusting_with_retries(roots.path()))
        .await
        .unwrap();
    for i in 0..5 {
        let id = format!("evt_mtls_{i}");
        assert_a_tls_failure_not_retried(&failed_open(&interceptor, &id).await, &id);
    }
    assert_eq!(served.load(Ordering::SeqCst), 0);
}

/// The record of the call `id`, allowed by its one fail-open interceptor's failure.
async fn failed_open(interceptor: &Interceptor, id: &str) -> Value {
    let settled = interceptor
        .intercept(&event(id), &[EffectKind::Deny], None)
        .await
        .unwrap();
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    record_json(&settled)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_to_a_non_loopback_host_is_not_permitted() {
    // 0.0.0.0 is not a loopback address (and would still stay on this machine).
    let reg = registration(&[Http::new("com.example.remote", "http://0.0.0.0:9/hooks")]);
    let interceptor = Interceptor::new(&reg, Options::default()).await.unwrap();
    let settled = interceptor
        .intercept(&event("evt_plain"), &[EffectKind::Deny], None)
        .await
        .unwrap();
    assert_eq!(settled.decided_by, DecidedBy::SyntheticDeny);
    let failure = &record_json(&settled)["interceptors"][0]["failure"];
    assert_eq!(failure["class"], "connection-refused");
    assert_eq!(failure["detail"], "not-permitted");
}

/// The warnings `ahp check FILE [FLAG]` prints, which must find the registration valid.
async fn check_warnings(file: &std::path::Path, flag: Option<&str>) -> Vec<String> {
    let mut command = tokio::process::Command::from(ahp_command());
    command.arg("check").arg(file).args(flag);
    let output = command.output().await.expect("run ahp check");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let warnings = stderr.lines().filter(|l| l.starts_with("warning:"));
    warnings.map(str::to_owned).collect()
}

/// `ahp check` names every plain-http backend off loopback (the first 100 by id, then a
/// line counting the rest): refused by default, and
/// flagged as unencrypted when `--allow-insecure-http ID` lets it through; an id that is
/// not an http backend of the registration is an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_warns_about_plain_http_off_loopback() {
    // Found (or built) off the async runtime before the first command needs it.
    tokio::task::spawn_blocking(ahp_binary)
        .await
        .expect("locate the ahp binary");
    let dir = tempfile::tempdir().unwrap();
    let reg_file = dir.path().join("registration.json");
    let reg = registration(&[
        Http::new("com.example.remote", "http://policy.example.com/hooks"),
        Http::new("com.example.local", "http://127.0.0.1:9/hooks"),
        Http::new("com.example.named", "http://localhost:9/hooks"),
        Http::new("com.example.tls", "https://policy.example.com/hooks"),
    ]);
    std::fs::write(&reg_file, reg).unwrap();
    for (flag, expected) in [
        (None, "will be refused at delivery"),
        (
            Some("--allow-insecure-http=com.example.remote"),
            "travel unencrypted",
        ),
    ] {
        let warnings = check_warnings(&reg_file, flag).await;
        assert_eq!(warnings.len(), 1, "{flag:?}: {warnings:?}");
        assert!(
            warnings[0].contains("`com.example.remote`")
                && warnings[0].contains("`policy.example.com`")
                && warnings[0].contains(expected),
            "{flag:?}: {}",
            warnings[0]
        );
    }
    // Past a hundred, the first hundred by backend id and one line counting the rest, as
    // the component's own lists end. By id, not by the warning's text: `remote000`
    // before `remote000.b` (whose text sorts first, `.` before the backtick after an id).
    let mut many: Vec<String> = (0..150)
        .map(|i| format!("com.example.remote{i:03}"))
        .collect();
    many.push("com.example.remote000.b".into());
    let hooks: Vec<Http> = many
        .iter()
        .map(|id| Http::new(id, "http://policy.example.com/hooks"))
        .collect();
    let many_file = dir.path().join("many.json");
    std::fs::write(&many_file, registration(&hooks)).unwrap();
    let warnings = check_warnings(&many_file, None).await;
    assert_eq!(warnings.len(), 101, "{warnings:?}");
    for (at, id) in [
        (0, "com.example.remote000"),
        (1, "com.example.remote000.b"),
        (99, "com.example.remote098"),
    ] {
        let named = format!("`{id}`");
        assert!(warnings[at].contains(&named), "{at}: {}", warnings[at]);
    }
    let last = &warnings[100];
    assert!(
        last.contains("51 more backend warnings not listed"),
        "{last}"
    );
    let unknown = tokio::process::Command::from(ahp_command())
        .arg("check")
        .arg(&reg_file)
        .arg("--allow-insecure-http=com.example.nobody")
        .output()
        .await
        .expect("run ahp check");
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`com.example.nobody`"), "{stderr}");
}
