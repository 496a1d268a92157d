//! A backend registered without a credential that answers 401 (digest §12, conformance
//! H11–H13): the host reads its protected resource metadata, checks it describes this
//! backend, takes a token bound to it from an authorization server the local trust policy
//! holds a client at, and resends the same bytes once, all inside the deadline; anything
//! else is `auth-failed` under the policy, with no secret sent anywhere.

use ahp_host::{DecidedBy, Decision, EffectKind, Interceptor, Interrupt, OAuthClient, Options};
use ahp_tests::oauth_server::{OAuthServer, ResourceRequest, TokenMode, CLIENT_ID};
use ahp_tests::pki::Pki;
use ahp_tests::support::{
    call, event, eventually, only_attempt_results, only_failure, registration, Http, SLACK,
};
use serde_json::json;
use std::time::{Duration, Instant};
use tempfile::NamedTempFile;

const BACKEND: &str = "com.example.discovered";
const CLIENT_SECRET: &str = "cs-91c2d7e4-discovery-never-log-me";
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The authorization server (also the protected resource), a client secret file and
/// trust roots.
struct Fixture {
    server: OAuthServer,
    secret_file: NamedTempFile,
    roots: NamedTempFile,
}

impl Fixture {
    async fn start() -> Fixture {
        let pki = Pki::generate();
        let server = OAuthServer::start(&pki, CLIENT_SECRET, 3600).await;
        let secret_file = NamedTempFile::new().unwrap();
        std::fs::write(secret_file.path(), CLIENT_SECRET).unwrap();
        Fixture {
            server,
            secret_file,
            roots: pki.trust_roots_file(),
        }
    }

    /// This harness's client at the server.
    fn client(&self) -> OAuthClient {
        OAuthClient {
            issuer: self.server.issuer().to_string(),
            client_id: CLIENT_ID.to_string(),
            client_secret_ref: format!("file:{}", self.secret_file.path().display()),
            scopes: vec!["hooks.decide".to_string()],
        }
    }

    /// Serves metadata for `resource` at `path`, listing `servers`.
    fn metadata(&self, path: &str, resource: &str, servers: &[&str]) {
        let document = json!({"resource": resource, "authorization_servers": servers});
        self.server.serve_resource_metadata(path, document);
    }

    /// A bare `Bearer` challenge, and metadata at the path-specific location naming the
    /// server as the issuer.
    fn challenge_without_a_pointer(&self) {
        self.server.set_challenge(Some("Bearer"));
        let path = format!("{WELL_KNOWN}/hooks");
        self.metadata(&path, &self.server.resource_url(), &[self.server.issuer()]);
    }

    async fn interceptor(&self, backend: Http<'_>, clients: Vec<OAuthClient>) -> Interceptor {
        let options = Options {
            trust_roots: Some(self.roots.path().to_path_buf()),
            oauth_clients: clients,
            ..Options::default()
        };
        Interceptor::new(&registration(&[backend]), options)
            .await
            .expect("valid registration")
    }

