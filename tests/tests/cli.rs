//! The `ahp` command line's own contract: usage errors, the bounds and checks on what it
//! reads (events, registrations, trust roots, host options), the exit codes of `observe`
//! and `demo`, and logs fit for a file.

use ahp_tests::fault_backend::{refused_url, Behaviour, FaultBackend};
use ahp_tests::pki::Pki;
use ahp_tests::support::{ahp_command, event, one_json_line, registration, valid_event, Http, Run};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The largest event or registration the CLI reads: the hook payload's bound, 16 MiB.
const MAX_INPUT_BYTES: u64 = 16 << 20;

/// Runs `ahp` with `args`, stdin empty and `AHP_LOG` unset; `env` is set on top.
fn ahp(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = ahp_command();
    command
        .args(args)
        .env_remove("AHP_LOG")
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    Run::of(command.output().expect("run ahp"))
}

/// The upstream fixture of a valid registration (it sends nothing at load).
fn portable() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/upstream/fixtures/draft/registration/portable.valid.json"
    ))
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// An event holding more JSON values than the component can work on is bad input: exit
/// 1 naming the rule, never an engine failure (which ran the component out of memory, a
/// denial). Here 1.2 million one-member objects, 9.6 MB, well under the 16 MiB bound;
/// and 300,000, 2.4 MB, which weigh 3 million at 8 an object (a B-tree node of its own
/// once parsed): at 4 an object they were read, and with their content lowered and a
/// modification applied ran the component out of memory.
#[test]
fn an_event_of_too_many_values_is_refused_as_bad_input() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ev = dir.path().join("event.json");
    let mut event: Value =
        serde_json::from_str(&valid_event("tool.before", "evt_many")).expect("JSON");
    let reg = portable();
    for (objects, named) in [(1_200_000, "2000000 JSON values"), (300_000, "an object 8")] {
        event["tool"]["input"] = json!({"xs": vec![json!({"a": 0}); objects]});
        std::fs::write(&ev, event.to_string()).expect("write the event");
        let args = [
            "intercept",
            "--registration",
            path(&reg),
            "--event",
            path(&ev),
        ];
        let run = ahp(&args, &[]);
        run.assert_exit(1, &format!("{objects} objects"));
        assert!(run.stderr.contains(named), "{objects}: {}", run.stderr);
    }
}

/// A registration whose unknown member nests secrets' names over a large object (valid:
/// it holds no text) loads, warned about, within the load's CPU bound: each secret's name
/// had all it holds searched again, and 120 levels over 600,000 members ran the load out
/// of CPU (a trap, exit 2 with a backtrace and no field named). Written as text: a tree
/// of values built level by level would be copied at each.
#[test]
fn nested_secret_names_over_a_large_object_load_within_the_cpu_bound() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fixture = std::fs::read_to_string(portable()).expect("the fixture");
    let members: Vec<String> = (0..600_000).map(|i| format!("\"k{i}\":null")).collect();
    let nested = format!(
        "{}{{\"x\":{{{}}}}}{}",
        r#"{"secret":"#.repeat(120),
        members.join(","),
        "}".repeat(120)
    );
    let opened = fixture.find('{').expect("an object") + 1;
    let text = format!(
        "{}\"x\":{nested},{}",
        &fixture[..opened],
        &fixture[opened..]
    );
    let reg = dir.path().join("registration.json");
    std::fs::write(&reg, text).expect("write the registration");
    let run = ahp(&["check", path(&reg)], &[]);
    run.assert_exit(0, "nested secrets' names holding no text");
    assert!(run.stderr.contains("warning: /x:"), "{}", run.stderr);
}

/// An event just under the weight limit is worked on whole inside the component's
/// memory: its document, parsed again from its text beside it, has its content part
/// lowered as the subscription selects (metadata) and a backend's modification applied,
/// with no trap (an engine failure, a denial): two million numbers, or one-member
/// objects (10 each, a B-tree node of its own once parsed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_at_the_weight_limit_is_lowered_and_modified_in_the_component() {
    let modify = json!([{"type": "modify", "target": "input", "operation": "replace",
                         "value": {"command": "ls -l"}}]);
    let backend = FaultBackend::start(vec![Behaviour::Effects(modify)]).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let hook = Http::new("com.example.big", backend.url())
        .policy("fail-closed")
        .timeout_ms(30_000);
    let reg = dir.path().join("registration.json");
    std::fs::write(&reg, registration(&[hook])).expect("write the registration");
    let mut event: Value =
        serde_json::from_str(&valid_event("tool.before", "evt_big")).expect("JSON");
    let body = "BODY-THE-SUBSCRIPTION-LOWERS";
    // The rest of the event weighs far less than the thousand left.
    for (shape, xs) in [
        ("numbers", vec![json!(0); 2_000_000 - 1_000]),
        ("objects", vec![json!({"a": 0}); 199_900]),
    ] {
        let length = xs.len();
        event["extensions"] = json!({
            "com.example.notes": {"id": "p1", "kind": "text", "mediaType": "text/plain",
                                  "selection": "body", "text": body},
            "com.example.xs": xs,
        });
        let ev = dir.path().join("event.json");
        std::fs::write(&ev, event.to_string()).expect("write the event");
        let run = Run::of(
            intercept_command(&reg, &ev)
                .args(["--effects", "deny,modify"])
                .env_remove("AHP_LOG")
                .stdin(Stdio::null())
                .output()
                .expect("run ahp intercept"),
        );
        run.assert_exit(0, shape);
        let record = one_json_line(&run.stdout);
        assert_eq!(record["decidedBy"], "no-objection", "{shape}: {record}");
        let effective = &record["effective"]["input"];
        assert_eq!(*effective, json!({"command": "ls -l"}), "{shape}: {record}");
        let last = backend.requests().pop().expect("a request");
        let sent = last.json()["params"]["event"].clone();
        let notes = &sent["extensions"]["com.example.notes"];
        assert_eq!(notes["selection"], "metadata", "{shape}: {notes}");
        assert!(notes.get("text").is_none(), "{shape}: {notes}");
        let request = String::from_utf8_lossy(&last.body).into_owned();
        assert!(!request.contains(body), "{shape}: the body text is sent");
        let sent_xs = sent["extensions"]["com.example.xs"]
            .as_array()
            .map(Vec::len);
        assert_eq!(sent_xs, Some(length), "{shape}");
    }
    assert_eq!(backend.requests().len(), 2);
}

/// A registration under the 16 MiB bound that breaks one rule at most of its values is
/// checked, never trapped: 700,000 content categories the schema does not name (a
/// warning of some 190 bytes each, which together ran the component out of memory, exit
/// 1 with "wasm trap: unreachable") load with the first hundred warnings and one line
/// counting the rest; 1,000,000 events that are no string (a problem each) are refused
/// the same way.
#[test]
fn a_registration_breaking_a_rule_at_every_value_is_checked_without_a_trap() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // Written out, not built as a `Value`: this test's own code is not optimised.
    let many = |count: usize, entry: &dyn Fn(usize) -> String| -> String {
        (0..count).map(|i| entry(i) + ",").collect()
    };
    let cases = [
        (
            "content",
            700_000,
            format!(
                r#"{{"events": ["tool.after"], "mode": "observe",
                    "content": {{{}"default": "omit"}}}}"#,
                many(700_000, &|i| format!(r#""x{i}": "omit""#))
            ),
            "ignored names",
            0,
        ),
        (
            "events",
            1_000_000,
            format!(
                r#"{{"events": [{}7], "mode": "observe", "content": {{"default": "omit"}}}}"#,
                many(1_000_000 - 1, &|_| "7".into())
            ),
            "problems",
            1,
        ),
    ];
    for (member, count, subscription, listed, exit) in cases {
        let file = dir.path().join(format!("{member}.json"));
        let reg = format!(
            r#"{{"protocolVersion": "draft", "hooks": [{{"id": "com.example.review",
                "transport": {{"type": "stdio", "command": "/usr/local/bin/review",
                    "lifecycle": "per_event"}},
                "subscriptions": [{subscription}]}}]}}"#
        );
        std::fs::write(&file, reg).expect("write the registration");
        let run = ahp(&["check", path(&file)], &[]);
        run.assert_exit(exit, member);
        let entries = format!("/hooks/0/subscriptions/0/{member}/");
        let named = run.stderr.lines().filter(|l| l.contains(&entries)).count();
        assert_eq!(named, 100, "{member}: {}", run.stderr);
        let more = format!("{} more {listed} not listed", count - 100);
        assert!(run.stderr.contains(&more), "{member}: {}", run.stderr);
    }
}

