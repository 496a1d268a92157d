//! `ahp hook copilot`: Copilot CLI's camelCase payloads (github/docs cli-hooks-reference),
//! which name no event (the command line does) and encode `toolArgs` as a JSON string;
//! a denial is its JSON on exit 0.

use ahp_tests::hook::{
    assert_json, assert_silent_no_objection, hook_command, run_command, run_unreachable,
    sent_event, write_unreachable, Contract, Ran, ASK_REASON, FAILED_REASON, MODIFIED_REASON,
};
use serde_json::{json, Value};
use std::path::Path;

fn contract() -> Contract {
    let common = json!({
        "sessionId": "cop-5", "timestamp": 1_796_083_199_000u64, "cwd": "/repo",
        "toolName": "bash", "toolArgs": "{\"command\":\"git reset --hard\"}"
    });
    let mut post = common.clone();
    post["toolResult"] = json!({"resultType": "success", "textResultForLlm": ""});
    Contract {
        harness: "copilot",
        pre_tool: (common, &["--event", "preToolUse"]),
        post_tool: (post, &["--event", "postToolUse"]),
        tool: ("bash", json!({"command": "git reset --hard"})),
        session: json!({"id": "cop-5", "cwd": "/repo"}),
        call_id: None,
        // Copilot's answer has no context field: no `inject`, no `message`.
        advertised: &["deny", "ask", "modify"],
        assert_deny,
        assert_no_objection: assert_silent_no_objection,
        assert_ask: Some(assert_ask),
        assert_modified: Some(assert_modified),
        // Copilot may merge `modifiedArgs` into the model's arguments: merge only.
        modify_operations: &["merge"],
        assert_context: None,
        intercepted: vec![],
        // Before the event is known: its JSON denial on exit 0 all the same.
        assert_blocked_before_the_event: assert_deny,
    }
}

/// Its JSON denial on exit 0, which Copilot reads as one whichever of its references it
/// follows on non-zero exits; nothing on stderr.
fn assert_deny(ran: &Ran, reason: &str) {
    let denial = json!({"permissionDecision": "deny", "permissionDecisionReason": reason});
    assert_json(ran, 0, denial);
    assert_eq!(ran.stderr, "", "{ran:?}");
}

/// The changed arguments in `modifiedArgs`, with `ask` (never `allow`, a grant, and
/// never without a decision, which the contract does not say Copilot applies): the user
/// approves the call that will really run.
fn assert_modified(ran: &Ran, input: &Value) {
    assert_json(
        ran,
        0,
        json!({"permissionDecision": "ask", "permissionDecisionReason": MODIFIED_REASON,
            "modifiedArgs": input}),
    );
}

/// The ask alone, with the generic reason: no `modifiedArgs` (the input never written
/// back).
fn assert_ask(ran: &Ran) {
    let ask = json!({"permissionDecision": "ask", "permissionDecisionReason": ASK_REASON});
    assert_json(ran, 0, ask);
}

/// A payload that names no event, run without `--event`: the harness's denial, naming
/// what is missing; with `hookEventName` in the payload no flag is needed.
#[tokio::test]
async fn a_payload_without_an_event_needs_the_flag() {
    let (payload, _) = contract().pre_tool;
    let ran = run_unreachable("copilot", &[], &payload).await;
    assert_deny_everywhere(&ran);
    assert!(ran.log.contains("names no hook event"), "{ran:?}");
    let mut named = payload;
    named["hookEventName"] = json!("sessionEnd");
    let ran = run_unreachable("copilot", &[], &named).await;
    assert_eq!((ran.code, ran.stdout.as_str()), (0, ""), "{ran:?}");
}

