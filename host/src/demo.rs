//! `ahp demo`: the main job on an embedded default.
//!
//! Starts a small policy backend on 127.0.0.1 (a random port; no network needed), then
//! runs scripted tool calls through the real component: an allow, an explicit deny, a
//! timeout under fail-open, a timeout under fail-closed, and a malformed reply. Prints a
//! table of decisions and why, and leaves the audit log in a temporary file. Each call has
//! the settlement it must reach (the decision, who made it, and its interceptor's outcome
//! and failure class); one that settles otherwise is named, and the demo exits 1.

mod backend;

use crate::cli::{fail, print_line};
use crate::vocab::Outcome;
use crate::{DecidedBy, Decision, EffectKind, FailureClass, Interceptor, Options, Record};
use serde_json::{json, Value};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// One scripted tool call.
struct Scenario {
    title: &'static str,
    route: &'static str,
    policy: &'static str,
    timeout_ms: u64,
    tool: &'static str,
    input: Value,
    /// How the call must settle.
    expected: Settled,
}

/// How a call settled, as far as the demo checks it. The decision alone would let a
/// scenario pass for the wrong reason: a fail-open timeout that answered in time allows
/// too, and a fail-closed one denies whatever the failure was. So the one interceptor's
/// outcome and failure class, as the audit record has them, are checked as well.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Settled {
    decision: Decision,
    decided_by: DecidedBy,
    /// `None` when the record names no interceptor: the call never reached one.
    outcome: Option<Outcome>,
    /// The interceptor's failure class, when it failed.
    class: Option<FailureClass>,
}

impl Settled {
    /// A call the backend answered.
    fn answered(decision: Decision, decided_by: DecidedBy, outcome: Outcome) -> Settled {
        Settled {
            decision,
            decided_by,
            outcome: Some(outcome),
            class: None,
        }
    }

    /// A call settled by the failure policy after a failure of `class`.
    fn failed(
        decision: Decision,
        decided_by: DecidedBy,
        outcome: Outcome,
        class: FailureClass,
    ) -> Settled {
        Settled {
            decision,
            decided_by,
            outcome: Some(outcome),
            class: Some(class),
        }
    }

    /// What `record` says: the demo registers one interceptor, so the first is the one.
    fn of(record: &Record) -> Settled {
        let interceptor = record.interceptors.first();
        Settled {
            decision: record.decision,
            decided_by: record.decided_by,
            outcome: interceptor.map(|i| i.outcome),
            class: interceptor
                .and_then(|i| i.failure.as_ref())
                .map(|f| f.class),
        }
    }
}

impl fmt::Display for Settled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} by {}", self.decision, self.decided_by)?;
        match (self.outcome, self.class) {
            (None, _) => write!(f, " (no interceptor called)"),
            (Some(outcome), None) => write!(f, " (interceptor {outcome})"),
            (Some(outcome), Some(class)) => write!(f, " (interceptor {outcome}: {class})"),
        }
    }
}

fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            title: "allow",
            route: "policy",
            policy: "fail-closed",
            timeout_ms: 500,
            tool: "Read",
            input: json!({"path": "README.md"}),
            expected: Settled::answered(Decision::Allow, DecidedBy::NoObjection, Outcome::NoEffect),
        },
        Scenario {
            title: "explicit deny",
            route: "policy",
            policy: "fail-closed",
            timeout_ms: 500,
            tool: "Bash",
            input: json!({"command": "rm -rf /"}),
            expected: Settled::answered(Decision::Deny, DecidedBy::BackendDeny, Outcome::Deny),
        },
        Scenario {
            title: "timeout, fail-open",
            route: "slow",
            policy: "fail-open",
            timeout_ms: 300,
            tool: "Bash",
            input: json!({"command": "ls"}),
            expected: Settled::failed(
                Decision::Allow,
                DecidedBy::NoObjection,
                Outcome::FailedOpen,
                FailureClass::DeadlineExceeded,
            ),
        },
        Scenario {
            title: "timeout, fail-closed",
            route: "slow",
            policy: "fail-closed",
            timeout_ms: 300,
            tool: "Bash",
            input: json!({"command": "ls"}),
            expected: Settled::failed(
                Decision::Deny,
                DecidedBy::SyntheticDeny,
                Outcome::FailedClosed,
                FailureClass::DeadlineExceeded,
            ),
        },
        Scenario {
            title: "malformed reply",
            route: "garbled",
            policy: "fail-closed",
            timeout_ms: 500,
            tool: "Write",
            input: json!({"path": "notes.txt"}),
            expected: Settled::failed(
                Decision::Deny,
                DecidedBy::SyntheticDeny,
                Outcome::FailedClosed,
                FailureClass::MalformedJson,
            ),
        },
    ]
}