/// A registration of more JSON values than the component can read and build at once
/// (2.5 million numbers, 5 MB: read, then built into the tree the checks walk, they ran
/// it out of memory, "wasm trap: unreachable") is refused naming the rule, never
/// trapped.
#[test]
fn a_registration_of_too_many_values_is_refused_naming_the_rule() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("registration.json");
    let numbers = "0,".repeat(2_500_000);
    let reg = format!(
        r#"{{"protocolVersion": "draft", "x": [{numbers}0], "hooks": [{{"id": "com.example.review",
            "transport": {{"type": "stdio", "command": "/usr/local/bin/review"}},
            "subscriptions": [{{"events": ["tool.after"], "mode": "observe"}}]}}]}}"#
    );
    std::fs::write(&file, reg).expect("write the registration");
    let run = ahp(&["check", path(&file)], &[]);
    run.assert_exit(1, "a registration of too many values");
    assert!(
        run.stderr.contains("at most 2000000 JSON values"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("trap"), "{}", run.stderr);
}

/// A usage error is "the call could not be made", exit 1, never 2 (a denial) — except
/// under `ahp hook HARNESS`, which a harness runs and which must answer it as the
/// harness's block (exit 2 and the generic reason: the contract files check each
/// harness's). `--help` and `--version` are exit 0, under a harness too when stdin holds
/// nothing (in front of anything else they are a usage error: see the hook contract).
#[test]
fn a_usage_error_is_exit_1_and_a_block_only_under_a_harness_hook() {
    let reg = portable();
    let reg = path(&reg);
    let exit_1: [&[&str]; 6] = [
        &["intercept", "--registration", reg],
        &[
            "intercept",
            "--registration",
            reg,
            "--event",
            "-",
            "--effects",
            "nope",
        ],
        &["observe", "--registration", reg],
        &["check"],
        &["check", reg, "--retries", "many"],
        &["hook", "install", "claude-code"],
    ];
    for args in exit_1 {
        let run = ahp(args, &[]);
        run.assert_exit(1, &format!("{args:?}"));
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert!(
            run.stderr.starts_with("error: "),
            "{args:?}: {}",
            run.stderr
        );
    }
    let run = ahp(&["hook", "claude-code"], &[]);
    run.assert_exit(2, "hook without --registration");
    let reason = format!("{}\n", ahp_tests::hook::FAILED_REASON);
    assert_eq!(run.stderr, reason, "clap's text is not for the model");
    // A harness name that is no harness's: exit 2 with clap's text, as before.
    let run = ahp(&["hook", "claud-code", "--registration", reg], &[]);
    run.assert_exit(2, "hook with an unknown harness");
    assert!(run.stderr.contains("unknown harness"), "{}", run.stderr);
    let asked: [(&[&str], &str); 7] = [
        (&["--help"], "Usage: ahp"),
        (&["intercept", "--help"], "Usage: ahp intercept"),
        (&["--version"], "ahp "),
        (&["hook", "--help"], "Usage: ahp hook"),
        (&["hook", "claude-code", "--help"], "Usage: ahp hook"),
        (
            &["hook", "copilot", "--registration", reg, "-h"],
            "Usage: ahp hook",
        ),
        (&["hook", "codex", "--version"], "ahp-hook "),
    ];
    for (args, shown) in asked {
        let run = ahp(args, &[]);
        run.assert_exit(0, &format!("{args:?}"));
        assert!(run.stdout.contains(shown), "{args:?}: {}", run.stdout);
        assert!(run.stderr.is_empty(), "{args:?}: {}", run.stderr);
    }
}

/// `--source` must be what an event's `source` must be, an absolute URI with no
/// credential in it: `hook install` refuses one that is not, naming the flag, rather than print hooks that would deny
/// every call (the component refuses each event built with it).
#[test]
fn hook_install_refuses_a_source_that_is_no_uri_or_carries_a_credential() {
    let reg = portable();
    let install = |harness: &str, source: &str| {
        let args = ["hook", "install", harness, "--registration", path(&reg)];
        ahp(&[&args[..], &["--source", source]].concat(), &[])
    };
    for source in ["not a uri", "harness/42", "https://harness.example/%zz"] {
        let run = install("claude-code", source);
        run.assert_exit(1, source);
        assert!(run.stdout.is_empty(), "{source}: {}", run.stdout);
        assert!(run.stderr.contains("--source"), "{source}: {}", run.stderr);
        assert!(
            run.stderr.contains("is not an absolute URI (RFC 3986)"),
            "{source}: {}",
            run.stderr
        );
    }
    // An event's source goes to every backend: a credential in it, as user info or in a
    // parameter named as a secret (which the component refuses too), is refused
    // unrepeated, even when the rest is no URI either.
    for (secret, refusal) in [
        (
            "https://svc:hunter2@harness.example/",
            "must not carry user info",
        ),
        (
            "https://h.example/?token=hunter2",
            "parameter named as a secret",
        ),
        (
            "https://h.example/?access_token=hunter2",
            "parameter named as a secret",
        ),
        (
            "https://h.example/%zz?api_key=hunter2",
            "parameter named as a secret",
        ),
    ] {
        let run = install("claude-code", secret);
        run.assert_exit(1, secret);
        assert!(run.stdout.is_empty(), "{secret}: {}", run.stdout);
        assert!(run.stderr.contains("--source"), "{secret}: {}", run.stderr);
        assert!(run.stderr.contains(refusal), "{secret}: {}", run.stderr);
        assert!(!run.stderr.contains("hunter2"), "{secret}: {}", run.stderr);
    }
    let run = install("codex", "urn:example:harness");
    run.assert_exit(0, "a URN is a URI");
    assert!(run.stdout.contains("urn:example:harness"), "{}", run.stdout);
}

/// A trust-roots file holding no PEM certificate (DER bytes, a private key, nothing) is
/// refused by the flag and the file; accepted, it would make every https call fail its
/// handshake while `check` said the setup was valid.
#[test]
fn trust_roots_without_a_pem_certificate_are_refused_naming_the_flag() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let key = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n";
    let reg = portable();
    for (name, content) in [
        ("ca.der", &[0x30, 0x82, 0x01, 0x0a, 0x02, 0x82][..]),
        ("key.pem", key.as_bytes()),
        ("empty.pem", b""),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, content).expect("write the file");
        let run = ahp(&["check", path(&reg), "--trust-roots", path(&file)], &[]);
        run.assert_exit(1, name);
        assert_eq!(
            run.stderr,
            format!(
                "error: --trust-roots {}: no PEM certificate found\n",
                file.display()
            )
        );
        assert!(run.stdout.is_empty(), "{name}: {}", run.stdout);
    }
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, Pki::generate().ca_pem).expect("write the CA");
    let run = ahp(&["check", path(&reg), "--trust-roots", path(&ca)], &[]);
    run.assert_exit(0, "a PEM CA certificate");
}

/// `--oauth-clients` is read and checked before anything runs: a file that is missing,
/// not a list, or has an entry with a bad field is refused by the flag, the entry and the
/// field; a good one is accepted.
#[test]
fn oauth_clients_are_refused_naming_the_flag_the_entry_and_the_field() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = portable();
    let missing = dir.path().join("missing.json");
    let run = ahp(
        &["check", path(&reg), "--oauth-clients", path(&missing)],
        &[],
    );
    run.assert_exit(1, "a missing file");
    assert!(
        run.stderr.starts_with(&format!(
            "error: --oauth-clients {}: cannot read:",
            missing.display()
        )),
        "{}",
        run.stderr
    );
    let client = json!({"issuer": "https://as.example", "clientId": "c",
                        "clientSecretRef": "env:AHP_CLIENT_SECRET", "scopes": ["hooks"]});
    let mut unquoted = client.clone();
    unquoted["clientSecretRef"] = json!("hunter2");
    let mut password = client.clone();
    password["issuer"] = json!("https://u:hunter2@as.example");
    for (name, content, error) in [
        ("object.json", unquoted.clone(), "must be a JSON array"),
        (
            "password.json",
            json!([password]),
            "[0]: `issuer` must not carry user info (user:password@)",
        ),
        (
            "ref.json",
            json!([client, unquoted]),
            "[1]: `clientSecretRef` must be `file:PATH` or `env:NAME`",
        ),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, content.to_string()).expect("write the file");
        let run = ahp(&["check", path(&reg), "--oauth-clients", path(&file)], &[]);
        run.assert_exit(1, name);
        let expected = format!("error: --oauth-clients {}: {error}", file.display());
        assert!(run.stderr.starts_with(&expected), "{name}: {}", run.stderr);
        assert!(!run.stderr.contains("hunter2"), "{name}: no value echoed");
    }
    let good = dir.path().join("clients.json");
    std::fs::write(&good, json!([client]).to_string()).expect("write the file");
    let secret = [("AHP_CLIENT_SECRET", "cs-never-shown")];
    let run = ahp(
        &["check", path(&reg), "--oauth-clients", path(&good)],
        &secret,
    );
    run.assert_exit(0, "a good trust policy");
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    // Its secret unset here: accepted, and warned about by name, never by value.
    let run = ahp(&["check", path(&reg), "--oauth-clients", path(&good)], &[]);
    run.assert_exit(0, "a trust policy whose secret is not set");
    assert!(
        run.stderr.contains(
            "warning: --oauth-clients: the clientSecretRef of the client at \
             https://as.example does not resolve"
        ),
        "{}",
        run.stderr
    );
    // Nor the reference: a secret pasted after `env:` can look like a variable's name.
    assert!(!run.stderr.contains("AHP_CLIENT_SECRET"), "{}", run.stderr);
}