    fn backend(&self, policy: &'static str) -> Http<'static> {
        Http::new(BACKEND, self.server.resource_url())
            .policy(policy)
            .timeout_ms(2_000)
    }

    /// The `Authorization` header of a request bearing the `n`th token issued.
    fn bearing(&self, n: usize) -> Option<String> {
        Some(format!("Bearer {}", self.server.issued()[n]))
    }

    /// An interceptor of one `policy` backend under `timeout_ms`, challenged without a
    /// pointer, whose metadata comes only after `delay`.
    async fn slow_to_discover(
        &self,
        delay: Duration,
        policy: &'static str,
        timeout_ms: u64,
    ) -> Interceptor {
        self.challenge_without_a_pointer();
        self.server.set_resource_metadata_delay(delay);
        let backend = self.backend(policy).timeout_ms(timeout_ms);
        self.interceptor(backend, vec![self.client()]).await
    }

    /// How many requests to the AHP endpoint went without a credential.
    fn bare_posts(&self) -> usize {
        self.posts()
            .iter()
            .filter(|p| p.authorization.is_none())
            .count()
    }

    /// The requests to the AHP endpoint itself.
    fn posts(&self) -> Vec<ResourceRequest> {
        let requests = self.server.resource_requests();
        requests
            .into_iter()
            .filter(|r| r.path == "/hooks")
            .collect()
    }

    /// The paths of the metadata requests, in order.
    fn metadata_reads(&self) -> Vec<String> {
        let requests = self.server.resource_requests();
        requests
            .into_iter()
            .filter(|r| r.path != "/hooks")
            .map(|r| r.path)
            .collect()
    }
}

/// H11: the challenge names the metadata; the token is bound to the backend's URL; the
/// same bytes go once more; later calls send the learned token at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_challenge_naming_its_metadata_is_answered_with_a_resource_bound_token() {
    let fx = Fixture::start().await;
    let resource = fx.server.resource_url();
    let prm = format!("{}/prm", fx.server.issuer());
    fx.server.set_challenge(Some(&format!(
        r#"Bearer realm="hooks", resource_metadata="{prm}""#
    )));
    // The resource prefers an issuer this harness has no client at: the local policy picks.
    fx.metadata(
        "/prm",
        &resource,
        &["https://as.untrusted.example", fx.server.issuer()],
    );
    let interceptor = fx
        .interceptor(fx.backend("fail-closed"), vec![fx.client()])
        .await;

    let first = call(&interceptor, "evt_discovery_1").await;
    assert_eq!(first.decision, Decision::Allow, "{}", first.record);
    assert_eq!(only_attempt_results(&first), ["unauthorized", "accepted"]);
    let issued = fx.server.issued();
    assert_eq!(issued.len(), 1);
    let posts = fx.posts();
    assert_eq!(posts.len(), 2);
    assert_eq!(
        posts[0].authorization, None,
        "tried without a credential first"
    );
    assert_eq!(posts[1].authorization, fx.bearing(0));
    assert_eq!(posts[0].body, posts[1].body, "the same bytes");
    assert_eq!(fx.metadata_reads(), ["/prm"]);
    let token_requests = fx.server.token_requests();
    assert_eq!(token_requests[0].form["resource"], resource);
    assert_eq!(token_requests[0].form["scope"], "hooks.decide");

    // Learned: the next call carries the token on its first request.
    let second = call(&interceptor, "evt_discovery_2").await;
    assert_eq!(second.decision, Decision::Allow, "{}", second.record);
    assert_eq!(only_attempt_results(&second), ["accepted"]);
    assert_eq!(fx.posts().len(), 3);
    assert_eq!(fx.posts()[2].authorization, posts[1].authorization);
    assert_eq!(fx.metadata_reads().len(), 1);
    assert_eq!(fx.server.token_requests().len(), 1);
    let audit = format!("{}{}", first.record, second.record);
    assert!(!audit.contains(CLIENT_SECRET) && !audit.contains(&issued[0]));
}

/// A backend registered as the bare origin, whose metadata (at the challenge's pointer)
/// names it with the slash pydantic's `AnyHttpUrl` adds: an empty path is `/` (RFC 3986
/// §6.2.3), so the metadata describes this backend and the call goes on with a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_naming_a_bare_origin_with_a_slash_describes_it() {
    let fx = Fixture::start().await;
    let origin = fx.server.issuer().to_string();
    let prm = format!("{origin}/prm");
    let challenge = format!(r#"Bearer resource_metadata="{prm}""#);
    fx.server.set_challenge(Some(&challenge));
    fx.metadata("/prm", &format!("{origin}/"), &[fx.server.issuer()]);
    let backend = Http::new(BACKEND, origin.as_str()).timeout_ms(2_000);
    let interceptor = fx.interceptor(backend, vec![fx.client()]).await;
    let s = call(&interceptor, "evt_bare_origin").await;
    assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    assert_eq!(only_attempt_results(&s), ["unauthorized", "accepted"]);
    let token_requests = fx.server.token_requests();
    assert_eq!(token_requests[0].form["resource"], format!("{origin}/"));
}

