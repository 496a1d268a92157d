//! `ahp check`, `ahp intercept`, `ahp observe`, `ahp hook`, `ahp demo`, `ahp precompile`
//! and `ahp component`.
//!
//! Exit codes of `ahp intercept`: 0 = allow, 2 = deny, 3 = ask, 1 = the call could not be
//! made (bad registration, bad event, usage). A denial is never exit 0. A usage error is
//! exit 1 on every command but `ahp hook HARNESS`, where it is that harness's block (see
//! `usage_error`).

use crate::compile_cache::{self, Source};
use crate::runtime::{Runtime, EMBEDDED_COMPONENT};
use crate::vocab::{InterceptableEvent, ObserverResult};
use crate::{
    component_cmd, demo, hook, Decision, Declaration, EffectKind, Error, Interceptor, Interrupt,
    Observed, Options,
};
use clap::{CommandFactory as _, Parser, Subcommand};
use std::ffi::OsString;
use std::io::{IsTerminal as _, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `eprintln!`, but a line stderr cannot take (a closed pipe) is lost rather than a panic,
/// which would end the command with exit 101 instead of its own code ([`stderr_line`]).
macro_rules! say {
    ($($arg:tt)*) => { stderr_line(format_args!($($arg)*)) };
}

#[derive(Parser)]
#[command(
    name = "ahp",
    version,
    // `--version` on every command too: `ahp hook HARNESS --version` is a person asking,
    // not a usage error to answer as the harness's block.
    propagate_version = true,
    about = "Agent Hooks Protocol interceptor: ask policy backends before a tool runs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a registration document; exit 1 with every problem on stderr.
    Check {
        /// The registration JSON file.
        file: PathBuf,
        /// Validate it as `ahp hook HARNESS` loads it, against what that harness can
        /// intercept: claude-code, codex, gemini, cursor or copilot.
        #[arg(long, value_parser = harness)]
        harness: Option<hook::Harness>,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Run one hook call and print its settlement record as one JSON line.
    #[command(after_help = "Exit codes, the decision:\n  \
        0  allow\n  \
        2  deny\n  \
        3  ask\n  \
        1  the call could not be made (bad registration, bad event, usage)")]
    Intercept {
        /// The registration JSON file.
        #[arg(long)]
        registration: PathBuf,
        /// The event JSON file (any interceptable event), or - for standard input.
        #[arg(long)]
        event: String,
        /// Effects this harness can enforce for the event, comma separated: narrows what
        /// is declared (must keep deny where the event has it). Default: as declared.
        #[arg(long, value_delimiter = ',', value_parser = effect_kind)]
        effects: Vec<EffectKind>,
        /// Budget for the whole hook call, in milliseconds (1 to 3,600,000).
        #[arg(long, value_parser = budget_ms)]
        budget_ms: Option<u64>,
        /// Append the settlement record to this JSONL audit file.
        #[arg(long)]
        audit: Option<PathBuf>,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Send a non-decision event (e.g. turn.end) to its observers; print the results.
    Observe {
        /// The registration JSON file.
        #[arg(long)]
        registration: PathBuf,
        /// The event JSON file, or - for standard input.
        #[arg(long)]
        event: String,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Answer one agent-harness hook: its payload on stdin, its answer on stdout, its
    /// log only in the file AHP_LOG_FILE.
    Hook(Box<HookArgs>),
    /// Run scripted tool calls through the real component against a built-in backend.
    #[command(after_help = "Exit codes:\n  \
        0  every scripted call settled as scripted\n  \
        1  one did not, naming the scenario on stderr (or, before anything runs, the host\n     \
        options the demo's registration cannot load under)")]
    Demo {
        #[command(flatten)]
        host: HostArgs,
    },
    /// Compile the component into the on-disk cache (AHP_CACHE_DIR, else
    /// XDG_CACHE_HOME/ahp-interceptor, else ~/.cache/ahp-interceptor) so later processes
    /// start without compiling; print the cache file's path and the time it took.
    Precompile {
        /// Compile this component instead of the embedded one: a path, or oci://REF or
        /// oci://REF@sha256:… (pulled from a registry, verified by digest, cached).
        #[arg(long)]
        component: Option<String>,
    },
    /// Distribute the component: push it to an OCI registry, export it with its WIT.
    Component {
        #[command(subcommand)]
        command: component_cmd::ComponentCommand,
    },
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct HookArgs {
    #[command(subcommand)]
    install: Option<HookInstall>,
    /// claude-code, codex, gemini, cursor or copilot.
    #[arg(value_parser = harness, required = true)]
    harness: Option<hook::Harness>,
    /// The registration JSON file.
    #[arg(long, required = true)]
    registration: Option<PathBuf>,
    /// Append each settlement record to this JSONL audit file.
    #[arg(long)]
    audit: Option<PathBuf>,
    /// Budget of the whole hook process, start to answer, in milliseconds; keep it below
    /// the harness's hook timeout (`ahp hook install` does).
    #[arg(long, default_value_t = hook::DEFAULT_BUDGET_MS, value_parser = budget_ms)]
    budget_ms: u64,
    /// The native event name, for payloads that name none (Copilot).
    #[arg(long)]
    event: Option<String>,
    /// The events' `source` URI (default: a stable URN of this installation).
    #[arg(long, value_parser = SourceUri)]
    source: Option<String>,
    /// Leave these optional `session` fields out of every event, comma separated:
    /// cwd, workspaceRoots, model, agent.
    #[arg(long, value_delimiter = ',', value_parser = session_field)]
    omit_session: Vec<hook::SessionField>,
    #[command(flatten)]
    host: HostArgs,
}

#[derive(Subcommand)]
enum HookInstall {
    /// Print the harness's settings snippet for `ahp hook` (absolute paths, no secrets):
    /// each hook's command carries the options given here. Refused where the hooks could
    /// not load it (but for a component a registry could not give now). Also compile the
    /// component into the on-disk cache, as `ahp precompile` does (a cache that cannot be
    /// written is only a warning).
    Install {
        /// claude-code, codex, gemini, cursor or copilot.
        #[arg(value_parser = harness)]
        harness: hook::Harness,
        /// The registration JSON file.
        #[arg(long)]
        registration: PathBuf,
        /// Append each settlement record to this JSONL audit file.
        #[arg(long)]
        audit: Option<PathBuf>,
        /// Budget of each hook process in milliseconds (1 to 3,600,000).
        #[arg(long, value_parser = budget_ms)]
        budget_ms: Option<u64>,
        /// The events' `source` URI (default: a stable URN of this installation).
        #[arg(long, value_parser = SourceUri)]
        source: Option<String>,
        /// Leave these optional `session` fields out of every event, comma separated:
        /// cwd, workspaceRoots, model, agent.
        #[arg(long, value_delimiter = ',', value_parser = session_field)]
        omit_session: Vec<hook::SessionField>,
        // Boxed: the other subcommand is small.
        #[command(flatten)]
        host: Box<HostArgs>,
    },
    /// Print the harness's capability manifest, as `hooks/capabilities` answers it: every
    /// event `ahp hook HARNESS` emits, how, and what it enforces there.
    Manifest {
        /// claude-code, codex, gemini, cursor or copilot.
        #[arg(value_parser = harness)]
        harness: hook::Harness,
    },
}

#[derive(clap::Args)]
struct HostArgs {
    /// Load this component instead of the embedded one: a path, or oci://REF or
    /// oci://REF@sha256:… (pulled from a registry, verified by digest, cached).
    #[arg(long)]
    component: Option<String>,
    /// Extra trust roots (PEM) for https backends.
    #[arg(long)]
    trust_roots: Option<PathBuf>,
    /// Allow plain http to a non-loopback host for these backend ids (comma separated;
    /// local development only).
    #[arg(long, value_name = "BACKEND_ID", value_delimiter = ',')]
    allow_insecure_http: Vec<String>,
    /// Host environment variables passed to stdio backends besides PATH (comma
    /// separated): NAME to every stdio backend, ID:NAME to backend ID only.
    #[arg(long, value_name = "[ID:]NAME", value_delimiter = ',', value_parser = StdioEnvEntry)]
    stdio_env: Vec<crate::StdioEnv>,
    /// Authorization servers this harness trusts and holds a client at, for http backends
    /// registered without a credential that answer 401: a JSON file, `[{"issuer",
    /// "clientId", "clientSecretRef": "file:/ABSOLUTE/PATH" or "env:NAME", "scopes"}]`.
    #[arg(long, value_name = "FILE")]
    oauth_clients: Option<PathBuf>,
    /// Retries per exchange after a transient failure, inside the original deadline.
    #[arg(long, default_value_t = 0)]
    retries: u32,
    /// Events this harness can intercept, comma separated, each with every effect it
    /// allows (default: every interceptable event). An intercept subscription on any
    /// other event is refused at load.
    #[arg(long, value_name = "EVENT", value_delimiter = ',', value_parser = interceptable_event)]
    interceptable: Option<Vec<InterceptableEvent>>,
}

impl HostArgs {
    /// The files these options have read, each after its flag: the component (a path,
    /// not an `oci://` reference), the trust roots and the OAuth clients.
    fn files_read(&self) -> Vec<(String, String)> {
        let component = (self.component.clone()).filter(|c| !c.starts_with("oci://"));
        let trust_roots = self.trust_roots.as_deref().map(path_text);
        let clients = self.oauth_clients.as_deref().map(path_text);
        [
            ("--component", component),
            ("--trust-roots", trust_roots),
            ("--oauth-clients", clients),
        ]
        .into_iter()
        .filter_map(|(flag, file)| Some((flag.to_string(), file?)))
        .collect()
    }

    /// Refuses what is wrong without loading the component, naming the flag: trust roots
    /// without a PEM certificate (the library would refuse the same file as a setup error,
    /// after the component is compiled), an `--oauth-clients` file that cannot be read or
    /// holds a bad client, and an event given twice to `--interceptable`. Returns the
    /// clients read.
    fn check(&self) -> Result<Vec<crate::OAuthClient>, String> {
        if let Some(path) = &self.trust_roots {
            crate::tls::read_trust_roots(path).map_err(|e| format!("--trust-roots {e}"))?;
        }
        let clients = self.oauth_clients()?;
        if let Some(events) = &self.interceptable {
            if let Some(twice) = events
                .iter()
                .enumerate()
                .find_map(|(i, e)| events[..i].contains(e).then_some(e))
            {
                return Err(format!(
                    "--interceptable: {} is given twice",
                    twice.as_str()
                ));
            }
        }
        Ok(clients)
    }

    /// These options as words of the `ahp hook` command line `ahp hook install` writes,
    /// checked ([`HostArgs::check`]), options left at their default left out. Paths are
    /// absolute, files required to exist (not resolved through symbolic links, so a
    /// repointed link is followed: [`hook::absolute`]): a hook runs from the harness's
    /// working directory, and a registration that needs an option it cannot find fails
    /// closed on every call.
    fn hook_arguments(&self) -> Result<Vec<String>, String> {
        self.check()?;
        self.harness_declares()?;
        // Every field, so a new host option cannot be forgotten here.
        let HostArgs {
            component,
            trust_roots,
            allow_insecure_http,
            stdio_env,
            oauth_clients,
            retries,
            interceptable,
        } = self;
        let mut words: Vec<String> = Vec::new();
        let mut add = |flag: &str, value: String| words.extend([flag.to_string(), value]);
        if let Some(component) = component {
            let component = match component.starts_with(crate::oci::SCHEME) {
                // A reference that can never be pulled is refused here: only a registry
                // that cannot give the component now leaves the registration unchecked.
                true => {
                    crate::oci::parse_reference(component)
                        .map_err(|e| format!("--component: {e}"))?;
                    component.clone()
                }
                false => hook::absolute("--component", Path::new(component), true)?,
            };
            add("--component", component);
        }
        if let Some(roots) = trust_roots {
            add(
                "--trust-roots",
                hook::absolute("--trust-roots", roots, true)?,
            );
        }
        if !allow_insecure_http.is_empty() {
            add("--allow-insecure-http", allow_insecure_http.join(","));
        }
        if !stdio_env.is_empty() {
            let entries: Vec<String> = stdio_env.iter().map(ToString::to_string).collect();
            add("--stdio-env", entries.join(","));
        }
        if let Some(clients) = oauth_clients {
            add(
                "--oauth-clients",
                hook::absolute("--oauth-clients", clients, true)?,
            );
        }
        if *retries != 0 {
            add("--retries", retries.to_string());
        }
        // Refused above (`harness_declares`): the harness's declaration decides.
        let _ = interceptable;
        Ok(words)
    }

    /// Under `ahp hook` (and `ahp check --harness`) the harness's own declaration says
    /// what it can intercept (what it enforces): an `--interceptable` would be ignored
    /// there, so it is refused rather than silently overridden.
    fn harness_declares(&self) -> Result<(), String> {
        match self.interceptable {
            Some(_) => Err(
                "--interceptable does not apply to ahp hook or ahp check --harness: the \
                 harness's own declaration says what it can intercept"
                    .into(),
            ),
            None => Ok(()),
        }
    }

    async fn options(&self) -> Result<Options, String> {
        self.options_with(None).await
    }

    /// [`HostArgs::options`] with `--component`'s bytes when the caller has them already
    /// (`ahp hook install` reads or pulls them once for all its steps); `None`: read or
    /// pulled here, as `--component` says.
    async fn options_with(&self, component: Option<Vec<u8>>) -> Result<Options, String> {
        // Checked first: so an error names the flag, and comes before the component is
        // compiled.
        let oauth_clients = self.check()?;
        let component = match (component, &self.component) {
            (Some(bytes), _) => Some(bytes),
            (None, Some(source)) => Some(component_cmd::load(source).await?),
            (None, None) => None,
        };
        Ok(Options {
            component,
            trust_roots: self.trust_roots.clone(),
            allow_insecure_http: self.allow_insecure_http.clone(),
            stdio_env: self.stdio_env.clone(),
            oauth_clients,
            retries: crate::RetryPolicy {
                default: self.retries,
                ..Default::default()
            },
            declaration: match &self.interceptable {
                Some(events) => Declaration::Events(events.clone()),
                None => Declaration::Everything,
            },
            ..Options::default()
        })
    }

    /// The clients of `--oauth-clients`, read and checked; none without the flag.
    fn oauth_clients(&self) -> Result<Vec<crate::OAuthClient>, String> {
        let Some(path) = &self.oauth_clients else {
            return Ok(Vec::new());
        };
        let at = path.display();
        let bytes = crate::regular_file::read(path, MAX_OAUTH_CLIENTS_BYTES)
            .map_err(|e| format!("--oauth-clients {at}: cannot read: {e}"))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| format!("--oauth-clients {at}: not UTF-8: {e}"))?;
        crate::OAuthClient::list_from_json(&text).map_err(|e| format!("--oauth-clients {at}: {e}"))
    }

    /// Host options that are accepted but will not do what they say: each `--stdio-env`
    /// name unset in this environment (stdio backends start without it), each
    /// `--oauth-clients` secret reference (of `options`, as read once) that does not
    /// resolve now. Names only, never a value.
    fn warnings(&self, options: &Options) -> Vec<String> {
        let mut warnings = self.environment_warnings();
        warnings.extend(secret_warnings(&options.oauth_clients));
        warnings
    }

    /// Each `--stdio-env` name unset in this environment: read at once.
    fn environment_warnings(&self) -> Vec<String> {
        self.stdio_env
            .iter()
            .filter(|entry| std::env::var_os(entry.name()).is_none())
            .map(|entry| format!("--stdio-env {entry}: not set; stdio backends start without it"))
            .collect()
    }

    /// [`HostArgs::warnings`] on stderr.
    fn warn(&self, options: &Options) {
        for warning in self.warnings(options) {
            say!("warning: {warning}");
        }
    }
}

/// The largest `--oauth-clients` file read: a few clients take a few hundred bytes.
const MAX_OAUTH_CLIENTS_BYTES: u64 = 1 << 20;

/// Each of `clients` whose secret cannot be had now: the challenges it would answer fail.
/// Reads files, which may hang (a FIFO, a mount gone away).
fn secret_warnings(clients: &[crate::OAuthClient]) -> Vec<String> {
    let mut warnings = Vec::new();
    for client in clients {
        let reference = &client.client_secret_ref;
        if !crate::capabilities::credentials::resolves(reference) {
            warnings.push(format!(
                "--oauth-clients: the clientSecretRef of the client at {} does not resolve; \
                 a challenge it would answer is auth-failed",
                client.issuer
            ));
        }
    }
    warnings
}

/// Runs the CLI with the process's arguments.
pub fn main() -> ExitCode {
    close_inherited_descriptors_on_exec();
    survive_the_file_size_limit();
    reap_children_ourselves();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    // Under `ahp hook HARNESS` (not `install`, which a person runs), every way out is the
    // harness's answer: a crash or exit 1 is a failed hook, and the tool runs. A denial
    // answered before the interceptor exists has its record in `--audit` too.
    let hook_call = match &cli.command {
        Command::Hook(args) if args.install.is_none() => args.harness.map(|harness| HookCall {
            harness,
            event: args.event.clone(),
            audit: Arc::new(hook::CallAudit::new(args.audit.clone())),
        }),
        _ => None,
    };
    init_logging(hook_call.is_some());
    let Some(call) = hook_call else {
        return run(cli, None);
    };
    log_panics();
    let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(cli, Some(call.clone()))
    }));
    // The panic hook has logged the message.
    answered.unwrap_or_else(|_| call.failed("the hook process panicked"))
}

/// Descriptors a harness left open without close-on-exec (a hook runs with whatever its
/// parent leaked: a file, a socket, another hook's pipe) are closed at every exec, so a
/// stdio backend starts with its three pipes and nothing of the harness's. What this
/// process opens itself is close-on-exec already. On an older kernel (before 5.11),
/// nothing changes.
fn close_inherited_descriptors_on_exec() {
    #[cfg(target_os = "linux")]
    // SAFETY: close_range(2) only sets a flag on this process's descriptors from 3 up; it
    // reads and writes no memory of ours.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
    }
}

