//! `ahp hook install HARNESS`: the harness's settings snippet that puts `ahp hook` in
//! front of its hook events.
//!
//! Every hook's command carries the options `ahp hook` was given for the host (the
//! component, trust roots, `--stdio-env`, …), each word quoted for the POSIX shell the
//! harness runs it with. Paths are absolute (the harness runs hooks from wherever the
//! session is) but not resolved through symbolic links, so a link repointed at an
//! upgrade or a configuration change is followed anew at every call; and the snippet
//! names files, never their contents: no secret ever lands in a harness's settings. The
//! harness's timeout is the hook's budget plus headroom for process start, so the budget
//! settles the call and the harness's own timeout never fires first; the budget covers
//! the registration's own chain of intercept deadlines at every event.
//!
//! Where a hook decides, a harness reads a hook that cannot start, crashes or exits with
//! an unexpected code as a failed hook and runs the tool: there the command is wrapped
//! so that each of those is the harness's block ([`guard`]).

use super::{AhpEvent, Answer, EventSpec, Harness, SessionField, Verdict, DEFAULT_BUDGET_MS};
use ahp_vocab::EventPattern;
use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Headroom between the hook's budget and the harness's timeout: process start, the
/// watchdog's grace, writing the answer.
const HEADROOM_MS: u64 = 5_000;

// The harness must not kill the hook before the watchdog answers past the budget (once
// a settlement's record being written is done, or waited for twice: by the answer's
// wait for the settlement, then by the failure's own record), nor before a process that
// failed before reading its payload has waited for it.
const _: () = assert!(
    HEADROOM_MS as u128 > super::WATCHDOG_GRACE.as_millis() + 2 * super::WRITE_GRACE.as_millis()
);
const _: () = assert!(HEADROOM_MS as u128 > super::UNREAD_PAYLOAD_WAIT.as_millis());

/// What a budget sized from the registration's chain leaves beyond its deadlines: the
/// process's start, loading the component, the observers the call owns.
const CHAIN_MARGIN_MS: u64 = 2_000;

/// What `ahp hook install` is asked for.
pub struct Install {
    /// Whose settings.
    pub harness: Harness,
    /// The registration file (must exist).
    pub registration: PathBuf,
    /// An audit log file for every call.
    pub audit: Option<PathBuf>,
    /// The hook's budget; `None` for the default (or the registration's chain).
    pub budget_ms: Option<u64>,
    /// The events' `source` URI; `None` for the default.
    pub source: Option<String>,
    /// The `session` fields left out of every event.
    pub omit_session: Vec<SessionField>,
    /// More options of `ahp hook` (the host's), as command-line words, in order, each a
    /// flag followed by its value, paths already absolute.
    pub host_arguments: Vec<String>,
    /// The registration's longest chain of intercept deadlines at one event the harness
    /// intercepts, as the component counts it once it loaded the registration with the
    /// harness's declaration; `None` when it has none, or could not be loaded.
    pub chain: Option<Chain>,
    /// The files the registration's and `--oauth-clients`' secret references name
    /// (`file:`), each after what names it, as the refusal of an `--audit` says it: a
    /// call that needs the secret reads it anew. Empty when the registration could not
    /// be loaded (a component a registry could not give now).
    pub secret_files: Vec<(String, String)>,
}

/// What `ahp hook install` prints.
#[derive(Debug)]
pub struct Installed {
    /// The snippet, as the JSON the harness's settings file takes (stdout).
    pub snippet: Value,
    /// What the user should know of it (stderr).
    pub warnings: Vec<String>,
}

/// What one harness's snippet is built from.
pub struct Snippet {
    harness: Harness,
    program: String,
    arguments: Vec<String>,
    /// The harness's timeout for the hook.
    pub timeout_ms: u64,
    /// What the registration's subscriptions select.
    selected: Selected,
}

impl Snippet {
    /// The hook's command line at `spec`'s event, [`guard`]ed where it [fails
    /// closed](Self::fails_closed). It names the event for every harness,
    /// not only those whose payload names none (Copilot): a payload that cannot be read
    /// is then answered at its event (at an observed one, or before a stop, not with a
    /// block).
    pub fn command(&self, spec: &EventSpec) -> String {
        let mut words = vec![self.program.clone()];
        words.extend(self.arguments.iter().cloned());
        words.extend(["--event".to_string(), spec.native.to_string()]);
        let line = words
            .iter()
            .map(|word| shell_quote(word))
            .collect::<Vec<_>>()
            .join(" ");
        match self.guarded(spec) {
            true => guard(&line, &failed_answer(self.harness, spec)),
            false => line,
        }
    }

    /// Whether `spec`'s command is [`guard`]ed: at every event the harness intercepts,
    /// where a hook that fails must still answer as the adapter does after a failure.
    /// Before a stop too, where the harness gets no fail-closed flag
    /// ([`Snippet::fails_closed`]): a binary gone at an upgrade would otherwise be a
    /// failed hook, which Gemini reads as a deny there (exit 127 with the shell's "not
    /// found" on stderr) and answers by prompting the agent again, up to 100 times, the
    /// shell's words its instruction. Guarded, it is the adapter's own answer to a
    /// failure there: the agent stops.
    pub fn guarded(&self, spec: &EventSpec) -> bool {
        spec.capability().is_some()
    }