/// H12: without `resource_metadata`, the path-specific location, then the root one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_metadata_pointer_the_path_specific_then_the_root_location_is_read() {
    let fx = Fixture::start().await;
    fx.server.set_challenge(Some(r#"Bearer realm="hooks""#));
    // The root location describes the origin.
    let origin = fx.server.issuer().to_string();
    fx.metadata(WELL_KNOWN, &origin, &[fx.server.issuer()]);
    let interceptor = fx
        .interceptor(fx.backend("fail-closed"), vec![fx.client()])
        .await;
    let settled = call(&interceptor, "evt_discovery_root").await;
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    assert_eq!(
        fx.metadata_reads(),
        [format!("{WELL_KNOWN}/hooks"), WELL_KNOWN.to_string()]
    );
    assert_eq!(fx.server.token_requests()[0].form["resource"], origin);

    // A 401 with no challenge header at all is looked up the same way.
    let fx = Fixture::start().await;
    fx.server.set_challenge(None);
    let resource = fx.server.resource_url();
    fx.metadata(
        &format!("{WELL_KNOWN}/hooks"),
        &resource,
        &[fx.server.issuer()],
    );
    let interceptor = fx
        .interceptor(fx.backend("fail-closed"), vec![fx.client()])
        .await;
    let settled = call(&interceptor, "evt_discovery_path").await;
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    assert_eq!(fx.metadata_reads(), [format!("{WELL_KNOWN}/hooks")]);
    assert_eq!(fx.server.token_requests()[0].form["resource"], resource);
}

/// H13: metadata for another resource, no trusted issuer, plain-http metadata, a
/// pointer that leads nowhere, a token refused to this client, or a challenge of another
/// scheme: `auth-failed` under the policy, no token (no token request at all but from a
/// trusted issuer for this very resource), and the request never sent again without a
/// credential.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_that_does_not_fit_is_auth_failed_and_no_secret_goes_anywhere() {
    enum Case {
        OtherResource,
        NoTrustedIssuer,
        PlainHttpPointer,
        PointerToNothing,
        WrongClientSecret,
        UnsetClientSecret,
        BasicChallenge,
    }
    for (case, policy) in [
        (Case::OtherResource, "fail-closed"),
        (Case::NoTrustedIssuer, "fail-open"),
        (Case::PlainHttpPointer, "fail-closed"),
        (Case::PointerToNothing, "fail-closed"),
        (Case::WrongClientSecret, "fail-closed"),
        (Case::UnsetClientSecret, "fail-open"),
        (Case::BasicChallenge, "fail-closed"),
    ] {
        let fx = Fixture::start().await;
        let resource = fx.server.resource_url();
        let issuer = fx.server.issuer().to_string();
        let pointer = |url: &str| format!(r#"Bearer resource_metadata="{url}""#);
        let (label, challenge) = match case {
            Case::OtherResource => {
                fx.metadata("/prm", &format!("{resource}/other"), &[&issuer]);
                ("other resource", pointer(&format!("{issuer}/prm")))
            }
            Case::NoTrustedIssuer => {
                fx.metadata("/prm", &resource, &["https://as.untrusted.example"]);
                ("no trusted issuer", pointer(&format!("{issuer}/prm")))
            }
            Case::PlainHttpPointer => {
                fx.metadata("/prm", &resource, &[&issuer]);
                let plain = issuer.replacen("https://", "http://", 1);
                ("plain http", pointer(&format!("{plain}/prm")))
            }
            Case::PointerToNothing => {
                // Served at the well-known location, but the pointer is authoritative.
                fx.metadata(&format!("{WELL_KNOWN}/hooks"), &resource, &[&issuer]);
                ("pointer to nothing", pointer(&format!("{issuer}/missing")))
            }
            Case::WrongClientSecret => {
                fx.metadata("/prm", &resource, &[&issuer]);
                std::fs::write(fx.secret_file.path(), "cs-not-this-clients-secret").unwrap();
                ("wrong client secret", pointer(&format!("{issuer}/prm")))
            }
            Case::UnsetClientSecret => {
                fx.metadata("/prm", &resource, &[&issuer]);
                ("unset client secret", pointer(&format!("{issuer}/prm")))
            }
            Case::BasicChallenge => {
                fx.metadata(&format!("{WELL_KNOWN}/hooks"), &resource, &[&issuer]);
                ("basic", r#"Basic realm="hooks""#.to_string())
            }
        };
        let mut client = fx.client();
        if let Case::UnsetClientSecret = case {
            client.client_secret_ref = "env:AHP_E2E_DISCOVERY_SECRET_UNSET".into();
        }
        let token_requests = match case {
            Case::WrongClientSecret => 1,
            _ => 0,
        };
        fx.server.set_challenge(Some(&challenge));
        let interceptor = fx.interceptor(fx.backend(policy), vec![client]).await;
        let settled = call(&interceptor, "evt_discovery_refused").await;
        match policy {
            "fail-open" => assert_eq!(settled.decision, Decision::Allow, "{label}"),
            _ => {
                assert_eq!(settled.decision, Decision::Deny, "{label}");
                assert_eq!(settled.decided_by, DecidedBy::SyntheticDeny, "{label}");
            }
        }
        // A failed discovery is the resend's attempt, which sent nothing (as any failed
        // acquisition); a challenge the host cannot answer leaves the 401's record alone.
        let (expected, tried) = match case {
            Case::BasicChallenge => {
                assert!(fx.metadata_reads().is_empty(), "{label}: no discovery");
                (
                    json!({"class": "auth-failed", "phase": "await-response", "httpStatus": 401}),
                    vec!["unauthorized"],
                )
            }
            // The token's own failure, as for an `oauth` binding.
            Case::UnsetClientSecret => (
                json!({"class": "auth-failed", "phase": "acquire-credential",
                       "detail": "unresolved"}),
                vec!["unauthorized", "auth-failed"],
            ),
            _ => (
                json!({"class": "auth-failed", "phase": "acquire-credential",
                       "detail": "acquisition-failed"}),
                vec!["unauthorized", "auth-failed"],
            ),
        };
        assert_eq!(
            only_failure(&settled),
            expected,
            "{label}: {}",
            settled.record
        );
        assert_eq!(fx.server.token_requests().len(), token_requests, "{label}");
        assert!(fx.server.issued().is_empty(), "{label}: no token issued");
        assert_eq!(
            fx.posts().len(),
            1,
            "{label}: never resent without a credential"
        );
        assert_eq!(only_attempt_results(&settled), tried, "{label}");
        if let Case::BasicChallenge = case {
            continue;
        }
        // A failed discovery pauses: the next call goes without a credential and its
        // 401 is not followed, so broken metadata costs no lookup per call.
        let reads = fx.metadata_reads().len();
        let next = call(&interceptor, "evt_discovery_paused").await;
        assert_eq!(
            only_failure(&next),
            json!({"class": "auth-failed", "phase": "await-response", "httpStatus": 401}),
            "{label}: {}",
            next.record
        );
        assert_eq!(fx.posts().len(), 2, "{label}");
        assert_eq!(fx.posts()[1].authorization, None, "{label}");
        assert_eq!(
            fx.metadata_reads().len(),
            reads,
            "{label}: not looked up again"
        );
        assert_eq!(fx.server.token_requests().len(), token_requests, "{label}");
    }
}

/// Calls challenged at once share one discovery and one token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_challenged_calls_share_one_discovery() {
    let fx = Fixture::start().await;
    // Slow enough that every call is challenged before the first discovery ends.
    let interceptor = fx
        .slow_to_discover(Duration::from_secs(1), "fail-closed", 5_000)
        .await;
    let calls: Vec<_> = (0..8)
        .map(|i| {
            let interceptor = interceptor.clone();
            tokio::spawn(async move { call(&interceptor, &format!("evt_together_{i}")).await })
        })
        .collect();
    for task in calls {
        let settled = task.await.expect("the call's task");
        assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    }
    assert_eq!(fx.metadata_reads().len(), 1, "one discovery");
    assert_eq!(fx.server.token_requests().len(), 1, "one token");
    let bare = fx.bare_posts();
    assert!(bare >= 2, "calls were challenged together: {bare}");
}

/// A call interrupted while it waits for the shared discovery it started leaves it to
/// the others: the discovery goes on, and the other call, waiting for it, gets the token
/// it brings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_wait_leaves_the_shared_discovery_to_the_others() {
    let fx = Fixture::start().await;
    let interceptor = fx
        .slow_to_discover(Duration::from_secs(1), "fail-closed", 5_000)
        .await;
    let interrupt = Interrupt::new();
    let cut = {
        let (interceptor, interrupt) = (interceptor.clone(), interrupt.clone());
        tokio::spawn(async move {
            let event = event("evt_shared_cut");
            interceptor
                .intercept_with(&event, &[EffectKind::Deny], None, &interrupt)
                .await
        })
    };
    // The call to be interrupted starts the shared discovery: its metadata read is out
    // before the other call is challenged.
    let started = eventually(Duration::from_secs(5), || fx.metadata_reads().len() == 1);
    assert!(started.await, "the first call started the discovery");
    let waiting = {
        let interceptor = interceptor.clone();
        tokio::spawn(async move { call(&interceptor, "evt_shared_waits").await })
    };
    // The other call waits for the discovery in flight (1 s of metadata delay).
    tokio::time::sleep(Duration::from_millis(200)).await;
    interrupt.interrupt();
    let cut = cut.await.expect("the call's task").expect("settled");
    assert_eq!(cut.decided_by, DecidedBy::Interrupted, "{}", cut.record);
    let waited = waiting.await.expect("the call's task");
    assert_eq!(waited.decision, Decision::Allow, "{}", waited.record);
    assert_eq!(fx.metadata_reads().len(), 1, "one discovery");
    assert_eq!(fx.server.token_requests().len(), 1, "one token");
}