/// A write past the file-size limit (`ulimit -f`, RLIMIT_FSIZE: an audit file or log
/// that grew to it) fails with EFBIG, which the audit and the log handle as the error it
/// is, instead of raising SIGXFSZ, whose default action ends the process: a hook killed
/// before it answers is a failed hook, which most harnesses read as no objection. The
/// signal is caught by a handler that does nothing rather than ignored, so that the
/// processes this one starts (stdio backends) get the default action back at exec.
fn survive_the_file_size_limit() {
    extern "C" fn nothing(_signal: libc::c_int) {}
    // SAFETY: a zeroed sigaction is a valid empty one (no flags, an empty mask); the
    // handler is async-signal-safe (it does nothing) and lives as long as the process.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGXFSZ, &action, std::ptr::null_mut());
    }
}

/// SIGCHLD back to its default action. A harness that started this process with it
/// ignored (an ignored signal stays ignored across exec) would have the kernel reap every
/// stdio backend itself: its exit status lost, a per-event backend that answered and
/// exited 0 would look ended by a signal (`abnormal-exit`), and every call would be
/// settled by its policy instead of by the backend.
fn reap_children_ourselves() {
    // SAFETY: setting a standard signal's disposition to SIG_DFL touches no memory of ours.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    }
}

/// An `ahp hook HARNESS` call, as far as a failure around it needs to answer it.
#[derive(Clone)]
struct HookCall {
    harness: hook::Harness,
    /// Its `--event`.
    event: Option<String>,
    audit: Arc<hook::CallAudit>,
}

