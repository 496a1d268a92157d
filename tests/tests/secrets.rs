//! No secret ever leaves the host: across successful calls, 401s, failing token
//! endpoints and fail-closed denials, the `ahp` CLI at trace level (`ahp intercept`,
//! `ahp hook` and `ahp observe`) prints no client secret (as it is, form-encoded for a
//! `client_secret_post` body, or in a Basic credential), bearer token or issued access
//! token, on stdout, stderr, in the audit file or in a hook's log file.

use ahp_tests::fault_backend::{Behaviour, FaultBackend, Recorded};
use ahp_tests::hook::{hook_command, run_command};
use ahp_tests::oauth_server::{
    basic, MetadataMode, OAuthServer, TokenMode, TokenRequest, CLIENT_ID,
};
use ahp_tests::pki::Pki;
use ahp_tests::support::{
    ahp_binary, ahp_command, event, registration, traced_intercept_command, valid_event, Http,
    TRACE_FILTER,
};
use serde_json::{json, Value};
use std::path::Path;

/// With a `+` and a `/`, so its form-encoded (and Basic) form differs from it as it is,
/// and a search for it as it is would miss a `client_secret_post` body in a log.
const CLIENT_SECRET: &str = "cs-secret+3a9f/71c2";
const BEARER_TOKEN: &str = "bearer-secret-8e2d40b7";

struct Scenario {
    name: &'static str,
    oauth_backend: Behaviour,
    token_mode: TokenMode,
    /// How the issuer takes the client's credentials: a Basic header, or in the form.
    metadata_mode: MetadataMode,
    client_secret: &'static str,
    exit: i32,
    /// Access tokens the server issues in this scenario.
    issued: usize,
    /// A line that must be in the log, so the search covers the interesting path.
    logged: &'static str,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_in_any_output_or_audit_line() {
    let scenarios = [
        Scenario {
            name: "both allow",
            oauth_backend: Behaviour::NoEffect,
            token_mode: TokenMode::Issue,
            metadata_mode: MetadataMode::Normal,
            client_secret: CLIENT_SECRET,
            exit: 0,
            issued: 1,
            logged: "ahp.hook_call",
        },
        Scenario {
            name: "401 twice",
            oauth_backend: unauthorized(),
            token_mode: TokenMode::Issue,
            metadata_mode: MetadataMode::Normal,
            client_secret: CLIENT_SECRET,
            exit: 2,
            issued: 2,
            logged: "ahp.hook_call",
        },
        Scenario {
            name: "token endpoint 400",
            oauth_backend: Behaviour::NoEffect,
            token_mode: TokenMode::Status(400),
            metadata_mode: MetadataMode::Normal,
            client_secret: CLIENT_SECRET,
            exit: 2,
            issued: 0,
            logged: "OAuth token acquisition failed",
        },
        Scenario {
            name: "wrong client secret",
            oauth_backend: Behaviour::NoEffect,
            token_mode: TokenMode::Issue,
            metadata_mode: MetadataMode::Normal,
            client_secret: "cs-wrong+secret/51be07d3",
            exit: 2,
            issued: 0,
            logged: "invalid_client",
        },
    ];
    no_secret_leaves_in(scenarios, "evt_secrets").await;
}

/// The same where the issuer offers `client_secret_post` alone, the one way the client
/// secret travels in a request body (the token request's form): tokens issued and
/// refused, a token endpoint that fails, and one that refuses the client secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_posted_client_secret_in_any_output_or_audit_line() {
    let scenarios = [
        Scenario {
            name: "post, 401 twice",
            oauth_backend: unauthorized(),
            token_mode: TokenMode::Issue,
            metadata_mode: MetadataMode::PostOnly,
            client_secret: CLIENT_SECRET,
            exit: 2,
            issued: 2,
            logged: "ahp.hook_call",
        },
        Scenario {
            name: "post, token endpoint 400",
            oauth_backend: Behaviour::NoEffect,
            token_mode: TokenMode::Status(400),
            metadata_mode: MetadataMode::PostOnly,
            client_secret: CLIENT_SECRET,
            exit: 2,
            issued: 0,
            logged: "OAuth token acquisition failed",
        },
        Scenario {
            name: "post, wrong client secret",
            oauth_backend: Behaviour::NoEffect,
            token_mode: TokenMode::Issue,
            metadata_mode: MetadataMode::PostOnly,
            client_secret: "cs-wrong+posted/93ac51e0",
            exit: 2,
            issued: 0,
            logged: "invalid_client",
        },
    ];
    no_secret_leaves_in(scenarios, "evt_secrets_post").await;
}

