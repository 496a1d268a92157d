//! `ahp hook install`'s contract: the snippet's commands name the `ahp` binary as the
//! user invoked it, and answer with the harness's block where the registration decides
//! when that binary is missing or crashes; the files it names are taken as given (not
//! resolved through symbolic links), must exist and be UTF-8, and an audit log it cannot
//! open is refused; the budget covers the registration's own chain of deadlines.

use ahp_tests::fault_backend::refused_url;
use ahp_tests::hook::{audit_records, write_intercepting, FAILED_REASON};
use ahp_tests::support::{ahp_binary, registration_on, test_cache_dir, Http, Run};
use serde_json::{json, Value};
use std::ffi::OsStr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `ahp hook install HARNESS ARGS`, run as `program` (a path, or a name looked up in
/// `path`, the child's PATH, when given).
fn install_as(program: &OsStr, path: Option<&OsStr>, harness: &str, args: &[&OsStr]) -> Run {
    let mut command = install_command(Command::new(program), harness, args);
    if let Some(path) = path {
        command.env("PATH", path);
    }
    Run::of(command.output().expect("run ahp hook install"))
}

/// `command` (an `ahp`) made `ahp hook install HARNESS ARGS`, stdin empty.
fn install_command(mut command: Command, harness: &str, args: &[&OsStr]) -> Command {
    command
        .args(["hook", "install", harness])
        .args(args)
        .env("AHP_CACHE_DIR", test_cache_dir())
        .env_remove("AHP_LOG")
        .stdin(Stdio::null());
    command
}

/// `ahp hook install HARNESS ARGS`, run as the test build's binary.
fn install(harness: &str, args: &[&OsStr]) -> Run {
    install_as(ahp_binary().as_os_str(), None, harness, args)
}

/// A registration in `dir` intercepting tool.before (fail-open, at a refused port) with
/// a deadline of `timeout_ms`.
fn intercepting_tools(dir: &Path, timeout_ms: u64) -> PathBuf {
    write_intercepting(
        dir,
        &refused_url(),
        "fail-open",
        &["tool.before"],
        timeout_ms,
    )
}

/// `ahp` linked at `dir/bin/ahp`, as `~/.cargo/bin/ahp` or a Homebrew link is.
fn linked_ahp(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("a bin directory");
    let link = bin.join("ahp");
    std::os::unix::fs::symlink(ahp_binary(), &link).expect("link ahp");
    link
}

/// The snippet printed by a successful install.
fn snippet(run: &Run) -> Value {
    run.assert_exit(0, "hook install");
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// The command of `event`'s hook in `snippet`, and the shell the harness runs it with
/// (Copilot's `bash` entry, else `sh`).
fn command(snippet: &Value, event: &str) -> (&'static str, String) {
    let entry = &snippet["hooks"][event][0];
    // Claude Code, Codex and Gemini nest the hook in a matcher group.
    let hook = entry.get("hooks").map_or(entry, |hooks| &hooks[0]);
    match (&hook["bash"], &hook["command"]) {
        (Value::String(line), _) => ("bash", line.clone()),
        (_, Value::String(line)) => ("sh", line.clone()),
        _ => panic!("no {event} hook in {snippet}"),
    }
}

/// `line` run by `shell` as the harness runs it, `stdin` on its stdin.
fn run_hook(shell: &str, line: &str, stdin: &str) -> Run {
    let mut child = Command::new(shell)
        .args(["-c", line])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the hook's shell");
    let mut input = child.stdin.take().expect("stdin");
    // The stand-in may exit without reading it.
    let _ = std::io::Write::write_all(&mut input, stdin.as_bytes());
    drop(input);
    Run::of(child.wait_with_output().expect("the hook's shell"))
}

/// The command names the binary at the path the user ran it by, not the file a link
/// there resolves to (a versioned path, gone after an upgrade): argv[0] when it names
/// a path, else the first executable of that name on PATH (a file there that is not
/// executable is passed over).
#[test]
fn the_command_names_the_binary_as_invoked_not_the_file_it_links_to() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let link = linked_ahp(dir.path());
    let reg = intercepting_tools(dir.path(), 1_000);
    let args = [OsStr::new("--registration"), reg.as_os_str()];
    let expected = format!("{} hook claude-code ", link.display());
    let run = install_as(link.as_os_str(), None, "claude-code", &args);
    let (_, line) = command(&snippet(&run), "SessionEnd");
    assert!(line.starts_with(&expected), "{line}");

    let shadow = dir.path().join("shadow");
    std::fs::create_dir(&shadow).expect("a directory");
    std::fs::write(shadow.join("ahp"), "not executable").expect("a plain file");
    let path = std::env::join_paths([shadow, link.parent().expect("bin").to_path_buf()]);
    let path = path.expect("a PATH");
    let run = install_as(OsStr::new("ahp"), Some(&path), "claude-code", &args);
    let (_, line) = command(&snippet(&run), "SessionEnd");
    assert!(line.starts_with(&expected), "{line}");

    // A name with a slash that is no file there (`exec -a`) is not written: the running
    // binary is.
    let mut renamed = Command::new(ahp_binary());
    std::os::unix::process::CommandExt::arg0(&mut renamed, "nowhere/ahp");
    let output = install_command(renamed, "claude-code", &args).output();
    let run = Run::of(output.expect("run ahp hook install"));
    let (_, line) = command(&snippet(&run), "SessionEnd");
    let running = std::fs::canonicalize(ahp_binary()).expect("the binary");
    assert!(
        line.starts_with(&format!("{} hook claude-code ", running.display())),
        "{line}"
    );
}

/// Where a hook decides (here before a tool), a hook whose binary is missing, crashes
/// (SIGSEGV, SIGKILL as from the OOM killer) or exits with a code other than 0 and 2 is
/// the harness's block: exit 2 and the generic reason on stderr (Copilot: its denial on
/// stdout, exit 0), never the failed hook a harness runs the tool after — and nothing of the
/// shell's own on stderr, which the model sees. A binary that answers has its exit code,
/// stdout and stdin passed through as they are, and a signal the harness sends the
/// hook's process (a cancel, its timeout) reaches it as SIGTERM, to settle the call as
/// interrupted. Run through the harness's shell, with stand-ins for `ahp` at the path
/// the command names; Codex's also through zsh, as Codex runs a hook through the user's
/// `$SHELL -lc`, zsh by default on macOS (the install script installs it).
#[test]
fn a_failing_binary_is_the_harness_block_and_signals_reach_an_answering_one() {
    let harnesses = [
        ("claude-code", "PreToolUse", None),
        ("codex", "PreToolUse", None),
        ("codex", "PreToolUse", Some("zsh")),
        ("gemini", "BeforeTool", None),
        ("cursor", "preToolUse", None),
        ("copilot", "preToolUse", None),
    ];
    let copilot_denial = format!(
        "{}\n",
        serde_json::json!({"permissionDecision": "deny",
                           "permissionDecisionReason": FAILED_REASON})
    );
    let blocked = format!("{FAILED_REASON}\n");
    for (harness, event, user_shell) in harnesses {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let link = linked_ahp(dir.path());
        let reg = intercepting_tools(dir.path(), 1_000);
        let args = [OsStr::new("--registration"), reg.as_os_str()];
        let run = install_as(link.as_os_str(), None, harness, &args);
        let (shell, line) = command(&snippet(&run), event);
        let shell = user_shell.unwrap_or(shell);
        let stand_in = |script: Option<&str>| {
            // Gone already after the missing binary's case.
            let _ = std::fs::remove_file(&link);
            if let Some(script) = script {
                std::fs::write(&link, format!("#!/bin/sh\n{script}\n")).expect("write");
                let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
                std::fs::set_permissions(&link, mode).expect("make it executable");
            }
        };
        // The harness's block: Copilot's is its denial's JSON on exit 0.
        let (failed_exit, failed_stdout, failed_stderr) = match harness {
            "copilot" => (0, copilot_denial.as_str(), ""),
            _ => (2, "", blocked.as_str()),
        };
        let case = |what: &str| format!("{harness} under {shell}, {what}: {line}");

        for (what, code) in [("exit 0", 0), ("exit 2", 2)] {
            stand_in(Some(&format!("cat; echo because >&2; exit {code}")));
            let ran = run_hook(shell, &line, "the payload");
            ran.assert_exit(code, &case(what));
            assert_eq!(ran.stdout, "the payload", "{}", case(what));
            assert_eq!(ran.stderr, "because\n", "{}", case(what));
        }
        stand_in(Some("cat; echo because >&2; exit 1"));
        let ran = run_hook(shell, &line, "the payload");
        ran.assert_exit(failed_exit, &case("exit 1"));
        assert_eq!(
            ran.stdout,
            format!("the payload{failed_stdout}"),
            "{}",
            case("exit 1")
        );
        assert_eq!(
            ran.stderr,
            format!("because\n{failed_stderr}"),
            "{}",
            case("exit 1")
        );

        for signal in ["SEGV", "KILL"] {
            stand_in(Some(&format!("cat >/dev/null; kill -{signal} $$")));
            let ran = run_hook(shell, &line, "the payload");
            ran.assert_exit(failed_exit, &case(signal));
            assert_eq!(ran.stdout, failed_stdout, "{}", case(signal));
            assert_eq!(ran.stderr, failed_stderr, "{}", case(signal));
        }

        // A stdin that is closed starts nothing: the block, after the shell's complaint.
        stand_in(Some("cat; exit 0"));
        let mut closed = Command::new(shell);
        closed.args(["-c", &line]).stdin(Stdio::null());
        // SAFETY: close(2) of the child's own stdin between fork and exec.
        unsafe {
            closed.pre_exec(|| match libc::close(0) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
        let ran = Run::of(closed.output().expect("run the hook's shell"));
        ran.assert_exit(failed_exit, &case("closed stdin"));
        assert_eq!(ran.stdout, failed_stdout, "{}", case("closed stdin"));
        assert!(
            ran.stderr.ends_with(failed_stderr),
            "{}",
            case("closed stdin")
        );

        stand_in(None);
        let ran = run_hook(shell, &line, "the payload");
        ran.assert_exit(failed_exit, &case("missing"));
        assert_eq!(ran.stdout, failed_stdout, "{}", case("missing"));
        assert_eq!(ran.stderr, failed_stderr, "{}", case("missing"));
        assert!(
            !ran.stderr.contains(&*link.to_string_lossy()),
            "{}",
            ran.stderr
        );

        // The stand-in says it is ready, then waits for a TERM: whichever signal the
        // harness sends the hook's process, the stand-in is sent a TERM and answers it.
        let ready = dir.path().join("ready");
        let script = format!(
            "trap 'echo got TERM; exit 2' TERM; touch '{}'; while :; do sleep 0.05; done",
            ready.display()
        );
        stand_in(Some(&script));
        for (name, signal) in [
            ("TERM", libc::SIGTERM),
            ("INT", libc::SIGINT),
            ("HUP", libc::SIGHUP),
        ] {
            let _ = std::fs::remove_file(&ready);
            // In a process group of its own: whatever is left of it once the shell is
            // done (a stand-in the shell left running) is killed, so that its output can
            // be read to the end.
            let mut child = Command::new(shell);
            // As a harness starts it: no signal ignored (one ignored on entry, as when
            // the tests themselves run in the background, is one sh cannot trap).
            // SAFETY: signal(2) between fork and exec, on the child's own dispositions.
            unsafe {
                child.pre_exec(|| {
                    for signal in [libc::SIGINT, libc::SIGQUIT, libc::SIGHUP, libc::SIGTERM] {
                        libc::signal(signal, libc::SIG_DFL);
                    }
                    Ok(())
                });
            }
            let mut child = child
                .args(["-c", &line])
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run the hook's shell");
            let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while !ready.exists() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let what = format!("signalled {name}");
            assert!(ready.exists(), "{}: never ready", case(&what));
            let pid = i32::try_from(child.id()).expect("a pid");
            // SAFETY: kill(2) with a pid of our own child and a signal number.
            assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
            let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while child.try_wait().expect("the hook's shell").is_none()
                && std::time::Instant::now() < until
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            // SAFETY: kill(2) with the process group of our own child.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let ran = Run::of(child.wait_with_output().expect("the hook's shell"));
            ran.assert_exit(2, &case(&what));
            assert_eq!(ran.stdout, "got TERM\n", "{}", case(&what));
            assert_eq!(ran.stderr, "", "{}", case(&what));
        }
    }
}

/// At a session start, before a compaction, after a failed tool call (Claude Code's
/// `PostToolUseFailure`, written wherever its `PostToolUse` is) and before a stop, where
/// the adapter's own failure stops the agent, a binary that is missing or crashes stops
/// it too (`continue: false`, the generic reason, exit 0), not the failed hook a harness
/// goes on after (Codex runs the compaction; Gemini reads one before a stop as a deny and
/// prompts the agent again), nor an exit 2 Claude Code does not document after a failed
/// call. A binary that answers is passed through.
#[test]
fn a_failing_binary_stops_the_agent_where_the_adapter_s_failure_does() {
    let stopped = format!(
        "{}\n",
        serde_json::json!({"continue": false, "stopReason": FAILED_REASON})
    );
    // Codex's compaction hook is installed only for a registration that selects it.
    let compaction = &["tool.before", "context.compact.before"][..];
    let cases = [
        ("claude-code", "SessionStart", &["tool.before"][..]),
        ("claude-code", "PostToolUseFailure", &["tool.before"][..]),
        ("codex", "SessionStart", compaction),
        ("codex", "PreCompact", compaction),
        ("claude-code", "Stop", &["tool.before"][..]),
        ("codex", "Stop", &["tool.before"][..]),
        // Gemini's stop hook is installed only for a registration that selects it.
        (
            "gemini",
            "AfterAgent",
            &["tool.before", "turn.finish.before"][..],
        ),
    ];
    for (harness, event, events) in cases {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let link = linked_ahp(dir.path());
        let reg = write_intercepting(dir.path(), &refused_url(), "fail-open", events, 1_000);
        let args = [OsStr::new("--registration"), reg.as_os_str()];
        let run = install_as(link.as_os_str(), None, harness, &args);
        let (shell, line) = command(&snippet(&run), event);
        let case = |what: &str| format!("{harness} {event}, {what}: {line}");
        std::fs::remove_file(&link).expect("remove the link");
        std::fs::write(&link, "#!/bin/sh\ncat >/dev/null; kill -SEGV $$\n").expect("write");
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&link, mode).expect("make it executable");
        let crashed = run_hook(shell, &line, "the payload");
        std::fs::remove_file(&link).expect("remove the stand-in");
        let missing = run_hook(shell, &line, "the payload");
        for (what, ran) in [("crashed", crashed), ("missing", missing)] {
            ran.assert_exit(0, &case(what));
            assert_eq!(ran.stdout, stopped, "{}", case(what));
            assert_eq!(ran.stderr, "", "{}", case(what));
        }
    }
}

/// A snippet holds this machine's absolute paths, and wherever they do not exist every
/// call is denied: Claude Code's is said to go in the project's local settings, never in
/// `.claude/settings.json`, which a team shares; Codex's in the user's own; where the
/// harness reads a project file a team may commit (Claude Code's local settings, which
/// it git-ignores only when it created them, Gemini, Cursor, Copilot), the snippet is
/// said not to be committed.
#[test]
fn a_snippet_is_never_said_to_go_where_a_team_shares_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = intercepting_tools(dir.path(), 1_000);
    for (harness, file, committed) in [
        ("claude-code", ".claude/settings.local.json", true),
        ("codex", "~/.codex/hooks.json", false),
        ("gemini", ".gemini/settings.json", true),
        ("cursor", ".cursor/hooks.json", true),
        ("copilot", "~/.copilot/hooks/ahp.json", false),
    ] {
        let run = install(harness, &[OsStr::new("--registration"), reg.as_os_str()]);
        run.assert_exit(0, harness);
        let warned = format!("# for {file}\n# not to be committed: ");
        assert!(
            run.stderr.contains(&format!("# for {file}\n")),
            "{}",
            run.stderr
        );
        assert_eq!(
            run.stderr.contains(&warned),
            committed,
            "{harness}: {}",
            run.stderr
        );
    }
}

/// A file given through a symbolic link is named by the link (a Kubernetes ConfigMap's
/// `..data`, stow, a `current` link), so repointing it takes effect at the next call; a
/// file that does not exist is refused naming its flag.
#[test]
fn files_are_named_through_their_links() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let version = dir.path().join("v1");
    std::fs::create_dir(&version).expect("a directory");
    intercepting_tools(&version, 1_000);
    let pki = ahp_tests::pki::Pki::generate();
    std::fs::write(version.join("ca.pem"), &pki.ca_pem).expect("write the CA");
    let config = dir.path().join("config");
    std::fs::create_dir(&config).expect("a directory");
    std::os::unix::fs::symlink(&version, config.join("..data")).expect("link ..data");
    for name in ["intercepting.json", "ca.pem"] {
        let target = Path::new("..data").join(name);
        std::os::unix::fs::symlink(target, config.join(name)).expect("link a file");
    }
    let reg = config.join("intercepting.json");
    let roots = config.join("ca.pem");
    let with_roots = |roots: &Path| {
        let args = [reg.as_os_str(), roots.as_os_str()];
        install(
            "cursor",
            &[
                OsStr::new("--registration"),
                args[0],
                OsStr::new("--trust-roots"),
                args[1],
            ],
        )
    };
    let run = with_roots(&roots);
    let (_, line) = command(&snippet(&run), "sessionEnd");
    for named in [&reg, &roots] {
        let word = format!(" {} ", named.display());
        assert!(line.contains(&word), "{word}: {line}");
    }
    assert!(!line.contains("v1"), "{line}");

    let gone = dir.path().join("gone.pem");
    let run = with_roots(&gone);
    run.assert_exit(1, "a missing trust roots file");
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    let said = format!("--trust-roots {}: ", gone.display());
    assert!(run.stderr.contains(&said), "{}", run.stderr);
    assert!(run.stderr.contains("No such file"), "{}", run.stderr);
}