/// Runs the demo; exit 0 when every scripted call settled as expected.
pub async fn run(options: Options) -> ExitCode {
    let (addr, server) = match backend::serve().await {
        Ok(started) => started,
        Err(e) => return fail(&format!("start the demo backend: {e}")),
    };
    // Host options the demo's registrations cannot be loaded under (`--interceptable`
    // without tool.before, say) are the options' fault: said so before anything is
    // printed or made.
    match Interceptor::new(&registration(addr, &scenarios()[0]), options.clone()).await {
        Ok(interceptor) => interceptor.shutdown(),
        Err(e) => {
            return fail(&format!(
                "the host options do not fit the demo's registration: {e}"
            ))
        }
    }
    let audit_dir = match audit_dir() {
        Ok(dir) => dir,
        Err(e) => return fail(&format!("create the demo's audit directory: {e}")),
    };
    let audit_path = audit_dir.join("audit.jsonl");
    let heading = format!(
        "policy backend: http://{addr}/  (built in, loopback only)\n\n\
         {:<3} {:<22} {:<6} {:<7} {:<15} {:>6}  why",
        "#", "scenario", "tool", "result", "decided by", "ms"
    );
    if let Err(e) = print_line(heading) {
        return fail(&e);
    }
    let mut ok = true;
    for (i, scenario) in scenarios().iter().enumerate() {
        let registration = registration(addr, scenario);
        let mut opts = options.clone();
        opts.audit_path = Some(audit_path.clone());
        let interceptor = match Interceptor::new(&registration, opts).await {
            Ok(interceptor) => interceptor,
            Err(e) => return fail(&e.to_string()),
        };
        let started = Instant::now();
        let settled = interceptor
            .intercept(&event(i, scenario), &[EffectKind::Deny], None)
            .await;
        let ms = started.elapsed().as_millis();
        interceptor.shutdown();
        match settled {
            Ok(s) => {
                let row = format!(
                    "{:<3} {:<22} {:<6} {:<7} {:<15} {:>6}  {}",
                    i + 1,
                    scenario.title,
                    scenario.tool,
                    s.decision,
                    s.decided_by,
                    ms,
                    why(&s.record)
                );
                if let Err(e) = print_line(row) {
                    return fail(&e);
                }
                if let Some(mismatch) = unexpected(scenario, &s.record) {
                    ok = false;
                    crate::cli::stderr_line(format_args!("error: scenario {} {mismatch}", i + 1));
                }
            }
            Err(e) => {
                ok = false;
                if let Err(e) =
                    print_line(format!("{:<3} {:<22} error: {e}", i + 1, scenario.title))
                {
                    return fail(&e);
                }
                crate::cli::stderr_line(format_args!(
                    "error: scenario {} ({}) could not be made: {e}",
                    i + 1,
                    scenario.title
                ));
            }
        }
    }
    server.abort();
    if let Err(e) = print_line(format!("\naudit log: {}", audit_path.display())) {
        return fail(&e);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// A new directory for the audit log, private to the user: created under a random name
/// (never one that already exists, nor a link someone planted at a predictable name), and
/// kept after the process so that the log it prints can be read.
fn audit_dir() -> std::io::Result<PathBuf> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("ahp-demo-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        builder.permissions(std::fs::Permissions::from_mode(0o700));
    }
    Ok(builder.tempdir()?.keep())
}

/// How the call `record` settled differs from what `scenario` expects, if it does.
fn unexpected(scenario: &Scenario, record: &Record) -> Option<String> {
    let settled = Settled::of(record);
    (settled != scenario.expected).then(|| {
        format!(
            "({}) settled as {settled}, expected {}",
            scenario.title, scenario.expected
        )
    })
}

fn registration(addr: SocketAddr, s: &Scenario) -> String {
    json!({
        "protocolVersion": "draft",
        "hooks": [{
            "id": "dev.ahp.demo",
            "transport": {"type": "http", "url": format!("http://{addr}/{}", s.route)},
            "subscriptions": [{
                "events": ["tool.before"], "mode": "intercept",
                "timeoutMs": s.timeout_ms, "failurePolicy": s.policy,
                "content": {"default": "metadata"}
            }]
        }]
    })
    .to_string()
}

fn event(i: usize, s: &Scenario) -> String {
    json!({
        "id": format!("evt_demo_{}", i + 1),
        "source": "urn:ahp:demo",
        "type": "tool.before",
        "time": "2026-11-30T12:00:00Z",
        "session": {"id": "sess_demo"},
        "call": {"id": format!("call_{}", i + 1)},
        "tool": {"name": s.tool, "input": s.input, "origin": "native"},
        "path": "native"
    })
    .to_string()
}

/// One line on why the call settled as it did, from the audit record.
fn why(record: &Record) -> String {
    let interceptor = record.interceptors.first();
    match (interceptor.and_then(|i| i.failure.as_ref()), &record.reason) {
        (Some(failure), _) => format!(
            "{} in {} ({})",
            failure.class,
            failure.phase,
            interceptor.map_or("?", |i| i.outcome.as_str())
        ),
        (None, Some(reason)) => format!("backend: {reason}"),
        (None, None) => "backend raised no objection".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The audit record of a call that settled as `settled`, shaped as the component
    /// writes it for the demo's one interceptor.
    fn record(settled: Settled) -> Record {
        let interceptors = match settled.outcome {
            None => json!([]),
            Some(outcome) => json!([{
                "backend": "dev.ahp.demo", "subscription": 0, "policy": "fail-open",
                "timeoutMs": 300, "outcome": outcome, "attempts": [],
                "failure": settled.class.map(|class| json!({"class": class, "phase": "parse"}))
            }]),
        };
        serde_json::from_value(json!({
            "event": {"id": "evt_demo_3", "type": "tool.before", "session": "sess_demo", "call": "call_3"},
            "decision": settled.decision, "decidedBy": settled.decided_by, "reason": null,
            "elapsedMs": 300, "interceptors": interceptors, "observers": []
        }))
        .expect("a record")
    }

    fn scenario(title: &str) -> Scenario {
        scenarios()
            .into_iter()
            .find(|s| s.title == title)
            .expect("the scenario")
    }

    #[test]
    fn each_scenario_accepts_the_settlement_it_expects() {
        for scenario in scenarios() {
            let mismatch = unexpected(&scenario, &record(scenario.expected));
            assert_eq!(mismatch, None, "{}", scenario.title);
        }
    }

    /// A fail-open timeout that failed for another reason still allows: the class says so.
    #[test]
    fn a_failure_of_another_class_is_a_mismatch() {
        let timeout = scenario("timeout, fail-open");
        let malformed = Settled {
            class: Some(FailureClass::MalformedJson),
            ..timeout.expected
        };
        let mismatch = unexpected(&timeout, &record(malformed)).expect("a mismatch");
        assert_eq!(
            mismatch,
            "(timeout, fail-open) settled as allow by no-objection (interceptor failed-open: \
             malformed-json), expected allow by no-objection (interceptor failed-open: \
             deadline-exceeded)"
        );
    }

    /// A fail-open timeout whose backend answered in time allows too: the outcome says so.
    #[test]
    fn an_answer_where_a_failure_was_scripted_is_a_mismatch() {
        let timeout = scenario("timeout, fail-open");
        let answered =
            Settled::answered(Decision::Allow, DecidedBy::NoObjection, Outcome::NoEffect);
        let mismatch = unexpected(&timeout, &record(answered)).expect("a mismatch");
        assert!(
            mismatch.contains("settled as allow by no-objection (interceptor no-effect)"),
            "{mismatch}"
        );
    }
}