/// Runs each of `scenarios` through `ahp intercept` (a bearer interceptor, then an OAuth
/// one) and asserts that no secret is in its output, its audit record or what the
/// backends were sent, and that every secret really was used.
async fn no_secret_leaves_in(scenarios: impl IntoIterator<Item = Scenario>, event_id: &str) {
    let Setup {
        dir,
        pki,
        roots,
        event_file,
    } = Setup::new(event_id).await;
    let bearer_file = dir.path().join("bearer-token");
    std::fs::write(&bearer_file, BEARER_TOKEN).unwrap();

    for (i, scenario) in scenarios.into_iter().enumerate() {
        let server = OAuthServer::start(&pki, CLIENT_SECRET, 3600).await;
        server.set_token_mode(scenario.token_mode.clone());
        server.set_metadata_mode(scenario.metadata_mode);
        let secret_file = dir.path().join(format!("client-secret-{i}"));
        std::fs::write(&secret_file, scenario.client_secret).unwrap();
        let oauth_backend = FaultBackend::start(vec![scenario.oauth_backend.clone()]).await;
        let bearer_backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let reg = registration(&[
            Http::new("com.example.bearer", bearer_backend.url())
                .token_ref(&format!("file:{}", bearer_file.display())),
            Http::new("com.example.oauth", oauth_backend.url())
                .authentication(oauth_binding(&server, &secret_file)),
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
        let mut secrets = forms_of(CLIENT_SECRET);
        secrets.extend(forms_of(scenario.client_secret));
        secrets.push(BEARER_TOKEN.to_string());
        secrets.extend(server.issued());
        assert_nothing_leaked(name, &secrets, &output, &audit);
        // Nor in what the backends were sent, but for each one's own credential in its
        // `Authorization` header.
        let issued = server.issued();
        for (backend, own) in [
            (&bearer_backend, vec![format!("Bearer {BEARER_TOKEN}")]),
            (&oauth_backend, bearers(&issued)),
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
        assert_client_secret_sent(
            name,
            scenario.metadata_mode,
            scenario.client_secret,
            &server.token_requests(),
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
        assert_each_carried_one_of(name, &sent_oauth, &bearers(&issued));
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
        ("cs-wrong+secret/0c61d9a4", 2, "invalid_client"),
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
        let mut secrets = forms_of(CLIENT_SECRET);
        secrets.extend(forms_of(client_secret));
        secrets.extend(server.issued());
        assert_nothing_leaked(&format!("discovery {i}"), &secrets, &output, &audit);
        // The secret was used: the token endpoint was asked, with it, and a token it
        // issued went to the backend.
        let requests = server.token_requests();
        assert_eq!(requests.len(), 1, "{i}");
        assert_client_secret_sent(
            &i.to_string(),
            MetadataMode::Normal,
            client_secret,
            &requests,
        );
        let bearers = server
            .resource_requests()
            .iter()
            .filter(|r| r.authorization.is_some())
            .count();
        assert_eq!(bearers, server.issued().len(), "{i}");
    }
}

/// `ahp hook claude-code` at trace level, its log in its own file (`AHP_LOG_FILE`), with
/// its `--audit` file: a bearer interceptor whose backend refuses its token (fail-open,
/// so the chain goes on) and which observes `hook.failure`, then an OAuth interceptor
/// that fails closed — its tokens refused, or its client secret — and is reported to the
/// first. Neither the answer to the harness (stdout, stderr), nor the audit record, nor
/// the log holds a secret, nor does any request a backend was sent but its own token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_in_a_hooks_answer_audit_or_log() {
    let Setup {
        dir, pki, roots, ..
    } = Setup::new("evt_secrets_hook").await;
    let bearer_file = dir.path().join("bearer-token");
    std::fs::write(&bearer_file, BEARER_TOKEN).unwrap();
    let payload = json!({
        "session_id": "sess-secrets", "transcript_path": "/home/u/.claude/projects/p/s.jsonl",
        "cwd": "/repo", "permission_mode": "default", "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"command": "make test"},
        "tool_use_id": "toolu_secrets"
    })
    .to_string();
    for (i, (name, oauth_behaviour, client_secret, issued, logged)) in [
        (
            "hook, 401 twice",
            unauthorized(),
            CLIENT_SECRET,
            2,
            "ahp.hook_call",
        ),
        (
            "hook, wrong client secret",
            Behaviour::NoEffect,
            "cs-wrong+secret/7f20c6b1",
            0,
            "invalid_client",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let server = OAuthServer::start(&pki, CLIENT_SECRET, 3600).await;
        let secret_file = dir.path().join(format!("hook-client-secret-{i}"));
        std::fs::write(&secret_file, client_secret).unwrap();
        let bearer_backend = FaultBackend::start(vec![unauthorized()]).await;
        let oauth_backend = FaultBackend::start(vec![oauth_behaviour]).await;
        let mut document: Value = serde_json::from_str(&registration(&[
            Http::new("com.example.bearer", bearer_backend.url())
                .policy("fail-open")
                .timeout_ms(10_000)
                .token_ref(&format!("file:{}", bearer_file.display())),
            Http::new("com.example.oauth", oauth_backend.url())
                .timeout_ms(10_000)
                .authentication(oauth_binding(&server, &secret_file)),
        ]))
        .unwrap();
        let reports = json!({"events": ["hook.failure"], "mode": "observe",
            "content": {"default": "metadata"}});
        document["hooks"][0]["subscriptions"]
            .as_array_mut()
            .expect("subscriptions")
            .push(reports);
        let reg_file = dir.path().join(format!("hook-registration-{i}.json"));
        std::fs::write(&reg_file, document.to_string()).unwrap();
        let audit = dir.path().join(format!("hook-audit-{i}.jsonl"));
        let audit_arg = audit.display().to_string();
        let roots_arg = roots.path().display().to_string();
        // Timing is not what this tests: room for a compile and a loaded machine.
        let args = [
            "--audit",
            &audit_arg,
            "--trust-roots",
            &roots_arg,
            "--budget-ms",
            "60000",
        ];
        let mut command = hook_command("claude-code", &reg_file, &args);
        command.env("AHP_LOG", TRACE_FILTER);
        let ran = run_command(command, payload.as_bytes(), true).await;

        // A fail-closed denial, answered as Claude Code reads one, its reason on stderr.
        assert_eq!(ran.code, 2, "{name}: {ran:?}");
        let output = &ran.json()["hookSpecificOutput"];
        assert_eq!(output["permissionDecision"], "deny", "{name}: {ran:?}");
        let reason = output["permissionDecisionReason"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(ran.stderr, format!("{reason}\n"), "{name}: {ran:?}");
        // The log is at trace level, and has the failure's details.
        assert!(ran.log.contains("TRACE"), "{name}: {}", ran.log);
        assert!(ran.log.contains(logged), "{name}: {}", ran.log);

        let mut secrets = forms_of(CLIENT_SECRET);
        secrets.extend(forms_of(client_secret));
        secrets.push(BEARER_TOKEN.to_string());
        secrets.extend(server.issued());
        let audited = std::fs::read_to_string(&audit).expect("audit written");
        assert_eq!(audited.lines().count(), 1, "{name}: {audited}");
        let outputs = [
            ("stdout", ran.stdout.as_str()),
            ("stderr", &ran.stderr),
            ("audit", &audited),
            ("log", &ran.log),
        ];
        assert_in_none(name, &secrets, &outputs);
        let issued_tokens = server.issued();
        for (backend, own) in [
            (&bearer_backend, vec![format!("Bearer {BEARER_TOKEN}")]),
            (&oauth_backend, bearers(&issued_tokens)),
        ] {
            for request in backend.requests() {
                assert_not_sent(name, &secrets, &request, &own);
            }
        }

        // Both interceptors failed on their credential, the second closed; the first
        // was told so, with its token.
        let record: Value = serde_json::from_str(&audited).expect("a JSON record");
        let classes: Vec<Option<&str>> = record["interceptors"]
            .as_array()
            .expect("interceptors")
            .iter()
            .map(|entry| entry["failure"]["class"].as_str())
            .collect();
        assert_eq!(classes, [Some("auth-failed"); 2], "{name}: {record}");
        assert_eq!(record["decidedBy"], "synthetic-deny", "{name}: {record}");
        let bearer = [format!("Bearer {BEARER_TOKEN}")];
        assert_each_carried_one_of(name, &bearer_backend.requests(), &bearer);
        // Each refused once and resent the same bytes with the token read again.
        let called = bearer_backend.requests_with_method("hooks/intercept");
        assert_eq!(called.len(), 2, "{name}: called, and resent after its 401");
        let reported = bearer_backend.requests_with_method("hooks/observe");
        assert_eq!(
            reported.len(),
            2,
            "{name}: reported, and resent after its 401"
        );
        assert_eq!(reported[0].body, reported[1].body, "{name}");
        let report = reported[0].json();
        assert_eq!(
            report["params"]["event"]["type"], "hook.failure",
            "{report}"
        );
        // The OAuth interceptor's secret was used, and its tokens went to its backend.
        assert_client_secret_sent(
            name,
            MetadataMode::Normal,
            client_secret,
            &server.token_requests(),
        );
        assert_eq!(issued_tokens.len(), issued, "{name}");
        let sent_oauth = oauth_backend.requests();
        assert_eq!(sent_oauth.len(), issued, "{name}: one request per token");
        assert_each_carried_one_of(name, &sent_oauth, &bearers(&issued_tokens));
    }
}

/// `ahp observe` at trace level to three authenticated observers that each fail: a
/// bearer observer refusing its token, an OAuth observer refusing every token issued to
/// it, and one whose issuer takes the client's credentials in the form
/// (`client_secret_post`) and refuses its client secret. Neither stdout (each observer's
/// result) nor stderr holds a secret, nor any request a backend was sent but its own
/// token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_in_what_observe_prints() {
    let Setup {
        dir, pki, roots, ..
    } = Setup::new("evt_secrets_observe").await;
    let event_file = dir.path().join("observed-event.json");
    std::fs::write(
        &event_file,
        valid_event("tool.after", "evt_secrets_observe"),
    )
    .unwrap();
    let bearer_file = dir.path().join("bearer-token");
    std::fs::write(&bearer_file, BEARER_TOKEN).unwrap();
    let wrong_secret = "cs-wrong+posted/2d8e94fa";
    let refusing = OAuthServer::start(&pki, CLIENT_SECRET, 3600).await;
    let posting = OAuthServer::start(&pki, CLIENT_SECRET, 3600).await;
    posting.set_metadata_mode(MetadataMode::PostOnly);
    let secret_file = dir.path().join("observer-client-secret");
    std::fs::write(&secret_file, CLIENT_SECRET).unwrap();
    let wrong_file = dir.path().join("observer-wrong-secret");
    std::fs::write(&wrong_file, wrong_secret).unwrap();
    let bearer_backend = FaultBackend::start(vec![unauthorized()]).await;
    let refusing_backend = FaultBackend::start(vec![unauthorized()]).await;
    let posting_backend = FaultBackend::start(vec![unauthorized()]).await;
    let observers = [
        (
            "com.example.bearer",
            &bearer_backend,
            json!({"type": "bearer", "tokenRef": format!("file:{}", bearer_file.display())}),
        ),
        (
            "com.example.refusing",
            &refusing_backend,
            oauth_binding(&refusing, &secret_file),
        ),
        (
            "com.example.posting",
            &posting_backend,
            oauth_binding(&posting, &wrong_file),
        ),
    ];
    let hooks: Vec<Value> = observers
        .iter()
        .map(|(id, backend, authentication)| {
            json!({"id": id, "transport": {"type": "http", "url": backend.url()},
                "authentication": authentication,
                "subscriptions": [{"events": ["tool.after"], "mode": "observe",
                    "content": {"default": "metadata"}}]})
        })
        .collect();
    let reg_file = dir.path().join("observers.json");
    let document = json!({"protocolVersion": "draft", "hooks": hooks});
    std::fs::write(&reg_file, document.to_string()).unwrap();
    let output = tokio::process::Command::from(ahp_command())
        .arg("observe")
        .arg("--registration")
        .arg(&reg_file)
        .arg("--event")
        .arg(&event_file)
        .arg("--trust-roots")
        .arg(roots.path())
        .env("AHP_LOG", TRACE_FILTER)
        .kill_on_drop(true)
        .output()
        .await
        .expect("run ahp observe");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Observation is best effort: each observer's failure is its result, and exit 0.
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    let observed: Value = serde_json::from_str(&stdout).expect("one JSON line");
    let results: Vec<(&str, &str)> = observed["observers"]
        .as_array()
        .expect("observers")
        .iter()
        .map(|o| {
            let field = |name: &str| o[name].as_str().unwrap_or_default();
            (field("backend"), field("result"))
        })
        .collect();
    let failed: Vec<(&str, &str)> = observers
        .iter()
        .map(|(id, ..)| (*id, "auth-failed"))
        .collect();
    assert_eq!(results, failed, "{stdout}");
    assert!(stderr.contains("TRACE"), "{stderr}");
    assert!(stderr.contains("invalid_client"), "{stderr}");

    let mut secrets = forms_of(CLIENT_SECRET);
    secrets.extend(forms_of(wrong_secret));
    secrets.push(BEARER_TOKEN.to_string());
    secrets.extend(refusing.issued());
    secrets.extend(posting.issued());
    assert_in_none(
        "observe",
        &secrets,
        &[("stdout", &*stdout), ("stderr", &*stderr)],
    );
    let refused_tokens = bearers(&refusing.issued());
    for (backend, own) in [
        (&bearer_backend, vec![format!("Bearer {BEARER_TOKEN}")]),
        (&refusing_backend, refused_tokens.clone()),
        (&posting_backend, Vec::new()),
    ] {
        for request in backend.requests() {
            assert_not_sent("observe", &secrets, &request, &own);
        }
    }

    // Every secret was used: the bearer observer was sent its token, the refusing one
    // tokens issued for its client secret, and the posting issuer was sent the wrong
    // client secret in the form, so it issued nothing and its observer got nothing.
    let sent_bearer = bearer_backend.requests();
    assert!(
        !sent_bearer.is_empty(),
        "the bearer observer was sent the event"
    );
    let bearer = [format!("Bearer {BEARER_TOKEN}")];
    assert_each_carried_one_of("observe", &sent_bearer, &bearer);
    assert_client_secret_sent(
        "observe, refusing",
        MetadataMode::Normal,
        CLIENT_SECRET,
        &refusing.token_requests(),
    );
    let sent_refusing = refusing_backend.requests();
    assert!(
        !sent_refusing.is_empty(),
        "the OAuth observer was sent the event"
    );
    assert_each_carried_one_of("observe", &sent_refusing, &refused_tokens);
    assert_client_secret_sent(
        "observe, posting",
        MetadataMode::PostOnly,
        wrong_secret,
        &posting.token_requests(),
    );
    assert!(posting.issued().is_empty());
    assert!(
        posting_backend.requests().is_empty(),
        "sent without a token"
    );
}

/// A backend's 401 with no body: it refuses the credential it was sent.
fn unauthorized() -> Behaviour {
    Behaviour::Reply {
        status: 401,
        content_type: None,
        body: Vec::new(),
    }
}

/// The `authentication` of a backend whose tokens `server` issues for the client secret
/// in `secret_file`, by the client credentials flow.
fn oauth_binding(server: &OAuthServer, secret_file: &Path) -> Value {
    json!({
        "type": "oauth", "issuer": server.issuer(), "resource": "https://policy.example.com",
        "clientId": CLIENT_ID, "flow": "client_credentials",
        "clientSecretRef": format!("file:{}", secret_file.display())
    })
}

/// Every form a client secret could be shown in: as it is, form-encoded (as it goes in a
/// `client_secret_post` body) and as [`CLIENT_ID`]'s Basic credential (without `Basic `).
fn forms_of(secret: &str) -> Vec<String> {
    let encoded: String = form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    let basic = basic(CLIENT_ID, secret)["Basic ".len()..].to_string();
    vec![secret.to_string(), encoded, basic]
}

/// The token endpoint was asked, and every request it got carried `secret` as the
/// issuer's `mode` takes it: in the form with the client id and no `Authorization`
/// header (`client_secret_post`), else in a Basic header and not in the form.
fn assert_client_secret_sent(
    name: &str,
    mode: MetadataMode,
    secret: &str,
    requests: &[TokenRequest],
) {
    assert!(!requests.is_empty(), "{name}: the token endpoint was asked");
    for request in requests {
        let field = |name: &str| request.form.get(name).map(String::as_str);
        let (header, form) = match mode {
            MetadataMode::PostOnly => (None, (Some(CLIENT_ID), Some(secret))),
            _ => (Some(basic(CLIENT_ID, secret)), (None, None)),
        };
        assert_eq!(request.authorization, header, "{name}");
        assert_eq!((field("client_id"), field("client_secret")), form, "{name}");
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

/// Each token as the `Authorization` header that carries it.
fn bearers(tokens: &[String]) -> Vec<String> {
    tokens.iter().map(|t| format!("Bearer {t}")).collect()
}

/// Each of `requests` carried exactly one `Authorization` header, one of `headers`: the
/// credential reached the backend it belongs to.
fn assert_each_carried_one_of(name: &str, requests: &[Recorded], headers: &[String]) {
    for request in requests {
        let carried = request.header_values("authorization");
        let known = matches!(carried.as_slice(), [one] if headers.iter().any(|h| h == one));
        assert!(known, "{name}: {carried:?}");
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
    let outputs = [
        ("stdout", &*stdout),
        ("stderr", &*stderr),
        ("audit", &audited),
    ];
    assert_in_none(name, secrets, &outputs);
}

/// None of `secrets` on any line of any of `outputs` (each named, for the message).
fn assert_in_none(name: &str, secrets: &[String], outputs: &[(&str, &str)]) {
    for (what, text) in outputs {
        for secret in secrets {
            let leaked: Vec<&str> = text
                .lines()
                .filter(|l| l.contains(secret.as_str()))
                .collect();
            assert!(leaked.is_empty(), "{name}: a secret in {what}: {leaked:?}");
        }
    }
}