impl HookCall {
    /// The harness's answer to a failure around the call ([`hook::answer_failure`]).
    fn failed(&self, detail: &str) -> ExitCode {
        let event = self.event.as_deref();
        hook::answer_failure(self.harness, event, detail, Some(self.audit.as_ref()))
    }
}

/// Runs the parsed command line on a new async runtime; `hook_call`, an
/// `ahp hook HARNESS` call, answers a runtime that cannot start.
fn run(cli: Cli, hook_call: Option<HookCall>) -> ExitCode {
    // Two workers at least, one CPU or many: a step that blocks one (a file on a mount
    // that went away, a FIFO named as the registration) must leave another to the
    // budget's watchdog and the signals, or the harness times out and fails open.
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cpus.max(2))
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let detail = format!("start the async runtime: {e}");
            return match hook_call {
                Some(call) => call.failed(&detail),
                None => fail(&detail),
            };
        }
    };
    let code = runtime.block_on(async {
        match cli.command {
            Command::Check {
                file,
                harness,
                host,
            } => check(&file, harness, &host).await,
            Command::Intercept {
                registration,
                event,
                effects,
                budget_ms,
                audit,
                host,
            } => intercept(&registration, &event, &effects, budget_ms, audit, &host).await,
            Command::Observe {
                registration,
                event,
                host,
            } => observe(&registration, &event, &host).await,
            Command::Hook(args) => hook_command(*args, hook_call.map(|call| call.audit)).await,
            Command::Demo { host } => match host.options().await {
                Ok(options) => {
                    host.warn(&options);
                    demo::run(options).await
                }
                Err(e) => fail(&e),
            },
            Command::Precompile { component } => precompile(component.as_deref()).await,
            Command::Component { command } => component_cmd::run(command).await,
        }
    });
    // The answer is out. Work the call gave up on may still hold a blocking thread (a
    // secret file's read stuck on a FIFO or a mount gone away, a name lookup): dropping
    // the runtime would wait for it without limit, the signals no longer watched, and a
    // harness waiting for the exit would time out and fail open.
    runtime.shutdown_timeout(EXIT_BOUND);
    code
}

/// Writes the command's answer, one line on stdout. A stdout that cannot take it (the
/// caller closed the pipe, a full disk) is logged, never a panic: the exit code still
/// says the decision, as documented, rather than 101.
fn answer(line: &str) {
    if let Err(e) = print_line(line) {
        tracing::error!("{e}");
    }
}

/// How long the runtime's leftover work may hold the exit once the command is done.
const EXIT_BOUND: Duration = Duration::from_secs(2);

/// Sets up the log: the filter is `AHP_LOG` (errors only when unset), the lines go to
/// stderr — except under `ahp hook` (`hook`), whose stderr a harness may show the model
/// (an exit-2 answer): there they go to the file `AHP_LOG_FILE` names ([`hook_log_file`]),
/// else nowhere, an engine error's backtrace included.
fn init_logging(hook: bool) {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    use tracing_subscriber::layer::{Layer as _, SubscriberExt as _};
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::EnvFilter;
    let (writer, mut filter, ansi) = if !hook {
        (
            BoxMakeWriter::new(std::io::stderr),
            EnvFilter::from_env("AHP_LOG"),
            // Colour codes only for a person at a terminal, never in a file or a pipe.
            std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        )
    } else if let Some(file) = hook_log_file() {
        (
            BoxMakeWriter::new(std::sync::Arc::new(file)),
            // Read strictly: the lenient reading prints the directives it ignores to stderr.
            EnvFilter::builder()
                .with_default_directive(tracing_subscriber::filter::LevelFilter::ERROR.into())
                .with_env_var("AHP_LOG")
                .from_env()
                .unwrap_or_else(|_| EnvFilter::new("error")),
            false,
        )
    } else {
        (
            BoxMakeWriter::new(std::io::sink),
            EnvFilter::new("off"),
            false,
        )
    };
    let spec = std::env::var("AHP_LOG").ok();
    for noisy in capped_compiler_targets(spec.as_deref()) {
        if let Ok(directive) = format!("{noisy}=warn").parse() {
            filter = filter.add_directive(directive);
        }
    }
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi)
        // A log line that cannot be written (stderr closed or full, a full disk) is lost,
        // never a panic that would change a hook's exit code.
        .log_internal_errors(false)
        // Its level hint is the subscriber's: `log` records below it (wasmtime's,
        // cranelift's) are skipped before they are formatted.
        .with_filter(filter);
    tracing_subscriber::registry().with(layer).init();
}

/// The compiler's targets to keep at warnings under `AHP_LOG`'s `spec`: their own trace
/// logs (gigabytes while compiling the component) are never what an operator wants from
/// a default level above warnings. None under a default of warnings or less (a cap would
/// raise errors or off), and none a directive names (asked for).
fn capped_compiler_targets(spec: Option<&str>) -> Vec<&'static str> {
    let directives: Vec<String> = spec
        .unwrap_or_default()
        .split(',')
        .map(|directive| directive.trim().to_ascii_lowercase())
        .collect();
    let above_warnings = directives
        .iter()
        .any(|directive| ["info", "debug", "trace"].contains(&directive.as_str()));
    let named = |target: &str| directives.iter().any(|d| d.starts_with(target));
    [
        "cranelift_codegen",
        "cranelift_frontend",
        "wasmtime_internal_cranelift",
        "regalloc2",
    ]
    .into_iter()
    .filter(|target| above_warnings && !named(target))
    .collect()
}

/// The log file of `ahp hook`: `AHP_LOG_FILE`, appended (one write per line, so hook
/// processes running side by side do not mix their lines), created private (0600 on
/// unix). `None` — no logging, never a failed hook call — when it is unset or cannot be
/// opened, and when it is this process's stdout or stderr (`/dev/stderr`): the answer,
/// and what the model may read.
///
/// On unix it is never opened through a symbolic link at its last name, and only a
/// regular file of this user's with one name is written: its lines carry text a payload
/// chose (an event's name, say), and a link another user planted at a shared path
/// (`/tmp/ahp.log`) would otherwise have them appended to any file of ours, a shell's
/// startup file among them. A file of another user's there would be read by them.
fn hook_log_file() -> Option<std::fs::File> {
    let path = std::env::var_os("AHP_LOG_FILE").filter(|path| !path.is_empty())?;
    let mut options = std::fs::OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // Non-blocking: opening a FIFO nobody reads would otherwise wait, the hook with
        // it, until the harness's timeout reads the silence as no objection.
        options
            .mode(0o600)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    }
    let file = options.open(path).ok()?;
    (is_own_log(&file) && !is_stdout_or_stderr(&file)).then_some(file)
}

/// Whether `file` is a regular file of this user's with one name.
#[cfg(unix)]
fn is_own_log(file: &std::fs::File) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    // SAFETY: geteuid touches no memory of ours.
    let me = unsafe { libc::geteuid() };
    file.metadata()
        .is_ok_and(|m| m.is_file() && m.nlink() == 1 && m.uid() == me)
}

#[cfg(not(unix))]
fn is_own_log(_file: &std::fs::File) -> bool {
    true
}

/// Whether `file` is the file this process's stdout or stderr is open on.
#[cfg(unix)]
fn is_stdout_or_stderr(file: &std::fs::File) -> bool {
    use std::os::fd::AsFd as _;
    use std::os::unix::fs::MetadataExt as _;
    let id = |metadata: std::fs::Metadata| (metadata.dev(), metadata.ino());
    let Ok(log) = file.metadata().map(id) else {
        return true;
    };
    let of = |fd: std::os::fd::BorrowedFd<'_>| {
        let stream = std::fs::File::from(fd.try_clone_to_owned().ok()?);
        stream.metadata().ok().map(id)
    };
    [of(std::io::stdout().as_fd()), of(std::io::stderr().as_fd())].contains(&Some(log))
}

#[cfg(not(unix))]
fn is_stdout_or_stderr(_file: &std::fs::File) -> bool {
    false
}