/// A learned binding whose metadata cannot be read again stays in use, and a backend
/// refusing its tokens does not have the metadata looked up on every call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learned_binding_outlives_metadata_that_cannot_be_read_again() {
    let fx = Fixture::start().await;
    fx.challenge_without_a_pointer();
    let interceptor = fx
        .interceptor(fx.backend("fail-closed"), vec![fx.client()])
        .await;
    let first = call(&interceptor, "evt_learned_once").await;
    assert_eq!(first.decision, Decision::Allow, "{}", first.record);
    fx.server
        .withdraw_resource_metadata(&format!("{WELL_KNOWN}/hooks"));
    fx.server.withdraw_resource_metadata(WELL_KNOWN);
    for (i, reads) in [(2, 3), (3, 3)] {
        fx.server.revoke_issued();
        let settled = call(&interceptor, &format!("evt_learned_revoked_{i}")).await;
        assert_eq!(settled.decision, Decision::Allow, "{i}: {}", settled.record);
        assert_eq!(fx.server.issued().len(), i, "{i}: a fresh token each time");
        // The re-reading runs behind the call: wait for what it reads.
        let until = Instant::now() + Duration::from_secs(5);
        while fx.metadata_reads().len() < reads && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            fx.metadata_reads().len(),
            reads,
            "{i}: {:?}",
            fx.metadata_reads()
        );
    }
}

