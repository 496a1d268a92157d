//! Chain order and short-circuit through the real component and host (digest §8,
//! failure-semantics.md "Failure policy", DESIGN.md §3 and §4).
//!
//! Matching interceptors run one after another, in registration order, each exactly once;
//! an explicit deny or a fail-closed failure stops the chain; a fail-open failure is
//! recorded and the chain goes on. Every intercept request is checked on the wire: its
//! JSON-RPC id is the event id, it advertises exactly the effects the harness declared,
//! it omits `native`, and its bytes hash to the `requestSha256` of the audit record.

use std::time::Duration;

use ahp_host::{DecidedBy, Decision, EffectKind, Settlement};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    call, event, interceptor, record_json, registration, sha256_hex, Http, SYNTHETIC_REASON,
};
use serde_json::{json, Value};

const NATIVE_MARKER: &str = "NATIVE-PROVIDER-PAYLOAD-91c2";
/// Deliberately not in alphabetical order: the chain follows the registration, not ids.
const A: &str = "com.example.zeta";
const B: &str = "com.example.alpha";
const C: &str = "com.example.mid";
/// How long a backend of the order test waits before it answers.
const ANSWER_DELAY: Duration = Duration::from_millis(100);

/// The test event with a provider `native` payload, which no subscription here includes.
fn event_with_native(id: &str) -> String {
    let mut value: Value = serde_json::from_str(&event(id)).expect("support::event is JSON");
    value["native"] = json!({"raw": NATIVE_MARKER});
    value.to_string()
}

