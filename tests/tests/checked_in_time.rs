//! What the component checks of an event or a backend's reply costs in proportion to
//! their sizes. Each input here, within the caps (a reply of at most a megabyte, an event
//! of a few), once cost the product of two of its sizes: the component then ran past the
//! call's bound (its subscriptions' timeouts and a margin), and the call was an engine
//! failure's denial whatever the subscription's policy, its interceptor missing from the
//! record. Each is now decided as its subscription's policy says, at once.

use ahp_host::{Decision, EffectKind, Interceptor, Options};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::valid_event;
use serde_json::{json, Value};

fn backend(id: &str, url: &str, subscription: Value) -> Value {
    json!({"id": id, "transport": {"type": "http", "url": url}, "subscriptions": [subscription]})
}

/// The record of `event`'s call to one backend per entry of `answers`, in order, each
/// intercepting `kind`, shown everything, fail-open within `timeout_ms`, and answering its
/// effects; checked to be an allow. The component's bound is the timeouts and 1.25 s. An
/// input that once cost the product of its sizes gets 1 s, which the product overran
/// several times; one that ran the component out of memory, 5 s, for the time a loaded
/// machine takes to read and send a megabyte or two.
async fn settled_in_time(
    event: &Value,
    kind: &str,
    answers: Vec<Value>,
    advertised: &[EffectKind],
    timeout_ms: u64,
) -> Value {
    let mut backends = Vec::new();
    for effects in answers {
        backends.push(FaultBackend::start(vec![Behaviour::Effects(effects)]).await);
    }
    let subscription = json!({"events": [kind], "mode": "intercept", "timeoutMs": timeout_ms,
        "failurePolicy": "fail-open", "content": {"default": "body"}});
    let hooks: Vec<Value> = backends
        .iter()
        .enumerate()
        .map(|(n, b)| {
            backend(
                &format!("com.example.answerer{n}"),
                &b.url(),
                subscription.clone(),
            )
        })
        .collect();
    let registration = json!({"protocolVersion": "draft", "hooks": hooks});
    let hooks = Interceptor::new(&registration.to_string(), Options::default())
        .await
        .expect("valid registration");
    let settled = hooks
        .intercept(&event.to_string(), advertised, None)
        .await
        .expect("settled");
    let record: Value = serde_json::from_str(&settled.to_json()).unwrap();
    assert_ne!(record["decidedBy"], "engine-failure");
    assert_eq!(settled.decision, Decision::Allow, "{}", record["decidedBy"]);
    let entries = record["interceptors"].as_array().map(Vec::len);
    assert_eq!(entries, Some(backends.len()), "{}", record["interceptors"]);
    record
}

/// `record` checked to be the backends' allow, every reply accepted (none failed open:
/// late, say).
fn accepted(record: Value) -> Value {
    assert_eq!(record["decidedBy"], "no-objection");
    let failed_open = record["interceptors"]
        .as_array()
        .is_none_or(|entries| entries.iter().any(|entry| entry["outcome"] != "no-effect"));
    assert!(!failed_open, "{}", record["interceptors"]);
    record
}

/// An attachment part of the event: flat, `body` a reference.
fn part(i: usize) -> Value {
    json!({"id": format!("a{i}"), "kind": "attachment", "mediaType": "image/png",
           "selection": "body", "body": {"ref": format!("r{i}")}})
}

/// A reply's attachments are looked up among the event's in time proportional to both:
/// a reply repeating a shown attachment 9,000 times over an event of 9,000 (each under a
/// megabyte) is accepted at once, where comparing each with each (81 million
/// comparisons) ran the component past the call's bound, an engine failure whatever the
/// subscription's policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_repeating_an_attachment_is_checked_in_time() {
    const PARTS: usize = 9000;
    let mut event: Value = serde_json::from_str(&valid_event("tool.after", "evt_many")).unwrap();
    event["items"] =
        json!([{"id": "m1", "role": "tool", "parts": (0..PARTS).map(part).collect::<Vec<_>>()}]);
    let repeated = vec![part(PARTS - 1); PARTS];
    let replacement = json!([{"id": "m2", "role": "tool", "parts": repeated}]);
    let replace = json!([{"type": "modify", "target": "output", "operation": "replace",
                          "value": replacement}]);
    let record = accepted(settled_in_time(&event, "tool.after", vec![replace], &[], 1000).await);
    assert_eq!(record["effective"]["output"], replacement);
}

/// A supplied answer's multi-select is checked against the request's choices in time
/// proportional to both: 100,000 items over 50,000 choices (each side under a megabyte)
/// are accepted at once, where looking through the choices for each item ran the
/// component past the call's bound, an engine failure whatever the subscription's policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_of_many_choices_is_checked_in_time() {
    let choices: Vec<String> = (0..50_000).map(|i| format!("c{i}")).collect();
    let params = json!({"message": "Which?", "requestedSchema": {"type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string", "enum": choices}}}}});
    let mut event: Value =
        serde_json::from_str(&valid_event("user.elicitation.request", "evt_choices")).unwrap();
    event["elicitation"]["request"] = json!({"id": "q1", "kind": "text",
        "mediaType": "text/plain", "selection": "body", "text": params.to_string()});
    let answer = json!({"action": "accept", "content": {"tags": vec!["c49999"; 100_000]}});
    let supplied = json!([{"type": "return", "value": answer}]);
    let advertised = [EffectKind::Deny, EffectKind::Return];
    let kind = "user.elicitation.request";
    let record = accepted(settled_in_time(&event, kind, vec![supplied], &advertised, 1000).await);
    assert_eq!(record["returned"], answer);
}

