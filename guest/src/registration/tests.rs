//! The parse contract: the upstream registration fixtures, the registration conformance
//! checks (`r1_`..`r16_` are R1..R16 of `conformance-checks.md`) and the rules between
//! them. Most tests edit one field of a valid document and check that the problem (or
//! warning) names that field's JSON Pointer.

use super::*;
use crate::content::Selection;
use crate::syntax::SECRET_NAMES;
use serde_json::{json, Value};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/upstream/fixtures/draft/registration"
);
/// Where each invalid fixture is wrong: every one is listed here (a new one is added).
const OFFENDING: &[(&str, &str)] = &[
    (
        "content-default-missing",
        "/hooks/0/subscriptions/0/content/default",
    ),
    ("empty-hooks", "/hooks"),
    (
        "intercept-content-missing",
        "/hooks/0/subscriptions/0/content",
    ),
    (
        "intercept-observation-event",
        "/hooks/0/subscriptions/0/events/0",
    ),
    ("literal-token", "/hooks/0/authentication/token"),
    ("mtls", "/hooks/0/authentication/type"),
    (
        "observe-content-missing",
        "/hooks/1/subscriptions/1/content",
    ),
    (
        "observe-policy-fields",
        "/hooks/0/subscriptions/0/failurePolicy",
    ),
    ("workload", "/hooks/0/authentication/type"),
];

/// A valid document: an http bearer backend with one intercept subscription (`$i`),
/// then a stdio backend with one observe subscription (`$o`).
fn base() -> Value {
    json!({ "protocolVersion": "draft", "hooks": [
        { "id": "com.example.policy",
          "transport": { "type": "http", "url": "https://policy.example.com/hooks" },
          "authentication": { "type": "bearer", "tokenEnv": "AHP_TOKEN" },
          "subscriptions": [{ "events": ["tool.before"], "mode": "intercept",
              "timeoutMs": 750, "failurePolicy": "fail-closed",
              "content": { "default": "metadata" } }] },
        { "id": "com.example.local",
          "transport": { "type": "stdio", "command": "review", "lifecycle": "per_event" },
          "subscriptions": [{ "events": ["*"], "mode": "observe",
              "content": { "default": "omit" } }] }
    ]})
}

/// Test pointers may say `$i`, `$o` (see [`base`]) and `$a` (the first backend's auth).
fn expand(pointer: &str) -> String {
    let auth = "/hooks/0/authentication";
    let (intercept, observe) = ("/hooks/0/subscriptions/0", "/hooks/1/subscriptions/0");
    pointer
        .replace("$i", intercept)
        .replace("$o", observe)
        .replace("$a", auth)
}

/// [`base`] with each `(pointer, JSON text)` set, or removed when the text is empty.
fn edited(edits: &[(&str, &str)]) -> String {
    let mut doc = base();
    for (pointer, text) in edits {
        let pointer = expand(pointer);
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let value = serde_json::from_str(text).ok();
        match (doc.pointer_mut(parent).unwrap(), value) {
            (Value::Object(obj), Some(value)) => drop(obj.insert(key.into(), value)),
            (Value::Object(obj), None) => drop(obj.remove(key)),
            (Value::Array(items), Some(value)) => items[key.parse::<usize>().unwrap()] = value,
            _ => panic!("cannot edit {pointer}"),
        }
    }
    doc.to_string()
}

fn accepted(edits: &[(&str, &str)]) -> Registration {
    parse(&edited(edits)).unwrap_or_else(|p| panic!("{edits:?} rejected: {p:#?}"))
}

/// The first subscription's timeout, which the base document makes fail-closed.
fn fail_closed_timeout(reg: &Registration) -> u64 {
    match reg.backends[0].subscriptions[0].mode {
        Mode::Intercept {
            timeout_ms,
            policy: FailurePolicy::FailClosed,
        } => timeout_ms,
        ref other => panic!("not a fail-closed interceptor: {other:?}"),
    }
}

fn rejected_at(edits: &[(&str, &str)], path: &str) -> Vec<Problem> {
    let problems = parse(&edited(edits)).expect_err(&format!("{edits:?} accepted"));
    let path = expand(path);
    assert!(
        problems.iter().any(|p| p.path == path),
        "{edits:?}: want {path}, got {problems:#?}"
    );
    problems
}

/// `marker` (a secret's value) appears in none of `problems`, shown or debugged.
fn assert_never_echoed(problems: &[Problem], marker: &str) {
    assert!(
        problems
            .iter()
            .all(|p| !format!("{p}{p:?}").contains(marker)),
        "{problems:#?}"
    );
}

/// Each case sets one field and must be rejected with a problem at the given path.
fn rejects(cases: &[(&str, &str, &str)]) {
    for (pointer, text, path) in cases {
        rejected_at(&[(pointer, text)], path);
    }
}

/// Every fixture is read as its name says; an invalid one at the place [`OFFENDING`]
/// names for it, which names every invalid fixture (a new one is added there) and no
/// other.
#[test]
fn every_fixture_is_accepted_iff_it_is_named_valid() {
    let mut count = 0;
    let mut invalid = Vec::new();
    for entry in std::fs::read_dir(FIXTURES).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let text = std::fs::read_to_string(format!("{FIXTURES}/{name}")).unwrap();
        count += 1;
        if name.ends_with(".valid.json") {
            parse(&text).unwrap_or_else(|p| panic!("{name} rejected: {p:#?}"));
        } else if let Some(stem) = name.strip_suffix(".invalid.json") {
            let problems = parse(&text).expect_err(&name);
            let (_, path) = OFFENDING
                .iter()
                .find(|(s, _)| *s == stem)
                .unwrap_or_else(|| panic!("{name}: its place is not in OFFENDING"));
            assert!(
                problems.iter().any(|p| p.path == *path),
                "{name}: {problems:#?}"
            );
            invalid.push(stem.to_owned());
            let echoed = |p: &Problem| p.to_string().contains("do-not-store-literal-tokens");
            assert!(!problems.iter().any(echoed), "{name} echoes a secret");
        }
    }
    assert!(count > 0, "no fixtures found in {FIXTURES}");
    invalid.sort();
    let mut named: Vec<&str> = OFFENDING.iter().map(|(stem, _)| *stem).collect();
    named.sort();
    assert_eq!(
        invalid, named,
        "OFFENDING names exactly the invalid fixtures"
    );
}

#[test]
fn r1_portable_fixture_keeps_two_backends_and_three_subscriptions_in_order() {
    let text = std::fs::read_to_string(format!("{FIXTURES}/portable.valid.json")).unwrap();
    let reg = parse(&text).unwrap();
    let sub = |index, event: &str, mode| Subscription {
        index,
        events: vec![EventPattern::Exact(event.into())],
        mode,
        view: View {
            include_native: false,
            content: Content::all(Selection::Metadata),
        },
    };
    let intercept = |timeout_ms, policy| Mode::Intercept { timeout_ms, policy };
    let policy = Backend {
        id: "com.example.policy".into(),
        transport: Transport::Http {
            url: "https://policy.example.com/agent-hooks".into(),
        },
        auth: Some(Auth::BearerEnv("AHP_POLICY_TOKEN".into())),
        subscriptions: vec![sub(
            0,
            "tool.before",
            intercept(750, FailurePolicy::FailClosed),
        )],
    };
    let review = Backend {
        id: "com.example.local_review".into(),
        transport: Transport::Stdio {
            command: "/usr/local/bin/local-review".into(),
            args: vec!["serve".into()],
            cwd: None,
            lifecycle: Lifecycle::Persistent,
        },
        auth: None,
        subscriptions: vec![
            sub(0, "tool.before", intercept(500, FailurePolicy::FailOpen)),
            sub(1, "tool.after", Mode::Observe),
        ],
    };
    assert_eq!(
        reg,
        Registration {
            backends: vec![policy, review.clone()],
            warnings: vec![]
        }
    );
    assert_eq!(reg.backend("com.example.local_review"), Some(&review));
    assert_eq!(FailurePolicy::FailOpen.as_str(), "fail-open");
}

#[test]
fn text_that_is_not_a_json_object_is_one_problem_at_the_root() {
    let problems = parse("{\"hooks\": [").unwrap_err();
    assert_eq!(problems.len(), 1);
    assert_eq!(
        (
            problems[0].path.as_str(),
            problems[0].to_string().contains("line 1")
        ),
        ("", true)
    );
    assert_eq!(
        parse("[]").unwrap_err()[0].to_string(),
        "/: must be an object, found an array"
    );
}

