//! Content selection (AHP-CONTENT-002): each backend is sent the event with every content
//! part lowered to its own subscription's `content` — the text of a part it may only
//! describe never reaches it, whether it intercepts or observes — while a subscription
//! that may read everything is sent the harness's bytes untouched.

use ahp_host::{Decision, Interceptor, Options};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{sha256_hex, valid_event};
use serde_json::{json, Value};
use std::time::Duration;

/// A word that appears only in the bodies of the event's parts.
const SECRET: &str = "hunter2";
const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

/// A `tool.after` whose result (`items`: the tool's message, then the model's) carries a
/// text part and an image.
fn event_with_parts() -> String {
    let mut event: Value = serde_json::from_str(&valid_event("tool.after", "evt_content")).unwrap();
    let text = json!({"id": "p_text", "kind": "text", "mediaType": "text/plain",
        "selection": "body", "text": format!("password={SECRET}")});
    let image = json!({"id": "p_image", "kind": "attachment", "mediaType": "image/png",
        "selection": "body", "body": {"ref": format!("blob-{SECRET}")}, "size": 4, "sha256": HASH});
    event["items"] = json!([
        {"id": "m1", "role": "tool", "parts": [text.clone(), image]},
        {"id": "m2", "role": "assistant", "parts": [text]}
    ]);
    event.to_string()
}

fn subscription(mode: &str, content: Value) -> Value {
    match mode {
        "intercept" => json!({"events": ["tool.after"], "mode": "intercept", "timeoutMs": 2000,
                              "failurePolicy": "fail-closed", "content": content}),
        _ => json!({"events": ["tool.after"], "mode": "observe", "content": content}),
    }
}

fn backend(id: &str, url: &str, subscription: Value) -> Value {
    json!({"id": id, "transport": {"type": "http", "url": url}, "subscriptions": [subscription]})
}

