//! Credential providers injected by the harness: they replace the registration's binding
//! for their backend, get the subscription's deadline, the destination and purpose of the
//! request and a cancellation signal, hear about 401s, and stay the caller's: shutting an
//! interceptor down leaves them usable.

use ahp_host::{
    AuthFailure, BoxFuture, CredentialProvider, CredentialPurpose, CredentialRequest, DecidedBy,
    Decision, EffectKind, Interceptor, Interrupt, Options, Secret, Settlement,
};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{event, eventually, record_json, registration, Http};
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BACKEND: &str = "com.example.provided";

/// What the test provider does when asked.
#[derive(Clone, Copy)]
enum Answer {
    /// `tok-provided-<n>`, counting acquisitions; notices when the host says the
    /// acquisition ended.
    Token,
    /// The token it holds, as a provider with a cache hands it out: `tok-provided-<n>`,
    /// counting the tokens it minted, a fresh one only when it holds none (at first, and
    /// after the one it held was rejected).
    Cached,
    Fail,
    /// A token unfit for a header: empty, or with a line break.
    Unusable(&'static str),
    /// Never answers, but notices cancellation.
    Hang,
    /// A token, the moment the deadline passes.
    AtTheDeadline,
    /// Has a bug: panics.
    Panic,
}

/// What the provider was asked for, in one acquisition.
struct Asked {
    backend: String,
    deadline: std::time::Instant,
    destination: Option<String>,
    purpose: CredentialPurpose,
}

#[derive(Default)]
struct Log {
    requests: Vec<Asked>,
    rejected: Vec<String>,
    /// What [`Answer::Cached`] holds, and how many tokens it minted.
    held: Option<String>,
    minted: usize,
}

struct TestProvider {
    answer: Answer,
    log: Mutex<Log>,
    saw_cancellation: Arc<AtomicBool>,
}

impl TestProvider {
    fn new(answer: Answer) -> Arc<TestProvider> {
        Arc::new(TestProvider {
            answer,
            log: Mutex::default(),
            saw_cancellation: Arc::default(),
        })
    }
}

impl TestProvider {
    /// Notes when `cancelled` is set. A real provider would hand the signal to shared
    /// work that outlives its future (the host drops it); this one hands it to a watcher.
    fn watch(&self, cancelled: Interrupt) {
        let seen = self.saw_cancellation.clone();
        tokio::spawn(async move {
            cancelled.wait().await;
            seen.store(true, Ordering::SeqCst);
        });
    }
}

impl CredentialProvider for TestProvider {
    fn acquire(&self, request: CredentialRequest) -> BoxFuture<'_, Result<Secret, AuthFailure>> {
        Box::pin(async move {
            let n = {
                let mut log = self.log.lock().unwrap();
                log.requests.push(Asked {
                    backend: request.backend.clone(),
                    deadline: request.deadline,
                    destination: request.destination.clone(),
                    purpose: request.purpose,
                });
                log.requests.len()
            };
            match self.answer {
                Answer::Token => {
                    self.watch(request.cancelled);
                    Ok(Secret::new(format!("tok-provided-{n}")))
                }
                Answer::Cached => {
                    let mut log = self.log.lock().unwrap();
                    let token = match &log.held {
                        Some(held) => held.clone(),
                        None => {
                            log.minted += 1;
                            let fresh = format!("tok-provided-{}", log.minted);
                            log.held = Some(fresh.clone());
                            fresh
                        }
                    };
                    Ok(Secret::new(token))
                }
                Answer::Fail => Err(AuthFailure::AcquisitionFailed),
                Answer::Unusable(token) => Ok(Secret::new(token)),
                Answer::Panic => panic!("the provider's own bug"),
                Answer::AtTheDeadline => {
                    tokio::time::sleep_until(request.deadline.into()).await;
                    Ok(Secret::new(format!("tok-provided-{n}")))
                }
                Answer::Hang => {
                    self.watch(request.cancelled);
                    std::future::pending().await
                }
            }
        })
    }

    fn reject(&self, backend: &str, token: &Secret) {
        assert_eq!(backend, BACKEND);
        let mut log = self.log.lock().unwrap();
        log.rejected.push(token.expose().to_string());
        if log.held.as_deref() == Some(token.expose()) {
            log.held = None;
        }
    }
}

/// A registration whose bearer binding cannot resolve, so only the provider can help.
fn registration_for(backend: &FaultBackend, timeout_ms: u64) -> String {
    registration(&[Http::new(BACKEND, backend.url())
        .timeout_ms(timeout_ms)
        .token_env("AHP_E2E_PROVIDER_UNSET")])
}