/// An `--oauth-clients` secret in a FIFO (a secret manager's) is not read for the
/// command's warnings: reading it waited for a writer, for ever under `ahp check`, and
/// would have taken the secret the first dispatch needs.
#[test]
fn a_client_secret_in_a_fifo_is_not_read_for_the_warnings() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fifo = dir.path().join("client-secret");
    ahp_tests::support::make_fifo(&fifo);
    let clients = dir.path().join("clients.json");
    let client = json!({"issuer": "https://as.example", "clientId": "c",
                        "clientSecretRef": format!("file:{}", fifo.display())});
    std::fs::write(&clients, json!([client]).to_string()).expect("write the file");
    let child = ahp_command()
        .args([
            "check",
            path(&portable()),
            "--oauth-clients",
            path(&clients),
        ])
        .env_remove("AHP_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ahp");
    let case = "`ahp check` waiting for a writer of the secret's FIFO";
    let run = wait_within(child, std::time::Duration::from_secs(30), case);
    run.assert_exit(0, "a client secret in a FIFO");
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
}

/// An event or registration larger than the bound is refused by its flag, exit 1, before
/// anything runs: read without a bound, `--event /dev/zero` would fill memory, and a
/// 40 MiB event ended as an engine failure (exit 2) with a backtrace.
#[test]
fn an_event_or_registration_over_16_mib_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let big = dir.path().join("big.json");
    let file = std::fs::File::create(&big).expect("create the file");
    file.set_len(MAX_INPUT_BYTES + 1).expect("a sparse file");
    let at_bound = dir.path().join("at-bound.json");
    let file = std::fs::File::create(&at_bound).expect("create the file");
    file.set_len(MAX_INPUT_BYTES).expect("a sparse file");
    let ev = dir.path().join("event.json");
    std::fs::write(&ev, event("evt_cli_big")).expect("write the event");
    let reg = portable();
    let (reg, ev, big) = (path(&reg), path(&ev), path(&big));
    let cases: [(&[&str], &str); 5] = [
        (
            &["intercept", "--registration", reg, "--event", big],
            "--event",
        ),
        (
            &["intercept", "--registration", big, "--event", ev],
            "--registration",
        ),
        (
            &["observe", "--registration", reg, "--event", big],
            "--event",
        ),
        (
            &["observe", "--registration", big, "--event", ev],
            "--registration",
        ),
        (&["check", big], "registration"),
    ];
    for (args, flag) in cases {
        let run = ahp(args, &[]);
        run.assert_exit(1, &format!("{args:?}"));
        assert_eq!(
            run.stderr,
            format!("error: {flag} {big}: larger than 16 MiB\n"),
            "{args:?}"
        );
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }
    // At the bound it is read, and refused for what it is (16 MiB of NUL is no event).
    let run = ahp(
        &[
            "intercept",
            "--registration",
            reg,
            "--event",
            path(&at_bound),
        ],
        &[],
    );
    run.assert_exit(1, "an event of exactly 16 MiB");
    assert!(!run.stderr.contains("larger than"), "{}", run.stderr);
}

/// `ahp observe` whose component failed sent nothing: exit 1, with `engineFailure` in its
/// output. An observer that could not be reached is a result, and exit 0: observation is
/// best effort.
#[test]
fn observe_exits_1_only_when_nothing_could_be_sent() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ev = dir.path().join("event.json");
    std::fs::write(&ev, valid_event("tool.after", "evt_cli_observe")).expect("write the event");
    let reg = dir.path().join("registration.json");
    let observer = json!({"protocolVersion": "draft", "hooks": [{
        "id": "com.example.observer",
        "transport": {"type": "http", "url": refused_url()},
        "subscriptions": [{"events": ["tool.after"], "mode": "observe",
                           "content": {"default": "metadata"}}]
    }]});
    std::fs::write(&reg, observer.to_string()).expect("write the registration");
    let observe = [
        "observe",
        "--registration",
        path(&reg),
        "--event",
        path(&ev),
    ];

    let run = ahp(&observe, &[]);
    run.assert_exit(0, "an observer refusing the connection");
    let observed = one_json_line(&run.stdout);
    assert_eq!(
        observed,
        json!({"observers": [{"backend": "com.example.observer", "result": "connection-refused"}]})
    );

    let mut failing = observe.to_vec();
    failing.extend(["--component", env!("RUNAWAY_COMPONENT")]);
    let run = ahp(&failing, &[]);
    run.assert_exit(1, "a component that spins in observe");
    let observed = one_json_line(&run.stdout);
    assert_eq!(observed["engineFailure"], Value::Bool(true), "{observed}");
    assert!(
        run.stderr.contains("no observer was sent the event"),
        "{}",
        run.stderr
    );
}

/// One scripted call of `ahp demo`, as the scenario table in `host/src/demo.rs` scripts
/// it, written out here rather than read from that code.
struct Scripted {
    title: &'static str,
    tool: &'static str,
    decision: &'static str,
    decided_by: &'static str,
    /// How the table's "why" column starts.
    why: &'static str,
    /// The one interceptor's outcome and failure class in the audit record.
    outcome: &'static str,
    class: Option<&'static str>,
}

/// The demo's scenarios, in the order it runs them.
const DEMO: [Scripted; 5] = [
    Scripted {
        title: "allow",
        tool: "Read",
        decision: "allow",
        decided_by: "no-objection",
        why: "backend raised no objection",
        outcome: "no-effect",
        class: None,
    },
    Scripted {
        title: "explicit deny",
        tool: "Bash",
        decision: "deny",
        decided_by: "backend-deny",
        why: "backend: Recursive deletion needs a human review.",
        outcome: "deny",
        class: None,
    },
    Scripted {
        title: "timeout, fail-open",
        tool: "Bash",
        decision: "allow",
        decided_by: "no-objection",
        why: "deadline-exceeded in ",
        outcome: "failed-open",
        class: Some("deadline-exceeded"),
    },
    Scripted {
        title: "timeout, fail-closed",
        tool: "Bash",
        decision: "deny",
        decided_by: "synthetic-deny",
        why: "deadline-exceeded in ",
        outcome: "failed-closed",
        class: Some("deadline-exceeded"),
    },
    Scripted {
        title: "malformed reply",
        tool: "Write",
        decision: "deny",
        decided_by: "synthetic-deny",
        why: "malformed-json in ",
        outcome: "failed-closed",
        class: Some("malformed-json"),
    },
];