/// The event as the backend received it.
fn received(backend: &FaultBackend, method: &str) -> (Value, String) {
    let requests = backend.requests_with_method(method);
    assert_eq!(requests.len(), 1, "{method}");
    let body = String::from_utf8(requests[0].body.clone()).unwrap();
    let message: Value = serde_json::from_str(&body).unwrap();
    (message["params"]["event"].clone(), body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_backend_sees_the_parts_only_as_its_selection_allows() {
    let body = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let describe = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let observer = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let registration = json!({"protocolVersion": "draft", "hooks": [
        backend("com.example.body", &body.url(),
                subscription("intercept", json!({"default": "body"}))),
        backend("com.example.describe", &describe.url(),
                subscription("intercept", json!({"default": "omit", "text": "metadata"}))),
        backend("com.example.observer", &observer.url(),
                subscription("observe", json!({"default": "metadata"}))),
    ]});
    let hooks = Interceptor::new(&registration.to_string(), Options::default())
        .await
        .expect("valid registration");
    // Written as no encoder of ours would (a member out of order, an escape that need not
    // be one), so that only the harness's own bytes can match what is sent.
    let event = event_with_parts().replacen('{', r#"{"zz":"\u0041", "#, 1);
    let settled = hooks.intercept(&event, &[], None).await.expect("settled");
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.to_json());
    assert!(observer.wait_for_requests(1, Duration::from_secs(5)).await);

    // Everything allowed: the harness's own bytes.
    let (_, sent) = received(&body, "hooks/intercept");
    assert!(sent.contains(&event), "{sent}");

    // Text as metadata, the image (category `images`, the default) omitted.
    let (seen, sent) = received(&describe, "hooks/intercept");
    assert!(!sent.contains(SECRET), "{sent}");
    assert_eq!(
        seen["items"][0]["parts"],
        json!([
            {"id": "p_text", "kind": "text", "mediaType": "text/plain", "selection": "metadata"},
            {"id": "p_image", "kind": "attachment", "mediaType": "image/png", "selection": "omit"}
        ])
    );
    assert_eq!(seen["items"][1]["parts"][0]["selection"], "metadata");
    assert_eq!(
        seen["tool"]["input"],
        json!({"command": "ls"}),
        "the input is not content"
    );
    assert_eq!(seen["id"], "evt_content");

    // The observer describes both parts, the image with its size and hash.
    let (seen, sent) = received(&observer, "hooks/observe");
    assert!(!sent.contains(SECRET), "{sent}");
    let image = &seen["items"][0]["parts"][1];
    assert_eq!(image["selection"], "metadata", "{seen}");
    assert_eq!(
        (image["size"].clone(), image["sha256"].clone()),
        (json!(4), json!(HASH))
    );
    assert!(image.get("body").is_none(), "{seen}");

    // Each interceptor's audit names the bytes it was sent, and so does the observer's.
    let record: Value = serde_json::from_str(&settled.to_json()).unwrap();
    let recorded: Vec<&Value> = record["interceptors"]
        .as_array()
        .unwrap()
        .iter()
        .chain(record["observers"].as_array().unwrap())
        .map(|entry| &entry["requestSha256"])
        .collect();
    let sent: Vec<Value> = [(&body, "hooks/intercept"), (&describe, "hooks/intercept")]
        .into_iter()
        .chain([(&observer, "hooks/observe")])
        .map(|(backend, method)| json!(sha256_hex(&backend.requests_with_method(method)[0].body)))
        .collect();
    assert_eq!(recorded, sent.iter().collect::<Vec<_>>(), "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_a_backend_adds_is_lowered_for_the_next_one() {
    // The first backend replaces the tool's output (the event's `items`) with a message of
    // its own; the second
    // may only describe text, and is sent the modified event.
    let replacement = json!([{"id": "out2", "role": "tool", "parts": [{"id": "p_new",
        "kind": "text", "mediaType": "text/plain", "selection": "body",
        "text": format!("redacted but {SECRET}")}]}]);
    let modify = json!([{"type": "modify", "target": "output", "operation": "replace",
                         "value": replacement}]);
    let first = FaultBackend::start(vec![Behaviour::Effects(modify)]).await;
    let second = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let registration = json!({"protocolVersion": "draft", "hooks": [
        backend("com.example.first", &first.url(),
                subscription("intercept", json!({"default": "body"}))),
        backend("com.example.second", &second.url(),
                subscription("intercept", json!({"default": "metadata"}))),
    ]});
    let hooks = Interceptor::new(&registration.to_string(), Options::default())
        .await
        .expect("valid registration");
    let event: Value = serde_json::from_str(&valid_event("tool.after", "evt_added")).unwrap();
    let settled = hooks
        .intercept(&event.to_string(), &[], None)
        .await
        .expect("settled");
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.to_json());
    let (seen, sent) = received(&second, "hooks/intercept");
    assert!(!sent.contains(SECRET), "{sent}");
    assert_eq!(
        seen["items"][0]["parts"][0],
        json!({"id": "p_new", "kind": "text", "mediaType": "text/plain", "selection": "metadata"})
    );
}

/// A part a backend merges into an event an earlier backend modified (the change made in
/// place) is lowered for the next backend as any other: the event's least claimed
/// selection takes it in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_merged_into_a_modified_event_is_lowered_for_the_next_one() {
    let emptied = json!([{"type": "modify", "target": "output", "operation": "replace",
                          "value": [{"id": "out1", "role": "tool", "parts": []}]}]);
    let added = json!([{"id": "out2", "role": "tool", "parts": [{"id": "p_new",
        "kind": "text", "mediaType": "text/plain", "selection": "body",
        "text": format!("merged {SECRET}")}]}]);
    let merge = json!([{"type": "modify", "target": "output", "operation": "merge",
                        "value": added}]);
    let first = FaultBackend::start(vec![Behaviour::Effects(emptied)]).await;
    let second = FaultBackend::start(vec![Behaviour::Effects(merge)]).await;
    let third = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let registration = json!({"protocolVersion": "draft", "hooks": [
        backend("com.example.first", &first.url(),
                subscription("intercept", json!({"default": "body"}))),
        backend("com.example.second", &second.url(),
                subscription("intercept", json!({"default": "body"}))),
        backend("com.example.third", &third.url(),
                subscription("intercept", json!({"default": "metadata"}))),
    ]});
    let hooks = Interceptor::new(&registration.to_string(), Options::default())
        .await
        .expect("valid registration");
    let mut event: Value = serde_json::from_str(&valid_event("tool.after", "evt_merged")).unwrap();
    event["items"] = json!([{"id": "m1", "role": "tool", "parts": []}]);
    let settled = hooks
        .intercept(&event.to_string(), &[], None)
        .await
        .expect("settled");
    let record: Value = serde_json::from_str(&settled.to_json()).unwrap();
    assert_eq!(settled.decision, Decision::Allow, "{record}");
    assert_eq!(record["effective"]["output"][1]["id"], "out2", "{record}");
    let (seen, sent) = received(&third, "hooks/intercept");
    assert!(!sent.contains(SECRET), "{sent}");
    assert_eq!(seen["items"][1]["parts"][0]["selection"], "metadata");
}

/// A whole-list replacement is neither offered nor accepted where the target holds
/// content the subscription was not shown whole (composition.md@8f91ac4): lowered by its
/// selection, or a body part with a gap. A merge, which drops nothing, still is. Each
/// backend replies with a replacement of the output anyway: fail-closed, a synthetic
/// denial as an unadvertised effect, the output left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_of_content_not_shown_whole_is_not_offered() {
    let replacement = json!([{"id": "out2", "role": "tool", "parts": [{"id": "p_new",
        "kind": "text", "mediaType": "text/plain", "selection": "body", "text": "nothing"}]}]);
    let replace = json!([{"type": "modify", "target": "output", "operation": "replace",
                          "value": replacement}]);
    let mut gapped: Value = serde_json::from_str(&event_with_parts()).unwrap();
    gapped["items"][1]["parts"][0] = json!({"id": "p_gap", "kind": "text",
        "mediaType": "text/plain", "selection": "body",
        "gap": {"reason": "too-large"}});
    let cases = [
        (
            "described",
            json!({"default": "metadata"}),
            event_with_parts(),
        ),
        (
            "images omitted",
            json!({"default": "body", "images": "omit"}),
            event_with_parts(),
        ),
        ("a gap", json!({"default": "body"}), gapped.to_string()),
    ];
    for (case, content, event) in cases {
        let backend_ = FaultBackend::start(vec![Behaviour::Effects(replace.clone())]).await;
        let registration = json!({"protocolVersion": "draft", "hooks": [
            backend("com.example.replacer", &backend_.url(), subscription("intercept", content)),
        ]});
        let hooks = Interceptor::new(&registration.to_string(), Options::default())
            .await
            .expect("valid registration");
        let settled = hooks.intercept(&event, &[], None).await.expect("settled");
        let record: Value = serde_json::from_str(&settled.to_json()).unwrap();
        assert_eq!(
            (&record["decision"], &record["decidedBy"]),
            (&json!("deny"), &json!("synthetic-deny")),
            "{case}: {record}"
        );
        let failure = &record["interceptors"][0]["failure"];
        assert_eq!(
            (&failure["class"], &failure["detail"]),
            (&json!("invalid-effects"), &json!("unadvertised-effect")),
            "{case}: {record}"
        );
        assert!(record.get("effective").is_none(), "{case}: {record}");
        let requests = backend_.requests_with_method("hooks/intercept");
        let sent: Value = serde_json::from_slice(&requests[0].body).unwrap();
        assert_eq!(
            sent["params"]["capabilities"]["modify"],
            json!({"output": {"merge": true, "replace": false}}),
            "{case}"
        );
    }

    // Shown everything, whole: offered, and the output replaced.
    let backend_ = FaultBackend::start(vec![Behaviour::Effects(replace)]).await;
    let registration = json!({"protocolVersion": "draft", "hooks": [
        backend("com.example.replacer", &backend_.url(),
                subscription("intercept", json!({"default": "body"}))),
    ]});
    let hooks = Interceptor::new(&registration.to_string(), Options::default())
        .await
        .expect("valid registration");
    let settled = hooks
        .intercept(&event_with_parts(), &[], None)
        .await
        .expect("settled");
    let record: Value = serde_json::from_str(&settled.to_json()).unwrap();
    assert_eq!(settled.decision, Decision::Allow, "{record}");
    assert_eq!(record["effective"]["output"], replacement, "{record}");
    let sent: Value =
        serde_json::from_slice(&backend_.requests_with_method("hooks/intercept")[0].body).unwrap();
    assert_eq!(
        sent["params"]["capabilities"]["modify"],
        json!({"output": {"merge": true, "replace": true}})
    );
}