/// Registers `chain` in order and settles one event with a `native` payload, declaring
/// only `deny`.
async fn settle(chain: &[Http<'_>], event_id: &str) -> Settlement {
    interceptor(&registration(chain))
        .await
        .intercept(&event_with_native(event_id), &[EffectKind::Deny], None)
        .await
        .expect("the call is made")
}

/// `field` of every entry of the record's `list` (`interceptors` or `observers`), in order.
fn each(settled: &Settlement, list: &str, field: &str) -> Vec<String> {
    record_json(settled)[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list} is an array"))
        .iter()
        .map(|i| i[field].as_str().unwrap_or("<none>").to_owned())
        .collect()
}

/// The `outcome` of every interceptor in the record, in order.
fn outcomes(settled: &Settlement) -> Vec<String> {
    each(settled, "interceptors", "outcome")
}

/// Every intercept request on the wire is well formed for `event_id`, and its exact bytes
/// hash to `requestSha256` of the interceptor at the same position in the record.
fn assert_wire_matches_record(backends: &[&FaultBackend], settled: &Settlement, event_id: &str) {
    let record = record_json(settled);
    let interceptors = record["interceptors"]
        .as_array()
        .expect("interceptors is an array");
    assert_eq!(interceptors.len(), backends.len(), "{}", settled.record);
    for (i, (backend, entry)) in backends.iter().zip(interceptors).enumerate() {
        let requests = backend.requests_with_method("hooks/intercept");
        if entry["outcome"] == "not-reached" {
            assert!(
                requests.is_empty(),
                "interceptor {i} was not reached but was called"
            );
            assert_eq!(entry.get("requestSha256"), None, "{}", settled.record);
            continue;
        }
        assert!(
            !requests.is_empty(),
            "interceptor {i} was reached but not called"
        );
        let recorded_sha = entry["requestSha256"]
            .as_str()
            .unwrap_or_else(|| panic!("interceptor {i} has no requestSha256: {entry}"));
        for request in &requests {
            assert_eq!(
                (request.method.as_str(), request.path.as_str()),
                ("POST", "/hooks")
            );
            assert_eq!(request.header_values("content-type"), ["application/json"]);
            // No content coding accepted but none: the reply's bytes are its JSON.
            assert_eq!(request.header_values("accept-encoding"), ["identity"]);
            let body = request.json();
            assert_eq!(body["jsonrpc"], "2.0", "{body}");
            assert_eq!(body["method"], "hooks/intercept", "{body}");
            assert_eq!(body["id"], json!(event_id), "{body}");
            assert_eq!(body["params"]["event"]["id"], json!(event_id), "{body}");
            assert_eq!(body["params"]["protocolVersion"], "draft", "{body}");
            assert_eq!(
                body["params"]["capabilities"]["effects"],
                json!(["deny"]),
                "{body}"
            );
            assert_eq!(body["params"]["event"]["type"], "tool.before", "{body}");
            assert_eq!(body["params"]["event"].get("native"), None, "{body}");
            assert!(
                !String::from_utf8_lossy(&request.body).contains(NATIVE_MARKER),
                "the native payload was sent: {body}"
            );
            assert_eq!(
                sha256_hex(&request.body),
                recorded_sha,
                "interceptor {i}: the audit hash is not the hash of the bytes sent"
            );
        }
    }
}

/// Three interceptors with no objection: each is called exactly once, strictly in
/// registration order, and the record lists them in that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_interceptor_is_called_once_in_registration_order() {
    // A and B answer only after `ANSWER_DELAY`, so a call that did not wait for the
    // previous answer would arrive within it.
    let slow = Behaviour::Delay(ANSWER_DELAY, Box::new(Behaviour::NoEffect));
    let a = FaultBackend::start(vec![slow.clone()]).await;
    let b = FaultBackend::start(vec![slow]).await;
    let c = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let chain = [
        Http::new(A, a.url()),
        Http::new(B, b.url()),
        Http::new(C, c.url()),
    ];
    let settled = settle(&chain, "evt_order").await;

    assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    assert_eq!(settled.decided_by, DecidedBy::NoObjection);
    assert_eq!(settled.reason, None);
    assert_eq!(outcomes(&settled), ["no-effect", "no-effect", "no-effect"]);
    assert_eq!(each(&settled, "interceptors", "backend"), [A, B, C]);
    assert_eq!(record_json(&settled)["observers"], json!([]));
    let counts = [a.requests().len(), b.requests().len(), c.requests().len()];
    assert_eq!(counts, [1, 1, 1], "each interceptor exactly once");
    let (at_a, at_b, at_c) = (a.requests()[0].at, b.requests()[0].at, c.requests()[0].at);
    assert!(
        at_b >= at_a + ANSWER_DELAY,
        "B was called before A answered"
    );
    assert!(
        at_c >= at_b + ANSWER_DELAY,
        "C was called before B answered"
    );
    assert_wire_matches_record(&[&a, &b, &c], &settled, "evt_order");
    // The three subscriptions are configured alike, so they were sent identical bytes.
    let record = record_json(&settled);
    let shas: Vec<&Value> = record["interceptors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["requestSha256"])
        .collect();
    assert_eq!(shas[0], shas[1]);
    assert_eq!(shas[1], shas[2]);
}

/// A deny from the first interceptor stops the chain: the others are never asked to
/// decide and are listed as short-circuit observers instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_short_circuits_the_rest_of_the_chain() {
    let a = FaultBackend::start(vec![Behaviour::Deny("A forbids this.".into())]).await;
    let b = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let c = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let chain = [
        Http::new(A, a.url()),
        Http::new(B, b.url()).policy("fail-open"),
        Http::new(C, c.url()),
    ];
    let settled = settle(&chain, "evt_deny").await;

    assert_eq!(settled.decision, Decision::Deny, "{}", settled.record);
    assert_eq!(settled.decided_by, DecidedBy::BackendDeny);
    assert_eq!(settled.reason.as_deref(), Some("A forbids this."));
    assert_eq!(record_json(&settled)["decidedBy"], "backend-deny");
    assert_eq!(outcomes(&settled), ["deny", "not-reached", "not-reached"]);
    assert_eq!(each(&settled, "interceptors", "backend"), [A, B, C]);
    assert_eq!(a.requests().len(), 1);
    assert_eq!(
        b.requests_with_method("hooks/intercept").len(),
        0,
        "B was asked to decide after A denied"
    );
    assert_eq!(
        c.requests_with_method("hooks/intercept").len(),
        0,
        "C was asked to decide after A denied"
    );
    for skipped in &record_json(&settled)["interceptors"].as_array().unwrap()[1..] {
        assert_eq!(skipped["attempts"], json!([]), "{skipped}");
        assert_eq!(skipped.get("failure"), None, "{skipped}");
    }
    assert_wire_matches_record(&[&a, &b, &c], &settled, "evt_deny");

    // Short-circuit observe: the component hands the host one prepared `hooks/observe`
    // notification per uncalled interceptor, and the host delivers them before the call
    // completes. B and C answer 200 with a JSON body, which is not observe success
    // (202/204, no body): recorded as `http-status`, and the decision is unchanged.
    for (backend, entry) in [(&b, 1), (&c, 2)] {
        let observes = backend.requests_with_method("hooks/observe");
        assert_eq!(observes.len(), 1, "one short-circuit observe each");
        assert!(
            observes[0].json().get("id").is_none(),
            "a notification has no id"
        );
        let sha = sha256_hex(&observes[0].body);
        assert_eq!(
            record_json(&settled)["observers"][entry - 1]["requestSha256"],
            json!(sha)
        );
        assert_eq!(
            record_json(&settled)["observers"][entry - 1]["result"],
            "http-status"
        );
    }
    let record = record_json(&settled);
    let observers = record["observers"]
        .as_array()
        .expect("observers is an array");
    let listed: Vec<(&Value, &Value)> = observers
        .iter()
        .map(|o| (&o["backend"], &o["kind"]))
        .collect();
    assert_eq!(
        listed,
        [
            (&json!(B), &json!("short-circuit")),
            (&json!(C), &json!("short-circuit"))
        ],
        "{}",
        settled.record
    );
    let observe_sha = observers[0]["requestSha256"]
        .as_str()
        .expect("an observer entry carries the hash of its notification");
    assert_eq!(observe_sha.len(), 64);
    assert!(observe_sha
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    // Same event, same subscription settings: the same notification to both.
    assert_eq!(observers[1]["requestSha256"], json!(observe_sha));
    // A notification is not the intercept request.
    assert_ne!(
        json!(observe_sha),
        record_json(&settled)["interceptors"][0]["requestSha256"]
    );
}

/// A fail-open failure is recorded and the chain goes on; the next interceptor's deny
/// then settles the call as an explicit backend denial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fail_open_failure_then_a_deny_is_a_backend_deny() {
    let a = FaultBackend::start(vec![Behaviour::Reset]).await;
    let b = FaultBackend::start(vec![Behaviour::Deny("B forbids this.".into())]).await;
    let chain = [
        Http::new(A, a.url()).policy("fail-open"),
        Http::new(B, b.url()),
    ];
    let settled = settle(&chain, "evt_open_then_deny").await;

    assert_eq!(settled.decision, Decision::Deny, "{}", settled.record);
    assert_eq!(settled.decided_by, DecidedBy::BackendDeny);
    assert_eq!(settled.reason.as_deref(), Some("B forbids this."));
    assert_eq!(record_json(&settled)["decidedBy"], "backend-deny");
    assert_eq!(record_json(&settled)["reason"], "B forbids this.");
    assert_eq!(outcomes(&settled), ["failed-open", "deny"]);
    let first = &record_json(&settled)["interceptors"][0];
    assert_eq!(first["failure"]["class"], "connection-reset", "{first}");
    assert_eq!(first["policy"], "fail-open");
    assert_eq!(
        record_json(&settled)["interceptors"][1].get("failure"),
        None
    );
    assert_eq!(a.requests().len(), 1);
    assert_eq!(b.requests().len(), 1);
    assert!(a.requests()[0].at < b.requests()[0].at);
    assert_eq!(record_json(&settled)["observers"], json!([]));
    assert_wire_matches_record(&[&a, &b], &settled, "evt_open_then_deny");
}