/// Checks a run of `ahp demo` in which every call settled as scripted: exit 0, nothing
/// on stderr, and for each scenario of [`DEMO`] its row of the table (its columns found
/// by the heading's) and its audit record. Returns the audit log's path.
fn assert_demo_as_scripted(run: &Run, case: &str) -> PathBuf {
    run.assert_exit(0, case);
    assert!(run.stderr.is_empty(), "{case}: {}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let heading = lines
        .iter()
        .position(|l| l.starts_with("#   scenario"))
        .unwrap_or_else(|| panic!("{case}: no table heading: {}", run.stdout));
    let column = |name: &str| lines[heading].find(name).expect("a column");
    let (scenario, tool, why) = (column("scenario"), column("tool"), column("why"));
    let rows = &lines[heading + 1..];
    assert_eq!(rows.get(DEMO.len()), Some(&""), "{case}: {}", run.stdout);
    for (i, (row, scripted)) in rows.iter().zip(&DEMO).enumerate() {
        let cell = |from: usize, to: usize| row.get(from..to).unwrap_or_else(|| panic!("{row}"));
        assert_eq!(cell(0, scenario).trim(), (i + 1).to_string(), "{row}");
        assert_eq!(cell(scenario, tool).trim(), scripted.title, "{row}");
        // Tool, result, decided by and ms: none has a space in it.
        let middle: Vec<&str> = cell(tool, why).split_whitespace().collect();
        let [tool, decision, decided_by, ms] = middle[..] else {
            panic!("{case}: {row}");
        };
        assert_eq!(
            (tool, decision, decided_by),
            (scripted.tool, scripted.decision, scripted.decided_by),
            "{row}"
        );
        assert!(ms.parse::<u64>().is_ok(), "{row}");
        assert!(cell(why, row.len()).starts_with(scripted.why), "{row}");
    }
    let audit = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("audit log: "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{case}: no audit log named: {}", run.stdout));
    let records = std::fs::read_to_string(&audit).expect("the audit log");
    assert_eq!(records.lines().count(), DEMO.len(), "{records}");
    for (i, (line, scripted)) in records.lines().zip(&DEMO).enumerate() {
        let record: Value = serde_json::from_str(line).expect("a JSON record");
        let interceptor = &record["interceptors"][0];
        let settled = (
            record["event"]["id"].as_str(),
            record["decision"].as_str(),
            record["decidedBy"].as_str(),
            interceptor["outcome"].as_str(),
            interceptor["failure"]["class"].as_str(),
        );
        let id = format!("evt_demo_{}", i + 1);
        let scripted = (
            Some(id.as_str()),
            Some(scripted.decision),
            Some(scripted.decided_by),
            Some(scripted.outcome),
            scripted.class,
        );
        assert_eq!(settled, scripted, "{record}");
    }
    audit
}

/// `ahp demo` exits 0 only when every scripted call settled as scripted. With a component
/// that settles every call as an engine failure, it names the first scenario that
/// differed and exits 1. Its audit directory is a new one, private to the user.
#[test]
fn demo_exits_1_naming_a_scenario_that_settled_otherwise() {
    let run = ahp(&["demo"], &[]);
    let audit = assert_demo_as_scripted(&run, "the demo with the embedded component");
    let dir = audit.parent().expect("the audit directory");
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert!(name.starts_with("ahp-demo-"), "{}", dir.display());
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(dir)
        .expect("the directory")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
    let _ = std::fs::remove_dir_all(dir);

    let run = ahp(&["demo", "--component", env!("RUNAWAY_COMPONENT")], &[]);
    run.assert_exit(1, "the demo with a component that never settles");
    assert!(
        run.stderr.contains(
            "error: scenario 1 (allow) settled as deny by engine-failure \
             (no interceptor called), expected allow by no-objection (interceptor no-effect)"
        ),
        "{}",
        run.stderr
    );
    if let Some(audit) = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("audit log: "))
    {
        let _ = std::fs::remove_dir_all(Path::new(audit).parent().expect("a directory"));
    }
}

/// Host options the demo's registrations cannot load under are refused as the options'
/// fault before anything is printed or made: no table heading, no audit directory left.
#[test]
fn demo_refuses_host_options_that_do_not_fit_it_before_it_starts() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let tmp_path = path(tmp.path());
    let run = ahp(
        &["demo", "--interceptable", "turn.start"],
        &[("TMPDIR", tmp_path)],
    );
    run.assert_exit(1, "the demo under --interceptable turn.start");
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(
        run.stderr.contains("the host options do not fit"),
        "{run:?}"
    );
    assert!(run.stderr.contains("tool.before"), "{run:?}");
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("the directory")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `--interceptable` naming an event twice is refused by the flag, not as the
/// anonymous `declaration[1]` the component would report.
/// `ahp intercept` of a `tool.before` event with a registration of `hook` alone, both
/// written into `dir`.
fn intercept_in(dir: &Path, hook: Http) -> std::process::Command {
    let reg = dir.join("registration.json");
    std::fs::write(&reg, registration(&[hook])).expect("write the registration");
    let ev = dir.join("event.json");
    std::fs::write(&ev, valid_event("tool.before", "evt_cli")).expect("write the event");
    intercept_command(&reg, &ev)
}

/// `ahp intercept --registration REG --event EV`.
fn intercept_command(reg: &Path, ev: &Path) -> std::process::Command {
    let mut command = ahp_command();
    command.args([
        "intercept",
        "--registration",
        path(reg),
        "--event",
        path(ev),
    ]);
    command
}

/// Work the call gave up on cannot hold the exit: a bearer token read from a FIFO nobody
/// writes blocks a thread past the subscription's deadline; the denial is printed at the
/// deadline and the process exits soon after, instead of waiting for the read for ever.
#[test]
fn intercept_exits_after_its_answer_whatever_it_gave_up_on() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fifo = dir.path().join("token");
    ahp_tests::support::make_fifo(&fifo);
    let hook = Http::new("com.example.authed", refused_url())
        .policy("fail-closed")
        .timeout_ms(500)
        .token_ref(&format!("file:{}", fifo.display()));
    let run = run_within(
        intercept_in(dir.path(), hook),
        std::time::Duration::from_secs(20),
    );
    run.assert_exit(2, "a denial");
    assert!(
        run.stdout.contains("\"decision\":\"deny\""),
        "{}",
        run.stdout
    );
}

/// A stdout that cannot take the answer (here a full disk; a closed pipe is the same) does
/// not turn a denial into a panic's exit 101: the exit code still says deny.
#[test]
fn a_denial_that_cannot_be_printed_is_still_exit_2() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let hook = Http::new("com.example.gone", refused_url()).policy("fail-closed");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    let status = intercept_in(dir.path(), hook)
        .stdin(Stdio::null())
        .stdout(full)
        .stderr(Stdio::null())
        .status()
        .expect("run ahp");
    assert_eq!(status.code(), Some(2));
}

/// A `--component` file is read no further than a pulled component may be (64 MiB): a
/// larger one is refused naming its bound, before anything else is read into memory. A
/// file that is not a component binary (text, which wasmtime would read as WAT, or a core
/// module) is refused naming the flag and the file, and a FIFO at once, never waited on.
#[test]
fn a_component_file_that_is_none_or_past_64_mib_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let big = dir.path().join("big.wasm");
    let file = std::fs::File::create(&big).expect("create");
    file.set_len((64 << 20) + 1)
        .expect("a sparse file one byte past the bound");
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello").expect("write");
    let module = dir.path().join("module.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").expect("write");
    let fifo = dir.path().join("fifo.wasm");
    ahp_tests::support::make_fifo(&fifo);
    let ev = dir.path().join("event.json");
    std::fs::write(&ev, valid_event("tool.before", "evt_big")).expect("write the event");
    let reg = portable();
    for (component, expected) in [
        (&big, "larger than 64 MiB".to_string()),
        (
            &fifo,
            format!("read component {}: not a regular file", path(&fifo)),
        ),
        (
            &text,
            format!("--component {}: not a WebAssembly component", path(&text)),
        ),
        (
            &module,
            format!("--component {}: not a WebAssembly component", path(&module)),
        ),
    ] {
        let mut command = intercept_command(&reg, &ev);
        command
            .args(["--component", path(component)])
            .env_remove("AHP_LOG");
        let run = run_within(command, std::time::Duration::from_secs(30));
        run.assert_exit(1, &expected);
        assert!(run.stderr.contains(&expected), "{expected}: {}", run.stderr);
    }
}

/// An `--audit` that is a file the call reads (the registration, the event, a backend's
/// secret file) is refused, naming `--audit` and what names that file, and the file is
/// left as it was: the call's record would have been appended to it (the registration
/// then no longer reads, a secret file holds no secret), as `hook install` refuses too.
#[test]
fn an_audit_log_that_is_a_file_the_call_reads_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let token = dir.path().join("token");
    std::fs::write(&token, "tok-audit-is-read").expect("write the token");
    let hook = Http::new("com.example.authed", refused_url())
        .policy("fail-closed")
        .timeout_ms(500)
        .token_ref(&format!("file:{}", token.display()));
    let reg = dir.path().join("registration.json");
    std::fs::write(&reg, registration(&[hook])).expect("write the registration");
    let ev = dir.path().join("event.json");
    std::fs::write(&ev, valid_event("tool.before", "evt_audit_read")).expect("write the event");
    for (audit, named_by) in [
        (&reg, "--registration"),
        (&ev, "--event"),
        (&token, "--registration's backend `com.example.authed`"),
    ] {
        let before = std::fs::read(audit).expect("read it");
        let mut command = intercept_command(&reg, &ev);
        command.args(["--audit", path(audit)]).env_remove("AHP_LOG");
        let run = run_within(command, std::time::Duration::from_secs(30));
        let expected = format!("--audit {}: the file {named_by}", path(audit));
        run.assert_exit(1, &expected);
        assert!(run.stderr.contains(&expected), "{expected}: {}", run.stderr);
        assert_eq!(
            std::fs::read(audit).expect("read it"),
            before,
            "{named_by}: written"
        );
    }
}

/// Runs `command` (stdin empty) to its end, killed and failing the test if it is still
/// running after `bound`: a wait that should not happen fails instead of hanging.
fn run_within(mut command: std::process::Command, bound: std::time::Duration) -> Run {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ahp");
    wait_within(child, bound, &format!("{command:?}"))
}