/// An audit log every call would fail to open (its directory missing, a symbolic link)
/// is refused at install naming `--audit`, rather than installed to deny every call; one
/// that can be opened is created as every call creates it, readable by its owner only.
#[test]
fn an_audit_log_that_cannot_be_opened_is_refused_at_install() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = intercepting_tools(dir.path(), 1_000);
    let linked = dir.path().join("linked.jsonl");
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), &linked).expect("link");
    let missing = dir.path().join("missing/audit.jsonl");
    for (audit, why) in [(&missing, "No such file"), (&linked, "symbolic links")] {
        let args = [
            OsStr::new("--registration"),
            reg.as_os_str(),
            OsStr::new("--audit"),
            audit.as_os_str(),
        ];
        let run = install("codex", &args);
        run.assert_exit(1, &audit.display().to_string());
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        let said = format!("--audit {}: ", audit.display());
        assert!(run.stderr.contains(&said), "{}", run.stderr);
        assert!(run.stderr.contains(why), "{why}: {}", run.stderr);
    }
    let audit = dir.path().join("audit.jsonl");
    let args = [
        OsStr::new("--registration"),
        reg.as_os_str(),
        OsStr::new("--audit"),
        audit.as_os_str(),
    ];
    snippet(&install("codex", &args));
    let mode = std::fs::metadata(&audit)
        .expect("the audit log")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// An `--audit` that is a file the hooks read — the registration (by its path, or