/// Under `ahp hook`, a panic's message (and its backtrace, with `RUST_BACKTRACE`) goes to
/// the log, not to stderr as Rust's default hook writes it: the model may read stderr.
/// The panic itself is answered as the harness's block (see [`hook::run`]).
fn log_panics() {
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("<unnamed>");
        let backtrace = std::backtrace::Backtrace::capture();
        match backtrace.status() {
            std::backtrace::BacktraceStatus::Captured => {
                tracing::error!("thread '{thread}' {info}\nstack backtrace:\n{backtrace}")
            }
            _ => tracing::error!("thread '{thread}' {info}"),
        }
    }));
}

/// A command line clap could not parse. `--help` and `--version` print what was asked,
/// exit 0, wherever they are, except in an `ahp hook HARNESS` with that harness's payload
/// on stdin, where they are a usage error. A usage error is exit 1, "the call could not
/// be made", printed as clap prints it — except under `ahp hook HARNESS`, which a harness
/// runs: any other exit code, and clap's text on stderr (which the model reads on exit
/// 2), is not the harness's answer, and most harnesses run the tool on a failed hook.
/// There it is answered as any other failure before the payload is read
/// ([`hook::answer_failure`]):
/// at the event of the payload on stdin (a denial before a tool, no objection where
/// nothing is decided, never a block that keeps the agent working at a stop), else the
/// harness's block for an unknown event; clap's text goes to the log (`AHP_LOG_FILE`).
/// An `ahp hook` whose harness is no known one is exit 2 with clap's text, the block the
/// harnesses that read exit codes share. `ahp hook install` and `ahp hook manifest` are
/// run by a person and exit 1 like the rest.
fn usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let asked = matches!(
        error.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    );
    let args = subcommand_first(std::env::args_os().collect());
    if let Some(harness) = named_harness(&args) {
        let event = event_flag(&args);
        let detail = format!("the command line: {}", error.render());
        let detail = detail.trim_end();
        if !asked {
            init_logging(true);
            return hook::answer_failure(harness, event.as_deref(), detail, None);
        }
        // `--help` in a hook's command: a harness would read the help text on stdout with
        // exit 0 as no objection. A person asking sends nothing: at a terminal nothing
        // is read, and an empty stdin gets the help; anything else is a usage error.
        if !std::io::stdin().is_terminal() {
            let unread = hook::read_unread(harness, event.as_deref());
            if !matches!(unread, hook::Unread::Nothing) {
                init_logging(true);
                let unread = unread.or_at(harness, event.as_deref());
                return hook::answer_failure_at(harness, unread, detail, None);
            }
        }
    }
    // `ahp intercept` with its arguments and `--help` or `--version`, not at a terminal:
    // exit 0 is its allow, so a harness whose hook command was edited by mistake would
    // read the text as one. The text goes to stderr, and the call could not be made.
    let intercepting = args.get(1).is_some_and(|a| a == "intercept") && args.len() > 3;
    if asked && intercepting && !std::io::stdin().is_terminal() {
        say!("{}", error.render());
        return fail("--help or --version among ahp intercept's arguments: no call was made");
    }
    let _ = error.print();
    if asked {
        return ExitCode::SUCCESS;
    }
    // `ahp hook install` and `ahp hook manifest` are run by a person.
    let by_a_person = |a: &OsString| a == "install" || a == "manifest";
    let hook_call =
        args.get(1).is_some_and(|a| a == "hook") && args.get(2).is_none_or(|a| !by_a_person(a));
    match hook_call {
        true => ExitCode::from(2),
        false => ExitCode::from(1),
    }
}

/// `args` without the top-level `--help`, `--version` (or their short forms) and `help`
/// words standing before the subcommand: `ahp --version hook claude-code …` and `ahp help
/// intercept …` are that subcommand's command line as much as with the word after it,
/// and its answer must not be the help text with exit 0 either.
fn subcommand_first(mut args: Vec<OsString>) -> Vec<OsString> {
    // `-h`, `-V` and their runs (`-hV`), `--help`, `--version`, `help`.
    let asking = |a: &OsString| {
        let a = a.to_string_lossy();
        let shorts = a.strip_prefix('-').filter(|s| !s.is_empty());
        ["--help", "--version", "help"].contains(&&*a)
            || shorts.is_some_and(|s| s.chars().all(|c| c == 'h' || c == 'V'))
    };
    let leading = args.iter().skip(1).take_while(|a| asking(a)).count();
    // No words at all (an empty argv, which exec allows) has nothing to drain.
    let after_program = args.len().min(1);
    args.drain(after_program..after_program + leading);
    args
}

/// The harness a command line `ahp hook … HARNESS …` names, read without clap's parse,
/// which failed: its first positional argument after `hook`, the values of `hook`'s
/// options skipped (clap's definition of `hook` says which take one). `None` when that is
/// no known harness (`install`, a typo) or the command is not `hook`.
fn named_harness(args: &[OsString]) -> Option<hook::Harness> {
    let cli = Cli::command();
    let hook = cli.find_subcommand("hook")?;
    let takes_value = |long: &str| {
        hook.get_arguments()
            .any(|arg| arg.get_long() == Some(long) && arg.get_action().takes_values())
    };
    let mut args = args.iter().skip(1);
    if args.next()? != "hook" {
        return None;
    }
    let harness = |word: &OsString| hook::Harness::parse(word.to_str()?);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--") => return args.next().and_then(harness),
            Some(option) if option.starts_with("--") => {
                // `--flag VALUE`; `--flag=VALUE` and an unknown flag are one word.
                if takes_value(&option[2..]) {
                    args.next();
                }
            }
            // `-h`: no short option takes a value.
            Some(option) if option.starts_with('-') && option != "-" => {}
            _ => return harness(arg),
        }
    }
    None
}

/// The value of `--event` (`--event NAME` or `--event=NAME`) on a command line clap could
/// not parse: Copilot's payloads name no event, and the answer to the failure is that
/// event's.
fn event_flag(args: &[OsString]) -> Option<String> {
    let mut args = args.iter().map(|arg| arg.to_str());
    while let Some(arg) = args.next() {
        match arg {
            Some("--") => return None,
            Some("--event") => return args.next().flatten().map(str::to_string),
            Some(arg) => {
                if let Some(name) = arg.strip_prefix("--event=") {
                    return Some(name.to_string());
                }
            }
            None => {}
        }
    }
    None
}

/// Warms the compile cache; exit 1 when nothing could be cached.
async fn precompile(component: Option<&str>) -> ExitCode {
    // Said here, where the cache is what the command is about: elsewhere a relative
    // value is ignored silently, as XDG asks of its own variable.
    if let Some(dir) = std::env::var_os("AHP_CACHE_DIR").filter(|d| !Path::new(d).is_absolute()) {
        say!(
            "warning: AHP_CACHE_DIR={:?} is not an absolute path and is ignored",
            Path::new(&dir)
        );
    }
    let warmed = async {
        let dir = warm_cache_dir()?;
        let bytes = match component {
            Some(source) => std::borrow::Cow::Owned(component_cmd::load(source).await?),
            None => std::borrow::Cow::Borrowed(EMBEDDED_COMPONENT),
        };
        warm_compile_cache(&dir, &bytes)
    };
    match warmed.await {
        Ok(warm) => match print_line(format_args!("{}\n{warm}", warm.path.display())) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&e),
        },
        Err(e) => fail(&e),
    }
}

/// The compile cache holds the component: its file, and how it got there.
struct Warm {
    path: PathBuf,
    /// Already there, rather than compiled now.
    was_cached: bool,
    ms: u128,
}

impl std::fmt::Display for Warm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let done = match self.was_cached {
            true => "already cached: loaded",
            false => "compiled and stored",
        };
        write!(f, "{done} in {} ms", self.ms)
    }
}

/// The compile cache's directory, if a cache can be kept there; else why not, naming the
/// directory at fault: checked before anything is loaded or compiled, which would succeed
/// and cache nothing.
fn warm_cache_dir() -> Result<PathBuf, String> {
    let dir = compile_cache::cache_dir()
        .ok_or("no cache directory: set AHP_CACHE_DIR, XDG_CACHE_HOME or HOME")?;
    compile_cache::usable_dir(&dir).map_err(|e| {
        format!(
            "{}: {e}: not used (chmod go-w the directory named, or set AHP_CACHE_DIR)",
            dir.display()
        )
    })?;
    Ok(dir)
}

/// Compiles the component `bytes` into the compile cache in `dir` (from
/// [`warm_cache_dir`]), where every later `ahp` process of this user with the same cache
/// directory loads it: `ahp precompile`, and `ahp hook install` for what it installs.
/// Fails, saying why, when nothing could be cached.
fn warm_compile_cache(dir: &Path, bytes: &[u8]) -> Result<Warm, String> {
    let started = Instant::now();
    let (runtime, outcome) = compile_cache::observed(|| Runtime::new(bytes));
    let ms = started.elapsed().as_millis();
    runtime.map_err(|e| format!("{e:#}"))?;
    let Some((source, Some(path))) = outcome else {
        return Err(format!(
            "cache directory {} not used (AHP_LOG=debug says why)",
            dir.display()
        ));
    };
    let was_cached = match source {
        Source::Cache => true,
        Source::Stored => false,
        Source::Uncached => {
            return Err(format!(
                "compiled in {ms} ms but could not write {} (AHP_LOG=debug says why)",
                path.display()
            ))
        }
    };
    Ok(Warm {
        path,
        was_cached,
        ms,
    })
}

