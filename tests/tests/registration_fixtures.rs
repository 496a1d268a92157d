//! The upstream registration fixtures through the real component, and the `ahp` CLI's
//! exit codes and output for `check` and `intercept`.

use ahp_host::{Interceptor, Options};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    ahp_command, assert_nothing_sent, event, one_json_line, only_interceptor, registration, Http,
    Run,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::io::AsyncWriteExt;

/// The literal token of `literal-token.invalid.json`; no problem text may echo it.
const LITERAL_TOKEN: &str = "do-not-store-literal-tokens";
/// The interceptor id of the CLI tests' registrations.
const HOOK_ID: &str = "com.example.policy";

fn fixtures_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/upstream/fixtures/draft/registration"
    ))
}

/// Every fixture file, sorted by name.
fn fixtures() -> Vec<PathBuf> {
    let dir = fixtures_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_is_accepted_iff_named_valid() {
    let files = fixtures();
    let names: Vec<String> = files.iter().map(|p| file_name(p)).collect();
    for expected in [
        "portable.valid.json",
        "empty-hooks.invalid.json",
        "literal-token.invalid.json",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    let mut failures = Vec::new();
    for path in &files {
        let name = file_name(path);
        let text = std::fs::read_to_string(path).unwrap();
        let built = Interceptor::new(&text, Options::default()).await;
        match (name.ends_with(".valid.json"), built) {
            (true, Ok(_)) => {}
            (true, Err(e)) => failures.push(format!("{name}: rejected: {e}")),
            (false, Ok(_)) => failures.push(format!("{name}: accepted")),
            (false, Err(e)) if e.is_registration() => {
                let problems: Vec<String> = e.problems().iter().map(ToString::to_string).collect();
                if problems.is_empty() {
                    failures.push(format!("{name}: rejected without problems"));
                }
                for problem in &problems {
                    if !(problem.starts_with('/') && problem.contains(": ")) {
                        failures.push(format!("{name}: problem names no JSON path: {problem:?}"));
                    }
                    if problem.contains(LITERAL_TOKEN) {
                        failures.push(format!(
                            "{name}: problem echoes the literal token: {problem:?}"
                        ));
                    }
                }
            }
            (false, Err(e)) => failures.push(format!("{name}: not a registration error: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "fixture mismatches:\n{}",
        failures.join("\n")
    );
}

/// The literal-token fixture is rejected at the field that holds the literal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn literal_token_is_rejected_at_its_path_without_echoing_it() {
    let text = std::fs::read_to_string(fixtures_dir().join("literal-token.invalid.json")).unwrap();
    let problems = match Interceptor::new(&text, Options::default()).await {
        Err(e) if e.is_registration() => e
            .problems()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        Err(e) => panic!("not a registration error: {e}"),
        Ok(_) => panic!("a literal token was accepted"),
    };
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("/hooks/0/authentication/token: ")),
        "no problem at /hooks/0/authentication/token: {problems:?}"
    );
    assert!(
        problems.iter().all(|p| !p.contains(LITERAL_TOKEN)),
        "{problems:?}"
    );
}

/// Runs `ahp` with `args`, feeding `stdin` if given.
async fn ahp(args: &[&str], stdin: Option<&str>) -> Run {
    ahp_logging_to(args, stdin, None).await
}

/// As [`ahp`], the operator's log written to `log` (`AHP_LOG_FILE`).
async fn ahp_logging_to(args: &[&str], stdin: Option<&str>, log: Option<&Path>) -> Run {
    let command = tokio::task::spawn_blocking(ahp_command)
        .await
        .expect("locate the ahp binary");
    let mut command = tokio::process::Command::from(command);
    if let Some(log) = log {
        command.env("AHP_LOG_FILE", log);
    }
    command
        .args(args)
        .env_remove("AHP_LOG")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("spawn ahp");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("piped stdin");
        pipe.write_all(input.as_bytes())
            .await
            .expect("write the event to ahp");
        drop(pipe);
    }
    Run::of(child.wait_with_output().await.expect("wait for ahp"))
}

/// Where `ahp intercept` reads its event.
enum EventFrom<'a> {
    /// `--event -`, the event written to its stdin.
    Stdin(&'a str),
    /// `--event FILE`, the event written to a file first.
    File(&'a str),
}

/// Runs `ahp intercept` with `hook` as the only interceptor of its registration file.
async fn ahp_intercept(hook: Http<'_>, event: EventFrom<'_>) -> Run {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg_file = dir.path().join("registration.json");
    std::fs::write(&reg_file, registration(&[hook])).expect("write the registration");
    let event_file = dir.path().join("event.json");
    let (event_arg, stdin) = match event {
        EventFrom::Stdin(event) => ("-", Some(event)),
        EventFrom::File(event) => {
            std::fs::write(&event_file, event).expect("write the event");
            (event_file.to_str().unwrap(), None)
        }
    };
    let args = [
        "intercept",
        "--registration",
        reg_file.to_str().unwrap(),
        "--event",
        event_arg,
    ];
    ahp(&args, stdin).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_check_accepts_the_portable_fixture() {
    let file = fixtures_dir().join("portable.valid.json");
    let run = ahp(&["check", file.to_str().unwrap()], None).await;
    run.assert_exit(0, "check on the portable fixture");
    assert_eq!(run.stdout, format!("{}: valid\n", file.display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_check_rejects_empty_hooks_with_problems_on_stderr() {
    let file = fixtures_dir().join("empty-hooks.invalid.json");
    let run = ahp(&["check", file.to_str().unwrap()], None).await;
    run.assert_exit(1, "check on empty hooks");
    assert_eq!(run.stdout, "", "nothing on stdout");
    let problems: Vec<&str> = run.stderr.lines().collect();
    assert!(!problems.is_empty(), "problems on stderr");
    // Each line names the file, then the problem's JSON path.
    let named = format!("error: registration {}: /", file.display());
    for problem in &problems {
        assert!(problem.starts_with(&named), "{problem:?}");
    }
    let hooks = format!("error: registration {}: /hooks: ", file.display());
    assert!(
        problems.iter().any(|p| p.starts_with(&hooks)),
        "the problem names /hooks: {problems:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_intercept_rejects_an_invalid_event_with_exit_1() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let mut bad: Value = serde_json::from_str(&event("evt_bad")).unwrap();
    bad["tool"]["input"] = json!("make test");

    let hook = Http::new(HOOK_ID, backend.url());
    let run = ahp_intercept(hook, EventFrom::Stdin(&bad.to_string())).await;
    run.assert_exit(1, "intercept of an invalid event");
    assert_eq!(run.stdout, "", "no settlement for an invalid event");
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with("error: ") && l.contains("event/tool/input")),
        "stderr: {}",
        run.stderr
    );
    // Nothing is sent for an invalid event: no request, not even a connection.
    assert_nothing_sent(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_intercept_denies_a_fail_closed_blackhole_with_exit_2() {
    let backend = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    // Long enough for a fresh process on a loaded machine to have sent the request.
    let hook = Http::new(HOOK_ID, backend.url())
        .policy("fail-closed")
        .timeout_ms(1_000);
    let run = ahp_intercept(hook, EventFrom::File(&event("evt_cli_blackhole"))).await;
    run.assert_exit(2, "intercept at a fail-closed blackhole");
    let record = one_json_line(&run.stdout);
    assert_eq!(record["decision"], json!("deny"));
    assert_eq!(record["decidedBy"], json!("synthetic-deny"));
    assert_eq!(
        record["reason"],
        json!("Required policy backend unavailable.")
    );
    assert_eq!(record["event"]["id"], json!("evt_cli_blackhole"));
    let entry = only_interceptor(&record);
    assert_eq!(entry["outcome"], json!("failed-closed"));
    assert_eq!(
        entry["failure"],
        json!({"class": "deadline-exceeded", "phase": "await-response"})
    );
    assert_eq!(backend.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_intercept_allows_no_effect_with_exit_0() {
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let hook = Http::new(HOOK_ID, backend.url());
    let run = ahp_intercept(hook, EventFrom::Stdin(&event("evt_cli_allow"))).await;
    run.assert_exit(0, "intercept answered with no effect");
    let record = one_json_line(&run.stdout);
    assert_eq!(record["decision"], json!("allow"));
    assert_eq!(record["decidedBy"], json!("no-objection"));
    assert_eq!(record["reason"], Value::Null);
    assert_eq!(record["event"]["id"], json!("evt_cli_allow"));
    assert_eq!(only_interceptor(&record)["outcome"], json!("no-effect"));
    let requests = backend.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].json()["id"], json!("evt_cli_allow"));
}

/// `--budget-ms` takes 1 ms to an hour, on every command that has it: zero or a number
/// that would overflow the clock (or the harness timeout derived from it) is a usage
/// error naming the flag, before anything runs: exit 1 ("the call could not be made",
/// never 2, a denial), except under `ahp hook HARNESS`, whose harness reads only exit 2
/// as a block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_budget_is_bounded_on_every_command() {
    let portable = fixtures_dir().join("portable.valid.json");
    let registration = portable.to_str().expect("a UTF-8 path");
    // Under `ahp hook HARNESS`, a usage error is the harness's block for an unknown event:
    // clap's text is for a person, never for the model (it goes to the log file only).
    const CLAP: &str = "clap's text";
    let commands: [(&[&str], i32, &str); 3] = [
        (
            &["intercept", "--registration", registration, "--event", "-"],
            1,
            CLAP,
        ),
        (
            &["hook", "claude-code", "--registration", registration],
            2,
            "Policy evaluation failed.\n",
        ),
        (
            &[
                "hook",
                "install",
                "claude-code",
                "--registration",
                registration,
            ],
            1,
            CLAP,
        ),
    ];
    let names_the_bound =
        |text: &str| text.contains("--budget-ms") && text.contains("1 to 3600000");
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (command, code, stderr) in commands {
        for budget in ["0", "3600001", "18446744073709551615"] {
            let mut args = command.to_vec();
            args.extend(["--budget-ms", budget]);
            let log = dir.path().join(format!("{}-{budget}.log", command[1]));
            let run = ahp_logging_to(&args, None, Some(&log)).await;
            run.assert_exit(code, &format!("{args:?}"));
            if stderr == CLAP {
                assert!(names_the_bound(&run.stderr), "{args:?}: {}", run.stderr);
            } else {
                assert_eq!(run.stderr, stderr, "{args:?}");
                // The same block answers a payload it cannot read (none here): the log
                // tells the usage error from that.
                let logged = std::fs::read_to_string(&log).unwrap_or_default();
                assert!(names_the_bound(&logged), "{args:?}: {logged}");
            }
            assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        }
    }
    let run = ahp(
        &[
            "hook",
            "install",
            "claude-code",
            "--registration",
            registration,
            "--budget-ms",
            "3600000",
        ],
        None,
    )
    .await;
    run.assert_exit(0, "hook install with an hour's budget");
    assert!(
        run.stdout.contains("3605"),
        "the harness timeout: {}",
        run.stdout
    );
}

/// An audit write cut short (here by a file-size limit, as a full disk would) leaves no
/// fragment: the next record, from another process, starts on a line of its own, and
/// every line of the log still parses.
#[test]
fn a_cut_short_audit_write_leaves_no_fragment() {
    use std::os::unix::process::CommandExt as _;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = dir.path().join("registration.json");
    let refused = ahp_tests::fault_backend::refused_url();
    let hook = Http::new(HOOK_ID, refused.as_str()).policy("fail-open");
    std::fs::write(&reg, registration(&[hook])).expect("write the registration");
    let event_file = dir.path().join("event.json");
    std::fs::write(&event_file, event("evt_audit_cut")).expect("write the event");
    let audit = dir.path().join("audit.jsonl");
    // The limit applies to every file the process writes, wasmtime's in-memory images of
    // the component too: an earlier record of 8 MiB puts it well above those.
    let earlier = format!("{}\n", json!({"earlier": "x".repeat(8 << 20)}));
    std::fs::write(&audit, &earlier).expect("an earlier record");
    let args = [
        "intercept",
        "--registration",
        reg.to_str().unwrap(),
        "--event",
        event_file.to_str().unwrap(),
        "--audit",
        audit.to_str().unwrap(),
    ];
    let limit = earlier.len() as u64 + 40;
    let mut capped = ahp_command();
    capped
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SIGXFSZ left at its default: `ahp` itself must turn it into a failed write.
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        capped.pre_exec(ahp_tests::support::cap_file_size(limit));
    }
    let status = capped.status().expect("run ahp with a capped file size");
    assert!(status.success(), "the decision stands: {status}");
    let after = std::fs::read(&audit).unwrap();
    assert!(
        after == earlier.as_bytes(),
        "the cut-short record was not taken back off: {} bytes, ending {:?}",
        after.len(),
        String::from_utf8_lossy(&after[after.len().saturating_sub(60)..])
    );
    let full = ahp_command()
        .args(args)
        .stdout(Stdio::null())
        .status()
        .expect("run ahp");
    assert!(full.success());
    let log = std::fs::read_to_string(&audit).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "a record per line");
    for line in lines {
        let start: String = line.chars().take(60).collect();
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {start}…"));
    }
}

/// Run as another user (root gives the files away, so this runs where CI runs, as root):
/// a log its user may write but not read is appended to, its earlier line kept, and a
/// log a stranger left (root's, writable by everybody, in no group of the user's) is
/// refused — exit 1, never written to.
#[test]
fn as_another_user_a_write_only_log_is_appended_and_a_strangers_refused() {
    use std::os::unix::fs::{chown, PermissionsExt as _};
    use std::os::unix::process::CommandExt as _;
    const NOBODY: u32 = 65534;
    // SAFETY: geteuid takes no arguments and touches no memory of ours.
    if unsafe { libc::geteuid() } != 0 {
        // Straight to stderr: the harness captures `println!` of a passing test.
        use std::io::Write as _;
        let skipped = "SKIPPED: only root can run ahp as another user\n";
        let _ = std::io::stderr().write_all(skipped.as_bytes());
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    mode(dir.path(), 0o755);
    let home = dir.path().join("nobody");
    let cache = home.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    // The target directory may be closed to the user: the binary goes with its files,
    // copied by `cp` (a file this process held open for writing would be inherited by a
    // child another test forks meanwhile: "text file busy" at exec).
    let binary = home.join("ahp");
    let copied = std::process::Command::new("cp")
        .arg(ahp_tests::support::ahp_binary())
        .arg(&binary)
        .status();
    assert!(copied.expect("run cp").success(), "copy the binary");
    let reg = home.join("registration.json");
    let refused = ahp_tests::fault_backend::refused_url();
    let hook = Http::new(HOOK_ID, refused.as_str()).policy("fail-open");
    std::fs::write(&reg, registration(&[hook])).unwrap();
    let event_file = home.join("event.json");
    std::fs::write(&event_file, event("evt_write_only")).unwrap();
    let write_only = home.join("write-only.jsonl");
    std::fs::write(&write_only, "{\"earlier\":1}\n").unwrap();
    for path in [&home, &cache, &binary, &reg, &event_file, &write_only] {
        chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    mode(&write_only, 0o200);
    let strangers = home.join("strangers.jsonl");
    std::fs::write(&strangers, "").unwrap();
    mode(&strangers, 0o666);
    let run_as_nobody = |audit: &Path| {
        let mut command = std::process::Command::new(&binary);
        command
            .args(["intercept", "--registration", reg.to_str().unwrap()])
            .args(["--event", event_file.to_str().unwrap()])
            .args(["--audit", audit.to_str().unwrap()])
            .env("AHP_CACHE_DIR", &cache)
            .env_remove("AHP_LOG")
            .uid(NOBODY)
            .gid(NOBODY);
        Run::of(command.output().expect("run ahp as nobody"))
    };
    run_as_nobody(&write_only).assert_exit(0, "a write-only log");
    let log = std::fs::read_to_string(&write_only).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert_eq!(lines[0], "{\"earlier\":1}");
    let record: Value = serde_json::from_str(lines[1]).expect("a whole record");
    assert_eq!(record["event"]["id"], "evt_write_only", "{log}");
    let run = run_as_nobody(&strangers);
    run.assert_exit(1, "a stranger's log");
    assert!(
        run.stderr.contains("owned by another user"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read(&strangers).unwrap(), b"", "never written to");
}