/// another name of it), the trust roots, the OAuth clients — is refused naming both
/// flags, the file untouched: the first call would append its record to it, and every
/// later call be denied. An audit log that does not exist yet is none of them.
#[test]
fn an_audit_log_that_is_a_file_the_hooks_read_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = intercepting_tools(dir.path(), 1_000);
    let roots = dir.path().join("ca.pem");
    std::fs::write(&roots, ahp_tests::pki::Pki::generate().ca_pem).expect("write the CA");
    let clients = dir.path().join("clients.json");
    std::fs::write(&clients, "[]").expect("write the clients");
    let linked = dir.path().join("linked.json");
    std::os::unix::fs::symlink(&reg, &linked).expect("link the registration");
    let dotted = dir
        .path()
        .join("..")
        .join(dir.path().file_name().expect("a name"));
    let dotted = dotted.join(reg.file_name().expect("a name"));
    let given = |audit: &Path| {
        let args = [
            OsStr::new("--registration"),
            reg.as_os_str(),
            OsStr::new("--trust-roots"),
            roots.as_os_str(),
            OsStr::new("--oauth-clients"),
            clients.as_os_str(),
            OsStr::new("--audit"),
            audit.as_os_str(),
        ];
        install("claude-code", &args)
    };
    for (audit, flag) in [
        (&reg, "--registration"),
        (&linked, "--registration"),
        (&dotted, "--registration"),
        (&roots, "--trust-roots"),
        (&clients, "--oauth-clients"),
    ] {
        let before = std::fs::read(audit).expect("the file");
        let run = given(audit);
        run.assert_exit(1, &audit.display().to_string());
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        let said = format!("--audit {}: the file {flag} names", audit.display());
        assert!(run.stderr.contains(&said), "{}", run.stderr);
        assert_eq!(std::fs::read(audit).expect("the file"), before);
    }
    snippet(&given(&dir.path().join("audit.jsonl")));
}