async fn interceptor_with(
    backend: &FaultBackend,
    provider: Arc<TestProvider>,
    timeout_ms: u64,
) -> Interceptor {
    let mut providers: HashMap<String, Arc<dyn CredentialProvider>> = HashMap::new();
    providers.insert(BACKEND.into(), provider);
    let options = Options {
        credential_providers: providers,
        ..Options::default()
    };
    Interceptor::new(&registration_for(backend, timeout_ms), options)
        .await
        .expect("valid registration")
}

async fn call(interceptor: &Interceptor, event_id: &str) -> Settlement {
    interceptor
        .intercept(&event(event_id), &[EffectKind::Deny], None)
        .await
        .expect("a valid event settles")
}

fn bearers(backend: &FaultBackend) -> Vec<String> {
    backend
        .requests()
        .iter()
        .map(|r| r.header_values("authorization").join(","))
        .collect()
}

/// The provider is asked for the backend of the registration, by the subscription's
/// deadline, for an interceptor's exchange with the backend's registered URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_replaces_the_binding_and_gets_the_subscription_deadline() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let provider = TestProvider::new(Answer::Token);
    let interceptor = interceptor_with(&backend, provider.clone(), 1_500).await;
    let started = Instant::now();
    let s = call(&interceptor, "evt_provided").await;
    let took = started.elapsed();
    assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    assert_eq!(bearers(&backend), ["Bearer tok-provided-1"]);
    let log = provider.log.lock().unwrap();
    let asked = &log.requests[0];
    assert_eq!(asked.backend, BACKEND);
    assert_eq!(asked.purpose, CredentialPurpose::Intercept);
    assert_eq!(asked.destination.as_deref(), Some(backend.url().as_str()));
    let deadline = &asked.deadline;
    // The subscription starts a little after the call does.
    let timeout = Duration::from_millis(1_500);
    let budget = deadline.duration_since(started);
    assert!(
        budget >= timeout && budget <= timeout + took,
        "deadline {budget:?} after the call started, which took {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_provider_is_auth_failed_and_nothing_is_sent() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let interceptor = interceptor_with(&backend, TestProvider::new(Answer::Fail), 1_000).await;
    let s = call(&interceptor, "evt_provider_fails").await;
    assert_eq!(s.decided_by, DecidedBy::SyntheticDeny);
    assert_eq!(
        record_json(&s)["interceptors"][0]["failure"],
        json!({"class": "auth-failed", "phase": "acquire-credential", "detail": "acquisition-failed"})
    );
    assert!(backend.requests().is_empty());
}

/// A provider that panics has failed to acquire: auth-failed under the policy, nothing
/// sent, and no unwind into the caller's `.await`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_provider_is_auth_failed_and_nothing_is_sent() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let interceptor = interceptor_with(&backend, TestProvider::new(Answer::Panic), 1_000).await;
    let s = call(&interceptor, "evt_provider_panics").await;
    assert_eq!(s.decided_by, DecidedBy::SyntheticDeny);
    assert_eq!(
        record_json(&s)["interceptors"][0]["failure"],
        json!({"class": "auth-failed", "phase": "acquire-credential", "detail": "acquisition-failed"})
    );
    assert!(backend.requests().is_empty());
}

/// A provider's token is held to the rule of every other source: an empty one would go
/// out as no credential at all (fail-open is no unauthenticated fallback), one with a line
/// break could not be a header. Either fails acquisition; nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_provided_token_is_auth_failed_and_nothing_is_sent() {
    for token in ["", "tok\nen"] {
        let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let provider = TestProvider::new(Answer::Unusable(token));
        let interceptor = interceptor_with(&backend, provider, 1_000).await;
        let s = call(&interceptor, "evt_provider_unusable").await;
        assert_eq!(s.decided_by, DecidedBy::SyntheticDeny, "{token:?}");
        assert_eq!(
            record_json(&s)["interceptors"][0]["failure"],
            json!({"class": "auth-failed", "phase": "acquire-credential", "detail": "acquisition-failed"}),
            "{token:?}"
        );
        assert!(backend.requests().is_empty(), "{token:?}: sent");
    }
}