/// `child`'s end, its output piped, killed and failing the test as `case` if it is
/// still running after `bound`.
fn wait_within(mut child: std::process::Child, bound: std::time::Duration, case: &str) -> Run {
    let started = std::time::Instant::now();
    while child.try_wait().expect("wait for ahp").is_none() {
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {bound:?}: {case}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Run::of(child.wait_with_output().expect("the output"))
}

/// The instance pool reserves its address space up front (some 4 TiB); under an address
/// space limit that cannot be had, and instances are allocated on demand instead: the
/// demo runs all its scenarios, where it used to deny each one as an engine failure.
#[test]
fn the_demo_runs_under_an_address_space_limit() {
    use std::os::unix::process::CommandExt as _;
    let mut command = ahp_command();
    // glibc reserves 64 MiB of address space for each thread's allocator arena: without
    // a bound on them the limit would measure the machine's core count, not the Engine.
    command
        .arg("demo")
        .env_remove("AHP_LOG")
        .env("MALLOC_ARENA_MAX", "2");
    // SAFETY: setrlimit(2) is async-signal-safe and touches only `limit`.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 2 << 30,
                rlim_max: 2 << 30,
            };
            match libc::setrlimit(libc::RLIMIT_AS, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    let run = run_within(command, std::time::Duration::from_secs(120));
    let audit = assert_demo_as_scripted(&run, "the demo under a 2 GiB address-space limit");
    let _ = std::fs::remove_dir_all(audit.parent().expect("a directory"));
}

/// Under `ahp hook` the harness's declaration says what it can intercept: an
/// `--interceptable` was accepted there and silently overridden (and `hook install` wrote
/// it into every command). It is refused: by `hook install` as a usage error, and by a
/// hook call as the harness's failure answer, a denial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interceptable_is_refused_under_ahp_hook() {
    let reg = portable();
    let narrowed = ["--interceptable", "tool.before"];
    let install = [
        "hook",
        "install",
        "claude-code",
        "--registration",
        path(&reg),
    ];
    let run = ahp(&[&install[..], &narrowed].concat(), &[]);
    run.assert_exit(1, "install with --interceptable");
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr.contains("--interceptable does not apply"),
        "{}",
        run.stderr
    );

    // The call's interceptor fails open at a port nothing listens on: without the
    // refusal the call would be a silent no objection, not this denial.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let open = ahp_tests::hook::write_unreachable(dir.path());
    let payload = json!({"session_id": "s", "hook_event_name": "PreToolUse", "cwd": "/tmp",
        "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t1"})
    .to_string();
    let call = |extra| ahp_tests::hook::run_hook("claude-code", &open, extra, payload.as_bytes());
    let ran = call(&narrowed).await;
    assert_eq!(ran.code, 2, "a hook call with --interceptable: {ran:?}");
    let reason = ahp_tests::hook::FAILED_REASON;
    let denial = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": reason}});
    assert_eq!(one_json_line(&ran.stdout), denial, "{ran:?}");
    assert_eq!(ran.stderr.trim_end(), reason, "{ran:?}");
    assert!(
        ran.log.contains("--interceptable does not apply"),
        "{ran:?}"
    );
    // The same call without the flag is the interceptor's no objection: exit 0, nothing
    // said.
    let ran = call(&[]).await;
    assert_eq!(
        ran.code, 0,
        "the same hook call without --interceptable: {ran:?}"
    );
    assert!(ran.stdout.is_empty(), "{ran:?}");
}

/// A registration intercepting `tool.before` and `model.request.before`, which Claude
/// Code cannot intercept (fail-open, so a load refusal is the only way it could deny).
fn intercepting_model_requests(dir: &Path) -> PathBuf {
    let file = dir.join("registration.json");
    let registration = json!({"protocolVersion": "draft", "hooks": [{
        "id": "com.example.policy",
        "transport": {"type": "http", "url": refused_url()},
        "subscriptions": [{"events": ["tool.before", "model.request.before"],
                           "mode": "intercept", "failurePolicy": "fail-open",
                           "timeoutMs": 1000, "content": {"default": "metadata"}}]
    }]});
    std::fs::write(&file, registration.to_string()).expect("write the registration");
    file
}

/// What the component says of an event the harness cannot intercept, in `reg`.
fn undeclared(reg: &Path) -> String {
    format!(
        "error: registration {}: /hooks/0/subscriptions/0/events/1: \"model.request.before\" \
         is not declared interceptable by this harness\n",
        reg.display()
    )
}

/// `ahp check --harness` loads the registration as `ahp hook HARNESS` does, with that
/// harness's declaration: a registration every call of which the hook would deny (it
/// intercepts an event the harness cannot) is refused naming the event, where plain
/// `check`, which declares every event, passes it.
#[test]
fn check_for_a_harness_refuses_what_that_harness_cannot_intercept() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = intercepting_model_requests(dir.path());
    let run = ahp(&["check", path(&reg)], &[]);
    run.assert_exit(0, "check, every event declared");
    let run = ahp(&["check", path(&reg), "--harness", "claude-code"], &[]);
    run.assert_exit(1, "check for claude-code");
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert_eq!(run.stderr, undeclared(&reg));
    // Gemini shows a hook its model requests (`BeforeModel`): valid for it.
    let run = ahp(&["check", path(&reg), "--harness", "gemini"], &[]);
    run.assert_exit(0, "check for gemini");
    assert!(
        run.stderr.contains("needs gemini's BeforeModel hook"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout, format!("{}: valid for gemini\n", reg.display()));
    for harness in ["codex", "cursor", "copilot"] {
        let run = ahp(&["check", path(&reg), "--harness", harness], &[]);
        run.assert_exit(1, harness);
        assert_eq!(run.stderr, undeclared(&reg), "{harness}");
    }

    // Every harness intercepts `tool.before`.
    let portable = portable();
    for harness in ["claude-code", "codex", "gemini", "cursor", "copilot"] {
        let run = ahp(&["check", path(&portable), "--harness", harness], &[]);
        run.assert_exit(0, harness);
        let valid = format!("{}: valid for {harness}\n", portable.display());
        assert_eq!(run.stdout, valid);
    }

    // The harness's declaration decides, as under `ahp hook`: no `--interceptable`.
    let both = ["check", path(&portable), "--harness", "codex"];
    let run = ahp(
        &[&both[..], &["--interceptable", "tool.before"]].concat(),
        &[],
    );
    run.assert_exit(1, "--harness with --interceptable");
    assert!(
        run.stderr.contains("--interceptable does not apply"),
        "{}",
        run.stderr
    );
}

/// `hook install gemini` writes the BeforeModel hook (a process at every model request)
/// for a registration that selects model.request.before, and only then.
#[test]
fn hook_install_writes_a_hook_at_every_model_request_only_when_selected() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let selecting = intercepting_model_requests(dir.path());
    for (reg, wanted) in [(selecting, true), (portable(), false)] {
        let run = ahp(
            &["hook", "install", "gemini", "--registration", path(&reg)],
            &[],
        );
        run.assert_exit(0, "install gemini");
        let snippet: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
        assert_eq!(
            snippet["hooks"].get("BeforeModel").is_some(),
            wanted,
            "{}: {}",
            reg.display(),
            run.stdout
        );
        assert!(
            snippet["hooks"].get("BeforeTool").is_some(),
            "{}",
            run.stdout
        );
    }
}

/// `hook install --omit-session` writes the fields into every hook's command, in the
/// order given; a word that is no optional session field is refused, naming the known.
#[test]
fn hook_install_carries_the_omitted_session_fields() {
    let reg = portable();
    let install = ["hook", "install", "cursor", "--registration", path(&reg)];
    let run = ahp(
        &[&install[..], &["--omit-session", "model,cwd"]].concat(),
        &[],
    );
    run.assert_exit(0, "install with --omit-session");
    assert!(
        run.stdout.contains("--omit-session model,cwd --event"),
        "{}",
        run.stdout
    );
    let run = ahp(&[&install[..], &["--omit-session", "user"]].concat(), &[]);
    run.assert_exit(1, "an unknown session field");
    assert!(
        run.stderr
            .contains("known: cwd, workspaceRoots, model, agent"),
        "{}",
        run.stderr
    );
}

/// `ahp hook install` prints no hooks for a registration its harness cannot load: each
/// of them would deny every call (a fail-open subscription's too), which Claude Code
/// shows as "Policy evaluation failed." on every tool call.
#[test]
fn hook_install_refuses_a_registration_its_harness_cannot_load() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = intercepting_model_requests(dir.path());
    let run = ahp(
        &[
            "hook",
            "install",
            "claude-code",
            "--registration",
            path(&reg),
        ],
        &[],
    );
    run.assert_exit(1, "install for claude-code");
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(run.stderr.ends_with(&undeclared(&reg)), "{}", run.stderr);
    assert!(!run.stderr.contains("# for "), "{}", run.stderr);
}

#[test]
fn interceptable_naming_an_event_twice_is_refused_naming_the_flag() {
    let reg = portable();
    let run = ahp(
        &[
            "check",
            path(&reg),
            "--interceptable",
            "tool.before,tool.before",
        ],
        &[],
    );
    run.assert_exit(1, "tool.before twice");
    assert_eq!(
        run.stderr,
        "error: --interceptable: tool.before is given twice\n"
    );
}

/// A `--stdio-env` name unset in the environment is warned about by name (a stdio
/// backend would start without it); a set one is passed silently, its value never shown.
#[test]
fn stdio_env_naming_an_unset_variable_is_warned_about() {
    let reg = portable();
    let args = [
        "check",
        path(&reg),
        "--stdio-env",
        "AHP_CLI_TEST_UNSET,AHP_CLI_TEST_SET",
    ];
    let mut command = ahp_command();
    command
        .args(args)
        .env_remove("AHP_LOG")
        .env_remove("AHP_CLI_TEST_UNSET")
        .env("AHP_CLI_TEST_SET", "value-never-shown");
    let run = Run::of(command.output().expect("run ahp"));
    run.assert_exit(0, "check with one --stdio-env name unset");
    let stderr = &run.stderr;
    assert!(
        stderr.contains("warning: --stdio-env AHP_CLI_TEST_UNSET: not set"),
        "{stderr}"
    );
    assert!(!stderr.contains("AHP_CLI_TEST_SET"), "{stderr}");
    assert!(!stderr.contains("value-never-shown"), "{stderr}");
}