    /// Whether `spec`'s hook belongs in the snippet: every one, but an on-demand one only
    /// when the registration selects its event.
    pub fn installs(&self, spec: &EventSpec) -> bool {
        !spec.on_demand || self.selected.selects(spec)
    }

    /// Whether `spec`'s hook gets the harness's fail-closed flag (Claude Code's
    /// `onFailure: "block"`, Cursor's `failClosed`): at every event the harness
    /// intercepts, whatever the registration intercepts today, as `ahp hook` reads the
    /// registration anew at every call (through its links: an edit or a repointed link
    /// takes effect at once). At an event the harness only observes nothing is decided,
    /// so a hook that fails there (a binary that is gone) must not block it; and never
    /// before a stop, where a block keeps the agent working. Its command is [`guard`]ed
    /// too ([`Snippet::guarded`]): at a tool, a prompt or a model request, where every
    /// harness reads exit 2 as its block, and at a session start or before a compaction,
    /// where the adapter's own failure stops the agent (`continue: false`) and a crash
    /// would otherwise be a failed hook the harness goes on after (Codex then runs the
    /// compaction).
    pub fn fails_closed(&self, spec: &EventSpec) -> bool {
        spec.capability().is_some() && spec.ahp != AhpEvent::TurnFinishBefore
    }

    /// The timeout in whole seconds, rounded up.
    pub fn timeout_secs(&self) -> u64 {
        self.timeout_ms.div_ceil(1_000)
    }

    /// The snippet for the harness's settings file.
    fn settings(&self) -> Value {
        match self.harness {
            Harness::ClaudeCode => super::claude_code::snippet(self),
            Harness::Codex => super::codex::snippet(self),
            Harness::Gemini => super::gemini::snippet(self),
            Harness::Cursor => super::cursor::snippet(self),
            Harness::Copilot => super::copilot::snippet(self),
        }
    }
}

/// What a guarded command at `spec` answers when `ahp` is missing or fails: the
/// harness's block with the generic reason of every failure the adapter answers itself
/// — exit 2 with the reason on stderr; for Copilot its denial's JSON on exit 0 (see
/// `copilot`); where no block holds (a session start, a compaction, after a failed
/// call: [`EventSpec::stops_on_denial`]) and before a stop, where a block keeps the agent
/// working, the adapter's own answer to a failure there, the agent stopped.
fn failed_answer(harness: Harness, spec: &EventSpec) -> Answer {
    match harness {
        _ if spec.stops_on_denial() || spec.ahp == AhpEvent::TurnFinishBefore => {
            harness.answer(spec, &Verdict::failed())
        }
        Harness::Copilot => super::copilot::tool_answer(&Verdict::failed()),
        _ => Answer::blocked(super::generic_reason()),
    }
}

/// `line` (the hook's words) run so that no way `ahp` can fail is the harness's failed
/// hook, which it reads as no objection: a binary that is missing (gone at an upgrade, a
/// link repointed; the shell would exit 127) or that ends in anything but an answer — a
/// crash (abort, SIGSEGV, the OOM killer), an exit code other than 0 and 2 — answers
/// `failed` (the harness's block, a shell function). POSIX sh: the words become the
/// positional parameters and the binary is checked before it runs (the shell's own "not
/// found" names the path, and stderr goes to the model on exit 2). `ahp` runs as the
/// shell's child on the shell's stdin (given as fd 3 around the command: a background
/// command's stdin is otherwise /dev/null; a stdin that is closed starts nothing and is
/// the block, after the shell's "Bad file descriptor" on stderr). A signal the harness
/// sends the hook's process (a cancel, its timeout) is passed on to it as SIGTERM — one
/// that came before `ahp` started, once it has — so that it settles the call as
/// interrupted and answers, and the shell waits again until it has. Its exit code 0 or 2 and its output are the harness's as they are; the
/// shell's own report of a crash ("Segmentation fault") is not written to the stderr a
/// harness shows the model. The shell's own names start with `ahp_`: a variable the
/// harness exports under the same name would be changed for `ahp` and its backends.
///
/// What sh cannot do: pass on a signal that was ignored when the shell started (SIGINT
/// or SIGQUIT to a harness run in the background, SIGHUP under nohup: no trap takes
/// it; SIGTERM, which harnesses send at their timeout, is not ignored so), nor one that
/// lands between the fork and `ahp`'s start, or when `ahp` exits at that moment (bash
/// then loses its exit code: the block, after what `ahp` wrote — at Copilot a second
/// JSON document). A SIGKILL to the shell alone leaves `ahp` to finish within its budget.
fn guard(line: &str, failed: &Answer) -> String {
    let stdout = failed.stdout.lines().map(|l| (l, ""));
    let stderr = failed.stderr.iter().map(|l| (l.as_str(), " >&2"));
    let said: String = stdout
        .chain(stderr)
        .map(|(text, to)| format!("printf '%s\\n' {}{to}; ", shell_quote(text)))
        .collect();
    let exit = failed.exit;
    format!(
        "ahp_failed() {{ {said}exit {exit}; }}; \
         set -- {line}; [ -x \"$1\" ] || ahp_failed; \
         ahp_pid=; ahp_signal=; \
         trap 'ahp_signal=1; kill -TERM $ahp_pid 2>/dev/null' INT TERM HUP QUIT; \
         {{ \"$@\" <&3 3<&- & ahp_pid=$!; }} 3<&0; [ -n \"$ahp_pid\" ] || ahp_failed; \
         [ -z \"$ahp_signal\" ] || kill -TERM $ahp_pid 2>/dev/null; \
         while ahp_signal=; wait $ahp_pid 2>/dev/null; ahp_status=$?; [ -n \"$ahp_signal\" ]; do :; done; \
         case $ahp_status in 0|2) exit $ahp_status;; esac; ahp_failed"
    )
}