/// A token that comes as the deadline passes (the same timer tick: the provider's wait
/// and the host's bound end together) is not handed to the component: the deadline is
/// checked again first, so the acquisition failed at its deadline and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_at_the_deadline_is_not_handed_over() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let provider = TestProvider::new(Answer::AtTheDeadline);
    let interceptor = interceptor_with(&backend, provider, 300).await;
    for i in 0..3 {
        let s = call(&interceptor, &format!("evt_provider_at_deadline_{i}")).await;
        let failure = &record_json(&s)["interceptors"][0]["failure"];
        assert_eq!(failure["phase"], "acquire-credential", "{}", s.record);
        assert_eq!(failure["detail"], "deadline-exceeded", "{}", s.record);
    }
    assert!(backend.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_provider_ends_at_the_deadline_and_sees_interruption() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let provider = TestProvider::new(Answer::Hang);
    let interceptor = interceptor_with(&backend, provider.clone(), 300).await;
    let started = Instant::now();
    let s = call(&interceptor, "evt_provider_slow").await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        record_json(&s)["interceptors"][0]["failure"]["detail"],
        "deadline-exceeded"
    );

    // Interrupted well within a deadline a loaded machine cannot reach first. A provider
    // of its own: the first one was told at its deadline.
    let provider = TestProvider::new(Answer::Hang);
    let interceptor = interceptor_with(&backend, provider.clone(), 5_000).await;
    let interrupt = Interrupt::new();
    let trigger = interrupt.clone();
    let watched = provider.clone();
    tokio::spawn(async move {
        // Once the provider was asked, and not told yet.
        let asked = || watched.log.lock().unwrap().requests.len();
        let until = Instant::now() + Duration::from_secs(10);
        while asked() < 1 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            !watched.saw_cancellation.load(Ordering::SeqCst),
            "told too soon"
        );
        trigger.interrupt();
    });
    let s = interceptor
        .intercept_with(
            &event("evt_provider_cut"),
            &[EffectKind::Deny],
            None,
            &interrupt,
        )
        .await
        .unwrap();
    assert_eq!(s.decided_by, DecidedBy::Interrupted, "{}", s.record);
    let told = || provider.saw_cancellation.load(Ordering::SeqCst);
    assert!(eventually(Duration::from_secs(2), told).await);
    assert!(backend.requests().is_empty());
}

/// One observe subscription on `tool.before` at `backend`, whose registered binding (a
/// variable that is not set) `provider` replaces.
async fn observer_with(backend: &FaultBackend, provider: Arc<TestProvider>) -> Interceptor {
    let reg = json!({"protocolVersion": "draft", "hooks": [{
        "id": BACKEND, "transport": {"type": "http", "url": backend.url()},
        "authentication": {"type": "bearer", "tokenEnv": "AHP_E2E_PROVIDER_UNSET"},
        "subscriptions": [{"events": ["tool.before"], "mode": "observe",
                           "content": {"default": "metadata"}}]}]});
    let mut providers: HashMap<String, Arc<dyn CredentialProvider>> = HashMap::new();
    providers.insert(BACKEND.into(), provider);
    let options = Options {
        credential_providers: providers,
        ..Options::default()
    };
    Interceptor::new(&reg.to_string(), options)
        .await
        .expect("valid registration")
}

/// An observer's provider is asked for the notification the host sends, with the
/// backend's registered URL, and its token goes out with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_is_asked_for_an_observer_delivery() {
    let accepted = Behaviour::Reply {
        status: 204,
        content_type: None,
        body: Vec::new(),
    };
    let backend = FaultBackend::start(vec![accepted]).await;
    let provider = TestProvider::new(Answer::Token);
    let interceptor = observer_with(&backend, provider.clone()).await;
    let s = interceptor
        .intercept(
            &event("evt_provider_observed"),
            &[],
            Some(Duration::from_secs(5)),
        )
        .await
        .expect("a valid event settles");
    let record = record_json(&s);
    assert_eq!(record["observers"][0]["result"], "delivered", "{record}");
    assert_eq!(bearers(&backend), ["Bearer tok-provided-1"]);
    let log = provider.log.lock().unwrap();
    assert_eq!(log.requests.len(), 1);
    let asked = &log.requests[0];
    assert_eq!(asked.backend, BACKEND);
    assert_eq!(asked.purpose, CredentialPurpose::Observe);
    assert_eq!(asked.destination.as_deref(), Some(backend.url().as_str()));
}

/// An observer's provider is told its acquisition ended once it handed its token over, as
/// an interceptor's is: not only when the whole delivery ends (the backend holds its
/// answer for a second here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_provider_is_told_when_its_acquisition_ends() {
    let accepted = Behaviour::Reply {
        status: 204,
        content_type: None,
        body: Vec::new(),
    };
    let held = Behaviour::Delay(Duration::from_secs(1), Box::new(accepted));
    let backend = FaultBackend::start(vec![held]).await;
    let provider = TestProvider::new(Answer::Token);
    let interceptor = observer_with(&backend, provider.clone()).await;
    let call = tokio::spawn(async move {
        interceptor
            .intercept(
                &event("evt_provider_told"),
                &[],
                Some(Duration::from_secs(5)),
            )
            .await
            .expect("a valid event settles")
    });
    let sent = || !backend.requests().is_empty();
    assert!(eventually(Duration::from_secs(5), sent).await, "never sent");
    let told = || provider.saw_cancellation.load(Ordering::SeqCst);
    assert!(eventually(Duration::from_millis(500), told).await);
    assert!(!call.is_finished(), "told only as the delivery ended");
    let record = record_json(&call.await.expect("the call completes"));
    assert_eq!(record["observers"][0]["result"], "delivered", "{record}");
}