async fn check(file: &Path, harness: Option<hook::Harness>, host: &HostArgs) -> ExitCode {
    match validate(file, harness, host, None).await {
        Ok(_) => {
            let valid = match harness {
                Some(harness) => format!("{}: valid for {}", file.display(), harness.name()),
                None => format!("{}: valid", file.display()),
            };
            answer(&valid);
            ExitCode::SUCCESS
        }
        Err(Unloaded::Refused(code)) => code,
        Err(Unloaded::Setup(detail)) => fail(&detail),
    }
}

/// What [`validate`] learned of a registration that loads.
struct Loaded {
    /// Its longest chain of intercept deadlines at one declared event, as the component
    /// counts it.
    chain: Option<hook::Chain>,
    /// The files its and `--oauth-clients`' secret references name (`file:`), each after
    /// what names it.
    secret_files: Vec<(String, String)>,
}

/// Why [`validate`] could not load a registration.
enum Unloaded {
    /// The registration (or the command line) is wrong: exit 1, every problem already
    /// on stderr.
    Refused(ExitCode),
    /// The component could not be had (read, or pulled from a registry), so the
    /// registration could not be checked.
    Setup(String),
}

/// Loads the registration in `file` as it will be used — by `ahp hook HARNESS`, with
/// that harness's declaration, or else with `--interceptable`'s — and shuts it down
/// again: with the `component` bytes if given, else with what `--component` names
/// ([`HostArgs::options_with`]). Its warnings go to stderr.
async fn validate(
    file: &Path,
    harness: Option<hook::Harness>,
    host: &HostArgs,
    component: Option<Vec<u8>>,
) -> Result<Loaded, Unloaded> {
    let refused = |detail: String| Unloaded::Refused(fail(&detail));
    let text = read_file("registration", file).map_err(refused)?;
    if harness.is_some() {
        host.harness_declares().map_err(refused)?;
    }
    let mut options = host
        .options_with(component)
        .await
        .map_err(Unloaded::Setup)?;
    host.warn(&options);
    if let Some(harness) = harness {
        options.declaration = harness.declaration();
    }
    let mut secret_files = client_secret_files(&options.oauth_clients);
    let interceptor = Interceptor::new(&text, options)
        .await
        // The component is at hand by now: a failure here is no registry's.
        .map_err(|e| Unloaded::Refused(registration_failure(&e, "registration", file)))?;
    for warning in interceptor.warnings() {
        say!("warning: {warning}");
    }
    if let Some(harness) = harness {
        note_on_demand_hooks(harness, &text);
    }
    let chain = interceptor
        .longest_chain()
        .map(|(event, timeout)| hook::Chain {
            event: event.to_owned(),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        });
    secret_files.extend(registration_secret_files(&interceptor));
    interceptor.shutdown_async().await;
    Ok(Loaded {
        chain,
        secret_files,
    })
}

/// The files `--oauth-clients`' secret references name (`file:`), each after the client
/// that names it: no audit log may be one of them.
fn client_secret_files(clients: &[crate::OAuthClient]) -> Vec<(String, String)> {
    let named = clients.iter().filter_map(|client| {
        let path = crate::capabilities::credentials::file_of(&client.client_secret_ref)?;
        let named_by = format!(
            "--oauth-clients' client at {} (clientSecretRef)",
            client.issuer
        );
        Some((named_by, path.to_owned()))
    });
    named.collect()
}

/// Says which of `harness`'s hooks that `ahp hook install` writes only on demand the
/// registration `text` needs: installed for another registration, they are missing, and
/// what they would decide is never asked.
fn note_on_demand_hooks(harness: hook::Harness, text: &str) {
    let selected = hook::Selected::read(text);
    for spec in harness.events().iter().filter(|spec| spec.on_demand) {
        if selected.selects(spec) {
            say!(
                "note: {} needs {}'s {} hook, which `ahp hook install {}` writes only for a \
                 registration that selects it: install again if it is new here",
                spec.ahp.as_str(),
                harness.name(),
                spec.native,
                harness.name()
            );
        }
    }
}

async fn intercept(
    registration: &Path,
    event: &str,
    effects: &[EffectKind],
    budget_ms: Option<u64>,
    audit: Option<PathBuf>,
    host: &HostArgs,
) -> ExitCode {
    // The budget is the whole call's, from here: reading the files and loading the
    // component count against it, and what is left of it bounds the decision.
    let started = Instant::now();
    let deadline = budget_ms.map(|ms| started + Duration::from_millis(ms));
    let watchdog =
        deadline.map(|at| Watchdog::arm(at + hook::WATCHDOG_GRACE, started, audit.clone()));
    let ready = ready_to_intercept(registration, event, audit, host, watchdog.as_ref()).await;
    if watchdog.is_some_and(|watchdog| !watchdog.disarm()) {
        // It answered: the process is ending.
        return std::future::pending().await;
    }
    let (interceptor, event) = match ready {
        Ok(ready) => ready,
        Err(code) => return code,
    };
    let interrupt = Interrupt::new();
    let on_signal = interrupt.clone();
    let mut signals = Signals::listen();
    let watcher = tokio::spawn(async move {
        signals.recv().await;
        on_signal.interrupt();
    });
    let result = interceptor
        .intercept_with(
            &event,
            effects,
            deadline.map(|at| at.saturating_duration_since(Instant::now())),
            &interrupt,
        )
        .await;
    let code = match result {
        Ok(settled) => {
            answer(&settled.to_json());
            match settled.decision {
                Decision::Allow => ExitCode::SUCCESS,
                Decision::Deny => ExitCode::from(2),
                Decision::Ask => ExitCode::from(3),
            }
        }
        Err(e) => match e.shutdown_settlement() {
            Some(settled) => {
                answer(&settled.to_json());
                ExitCode::from(2)
            }
            None => call_failure(&e),
        },
    };
    // After the answer, which the call's budget bounds: a persistent observer reading
    // what it was sent, or a record still waiting for another process's lock on the
    // audit file, holds the exit, not the answer. A signal ends the observer's wait.
    interceptor.shutdown_draining(&interrupt).await;
    watcher.abort();
    code
}

/// What `ahp intercept` needs before its call: the registration and the event
/// (`event_source`: `--event`'s file, or `-` for stdin) read (in that order, each error
/// naming its flag), the host options, and the interceptor built, an `--audit` that is a
/// file the call reads refused.
async fn ready_to_intercept(
    file: &Path,
    event_source: &str,
    audit: Option<PathBuf>,
    host: &HostArgs,
    watchdog: Option<&Watchdog>,
) -> Result<(Interceptor, String), ExitCode> {
    let registration = read_file("--registration", file).map_err(|e| fail(&e))?;
    let event = read_event(event_source).map_err(|e| fail(&e))?;
    if let Some(watchdog) = watchdog {
        watchdog.read(&event);
    }
    let mut options = host.options().await.map_err(|e| fail(&e))?;
    host.warn(&options);
    if let Some(path) = &audit {
        if let Some(warning) = open_audit(path).map_err(|e| fail(&e))? {
            say!("{warning}");
        }
    }
    let client_secrets = client_secret_files(&options.oauth_clients);
    options.audit_path = audit.clone();
    let interceptor = Interceptor::new(&registration, options)
        .await
        .map_err(|e| registration_failure(&e, "--registration", file))?;
    // Nothing is appended before the call: a log that is one of the files the call reads
    // is refused now, as `hook install` refuses it, not left to take the record.
    let Some(path) = &audit else {
        return Ok((interceptor, event));
    };
    let mut read: Vec<(String, String)> = vec![("--registration".into(), path_text(file))];
    if event_source != "-" {
        read.push(("--event".into(), event_source.into()));
    }
    read.extend(host.files_read());
    read.extend(client_secrets);
    read.extend(registration_secret_files(&interceptor));
    let read: Vec<(&str, &str)> = read
        .iter()
        .map(|(by, f)| (by.as_str(), f.as_str()))
        .collect();
    if let Some(named_by) = hook::install::read_as(path, &read) {
        let refused = format!(
            "--audit {}: the file {named_by} names; the call would append its record to it",
            path.display()
        );
        interceptor.shutdown_async().await;
        return Err(fail(&refused));
    }
    Ok((interceptor, event))
}

/// `path` as text to compare as a file name (lossy only for a name no file here has).
fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The secret files the registration's backends read, each after the backend and field
/// that name it.
fn registration_secret_files(interceptor: &Interceptor) -> Vec<(String, String)> {
    let named = interceptor.secret_files().into_iter();
    named
        .map(|(id, field, path)| {
            let named_by = format!("--registration's backend `{id}` ({field})");
            (named_by, path.to_owned())
        })
        .collect()
}

/// `ahp intercept` getting ready (reading its files, loading the component), which may
/// block where no timer or signal reaches (stdin never closed, a FIFO named as a file, an
/// OAuth client's secret file on a mount that went away, read for its warning): once its
/// time has come, the call is settled as the budget's expiry — a denial, exit 2, its
/// record on stdout and in `--audit` — as one ready with no budget left is, rather than
/// left to a harness's timeout, which many read as no objection. Unless disarmed first.
struct Watchdog {
    watch: Arc<std::sync::Mutex<Watch>>,
    /// Held only to be dropped: that closes the channel the watchdog waits on.
    _disarm: std::sync::mpsc::Sender<()>,
}

