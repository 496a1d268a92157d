//! The capability handshake end to end: what the harness declares at load decides which
//! intercept subscriptions load, and each request's `params.capabilities` is exactly that
//! declaration for the event, narrowed by the call. `ahp intercept` takes any
//! interceptable event.

use ahp_host::vocab::{EventCapability, InterceptableEvent, ModifyCapability, ModifyTarget};
use ahp_host::{Declaration, EffectKind, Interceptor, Options};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::ahp_command;
use serde_json::{json, Value};

fn registration(url: &str, events: &[&str]) -> String {
    json!({"protocolVersion": "draft", "hooks": [{
        "id": "com.example.policy", "transport": {"type": "http", "url": url},
        "subscriptions": [{"events": events, "mode": "intercept", "timeoutMs": 1000,
                           "failurePolicy": "fail-closed", "content": {"default": "body"}}]}]})
    .to_string()
}

fn tool_after(id: &str) -> String {
    json!({"id": id, "source": "urn:ahp:test", "type": "tool.after", "time": "2026-11-30T12:00:01Z",
           "session": {"id": "sess_hs"}, "call": {"id": "call_hs"}, "path": "native",
           "tool": {"name": "Bash", "input": {"command": "ls"}, "origin": "native"},
           "outcome": "ok", "execution": {"status": "executed"},
           "items": [{"id": "out_hs", "role": "tool", "parts": []}]})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undeclared_intercept_event_is_refused_at_load() {
    let reg = registration("http://127.0.0.1:9/hooks", &["model.request.before"]);
    let options = Options {
        declaration: Declaration::Events(vec![InterceptableEvent::ToolBefore]),
        ..Options::default()
    };
    let error = Interceptor::new(&reg, options)
        .await
        .err()
        .expect("refused");
    let problems: Vec<String> = error.problems().iter().map(ToString::to_string).collect();
    assert_eq!(
        problems,
        ["/hooks/0/subscriptions/0/events/0: \"model.request.before\" is not declared interceptable by this harness"]
    );
    Interceptor::new(&reg, Options::default())
        .await
        .expect("declared by default");
}

/// A declaration the component refuses is the embedder's setup error, named by its
/// option: not an invalid registration at `declaration[1]`, a path no registration has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declaration_the_component_refuses_is_named_as_the_option() {
    let reg = registration("http://127.0.0.1:9/hooks", &["tool.before"]);
    let no_deny = EventCapability {
        event: InterceptableEvent::ToolBefore,
        effects: vec![EffectKind::Message],
        modify: None,
        flow: None,
        inject: Vec::new(),
    };
    for (declaration, said) in [
        (
            Declaration::Events(vec![InterceptableEvent::ToolBefore; 2]),
            "declaration[1]: tool.before is declared twice",
        ),
        (
            Declaration::Exactly(vec![no_deny]),
            "declaration[0]/effects: must include \"deny\" (tool.before can be denied)",
        ),
    ] {
        let options = Options {
            declaration,
            ..Options::default()
        };
        let error = Interceptor::new(&reg, options)
            .await
            .err()
            .expect("refused");
        assert!(error.is_setup() && error.problems().is_empty(), "{error}");
        assert_eq!(
            error.to_string(),
            format!("setup failed: Options::declaration: {said}")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn params_capabilities_are_the_declaration_narrowed_by_the_call() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let declared = EventCapability {
        event: InterceptableEvent::ToolAfter,
        effects: vec![EffectKind::Modify, EffectKind::Message],
        modify: Some(ModifyCapability {
            target: ModifyTarget::Output,
            replace: false,
            merge: true,
        }),
        flow: None,
        inject: Vec::new(),
    };
    let options = Options {
        declaration: Declaration::Exactly(vec![declared]),
        ..Options::default()
    };
    let hooks = Interceptor::new(&registration(&backend.url(), &["tool.*"]), options)
        .await
        .expect("tool.* reaches tool.after");
    hooks
        .intercept(&tool_after("evt_hs_1"), &[], None)
        .await
        .expect("as declared");
    hooks
        .intercept(&tool_after("evt_hs_2"), &[EffectKind::Message], None)
        .await
        .expect("narrowed");
    let error = hooks
        .intercept(&tool_after("evt_hs_3"), &[EffectKind::Deny], None)
        .await
        .expect_err("deny is not declared for tool.after");
    assert_eq!(error.problems()[0].path, "effects[0]");
    let sent: Vec<Value> = backend
        .requests()
        .iter()
        .map(|r| r.json()["params"]["capabilities"].clone())
        .collect();
    assert_eq!(
        sent,
        [
            json!({"effects": ["modify", "message"], "modify": {"output": {"replace": false, "merge": true}}}),
            json!({"effects": ["message"]}),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_intercepts_any_interceptable_event_and_checks_the_declaration() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let dir = tempfile::tempdir().unwrap();
    let reg = dir.path().join("registration.json");
    std::fs::write(&reg, registration(&backend.url(), &["tool.after"])).unwrap();
    let event = dir.path().join("event.json");
    std::fs::write(&event, tool_after("evt_hs_cli")).unwrap();

    let check = ahp_command()
        .args([
            "check",
            reg.to_str().unwrap(),
            "--interceptable",
            "tool.before,session.start",
        ])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(
        stderr.contains("/hooks/0/subscriptions/0/events/0") && stderr.contains("tool.after"),
        "{stderr}"
    );

    let intercept = ahp_command()
        .args([
            "intercept",
            "--registration",
            reg.to_str().unwrap(),
            "--event",
        ])
        .arg(&event)
        .output()
        .unwrap();
    assert_eq!(
        intercept.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&intercept.stderr)
    );
    let record: Value = serde_json::from_slice(&intercept.stdout).unwrap();
    assert_eq!(record["event"]["type"], "tool.after");
    assert_eq!(record["decidedBy"], "no-objection");
    let request = backend.requests()[0].json();
    assert_eq!(
        request["params"]["capabilities"]["effects"],
        json!(["modify", "inject", "flow", "message"])
    );
}