/// An `--audit` that is a file a secret reference names — a backend's `tokenRef` in the
/// registration (by its path, another name of it, or one not written yet), a client's
/// `clientSecretRef` in `--oauth-clients` — is refused naming `--audit` and what names
/// it, the file untouched and no secret shown: every call reads the secret anew, so
/// after the first call appended its record to the file every later one is auth-failed.
#[test]
fn an_audit_log_that_is_a_secret_file_is_refused() {
    const TOKEN: &str = "token-c2f7e94b";
    const CLIENT_SECRET: &str = "client-secret-5d18a0";
    let dir = tempfile::tempdir().expect("a temporary directory");
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("write the token");
    let unwritten = dir.path().join("later-token");
    let client_secret = dir.path().join("client-secret");
    std::fs::write(&client_secret, CLIENT_SECRET).expect("write the client secret");
    let bearer =
        |file: &Path| json!({"type": "bearer", "tokenRef": format!("file:{}", file.display())});
    let url = refused_url();
    let backends = [
        Http::new("com.example.policy", &url)
            .policy("fail-open")
            .authentication(bearer(&token)),
        Http::new("com.example.later", &url)
            .policy("fail-open")
            .authentication(bearer(&unwritten)),
    ];
    let reg = dir.path().join("registration.json");
    std::fs::write(&reg, registration_on(&backends, &["tool.before"]))
        .expect("write the registration");
    let clients = dir.path().join("clients.json");
    let client = json!([{"issuer": "https://as.example", "clientId": "c",
        "clientSecretRef": format!("file:{}", client_secret.display())}]);
    std::fs::write(&clients, client.to_string()).expect("write the clients");
    let linked = dir.path().join("linked-token");
    std::os::unix::fs::symlink(&token, &linked).expect("link the token");
    // The token not written yet, named another way: through `..`, through a linked directory.
    std::fs::create_dir(dir.path().join("sub")).expect("a subdirectory");
    let unwritten_dotted = dir.path().join("sub/../later-token");
    let linked_dir = dir.path().join("linked-dir");
    std::os::unix::fs::symlink(dir.path(), &linked_dir).expect("link the directory");
    let unwritten_linked = linked_dir.join("later-token");
    let given = |audit: &Path| {
        let args = [
            OsStr::new("--registration"),
            reg.as_os_str(),
            OsStr::new("--oauth-clients"),
            clients.as_os_str(),
            OsStr::new("--audit"),
            audit.as_os_str(),
        ];
        install("claude-code", &args)
    };
    let policy = "--registration's backend `com.example.policy` (tokenRef)";
    let later = "--registration's backend `com.example.later` (tokenRef)";
    for (audit, named_by) in [
        (&token, policy),
        (&linked, policy),
        (&unwritten, later),
        (&unwritten_dotted, later),
        (&unwritten_linked, later),
        (
            &client_secret,
            "--oauth-clients' client at https://as.example (clientSecretRef)",
        ),
    ] {
        let before = std::fs::read(audit).ok();
        let run = given(audit);
        run.assert_exit(1, &audit.display().to_string());
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        let said = format!("--audit {}: the file {named_by} names", audit.display());
        assert!(run.stderr.contains(&said), "{}", run.stderr);
        assert_eq!(std::fs::read(audit).ok(), before);
        for secret in [TOKEN, CLIENT_SECRET] {
            assert!(!run.stderr.contains(secret), "{}", run.stderr);
        }
    }
    snippet(&given(&dir.path().join("audit.jsonl")));
}