/// What the watchdog and the call share: whichever claims the answer first gives it.
#[derive(Default)]
struct Watch {
    claimed: bool,
    /// The event's text, once read: the record names it.
    event: Option<String>,
}

/// How long the watchdog gives the audit file to take its record (another process may
/// hold its lock), as a call past its budget is given ([`crate::Interceptor`]'s audit
/// grace); and then stderr to take its lines (a harness may not read it), after the
/// answer is out.
const WATCHDOG_AUDIT_BOUND: Duration = Duration::from_millis(250);
const WATCHDOG_STDERR_BOUND: Duration = Duration::from_millis(100);

impl Watchdog {
    fn arm(at: Instant, started: Instant, audit: Option<PathBuf>) -> Watchdog {
        let watch = Arc::new(std::sync::Mutex::new(Watch::default()));
        let (disarm, disarmed) = std::sync::mpsc::channel::<()>();
        let watched = Arc::clone(&watch);
        let watching = std::thread::Builder::new()
            .name("ahp-watchdog".into())
            .spawn(move || {
                let left = at.saturating_duration_since(Instant::now());
                // Dropping the `Watchdog` closes the channel: disarmed.
                if disarmed.recv_timeout(left) != Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                    return;
                }
                // Held to the end: a call disarming now waits here until the process exits.
                let mut watch = watched
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if watch.claimed {
                    return;
                }
                watch.claimed = true;
                let event = watch.event.as_deref().unwrap_or_default();
                let settled = crate::settlement::host_settlement(
                    event,
                    crate::DecidedBy::BudgetExpired,
                    started,
                );
                let mut said = vec![
                    "error: --budget-ms: the budget ran out before the call could start \
                     (reading its files, loading the component)"
                        .to_string(),
                ];
                if let Some(path) = audit {
                    let appended = append_within(&path, &settled.record, WATCHDOG_AUDIT_BOUND);
                    said.extend(appended.err());
                }
                // The answer first: a stderr nobody reads must not hold it (nor stdout's
                // failure, said within the same bound).
                if let Err(e) = print_line(settled.to_json()) {
                    said.push(format!("error: {e}"));
                }
                let _ = hook::bounded("ahp-stderr", WATCHDOG_STDERR_BOUND, move || {
                    for line in said {
                        say!("{line}");
                    }
                });
                std::process::exit(2);
            });
        if let Err(e) = watching {
            tracing::error!("cannot start the watchdog: {e}");
        }
        Watchdog {
            watch,
            _disarm: disarm,
        }
    }

    /// Notes the event's text, for the record the watchdog would write.
    fn read(&self, event: &str) {
        self.lock().event = Some(event.to_owned());
    }

    /// Ready: the watchdog stands down. `false` if it answered already (the process is
    /// ending, and the call must not answer too).
    fn disarm(self) -> bool {
        let mut watch = self.lock();
        let free = !watch.claimed;
        watch.claimed = true;
        free
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watch> {
        self.watch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Appends `record` to the audit file at `path`, waiting for it no longer than `bound`
/// (another process may hold the file's lock, or its mount be gone); else why not.
fn append_within(path: &Path, record: &crate::Record, bound: Duration) -> Result<(), String> {
    let (path, record) = (path.to_path_buf(), record.clone());
    hook::bounded("ahp-audit", bound, move || {
        crate::audit::AuditLog::open(&path).and_then(|log| log.append(&record))
    })
    .and_then(|appended| appended.map_err(|e| e.to_string()))
    .map_err(|e| format!("error: --audit: the record was not written: {e}"))
}

async fn observe(file: &Path, event: &str, host: &HostArgs) -> ExitCode {
    let registration = match read_file("--registration", file) {
        Ok(text) => text,
        Err(e) => return fail(&e),
    };
    // Read before the options: a missing event is said at once, not after a pull.
    let event = match read_event(event) {
        Ok(event) => event,
        Err(e) => return fail(&e),
    };
    let options = match host.options().await {
        Ok(options) => options,
        Err(e) => return fail(&e),
    };
    host.warn(&options);
    let interceptor = match Interceptor::new(&registration, options).await {
        Ok(interceptor) => interceptor,
        Err(e) => return registration_failure(&e, "--registration", file),
    };
    // A signal shuts the interceptor down: deliveries under way end as `interrupted`,
    // those not started are `not-sent`, and the stdio children are killed and reaped
    // before the process exits, never orphaned.
    let signalled = Interrupt::new();
    let (on_signal, closing) = (signalled.clone(), interceptor.clone());
    let mut signals = Signals::listen();
    let watcher = tokio::spawn(async move {
        signals.recv().await;
        on_signal.interrupt();
        closing.shutdown_async().await;
    });
    let result = interceptor.observe(&event, None).await;
    // A signal from here on cuts the drain short, not the deliveries, which are over.
    let signal = signalled.is_set();
    interceptor.shutdown_draining(&signalled).await;
    watcher.abort();
    match result {
        Ok(observed) => {
            answer(&serde_json::to_string(&observed).unwrap_or_default());
            // An observer's own failure is its result above and exit 0: observation is best
            // effort. Nothing sent at all (the component failed, or time ran out before it
            // could prepare the notifications) is this command failing: exit 1.
            if observed.engine_failure {
                return fail("the component failed: no observer was sent the event");
            }
            if observed.budget_expired {
                return fail("the budget ran out: no observer was sent the event");
            }
            match cut_short(signal, &observed) {
                true => fail("interrupted by a signal: observers not all delivered"),
                false => ExitCode::SUCCESS,
            }
        }
        // A signal shut the interceptor down before the notifications were sent.
        Err(e) if e.is_shut_down() && signal => {
            fail("interrupted by a signal: no observer was sent the event")
        }
        Err(e) => call_failure(&e),
    }
}

/// Whether a `signal` that came by the time `ahp observe`'s deliveries were over cut them
/// short: only if it ended or stopped one (`interrupted`, `not-sent`). One that lands
/// just after the last delivery ended cut nothing short, whatever the results (a
/// backend down, a notification withheld): exit 0, as without it. The shutdown a
/// signal starts is set before it ends anything, so a delivery it reaches ends as one
/// of those two.
fn cut_short(signal: bool, observed: &Observed) -> bool {
    signal
        && observed.observers.iter().any(|report| {
            matches!(
                report.result,
                ObserverResult::Interrupted | ObserverResult::NotSent
            )
        })
}

/// `ahp hook install` or `manifest`, or `ahp hook HARNESS` with `call_audit`, its audit
/// record (made here if not given).
async fn hook_command(args: HookArgs, call_audit: Option<Arc<hook::CallAudit>>) -> ExitCode {
    if let Some(HookInstall::Manifest { harness }) = args.install {
        let capabilities = hook::manifest::capabilities(harness);
        let printed = print_line(serde_json::to_string_pretty(&capabilities).unwrap_or_default());
        return printed.map_or_else(|e| fail(&e), |()| ExitCode::SUCCESS);
    }
    if let Some(HookInstall::Install {
        harness,
        registration,
        audit,
        budget_ms,
        source,
        omit_session,
        mut host,
    }) = args.install
    {
        // Every option checked first: the pull may wait for its registry up to its
        // deadline, and a bad option is refused before it.
        if let Err(e) = host.hook_arguments() {
            return fail(&e);
        }
        // Pulled (before the options are written: it pins a tag) once for every step
        // below, within one pull's deadline: the registration is checked against, and the
        // compile cache warmed with, the bytes the hooks will run.
        let pulled = match pull_once(&mut host, harness).await {
            Ok(pulled) => pulled,
            Err(e) => return fail(&e),
        };
        let host_arguments = match host.hook_arguments() {
            Ok(words) => words,
            Err(e) => return fail(&e),
        };
        let component = match (pulled, &host.component) {
            (Some(pulled), _) => pulled,
            (None, Some(file)) => match component_cmd::load(file).await {
                Ok(bytes) => Obtained::Bytes(Some(bytes)),
                Err(e) => return fail(&e),
            },
            (None, None) => Obtained::Bytes(None),
        };
        // Hooks whose registration the harness's declaration refuses would deny every call
        // (fail-open subscriptions too): none are printed; nor where the host cannot be
        // set up (an option naming no backend, a file that is no component). Only a
        // component a registry could not give now may load later (the registry back up):
        // then the registration is left unchecked, and nothing compiled ahead. Checked
        // before anything is written (the audit file install opens).
        let loaded = match &component {
            Obtained::Bytes(bytes) => {
                match validate(&registration, Some(harness), &host, bytes.clone()).await {
                    Ok(loaded) => loaded,
                    Err(Unloaded::Refused(code)) => return code,
                    Err(Unloaded::Setup(detail)) => return fail(&detail),
                }
            }
            // The registration's own secret files are known only once it loads; the
            // clients' are known now.
            Obtained::Unavailable => match host.oauth_clients() {
                Ok(clients) => Loaded {
                    chain: None,
                    secret_files: client_secret_files(&clients),
                },
                Err(e) => return fail(&e),
            },
        };
        let request = hook::Install {
            harness,
            registration,
            audit,
            budget_ms,
            source,
            omit_session,
            host_arguments,
            chain: loaded.chain,
            secret_files: loaded.secret_files,
        };
        let installed = match hook::install(&request) {
            Ok(installed) => installed,
            Err(e) => return fail(&e),
        };
        // So that the first hook call loads the component instead of compiling it within
        // its budget, which a budget shorter than a cold compile would end every time
        // before the compile is stored.
        if let Obtained::Bytes(bytes) = &component {
            let bytes = bytes.as_deref().unwrap_or(EMBEDDED_COMPONENT);
            match warm_cache_dir().and_then(|dir| warm_compile_cache(&dir, bytes)) {
                Ok(warm) => say!("# compiled component: {} ({warm})", warm.path.display()),
                Err(e) => say!(
                    "warning: the component was not compiled ahead ({e}); until it is (`ahp \
                     precompile`, with the same --component), each hook call compiles it \
                     within its budget"
                ),
            }
        }
        for warning in &installed.warnings {
            say!("{warning}");
        }
        say!("# for {}", harness.settings_file());
        if let Some(advice) = harness.uncommitted_advice() {
            say!(
                "# not to be committed: it names this machine's paths, and wherever they do \
                 not exist every call is denied; {advice}"
            );
        }
        let snippet = serde_json::to_string_pretty(&installed.snippet).unwrap_or_default();
        return match print_line(snippet) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&e),
        };
    }
    let call_audit =
        call_audit.unwrap_or_else(|| Arc::new(hook::CallAudit::new(args.audit.clone())));
    let (Some(harness), Some(registration)) = (args.harness, args.registration) else {
        // clap requires both; were it ever to let one through, it is answered as every
        // usage error under a harness is (see `usage_error`).
        let detail = "a harness and --registration are required";
        return match args.harness {
            Some(harness) => hook::answer_failure(
                harness,
                args.event.as_deref(),
                detail,
                Some(call_audit.as_ref()),
            ),
            None => {
                say!("error: {detail}");
                ExitCode::from(2)
            }
        };
    };
    let host = args.host;
    if let Err(detail) = host.harness_declares() {
        let event = args.event.as_deref();
        return hook::answer_failure(harness, event, &detail, Some(call_audit.as_ref()));
    }
    // Not on stderr, which the model may read: in the log (`AHP_LOG_FILE`).
    for warning in host.environment_warnings() {
        tracing::warn!("{warning}");
    }
    // Built inside the hook's budget: loading the component may pull it from a registry;
    // past the budget the watchdog answers.
    // No `audit_path`: `call_audit` writes the call's record (`--audit`).
    let options = Box::pin(async move {
        let options = host.options().await?;
        // Not waited for: reading the OAuth clients' secrets may hang (a file on a mount
        // that went away), and the call would then end as the watchdog's denial whatever
        // its subscriptions' policies; the call's own read of a secret has its deadline.
        // Off the runtime's workers: on one CPU there is one, which the watchdog needs.
        let clients = options.oauth_clients.clone();
        drop(tokio::task::spawn_blocking(move || {
            for warning in secret_warnings(&clients) {
                tracing::warn!("{warning}");
            }
        }));
        Ok(options)
    });
    hook::run(hook::Request {
        harness,
        registration,
        event: args.event,
        budget: Duration::from_millis(args.budget_ms),
        source: args.source,
        omit_session: args.omit_session,
        options,
        audit: call_audit,
    })
    .await
}

