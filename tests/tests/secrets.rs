//! No secret ever leaves the host: across successful calls, 401s and failing token
//! endpoints, the `ahp` CLI at trace level prints no client secret, bearer token, issued
//! access token or Basic credential, on stdout, stderr or in the audit file.

use ahp_tests::fault_backend::{Behaviour, FaultBackend, Recorded};
use ahp_tests::oauth_server::{basic, OAuthServer, TokenMode, CLIENT_ID};
use ahp_tests::pki::Pki;
use ahp_tests::support::{ahp_binary, event, registration, traced_intercept_command, Http};
use serde_json::json;

const CLIENT_SECRET: &str = "cs-secret-3a9f71c2";
const BEARER_TOKEN: &str = "bearer-secret-8e2d40b7";

struct Scenario {
    name: &'static str,
    oauth_backend: Behaviour,
    token_mode: TokenMode,
    client_secret: &'static str,
    exit: i32,
    /// Access tokens the server issues in this scenario.
    issued: usize,
    /// A line that must be in the log, so the search covers the interesting path.
    logged: &'static str,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_in_any_output_or_audit_line() {
    let unauthorized = Behaviour::Reply {
        status: 401,
        content_type: None,
        body: Vec::new(),
    };
    let scenarios = [
        Scenario {
            name: "both allow",
            oauth_backend: Behaviour::NoEffect,
            token_mode: TokenMode::Issue,
            client_secret: CLIENT_SECRET,
            exit: 0,
            issued: 1,
            logged: "ahp.hook_call",
        },
        Scenario {
            name: "401 twice",
            oauth_backend: unauthorized,
            token_mode: TokenMode::Issue,
            client_secret: CLIENT_SECRET,
            exit: 2,
            issued: 2,
            logged: "ahp.hook_call",
        },
        Scenario {
            name: "token endpoint 400",
            oauth_backend: Behaviour::NoEffect,
            token_mode: TokenMode::Status(400),
            client_secret: CLIENT_SECRET,
            exit: 2,
            issued: 0,
            logged: "OAuth token acquisition failed",
        },
        Scenario {
            name: "wrong client secret",
            oauth_backend: Behaviour::NoEffect,
            token_mode: TokenMode::Issue,
            client_secret: "cs-wrong-secret-51be07d3",
            exit: 2,
            issued: 0,
            logged: "invalid_client",
        },
    ];
    let Setup {
        dir,
        pki,
        roots,
        event_file,
    } = Setup::new("evt_secrets").await;
    let bearer_file = dir.path().join("bearer-token");
    std::fs::write(&bearer_file, BEARER_TOKEN).unwrap();

    for (i, scenario) in scenarios.into_iter().enumerate() {
        let server = OAuthServer::start(&pki, CLIENT_SECRET, 3600).await;
        server.set_token_mode(scenario.token_mode.clone());
        let secret_file = dir.path().join(format!("client-secret-{i}"));
        std::fs::write(&secret_file, scenario.client_secret).unwrap();
        let oauth_backend = FaultBackend::start(vec![scenario.oauth_backend.clone()]).await;
        let bearer_backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let reg = registration(&[
            Http::new("com.example.bearer", bearer_backend.url()).authentication(json!({
                "type": "bearer", "tokenRef": format!("file:{}", bearer_file.display())
            })),
            Http::new("com.example.oauth", oauth_backend.url()).authentication(json!({
                "type": "oauth", "issuer": server.issuer(), "resource": "https://policy.example.com",
                "clientId": CLIENT_ID, "flow": "client_credentials",
                "clientSecretRef": format!("file:{}", secret_file.display())
            })),
        ]);
        let reg_file = dir.path().join(format!("registration-{i}.json"));
        std::fs::write(&reg_file, reg).unwrap();
        let audit = dir.path().join(format!("audit-{i}.jsonl"));
        let output = traced_intercept_command(&reg_file, &event_file, &audit)
            .arg("--trust-roots")
            .arg(roots.path())
            .output()
            .await
            .expect("run ahp intercept");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let name = scenario.name;
        assert_eq!(
            output.status.code(),
            Some(scenario.exit),
            "{name}: {stdout}\n{stderr}"
        );
        assert!(stderr.contains(scenario.logged), "{name}: {stderr}");

        // Every secret of this scenario, including the ones the server made up.
        let mut secrets = vec![
            CLIENT_SECRET.to_string(),
            scenario.client_secret.to_string(),
            BEARER_TOKEN.to_string(),
            basic(CLIENT_ID, scenario.client_secret)["Basic ".len()..].to_string(),
        ];
        secrets.extend(server.issued());
        assert_nothing_leaked(name, &secrets, &output, &audit);
        // Nor in what the backends were sent, but for each one's own credential in its
        // `Authorization` header.
        let issued = server.issued();
        for (backend, own) in [
            (&bearer_backend, vec![format!("Bearer {BEARER_TOKEN}")]),
            (
                &oauth_backend,
                issued.iter().map(|t| format!("Bearer {t}")).collect(),
            ),
        ] {
            for request in backend.requests() {
                assert_not_sent(name, &secrets, &request, &own);
            }
        }

        // The secrets really were used, so their absence above means something.
        let sent_bearer = bearer_backend.requests();
        assert_eq!(
            sent_bearer[0].header_values("authorization"),
            [format!("Bearer {BEARER_TOKEN}")],
            "{name}"
        );
        assert!(
            !server.token_requests().is_empty(),
            "{name}: the token endpoint was asked"
        );
        assert_eq!(server.issued().len(), scenario.issued, "{name}");
        // And an issued token went where it belongs: every request the OAuth backend
        // was sent carries one, and an allowed call sent it one.
        let sent_oauth = oauth_backend.requests();
        if scenario.exit == 0 && scenario.issued > 0 {
            assert!(
                !sent_oauth.is_empty(),
                "{name}: the OAuth backend was asked"
            );
        }
        for request in &sent_oauth {
            let header = request.header_values("authorization");
            let carried = issued.iter().any(|t| header == [format!("Bearer {t}")]);
            assert!(carried, "{name}: {header:?}");
        }
    }
}