/// An `--stdio-env` entry given as `NAME=VALUE` (the natural slip) is refused without
/// repeating it, under `check`, `intercept` and `ahp hook` (whose log gets the usage
/// error): its value is a secret.
#[test]
fn a_stdio_env_entry_with_a_value_is_refused_without_repeating_it() {
    const SECRET: &str = "sk-live-never-shown-7c1e";
    let reg = portable();
    let entry = format!("API_KEY={SECRET}");
    for args in [
        vec!["check", path(&reg), "--stdio-env", &entry],
        vec![
            "intercept",
            "--registration",
            path(&reg),
            "--event",
            "-",
            "--stdio-env",
            &entry,
        ],
    ] {
        let run = ahp(&args, &[]);
        run.assert_exit(1, &args.join(" "));
        assert!(run.stderr.contains("--stdio-env"), "{run:?}");
        assert!(run.stderr.contains("holds `=`"), "{run:?}");
        assert!(!format!("{run:?}").contains(SECRET), "{run:?}");
    }
    let log = tempfile::NamedTempFile::new().expect("a log file");
    let mut command = ahp_command();
    command
        .args([
            "hook",
            "claude-code",
            "--registration",
            path(&reg),
            "--stdio-env",
            &entry,
        ])
        .env("AHP_LOG", "warn")
        .env("AHP_LOG_FILE", log.path())
        .stdin(Stdio::null());
    let run = Run::of(command.output().expect("run ahp"));
    let logged = std::fs::read_to_string(log.path()).expect("the log");
    assert!(logged.contains("--stdio-env"), "{logged}");
    assert!(
        !format!("{run:?}{logged}").contains(SECRET),
        "{run:?} {logged}"
    );
}

/// Logs written to a pipe or a file carry no terminal colour codes.
#[test]
fn logs_to_a_pipe_have_no_colour_codes() {
    let reg = portable();
    let run = ahp(&["check", path(&reg)], &[("AHP_LOG", "ahp_host=debug")]);
    run.assert_exit(0, "check with AHP_LOG=ahp_host=debug");
    assert!(run.stderr.contains("DEBUG"), "some log: {}", run.stderr);
    assert!(!run.stderr.contains('\u{1b}'), "{:?}", run.stderr);
}

/// Under `ahp hook`, whose stderr a harness shows the model on exit 2, log lines — the
/// `--stdio-env` warning, a failure's details — go to the file `AHP_LOG_FILE` names,
/// created private (0600), and stderr holds the harness's answer alone; a log file that
/// is the process's stderr, or cannot be opened, is no log, never a failed hook call.
#[test]
fn hook_logs_go_to_the_log_file_never_to_stderr() {
    use std::os::unix::fs::PermissionsExt as _;
    let reg = portable();
    let dir = tempfile::tempdir().expect("a temp dir");
    let log = dir.path().join("hook.log");
    let args = [
        "hook",
        "codex",
        "--registration",
        path(&reg),
        "--stdio-env",
        "AHP_CLI_TEST_UNSET",
    ];
    let reason = format!("{}\n", ahp_tests::hook::FAILED_REASON);
    for (file, logged) in [
        (path(&log), true),
        ("/dev/stderr", false),
        (path(dir.path()), false),
    ] {
        let mut command = ahp_command();
        command
            .args(args)
            .env("AHP_LOG", "warn")
            .env("AHP_LOG_FILE", file)
            .env_remove("AHP_CLI_TEST_UNSET")
            .stdin(Stdio::null());
        // No payload: the call is refused before the interceptor, as exit 2.
        let run = Run::of(command.output().expect("run ahp hook"));
        run.assert_exit(2, file);
        assert_eq!(run.stderr, reason, "{file}");
        if logged {
            let text = std::fs::read_to_string(&log).expect("the log file");
            assert!(
                text.contains("--stdio-env AHP_CLI_TEST_UNSET: not set"),
                "{text}"
            );
            assert!(text.contains("the payload is not JSON"), "{text}");
            let mode = std::fs::metadata(&log)
                .expect("the log file")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        }
    }
    // A filter that does not parse: errors only, and the directive it ignored is said
    // nowhere (tracing-subscriber's lenient reading prints it to stderr).
    let mut command = ahp_command();
    command
        .args(args)
        .env("AHP_LOG", "ahp_host=loud")
        .env("AHP_LOG_FILE", path(&log))
        .env_remove("AHP_CLI_TEST_UNSET")
        .stdin(Stdio::null());
    let run = Run::of(command.output().expect("run ahp hook"));
    run.assert_exit(2, "a malformed AHP_LOG");
    assert_eq!(run.stderr, reason, "a malformed AHP_LOG");
}

/// Output that cannot be written (stdout a full disk, or a pipe closed early as by
/// `ahp demo | head -1`) is an error naming stdout, exit 1: `println!` panicked, exit
/// 101 with a backtrace.
#[test]
fn a_stdout_that_cannot_be_written_is_exit_1_naming_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let export = dir.path().join("export");
    let export = path(&export);
    let commands: [&[&str]; 4] = [
        &["demo"],
        &["precompile"],
        &["hook", "manifest", "claude-code"],
        &["component", "export", export],
    ];
    for args in commands {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let mut command = ahp_command();
        command
            .args(args)
            .env_remove("AHP_LOG")
            .stdin(Stdio::null())
            .stdout(full);
        let run = Run::of(command.output().expect("run ahp"));
        run.assert_exit(1, &format!("{args:?}"));
        assert!(
            run.stderr.contains("error: write to stdout:"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("panicked"), "{args:?}: {}", run.stderr);
    }
}

/// `ahp hook install` prints no hooks when the host cannot be set up for them: an option
/// naming no backend of the registration, or a `--component` that is not this one (here
/// an empty component).
/// Every installed call would be denied; install said so in a warning and exited 0. It
/// writes nothing either (the audit file it would open).
#[test]
fn hook_install_refuses_a_host_its_hooks_could_not_set_up() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = portable();
    let not_a_component = dir.path().join("component.wasm");
    std::fs::write(&not_a_component, b"\0asm\x0d\0\x01\0").expect("write");
    let cases: [(&[&str], &str); 3] = [
        (&["--allow-insecure-http", "dev.typo"], "dev.typo"),
        // A reference no registry could ever give (not one that is away now).
        (
            &["--component", "oci://UPPER/Bad:tag"],
            "invalid OCI reference",
        ),
        (
            &["--component", path(&not_a_component)],
            "no exported instance named `ahp:interceptor/interceptor",
        ),
    ];
    let audit = dir.path().join("audit.jsonl");
    for (options, named) in cases {
        let mut args = vec![
            "hook",
            "install",
            "claude-code",
            "--registration",
            path(&reg),
            "--audit",
            path(&audit),
        ];
        args.extend_from_slice(options);
        let run = ahp(&args, &[]);
        run.assert_exit(1, &format!("{options:?}"));
        assert!(
            !audit.exists(),
            "{options:?}: a refused install writes nothing"
        );
        assert!(run.stdout.is_empty(), "{options:?}: {}", run.stdout);
        assert!(
            run.stderr.contains("error: "),
            "{options:?}: {}",
            run.stderr
        );
        assert!(run.stderr.contains(named), "{options:?}: {}", run.stderr);
    }
}

