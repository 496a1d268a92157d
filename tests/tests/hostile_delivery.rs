//! The checks `delivery.exchange` makes on the component's behalf, which an honest
//! component never trips: a credential is sent only to the backend it was acquired for,
//! a backend configured with one is never called without it, and a backend that is not
//! in the plan is never called. The hostile test component (`tests/runaway-guest`, in its
//! cross-credential mode) asks for all three, reports what the host answered, and traps.
//! The jco host's side of the same contract is in `jco_runtime.rs`.
//!
//! And a settlement the host does not trust sends nothing on the component's behalf.

use ahp_host::{DecidedBy, Decision, Interceptor, Options};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    assert_nothing_sent, assert_settled, audit_lines, call, record_json, runaway_component,
    CrossCredential, CROSS_TOKEN, CROSS_TOKEN_ENV,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_refuses_every_delivery_a_component_must_not_make() {
    std::env::set_var(CROSS_TOKEN_ENV, CROSS_TOKEN);
    let backends = CrossCredential::start().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let audit = dir.path().join("audit.jsonl");
    let options = Options {
        component: Some(runaway_component()),
        audit_path: Some(audit.clone()),
        ..Options::default()
    };
    let interceptor = Interceptor::new(&backends.registration(), options)
        .await
        .expect("the runaway component loads its cross-credential mode");

    let settled = call(&interceptor, "evt_cross").await;
    assert_settled(
        &settled,
        Decision::Deny,
        DecidedBy::EngineFailure,
        Some("Policy evaluation failed."),
    );
    backends.assert_every_delivery_refused().await;
    let record = settled.record.to_string();
    assert!(
        !record.contains(CROSS_TOKEN),
        "token in the record: {record}"
    );
    // The audit log holds that record, and nothing else.
    assert_eq!(audit_lines(&audit), [record_json(&settled)]);
}

/// A component that allows with a record the host cannot read, asking for an observe
/// notification: the call is an engine failure, and the notification the untrusted
/// component asked for is never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_settlement_sends_no_notification() {
    let observer = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let options = Options {
        component: Some(runaway_component()),
        ..Options::default()
    };
    let registration = format!("untrusted-observer {}", observer.url());
    let interceptor = Interceptor::new(&registration, options)
        .await
        .expect("the runaway component loads its untrusted-observer mode");

    let settled = call(&interceptor, "evt_untrusted").await;
    assert_settled(
        &settled,
        Decision::Deny,
        DecidedBy::EngineFailure,
        Some("Policy evaluation failed."),
    );
    assert!(settled.record.observers.is_empty());
    assert_nothing_sent(&observer).await;
}

/// The component tells the host which backends to serve, but may name none the
/// registration does not: a component planning a command to run (here `/bin/sh`, for
/// a registration of no backends) is refused at setup, naming the backend and what the
/// registration does not give it, before any instance is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_the_registration_does_not_give_is_refused_at_setup() {
    let options = Options {
        component: Some(runaway_component()),
        ..Options::default()
    };
    let refused = match Interceptor::new("plans-a-command", options).await {
        Ok(_) => panic!("a plan of a command the registration does not name was served"),
        Err(e) => e,
    };
    assert!(refused.is_setup(), "{refused}");
    let said = "the component planned backend `com.example.planned`: its command is not its \
                registration's";
    assert!(refused.to_string().contains(said), "{refused}");
}

/// A registration the host cannot read as hooks must hold each planned string whole, not
/// as part of a longer one: the runaway guest planning its backend's URL one character
/// short (a look-alike, as `https://policy.example.co` stands in
/// `https://policy.example.com`) is refused at setup, naming the URL, before any instance
/// is served. The same plan from a text holding that URL whole is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_planned_as_part_of_a_longer_one_is_refused_at_setup() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let options = || Options {
        component: Some(runaway_component()),
        ..Options::default()
    };
    // The guest drops the text's last character: here the URL's, there the space after it.
    let look_alike = format!("plans-a-look-alike {}", backend.url());
    let refused = match Interceptor::new(&look_alike, options()).await {
        Ok(_) => panic!("a URL the registration holds only as part of a longer one was served"),
        Err(e) => e,
    };
    assert!(refused.is_setup(), "{refused}");
    let said = "the component planned backend `com.example.look-alike`: its URL is not its \
                registration's";
    assert!(refused.to_string().contains(said), "{refused}");
    let whole = format!("plans-a-look-alike {} ", backend.url());
    let served = Interceptor::new(&whole, options()).await;
    assert!(
        served.is_ok(),
        "a URL the text holds whole: {:?}",
        served.err()
    );
    assert_nothing_sent(&backend).await;
}

/// A registration the host cannot read as hooks cannot say which backend a credential
/// goes with: the cross-credential mode's words alone, naming every URL and the token
/// variable, are refused at setup, naming the credential, before any instance is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_planned_from_a_text_that_is_not_json_is_refused_at_setup() {
    let backends = CrossCredential::start().await;
    let (a, b, report) = (backends.a.url(), backends.b.url(), backends.report.url());
    let text = format!("cross-credential {CROSS_TOKEN_ENV} {a} {b} {report}");
    let options = Options {
        component: Some(runaway_component()),
        ..Options::default()
    };
    let refused = match Interceptor::new(&text, options).await {
        Ok(_) => panic!("a credential planned from a text that is not JSON was served"),
        Err(e) => e,
    };
    assert!(refused.is_setup(), "{refused}");
    let said = "the component planned backend `com.example.a`: its credential is not its \
                registration's";
    assert!(refused.to_string().contains(said), "{refused}");
    for backend in [&backends.a, &backends.b, &backends.report] {
        assert_nothing_sent(backend).await;
    }
}