/// The same for a backend registered without a credential whose 401 is answered through
/// `--oauth-clients`: with the right client secret (allowed, the issued token sent) and a
/// wrong one (refused at the token endpoint).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_in_any_output_or_audit_line_after_discovery() {
    let Setup {
        dir,
        pki,
        roots,
        event_file,
    } = Setup::new("evt_secrets_discovery").await;
    for (i, (client_secret, exit, logged)) in [
        (CLIENT_SECRET, 0, "ahp.hook_call"),
        ("cs-wrong-secret-0c61d9a4", 2, "invalid_client"),
    ]
    .into_iter()
    .enumerate()
    {
        let server = OAuthServer::start(&pki, CLIENT_SECRET, 3600).await;
        server.set_challenge(Some("Bearer"));
        let resource = server.resource_url();
        let document = json!({"resource": resource, "authorization_servers": [server.issuer()]});
        server.serve_resource_metadata("/.well-known/oauth-protected-resource/hooks", document);
        let secret_file = dir.path().join(format!("discovery-secret-{i}"));
        std::fs::write(&secret_file, client_secret).unwrap();
        let clients = json!([{"issuer": server.issuer(), "clientId": CLIENT_ID,
            "clientSecretRef": format!("file:{}", secret_file.display())}]);
        let clients_file = dir.path().join(format!("clients-{i}.json"));
        std::fs::write(&clients_file, clients.to_string()).unwrap();
        let reg_file = dir.path().join(format!("discovery-registration-{i}.json"));
        std::fs::write(
            &reg_file,
            // Timing is not what this tests: room for a loaded machine at trace level.
            registration(&[Http::new("com.example.open", resource).timeout_ms(10_000)]),
        )
        .unwrap();
        let audit = dir.path().join(format!("discovery-audit-{i}.jsonl"));
        let output = traced_intercept_command(&reg_file, &event_file, &audit)
            .arg("--trust-roots")
            .arg(roots.path())
            .arg("--oauth-clients")
            .arg(&clients_file)
            .output()
            .await
            .expect("run ahp intercept");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(exit), "{i}: {stdout}\n{stderr}");
        assert!(stderr.contains(logged), "{i}: {stderr}");
        let mut secrets = vec![
            CLIENT_SECRET.to_string(),
            client_secret.to_string(),
            basic(CLIENT_ID, client_secret)["Basic ".len()..].to_string(),
        ];
        secrets.extend(server.issued());
        assert_nothing_leaked(&format!("discovery {i}"), &secrets, &output, &audit);
        // The secret was used: the token endpoint was asked, and a token it issued went
        // to the backend.
        assert_eq!(server.token_requests().len(), 1, "{i}");
        let bearers = server
            .resource_requests()
            .iter()
            .filter(|r| r.authorization.is_some())
            .count();
        assert_eq!(bearers, server.issued().len(), "{i}");
    }
}

/// What every run needs: a directory, a CA and its trust roots file, and the event file.
struct Setup {
    dir: tempfile::TempDir,
    pki: Pki,
    roots: tempfile::NamedTempFile,
    event_file: std::path::PathBuf,
}

impl Setup {
    /// Also finds (or builds) the `ahp` binary, off the async runtime, before the first
    /// command needs it.
    async fn new(event_id: &str) -> Setup {
        tokio::task::spawn_blocking(ahp_binary)
            .await
            .expect("locate the ahp binary");
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::generate();
        let roots = pki.trust_roots_file();
        let event_file = dir.path().join("event.json");
        std::fs::write(&event_file, event(event_id)).unwrap();
        Setup {
            dir,
            pki,
            roots,
            event_file,
        }
    }
}

/// None of `secrets` in a request a backend received: its body, and its headers but an
/// `Authorization` that is one of `own` (the backend's own credential).
fn assert_not_sent(name: &str, secrets: &[String], request: &Recorded, own: &[String]) {
    let body = String::from_utf8_lossy(&request.body);
    let headers = request
        .headers
        .iter()
        .filter(|(header, value)| !(header == "authorization" && own.contains(value)));
    for secret in secrets {
        assert!(
            !body.contains(secret.as_str()),
            "{name}: a secret in a body: {body}"
        );
        for (header, value) in headers.clone() {
            assert!(
                !value.contains(secret.as_str()),
                "{name}: a secret in the {header} header"
            );
        }
    }
}

/// None of `secrets` on any line of the run's stdout, stderr or audit file.
fn assert_nothing_leaked(
    name: &str,
    secrets: &[String],
    output: &std::process::Output,
    audit: &std::path::Path,
) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let audited = std::fs::read_to_string(audit).expect("audit written");
    // One call, one record: an empty audit would hide nothing.
    assert_eq!(audited.lines().count(), 1, "{name}: {audited}");
    for (what, text) in [
        ("stdout", &*stdout),
        ("stderr", &*stderr),
        ("audit", &audited),
    ] {
        for secret in secrets {
            let leaked: Vec<&str> = text
                .lines()
                .filter(|l| l.contains(secret.as_str()))
                .collect();
            assert!(leaked.is_empty(), "{name}: a secret in {what}: {leaked:?}");
        }
    }
}