/// A reply's attachment is looked up only among the event's parts of the schema's shape,
/// each flat: an event holding 120 objects of `kind: attachment` nested in its tool's
/// input around two megabytes (which a model writes) was written out level by level,
/// past the component's memory, once a reply held any attachment. The reply's, one the
/// event does not hold, is a malformed effect, settled by the policy: failed open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_s_attachment_is_looked_up_among_the_event_s_parts_alone() {
    let mut nested = json!("x".repeat(2_200_000));
    for i in 0..120 {
        nested = json!({"id": format!("n{i}"), "kind": "attachment", "mediaType": "image/png",
                        "selection": "body", "x": nested});
    }
    let mut event: Value = serde_json::from_str(&valid_event("tool.after", "evt_nested")).unwrap();
    event["tool"]["input"]["data"] = nested;
    event["items"] = json!([{"id": "m1", "role": "tool", "parts": [part(0)]}]);
    let replacement = json!([{"id": "m2", "role": "tool", "parts": [part(1)]}]);
    let replace = json!([{"type": "modify", "target": "output", "operation": "replace",
                          "value": replacement}]);
    let record = settled_in_time(&event, "tool.after", vec![replace], &[], 5000).await;
    let interceptor = &record["interceptors"][0];
    assert_eq!(interceptor["outcome"], "failed-open", "{interceptor}");
    assert_eq!(interceptor["failure"]["detail"], "malformed-effect");
}

/// An MCP server's arguments are checked for credentials in time proportional to their
/// length: an argument of 65,536 URLs in one word (each URL's query read to the word's
/// end, once per URL) and an option named by 50,000 `pull`s (each looking through the
/// whole name) each ran the component past the call's bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_s_long_arguments_are_checked_in_time() {
    let urls = "x://".repeat(65_536);
    let option = format!("--{}key", "pull-".repeat(50_000));
    for args in [json!([urls]), json!([option, "x"])] {
        let mut event: Value =
            serde_json::from_str(&valid_event("tool.before", "evt_args")).unwrap();
        event["tool"]["origin"] = json!("mcp");
        event["tool"]["mcp"] = json!({"server": {"id": "srv"}, "toolName": "t",
            "provenance": "runtime", "connection": {"transport": "stdio", "command": "srv",
            "args": args, "cwd": "/srv"}});
        accepted(
            settled_in_time(
                &event,
                "tool.before",
                vec![json!([])],
                &[EffectKind::Deny],
                1000,
            )
            .await,
        );
    }
}

/// A JSON array of `chains` one-member objects nested 100 deep (`{"":{"":…0…}}`): 100
/// objects in 501 bytes, the densest value the component reads, some 85 times its text
/// once read.
fn dense(chains: usize) -> Value {
    let chain = format!("{}0{}", "{\"\":".repeat(100), "}".repeat(100));
    serde_json::from_str(&format!("[{}]", vec![chain; chains].join(","))).unwrap()
}

/// A modification is applied to a copy of its target only where it merges into it, its
/// value is moved, not copied, and the effective value is taken out of the effective
/// event: an event whose tool input held 210,000 objects (1 MB) merged into, or two
/// replies each replacing the input with as many (each under the megabyte a reply may
/// be), held three or four copies at once, past the component's 256 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modification_of_a_dense_value_is_applied_within_the_memory_bound() {
    let mut event: Value = serde_json::from_str(&valid_event("tool.before", "evt_dense")).unwrap();
    event["tool"]["input"]["b"] = dense(2100);
    let merge = json!([{"type": "modify", "target": "input", "operation": "merge",
                        "value": {"x": 1}}]);
    let advertised = [EffectKind::Deny, EffectKind::Modify];
    let record = accepted(
        settled_in_time(
            &event,
            "tool.before",
            vec![merge.clone()],
            &advertised,
            5000,
        )
        .await,
    );
    assert_eq!(record["effective"]["input"]["x"], 1);
    assert_eq!(
        record["effective"]["input"]["b"],
        event["tool"]["input"]["b"]
    );

    let replacement = json!({"a": dense(2000)});
    let replace = json!([{"type": "modify", "target": "input", "operation": "replace",
                          "value": replacement}]);
    assert!(replace.to_string().len() < 1 << 20);
    let small: Value = serde_json::from_str(&valid_event("tool.before", "evt_replaced")).unwrap();
    let replaced = settled_in_time(
        &small,
        "tool.before",
        vec![replace.clone(), replace],
        &advertised,
        5000,
    );
    let record = accepted(replaced.await);
    assert_eq!(record["effective"]["input"], replacement);

    let merge_y = json!([{"type": "modify", "target": "input", "operation": "merge",
                          "value": {"y": 1}}]);
    let merged = settled_in_time(
        &event,
        "tool.before",
        vec![merge, merge_y],
        &advertised,
        5000,
    );
    let record = accepted(merged.await);
    let input = &record["effective"]["input"];
    assert_eq!((&input["x"], &input["y"]), (&json!(1), &json!(1)));
    assert_eq!(input["b"], event["tool"]["input"]["b"]);
}