/// `--budget-ms` bounds the whole call, getting ready included: a step that blocks
/// before the call (stdin never closed under `--event -`, a FIFO named as the
/// registration, a pull from a registry that never answers) is settled past the budget and its grace as the budget's expiry — a denial, exit 2, its
/// record on stdout and in `--audit`, naming the event once read — where it used to wait
/// for ever and leave the harness to time out. A call that gets ready in time is decided
/// as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intercept_ends_at_its_budget_when_getting_ready_blocks() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let hook = Http::new("com.example.gone", refused_url()).policy("fail-closed");
    let reg = dir.path().join("registration.json");
    std::fs::write(&reg, registration(&[hook])).expect("write the registration");
    let ev = dir.path().join("event.json");
    std::fs::write(&ev, valid_event("tool.before", "evt_budget")).expect("write the event");
    let fifo = dir.path().join("fifo");
    ahp_tests::support::make_fifo(&fifo);
    // The pull's request is read and never answered.
    let registry = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let stuck = format!("oci://{}/ahp/interceptor:0.1", registry.addr());
    let audit = dir.path().join("audit.jsonl");
    let budget = ["--budget-ms", "300", "--audit", path(&audit)];
    let expected = "error: --budget-ms: the budget ran out before the call could start";
    for (case, args) in [
        (
            "stdin never closed",
            vec!["--registration", path(&reg), "--event", "-"],
        ),
        (
            "a FIFO registration",
            vec!["--registration", path(&fifo), "--event", path(&ev)],
        ),
        (
            "a registry that never answers",
            vec![
                "--registration",
                path(&reg),
                "--event",
                path(&ev),
                "--component",
                &stuck,
            ],
        ),
    ] {
        let mut command = ahp_command();
        command
            .arg("intercept")
            .args(&args)
            .args(budget)
            .env_remove("AHP_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("run ahp");
        // Held open, never written: a harness that never closes the hook's stdin.
        let stdin = child.stdin.take();
        let run = wait_within(child, std::time::Duration::from_secs(20), case);
        drop(stdin);
        run.assert_exit(2, case);
        assert!(run.stderr.contains(expected), "{case}: {}", run.stderr);
        let settled = one_json_line(&run.stdout);
        assert_eq!(settled["decidedBy"], "budget-expired", "{case}: {settled}");
        assert_eq!(settled["decision"], "deny", "{case}: {settled}");
        let logged = std::fs::read_to_string(&audit).expect("the audit file");
        let last: Value =
            serde_json::from_str(logged.lines().last().expect("a record")).expect("a JSON record");
        assert_eq!(last, settled, "{case}: the record in --audit");
    }
    // The registry's case read the event first: its record names it.
    let logged = std::fs::read_to_string(&audit).expect("the audit file");
    let names: Vec<Value> = logged
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON")["event"]["id"].clone())
        .collect();
    assert_eq!(names, [Value::Null, Value::Null, json!("evt_budget")]);
    // Decided as before: its interceptor's answer, here after 300 ms, well inside the
    // 20 s budget (one read in a smaller unit, or cut short, runs out first: a denial).
    let slow = Behaviour::Delay(
        std::time::Duration::from_millis(300),
        Box::new(Behaviour::NoEffect),
    );
    let backend = FaultBackend::start(vec![slow]).await;
    let hook = Http::new("com.example.slow", backend.url())
        .policy("fail-closed")
        .timeout_ms(10_000);
    std::fs::write(&reg, registration(&[hook])).expect("write the registration");
    let run = ahp(
        &[
            "intercept",
            "--registration",
            path(&reg),
            "--event",
            path(&ev),
            "--budget-ms",
            "20000",
        ],
        &[],
    );
    run.assert_exit(0, "a call that got ready in time");
    let settled = one_json_line(&run.stdout);
    assert_eq!(settled["decidedBy"], "no-objection", "{settled}");
    assert_eq!(backend.requests().len(), 1, "{settled}");
}

/// Trust roots and OAuth clients are read from a regular file no larger than a bound, as
/// a component is: `/dev/zero` or a file past the bound is refused naming the flag,
/// where it was read until memory ran out (under `ahp hook`, a crash: no objection).
#[test]
fn trust_roots_and_oauth_clients_come_only_from_a_bounded_regular_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let big = dir.path().join("big.pem");
    let file = std::fs::File::create(&big).expect("create");
    file.set_len((4 << 20) + 1)
        .expect("a sparse file past the bound");
    let reg = portable();
    for (flag, file, expected) in [
        (
            "--trust-roots",
            "/dev/zero",
            "error: --trust-roots /dev/zero: not a regular file\n".to_string(),
        ),
        (
            "--trust-roots",
            path(&big),
            format!("error: --trust-roots {}: larger than 4 MiB\n", path(&big)),
        ),
        (
            "--oauth-clients",
            "/dev/zero",
            "error: --oauth-clients /dev/zero: cannot read: not a regular file\n".to_string(),
        ),
    ] {
        let mut command = ahp_command();
        command
            .args(["check", path(&reg), flag, file])
            .env_remove("AHP_LOG");
        let run = run_within(command, std::time::Duration::from_secs(30));
        run.assert_exit(1, file);
        assert_eq!(run.stderr, expected);
    }
}

/// `--help` or `--version` among `ahp intercept`'s arguments, not at a terminal (a hook
/// command edited by mistake), is no exit 0, which is intercept's allow: exit 1, the text
/// on stderr, nothing on stdout. Alone, they print as usual.
#[test]
fn intercept_help_in_a_call_is_no_allow() {
    let reg = portable();
    for asked in ["--help", "-h", "--version", "-V"] {
        let run = ahp(
            &[
                "intercept",
                "--registration",
                path(&reg),
                "--event",
                "-",
                asked,
            ],
            &[],
        );
        run.assert_exit(1, asked);
        assert!(run.stdout.is_empty(), "{asked}: {}", run.stdout);
        assert!(
            run.stderr.contains("no call was made"),
            "{asked}: {}",
            run.stderr
        );
    }
    // Before the subcommand, as the top level's flag: the same. (`help` before it is a
    // usage error there: exit 1 too, with clap's message.)
    for asked in ["--help", "-h", "--version", "-V", "help"] {
        let args = [
            asked,
            "intercept",
            "--registration",
            path(&reg),
            "--event",
            "-",
        ];
        let run = ahp(&args, &[]);
        run.assert_exit(1, asked);
        assert!(run.stdout.is_empty(), "{asked}: {}", run.stdout);
        let said = match asked {
            "help" => "unrecognized subcommand",
            _ => "no call was made",
        };
        assert!(run.stderr.contains(said), "{asked}: {}", run.stderr);
    }
    let run = ahp(&["intercept", "--help"], &[]);
    run.assert_exit(0, "help alone");
    assert!(run.stdout.contains("--registration"), "{}", run.stdout);
    let run = ahp(&["help", "intercept"], &[]);
    run.assert_exit(0, "help for intercept alone");
    assert!(run.stdout.contains("--registration"), "{}", run.stdout);
}

/// `--help` gives the exit codes: for `intercept` they are its decision.
#[test]
fn intercept_and_demo_help_give_their_exit_codes() {
    let run = ahp(&["intercept", "--help"], &[]);
    run.assert_exit(0, "intercept --help");
    let codes = [
        "0  allow",
        "2  deny",
        "3  ask",
        "1  the call could not be made (bad registration, bad event, usage)",
    ];
    for code in codes {
        assert!(run.stdout.contains(code), "{code}: {}", run.stdout);
    }
    let run = ahp(&["demo", "--help"], &[]);
    run.assert_exit(0, "demo --help");
    for code in [
        "0  every scripted call settled as scripted",
        "1  one did not, naming the scenario",
    ] {
        assert!(run.stdout.contains(code), "{code}: {}", run.stdout);
    }
}

/// `--version` or `--help` before `hook HARNESS`, with a payload on stdin, is the
/// harness's answer to a call that could not be made (Claude Code's denial before a
/// tool), never the text with exit 0, which the harness would read as no objection.
#[test]
fn hook_help_before_the_subcommand_is_no_objection_neither() {
    let reg = portable();
    let payload = json!({"session_id": "s1", "cwd": "/repo", "transcript_path": "/t.jsonl",
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "ls"}, "tool_use_id": "toolu_1"});
    for asked in ["--version", "--help", "help", "-hV"] {
        let mut child = ahp_command()
            .args([asked, "hook", "claude-code", "--registration", path(&reg)])
            .env_remove("AHP_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run ahp");
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(payload.to_string().as_bytes())
            .expect("write the payload");
        drop(stdin);
        let run = Run::of(child.wait_with_output().expect("ahp ends"));
        run.assert_exit(2, asked);
        assert!(
            run.stdout.contains("\"permissionDecision\":\"deny\""),
            "{asked}: {run:?}"
        );
    }
}