/// An audit log everybody can read or write is installed (its mode is its owner's
/// choice), with a warning naming `--audit` and the mode: its records hold what backends
/// changed, and the hooks' own log shows errors only. One only its owner can read or
/// write has none.
#[test]
fn an_audit_log_everybody_can_read_is_installed_with_a_warning() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = intercepting_tools(dir.path(), 1_000);
    let audit = dir.path().join("audit.jsonl");
    std::fs::write(&audit, "").expect("create the audit log");
    let args = [
        OsStr::new("--registration"),
        reg.as_os_str(),
        OsStr::new("--audit"),
        audit.as_os_str(),
    ];
    for (mode, warned) in [(0o644, true), (0o600, false)] {
        let permissions = std::fs::Permissions::from_mode(mode);
        std::fs::set_permissions(&audit, permissions).expect("chmod");
        let run = install("codex", &args);
        snippet(&run);
        let warning = format!(
            "warning: --audit {}: its mode, {mode:o}, lets everybody read",
            audit.display()
        );
        assert_eq!(run.stderr.contains(&warning), warned, "{}", run.stderr);
        assert_eq!(run.stderr.contains("--audit"), warned, "{}", run.stderr);
    }
}

/// Whether `gid` is this user's own private group, as `id` and `getent` tell it: the
/// user's primary group, named as the user, listing no members (never root's).
fn own_private_group(gid: u32) -> bool {
    let run = |program: &str, args: &[&str]| {
        let output = Command::new(program).args(args).output().expect("run");
        String::from_utf8(output.stdout)
            .expect("UTF-8")
            .trim_end()
            .to_string()
    };
    let (user, primary) = (run("id", &["-un"]), run("id", &["-g"]));
    let line = run("getent", &["group", &gid.to_string()]);
    let fields: Vec<&str> = line.split(':').collect();
    user != "root"
        && primary == gid.to_string()
        && fields.first() == Some(&user.as_str())
        && fields.get(3) == Some(&"")
}