/// Copilot's Claude-compatible form: the PascalCase event name with snake_case fields is
/// the same event, the same `tool.before` the backend is asked about.
#[tokio::test]
async fn the_pascal_case_form_is_the_same_event() {
    let payload = json!({"session_id": "cop-6", "hook_event_name": "PreToolUse",
        "tool_name": "bash", "tool_input": {"command": "ls"}});
    for flag in [&[][..], &["--event", "preToolUse"][..]] {
        let sent = sent_event("copilot", flag, &payload, "hooks/intercept").await;
        assert_silent_no_objection(&sent.ran);
        let event = &sent.event;
        assert_eq!(event["type"], "tool.before", "{event}");
        assert_eq!(event["tool"]["name"], "bash", "{event}");
        assert_eq!(event["tool"]["input"], json!({"command": "ls"}), "{event}");
        assert_eq!(event["session"]["id"], "cop-6", "{event}");
    }
}

/// A denial before the event is known: Copilot's JSON denial on exit 0.
fn assert_deny_everywhere(ran: &Ran) {
    assert_deny(ran, ahp_tests::hook::FAILED_REASON);
}

ahp_tests::hook_contract_tests!(contract());

/// A failure's details (here the registry's address) stay out of Copilot's denial, which
/// the model may read: the generic reason alone, nothing on stderr; they are logged for
/// an operator who asks (`AHP_LOG=warn`), in `AHP_LOG_FILE`.
#[tokio::test]
async fn failure_details_never_reach_the_model() {
    let quiet = run_with_closed_registry(None).await;
    assert_deny(&quiet, FAILED_REASON);
    let logged = run_with_closed_registry(Some("warn")).await;
    assert_deny(&logged, FAILED_REASON);
    assert!(!logged.stdout.contains("127.0.0.1"), "{logged:?}");
    assert!(logged.log.contains("127.0.0.1:9"), "{logged:?}");
}

/// A component that traps is an engine failure, logged with the trap's backtrace: with
/// no `AHP_LOG`, none of it is in the answer or on stderr.
#[tokio::test]
async fn a_trapping_component_shows_the_model_only_the_reason() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let component = dir.path().join("runaway.wasm");
    std::fs::write(&component, ahp_tests::support::runaway_component()).expect("write");
    let registration = dir.path().join("panic.json");
    std::fs::write(&registration, r#"{"panic": true}"#).expect("write");
    let ran = run_failing(&registration, component.to_str().expect("a path"), None).await;
    assert_deny(&ran, FAILED_REASON);
    // Logged, with the trap, only for an operator who asks: this denial is the trap's,
    // not a load failure's.
    let logged = run_failing(
        &registration,
        component.to_str().expect("a path"),
        Some("warn"),
    )
    .await;
    assert_deny(&logged, FAILED_REASON);
    assert!(logged.log.contains("component trapped"), "{logged:?}");
    assert!(
        !format!("{}{}", logged.stdout, logged.stderr).contains("trap"),
        "{logged:?}"
    );
}

/// The pre-tool payload with the component pulled from a closed port, `AHP_LOG` as given.
async fn run_with_closed_registry(log: Option<&str>) -> Ran {
    let dir = tempfile::tempdir().expect("a temp dir");
    let registration = write_unreachable(dir.path());
    run_failing(&registration, "oci://127.0.0.1:9/ahp/interceptor:0.1", log).await
}

/// The pre-tool payload on `component` with `registration`, `AHP_LOG` as given.
async fn run_failing(registration: &Path, component: &str, log: Option<&str>) -> Ran {
    let (payload, args) = contract().pre_tool;
    let mut all = args.to_vec();
    all.extend(["--component", component]);
    let mut command = hook_command("copilot", registration, &all);
    match log {
        Some(level) => command.env("AHP_LOG", level),
        None => command.env_remove("AHP_LOG"),
    };
    run_command(command, payload.to_string().as_bytes(), true).await
}

/// What Copilot says of the failed call in [`failed_call`]: a marker no backend may see
/// without `includeNative`.
const FAILURE_WORDS: &str = "fatal: secret-marker-5c1e rejected";

/// A `postToolUseFailure` payload, which Copilot CLI (1.0.15 on) sends after a tool call
/// whose result was a failure (instead of `postToolUse`): the contract's call, its
/// `error` the failure's message.
fn failed_call() -> Value {
    let (mut payload, _) = contract().pre_tool;
    payload["error"] = json!(FAILURE_WORDS);
    payload
}