/// A stderr that cannot take a line (a pipe whose reader is gone) loses the line, never
/// ends the command with a panic's exit 101: an error is still exit 1, and an intercept
/// that warned still exits with its decision.
#[test]
fn a_closed_stderr_changes_no_exit_code() {
    use std::os::fd::FromRawFd as _;
    let closed_pipe = || {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "a pipe");
        // SAFETY: each descriptor was just made, and is owned once here.
        let (reader, writer) = unsafe {
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        drop(reader);
        Stdio::from(writer)
    };
    let status = ahp_command()
        .args([
            "intercept",
            "--registration",
            "/nonexistent/reg.json",
            "--event",
            "-",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(closed_pipe())
        .status()
        .expect("run ahp");
    assert_eq!(status.code(), Some(1), "an error");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let hook = Http::new("com.example.gone", refused_url()).policy("fail-closed");
    let status = intercept_in(dir.path(), hook)
        .args(["--stdio-env", "AHP_TEST_NEVER_SET"])
        .env_remove("AHP_TEST_NEVER_SET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(closed_pipe())
        .status()
        .expect("run ahp");
    assert_eq!(status.code(), Some(2), "a denial after a warning");
}

/// SIGINT, SIGTERM, SIGHUP or SIGQUIT while `ahp intercept` is deciding settles the call
/// as interrupted: a denial (exit 2), even for a fail-open subscription whose backend
/// has not answered, never the end of the process as the signal would have it.
#[test]
fn a_signal_during_intercept_is_an_interrupted_denial() {
    use std::io::Read as _;
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // Accepts the call's connection and never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/ahp", listener.local_addr().expect("an address"));
        let dir = tempfile::tempdir().expect("a temporary directory");
        let hook = Http::new("com.example.silent", url)
            .policy("fail-open")
            .timeout_ms(20_000);
        let mut child = intercept_in(dir.path(), hook)
            .env_remove("AHP_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run ahp");
        // Polled, so that an `ahp` that never connects fails the test instead of hanging it.
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let connected = std::time::Instant::now();
        let mut connection = loop {
            match listener.accept() {
                Ok((connection, _)) => break connection,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let exited = child.try_wait().expect("wait for ahp");
                    assert!(
                        exited.is_none(),
                        "ahp exited before it connected: {exited:?}"
                    );
                    let waited = connected.elapsed();
                    assert!(waited < std::time::Duration::from_secs(20), "no connection");
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => panic!("accept: {e}"),
            }
        };
        connection
            .set_nonblocking(false)
            .expect("a blocking connection");
        let bound = Some(std::time::Duration::from_secs(10));
        connection.set_read_timeout(bound).expect("a read timeout");
        // The request is on its way: the call is being decided.
        let mut first = [0u8; 1];
        connection
            .read_exact(&mut first)
            .expect("the request's first byte");
        let pid = i32::try_from(child.id()).expect("a pid");
        // SAFETY: kill(2) on the child this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let case = format!("signal {signal}");
        let run = wait_within(child, std::time::Duration::from_secs(10), &case);
        run.assert_exit(2, &case);
        let settled = one_json_line(&run.stdout);
        assert_eq!(settled["decision"], "deny", "{settled}");
        assert_eq!(settled["decidedBy"], "interrupted", "{settled}");
    }
}

/// `ahp intercept --audit`: a file that cannot be opened is refused naming `--audit`,
/// before anything is decided; one everybody can read is written to, with a warning on
/// stderr naming `--audit` and its mode (the default log filter shows errors only).
#[test]
fn intercept_names_audit_for_a_log_it_cannot_open_or_everybody_can_read() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let hook = Http::new("com.example.gone", refused_url()).policy("fail-open");
    let intercept = |audit: &Path| {
        let mut command = intercept_in(dir.path(), hook.clone());
        command.args(["--audit", path(audit)]);
        command.env_remove("AHP_LOG").stdin(Stdio::null());
        Run::of(command.output().expect("run ahp intercept"))
    };
    let missing = dir.path().join("missing/audit.jsonl");
    let run = intercept(&missing);
    run.assert_exit(1, "an audit log in a missing directory");
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    let said = format!("error: --audit {}: ", missing.display());
    assert!(run.stderr.starts_with(&said), "{}", run.stderr);
    let audit = dir.path().join("audit.jsonl");
    std::fs::write(&audit, "").expect("create the audit log");
    let permissions = std::fs::Permissions::from_mode(0o644);
    std::fs::set_permissions(&audit, permissions).expect("chmod");
    let run = intercept(&audit);
    run.assert_exit(0, "allowed, the backend failing open");
    let warning = format!(
        "warning: --audit {}: its mode, 644, lets everybody read",
        audit.display()
    );
    assert!(run.stderr.contains(&warning), "{}", run.stderr);
    let records = ahp_tests::support::audit_lines(&audit);
    assert_eq!(records.len(), 1, "{records:?}");
}

/// The watchdog's answer does not wait on an audit file another process holds locked:
/// it gives the append 250 ms, answers the denial all the same (exit 2, the record on
/// stdout), and says on stderr that the record was not written.
#[test]
fn the_watchdogs_answer_does_not_wait_for_a_locked_audit_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fifo = dir.path().join("registration.fifo");
    ahp_tests::support::make_fifo(&fifo);
    let ev = dir.path().join("event.json");
    std::fs::write(&ev, valid_event("tool.before", "evt_locked")).expect("write the event");
    let audit = dir.path().join("audit.jsonl");
    std::fs::write(&audit, "").expect("create the audit file");
    let _held = ahp_tests::support::locked_elsewhere(&audit);
    let mut command = ahp_command();
    command.args([
        "intercept",
        "--registration",
        path(&fifo),
        "--event",
        path(&ev),
    ]);
    command.args(["--budget-ms", "300", "--audit", path(&audit)]);
    let run = run_within(command, std::time::Duration::from_secs(20));
    run.assert_exit(2, "a denial with the audit file locked");
    let settled = one_json_line(&run.stdout);
    assert_eq!(settled["decidedBy"], "budget-expired", "{settled}");
    assert!(
        run.stderr
            .contains("--audit: the record was not written: not done within 250 ms"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_to_string(&audit).expect("the audit file"), "");
}

/// `registration.json` and `event.json` in `dir`: a fail-open per-event stdio backend
/// started as `command deny` (the test backend's deny) in `dir`, and a `tool.before`
/// event `id`.
fn write_stdio_call(dir: &Path, command: &str, id: &str) -> (PathBuf, PathBuf) {
    let hook = json!({
        "id": "com.example.stdio",
        "transport": {"type": "stdio", "command": command, "args": ["deny"],
            "cwd": dir, "lifecycle": "per_event"},
        "subscriptions": [{"events": ["tool.before"], "mode": "intercept", "timeoutMs": 10_000,
            "failurePolicy": "fail-open", "content": {"default": "metadata"}}]
    });
    let document = json!({"protocolVersion": "draft", "hooks": [hook]});
    let (reg, ev) = (dir.join("registration.json"), dir.join("event.json"));
    std::fs::write(&reg, document.to_string()).expect("write the registration");
    std::fs::write(&ev, valid_event("tool.before", id)).expect("write the event");
    (reg, ev)
}

/// A backend started by a bare command name is looked up in the absolute directories of
/// `PATH` alone: an empty entry (`:$PATH`) or a relative one would find a program of the
/// same name in the working directory — the backend's `cwd`, here the folder where a
/// program that allows everything is planted, as an agent could in its project — and ask
/// it instead of the policy backend.
#[test]
fn a_bare_stdio_command_is_never_found_in_the_working_directory() {
    use std::os::unix::fs::PermissionsExt as _;
    const BACKEND: &str = env!("CARGO_BIN_EXE_stdio_backend");
    let backend = Path::new(BACKEND);
    let name = backend
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a name");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let planted = dir.path().join(name);
    let marker = dir.path().join("planted-ran");
    std::fs::write(
        &planted,
        format!("#!/bin/sh\ntouch '{}'\n", marker.display()),
    )
    .expect("plant a program");
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (reg, ev) = write_stdio_call(dir.path(), name, "evt_path");
    let real = backend
        .parent()
        .expect("a directory")
        .to_str()
        .expect("UTF-8");
    // With the real backend's directory on PATH its deny; with no absolute directory at
    // all, not the working directory either (a failed launch, failed open).
    for (path, exit) in [
        (format!(":{real}:/usr/bin:/bin"), 2),
        (format!(".:{real}:/usr/bin:/bin"), 2),
        (String::new(), 0),
        (".".to_string(), 0),
    ] {
        let mut command = intercept_command(&reg, &ev);
        command
            .current_dir(dir.path())
            .env("PATH", &path)
            .stdin(Stdio::null());
        let run = Run::of(command.output().expect("run ahp"));
        // Never the planted program, which would fail open.
        run.assert_exit(exit, &path);
        let settled = match exit {
            2 => "backend-deny",
            _ => "launch-failed",
        };
        assert!(run.stdout.contains(settled), "{path}: {run:?}");
        assert!(!marker.exists(), "{path}: the planted program ran");
    }
}

/// A harness that starts `ahp` with SIGCHLD ignored (it stays ignored across exec) must
/// not have the kernel reap the stdio backends: a per-event backend that answered and
/// exited 0 is its answer, not an `abnormal-exit` settled by the policy.
#[test]
fn an_ignored_sigchld_does_not_turn_a_per_event_answer_into_a_failure() {
    use std::os::unix::process::CommandExt as _;
    const BACKEND: &str = env!("CARGO_BIN_EXE_stdio_backend");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (reg, ev) = write_stdio_call(dir.path(), BACKEND, "evt_sigchld");
    let mut command = intercept_command(&reg, &ev);
    command.stdin(Stdio::null());
    // SAFETY: signal(2) is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGCHLD, libc::SIG_IGN);
            Ok(())
        });
    }
    let run = Run::of(command.output().expect("run ahp"));
    run.assert_exit(2, "the backend's deny");
    assert!(run.stdout.contains("backend-deny"), "{run:?}");
}

/// `ahp component push REFERENCE --component oci://…` has two references: a malformed one
/// is named by its place, so its author knows which to fix. Both are refused before
/// anything is asked of a registry.
#[test]
fn a_push_names_which_of_its_references_is_malformed() {
    let good = "127.0.0.1:1/ahp/interceptor:1";
    let bad = "UPPER/Bad:tag";
    for (reference, component, named) in [
        (bad, format!("oci://{good}"), "REFERENCE: "),
        (good, format!("oci://{bad}"), "--component: "),
    ] {
        let run = ahp(
            &["component", "push", reference, "--component", &component],
            &[],
        );
        run.assert_exit(1, "a malformed reference");
        assert!(run.stderr.contains(named), "{named}: {}", run.stderr);
        assert!(
            run.stderr.contains("invalid OCI reference"),
            "{}",
            run.stderr
        );
    }
}