/// Paths the shell would read — `$`, a backtick, quotes, a newline, a glob — reach the
/// hook as they are: the installed command, run by the harness's shell, reads the
/// registration there and appends its record to the audit log there, nothing expanded.
#[test]
fn awkward_paths_reach_the_hook_as_they_are() {
    let payloads = [
        (
            "claude-code",
            "PreToolUse",
            json!({"session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": "/repo",
                   "hook_event_name": "PreToolUse", "tool_name": "Bash",
                   "tool_input": {"command": "ls"}}),
        ),
        (
            "copilot",
            "preToolUse",
            json!({"sessionId": "s2", "timestamp": 1_796_083_199_000u64, "cwd": "/repo",
                   "toolName": "bash", "toolArgs": "{\"command\":\"ls\"}"}),
        ),
    ];
    for (harness, event, payload) in payloads {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let awkward = dir.path().join("a $HOME `echo x` \"q\" 'x'\nnl; *");
        std::fs::create_dir(&awkward).expect("a directory");
        let reg = intercepting_tools(&awkward, 1_000);
        let audit = awkward.join("audit $USER.jsonl");
        let args = [
            OsStr::new("--registration"),
            reg.as_os_str(),
            OsStr::new("--audit"),
            audit.as_os_str(),
        ];
        let (shell, line) = command(&snippet(&install(harness, &args)), event);
        let ran = run_hook(shell, &line, &payload.to_string());
        // The backend is refused and the subscription fails open: no objection.
        ran.assert_exit(0, &format!("{harness}: {line}"));
        assert_eq!(ran.stdout, "", "{harness}: {line}");
        let records = audit_records(&audit);
        assert_eq!(records.len(), 1, "{harness}: {line}");
        assert_eq!(records[0]["event"]["type"], "tool.before", "{harness}");
        assert_eq!(
            std::fs::read_dir(&awkward).expect("list").count(),
            2,
            "{harness}: only the registration and the log"
        );
    }
}

