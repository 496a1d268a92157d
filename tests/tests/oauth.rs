//! OAuth 2.0 client credentials against a loopback HTTPS authorization server: discovery,
//! one token request for many calls, single flight, refresh before expiry, everything
//! inside the subscription's deadline, one re-acquisition after a 401, and never a
//! request without the credential.

use ahp_host::{DecidedBy, Decision, EffectKind, Interceptor, Interrupt, Options};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::oauth_server::{basic, MetadataMode, OAuthServer, TokenMode, CLIENT_ID};
use ahp_tests::pki::Pki;
use ahp_tests::support::{call, event, eventually, only_failure, record_json, registration, Http};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tempfile::NamedTempFile;

const BACKEND: &str = "com.example.oauth";
const RESOURCE: &str = "https://policy.example.com/hooks";
const CLIENT_SECRET: &str = "cs-7d41e0b9-never-log-me";

/// An authorization server, a client secret file, trust roots, and an AHP backend.
struct Fixture {
    server: OAuthServer,
    backend: FaultBackend,
    secret_file: NamedTempFile,
    roots: NamedTempFile,
}

impl Fixture {
    async fn start(expires_in: u64, script: Vec<Behaviour>) -> Fixture {
        let pki = Pki::generate();
        let server = OAuthServer::start(&pki, CLIENT_SECRET, expires_in).await;
        let secret_file = NamedTempFile::new().unwrap();
        std::fs::write(secret_file.path(), format!("{CLIENT_SECRET}\n")).unwrap();
        Fixture {
            server,
            backend: FaultBackend::start(script).await,
            secret_file,
            roots: pki.trust_roots_file(),
        }
    }

    fn binding(&self) -> Value {
        json!({
            "type": "oauth", "issuer": self.server.issuer(), "resource": RESOURCE,
            "clientId": CLIENT_ID, "flow": "client_credentials", "scopes": ["hooks.decide"],
            "clientSecretRef": format!("file:{}", self.secret_file.path().display())
        })
    }

    async fn interceptor(&self, policy: &str, timeout_ms: u64) -> Interceptor {
        let reg = registration(&[Http::new(BACKEND, self.backend.url())
            .policy(policy)
            .timeout_ms(timeout_ms)
            .authentication(self.binding())]);
        let options = Options {
            trust_roots: Some(self.roots.path().to_path_buf()),
            ..Options::default()
        };
        Interceptor::new(&reg, options)
            .await
            .expect("valid registration")
    }