/// The snippet for `request`, with the warnings to show beside it.
pub fn install(request: &Install) -> Result<Installed, String> {
    let program = utf8("the ahp binary", invoked_program()?)?;
    let text = crate::cli::read_file("--registration", &request.registration)?;
    let registration = absolute("--registration", &request.registration, true)?;
    let read = read_files(
        &registration,
        &request.host_arguments,
        &request.secret_files,
    );
    let chain = request.chain.as_ref();
    let budget_ms = request.budget_ms.unwrap_or_else(|| sized_to(chain));
    let mut arguments = vec![
        "hook".to_string(),
        request.harness.name().to_string(),
        "--registration".to_string(),
        registration.clone(),
        "--budget-ms".to_string(),
        budget_ms.to_string(),
    ];
    let mut warnings = changeable_by_others(&read);
    warnings.extend(readable_by_others(&request.secret_files));
    if let Some(audit) = &request.audit {
        let (path, warning) = audit_file(audit, &read)?;
        arguments.extend(["--audit".to_string(), path]);
        warnings.extend(warning);
    }
    if let Some(source) = &request.source {
        arguments.extend(["--source".to_string(), source.clone()]);
    }
    if !request.omit_session.is_empty() {
        let names: Vec<&str> = request.omit_session.iter().map(|f| f.name()).collect();
        arguments.extend(["--omit-session".to_string(), names.join(",")]);
    }
    arguments.extend(request.host_arguments.iter().cloned());
    let snippet = Snippet {
        harness: request.harness,
        program,
        arguments,
        timeout_ms: budget_ms + HEADROOM_MS,
        selected: Selected::read(&text),
    };
    warnings.extend(chain.and_then(|chain| short_budget(budget_ms, chain)));
    if request.harness == Harness::Codex {
        warnings.extend(login_shell().and_then(|shell| powershell_warning(&shell)));
    }
    Ok(Installed {
        snippet: snippet.settings(),
        warnings,
    })
}

/// The `ahp` binary as the user invoked it: `argv[0]` made absolute when it names a path,
/// else the first executable of that name on PATH, else the running binary. Not
/// `current_exe`, which resolves symbolic links: `~/.cargo/bin/ahp` or a Homebrew, nix
/// or mise link would become a versioned path that is gone after an upgrade, and a hook
/// whose binary is gone fails open where it is not [`guard`]ed.
fn invoked_program() -> Result<PathBuf, String> {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let invoked = match argv0.as_encoded_bytes().contains(&b'/') {
        // Only a file there: a process started under another name (`exec -a`) would
        // write hooks naming a binary that does not exist.
        true => std::path::absolute(&argv0)
            .ok()
            .filter(|path| executable(path)),
        false => on_path(&argv0),
    };
    match invoked {
        Some(path) => Ok(path),
        None => std::env::current_exe().map_err(|e| format!("locate the ahp binary: {e}")),
    }
}

/// The first executable file named `name` in PATH's directories, made absolute.
fn on_path(name: &OsStr) -> Option<PathBuf> {
    if name.is_empty() {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| executable(candidate))
        .and_then(|found| std::path::absolute(found).ok())
}

/// Whether `path` is a file some user may execute.
#[cfg(unix)]
fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn executable(path: &Path) -> bool {
    path.is_file()
}

/// The budget when `--budget-ms` is not given: the default, or where the registration's
/// longest chain of intercept deadlines at one event (`chain`) needs more, that chain and
/// [`CHAIN_MARGIN_MS`] (at most the largest budget). A shorter budget would turn a
/// fail-open subscription still inside its own deadline into the budget's denial.
fn sized_to(chain: Option<&Chain>) -> u64 {
    let needed = chain.map_or(0, |chain| chain.timeout_ms.saturating_add(CHAIN_MARGIN_MS));
    needed.clamp(DEFAULT_BUDGET_MS, crate::cli::MAX_BUDGET_MS)
}

/// The warning for a login shell (`shell`) that is PowerShell, for Codex, which runs a
/// hook's command through the user's own shell (by its source: the passwd entry's) rather
/// than `sh`: PowerShell cannot run the POSIX command line the snippet holds, so the
/// hook would fail at every call, and Codex reads a failed hook as no objection.
fn powershell_warning(shell: &str) -> Option<String> {
    let name = Path::new(shell)
        .file_name()?
        .to_string_lossy()
        .to_lowercase();
    let powershell = name.starts_with("pwsh") || name.starts_with("powershell");
    powershell.then(|| {
        format!(
            "warning: your login shell is {shell}; Codex runs a hook's command through it, \
             and PowerShell cannot run this POSIX command line: the hook would fail at \
             every call, and Codex would run every tool unchecked. Give the user Codex runs \
             as a POSIX login shell (sh, bash, zsh)"
        )
    })
}