/// A `hook` harness name.
fn harness(name: &str) -> Result<hook::Harness, String> {
    hook::Harness::parse(name).ok_or_else(|| {
        let known: Vec<&str> = hook::Harness::ALL.iter().map(|h| h.name()).collect();
        format!("unknown harness `{name}` (known: {})", known.join(", "))
    })
}

/// The longest `--budget-ms`: an hour. A hook call is on the agent's critical path, and a
/// larger value would only overflow the clock arithmetic or the harness timeout derived
/// from it.
pub(crate) const MAX_BUDGET_MS: u64 = 3_600_000;

/// `--source`: an RFC 3986 URI, as every event's `source` must be, without user info or
/// a parameter named as a secret. Refused here, by `hook install` too, rather than in
/// every hook call, where the component would refuse each event built with it: a hook
/// that denies every call.
#[derive(Clone)]
struct SourceUri;

impl clap::builder::TypedValueParser for SourceUri {
    type Value = String;

    fn parse_ref(
        &self,
        _: &clap::Command,
        _: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let invalid = |message: String| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("--source: {message}\n"),
            )
        };
        let text = value
            .to_str()
            .ok_or_else(|| invalid("is not UTF-8".into()))?;
        // Checked first, and the value is not repeated (clap's own message would): what
        // stands before the `@`, or in a secret-named parameter, is a credential, and
        // every backend is sent the source.
        if crate::vocab::has_userinfo(text) {
            return Err(invalid(
                "must not carry user info (user:password@): every backend is sent an \
                 event's source"
                    .into(),
            ));
        }
        if crate::vocab::has_a_secret_parameter(text) {
            return Err(invalid(
                "must not carry a credential in a parameter named as a secret (such as \
                 access_token): every backend is sent an event's source"
                    .into(),
            ));
        }
        match crate::vocab::is_absolute_uri(text) {
            true => Ok(text.to_string()),
            false => Err(invalid(format!(
                "`{text}` is not an absolute URI (RFC 3986), as an event's source must be"
            ))),
        }
    }
}

/// A `--budget-ms` value: a whole number of milliseconds from 1 to [`MAX_BUDGET_MS`].
fn budget_ms(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(ms @ 1..=MAX_BUDGET_MS) => Ok(ms),
        _ => Err(format!(
            "`{text}` is not a budget: a whole number of milliseconds from 1 to {MAX_BUDGET_MS}"
        )),
    }
}

/// The signals that end a call, each the same: SIGINT, SIGTERM, SIGHUP (the terminal or
/// the session that started the process went away) and SIGQUIT (whose default action, a
/// core dump, a harness would read as a crashed hook too). Each is caught from
/// [`Signals::listen`] on: one that arrives before [`Signals::recv`] is waited on is kept
/// for it, and does not end the process — which a harness would read as a crashed hook,
/// and fail open. One way for every command that watches for them. (Elsewhere than
/// unix: Ctrl-C alone, caught from when it is first awaited.)
pub(crate) struct Signals {
    #[cfg(unix)]
    streams: Vec<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Starts catching the signals; must be called inside the Tokio runtime.
    pub(crate) fn listen() -> Signals {
        #[cfg(unix)]
        let signals = {
            use tokio::signal::unix::{signal, SignalKind};
            let kinds = [
                ("SIGINT", SignalKind::interrupt()),
                ("SIGTERM", SignalKind::terminate()),
                ("SIGHUP", SignalKind::hangup()),
                ("SIGQUIT", SignalKind::quit()),
            ];
            let streams = kinds
                .into_iter()
                .filter_map(|(name, kind)| match signal(kind) {
                    Ok(stream) => Some(stream),
                    Err(e) => {
                        tracing::error!("cannot catch {name}: {e}");
                        None
                    }
                })
                .collect();
            Signals { streams }
        };
        #[cfg(not(unix))]
        let signals = Signals {};
        signals
    }

    /// Waits for the first of the signals (since [`Signals::listen`]).
    #[cfg(unix)]
    pub(crate) async fn recv(&mut self) {
        std::future::poll_fn(|cx| {
            let caught = self
                .streams
                .iter_mut()
                .any(|stream| stream.poll_recv(cx) == std::task::Poll::Ready(Some(())));
            match caught {
                true => std::task::Poll::Ready(()),
                false => std::task::Poll::Pending,
            }
        })
        .await
    }