const AFTER_A_FAILURE: &[&str] = &["--event", "postToolUseFailure"];

/// A failed call reaches tool.after's observers as that call's `tool.after`: the tool's
/// name and parsed arguments, run (`executed`), `outcome: "error"` with the generic error
/// (Copilot's words only in `native`, not sent without `includeNative`), and the call id
/// synthesized for its `tool.before`, the same session, tool and arguments. Copilot reads
/// no answer: none is given.
#[tokio::test]
async fn a_failed_call_is_its_tool_after_with_an_error() {
    use ahp_tests::hook::sent_event;
    let contract = contract();
    let (pre, pre_args) = &contract.pre_tool;
    let before = sent_event("copilot", pre_args, pre, "hooks/intercept").await;
    let sent = sent_event("copilot", AFTER_A_FAILURE, &failed_call(), "hooks/observe").await;
    assert_silent_no_objection(&sent.ran);
    let event = &sent.event;
    assert_eq!(event["type"], "tool.after", "{event}");
    assert_eq!(event["tool"]["name"], "bash", "{event}");
    assert_eq!(event["tool"]["input"], contract.tool.1, "{event}");
    assert_eq!(event["outcome"], "error", "{event}");
    let generic = json!({"class": "operation", "message": "The tool call failed."});
    assert_eq!(event["error"], generic, "{event}");
    assert_eq!(event["execution"], json!({"status": "executed"}), "{event}");
    assert_eq!(event["call"]["synthesized"], true, "{event}");
    assert_eq!(event["call"], before.event["call"], "{}", before.event);
    assert!(!sent.body.contains("secret-marker-5c1e"), "{}", sent.body);
}

/// With `includeNative` Copilot's words for the failure reach the observer, in `native`
/// (the whole payload, named as the event it came from).
#[tokio::test]
async fn a_failed_call_s_error_is_in_native() {
    use ahp_tests::fault_backend::{Behaviour, FaultBackend};
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = ahp_tests::hook::write_registration(dir.path(), &backend.url(), "fail-open", false);
    let mut registration: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("JSON");
    let observer = &mut registration["hooks"][0]["subscriptions"][1];
    assert_eq!(observer["mode"], "observe", "{observer}");
    observer["includeNative"] = json!(true);
    observer["content"] = json!({"default": "body"});
    std::fs::write(&path, registration.to_string()).expect("write");
    let stdin = failed_call().to_string();
    let ran = ahp_tests::hook::run_hook("copilot", &path, AFTER_A_FAILURE, stdin.as_bytes()).await;
    assert_silent_no_objection(&ran);
    let requests = backend.requests_with_method("hooks/observe");
    assert_eq!(requests.len(), 1, "{ran:?}");
    let event = &requests[0].json()["params"]["event"];
    assert_eq!(event["outcome"], "error", "{event}");
    assert_eq!(
        event["native"]["payload"]["error"], FAILURE_WORDS,
        "{event}"
    );
    let generic = json!({"class": "operation", "message": "The tool call failed."});
    assert_eq!(event["error"], generic, "{event}");
}

/// A payload the adapter cannot read (no `toolName`) is its failure, answered after a
/// failed call as after a successful one: both only observed, it is logged and not
/// answered.
#[tokio::test]
async fn after_a_failed_call_a_failure_is_answered_as_after_a_success() {
    let mut payload = failed_call();
    payload
        .as_object_mut()
        .expect("an object")
        .remove("toolName");
    let failed = run_unreachable("copilot", AFTER_A_FAILURE, &payload).await;
    let post = run_unreachable("copilot", &["--event", "postToolUse"], &payload).await;
    assert!(failed.log.contains("toolName"), "{failed:?}");
    let answer = |ran: &Ran| (ran.code, ran.stdout.clone(), ran.stderr.clone());
    assert_eq!(answer(&failed), answer(&post), "{failed:?} {post:?}");
    // Both only observed: the failure is logged, and no answer.
    assert_eq!(
        answer(&failed),
        (0, String::new(), String::new()),
        "{failed:?}"
    );
}