/// A member named twice, at any depth, is one problem at its pointer: reading either
/// occurrence would let the document say two things (here: fail-closed and fail-open).
#[test]
fn a_member_named_twice_is_one_problem_at_its_pointer() {
    let valid = base().to_string();
    for (member, repeat, path) in [
        (
            r#""protocolVersion":"draft""#,
            r#""protocolVersion":"draft""#,
            "/protocolVersion",
        ),
        (
            r#""id":"com.example.policy""#,
            r#""id":"com.example.other""#,
            "/hooks/0/id",
        ),
        (
            r#""type":"http""#,
            r#""type":"stdio""#,
            "/hooks/0/transport/type",
        ),
        (
            r#""failurePolicy":"fail-closed""#,
            r#""failurePolicy":"fail-open""#,
            "$i/failurePolicy",
        ),
        (
            r#""default":"omit""#,
            r#""default":"full""#,
            "$o/content/default",
        ),
    ] {
        assert_eq!(
            valid.matches(member).count(),
            1,
            "{member} is not unique in base()"
        );
        let text = valid.replace(member, &format!("{member},{repeat}"));
        let name = member.split('"').nth(1).unwrap_or_default();
        assert_eq!(
            parse(&text),
            Err(vec![Problem::new(
                expand(path),
                format!("duplicate member `{name}`")
            )]),
            "{text}"
        );
    }
}