/// A fail-closed failure stops the chain with the synthetic denial: the next interceptor
/// is never asked to decide, even though it would have allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fail_closed_failure_stops_the_chain() {
    let a = FaultBackend::start(vec![Behaviour::Reset]).await;
    let b = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let chain = [
        Http::new(A, a.url()).policy("fail-closed"),
        Http::new(B, b.url()).policy("fail-open"),
    ];
    let settled = settle(&chain, "evt_closed").await;

    assert_eq!(settled.decision, Decision::Deny, "{}", settled.record);
    assert_eq!(settled.decided_by, DecidedBy::SyntheticDeny);
    assert_eq!(settled.reason.as_deref(), Some(SYNTHETIC_REASON));
    assert_eq!(record_json(&settled)["decidedBy"], "synthetic-deny");
    assert_eq!(outcomes(&settled), ["failed-closed", "not-reached"]);
    assert_eq!(
        record_json(&settled)["interceptors"][0]["failure"]["class"],
        "connection-reset"
    );
    assert_eq!(a.requests().len(), 1);
    assert_eq!(
        b.requests_with_method("hooks/intercept").len(),
        0,
        "B was asked to decide after A failed closed"
    );
    assert_eq!(each(&settled, "observers", "backend"), [B]);
    assert_wire_matches_record(&[&a, &b], &settled, "evt_closed");
}

/// Sequential calls to one backend reuse one kept-alive TCP connection, and each call's
/// request carries its own event id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_calls_reuse_one_connection() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let hooks = interceptor(&registration(&[Http::new(A, backend.url())])).await;
    let ids: Vec<String> = (1..=5).map(|n| format!("evt_keepalive_{n}")).collect();
    for id in &ids {
        let settled = call(&hooks, id).await;
        assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
        assert_eq!(outcomes(&settled), ["no-effect"]);
        let last = backend.requests().pop().expect("a request was sent");
        assert_eq!(
            sha256_hex(&last.body),
            record_json(&settled)["interceptors"][0]["requestSha256"]
                .as_str()
                .expect("requestSha256"),
        );
    }
    assert!(backend.wait_for_requests(5, Duration::from_secs(2)).await);
    let received: Vec<Value> = backend
        .requests()
        .iter()
        .map(|r| r.json()["id"].clone())
        .collect();
    assert_eq!(received, ids.iter().map(|id| json!(id)).collect::<Vec<_>>());
    assert_eq!(backend.connections(), 1, "keep-alive was not used");
}
