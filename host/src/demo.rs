//! `ahp demo`: the main job on an embedded default.
//!
//! Starts a small policy backend on 127.0.0.1 (a random port; no network needed), then
//! runs scripted tool calls through the real component: an allow, an explicit deny, a
//! timeout under fail-open, a timeout under fail-closed, and a malformed reply. Prints a
//! table of decisions and why, and leaves the audit log in a temporary file. Each call has
//! the settlement it must reach; one that settles otherwise is named, and the demo exits 1.

mod backend;

use crate::{DecidedBy, Decision, EffectKind, Interceptor, Options, Record, Settlement};
use serde_json::{json, Value};
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
    expected: (Decision, DecidedBy),
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
            expected: (Decision::Allow, DecidedBy::NoObjection),
        },
        Scenario {
            title: "explicit deny",
            route: "policy",
            policy: "fail-closed",
            timeout_ms: 500,
            tool: "Bash",
            input: json!({"command": "rm -rf /"}),
            expected: (Decision::Deny, DecidedBy::BackendDeny),
        },
        Scenario {
            title: "timeout, fail-open",
            route: "slow",
            policy: "fail-open",
            timeout_ms: 300,
            tool: "Bash",
            input: json!({"command": "ls"}),
            expected: (Decision::Allow, DecidedBy::NoObjection),
        },
        Scenario {
            title: "timeout, fail-closed",
            route: "slow",
            policy: "fail-closed",
            timeout_ms: 300,
            tool: "Bash",
            input: json!({"command": "ls"}),
            expected: (Decision::Deny, DecidedBy::SyntheticDeny),
        },
        Scenario {
            title: "malformed reply",
            route: "garbled",
            policy: "fail-closed",
            timeout_ms: 500,
            tool: "Write",
            input: json!({"path": "notes.txt"}),
            expected: (Decision::Deny, DecidedBy::SyntheticDeny),
        },
    ]
}

/// Runs the demo; exit 0 when every scripted call settled as expected.
pub async fn run(options: Options) -> ExitCode {
    let (addr, server) = match backend::serve().await {
        Ok(started) => started,
        Err(e) => {
            eprintln!("error: start the demo backend: {e}");
            return ExitCode::from(1);
        }
    };
    let audit_dir = match audit_dir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("error: create the demo's audit directory: {e}");
            return ExitCode::from(1);
        }
    };
    let audit_path = audit_dir.join("audit.jsonl");
    println!("policy backend: http://{addr}/  (built in, loopback only)\n");
    println!(
        "{:<3} {:<22} {:<6} {:<7} {:<15} {:>6}  why",
        "#", "scenario", "tool", "result", "decided by", "ms"
    );
    let mut ok = true;
    for (i, scenario) in scenarios().iter().enumerate() {
        let registration = registration(addr, scenario);
        let mut opts = options.clone();
        opts.audit_path = Some(audit_path.clone());
        let interceptor = match Interceptor::new(&registration, opts).await {
            Ok(interceptor) => interceptor,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        };
        let started = Instant::now();
        let settled = interceptor
            .intercept(&event(i, scenario), &[EffectKind::Deny], None)
            .await;
        let ms = started.elapsed().as_millis();
        interceptor.shutdown();
        match settled {
            Ok(s) => {
                println!(
                    "{:<3} {:<22} {:<6} {:<7} {:<15} {:>6}  {}",
                    i + 1,
                    scenario.title,
                    scenario.tool,
                    s.decision,
                    s.decided_by,
                    ms,
                    why(&s.record)
                );
                if let Some(mismatch) = unexpected(scenario, &s) {
                    ok = false;
                    eprintln!("error: scenario {} {mismatch}", i + 1);
                }
            }
            Err(e) => {
                ok = false;
                println!("{:<3} {:<22} error: {e}", i + 1, scenario.title);
            }
        }
    }
    server.abort();
    println!("\naudit log: {}", audit_path.display());
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

/// How `settled` differs from what `scenario` expects, if it does.
fn unexpected(scenario: &Scenario, settled: &Settlement) -> Option<String> {
    let (decision, decided_by) = scenario.expected;
    if (settled.decision, settled.decided_by) == (decision, decided_by) {
        return None;
    }
    Some(format!(
        "({}) settled as {} by {}, expected {decision} by {decided_by}",
        scenario.title, settled.decision, settled.decided_by
    ))
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