    /// The bearer token on each request the backend received.
    fn bearers(&self) -> Vec<String> {
        self.backend
            .requests()
            .iter()
            .map(|r| {
                let values = r.header_values("authorization");
                assert_eq!(values.len(), 1, "exactly one Authorization header");
                values[0]
                    .strip_prefix("Bearer ")
                    .expect("a bearer token")
                    .to_string()
            })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_request_serves_many_calls() {
    let fx = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
    let interceptor = fx.interceptor("fail-closed", 2_000).await;
    for i in 0..5 {
        let s = call(&interceptor, &format!("evt_reuse_{i}")).await;
        assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    }
    let concurrent: Vec<_> = (0..5)
        .map(|i| {
            let interceptor = interceptor.clone();
            tokio::spawn(async move { call(&interceptor, &format!("evt_reuse_c{i}")).await })
        })
        .collect();
    for task in concurrent {
        assert_eq!(task.await.unwrap().decision, Decision::Allow);
    }
    let requests = fx.server.token_requests();
    assert_eq!(requests.len(), 1, "one token for ten calls");
    let token = &fx.server.issued()[0];
    assert_eq!(fx.bearers(), vec![token.clone(); 10]);
    // The request: client credentials, bound to the resource, only the configured scope,
    // the secret only in the Basic header.
    let form = &requests[0].form;
    assert_eq!(form["grant_type"], "client_credentials");
    assert_eq!(form["resource"], RESOURCE);
    assert_eq!(form["scope"], "hooks.decide");
    assert!(!form.contains_key("client_secret"));
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some(basic(CLIENT_ID, CLIENT_SECRET).as_str())
    );
    assert_eq!(
        fx.server.metadata_requests(),
        ["/.well-known/oauth-authorization-server"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openid_configuration_is_the_fallback_for_discovery() {
    let fx = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
    fx.server.set_metadata_mode(MetadataMode::OpenIdOnly);
    let interceptor = fx.interceptor("fail-closed", 2_000).await;
    let s = call(&interceptor, "evt_oidc").await;
    assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    assert_eq!(
        fx.server.metadata_requests(),
        [
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_share_one_acquisition() {
    let fx = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
    fx.server.set_token_mode(TokenMode::Slow(
        Duration::from_millis(300),
        Box::new(TokenMode::Issue),
    ));
    let interceptor = fx.interceptor("fail-closed", 3_000).await;
    let calls: Vec<_> = (0..8)
        .map(|i| {
            let interceptor = interceptor.clone();
            tokio::spawn(async move { call(&interceptor, &format!("evt_flight_{i}")).await })
        })
        .collect();
    for task in calls {
        let s = task.await.unwrap();
        assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    }
    assert_eq!(fx.server.token_requests().len(), 1, "single flight");
    assert_eq!(fx.bearers().len(), 8);
}

/// One issuer's token endpoint that never answers holds up no other issuer's tokens: no
/// lock is held across an acquisition. The stuck backend fails open at its deadline, call
/// after call (its one token request still in flight), and the next backend in the chain
/// gets its token from its own issuer at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_token_endpoint_holds_up_no_other_issuers_tokens() {
    let stuck = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
    stuck.server.set_token_mode(TokenMode::Slow(
        Duration::from_secs(60),
        Box::new(TokenMode::Issue),
    ));
    let healthy = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
    let roots = NamedTempFile::new().unwrap();
    let both = [&stuck, &healthy]
        .map(|fx| std::fs::read_to_string(fx.roots.path()).unwrap())
        .concat();
    std::fs::write(roots.path(), both).unwrap();
    let reg = registration(&[
        Http::new("com.example.stuck", stuck.backend.url())
            .policy("fail-open")
            .timeout_ms(300)
            .authentication(stuck.binding()),
        Http::new(BACKEND, healthy.backend.url())
            .policy("fail-closed")
            .timeout_ms(5_000)
            .authentication(healthy.binding()),
    ]);
    let options = Options {
        trust_roots: Some(roots.path().to_path_buf()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg, options).await.unwrap();
    // Were the healthy issuer's acquisition held behind the stuck one (60 s), its
    // backend would fail closed at its 5 s deadline: a denial.
    for i in 0..3 {
        let s = call(&interceptor, &format!("evt_two_issuers_{i}")).await;
        assert_eq!(s.decision, Decision::Allow, "{i}: {}", s.record);
        let record = record_json(&s);
        assert_eq!(
            record["interceptors"][0]["outcome"], "failed-open",
            "{record}"
        );
        assert_eq!(
            record["interceptors"][1]["outcome"], "no-effect",
            "{record}"
        );
    }
    assert_eq!(stuck.server.token_requests().len(), 1, "still in flight");
    assert_eq!(healthy.server.token_requests().len(), 1);
    assert_eq!(healthy.bearers().len(), 3);
    assert!(stuck.backend.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_one_waiter_leaves_the_shared_acquisition_to_the_others() {
    let fx = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
    fx.server.set_token_mode(TokenMode::Slow(
        Duration::from_millis(400),
        Box::new(TokenMode::Issue),
    ));
    let interceptor = fx.interceptor("fail-open", 3_000).await;
    let interrupt = Interrupt::new();
    let cancelled = {
        let (interceptor, interrupt) = (interceptor.clone(), interrupt.clone());
        tokio::spawn(async move {
            interceptor
                .intercept_with(
                    &event("evt_cancelled"),
                    &[EffectKind::Deny],
                    None,
                    &interrupt,
                )
                .await
                .unwrap()
        })
    };
    // The call to be cancelled starts the shared acquisition: its token request is out
    // before the other call joins it.
    let started = eventually(Duration::from_secs(5), || {
        fx.server.token_requests().len() == 1
    });
    assert!(started.await, "the first call asked for a token");
    let other = {
        let interceptor = interceptor.clone();
        tokio::spawn(async move { call(&interceptor, "evt_other").await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    interrupt.interrupt();
    let cancelled = cancelled.await.unwrap();
    assert_eq!(cancelled.decision, Decision::Deny, "{}", cancelled.record);
    assert_eq!(cancelled.decided_by, DecidedBy::Interrupted);
    let other = other.await.unwrap();
    assert_eq!(other.decision, Decision::Allow, "{}", other.record);
    assert_eq!(fx.server.token_requests().len(), 1);
    let sent = fx.backend.requests();
    assert_eq!(sent.len(), 1, "the cancelled call never sends");
    assert_eq!(sent[0].json()["params"]["event"]["id"], "evt_other");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_refreshed_in_the_background_before_it_expires() {
    // Lifetime 8 s: refreshed after 6 s, treated as expired after 7.2 s.
    let fx = Fixture::start(8, vec![Behaviour::NoEffect]).await;
    let interceptor = fx.interceptor("fail-closed", 2_000).await;
    assert_eq!(call(&interceptor, "evt_r1").await.decision, Decision::Allow);
    let first = fx.server.token_requests()[0].at;
    tokio::time::sleep_until((first + Duration::from_millis(6_100)).into()).await;
    // Still valid: used at once, and a refresh starts behind it, which takes 0.8 s (done
    // before the first token is treated as expired): a refresh the call waited for
    // would have given it the new token.
    fx.server.set_token_mode(TokenMode::Slow(
        Duration::from_millis(800),
        Box::new(TokenMode::Issue),
    ));
    assert_eq!(call(&interceptor, "evt_r2").await.decision, Decision::Allow);
    let issued = fx.server.issued();
    assert_eq!(issued.len(), 1, "the call waited for the refresh");
    assert_eq!(fx.bearers(), [issued[0].clone(), issued[0].clone()]);
    assert!(fx.server.wait_for_issued(2, Duration::from_secs(2)).await);
    // The new token is in the cache once its response has arrived: from then on every
    // call carries it, and until then the still-valid first one.
    let until = Instant::now() + Duration::from_secs(2);
    let issued = fx.server.issued();
    while fx.bearers().last() != Some(&issued[1]) && Instant::now() < until {
        assert_eq!(call(&interceptor, "evt_r3").await.decision, Decision::Allow);
    }
    let bearers = fx.bearers();
    assert_eq!(
        bearers.last(),
        Some(&issued[1]),
        "the refreshed token is used"
    );
    assert!(
        bearers[..bearers.len() - 1].iter().all(|b| b == &issued[0]),
        "{bearers:?}"
    );
    assert_eq!(fx.server.token_requests().len(), 2, "one refresh");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_replaced_on_demand_and_a_failed_refresh_is_its_own_phase() {
    // Lifetime 1 s: expired after 0.9 s.
    let fx = Fixture::start(1, vec![Behaviour::NoEffect]).await;
    let interceptor = fx.interceptor("fail-closed", 2_000).await;
    assert_eq!(call(&interceptor, "evt_e1").await.decision, Decision::Allow);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(call(&interceptor, "evt_e2").await.decision, Decision::Allow);
    let issued = fx.server.issued();
    assert_eq!(fx.bearers(), issued, "the expired token is never sent");
    assert_eq!(issued.len(), 2);

    tokio::time::sleep(Duration::from_millis(1_000)).await;
    fx.server.set_token_mode(TokenMode::Status(503));
    let s = call(&interceptor, "evt_e3").await;
    assert_eq!(s.decided_by, DecidedBy::SyntheticDeny, "{}", s.record);
    assert_eq!(
        only_failure(&s),
        json!({"class": "auth-failed", "phase": "refresh-credential", "detail": "refresh-failed"})
    );
    assert_eq!(
        fx.backend.requests().len(),
        2,
        "nothing sent after the failure"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_token_endpoint_settles_at_the_deadline_under_both_policies() {
    for (policy, decision) in [
        ("fail-closed", Decision::Deny),
        ("fail-open", Decision::Allow),
    ] {
        let fx = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
        fx.server.set_token_mode(TokenMode::Slow(
            Duration::from_secs(5),
            Box::new(TokenMode::Issue),
        ));
        let interceptor = fx.interceptor(policy, 300).await;
        let started = Instant::now();
        let s = call(&interceptor, "evt_slow_token").await;
        let took = started.elapsed();
        assert_eq!(s.decision, decision, "{policy}: {}", s.record);
        assert_eq!(
            only_failure(&s),
            json!({"class": "auth-failed", "phase": "acquire-credential", "detail": "deadline-exceeded"}),
            "{policy}"
        );
        assert!(
            took >= Duration::from_millis(290) && took < Duration::from_secs(2),
            "{policy}: settled after {took:?}"
        );
        assert!(fx.backend.requests().is_empty(), "{policy}: nothing sent");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_discovery_or_token_endpoint_is_auth_failed_and_sends_nothing() {
    let cases: [(&str, Option<MetadataMode>, Option<TokenMode>); 4] = [
        ("mismatched issuer", Some(MetadataMode::WrongIssuer), None),
        ("token endpoint 500", None, Some(TokenMode::Status(500))),
        ("token endpoint 400", None, Some(TokenMode::Status(400))),
        ("malformed token response", None, Some(TokenMode::Malformed)),
    ];
    for (name, metadata, token) in cases {
        let fx = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
        if let Some(mode) = metadata {
            fx.server.set_metadata_mode(mode);
        }
        if let Some(mode) = token {
            fx.server.set_token_mode(mode);
        }
        let interceptor = fx.interceptor("fail-closed", 2_000).await;
        let s = call(&interceptor, "evt_bad_as").await;
        assert_eq!(
            s.decided_by,
            DecidedBy::SyntheticDeny,
            "{name}: {}",
            s.record
        );
        assert_eq!(
            only_failure(&s),
            json!({"class": "auth-failed", "phase": "acquire-credential", "detail": "acquisition-failed"}),
            "{name}"
        );
        assert!(fx.backend.requests().is_empty(), "{name}: nothing sent");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_client_secret_is_auth_failed() {
    let fx = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
    std::fs::write(fx.secret_file.path(), "not-the-secret").unwrap();
    let interceptor = fx.interceptor("fail-open", 2_000).await;
    let s = call(&interceptor, "evt_bad_secret").await;
    assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    assert_eq!(
        only_failure(&s),
        json!({"class": "auth-failed", "phase": "acquire-credential", "detail": "acquisition-failed"})
    );
    // The token endpoint was asked, with the secret the file holds, and refused it.
    let requests = fx.server.token_requests();
    assert_eq!(requests.len(), 1, "asked once");
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some(basic(CLIENT_ID, "not-the-secret").as_str())
    );
    assert!(fx.server.issued().is_empty());
    assert!(fx.backend.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_drops_the_token_and_one_fresh_token_resends_the_same_bytes() {
    let fx = Fixture::start(3600, vec![Behaviour::unauthorized(), Behaviour::NoEffect]).await;
    let interceptor = fx.interceptor("fail-closed", 2_000).await;
    let s = call(&interceptor, "evt_401_once").await;
    assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    let issued = fx.server.issued();
    assert_eq!(issued.len(), 2, "one re-acquisition");
    assert_eq!(fx.bearers(), issued);
    let sent = fx.backend.requests();
    assert_eq!(sent[0].body, sent[1].body, "the same bytes");
    // The fresh token is cached for the next call.
    assert_eq!(
        call(&interceptor, "evt_401_next").await.decision,
        Decision::Allow
    );
    assert_eq!(fx.server.issued().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_401s_are_auth_failed_and_no_request_goes_without_a_token() {
    let fx = Fixture::start(3600, vec![Behaviour::unauthorized()]).await;
    let interceptor = fx.interceptor("fail-closed", 2_000).await;
    let s = call(&interceptor, "evt_401_twice").await;
    assert_eq!(s.decided_by, DecidedBy::SyntheticDeny, "{}", s.record);
    assert_eq!(only_failure(&s)["class"], "auth-failed");
    assert_eq!(only_failure(&s)["httpStatus"], 401);
    assert_eq!(
        fx.backend.requests().len(),
        2,
        "never more than one re-acquisition"
    );
    assert_eq!(fx.bearers(), fx.server.issued());
}

/// An observer's 401 is handled as an interceptor's: the token leaves the cache, one
/// fresh token resends the same bytes, and a second 401 is `auth-failed`; a later
/// notification does not go out with the revoked token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observers_401_drops_the_token_and_one_fresh_token_resends_the_same_bytes() {
    let accepted = Behaviour::Reply {
        status: 202,
        content_type: None,
        body: Vec::new(),
    };
    let script = vec![
        Behaviour::unauthorized(),
        accepted.clone(),
        Behaviour::unauthorized(),
    ];
    let fx = Fixture::start(3600, script).await;
    let reg = json!({"protocolVersion": "draft", "hooks": [{
        "id": BACKEND, "transport": {"type": "http", "url": fx.backend.url()},
        "authentication": fx.binding(),
        "subscriptions": [{"events": ["tool.before"], "mode": "observe",
                           "content": {"default": "metadata"}}]
    }]})
    .to_string();
    let options = Options {
        trust_roots: Some(fx.roots.path().to_path_buf()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg, options)
        .await
        .expect("valid registration");
    let results = async |id: &str| -> Vec<String> {
        let observed = interceptor
            .observe(&event(id), None)
            .await
            .expect("valid event");
        observed
            .observers
            .iter()
            .map(|o| o.result.as_str().to_owned())
            .collect()
    };
    assert_eq!(results("evt_observed_401_once").await, ["delivered"]);
    let issued = fx.server.issued();
    assert_eq!(issued.len(), 2, "one re-acquisition");
    assert_eq!(fx.bearers(), issued);
    let sent = fx.backend.requests();
    assert_eq!(sent[0].body, sent[1].body, "the same bytes");

    // The next notification meets a 401 and then another (the script's last repeats).
    assert_eq!(results("evt_observed_401_twice").await, ["auth-failed"]);
    let issued = fx.server.issued();
    assert_eq!(
        issued.len(),
        3,
        "each 401'd token replaced once, never twice"
    );
    // The second notification went out with the token the first one got, then its
    // replacement.
    let expected = [&issued[0], &issued[1], &issued[1], &issued[2]].map(String::clone);
    assert_eq!(fx.bearers(), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unresolvable_client_secret_is_unresolved_and_contacts_no_token_endpoint() {
    let fx = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
    let mut binding = fx.binding();
    binding["clientSecretRef"] = json!("env:AHP_E2E_OAUTH_SECRET_UNSET");
    let reg = registration(&[Http::new(BACKEND, fx.backend.url()).authentication(binding)]);
    let options = Options {
        trust_roots: Some(fx.roots.path().to_path_buf()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg, options).await.unwrap();
    let s = call(&interceptor, "evt_no_secret").await;
    assert_eq!(
        only_failure(&s),
        json!({"class": "auth-failed", "phase": "acquire-credential", "detail": "unresolved"})
    );
    assert!(fx.server.token_requests().is_empty());
    assert!(
        fx.server.metadata_requests().is_empty(),
        "the secret is resolved first: nothing is asked of the issuer"
    );
    assert!(fx.backend.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interactive_flow_is_unsupported_and_says_so_up_front() {
    let fx = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
    let mut binding = fx.binding();
    binding["flow"] = json!("authorization_code_pkce");
    let reg = registration(&[Http::new(BACKEND, fx.backend.url())
        .policy("fail-open")
        .authentication(binding)]);
    let interceptor = Interceptor::new(&reg, Options::default()).await.unwrap();
    assert!(
        interceptor
            .warnings()
            .iter()
            .any(|w| w.contains(BACKEND) && w.contains("authorization_code_pkce")),
        "{:?}",
        interceptor.warnings()
    );
    let s = call(&interceptor, "evt_pkce").await;
    assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    assert_eq!(only_failure(&s)["detail"], "unsupported");
    assert!(fx.server.token_requests().is_empty());
    assert!(
        fx.backend.requests().is_empty(),
        "no unauthenticated fallback"
    );
}

/// Conformance F13: the time spent acquiring the token counts against the same deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_acquisition_time_counts_against_the_exchange_deadline() {
    // Scaled so a loaded machine keeps its margins: the token takes 1 s, the backend
    // another 1 s, the deadline is 1.5 s.
    let slow_backend =
        Behaviour::Delay(Duration::from_millis(1_000), Box::new(Behaviour::NoEffect));
    let fx = Fixture::start(3600, vec![slow_backend]).await;
    fx.server.set_token_mode(TokenMode::Slow(
        Duration::from_millis(1_000),
        Box::new(TokenMode::Issue),
    ));
    let interceptor = fx.interceptor("fail-closed", 1_500).await;
    let started = Instant::now();
    let s = call(&interceptor, "evt_f13").await;
    let took = started.elapsed();
    assert_eq!(s.decided_by, DecidedBy::SyntheticDeny, "{}", s.record);
    assert_eq!(only_failure(&s)["class"], "deadline-exceeded");
    assert_eq!(
        fx.backend.requests().len(),
        1,
        "sent with the token in time"
    );
    assert!(
        took >= Duration::from_millis(1_490) && took < Duration::from_millis(1_900),
        "settled after {took:?}, not 2 s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_background_refresh_keeps_the_valid_token_and_backs_off() {
    let fx = Fixture::start(4, vec![Behaviour::NoEffect]).await;
    let interceptor = fx.interceptor("fail-closed", 2_000).await;
    assert_eq!(call(&interceptor, "evt_b1").await.decision, Decision::Allow);
    let first = fx.server.token_requests()[0].at;
    fx.server.set_token_mode(TokenMode::Status(500));
    tokio::time::sleep_until((first + Duration::from_millis(3_100)).into()).await;
    assert_eq!(call(&interceptor, "evt_b2").await.decision, Decision::Allow);
    let until = Instant::now() + Duration::from_secs(2);
    while fx.server.token_requests().len() < 2 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(call(&interceptor, "evt_b3").await.decision, Decision::Allow);
    // A refresh evt_b3 started runs in the background, racing its call: given the time
    // to reach the server (no call follows to start another), it would be counted.
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(
        fx.server.token_requests().len(),
        2,
        "one failed refresh, not one per call"
    );
    let issued = fx.server.issued();
    assert_eq!(fx.bearers(), vec![issued[0].clone(); 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_token_request_rediscovers_the_metadata_next_time() {
    let fx = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
    fx.server.set_token_mode(TokenMode::Status(503));
    let interceptor = fx.interceptor("fail-closed", 2_000).await;
    let failed = call(&interceptor, "evt_rediscover_1").await;
    assert_eq!(only_failure(&failed)["class"], "auth-failed");
    fx.server.set_token_mode(TokenMode::Issue);
    let s = call(&interceptor, "evt_rediscover_2").await;
    assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    assert_eq!(
        fx.server.metadata_requests(),
        ["/.well-known/oauth-authorization-server"; 2]
    );
    assert_eq!(fx.server.token_requests().len(), 2);
}

/// An address of this machine that is not loopback: the source address of a route
/// towards a documentation address (nothing is sent). Each test that needs one fails,
/// saying so, on a machine that has none.
fn non_loopback_address() -> std::net::IpAddr {
    let routed = |bind: &str, towards: &str| {
        let socket = std::net::UdpSocket::bind(bind).ok()?;
        socket.connect(towards).ok()?;
        Some(socket.local_addr().ok()?.ip()).filter(|ip| !ip.is_loopback())
    };
    routed("0.0.0.0:0", "192.0.2.1:9")
        .or_else(|| routed("[::]:0", "[2001:db8::1]:9"))
        .expect("this test needs an address of this machine that is not loopback")
}

/// A fixture whose authorization server's issuer is at `issuer` and whose metadata names
/// a token endpoint at `token_endpoint` (one server, reachable at both).
async fn split_fixture(issuer: std::net::IpAddr, token_endpoint: std::net::IpAddr) -> Fixture {
    let pki = Pki::generate_for(&[issuer, token_endpoint]);
    let server = OAuthServer::start_split(&pki, CLIENT_SECRET, 3600, issuer, token_endpoint).await;
    let secret_file = NamedTempFile::new().unwrap();
    std::fs::write(secret_file.path(), format!("{CLIENT_SECRET}\n")).unwrap();
    Fixture {
        server,
        backend: FaultBackend::start(vec![Behaviour::NoEffect]).await,
        secret_file,
        roots: pki.trust_roots_file(),
    }
}

/// Destination policy (digest §12, conformance H13): the token endpoint an issuer's
/// metadata names may lie no further inside the network than the issuer. An issuer on
/// another address of this machine (private, or global) naming a loopback token endpoint
/// is refused before any connection: `auth-failed`, the client secret never sent, the
/// backend never called. An issuer on loopback may name one further out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_endpoint_further_inside_than_its_issuer_is_never_sent_the_secret() {
    let outside = non_loopback_address();
    let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
    let fx = split_fixture(outside, loopback).await;
    let interceptor = fx.interceptor("fail-closed", 2_000).await;
    let s = call(&interceptor, "evt_inward").await;
    assert_eq!(s.decided_by, DecidedBy::SyntheticDeny, "{}", s.record);
    assert_eq!(
        only_failure(&s),
        json!({"class": "auth-failed", "phase": "acquire-credential", "detail": "acquisition-failed"})
    );
    assert_eq!(
        fx.server.metadata_requests(),
        ["/.well-known/oauth-authorization-server"],
        "discovery at the issuer itself is allowed"
    );
    assert!(
        fx.server.token_requests().is_empty(),
        "the secret never sent"
    );
    assert!(
        fx.backend.requests().is_empty(),
        "nothing sent without a token"
    );

    let fx = split_fixture(loopback, outside).await;
    let interceptor = fx.interceptor("fail-closed", 2_000).await;
    let s = call(&interceptor, "evt_outward").await;
    assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    assert_eq!(fx.server.token_requests().len(), 1);
    assert_eq!(fx.bearers(), fx.server.issued());
}

/// Two bindings alike but for their client secret's reference share no token: the one
/// whose secret does not resolve is `unresolved`, never served the token the other's
/// secret got (which secret a shared token came from would depend on who asked first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_with_different_secrets_share_no_token() {
    let fx = Fixture::start(3600, vec![Behaviour::NoEffect, Behaviour::NoEffect]).await;
    let mut unresolved = fx.binding();
    unresolved["clientSecretRef"] = json!("env:AHP_E2E_OAUTH_SECRET_UNSET");
    let reg = registration(&[
        Http::new("com.example.first", fx.backend.url()).authentication(fx.binding()),
        Http::new("com.example.second", fx.backend.url()).authentication(unresolved),
    ]);
    let options = Options {
        trust_roots: Some(fx.roots.path().to_path_buf()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg, options).await.unwrap();
    let s = call(&interceptor, "evt_two_secrets").await;
    assert_eq!(s.decision, Decision::Deny, "{}", s.record);
    let record = serde_json::to_value(&s.record).expect("a record");
    assert_eq!(
        record["interceptors"][0]["outcome"], "no-effect",
        "{record}"
    );
    assert_eq!(
        record["interceptors"][1]["failure"],
        json!({"class": "auth-failed", "phase": "acquire-credential", "detail": "unresolved"}),
        "{record}"
    );
    assert_eq!(fx.server.token_requests().len(), 1);
    assert_eq!(
        fx.backend.requests().len(),
        1,
        "the second backend was sent nothing"
    );
}

/// Token requests that keep failing (a client secret rotated away) are not sent at the
/// pace of the calls: the first failure is retried at the next call, then acquisition
/// pauses (1 s, doubling), and the calls meanwhile fail at once with the same failure,
/// sending nothing. Once the pause is over, a working endpoint is asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_requests_that_keep_failing_pause_acquisition() {
    let fx = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
    fx.server.set_token_mode(TokenMode::Status(400));
    let interceptor = fx.interceptor("fail-closed", 2_000).await;
    for i in 0..10 {
        let s = call(&interceptor, &format!("evt_pause_{i}")).await;
        assert_eq!(s.decided_by, DecidedBy::SyntheticDeny, "{i}: {}", s.record);
        assert_eq!(
            only_failure(&s),
            json!({"class": "auth-failed", "phase": "acquire-credential", "detail": "acquisition-failed"}),
            "{i}"
        );
    }
    // One retry, then a pause of 1 s, which the eight calls after it are quicker than
    // even on a loaded machine (each fails at once, sending nothing); a third request
    // (and a pause of 2 s) at most, never one per call.
    let requests = fx.server.token_requests().len();
    assert!((2..=3).contains(&requests), "{requests} token requests");
    assert_eq!(fx.server.metadata_requests().len(), requests);
    fx.server.set_token_mode(TokenMode::Issue);
    let pause = Duration::from_secs(1 << (requests - 2));
    tokio::time::sleep(pause + Duration::from_millis(100)).await;
    let s = call(&interceptor, "evt_pause_over").await;
    assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    assert_eq!(fx.server.token_requests().len(), requests + 1);
    assert!(
        fx.backend.requests().len() == 1,
        "only the call with a token was sent"
    );
}

/// An issuer that offers `client_secret_post` alone gets the client's credentials in the
/// form (RFC 6749 §2.3.1), with no Basic header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_secret_post_sends_the_credentials_in_the_form() {
    let fx = Fixture::start(3600, vec![Behaviour::NoEffect]).await;
    fx.server.set_metadata_mode(MetadataMode::PostOnly);
    let interceptor = fx.interceptor("fail-closed", 2_000).await;
    let s = call(&interceptor, "evt_post").await;
    assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    let requests = fx.server.token_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].authorization, None);
    assert_eq!(
        requests[0].form.get("client_id").map(String::as_str),
        Some(CLIENT_ID)
    );
    assert_eq!(
        requests[0].form.get("client_secret").map(String::as_str),
        Some(CLIENT_SECRET)
    );
    assert_eq!(fx.bearers(), fx.server.issued());
}

/// A backend that refuses every token (an audience it does not take) does not have a
/// token requested twice per call: its second refusal in a row pauses its acquisitions
/// (1 s, doubling), during which its calls fail at once as a renewal that failed. Each
/// call is still `auth-failed` under its policy, and nothing goes without a token. So too
/// with an issuer that hands out the same still-valid token at every request: each
/// acquisition refused counts, though its token string is the last one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_refuses_every_token_pauses_its_acquisitions() {
    for mode in [TokenMode::Issue, TokenMode::Same] {
        let fx = Fixture::start(3600, vec![Behaviour::unauthorized()]).await;
        fx.server.set_token_mode(mode.clone());
        for (policy, decision) in [
            ("fail-closed", Decision::Deny),
            ("fail-open", Decision::Allow),
        ] {
            let interceptor = fx.interceptor(policy, 2_000).await;
            let before = fx.server.token_requests().len();
            for i in 0..10 {
                let s = call(&interceptor, &format!("evt_refused_{policy}_{i}")).await;
                assert_eq!(s.decision, decision, "{mode:?} {policy} {i}: {}", s.record);
                let class = &only_failure(&s)["class"];
                assert_eq!(class, "auth-failed", "{mode:?} {policy} {i}");
            }
            // Two tokens refused (the first call's and its resend's), then a pause of 1 s
            // the next calls are quicker than; on a loaded machine a third (and a pause
            // of 2 s), a fourth at most. Twenty without the pause.
            let requests = fx.server.token_requests().len() - before;
            assert!(
                (2..=4).contains(&requests),
                "{mode:?} {policy}: {requests} token requests"
            );
            assert!(
                fx.bearers().iter().all(|b| !b.is_empty()),
                "nothing went without one"
            );
        }
    }
}

/// One backend's refusals pause only its own acquisitions: a healthy backend sharing its
/// token cache entry (the same issuer, resource, client and scopes) goes on getting
/// tokens and deciding, on every call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_refusing_tokens_pauses_no_other_backend() {
    let fx = Fixture::start(3600, vec![Behaviour::unauthorized()]).await;
    let healthy = FaultBackend::start(vec![Behaviour::Deny("healthy says no".into())]).await;
    let reg = registration(&[
        Http::new("com.example.refusing", fx.backend.url())
            .policy("fail-open")
            .authentication(fx.binding()),
        Http::new("com.example.healthy", healthy.url()).authentication(fx.binding()),
    ]);
    let options = Options {
        trust_roots: Some(fx.roots.path().to_path_buf()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&reg, options).await.expect("valid");
    for i in 0..10 {
        let s = call(&interceptor, &format!("evt_shared_{i}")).await;
        let record = serde_json::to_value(&s.record).expect("a record");
        assert_eq!(s.decided_by, DecidedBy::BackendDeny, "{i}: {record}");
        assert_eq!(
            record["interceptors"][1]["outcome"], "deny",
            "{i}: {record}"
        );
    }
    assert_eq!(healthy.requests().len(), 10, "asked on every call");
    // And the refusing one stays paused while its sibling takes tokens: the first call's
    // two refused and the healthy one's, then one or two more as each pause ends (about
    // twenty if the sibling's acceptance ended the refusing backend's pause).
    let requests = fx.server.token_requests().len();
    assert!((3..=6).contains(&requests), "{requests} token requests");
}