/// This user's login shell, from the passwd database.
#[cfg(unix)]
fn login_shell() -> Option<String> {
    let mut entry = std::mem::MaybeUninit::<libc::passwd>::uninit();
    let mut found = std::ptr::null_mut();
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: getpwuid_r writes the entry into `entry` and its strings into `buffer`,
    // both ours and as large as passed; `found` is set to `entry` or null.
    let status = unsafe {
        libc::getpwuid_r(
            libc::geteuid(),
            entry.as_mut_ptr(),
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    if status != 0 || found.is_null() {
        return None;
    }
    // SAFETY: `found` is non-null, so getpwuid_r filled `entry`, whose `pw_shell` is null
    // or a NUL-terminated string inside `buffer`, which lives until the copy below.
    let shell = unsafe { entry.assume_init().pw_shell };
    if shell.is_null() {
        return None;
    }
    // SAFETY: as above.
    let shell = unsafe { std::ffi::CStr::from_ptr(shell) };
    shell.to_str().ok().map(str::to_owned)
}

#[cfg(not(unix))]
fn login_shell() -> Option<String> {
    None
}

/// The warning for a budget shorter than `chain` and its margin. Not refused: a budget
/// shorter than the worst case may be deliberate (a cap on how long the agent waits).
fn short_budget(budget_ms: u64, chain: &Chain) -> Option<String> {
    (budget_ms < chain.timeout_ms.saturating_add(CHAIN_MARGIN_MS)).then(|| {
        format!(
            "warning: the hook's budget, {budget_ms} ms, is shorter than the registration's \
             intercept subscriptions at {} may take: {} ms of timeoutMs, and {CHAIN_MARGIN_MS} \
             ms for start-up and observers; a call that runs that long is denied when the \
             budget ends, whatever the subscriptions' failure policy",
            chain.event, chain.timeout_ms
        )
    })
}

/// `--audit` made absolute, and opened for appending as every hook call opens it
/// ([`crate::cli::open_audit`]): a log that cannot be opened would deny every call, so it
/// is refused here instead, as is one that is a file the calls read (`read`, after what
/// names it): the first call would append its record to it, and every later one be
/// denied (a secret file then holds no secret). With the warning to show beside the
/// snippet, if any.
fn audit_file(path: &Path, read: &[(&str, &str)]) -> Result<(String, Option<String>), String> {
    let absolute = absolute("--audit", path, false)?;
    let audit = Path::new(&absolute);
    if let Some(flag) = read_as(audit, read) {
        return Err(format!(
            "--audit {absolute}: the file {flag} names; every hook call would append its \
             record to it"
        ));
    }
    let warning = crate::cli::open_audit(audit)?;
    Ok((absolute, warning))
}

/// What names the first of the files `read` (each after what names it) that is the audit
/// log `audit`, if any: a record appended to it would change what the calls read.
pub(crate) fn read_as<'a>(audit: &Path, read: &[(&'a str, &str)]) -> Option<&'a str> {
    read.iter()
        .find(|(_, file)| same_file(audit, Path::new(file)))
        .map(|(named_by, _)| *named_by)
}

/// The files each hook call reads, with what names them: the registration, those the
/// host's options among `host_arguments` name (flags, each followed by its value), and
/// the `secret_files`.
fn read_files<'a>(
    registration: &'a str,
    host_arguments: &'a [String],
    secret_files: &'a [(String, String)],
) -> Vec<(&'a str, &'a str)> {
    const FILE_OPTIONS: [&str; 3] = ["--component", "--trust-roots", "--oauth-clients"];
    let host = host_arguments
        .chunks_exact(2)
        .filter_map(|option| match option {
            [flag, file] if FILE_OPTIONS.contains(&flag.as_str()) => Some((&**flag, &**file)),
            _ => None,
        });
    let secrets = secret_files
        .iter()
        .map(|(named_by, file)| (named_by.as_str(), file.as_str()));
    std::iter::once(("--registration", registration))
        .chain(host)
        .chain(secrets)
        .collect()
}

/// A warning for each file every hook call reads (`read`, after what names it) that
/// another user could change, itself or the way to it
/// ([`crate::compile_cache::trusted_way`]): the component, the registration or the trust
/// roots would then decide for them. Not refused: a shared setup may be deliberate, and
/// a file not there yet (a secret still to be written) is not judged.
#[cfg(unix)]
fn changeable_by_others(read: &[(&str, &str)]) -> Vec<String> {
    let files = read.iter().filter(|(_, file)| !file.starts_with("oci://"));
    files
        .filter_map(|(named_by, file)| {
            match crate::compile_cache::trusted_way(Path::new(file), "it") {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Some(format!(
                    "warning: {named_by} {file}: {e}; another user could change what every \
                     hook call reads"
                )),
                _ => None,
            }
        })
        .collect()
}

#[cfg(not(unix))]
fn changeable_by_others(_read: &[(&str, &str)]) -> Vec<String> {
    Vec::new()
}

/// A warning for each secret file (`secret_files`, after what names it) that another
/// user can read: the secret in it is theirs too. Read by the group only where that is
/// the user's own private group ([`crate::compile_cache::own_private_group`]) is the
/// user's alone. Not refused, as a shared setup may be deliberate; a file not there yet
/// is not judged.
#[cfg(unix)]
fn readable_by_others(secret_files: &[(String, String)]) -> Vec<String> {
    use std::os::unix::fs::MetadataExt as _;
    let warning = |(named_by, file): &(String, String)| {
        let meta = std::fs::metadata(file).ok()?;
        let mode = meta.mode();
        let by = if mode & 0o004 != 0 {
            "every user"
        } else if mode & 0o040 != 0 && !crate::compile_cache::own_private_group(meta.gid()) {
            "its group"
        } else {
            return None;
        };
        Some(format!(
            "warning: {named_by} {file}: readable by {by} (mode {:o}); the secret it holds \
             is not this user's alone",
            mode & 0o777
        ))
    };
    secret_files.iter().filter_map(warning).collect()
}