/// A learned token refused later: one fresh token resends the same bytes, and the
/// metadata is read again behind the call (the resource may have moved).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learned_token_refused_later_is_replaced_and_the_metadata_read_again() {
    let fx = Fixture::start().await;
    fx.challenge_without_a_pointer();
    let interceptor = fx
        .interceptor(fx.backend("fail-closed"), vec![fx.client()])
        .await;
    let first = call(&interceptor, "evt_learned").await;
    assert_eq!(first.decision, Decision::Allow, "{}", first.record);
    assert_eq!(fx.metadata_reads().len(), 1);
    fx.server.revoke_issued();
    let second = call(&interceptor, "evt_learned_revoked").await;
    assert_eq!(second.decision, Decision::Allow, "{}", second.record);
    assert_eq!(only_attempt_results(&second), ["unauthorized", "accepted"]);
    let issued = fx.server.issued();
    assert_eq!(issued.len(), 2);
    let posts = fx.posts();
    let bearers: Vec<_> = posts[2..].iter().map(|p| p.authorization.clone()).collect();
    assert_eq!(bearers, [fx.bearing(0), fx.bearing(1)]);
    assert_eq!(posts[2].body, posts[3].body);
    let until = Instant::now() + Duration::from_secs(5);
    while fx.metadata_reads().len() < 2 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(fx.metadata_reads().len(), 2, "read again behind the call");
}