/// An observer's credential that its deadline cuts short is the deadline's failure, as
/// it is for an interceptor: `deadline-exceeded`, not `auth-failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_provider_ends_an_observer_delivery_as_deadline_exceeded() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    for (answer, class) in [
        (Answer::Hang, "deadline-exceeded"),
        (Answer::Fail, "auth-failed"),
    ] {
        let interceptor = observer_with(&backend, TestProvider::new(answer)).await;
        let s = interceptor
            .intercept(
                &event("evt_provider_observer"),
                &[],
                Some(Duration::from_millis(400)),
            )
            .await
            .expect("a valid event settles");
        let record = record_json(&s);
        assert_eq!(record["observers"][0]["result"], class, "{record}");
        // An observer's failure never changes the call's decision.
        assert_eq!(
            (s.decision, s.decided_by),
            (Decision::Allow, DecidedBy::NoObjection),
            "{record}"
        );
        assert!(backend.requests().is_empty());
    }
}

/// The provider hands out its cached token until it is told of the 401, so the resend
/// carries a fresh token only if the rejection came before the second acquisition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_is_reported_to_the_provider_before_one_fresh_acquisition() {
    let unauthorized = Behaviour::Reply {
        status: 401,
        content_type: None,
        body: Vec::new(),
    };
    let backend = FaultBackend::start(vec![unauthorized, Behaviour::NoEffect]).await;
    let provider = TestProvider::new(Answer::Cached);
    let interceptor = interceptor_with(&backend, provider.clone(), 1_000).await;
    let s = call(&interceptor, "evt_provider_401").await;
    assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    assert_eq!(
        bearers(&backend),
        ["Bearer tok-provided-1", "Bearer tok-provided-2"]
    );
    let log = provider.log.lock().unwrap();
    assert_eq!(log.rejected, ["tok-provided-1"]);
    assert_eq!(log.requests.len(), 2, "one fresh acquisition");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_leaves_an_injected_provider_to_its_owner() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let provider = TestProvider::new(Answer::Token);
    let first = interceptor_with(&backend, provider.clone(), 1_000).await;
    call(&first, "evt_before_shutdown").await;
    first.shutdown();
    drop(first);
    assert_eq!(
        Arc::strong_count(&provider),
        1,
        "the interceptor let go of it"
    );
    let second = interceptor_with(&backend, provider.clone(), 1_000).await;
    let s = call(&second, "evt_after_shutdown").await;
    assert_eq!(s.decision, Decision::Allow, "{}", s.record);
    assert_eq!(
        bearers(&backend),
        ["Bearer tok-provided-1", "Bearer tok-provided-2"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_for_an_unknown_backend_is_refused_at_build() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let mut providers: HashMap<String, Arc<dyn CredentialProvider>> = HashMap::new();
    providers.insert(
        "com.example.nobody".into(),
        TestProvider::new(Answer::Token),
    );
    let options = Options {
        credential_providers: providers,
        ..Options::default()
    };
    let error = Interceptor::new(&registration_for(&backend, 1_000), options)
        .await
        .err()
        .expect("refused");
    assert!(error.to_string().contains("com.example.nobody"), "{error}");
}

/// An owned observer whose deadline (the call's budget) passed before its delivery began
/// asks its credential provider nothing and sends nothing: past the deadline no
/// credential work starts (an OAuth token request would send the client secret for a
/// notification that can no longer go).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_past_its_deadline_asks_no_credential() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let provider = TestProvider::new(Answer::Token);
    let hooks = observer_with(&backend, provider.clone()).await;
    // Long enough for the component to prepare the notification inside it under load
    // (past the budget it would be withheld, never begun).
    let budget = Some(Duration::from_millis(400));
    let call = hooks
        .settle(
            &event("evt_provided_late_observer"),
            &[],
            budget,
            &Interrupt::new(),
        )
        .await
        .expect("settles");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let record = record_json(&call.complete().await);
    assert_eq!(
        record["observers"][0]["result"], "deadline-exceeded",
        "{record}"
    );
    assert!(
        provider.log.lock().unwrap().requests.is_empty(),
        "asked past the deadline"
    );
    assert!(backend.requests().is_empty(), "sent past the deadline");
}