    /// Waits for Ctrl-C; an error is no signal.
    #[cfg(not(unix))]
    pub(crate) async fn recv(&mut self) {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The `--event` text: a file, or standard input for `-`.
fn read_event(source: &str) -> Result<String, String> {
    match source {
        "-" => read_text(std::io::stdin().lock(), "--event -"),
        path => read_file("--event", Path::new(path)),
    }
}

/// The text of the file `path`, given by `flag`; see [`read_text`].
pub(crate) fn read_file(flag: &str, path: &Path) -> Result<String, String> {
    let what = format!("{flag} {}", path.display());
    let file = std::fs::File::open(path).map_err(|e| format!("{what}: {e}"))?;
    read_text(file, &what)
}

/// All of `input` as UTF-8 text, up to [`hook::MAX_PAYLOAD_BYTES`]
/// ([`hook::read_bounded`]). Errors start with `what`, the flag and its value.
fn read_text(input: impl Read, what: &str) -> Result<String, String> {
    let bytes = hook::read_bounded(input, what)?;
    String::from_utf8(bytes).map_err(|e| format!("{what}: not UTF-8: {e}"))
}

/// Exit 1 with every problem of the registration read from `file` (given by `flag`) on
/// stderr, each after the flag and the file: a problem's own path (`/`, `/hooks/0/...`)
/// is a JSON pointer, which on its own reads as a file system's.
fn registration_failure(error: &Error, flag: &str, file: &Path) -> ExitCode {
    failure(error, &format!("{flag} {}: ", file.display()))
}

/// Exit 1 with every problem of a call (or its one failure) on stderr.
fn call_failure(error: &Error) -> ExitCode {
    failure(error, "")
}

/// Exit 1 with every problem (or the one failure) on stderr, each on its own line after
/// `at`.
fn failure(error: &Error, at: &str) -> ExitCode {
    if error.problems().is_empty() {
        return fail(&error.to_string());
    }
    for problem in error.problems() {
        say!("error: {at}{problem}");
    }
    ExitCode::from(1)
}

/// `--audit`'s file opened as the interceptor and every hook call open it (created if
/// missing, mode 0600, the owner checks), so that one that cannot be is refused naming
/// the flag, before anything is decided. `Ok` with the warning line for one opened with
/// a warning ([`crate::audit::AuditLog::warning`]), for stderr: the default log filter
/// shows errors only.
pub(crate) fn open_audit(path: &Path) -> Result<Option<String>, String> {
    let log = crate::audit::AuditLog::open(path)
        .map_err(|e| format!("--audit {}: {e}", path.display()))?;
    Ok(log
        .warning()
        .map(|warning| format!("warning: --audit {}: {warning}", path.display())))
}

/// An `--omit-session` word.
fn session_field(word: &str) -> Result<hook::SessionField, String> {
    hook::SessionField::parse(word).ok_or_else(|| {
        let known: Vec<&str> = hook::SessionField::ALL.iter().map(|f| f.name()).collect();
        format!(
            "`{word}` is no optional session field (known: {})",
            known.join(", ")
        )
    })
}

/// An `--stdio-env` entry, `NAME` or `ID:NAME`. A refused entry is not repeated (clap's
/// own message would): `NAME=VALUE` is the natural slip, and its value a secret.
#[derive(Clone)]
struct StdioEnvEntry;

impl clap::builder::TypedValueParser for StdioEnvEntry {
    type Value = crate::StdioEnv;

    fn parse_ref(
        &self,
        _: &clap::Command,
        _: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<crate::StdioEnv, clap::Error> {
        let invalid = |message: &str| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("--stdio-env: an entry {message} (the entry is not repeated)\n"),
            )
        };
        let text = value.to_str().ok_or_else(|| invalid("is not UTF-8"))?;
        if text.contains('=') {
            return Err(invalid(
                "holds `=`: it names a variable of this process's environment, whose value is \
                 passed on, never the value itself",
            ));
        }
        crate::StdioEnv::parse(text).map_err(|why| invalid(&why))
    }
}

/// An `--effects` word.
fn effect_kind(word: &str) -> Result<EffectKind, String> {
    EffectKind::parse(word).ok_or_else(|| {
        let known: Vec<&str> = EffectKind::ALL.iter().map(|k| k.as_str()).collect();
        format!("unknown effect `{word}` (known: {})", known.join(", "))
    })
}

/// An `--interceptable` word.
fn interceptable_event(word: &str) -> Result<InterceptableEvent, String> {
    InterceptableEvent::parse(word).ok_or_else(|| {
        let known: Vec<&str> = InterceptableEvent::ALL.iter().map(|e| e.as_str()).collect();
        format!(
            "`{word}` is not an interceptable event (known: {})",
            known.join(", ")
        )
    })
}

pub(crate) fn fail(message: &str) -> ExitCode {
    say!("error: {message}");
    ExitCode::from(1)
}

/// A line on stderr. One stderr cannot take (a closed pipe, a full disk) is lost, never a
/// panic (`eprintln!`'s), which would end the command with exit 101 instead of its own
/// code: 1 for an error, or the decision of an `intercept` that warned.
pub(crate) fn stderr_line(text: impl std::fmt::Display) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// `--component` as `ahp hook install` has it: read or pulled once, for all its steps.
enum Obtained {
    /// Its bytes; `None` for the embedded component.
    Bytes(Option<Vec<u8>>),
    /// A registry could not give it now (said on stderr): the hooks may load it later.
    Unavailable,
}

/// For `ahp hook install --component oci://…`: the component pulled (into the cache),
/// once for every step of the install, and `host.component` pinned to the manifest its
/// tag names now, `oci://REF:TAG@sha256:…`: what install checks the registration against,
/// sizes the budget for and compiles ahead is then what every hook call runs. A tag is
/// resolved anew by every pull: whoever can push to it would change the component of
/// every installed hook, never checked against the registration, and every call would ask
/// the registry. A registry that cannot give it now is a warning, once, naming `harness`:
/// the tag is kept (the hooks pull it when they can).
///
/// `None` for a component that is no registry's. The error says why the hooks could never
/// load it: a reference that does not parse, or a refused pull ([`PullError::Refused`]:
/// what the registry gave fails a check, credentials or answers refused), or bytes that
/// are no component.
///
/// [`PullError::Refused`]: crate::oci::PullError::Refused
async fn pull_once(
    host: &mut HostArgs,
    harness: hook::Harness,
) -> Result<Option<Obtained>, String> {
    let Some(source) = host
        .component
        .clone()
        .filter(|c| c.starts_with(crate::oci::SCHEME))
    else {
        return Ok(None);
    };
    let reference =
        crate::oci::parse_reference(&source).map_err(|e| format!("--component: {e}"))?;
    let cache = crate::component_cache::ComponentCache::for_user();
    match crate::oci::pull(&reference, cache.as_ref()).await {
        Ok(pulled) => {
            let bytes = component_cmd::a_component(&source, pulled.component)?;
            if reference.digest().is_none() {
                let pinned = format!(
                    "{}{}@{}",
                    crate::oci::SCHEME,
                    reference.whole(),
                    pulled.manifest_digest
                );
                say!(
                    "# --component pinned to {pinned}, the manifest its tag names now \
                     (install again to take a later push of the tag)"
                );
                host.component = Some(pinned);
            }
            Ok(Some(Obtained::Bytes(Some(bytes))))
        }
        Err(crate::oci::PullError::Refused(e)) => Err(format!("--component {source}: {e}")),
        Err(crate::oci::PullError::Unavailable(e)) => {
            let tag = match reference.digest() {
                Some(_) => "",
                None => "; each hook call resolves its tag anew",
            };
            say!(
                "warning: --component {source} could not be pulled now ({e}): the \
                 registration was not checked against what {} can intercept, nor the \
                 component compiled ahead, nor the budget sized to its deadlines (10 s \
                 unless --budget-ms says){tag}",
                harness.name()
            );
            Ok(Some(Obtained::Unavailable))
        }
    }
}

/// `text` and a newline on stdout, flushed. `println!` panics when stdout is closed
/// (`ahp demo | head -1`) or full (`> /dev/full`), exit 101 and a backtrace; here it is
/// an error naming stdout, for the command to exit 1 with.
pub(crate) fn print_line(text: impl std::fmt::Display) -> Result<(), String> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("write to stdout: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compiler's logs are capped at warnings under a default level above them only,
    /// and a target a directive names is left as asked.
    #[test]
    fn the_compiler_is_capped_only_under_a_verbose_default() {
        const ALL: [&str; 4] = [
            "cranelift_codegen",
            "cranelift_frontend",
            "wasmtime_internal_cranelift",
            "regalloc2",
        ];
        for spec in [
            None,
            Some("error"),
            Some("off,ahp_host=info"),
            Some("ahp_host=debug"),
        ] {
            assert!(capped_compiler_targets(spec).is_empty(), "{spec:?}");
        }
        for spec in ["debug", "INFO", "ahp_host=trace, trace"] {
            assert_eq!(capped_compiler_targets(Some(spec)), ALL, "{spec}");
        }
        assert_eq!(
            capped_compiler_targets(Some("debug,cranelift_codegen=trace")),
            ALL[1..],
            "a named target is left as asked"
        );
    }

    /// A signal cut `ahp observe` short only if some notification was not delivered:
    /// one that came once they were all delivered (or with none to send) did not.
    #[test]
    fn a_signal_cuts_observe_short_only_if_a_notification_was_not_delivered() {
        use crate::vocab::FailureClass;
        use crate::ObserverReport;
        let observed = |results: &[ObserverResult]| Observed {
            observers: results
                .iter()
                .map(|&result| ObserverReport {
                    backend: "com.example.obs".into(),
                    result,
                })
                .collect(),
            engine_failure: false,
            budget_expired: false,
        };
        let delivered = ObserverResult::Delivered;
        let refused = ObserverResult::Failed(FailureClass::ConnectionRefused);
        for results in [
            vec![delivered, delivered],
            vec![],
            vec![delivered, refused],
            vec![ObserverResult::Withheld, delivered],
        ] {
            assert!(!cut_short(true, &observed(&results)), "{results:?}");
        }
        for other in [ObserverResult::Interrupted, ObserverResult::NotSent] {
            let results = [delivered, other];
            assert!(cut_short(true, &observed(&results)), "{results:?}");
            assert!(!cut_short(false, &observed(&results)), "{results:?}");
        }
    }

    /// The words asking for help or the version before the subcommand are dropped, runs
    /// of short ones too, and an empty command line is left empty, never a panic.
    #[test]
    fn help_words_before_the_subcommand_are_dropped() {
        let words = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        let cases: [(&[&str], &[&str]); 6] = [
            (
                &["ahp", "-hV", "--help", "help", "hook", "-h"],
                &["ahp", "hook", "-h"],
            ),
            (&["ahp", "--version", "intercept"], &["ahp", "intercept"]),
            (&["ahp", "-", "hook"], &["ahp", "-", "hook"]),
            (&["ahp", "-x", "hook"], &["ahp", "-x", "hook"]),
            (&["ahp"], &["ahp"]),
            (&[], &[]),
        ];
        for (given, expected) in cases {
            assert_eq!(subcommand_first(words(given)), words(expected), "{given:?}");
        }
    }
}