/// A backend that refuses every token of its learned binding pauses that binding's
/// acquisitions (1 s, doubling), as an `oauth` binding's: its calls fail at once as a
/// renewal that failed, rather than each asking for two tokens. Each is `auth-failed`
/// under its policy, and no call goes without a token. So too with an issuer that hands
/// out the same still-valid token at every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_refusing_every_learned_token_pauses_its_acquisitions() {
    for mode in [TokenMode::Issue, TokenMode::Same] {
        let fx = Fixture::start().await;
        fx.server.set_token_mode(mode.clone());
        fx.challenge_without_a_pointer();
        let interceptor = fx
            .interceptor(fx.backend("fail-closed"), vec![fx.client()])
            .await;
        let first = call(&interceptor, "evt_learned_then_refused").await;
        assert_eq!(
            first.decision,
            Decision::Allow,
            "{mode:?}: {}",
            first.record
        );
        fx.server.refuse_every_token();
        let before = fx.server.issued().len();
        for i in 0..10 {
            let s = call(&interceptor, &format!("evt_refused_{i}")).await;
            assert_eq!(s.decision, Decision::Deny, "{mode:?} {i}: {}", s.record);
            assert_eq!(only_failure(&s)["class"], "auth-failed", "{mode:?} {i}");
        }
        // The learned token and one fresh one refused, then a pause of 1 s the next
        // calls are quicker than; on a loaded machine a third (and a pause of 2 s), a
        // fourth at most. Twenty without the pause.
        let requests = fx.server.issued().len() - before;
        assert!(
            (1..=3).contains(&requests),
            "{mode:?}: {requests} tokens issued"
        );
        let posts = fx.posts();
        assert!(
            posts[2..].iter().all(|p| p.authorization.is_some()),
            "nothing went without one"
        );
    }
}

/// Metadata that never comes: the call settles at its deadline, which discovery counts
/// against, by policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_runs_inside_the_deadline() {
    let fx = Fixture::start().await;
    let interceptor = fx
        .slow_to_discover(Duration::from_secs(10), "fail-open", 1_000)
        .await;
    let started = Instant::now();
    let settled = call(&interceptor, "evt_discovery_slow").await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(1_000) + SLACK,
        "settled after {took:?}"
    );
    assert_eq!(settled.decision, Decision::Allow);
    // As a token endpoint's deadline (oauth.rs).
    assert_eq!(
        only_failure(&settled),
        json!({"class": "auth-failed", "phase": "acquire-credential", "detail": "deadline-exceeded"}),
        "{}",
        settled.record
    );
    assert!(fx.server.token_requests().is_empty());
    assert_eq!(fx.posts().len(), 1);

    // The discovery goes on behind the call that gave up: the next call waits for the
    // same one (again until its own deadline) rather than looking up anew.
    let next = call(&interceptor, "evt_discovery_joins").await;
    assert_eq!(
        only_failure(&next)["detail"],
        "deadline-exceeded",
        "{}",
        next.record
    );
    assert_eq!(fx.metadata_reads().len(), 1, "one lookup for both calls");
    assert_eq!(fx.posts().len(), 1, "nothing sent bare again");
}

/// No trust policy: the 401 is `auth-failed` and nothing is looked up or resent. A
/// backend whose registration names a credential never discovers another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_client_or_with_a_binding_a_challenge_is_never_followed() {
    let fx = Fixture::start().await;
    let resource = fx.server.resource_url();
    fx.server.set_challenge(Some(
        r#"Bearer resource_metadata="https://127.0.0.1:1/prm""#,
    ));
    fx.metadata(
        &format!("{WELL_KNOWN}/hooks"),
        &resource,
        &[fx.server.issuer()],
    );
    let interceptor = fx.interceptor(fx.backend("fail-closed"), Vec::new()).await;
    let settled = call(&interceptor, "evt_no_policy").await;
    assert_eq!(settled.decided_by, DecidedBy::SyntheticDeny);
    assert_eq!(only_failure(&settled)["httpStatus"], 401);
    assert_eq!(fx.posts().len(), 1);

    let bound = fx
        .backend("fail-closed")
        .token_ref("env:AHP_E2E_DISCOVERY_TOKEN");
    std::env::set_var("AHP_E2E_DISCOVERY_TOKEN", "tok-not-issued-by-the-server");
    fx.server.set_challenge(Some("Bearer"));
    let interceptor = fx.interceptor(bound, vec![fx.client()]).await;
    let settled = call(&interceptor, "evt_bound").await;
    assert_eq!(settled.decided_by, DecidedBy::SyntheticDeny);
    assert_eq!(only_failure(&settled)["httpStatus"], 401);
    assert!(
        fx.metadata_reads().is_empty(),
        "no discovery for a bound backend"
    );
    assert!(fx.server.token_requests().is_empty());
    let posts = fx.posts();
    assert_eq!(
        posts.len(),
        3,
        "the bound backend: two requests, both with its token"
    );
    assert!(posts[1..]
        .iter()
        .all(|p| p.authorization.as_deref() == Some("Bearer tok-not-issued-by-the-server")));
}