#[cfg(not(unix))]
fn readable_by_others(_secret_files: &[(String, String)]) -> Vec<String> {
    Vec::new()
}

/// Whether `a` and `b` are one file, whatever names they are given (a link, a path with
/// `..`). Where one does not exist (yet), whether they name one place (see [`place`]):
/// whatever creates it there makes it both.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        #[cfg(unix)]
        (Ok(ma), Ok(mb)) => {
            use std::os::unix::fs::MetadataExt as _;
            (ma.dev(), ma.ino()) == (mb.dev(), mb.ino())
        }
        _ => place(a) == place(b),
    }
}

/// Where `path` is, links and `..` resolved: its own canonical path, or, for a file not
/// there yet, its directory's and its name; as given where neither can be resolved.
fn place(path: &Path) -> std::path::PathBuf {
    if let Ok(canonical) = std::fs::canonicalize(path) {
        return canonical;
    }
    match (path.parent().map(std::fs::canonicalize), path.file_name()) {
        (Some(Ok(directory)), Some(name)) => directory.join(name),
        _ => path.to_path_buf(),
    }
}

/// The longest chain of intercept deadlines at one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// The AHP event.
    pub event: String,
    /// The sum of the `timeoutMs` of the intercept subscriptions selecting it.
    pub timeout_ms: u64,
}

/// Every entry of every subscription's `events` in a registration, read leniently: text
/// that is no registration selects nothing (the component, which checks it, names its
/// problems).
#[derive(Debug, Default)]
pub(crate) struct Selected(Vec<EventPattern>);

impl Selected {
    pub(crate) fn read(text: &str) -> Selected {
        let registration: Value = serde_json::from_str(text).unwrap_or_default();
        let hooks = registration["hooks"].as_array().into_iter().flatten();
        let subscriptions =
            hooks.flat_map(|hook| hook["subscriptions"].as_array().into_iter().flatten());
        let events = subscriptions.flat_map(|s| s["events"].as_array().into_iter().flatten());
        Selected(
            events
                .filter_map(Value::as_str)
                .map(EventPattern::read)
                .collect(),
        )
    }

    /// Whether a subscription selects `spec`'s event, in any mode: an observer of it
    /// needs the hook as an interceptor does.
    pub(crate) fn selects(&self, spec: &EventSpec) -> bool {
        self.0.iter().any(|p| p.matches(spec.ahp.as_str()))
    }
}

/// `path` made absolute for `flag`, not resolved through symbolic links: a configuration
/// updated by repointing a link (a Kubernetes ConfigMap's `..data`, stow, a `current`
/// link) is then read anew by every call. An `existing` one must exist. Refused when not
/// UTF-8: the command would name another file.
pub(crate) fn absolute(flag: &str, path: &Path, existing: bool) -> Result<String, String> {
    let what = || format!("{flag} {}", path.display());
    let absolute = std::path::absolute(path).map_err(|e| format!("{}: {e}", what()))?;
    if existing {
        std::fs::metadata(&absolute).map_err(|e| format!("{}: {e}", what()))?;
    }
    utf8(flag, absolute)
}

/// `path` as text, or an error naming `what` (a flag): a command line written lossily
/// would name another file.
fn utf8(what: &str, path: PathBuf) -> Result<String, String> {
    path.into_os_string().into_string().map_err(|path| {
        format!(
            "{what} {}: not UTF-8, which a harness's settings file cannot hold",
            Path::new(&path).display()
        )
    })
}