/// A file every hook call reads that another user could change — itself writable by
/// others, or in a directory others can write that is not sticky — is installed with a
/// warning naming its flag and what is at fault: whoever can change the registration
/// (or the component) decides every call. One only its owner can change has none.
#[test]
fn a_file_others_could_change_is_installed_with_a_warning() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).expect("a directory");
    let reg = intercepting_tools(&shared, 1_000);
    let args = [OsStr::new("--registration"), reg.as_os_str()];
    let chmod = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod")
    };
    let said = |at: &Path, why: &str| {
        format!("warning: --registration {}: {} {why}, on the way to it; another user could change what every hook call reads", reg.display(), at.display())
    };
    let open = "is writable by group or others (not sticky)";
    // Group write is another user's unless the group is this user's own private one
    // (named as the user, listing no members, as `useradd` makes with umask 002): given
    // to `nogroup` where this user may (root), else as it is.
    let _ = std::os::unix::fs::chown(&reg, None, Some(65_534));
    let group = std::os::unix::fs::MetadataExt::gid(&std::fs::metadata(&reg).expect("stat"));
    let by_group = (!own_private_group(group)).then(|| said(&reg, open));
    for (file_mode, dir_mode, warned) in [
        (0o664, 0o755, by_group),
        (0o666, 0o755, Some(said(&reg, open))),
        // Sticky means something for a directory only.
        (0o1666, 0o755, Some(said(&reg, open))),
        (0o644, 0o777, Some(said(&shared, open))),
        (0o644, 0o1777, None),
        (0o644, 0o755, None),
    ] {
        chmod(&reg, file_mode);
        chmod(&shared, dir_mode);
        let run = install("claude-code", &args);
        snippet(&run);
        match &warned {
            Some(warning) => assert!(run.stderr.contains(warning), "{warning}: {}", run.stderr),
            None => assert!(!run.stderr.contains("warning"), "{}", run.stderr),
        }
    }
}

/// A secret file (a `tokenRef`'s) that other users can read is installed with a warning
/// naming what names it, who can read it and its mode, never its contents: the secret is
/// theirs too. One only its owner reads has none, nor has one read by the user's own
/// private group.
#[test]
fn a_secret_file_others_can_read_is_installed_with_a_warning() {
    use std::os::unix::fs::PermissionsExt as _;
    const TOKEN: &str = "token-9b31e0d4";
    let dir = tempfile::tempdir().expect("a temporary directory");
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("write the token");
    let binding = json!({"type": "bearer", "tokenRef": format!("file:{}", token.display())});
    let backend = Http::new("com.example.policy", refused_url())
        .policy("fail-open")
        .authentication(binding);
    let reg = dir.path().join("registration.json");
    std::fs::write(&reg, registration_on(&[backend], &["tool.before"]))
        .expect("write the registration");
    let args = [OsStr::new("--registration"), reg.as_os_str()];
    let said = |by: &str, mode: &str| {
        format!(
            "warning: --registration's backend `com.example.policy` (tokenRef) {}: readable \
             by {by} (mode {mode}); the secret it holds is not this user's alone",
            token.display()
        )
    };
    // Given to `nogroup` where this user may (root), else its group as it is.
    let _ = std::os::unix::fs::chown(&token, None, Some(65_534));
    let group = std::os::unix::fs::MetadataExt::gid(&std::fs::metadata(&token).expect("stat"));
    let by_group = (!own_private_group(group)).then(|| said("its group", "640"));
    for (mode, warned) in [
        (0o600, None),
        (0o640, by_group),
        (0o644, Some(said("every user", "644"))),
        (0o604, Some(said("every user", "604"))),
    ] {
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let run = install("claude-code", &args);
        snippet(&run);
        match &warned {
            Some(warning) => assert!(run.stderr.contains(warning), "{warning}: {}", run.stderr),
            None => assert!(!run.stderr.contains("warning"), "{mode:o}: {}", run.stderr),
        }
        assert!(!run.stderr.contains(TOKEN), "{}", run.stderr);
    }
}