/// An observer registered without a credential: its 401 is answered the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observers_challenge_is_answered_too() {
    let fx = Fixture::start().await;
    fx.challenge_without_a_pointer();
    let reg = json!({"protocolVersion": "draft", "hooks": [{
        "id": BACKEND, "transport": {"type": "http", "url": fx.server.resource_url()},
        "subscriptions": [{"events": ["tool.before"], "mode": "observe",
                           "content": {"default": "metadata"}}]
    }]})
    .to_string();
    let options = Options {
        trust_roots: Some(fx.roots.path().to_path_buf()),
        oauth_clients: vec![fx.client()],
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg, options)
        .await
        .expect("valid registration");
    let observed = interceptor
        .observe(&event("evt_observed_discovery"), None)
        .await
        .expect("valid event");
    let results: Vec<&str> = observed
        .observers
        .iter()
        .map(|o| o.result.as_str())
        .collect();
    assert_eq!(results, ["delivered"]);
    let posts = fx.posts();
    assert_eq!(posts.len(), 2);
    assert_eq!(posts[0].body, posts[1].body);
    assert_eq!(posts[1].authorization, fx.bearing(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_trust_policy_is_refused_at_setup_naming_the_field() {
    let fx = Fixture::start().await;
    let mut client = fx.client();
    client.client_secret_ref = "vault:hooks".into();
    let options = Options {
        oauth_clients: vec![client],
        ..Options::default()
    };
    let refused = Interceptor::new(&registration(&[fx.backend("fail-closed")]), options).await;
    let error = refused.err().expect("refused").to_string();
    assert!(
        error.contains("oauth_clients[0]: `clientSecretRef`"),
        "{error}"
    );
}

/// A plain-http backend's challenge is never answered with a token: the token would
/// cross the network in the clear, and anyone on the way could have sent the challenge.
/// Plain http allowed for events is not consent to minting credentials for it; the call
/// is `auth-failed` under its policy, and nothing is asked of the authorization server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_backend_is_never_sent_a_discovered_token() {
    use ahp_tests::fault_backend::{Behaviour, FaultBackend};
    let fx = Fixture::start().await;
    let prm = format!("{}/prm", fx.server.issuer());
    let challenge = format!(
        "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer resource_metadata=\"{prm}\"\r\ncontent-length: 0\r\n\r\n"
    );
    let behaviours = vec![
        Behaviour::RawThenClose(challenge.into_bytes()),
        Behaviour::NoEffect,
    ];
    let backend = FaultBackend::start(behaviours).await;
    fx.metadata("/prm", &backend.url(), &[fx.server.issuer()]);
    let http = Http::new(BACKEND, backend.url())
        .policy("fail-closed")
        .timeout_ms(2_000);
    let interceptor = fx.interceptor(http, vec![fx.client()]).await;
    let settled = call(&interceptor, "evt_plain_http").await;
    assert_eq!(settled.decision, Decision::Deny, "{}", settled.record);
    assert_eq!(settled.decided_by, DecidedBy::SyntheticDeny);
    assert_eq!(
        only_failure(&settled),
        json!({"class": "auth-failed", "phase": "await-response", "httpStatus": 401})
    );
    assert_eq!(only_attempt_results(&settled), ["unauthorized"]);
    assert!(fx.server.token_requests().is_empty());
    assert!(fx.metadata_reads().is_empty());
    assert_eq!(backend.requests().len(), 1);
}