/// `word` as one POSIX shell word: as is when it is plainly safe, else single-quoted.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-=:,+@".contains(c));
    match plain {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A registration of one hook with `subscriptions`: (events, mode, timeoutMs).
    fn registration(subscriptions: &[(&[&str], &str, u64)]) -> String {
        let subscriptions: Vec<Value> = subscriptions
            .iter()
            .map(|(events, mode, timeout_ms)| {
                json!({"events": events, "mode": mode, "timeoutMs": timeout_ms})
            })
            .collect();
        json!({"hooks": [{"subscriptions": subscriptions}]}).to_string()
    }

    /// `harness`'s snippet of `ahp` with no arguments, a 15 s timeout, for a registration
    /// of `subscriptions`.
    fn snippet_for(harness: Harness, subscriptions: &[(&[&str], &str, u64)]) -> Snippet {
        Snippet {
            harness,
            program: "ahp".into(),
            arguments: Vec::new(),
            timeout_ms: 15_000,
            selected: Selected::read(&registration(subscriptions)),
        }
    }

    /// The hooks `harness`'s snippet writes for a registration of `subscriptions`.
    fn hooks_written(harness: Harness, subscriptions: &[(&[&str], &str, u64)]) -> Value {
        snippet_for(harness, subscriptions).settings()["hooks"].clone()
    }

    /// The hooks written for a registration that intercepts every event.
    fn hooks_intercepting_all(harness: Harness) -> Value {
        hooks_written(harness, &[(&["*"], "intercept", 1_000)])
    }

    /// The hooks Gemini's snippet writes for a registration observing `selected`.
    fn gemini_hooks(selected: &[&str]) -> Value {
        hooks_written(Harness::Gemini, &[(selected, "observe", 0)])
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_quote("/usr/bin/ahp"), "/usr/bin/ahp");
        assert_eq!(shell_quote("/my dir/it's"), r"'/my dir/it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn the_timeout_rounds_up() {
        let snippet = Snippet {
            timeout_ms: 10_001,
            ..snippet_for(Harness::Copilot, &[])
        };
        assert_eq!(snippet.timeout_secs(), 11);
    }

    /// `install` itself: at the default budget the harness's timeout is that budget and
    /// [`HEADROOM_MS`], in the harness's unit.
    #[test]
    fn install_gives_the_default_budget_and_its_headroom() {
        let file = tempfile::NamedTempFile::new().expect("a temporary file");
        let text = registration(&[(&["tool.before"], "intercept", 1_000)]);
        std::fs::write(file.path(), text).expect("write the registration");
        let install = |harness| {
            let request = Install {
                harness,
                registration: file.path().to_path_buf(),
                audit: None,
                budget_ms: None,
                source: None,
                omit_session: Vec::new(),
                host_arguments: Vec::new(),
                chain: None,
                secret_files: Vec::new(),
            };
            super::install(&request).expect("installed").snippet["hooks"].clone()
        };
        let gemini = install(Harness::Gemini);
        let timeout = &gemini["BeforeTool"][0]["hooks"][0]["timeout"];
        assert_eq!(timeout, &json!(DEFAULT_BUDGET_MS + HEADROOM_MS));
        let claude = install(Harness::ClaudeCode);
        let hook = &claude["PreToolUse"][0]["hooks"][0];
        assert_eq!(
            hook["timeout"],
            json!((DEFAULT_BUDGET_MS + HEADROOM_MS) / 1_000)
        );
        let command = hook["command"].as_str().expect("a command");
        assert!(command.contains(" --budget-ms 10000 "), "{command}");
    }

    /// This user's login shell is read from the passwd database, as `getent` reads it.
    #[cfg(unix)]
    #[test]
    fn the_login_shell_is_the_passwd_entry_s() {
        // SAFETY: geteuid takes no arguments and cannot fail.
        let uid = unsafe { libc::geteuid() };
        let getent = std::process::Command::new("getent")
            .args(["passwd", &uid.to_string()])
            .output()
            .expect("getent (Debian's libc-bin)");
        let entry = String::from_utf8_lossy(&getent.stdout);
        let shell = entry
            .trim_end()
            .rsplit(':')
            .next()
            .filter(|s| !s.is_empty());
        assert_eq!(login_shell().as_deref(), shell, "{entry}");
    }

    /// A PowerShell login shell, whatever its path or version, is warned about for Codex
    /// (which runs a hook's command through it); a POSIX shell is not.
    #[test]
    fn a_powershell_login_shell_is_warned_about() {
        for shell in [
            "/usr/bin/pwsh",
            "/opt/microsoft/powershell/7/pwsh-preview",
            "/usr/local/bin/PowerShell",
        ] {
            let warning = powershell_warning(shell).unwrap_or_else(|| panic!("{shell}"));
            assert!(
                warning.contains(shell) && warning.contains("Codex"),
                "{warning}"
            );
        }
        for shell in [
            "/bin/sh",
            "/bin/bash",
            "/usr/bin/zsh",
            "/usr/bin/fish",
            "/bin/dash",
            "",
        ] {
            assert_eq!(powershell_warning(shell), None, "{shell}");
        }
    }

    /// Without `--budget-ms` the budget covers the registration's longest chain of
    /// intercept deadlines at one event (the component's count), and a margin, when that
    /// is longer than the default (at most the largest budget); a budget given shorter is
    /// kept, with a warning naming the event and both figures.
    #[test]
    fn the_budget_covers_the_registrations_own_chain() {
        let chain = |timeout_ms| Chain {
            event: "turn.start".to_owned(),
            timeout_ms,
        };
        assert_eq!(sized_to(Some(&chain(30_000))), 30_000 + CHAIN_MARGIN_MS);
        assert_eq!(sized_to(Some(&chain(3_000))), DEFAULT_BUDGET_MS);
        assert_eq!(sized_to(None), DEFAULT_BUDGET_MS);
        assert_eq!(
            sized_to(Some(&chain(u64::MAX / 2))),
            crate::cli::MAX_BUDGET_MS
        );
        let warning = short_budget(15_000, &chain(30_000)).expect("a warning");
        for said in ["turn.start", "15000 ms", "30000 ms"] {
            assert!(warning.contains(said), "{said}: {warning}");
        }
        assert_eq!(short_budget(32_000, &chain(30_000)), None);
        // A chain as long as a timeout can say (a saturated sum): the largest budget, and
        // still too short, never an overflow.
        assert_eq!(sized_to(Some(&chain(u64::MAX))), crate::cli::MAX_BUDGET_MS);
        assert!(short_budget(crate::cli::MAX_BUDGET_MS, &chain(u64::MAX)).is_some());
    }

    /// Claude Code blocks where a hook fails at an event it lets a hook decide, whatever
    /// the registration intercepts at install (`ahp hook` reads it anew at every call, so
    /// one that only observes today may intercept tomorrow), but not at `Stop` or
    /// `SubagentStop`, where blocking would keep the agent working, nor at an event only
    /// observed, where a missing binary would block it for nothing.
    #[test]
    fn claude_code_blocks_on_failure_only_where_it_intercepts_but_a_stop() {
        for subscriptions in [
            &[(&["*"][..], "intercept", 1_000)][..],
            &[(&["*"][..], "observe", 0)],
        ] {
            let hooks = hooks_written(Harness::ClaudeCode, subscriptions);
            let on_failure = |event: &str| hooks[event][0]["hooks"][0]["onFailure"].clone();
            for event in [
                "PreToolUse",
                "PostToolUse",
                "PostToolUseFailure",
                "UserPromptSubmit",
                "SessionStart",
            ] {
                assert_eq!(on_failure(event), "block", "{event}: {hooks}");
            }
            for event in ["Stop", "SubagentStop", "SessionEnd", "PreCompact"] {
                assert!(on_failure(event).is_null(), "{event}: {hooks}");
                assert_eq!(hooks[event][0]["hooks"][0]["type"], "command", "{event}");
            }
        }
    }

    /// Where the harness lets a hook decide, at a tool, a prompt, a model request, a
    /// session start or a compaction, the command is guarded, whatever the registration
    /// intercepts at install; at a stop and where the harness only observes it is the
    /// plain command line.
    #[test]
    fn commands_are_guarded_where_a_hook_decides() {
        // Claude Code, Codex and Gemini nest the hook in a matcher group; Copilot's
        // command is its `bash` entry.
        let guarded = |hooks: &Value, event: &str| {
            let entry = &hooks[event][0];
            let hook = entry.get("hooks").map_or(entry, |hooks| &hooks[0]);
            let command = hook["command"].as_str().or_else(|| hook["bash"].as_str());
            let command = command.unwrap_or_else(|| panic!("no {event} hook in {hooks}"));
            command.starts_with("ahp_failed() {") && command.contains("; set -- ahp ")
        };
        let cases: [(Harness, &[&str], &[&str]); 5] = [
            (
                Harness::ClaudeCode,
                &[
                    "PreToolUse",
                    "PostToolUse",
                    "PostToolUseFailure",
                    "UserPromptSubmit",
                    "SessionStart",
                    "Stop",
                    "SubagentStop",
                ],
                &["SessionEnd", "PreCompact"],
            ),
            (
                Harness::Codex,
                &[
                    "PreToolUse",
                    "PostToolUse",
                    "UserPromptSubmit",
                    "SessionStart",
                    "PreCompact",
                    "Stop",
                ],
                &[],
            ),
            (
                Harness::Gemini,
                &[
                    "BeforeTool",
                    "AfterTool",
                    "BeforeAgent",
                    "BeforeModel",
                    "AfterAgent",
                ],
                &["SessionStart", "PreCompress"],
            ),
            (
                Harness::Cursor,
                &["preToolUse", "beforeSubmitPrompt"],
                &["postToolUse", "stop", "sessionStart"],
            ),
            (
                Harness::Copilot,
                &["preToolUse"],
                &[
                    "postToolUse",
                    "postToolUseFailure",
                    "userPromptSubmitted",
                    "sessionStart",
                ],
            ),
        ];
        for (harness, decided, not) in cases {
            let hooks = hooks_intercepting_all(harness);
            for event in decided {
                assert!(guarded(&hooks, event), "{harness:?} {event}: {hooks}");
            }
            for event in not {
                assert!(!guarded(&hooks, event), "{harness:?} {event}: {hooks}");
            }
            let observed = hooks_written(harness, &[(&["*"], "observe", 0)]);
            for event in decided {
                assert!(guarded(&observed, event), "{harness:?} {event}: {observed}");
            }
        }
    }

    /// Registrations that intercept tools, observe them, or select nothing: a hook after a
    /// failed call is written alike for each.
    const TOOL_REGISTRATIONS: [&[(&[&str], &str, u64)]; 3] = [
        &[(&["tool.before"], "intercept", 1_000)],
        &[(&["tool.after"], "observe", 0)],
        &[],
    ];

    /// Claude Code's hook after a failed tool call is written wherever its hook after a
    /// tool is, alike (every tool, the timeout, fail-closed, guarded), but that a binary
    /// that is missing or crashes there stops the agent, the adapter's own answer to a
    /// failure there, rather than exit 2, which Claude Code does not document there.
    #[test]
    fn claude_code_s_hook_after_a_failed_call_is_written_as_after_a_tool() {
        let stopped = Answer::json(json!({"continue": false,
            "stopReason": super::super::generic_reason()}));
        let spec = Harness::ClaudeCode
            .spec("PostToolUseFailure")
            .expect("mapped");
        assert_eq!(failed_answer(Harness::ClaudeCode, spec), stopped);
        for subscriptions in TOOL_REGISTRATIONS {
            let hooks = hooks_written(Harness::ClaudeCode, subscriptions);
            let (after, failure) = (&hooks["PostToolUse"][0], &hooks["PostToolUseFailure"][0]);
            assert_eq!(failure["matcher"], after["matcher"], "{hooks}");
            let (after, failure) = (&after["hooks"][0], &failure["hooks"][0]);
            for key in ["type", "timeout", "onFailure"] {
                assert_eq!(failure[key], after[key], "{key}: {hooks}");
            }
            let command = failure["command"].as_str().unwrap_or_default();
            let line = "ahp --event PostToolUseFailure";
            assert_eq!(command, guard(line, &stopped), "{hooks}");
        }
    }

    /// Copilot's hook after a failed tool call is written wherever its hook after a tool
    /// is, alike: the same command but for its event, the timeout, and unguarded (both
    /// only observed, nothing offered).
    #[test]
    fn copilot_s_hook_after_a_failed_call_is_written_as_after_a_tool() {
        for subscriptions in TOOL_REGISTRATIONS {
            let hooks = hooks_written(Harness::Copilot, subscriptions);
            let (after, failure) = (&hooks["postToolUse"][0], &hooks["postToolUseFailure"][0]);
            for key in ["type", "timeoutSec"] {
                assert_eq!(failure[key], after[key], "{key}: {hooks}");
            }
            let command = |hook: &Value| hook["bash"].as_str().unwrap_or_default().to_string();
            let renamed = command(after).replace("postToolUse", "postToolUseFailure");
            assert_eq!(command(failure), renamed, "{hooks}");
            assert_eq!(
                command(failure),
                "ahp --event postToolUseFailure",
                "{hooks}"
            );
        }
    }

    /// Gemini's `BeforeModel` runs a process at every model request, and a failure there
    /// ends the turn: it is installed only for a registration that selects
    /// model.request.before (by name, `model.*` or `*`), the tool hooks always.
    #[test]
    fn a_hook_at_every_model_request_is_installed_only_when_selected() {
        for unselected in [
            &["tool.before", "tool.after"][..],
            &["turn.*", "model.error"],
            &[],
        ] {
            let hooks = gemini_hooks(unselected);
            assert!(
                hooks.get("BeforeModel").is_none(),
                "{unselected:?}: {hooks}"
            );
            assert!(hooks.get("BeforeTool").is_some(), "{unselected:?}: {hooks}");
        }
        for selected in ["model.request.before", "model.*", "*"] {
            let hooks = gemini_hooks(&["tool.before", selected]);
            let command = hooks["BeforeModel"][0]["hooks"][0]["command"].as_str();
            assert!(
                command.is_some_and(|c| c.contains("; set -- ahp --event BeforeModel;")),
                "{selected}: {hooks}"
            );
        }
    }

    /// A hook where a failure ends a turn is installed only for a registration that
    /// selects its event: Gemini's `AfterAgent` (Gemini reads a hook that dies there as a
    /// block, which starts another turn) and Codex's `PreCompact` (a failure there aborts
    /// the compaction and the turn).
    #[test]
    fn a_hook_whose_failure_ends_the_turn_is_installed_only_when_selected() {
        for (selected, installed) in [
            (&["tool.before", "turn.*"][..], false),
            (&["context.compact.before"], true),
            (&["context.*"], true),
            (&["*"], true),
        ] {
            let hooks = hooks_written(Harness::Codex, &[(selected, "observe", 0)]);
            assert_eq!(
                hooks.get("PreCompact").is_some(),
                installed,
                "{selected:?}: {hooks}"
            );
        }
        for (selected, installed) in [
            (&["tool.before", "model.*"][..], false),
            (&["turn.start"], false),
            (&["turn.finish.before"], true),
            (&["turn.*"], true),
            (&["*"], true),
        ] {
            let hooks = gemini_hooks(selected);
            assert_eq!(
                hooks.get("AfterAgent").is_some(),
                installed,
                "{selected:?}: {hooks}"
            );
        }
    }

    /// Each harness gets the timeout in its own unit: Gemini in milliseconds, the others
    /// in seconds; Copilot's command names its event (its payloads do not).
    #[test]
    fn each_harness_gets_its_timeout_in_its_own_unit() {
        let gemini = hooks_written(Harness::Gemini, &[]);
        assert_eq!(gemini["BeforeTool"][0]["hooks"][0]["timeout"], 15_000);
        let codex = hooks_written(Harness::Codex, &[]);
        assert_eq!(codex["PreToolUse"][0]["hooks"][0]["timeout"], 15);
        let copilot = hooks_written(Harness::Copilot, &[]);
        let pre = &copilot["preToolUse"][0];
        assert_eq!(pre["timeoutSec"], 15);
        let command = pre["bash"].as_str().unwrap_or_default();
        assert!(
            command.contains("; set -- ahp --event preToolUse;"),
            "{pre}"
        );
    }

    /// Cursor likewise, whatever the registration: only the hooks of the events Cursor
    /// lets a hook decide fail closed; `stop`, after a
    /// tool and the session events are only observed.
    #[test]
    fn cursor_fails_closed_only_where_it_intercepts() {
        for hooks in [
            hooks_intercepting_all(Harness::Cursor),
            hooks_written(Harness::Cursor, &[(&["*"], "observe", 0)]),
        ] {
            let fails_closed = |event: &str| hooks[event][0]["failClosed"].clone();
            assert_eq!(fails_closed("preToolUse"), true, "{hooks}");
            assert_eq!(fails_closed("beforeSubmitPrompt"), true, "{hooks}");
            for event in ["postToolUse", "stop", "sessionStart", "sessionEnd"] {
                assert!(fails_closed(event).is_null(), "{event}: {hooks}");
                assert_eq!(hooks[event][0]["timeout"], 15, "{event}");
            }
        }
    }
}