#[test]
fn r2_r3_protocol_version_is_draft_and_hooks_are_a_non_empty_array() {
    rejects(&[
        ("/protocolVersion", r#""1.0""#, "/protocolVersion"),
        ("/protocolVersion", "1", "/protocolVersion"),
        ("/protocolVersion", "", "/protocolVersion"),
        ("/hooks", "[]", "/hooks"),
        ("/hooks", "{}", "/hooks"),
        ("/hooks", "", "/hooks"),
    ]);
}

#[test]
fn r4_r5_intercept_needs_a_failure_policy_and_a_positive_integer_timeout() {
    rejects(&[
        ("$i/failurePolicy", "", "$i/failurePolicy"),
        ("$i/failurePolicy", r#""fail-soft""#, "$i/failurePolicy"),
        ("$i/timeoutMs", "", "$i/timeoutMs"),
        ("$i/timeoutMs", "0", "$i/timeoutMs"),
        ("$i/timeoutMs", "-5", "$i/timeoutMs"),
        ("$i/timeoutMs", "1.5", "$i/timeoutMs"),
        ("$i/timeoutMs", r#""500""#, "$i/timeoutMs"),
    ]);
}

/// JSON Schema's `integer` is any number with a zero fraction: `750.0` and `1e3` are
/// timeouts like `750` and `1000`.
#[test]
fn r5_a_timeout_written_with_a_zero_fraction_or_an_exponent_is_an_integer() {
    for (text, ms) in [("750.0", 750), ("1e3", 1000), ("2.5e2", 250)] {
        let reg = accepted(&[("$i/timeoutMs", text)]);
        assert_eq!(fail_closed_timeout(&reg), ms, "{text}");
    }
    rejects(&[
        ("$i/timeoutMs", "0.0", "$i/timeoutMs"),
        ("$i/timeoutMs", "7.5e-1", "$i/timeoutMs"),
        ("$i/timeoutMs", "1e20", "$i/timeoutMs"),
    ]);
}

/// Two subscriptions of one backend with the same id both load, independent (digest §6),
/// with a warning at the later id; another backend's may share it.
#[test]
fn a_repeated_subscription_id_is_warned_at() {
    let mut subscriptions = base()["hooks"][0]["subscriptions"].clone();
    subscriptions[0]["id"] = json!("main");
    subscriptions.as_array_mut().unwrap().push(
        json!({"id": "main", "events": ["tool.after"], "mode": "observe",
               "content": {"default": "omit"}}),
    );
    let reg = accepted(&[
        ("/hooks/0/subscriptions", &subscriptions.to_string()),
        ("$o/id", r#""main""#),
    ]);
    assert_eq!(reg.backends[0].subscriptions.len(), 2);
    let warned: Vec<&str> = reg.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(warned, ["/hooks/0/subscriptions/1/id"]);
    assert!(
        reg.warnings[0].rule.contains("repeats the id"),
        "{:?}",
        reg.warnings
    );
}

/// A subscription `id` is a label the schema does not define (digest §6), and the
/// harness names a subscription by its position: one that is no string is ignored with
/// a warning at its pointer, as an unknown field is (§6 rule 11), not refused.
#[test]
fn a_subscription_id_that_is_no_string_is_warned_at_and_ignored() {
    for id in ["5", "null", r#"{"n": 1}"#] {
        let reg = accepted(&[("$o/id", id)]);
        let warned: Vec<&str> = reg.warnings.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(warned, [expand("$o/id")], "{id}");
        assert!(
            reg.warnings[0].rule.contains("ignored"),
            "{:?}",
            reg.warnings
        );
        assert_eq!(reg.backends[1].subscriptions.len(), 1);
    }
}

/// A number past what a double holds (`1e400`), which serde_json refuses while reading
/// the text, is named at its member as `1e20` is, not at the document's root.
#[test]
fn a_number_out_of_range_is_refused_at_its_member() {
    let text = edited(&[("$i/timeoutMs", "424242")]).replace("424242", "1e400");
    let problems = parse(&text).expect_err("1e400 is out of range");
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0].path, expand("$i/timeoutMs"));
    assert!(problems[0].rule.contains("out of range"), "{problems:#?}");
}

/// A whole number past the largest one held is refused for its size, naming the limit:
/// it is an integer, so "must be a positive integer" would send its author looking for
/// the wrong mistake.
#[test]
fn a_whole_number_too_large_to_hold_is_refused_as_too_large() {
    let upload = r#"{"endpoint": "https://upload.example.com/up", "timeoutMs": 500,
        "maxBytes": 0}"#;
    let largest = u64::MAX.to_string();
    for huge in ["1e20", "99999999999999999999", "18446744073709551616"] {
        for (pointer, unit) in [
            ("$i/timeoutMs", "milliseconds"),
            ("$o/upload/timeoutMs", "milliseconds"),
            ("$o/upload/maxBytes", "bytes"),
        ] {
            // Written into the text as it stands: a `Value` would hold it as a double.
            let text = edited(&[("$o/upload", upload), (pointer, "424242")]);
            let problems = parse(&text.replace("424242", huge)).expect_err(huge);
            assert_eq!(problems[0].path, expand(pointer), "{huge}: {problems:#?}");
            let rule = &problems[0].rule;
            assert_eq!(problems.len(), 1, "{pointer} = {huge}: {problems:#?}");
            assert!(rule.contains("too large"), "{pointer} = {huge}: {rule}");
            assert!(rule.contains(&largest), "{pointer} = {huge}: {rule}");
            assert!(rule.contains(unit), "{pointer} = {huge}: {rule}");
        }
    }
    let reg = accepted(&[("$i/timeoutMs", &largest)]);
    assert_eq!(fail_closed_timeout(&reg), u64::MAX);
    accepted(&[("$o/upload", upload), ("$o/upload/maxBytes", &largest)]);
}

/// An unknown field is ignored whatever it holds (§6 rule 11): a whole number past 64
/// bits there, which no count could hold, is no reason to refuse the registration.
#[test]
fn a_huge_number_in_an_unknown_field_is_ignored() {
    let text = edited(&[("/x-meta", r#"{"n": 424242}"#)]);
    for huge in ["123456789012345678901234", "-123456789012345678901234"] {
        let reg = parse(&text.replace("424242", huge)).unwrap_or_else(|p| panic!("{p:#?}"));
        assert!(reg.warnings.iter().any(|w| w.path == "/x-meta"), "{reg:#?}");
    }
}

#[test]
fn timeout_outside_the_supported_range_is_accepted_with_a_warning() {
    for ms in [1, 60_000] {
        let reg = accepted(&[("$i/timeoutMs", &ms.to_string())]);
        assert_eq!(fail_closed_timeout(&reg), ms);
        let warned =
            |w: &Problem| w.path == expand("$i/timeoutMs") && w.rule.contains("100..30000");
        assert!(reg.warnings.iter().any(warned), "{:#?}", reg.warnings);
    }
}

#[test]
fn r6_observe_must_not_carry_policy_fields() {
    rejects(&[
        ("$o/timeoutMs", "100", "$o/timeoutMs"),
        ("$o/failurePolicy", r#""fail-open""#, "$o/failurePolicy"),
    ]);
}

#[test]
fn r7_r11_intercept_selects_only_interceptable_events() {
    rejects(&[
        ("$i/events", r#"["tool.before", "turn.end"]"#, "$i/events/1"),
        ("$i/events", r#"["file.*"]"#, "$i/events/0"),
        ("$i/events", r#"["com.example.custom"]"#, "$i/events/0"),
    ]);
    let reg = accepted(&[("$i/events", r#"["model.*", "*"]"#)]);
    let want = vec![EventPattern::Family("model".into()), EventPattern::Any];
    assert_eq!(reg.backends[0].subscriptions[0].events, want);
    let reg = accepted(&[("$o/events", r#"["turn.end", "file.*"]"#)]);
    assert!(reg.warnings.is_empty(), "{:#?}", reg.warnings);
}

/// A stdio argument that looks like a file's relative path, with no `cwd` to say where
/// from, is warned about at its pointer (the backend would look for it in the directory
/// it starts in); options, URLs, absolute paths and plain words are not, nor is any
/// argument under a `cwd`.
#[test]
fn a_relative_file_argument_without_a_cwd_is_warned_about() {
    let args = r#"["policy/server.js", "--port", "8080", "./check.sh", "server.py",
                   "/opt/policy/main.js", "https://example.com/x", "-m", "policy",
                   "exec ./run.sh > /dev/null"]"#;
    let reg = accepted(&[("/hooks/1/transport/args", args)]);
    let warned: Vec<&str> = reg.warnings.iter().map(|w| w.path.as_str()).collect();
    let at = |i: usize| format!("/hooks/1/transport/args/{i}");
    assert_eq!(warned, [at(0), at(3), at(4)], "{:#?}", reg.warnings);
    assert!(
        reg.warnings[0].rule.contains("give `cwd`"),
        "{:#?}",
        reg.warnings
    );
    let reg = accepted(&[
        ("/hooks/1/transport/args", args),
        ("/hooks/1/transport/cwd", r#""/srv""#),
    ]);
    assert!(reg.warnings.is_empty(), "{:#?}", reg.warnings);
}

/// registration.schema.json `observeSubscription`: each event is a catalogue type or a
/// wildcard; a name outside the catalogue is unsupported semantics (digest §13). A
/// family wildcard the schema allows but no catalogue type falls under is only warned
/// about.
#[test]
fn an_observe_subscription_names_a_catalogue_event_or_a_wildcard() {
    for name in ["com.example.custom", "tool.befor", "acme.thing"] {
        let events = json!(["turn.end", name]).to_string();
        let problems = rejected_at(&[("$o/events", &events)], "$o/events/1");
        assert_eq!(problems.len(), 1, "{name}: {problems:#?}");
        assert_eq!(problems[0].rule, "must be an event type of the catalogue");
    }
    let reg = accepted(&[("$o/events", r#"["turn.end", "hook.failure", "acme.*"]"#)]);
    let warned: Vec<&str> = reg.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(warned, [expand("$o/events/2")]);
    assert!(reg.warnings[0].rule.contains("never delivered"));
}

#[test]
fn r8_every_subscription_needs_content_with_a_valid_default() {
    rejects(&[
        ("$i/content", "", "$i/content"),
        ("$o/content", r#"{"text": "body"}"#, "$o/content/default"),
        ("$i/content/text", r#""full""#, "$i/content/text"),
        ("$i/content/default", "null", "$i/content/default"),
    ]);
    accepted(&[("$o/content/x-custom", r#""body""#)]);
}

#[test]
fn r9_non_portable_authentication_types_are_rejected() {
    for kind in ["mtls", "workload", "basic"] {
        let auth = json!({"type": kind, "credentialRef": "x"}).to_string();
        let problems = rejected_at(&[("$a", &auth)], "$a/type");
        assert!(problems.iter().any(|p| p.rule.contains("AHP-AUTH-001")));
    }
}

#[test]
fn r10_literal_secrets_are_rejected_and_never_echoed() {
    let marker = "SECRET-VALUE-42";
    for key in SECRET_NAMES.split_whitespace() {
        let path = format!("$a/{key}");
        let problems = rejected_at(&[(&path, &format!("{marker:?}"))], &path);
        assert_never_echoed(&problems, marker);
    }
    let nested = json!({"type": marker, "tokenEnv": marker, "x": [{"password": marker}]});
    let problems = rejected_at(&[("$a", &nested.to_string())], "$a/x/0/password");
    assert_never_echoed(&problems, marker);
}

/// A literal secret is refused wherever it is in the document and however its name is
/// spelled (case, `_` and `-` ignored): in an oauth or bearer binding under an OAuth
/// name, at the backend or transport, in a misspelled `authentification`, in a stdio
/// transport's environment, on a subscription, at the top. Each at its pointer, the value
/// never in a problem.
#[test]
fn r10_a_literal_secret_is_refused_anywhere_under_any_spelling() {
    let marker = "SECRET-VALUE-42";
    let secret = format!("{marker:?}");
    let oauth = json!({"type": "oauth", "issuer": "https://idp.example",
        "resource": "https://policy.example.com", "clientId": "c",
        "flow": "client_credentials", "client_secret": marker});
    let bearer = json!({"type": "bearer", "tokenEnv": "AHP_TOKEN", "access_token": marker});
    let misspelled = json!({"type": "bearer", "token": format!("sk-{marker}")});
    let env = json!([{"name": "API_KEY", "value": marker},
                     {"name": "SECRET_KEY_BASE", "value": marker},
                     {"name": "API_KEY_2", "value": marker},
                     {"name": "STRIPE_SECRET_KEY_LIVE", "value": marker},
                     {"name": "API_TOKENS", "value": marker},
                     {"name": "SSHKEY", "value": marker}]);
    let cases = [
        ("$a", oauth.to_string(), "$a/client_secret"),
        ("$a", bearer.to_string(), "$a/access_token"),
        ("/hooks/0/token", secret.clone(), "/hooks/0/token"),
        (
            "/hooks/0/transport/token",
            secret.clone(),
            "/hooks/0/transport/token",
        ),
        (
            "/hooks/0/authentification",
            misspelled.to_string(),
            "/hooks/0/authentification/token",
        ),
        (
            "/hooks/1/transport/env",
            env.to_string(),
            "/hooks/1/transport/env/0/value",
        ),
        (
            "/hooks/1/transport/env",
            env.to_string(),
            "/hooks/1/transport/env/1/value",
        ),
        (
            "/hooks/1/transport/env",
            env.to_string(),
            "/hooks/1/transport/env/2/value",
        ),
        (
            "/hooks/1/transport/env",
            env.to_string(),
            "/hooks/1/transport/env/3/value",
        ),
        (
            "/hooks/1/transport/env",
            env.to_string(),
            "/hooks/1/transport/env/4/value",
        ),
        (
            "/hooks/1/transport/env",
            env.to_string(),
            "/hooks/1/transport/env/5/value",
        ),
        ("$o/Api-Key", secret.clone(), "$o/Api-Key"),
        (
            "/x",
            json!({"PASSWORD": [marker]}).to_string(),
            "/x/PASSWORD",
        ),
        ("$a/refreshToken", "42".into(), "$a/refreshToken"),
        // Within a credential binding, `value` is one whatever is beside it.
        ("$a/value", secret.clone(), "$a/value"),
    ];
    for (pointer, text, path) in cases {
        let problems = rejected_at(&[(pointer, &text)], path);
        assert_never_echoed(&problems, marker);
    }
}

/// Secrets' names over secrets' names are each judged by all they hold, to any depth,
/// outer first: references and a `type` are no literal, other text anywhere below is,
/// at every name above it. Beside them, in the document's order, the search goes on.
#[test]
fn r10_nested_secrets_names_are_each_judged_by_all_they_hold() {
    let problems = |value: Value| -> Vec<String> {
        match parse(&edited(&[("/x", &value.to_string())])) {
            Ok(_) => Vec::new(),
            Err(problems) => problems.into_iter().map(|p| p.path).collect(),
        }
    };
    let references = json!({"secret": {"token": {"type": "bearer", "tokenEnv": "T"}}});
    assert_eq!(problems(references), Vec::<String>::new());
    let deep = json!({"secret": {"token": {"a": [{"b": "lit"}]}}, "z": {"password": 1}});
    assert_eq!(
        problems(deep),
        ["/x/secret", "/x/secret/token", "/x/z/password"]
    );
    let skipped = json!({"secret": {"tokenRef": "file:/t"}, "token": {"x": {"type": 1}}});
    assert_eq!(problems(skipped), ["/x/token"]);
}

/// An HTTP credential's own names are literal secrets too: an `Authorization`, `Cookie`
/// or `X-Api-Key` header's `value` beside its `name`, and a member named
/// `authorization`, `bearer`, `cookie`, `credential(s)` or `auth` holding text. Each at
/// its pointer, the value never in a problem.
#[test]
fn r10_http_credential_names_are_literal_secrets() {
    let marker = "SECRET-VALUE-42";
    let bearer = format!("\"Bearer {marker}\"");
    let header = |name: &str| json!([{"name": name, "value": marker}]).to_string();
    let headers = "/hooks/0/transport/headers";
    let cases = [
        (
            "/hooks/0/authorization",
            bearer.clone(),
            "/hooks/0/authorization",
        ),
        ("/hooks/0/auth", bearer.clone(), "/hooks/0/auth"),
        (
            "/hooks/0/transport/Bearer",
            bearer.clone(),
            "/hooks/0/transport/Bearer",
        ),
        ("$i/cookie", format!("\"sid={marker}\""), "$i/cookie"),
        (
            "$o/Credentials",
            json!([marker]).to_string(),
            "$o/Credentials",
        ),
        // An object under a secret's name holds references and a type, nothing else.
        (
            "/credential",
            json!({"k": marker}).to_string(),
            "/credential",
        ),
        (
            "/hooks/0/transport/credentials",
            json!({"type": "basic", "user": "svc", "key": marker}).to_string(),
            "/hooks/0/transport/credentials",
        ),
        // Only an upload's `auth` is a binding; a reference's name holds a string only.
        (
            "/hooks/0/auth",
            json!({"user": "svc", "key": marker}).to_string(),
            "/hooks/0/auth",
        ),
        (
            "/x-vendor",
            json!({"credentials": {"tokenRef": {"key": marker}}}).to_string(),
            "/x-vendor/credentials",
        ),
        (
            "/x-vendor",
            json!({"credentials": {"passwordEnv": [marker]}}).to_string(),
            "/x-vendor/credentials",
        ),
        (
            headers,
            header("Authorization"),
            "/hooks/0/transport/headers/0/value",
        ),
        (
            headers,
            header("proxy-authorization"),
            "/hooks/0/transport/headers/0/value",
        ),
        (
            headers,
            header("Cookie"),
            "/hooks/0/transport/headers/0/value",
        ),
        (
            headers,
            header("X-Api-Key"),
            "/hooks/0/transport/headers/0/value",
        ),
    ];
    for (pointer, text, path) in cases {
        let problems = rejected_at(&[(pointer, &text)], path);
        assert_never_echoed(&problems, marker);
    }
}

/// Inside a credential binding (a backend's `authentication`, an upload's `auth`), a
/// member named as a credential by more than the exact secret names (`apiToken`,
/// `private_token`, `secretKey`, `pat`, `client_secret_value`) and holding text is a
/// literal secret, refused at it, never echoed: not an unknown field ignored with a
/// warning. Another unknown member there (`comment`, or a setting merely holding a
/// credential's word: `tokenType`, `bearerFormat`, `keyId`), a reference (`passwordEnv`)
/// or an address (`tokenEndpoint`) is still only warned about.
#[test]
fn r10_a_member_of_a_binding_named_as_a_credential_is_a_literal_secret() {
    let marker = "sk-live-1";
    let bearer = json!({"type": "bearer", "tokenEnv": "AHP_TOKEN"});
    let oauth = json!({"type": "oauth", "issuer": "https://id.example.com",
        "resource": "https://policy.example.com", "clientId": "c",
        "flow": "client_credentials", "clientSecretRef": "env:S"});
    let upload = |auth: &Value| {
        json!({"endpoint": "https://upload.example/u", "timeoutMs": 1000, "maxBytes": 1,
            "auth": auth})
    };
    let with = |binding: &Value, name: &str, value: Value| {
        let mut binding = binding.clone();
        binding[name] = value;
        binding
    };
    for name in [
        "apiToken",
        "private_token",
        "secretKey",
        "pat",
        "client_secret_value",
        "proxyAuthorization",
        "signingKey",
        "passphrase",
        "sessionCookie",
        "basicCredentials",
    ] {
        for binding in [&bearer, &oauth] {
            let bound = with(binding, name, json!(marker));
            let problems = rejected_at(&[("$a", &bound.to_string())], &format!("$a/{name}"));
            assert_eq!(problems.len(), 1, "{name}: {problems:#?}");
            assert!(
                problems[0].rule.contains("literal secret"),
                "{name}: {problems:#?}"
            );
            assert_never_echoed(&problems, marker);
            let path = format!("$o/upload/auth/{name}");
            let problems = rejected_at(&[("$o/upload", &upload(&bound).to_string())], &path);
            assert_never_echoed(&problems, marker);
        }
        // Outside a binding such a name is an unknown field, as before.
        accepted(&[(&format!("/hooks/0/transport/{name}"), r#""x""#)]);
    }
    for innocent in [
        "comment",
        "passwordEnv",
        "tokenEndpoint",
        "tokenType",
        "tokenEndpointAuthMethod",
        "bearerFormat",
        "keyId",
        "keywords",
    ] {
        let bound = with(&bearer, innocent, json!("https://id.example.com/note"));
        let reg = accepted(&[("$a", &bound.to_string())]);
        let at = expand(&format!("$a/{innocent}"));
        let warned = |w: &Problem| w.path == at && w.rule == "unknown field ignored";
        assert!(
            reg.warnings.iter().any(warned),
            "{innocent}: {:#?}",
            reg.warnings
        );
    }
}

/// A URL with a query or fragment parameter named as a secret (`?access_token=…`, the
/// name percent-decoded and spelled any way) carries a literal credential: refused at
/// the URL's pointer, neither the URL nor the value in a problem. An ordinary query loads.
#[test]
fn r10_a_secret_in_a_url_query_is_refused_and_never_echoed() {
    let marker = "SECRET-VALUE-42";
    let url = "/hooks/0/transport/url";
    let upload = |endpoint: &str| {
        json!({"endpoint": endpoint, "timeoutMs": 1000, "maxBytes": 1024}).to_string()
    };
    let cases = [
        (
            url,
            format!("\"https://policy.example.com/hook?access_token={marker}\""),
            url,
        ),
        (
            url,
            format!("\"https://policy.example.com/hook?tenant=a&API-KEY={marker}\""),
            url,
        ),
        (
            url,
            format!("\"https://policy.example.com/hook?client%5Fsecret={marker}\""),
            url,
        ),
        (
            url,
            format!("\"https://policy.example.com/hook#token={marker}\""),
            url,
        ),
        (
            url,
            format!("\"https://policy.example.com/hook?lang=de&auth_key={marker}\""),
            url,
        ),
        (
            "$o/upload",
            upload(&format!("https://upload.example/u?sig=1&password={marker}")),
            "$o/upload/endpoint",
        ),
    ];
    for (pointer, text, path) in cases {
        let problems = rejected_at(&[(pointer, &text)], path);
        assert_never_echoed(&problems, marker);
        assert_never_echoed(&problems, "example");
    }
    accepted(&[
        (
            url,
            r#""https://policy.example.com/hook?tenant=a&token_type=jwt""#,
        ),
        ("$o/upload", &upload("https://upload.example/u?tenant=a")),
    ]);
}

/// What only looks like a secret's name loads: a longer name (`tokenEnv`, a
/// `tokenEndpoint` or `secretRef` of an extension, unknown and warned about), a secret
/// name holding no string or number, and a content category of any name.
#[test]
fn r10_names_that_only_look_like_secrets_load() {
    let oauth = r#"{"type": "oauth", "issuer": "https://idp.example",
        "resource": "https://policy.example.com", "clientId": "c",
        "flow": "client_credentials", "clientSecretRef": "env:AHP_SECRET"}"#;
    accepted(&[("$a", oauth)]);
    let registration = accepted(&[
        ("$a/tokenEndpoint", r#""https://idp.example/token""#),
        ("/hooks/0/transport/secretRef", r#""env:AHP_SECRET""#),
        ("/hooks/0/token", "null"),
        ("$i/secret", "false"),
        ("$i/content/secret", r#""omit""#),
        ("$o/content/Token", r#""body""#),
        // A `value` beside a name that is no secret's (an environment variable's, a
        // header's, an extension's label) is no literal secret.
        // Nor beside one that only holds a credential's word (`KEYCLOAK_URL`), nor one
        // that holds no text.
        (
            "/hooks/1/transport/env",
            r#"[{"name": "RUST_LOG", "value": "info"},
                {"name": "KEYCLOAK_URL", "value": "https://kc.example"},
                {"name": "MONKEY_PATCH", "value": "1"},
                {"name": "API_KEY", "value": null},
                {"name": "MAX_TOKENS", "value": "4096"},
                {"name": "SORT_KEY", "value": "id"}]"#,
        ),
        (
            "/hooks/0/transport/headers",
            r#"[{"name": "X-Tenant", "value": "acme"}, {"name": "X-Author", "value": "ann"}]"#,
        ),
        (
            "/x-acme",
            r#"{"labels": [{"key": "team", "value": "sec"}]}"#,
        ),
        // An upload's `auth` is a binding of references, not a credential; so is an
        // extension's `credentials` object.
        (
            "$o/upload",
            r#"{"endpoint": "https://upload.example/u", "timeoutMs": 1000, "maxBytes": 1,
                "auth": {"type": "bearer", "tokenEnv": "AHP_UPLOAD_TOKEN"}}"#,
        ),
        (
            "/x-vendor",
            r#"{"credentials": {"type": "bearer", "tokenEnv": "ACME_TOKEN"}}"#,
        ),
    ]);
    assert!(matches!(
        registration.backends[0].auth,
        Some(Auth::BearerEnv(_))
    ));
}

/// A stdio argument giving a credential's value (`--api-key=…`) is a literal secret, and
/// on a command line every local user can read: refused at its place, never echoed. One
/// after an option named as a credential (`--token VALUE`) is warned about, never
/// echoed; a key file's absolute path and options only like a credential's load.
#[test]
fn r10_a_credential_in_a_stdio_argument_is_refused_and_never_echoed() {
    let args = "/hooks/1/transport/args";
    for arg in [
        "--api-key=SECRET-VALUE-42",
        "-token=SECRET-VALUE-42",
        "--password=SECRET-VALUE-42",
        "--openai-key=SECRET-VALUE-42",
        "--authtoken=SECRET-VALUE-42",
        "--pat=SECRET-VALUE-42",
        "--auth=SECRET-VALUE-42",
        "--api-key-prod=SECRET-VALUE-42",
        "curl -H 'Authorization: Bearer SECRET-VALUE-42' https://api.example/",
        "--header=Authorization: Bearer SECRET-VALUE-42",
        "--env=OPENAI_API_KEY=SECRET-VALUE-42",
        "postgresql://u:SECRET-VALUE-42@localhost/db",
        "--credentials=SECRET-VALUE-42",
        "--basic-auth=alice:SECRET-VALUE-42",
        "auth.rootPassword=SECRET-VALUE-42",
        "sh -c 'export PATH=/a:/b; git clone https://u:SECRET-VALUE-42@h/r'",
    ] {
        let listed = format!(r#"["--port", "{arg}"]"#);
        let problems = rejected_at(&[(args, &listed)], &format!("{args}/1"));
        assert_eq!(problems.len(), 1, "{arg}: {problems:#?}");
        assert_never_echoed(&problems, "SECRET-VALUE-42");
    }
    // A password or token given after its option, but for a variable's name.
    let listed = r#"["--password", "SECRET-VALUE-42"]"#;
    let problems = rejected_at(&[(args, listed)], &format!("{args}/1"));
    assert_never_echoed(&problems, "SECRET-VALUE-42");
    // After a key's option a name may be a key's: warned about, never echoed.
    let reg = accepted(&[(
        args,
        r#"["--api-key", "SECRET-VALUE-42", "--key=/etc/ahp/client.pem", "--max-tokens=5",
            "--token-file=/run/ahp/token", "--token", "--verbose", "--auth=none",
            "--token-url=https://idp.example/token", "--api-key-env=POLICY_KEY",
            "--sort-key=name", "--cookie-jar=cookies.txt", "--token", "GITHUB_TOKEN",
            "--token=$GITHUB_TOKEN", "--cookie-secure=false"]"#,
    )]);
    let warned: Vec<&str> = reg.warnings.iter().map(|w| w.path.as_str()).collect();
    let expected = [format!("{args}/1"), format!("{args}/13")];
    assert_eq!(warned, expected, "{:#?}", reg.warnings);
    assert_never_echoed(&reg.warnings, "SECRET-VALUE-42");
}

/// A URL's user info is a literal secret too: refused, and never echoed.
#[test]
fn r10_credentials_in_a_url_are_rejected_and_never_echoed() {
    let marker = "SECRET-VALUE-42";
    let oauth = json!({"type": "oauth", "issuer": format!("https://u:{marker}@idp.example"),
        "resource": "https://policy.example.com", "clientId": "c",
        "flow": "client_credentials", "clientSecretRef": "ref"});
    for (pointer, text, path) in [
        (
            "/hooks/0/transport/url",
            format!("\"https://user:{marker}@policy.example.com/hooks\""),
            "/hooks/0/transport/url",
        ),
        (
            "/hooks/0/transport/url",
            format!("\"http://{marker}@127.0.0.1:9/\""),
            "/hooks/0/transport/url",
        ),
        ("$a", oauth.to_string(), "$a/issuer"),
    ] {
        let problems = rejected_at(&[(pointer, &text)], path);
        assert_never_echoed(&problems, marker);
    }
    // An `@` after the authority is not user info.
    accepted(&[(
        "/hooks/0/transport/url",
        r#""https://policy.example.com/hooks/@team?by=a@b""#,
    )]);
}

/// User info as a WHATWG URL parser (Node's, a browser's) reads it: after a special
/// scheme, any run of `/` and `\` starts the authority and either ends it. RFC 3986 reads
/// the `@` of `https:u:p@h/` in a path, a WHATWG parser as user `u`, password `p`.
#[test]
fn user_info_is_found_where_a_whatwg_parser_finds_it() {
    for url in [
        "https://u:p@h.example/",
        "https:u:p@h.example/",
        "https:/u:p@h.example/",
        "HTTPS:///u:p@h.example/",
        "https:\\\\u:p@h.example/",
        "ws://u@h.example/",
        "foo://u:p@h.example/",
        "file://u@h.example/",
    ] {
        assert!(crate::syntax::has_userinfo(url), "{url}");
    }
    for url in [
        "https://h.example/a@b",
        "https://h.example\\u@b",
        "https://h.example?u@b",
        "mailto:ops@h.example",
        "urn:x:u@h",
        "foo:u:p@h.example/",
        "no-scheme",
        "file:///me@x.txt",
        "file:/me@x.txt",
        "file:///@scope/pkg",
    ] {
        assert!(!crate::syntax::has_userinfo(url), "{url}");
    }
}

/// An OAuth `resource` is sent in every token request (`resource=`): user info or a
/// parameter named as a secret in it is refused as in a backend's URL, in a backend's
/// binding and an upload's (both read by one function), at the resource, and neither the
/// password nor the key is in a problem.
#[test]
fn r10_a_credential_in_an_oauth_resource_is_refused_and_never_echoed() {
    let binding = |resource: &str| {
        json!({"type": "oauth", "issuer": "https://id.example.com", "resource": resource,
            "clientId": "c", "flow": "client_credentials", "clientSecretRef": "env:S"})
    };
    let upload = |resource: &str| {
        json!({"endpoint": "https://upload.example/u", "timeoutMs": 1000, "maxBytes": 1,
            "auth": binding(resource)})
        .to_string()
    };
    for (resource, rule) in [
        (
            "https://user:hunter2@api.example.com/?api_key=SECRETX",
            "user info",
        ),
        ("https://user:hunter2@api.example.com/", "user info"),
        ("https://api.example.com/?api_key=SECRETX", "parameter"),
        ("https://api.example.com/#access_token=SECRETX", "parameter"),
    ] {
        for (pointer, text, path) in [
            ("$a", binding(resource).to_string(), "$a/resource"),
            ("$o/upload", upload(resource), "$o/upload/auth/resource"),
        ] {
            let problems = rejected_at(&[(pointer, &text)], path);
            assert_eq!(problems.len(), 1, "{resource}: {problems:#?}");
            assert!(problems[0].rule.contains(rule), "{resource}: {problems:#?}");
            assert_never_echoed(&problems, "hunter2");
            assert_never_echoed(&problems, "SECRETX");
        }
    }
    accepted(&[(
        "$a",
        &binding("https://api.example.com/?tenant=a").to_string(),
    )]);
}

/// A port no client can read (`:99999`, `:abc`, `:0`, an empty one) is refused with a
/// rule naming ports, wherever a registration names a URL: read as none, the scheme's
/// default would send the event to another service.
#[test]
fn a_url_names_no_port_or_a_reachable_one() {
    let oauth = |issuer: &str| {
        json!({"type": "oauth", "issuer": issuer, "resource": "https://policy.example.com",
               "clientId": "c", "flow": "client_credentials", "clientSecretRef": "ref"})
        .to_string()
    };
    for port in ["99999", "abc", "0", ""] {
        let url = format!("\"http://127.0.0.1:{port}/hooks\"");
        let problems = rejected_at(
            &[("/hooks/0/transport/url", &url)],
            "/hooks/0/transport/url",
        );
        assert!(
            problems.iter().any(|p| p.rule.contains("1 to 65535")),
            "{problems:#?}"
        );
        let issuer = oauth(&format!("https://idp.example:{port}"));
        rejected_at(&[("$a", &issuer)], "$a/issuer");
    }
    accepted(&[(
        "/hooks/0/transport/url",
        r#""http://127.0.0.1:65535/hooks""#,
    )]);
}

/// A URL the host's HTTP client refuses as written (a non-ASCII host, a backtick or `<`
/// in the path, a `"` in the query) is refused at its pointer, naming the part, wherever
/// a registration names a URL the host connects to: the backend, the issuer, the upload
/// endpoint. Before, `ahp check` passed it to the host, whose setup failed naming no
/// field. What `http` reads but a stricter reading would not (`{`, `|` in a path) loads.
#[test]
fn a_url_the_hosts_http_client_refuses_is_refused_at_its_pointer() {
    let oauth = |issuer: &str| {
        json!({"type": "oauth", "issuer": issuer, "resource": "https://policy.example.com",
               "clientId": "c", "flow": "client_credentials", "clientSecretRef": "env:S"})
        .to_string()
    };
    let upload = |endpoint: &str| {
        json!({"endpoint": endpoint, "timeoutMs": 1000, "maxBytes": 1}).to_string()
    };
    for (url, part) in [
        ("https://p\u{f6}licy.example.com/h", "its host"),
        ("https://p.example.com/a`b", "its path"),
        ("https://p.example.com/<x>", "its path"),
        ("https://p.example.com/?q={\"a\":1}", "its query"),
    ] {
        for (pointer, text, path) in [
            (
                "/hooks/0/transport/url",
                json!(url).to_string(),
                "/hooks/0/transport/url",
            ),
            ("$a", oauth(url), "$a/issuer"),
            ("$o/upload", upload(url), "$o/upload/endpoint"),
        ] {
            let problems = rejected_at(&[(pointer, &text)], path);
            assert_eq!(problems.len(), 1, "{url} at {path}: {problems:#?}");
            assert!(problems[0].rule.contains(part), "{url}: {problems:#?}");
        }
    }
    accepted(&[(
        "/hooks/0/transport/url",
        r#""https://p.example.com/{a}|b^c?q=`{}|""#,
    )]);
}

#[test]
fn r12_wildcards_are_a_whole_family_or_star_and_events_are_unique() {
    for pattern in [
        "tool.be*",
        "*.before",
        "**",
        "Tool.*",
        "tool.before.*",
        "tool",
        "",
    ] {
        rejected_at(&[("$i/events/0", &format!("{pattern:?}"))], "$i/events/0");
    }
    rejects(&[
        (
            "$i/events",
            r#"["tool.before", "tool.before"]"#,
            "$i/events/1",
        ),
        ("$i/events", "[]", "$i/events"),
    ]);
}

#[test]
fn r13_backend_ids_are_reverse_dns_and_unique() {
    rejects(&[
        ("/hooks/0/id", r#""policy""#, "/hooks/0/id"),
        ("/hooks/0/id", r#""1com.example""#, "/hooks/0/id"),
        ("/hooks/0/id", r#""com..example""#, "/hooks/0/id"),
        ("/hooks/0/id", "7", "/hooks/0/id"),
        ("/hooks/1/id", r#""com.example.policy""#, "/hooks/1/id"),
    ]);
}

/// A stdio backend's relative `cwd`, or a relative `command` path with no absolute `cwd`,
/// would be resolved from wherever the backend is started (the agent's project, under a
/// command hook, where the agent could put a program of its own): refused at that member,
/// which says when `~` or `$` was meant to be expanded; an empty `cwd`, a blank command
/// and a NUL byte in the command, an argument or the `cwd` are refused as what no backend
/// could start with. A program on `PATH` and a path under an absolute `cwd` are accepted.
#[test]
fn a_stdio_backends_relative_or_unusable_paths_are_refused_at() {
    let transport = "/hooks/1/transport";
    let refused = |edits: &[(&str, &str)]| -> Vec<Problem> {
        parse(&edited(edits)).expect_err(&format!("{edits:?} accepted"))
    };
    let at = |edits: &[(&str, &str)]| -> Vec<String> {
        refused(edits).iter().map(|p| p.path.clone()).collect()
    };
    let command = format!("{transport}/command");
    let cwd = format!("{transport}/cwd");
    let args = format!("{transport}/args");
    assert_eq!(
        at(&[(&command, r#""./policy/review""#)]),
        [command.as_str()]
    );
    assert_eq!(at(&[(&command, r#""bin/review""#)]), [command.as_str()]);
    // Beside arguments refused at their place, in the same list.
    let arg = format!("{args}/0");
    let with_a_bad_argument = [(&command[..], r#""./review""#), (&args[..], "[1]")];
    assert_eq!(at(&with_a_bad_argument), [arg.as_str(), command.as_str()]);
    assert_eq!(at(&[(&cwd, r#""policy""#)]), [cwd.as_str()]);
    let relative_under_both = [(&command[..], r#""./review""#), (&cwd[..], r#""policy""#)];
    assert_eq!(at(&relative_under_both), [cwd.as_str()]);
    let accepted_as_is: [&[(&str, &str)]; 4] = [
        &[],
        &[(&command, r#""/opt/ahp/review""#)],
        &[(&command, r#""./review""#), (&cwd, r#""/opt/ahp""#)],
        &[(&cwd, r#""/srv""#)],
    ];
    for edits in accepted_as_is {
        let reg = accepted(edits);
        assert!(reg.warnings.is_empty(), "{edits:?}: {:?}", reg.warnings);
    }
    let rule = |edits: &[(&str, &str)]| refused(edits)[0].rule.clone();
    assert!(rule(&[(&command, r#""./policy/review""#)]).starts_with("is a relative path:"));
    // Nothing expands `~` or `$HOME`: the program is started without a shell.
    // Under an absolute cwd too (it would name `/opt/ahp/~/bin/review`), and a bare
    // `$VARIABLE` found on no PATH.
    for unexpanded in [r#""~/bin/review""#, r#""$HOME/bin/review""#] {
        for edits in [
            vec![(&command[..], unexpanded)],
            vec![(&command[..], unexpanded), (&cwd[..], r#""/opt/ahp""#)],
        ] {
            assert_eq!(at(&edits), [command.as_str()], "{edits:?}");
            let problem = rule(&edits);
            assert!(problem.contains("no shell expands"), "{edits:?}: {problem}");
        }
    }
    assert_eq!(at(&[(&command, r#""$REVIEW""#)]), [command.as_str()]);
    // An empty cwd is no directory at all, a blank command no program; a NUL byte is in
    // no path or argument.
    assert_eq!(at(&[(&cwd, r#""""#)]), [cwd.as_str()]);
    assert!(rule(&[(&cwd, r#""""#)]).starts_with("is empty"));
    for blank in [r#"" ""#, r#""\t \n""#] {
        assert_eq!(at(&[(&command, blank)]), [command.as_str()], "{blank}");
        assert!(
            rule(&[(&command, blank)]).starts_with("is blank"),
            "{blank}"
        );
    }
    assert_eq!(
        at(&[(&command, r#""/opt/re\u0000view""#)]),
        [command.as_str()]
    );
    assert_eq!(at(&[(&cwd, r#""/srv\u0000""#)]), [cwd.as_str()]);
    let second_arg = format!("{args}/1");
    assert_eq!(
        at(&[(&args, r#"["--ok", "bad\u0000"]"#)]),
        [second_arg.as_str()]
    );
}

/// A relative `command` path under an absolute `cwd` is planned as the absolute path it
/// names there, so the host never asks its platform to resolve a relative program after
/// changing directory; a bare name (found on `PATH`) and an absolute path are kept.
#[test]
fn a_relative_command_under_an_absolute_cwd_is_planned_absolute() {
    let transport = "/hooks/1/transport";
    let (command, cwd) = (format!("{transport}/command"), format!("{transport}/cwd"));
    for (given, dir, planned) in [
        (r#""./review""#, r#""/opt/ahp""#, "/opt/ahp/./review"),
        (r#""bin/review""#, r#""/opt/ahp/""#, "/opt/ahp/bin/review"),
        (r#""bin/review""#, r#""/""#, "/bin/review"),
        (r#""review""#, r#""/opt/ahp""#, "review"),
        (r#""/usr/bin/review""#, r#""/opt/ahp""#, "/usr/bin/review"),
    ] {
        let reg = accepted(&[(&command, given), (&cwd, dir)]);
        match &reg.backends[1].transport {
            Transport::Stdio { command, .. } => assert_eq!(command, planned, "{given} in {dir}"),
            other => panic!("not stdio: {other:?}"),
        }
    }
}

/// A secret file is named by an absolute path: a relative one would be read from the
/// directory the hook runs in, the agent's project.
#[test]
fn a_relative_secret_file_is_rejected_at_its_reference() {
    let bearer = r#"{"type": "bearer", "tokenRef": "file:secrets/token"}"#;
    rejected_at(&[("$a", bearer)], "$a/tokenRef");
    let oauth = r#"{"type": "oauth", "issuer": "https://id.example.com",
        "resource": "https://policy.example.com/hooks", "clientId": "c", "flow": "client_credentials",
        "clientSecretRef": "file:./secret"}"#;
    rejected_at(&[("$a", oauth)], "$a/clientSecretRef");
    for reference in ["file:/etc/ahp/token", "env:AHP_TOKEN", "vault:p"] {
        let bearer = format!(r#"{{"type": "bearer", "tokenRef": "{reference}"}}"#);
        accepted(&[("$a", &bearer)]);
    }
}

/// The host resolves `env:NAME` and `file:/absolute/path` and nothing else, so any other
/// reference auth-fails every call unless the embedder injects a credential provider
/// for the backend that understands it: accepted, with a warning at the reference that
/// repeats nothing of it (it may be a secret written where its name belongs).
#[test]
fn a_secret_reference_the_host_cannot_resolve_is_warned_at_without_its_value() {
    let oauth = r#"{"type": "oauth", "issuer": "https://id.example.com", "resource": "https://policy.example.com/hooks",
        "clientId": "c", "flow": "client_credentials", "clientSecretRef": "env:S"}"#;
    let bearer = r#"{"type": "bearer", "tokenRef": "env:S"}"#;
    for (binding, at) in [(bearer, "$a/tokenRef"), (oauth, "$a/clientSecretRef")] {
        let with =
            |reference: &str| accepted(&[("$a", binding), (at, &json!(reference).to_string())]);
        for reference in [
            "hunter2",
            "vault:hunter2",
            "env:",
            "env:1hunter2",
            "env:hunter 2",
        ] {
            let reg = with(reference);
            assert_eq!(reg.warnings.len(), 1, "{reference}: {:#?}", reg.warnings);
            let warning = &reg.warnings[0];
            assert_eq!(warning.path, expand(at), "{reference}");
            assert!(warning.rule.contains("auth-failed"), "{warning:?}");
            assert!(
                !format!("{warning}{warning:?}").contains("hunter"),
                "{warning:?}"
            );
        }
        for reference in ["env:AHP_TOKEN", "file:/etc/ahp/token"] {
            let reg = with(reference);
            assert!(reg.warnings.is_empty(), "{reference}: {:#?}", reg.warnings);
        }
    }
}

#[test]
fn r14_stdio_auth_two_bearer_sources_and_content_receiver_are_rejected() {
    rejects(&[
        (
            "/hooks/1/authentication",
            r#"{"type": "bearer", "tokenRef": "vault:p"}"#,
            "/hooks/1/authentication",
        ),
        ("$a/tokenRef", r#""vault:p""#, "$a"),
        ("$a/tokenEnv", "", "$a"),
        ("$a/tokenEnv", r#""1BAD""#, "$a/tokenEnv"),
        (
            "/hooks/0/contentReceiver",
            r#"{"url": "https://r.example.com"}"#,
            "/hooks/0/contentReceiver",
        ),
    ]);
}

#[test]
fn r15_unknown_fields_are_ignored_with_a_warning() {
    let paths = [
        "/x-root",
        "/hooks/0/x-backend",
        "/hooks/0/transport/x-t",
        "$i/x-sub",
    ];
    let edits: Vec<_> = paths.iter().map(|p| (*p, r#"{"anything": 1}"#)).collect();
    let reg = accepted(&edits);
    assert_eq!(reg.backends, accepted(&[]).backends);
    for path in paths.map(expand) {
        assert!(
            reg.warnings.iter().any(|w| w.path == path),
            "{path}: {:#?}",
            reg.warnings
        );
    }
}

#[test]
fn r16_managed_scope_requires_disableable_false() {
    let managed = ("$i/scope", r#""managed""#);
    let problems = rejected_at(&[managed], "$i/disableable");
    assert!(problems[0].rule.contains("must be false"), "{problems:#?}");
    // And at once, what its remedy would meet next: no managed scope here at all.
    assert!(problems[1].rule.contains("cannot enforce"), "{problems:#?}");
    assert_eq!(problems[1].path, expand("$i/scope"));
    rejected_at(&[managed, ("$i/disableable", "true")], "$i/disableable");
    rejected_at(&[("$i/scope", r#""global""#)], "$i/scope");
}

/// Mandatory policy nothing here can enforce fails rather than degrades (§6 rule 8): a
/// managed subscription, or one users must not disable, is refused by name; the scopes
/// `ahp hook install` writes to, and a disableable subscription, load.
#[test]
fn managed_policy_this_interceptor_cannot_enforce_is_refused() {
    let managed = ("$i/scope", r#""managed""#);
    let problems = rejected_at(&[managed, ("$i/disableable", "false")], "$i/scope");
    assert!(problems[0].rule.contains("cannot enforce"), "{problems:#?}");
    for scope in [r#""user""#, r#""project""#] {
        let problems = rejected_at(
            &[("$i/scope", scope), ("$i/disableable", "false")],
            "$i/disableable",
        );
        assert!(problems[0].rule.contains("cannot enforce"), "{problems:#?}");
        accepted(&[("$i/scope", scope), ("$i/disableable", "true")]);
        accepted(&[("$i/scope", scope)]);
    }
    rejected_at(&[("$i/disableable", "false")], "$i/disableable");
}

#[test]
fn transports_are_checked() {
    for url in [
        "ftp://x.example",
        "https://",
        "https:// x.example",
        "/hooks",
        "https://:80/",
    ] {
        rejected_at(
            &[("/hooks/0/transport/url", &format!("{url:?}"))],
            "/hooks/0/transport/url",
        );
    }
    accepted(&[("/hooks/0/transport/url", r#""http://[::1]:8080/h?q""#)]);
    rejects(&[
        (
            "/hooks/1/transport/lifecycle",
            "",
            "/hooks/1/transport/lifecycle",
        ),
        (
            "/hooks/1/transport/command",
            r#""""#,
            "/hooks/1/transport/command",
        ),
        (
            "/hooks/1/transport/args",
            r#"["ok", 1]"#,
            "/hooks/1/transport/args/1",
        ),
        (
            "/hooks/1/transport/type",
            r#""ws""#,
            "/hooks/1/transport/type",
        ),
    ]);
}

#[test]
fn oauth_bindings_are_parsed_and_checked() {
    let oauth = r#"{"type": "oauth", "issuer": "https://id.example.com", "resource": "https://policy.example.com/hooks",
        "clientId": "c", "flow": "client_credentials", "scopes": ["s"],
        "clientSecretRef": "env:AHP_CLIENT_SECRET"}"#;
    let reg = accepted(&[("$a", oauth)]);
    let Some(Auth::OAuth(got)) = &reg.backends[0].auth else {
        panic!("{reg:?}")
    };
    assert_eq!(
        (got.flow, got.scopes.as_slice()),
        (OAuthFlow::ClientCredentials, &["s".into()][..])
    );
    assert_eq!(
        got.client_secret_ref.as_deref(),
        Some("env:AHP_CLIENT_SECRET")
    );
    assert!(reg.warnings.is_empty(), "{:#?}", reg.warnings);
    let secretless = accepted(&[("$a", oauth), ("$a/clientSecretRef", "")]);
    assert!(
        secretless
            .warnings
            .iter()
            .any(|w| w.path == expand("$a") && w.rule.contains("clientSecretRef")),
        "{:#?}",
        secretless.warnings
    );
    let problems = rejected_at(
        &[("$a", r#"{"type": "oauth", "issuer": "http://id"}"#)],
        "$a/issuer",
    );
    for missing in ["resource", "clientId", "flow"].map(|k| expand(&format!("$a/{k}"))) {
        assert!(problems.iter().any(|p| p.path == missing), "{missing}");
    }
    rejected_at(&[("$a", oauth), ("$a/flow", r#""implicit""#)], "$a/flow");
    // The resource is an absolute URI with no fragment (RFC 8707 §2); a scope is one
    // scope token (RFC 6749 §3.3), never two joined by a space.
    for resource in [r#""r""#, r#""https://p.example.com/#frag""#] {
        rejected_at(&[("$a", oauth), ("$a/resource", resource)], "$a/resource");
    }
    for (scopes, at) in [
        (r#"["read write"]"#, "$a/scopes/0"),
        (r#"["a\"b"]"#, "$a/scopes/0"),
        (r#"["ok", "caf\u00e9"]"#, "$a/scopes/1"),
    ] {
        rejected_at(&[("$a", oauth), ("$a/scopes", scopes)], at);
    }
}

/// RFC 8414 §2: an issuer identifier has no query or fragment components, and the host
/// refuses one at every call: refused at load, at the issuer.
#[test]
fn an_issuer_with_a_query_or_fragment_is_refused_at_it() {
    let oauth = r#"{"type": "oauth", "issuer": "https://id.example.com", "resource": "https://policy.example.com/hooks",
        "clientId": "c", "flow": "client_credentials", "clientSecretRef": "env:S"}"#;
    for issuer in [
        "https://id.example.com/?tenant=a",
        "https://id.example.com/t#a",
        "https://id.example.com?",
    ] {
        let text = json!(issuer).to_string();
        let problems = rejected_at(&[("$a", oauth), ("$a/issuer", &text)], "$a/issuer");
        assert_eq!(problems.len(), 1, "{issuer}: {problems:#?}");
        assert_eq!(
            problems[0].rule, "must have no query or fragment (RFC 8414 §2)",
            "{issuer}"
        );
    }
    accepted(&[
        ("$a", oauth),
        ("$a/issuer", r#""https://id.example.com/t/a""#),
    ]);
}

#[test]
fn shared_subscription_fields_are_type_checked() {
    rejects(&[
        ("$o/includeNative", r#""yes""#, "$o/includeNative"),
        (
            "$o/filters",
            r#"{"toolKinds": [1]}"#,
            "$o/filters/toolKinds/0",
        ),
        (
            "$o/upload",
            r#"{"auth": {"type": "bearer", "token": "t"}}"#,
            "$o/upload/auth/token",
        ),
    ]);
    let native = [
        ("$o/includeNative", "true"),
        ("$o/content", r#"{"default": "body"}"#),
    ];
    assert!(
        accepted(&native).backends[1].subscriptions[0]
            .view
            .include_native
    );
}

/// A content selection naming a category the schema does not (a typo such as `image`,
/// which would leave images at the default) is accepted, as a part may name its own
/// category, with a warning at that member; the named ones are not warned about.
#[test]
fn a_content_category_the_schema_does_not_name_is_warned_at() {
    let named = r#"{"default": "omit", "text": "body", "reasoning": "omit", "images": "metadata",
                    "audio": "omit", "video": "omit", "files": "omit"}"#;
    assert!(accepted(&[("$o/content", named)]).warnings.is_empty());
    let typo = accepted(&[("$o/content", r#"{"default": "body", "image": "omit"}"#)]);
    let paths: Vec<&str> = typo.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(paths, [expand("$o/content/image")]);
    assert!(
        typo.warnings[0].rule.contains("images"),
        "{:?}",
        typo.warnings
    );
}

/// `native` is the provider's whole payload, sent verbatim: beside a selection below
/// `body` it would carry what content selection lowers, so the pair is refused, at
/// `includeNative`, naming the lowered categories (the default and any named one).
#[test]
fn include_native_needs_body_for_every_category() {
    for (content, lowered) in [
        (r#"{"default": "omit"}"#, "default"),
        (r#"{"default": "metadata", "text": "body"}"#, "default"),
        (
            r#"{"default": "body", "images": "metadata", "x-custom": "omit"}"#,
            "images, x-custom",
        ),
    ] {
        let edits = [("$o/includeNative", "true"), ("$o/content", content)];
        let problems = rejected_at(&edits, "$o/includeNative");
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(
            problems[0]
                .rule
                .contains(&format!("(lowered here: {lowered})")),
            "{problems:#?}"
        );
    }
    let whole = r#"{"default": "body", "text": "body", "images": "body"}"#;
    accepted(&[("$i/includeNative", "true"), ("$i/content", whole)]);
    accepted(&[("$i/includeNative", "false")]);
}

/// `scopes`, `filters.toolKinds` and `filters.paths` are sets of non-empty names
/// (`uniqueItems`, `minLength: 1`); a stdio command's `args` may repeat and be empty.
#[test]
fn name_lists_are_distinct_and_non_empty() {
    let oauth = r#"{"type": "oauth", "issuer": "https://id.example.com", "resource": "https://policy.example.com/hooks",
        "clientId": "c", "flow": "client_credentials", "clientSecretRef": "v"}"#;
    let problems = rejected_at(
        &[("$a", oauth), ("$a/scopes", r#"["", "a", "a"]"#)],
        "$a/scopes/0",
    );
    let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths, [expand("$a/scopes/0"), expand("$a/scopes/2")]);
    // A scope that is no token is named even when a later item repeats it.
    let problems = rejected_at(
        &[("$a", oauth), ("$a/scopes", r#"["a b", "a b"]"#)],
        "$a/scopes/0",
    );
    let found: Vec<(String, bool)> = problems
        .iter()
        .map(|p| (p.path.clone(), p.rule.contains("scope token")))
        .collect();
    let (first, second) = (expand("$a/scopes/0"), expand("$a/scopes/1"));
    assert_eq!(found, [(first, true), (second, false)]);
    assert!(problems[1].rule.contains("repeats"), "{problems:#?}");
    rejects(&[
        (
            "$o/filters",
            r#"{"toolKinds": [""]}"#,
            "$o/filters/toolKinds/0",
        ),
        (
            "$i/filters",
            r#"{"toolKinds": ["shell"], "paths": ["src", "src"]}"#,
            "$i/filters/paths/1",
        ),
    ]);
    let reg = accepted(&[
        ("$a", oauth),
        ("$a/scopes", r#"["a", "b"]"#),
        (
            "$o/filters",
            r#"{"toolKinds": ["shell", "mcp"], "paths": ["src"]}"#,
        ),
        ("/hooks/1/transport/args", r#"["", "x", "x"]"#),
    ]);
    let Some(Auth::OAuth(got)) = &reg.backends[0].auth else {
        panic!("{reg:?}")
    };
    assert_eq!(got.scopes, ["a", "b"]);
}

/// An upload is ignored with a warning only once it is well-formed: endpoint, timeoutMs
/// and maxBytes are required (content-upload.schema.json), and each is checked.
#[test]
fn a_malformed_upload_is_a_problem_and_a_well_formed_one_a_warning() {
    let problems = rejected_at(&[("$o/upload", "{}")], "$o/upload/endpoint");
    let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
    let want = ["endpoint", "timeoutMs", "maxBytes"].map(|k| expand(&format!("$o/upload/{k}")));
    assert_eq!(paths, want);
    let upload = r#"{"endpoint": "https://upload.example.com/up", "timeoutMs": 500,
        "maxBytes": 0}"#;
    for (field, value) in [
        ("endpoint", r#""http://upload.example.com/up""#),
        ("endpoint", r#""https://u:p@upload.example.com/up""#),
        ("endpoint", "7"),
        ("timeoutMs", "0"),
        ("timeoutMs", "1.5"),
        ("maxBytes", "-1"),
        ("maxBytes", r#""10""#),
    ] {
        let path = format!("$o/upload/{field}");
        rejected_at(&[("$o/upload", upload), (&path, value)], &path);
    }
    for (field, value) in [
        ("endpoint", r#""http://127.0.0.1:8080/up""#),
        ("timeoutMs", "500.0"),
        ("maxBytes", "1e6"),
        ("auth", r#"{"type": "bearer", "tokenEnv": "UPLOAD_TOKEN"}"#),
    ] {
        let path = format!("$o/upload/{field}");
        let reg = accepted(&[("$o/upload", upload), (&path, value)]);
        let warned =
            |w: &Problem| w.path == expand("$o/upload") && w.rule.contains("not supported");
        assert!(reg.warnings.iter().any(warned), "{:#?}", reg.warnings);
    }
}

#[test]
fn all_problems_are_collected_and_odd_shapes_never_panic() {
    let edits = [
        ("/protocolVersion", "2"),
        ("/hooks/0/id", "7"),
        ("$i/timeoutMs", "0"),
        ("$o/content", ""),
    ];
    let problems = parse(&edited(&edits)).unwrap_err();
    let paths: Vec<_> = problems.iter().map(|p| p.path.clone()).collect();
    assert_eq!(paths, edits.map(|(pointer, _)| expand(pointer)));
    let odd = r#"null 1 "x" [] {} [{}] -1.5 {"type":[]} {"type":"oauth"}"#;
    let slots =
        "/hooks /hooks/0 /hooks/0/transport $a /hooks/0/subscriptions $i $i/events $i/content";
    for slot in slots.split(' ') {
        for value in odd.split(' ') {
            let _ = parse(&edited(&[(slot, value)]));
        }
    }
}

/// A registration under the 16 MiB bound can break a rule hundreds of thousands of
/// times; listed in full, the entries ran the component out of memory. At most
/// [`ahp_vocab::MAX_LISTED`] problems and as many warnings are listed, in document order,
/// and then one entry at the root says how many more there were. Warnings about names
/// ignored are listed after the others, and counted apart: a thousand unknown names
/// never push out the warning about a resource at another origin.
#[test]
fn problems_and_warnings_are_listed_a_hundred_at_most() {
    let count = 1000;
    let categories: serde_json::Map<String, Value> = (0..count)
        .map(|i| (format!("x-{i:04}"), json!("omit")))
        .chain([("default".to_owned(), json!("omit"))])
        .collect();
    let elsewhere = json!({"type": "oauth", "issuer": "https://id.example.com",
        "resource": "https://other.example.com/hooks", "clientId": "c",
        "flow": "client_credentials", "clientSecretRef": "env:S"});
    let mut reg = accepted(&[
        ("$o/content", &Value::Object(categories).to_string()),
        ("$a", &elsewhere.to_string()),
    ]);
    let notable = reg.warnings.remove(0);
    assert_eq!(notable.path, expand("$a/resource"), "{notable:?}");
    let numbers = json!(vec![7; count]).to_string();
    let problems = rejected_at(&[("$o/events", &numbers)], "$o/events/0");
    for (listed, what, hundredth) in [
        (reg.warnings, "ignored names", "$o/content/x-0099"),
        (problems, "problems", "$o/events/99"),
    ] {
        assert_eq!(listed.len(), ahp_vocab::MAX_LISTED + 1, "{what}");
        assert_eq!(listed[99].path, expand(hundredth), "{what}");
        let last = &listed[100];
        assert_eq!(last.path, "", "{what}");
        let rule = format!("900 more {what} not listed (only the first 100 are)");
        assert_eq!(last.rule, rule);
    }
}

/// An OAuth binding whose `resource` is an http(s) URL at another origin than the
/// backend's URL is warned at: the token meant for that resource goes to this URL, which
/// could use it there. The same origin however spelled (case, the default port), or a
/// resource that is no URL (a URN), is not.
#[test]
fn a_resource_at_another_origin_than_the_backend_is_warned_at() {
    let binding = |resource: &str| {
        json!({"type": "oauth", "issuer": "https://id.example.com", "resource": resource,
            "clientId": "c", "flow": "client_credentials", "clientSecretRef": "env:S"})
        .to_string()
    };
    for elsewhere in [
        "https://other.example.com/hooks",
        "http://policy.example.com/hooks",
        "https://policy.example.com:8443/hooks",
    ] {
        let reg = accepted(&[("$a", &binding(elsewhere))]);
        assert_eq!(reg.warnings.len(), 1, "{elsewhere}: {:#?}", reg.warnings);
        assert_eq!(reg.warnings[0].path, expand("$a/resource"), "{elsewhere}");
        assert!(
            reg.warnings[0].rule.contains("another origin"),
            "{elsewhere}"
        );
    }
    for same in [
        "https://policy.example.com/other/path",
        "HTTPS://Policy.Example.com:443/hooks",
        "urn:example:policy",
    ] {
        let reg = accepted(&[("$a", &binding(same))]);
        assert!(reg.warnings.is_empty(), "{same}: {:#?}", reg.warnings);
    }
}