/// A path that is not UTF-8 cannot be written into a harness's settings (JSON text): it
/// is refused naming its flag, never written lossily as another file's name.
#[test]
fn a_path_that_is_not_utf8_is_refused_naming_its_flag() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = intercepting_tools(dir.path(), 1_000);
    let odd = dir.path().join(OsStr::from_bytes(b"odd-\xff.json"));
    std::fs::copy(&reg, &odd).expect("copy the registration");
    let cases = [
        ("--registration", [odd.as_os_str(), OsStr::new("--source")]),
        ("--audit", [reg.as_os_str(), OsStr::new("--audit")]),
    ];
    for (flag, [registration, then]) in cases {
        let mut args = vec![OsStr::new("--registration"), registration, then];
        args.push(match then.to_str() {
            Some("--audit") => odd.as_os_str(),
            _ => OsStr::new("urn:example:harness"),
        });
        let run = install("gemini", &args);
        run.assert_exit(1, flag);
        assert!(run.stdout.is_empty(), "{flag}: {}", run.stdout);
        assert!(
            run.stderr.contains(flag) && run.stderr.contains("not UTF-8"),
            "{flag}: {}",
            run.stderr
        );
    }
}

/// Without `--budget-ms` the budget covers the registration's chain of intercept
/// deadlines at an event (here one of 20 s) and a margin, rather than the 10 s default
/// that would end a fail-open subscription still inside its deadline with a denial; the
/// harness's timeout follows. A shorter `--budget-ms` is kept, with a warning naming
/// the event and both figures.
#[test]
fn the_budget_covers_the_registrations_own_chain() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = intercepting_tools(dir.path(), 20_000);
    let args = [OsStr::new("--registration"), reg.as_os_str()];
    let run = install("claude-code", &args);
    let snippet_of = snippet(&run);
    let hook = &snippet_of["hooks"]["PreToolUse"][0]["hooks"][0];
    let line = hook["command"].as_str().expect("a command");
    assert!(line.contains(" --budget-ms 22000 "), "{line}");
    assert_eq!(hook["timeout"], 27);
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);

    let given = [&args[..], &[OsStr::new("--budget-ms"), OsStr::new("15000")]].concat();
    let run = install("claude-code", &given);
    let (_, line) = command(&snippet(&run), "PreToolUse");
    assert!(line.contains(" --budget-ms 15000 "), "{line}");
    for said in ["warning", "tool.before", "15000 ms", "20000 ms"] {
        assert!(run.stderr.contains(said), "{said}: {}", run.stderr);
    }

    // Interceptors run one after another, so their deadlines add up (20 s + 5 s); of a
    // wildcard's, only those at events Claude Code lets a hook decide count (as the
    // component counts them): never a session's end or a compaction, where nothing is
    // denied.
    let url = refused_url();
    let both = [
        Http::new("com.example.a", &url).timeout_ms(20_000),
        Http::new("com.example.b", &url).timeout_ms(5_000),
    ];
    let two = dir.path().join("two.json");
    std::fs::write(&two, registration_on(&both, &["*"])).expect("write the registration");
    let args = [OsStr::new("--registration"), two.as_os_str()];
    let run = install("claude-code", &args);
    let (_, line) = command(&snippet(&run), "PreToolUse");
    assert!(line.contains(" --budget-ms 27000 "), "{line}");
    let given = [&args[..], &[OsStr::new("--budget-ms"), OsStr::new("15000")]].concat();
    let run = install("claude-code", &given);
    let at = run
        .stderr
        .split_once("subscriptions at ")
        .and_then(|(_, rest)| rest.split_once(' '))
        .map(|(event, _)| event);
    let decided = ["session.start", "tool.after", "tool.before", "turn.start"];
    assert!(at.is_some_and(|at| decided.contains(&at)), "{}", run.stderr);
    assert!(run.stderr.contains("25000 ms"), "{}", run.stderr);
}

/// `hook install copilot` writes a `postToolUseFailure` hook (after a failed tool call,
/// Copilot CLI 1.0.15 on) wherever it writes `postToolUse`: the same command but for its
/// event, the same timeout, unguarded alike (both only observed).
#[test]
fn copilot_s_hook_after_a_failed_call_is_written_as_after_a_tool() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let reg = intercepting_tools(dir.path(), 1_000);
    let run = install("copilot", &[OsStr::new("--registration"), reg.as_os_str()]);
    let snippet = snippet(&run);
    let (after, failure) = (
        &snippet["hooks"]["postToolUse"][0],
        &snippet["hooks"]["postToolUseFailure"][0],
    );
    for key in ["type", "timeoutSec"] {
        assert_eq!(failure[key], after[key], "{key}: {snippet}");
    }
    let (_, after) = command(&snippet, "postToolUse");
    let (shell, failure) = command(&snippet, "postToolUseFailure");
    assert_eq!(shell, "bash");
    assert!(after.ends_with(" --event postToolUse"), "{after}");
    assert_eq!(failure, format!("{after}Failure"), "{snippet}");
}
