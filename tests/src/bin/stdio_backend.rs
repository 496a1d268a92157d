//! A stdio policy backend that misbehaves on demand, for `tests/tests/stdio.rs`.
//!
//! `stdio_backend MODE [LOG]` reads JSON-RPC messages, one per line, from stdin until EOF
//! and answers each request (a message with an `id`) according to `MODE`, echoing its id:
//!
//! - `allow`, `no-effect`, `count`: no effects.
//! - `deny`: one deny effect with reason "stdio says no".
//! - `sleep:MS`: sleeps MS milliseconds, then no effects. The next request is read only
//!   after the reply, so this backend can never serve two requests at once.
//! - `eager-sleep:MS`: as `sleep:MS`, but every line is read (and logged) as soon as it
//!   arrives, while a request is being answered, and `answering` is logged just before
//!   each reply is written: the log shows whether the harness sent a request before the
//!   previous one was answered.
//! - `garbage`: the line `not json`.
//! - `wrong-id`: a no-effect reply whose id is `"wrong-<id>"`.
//! - `exit-mid`: reads the request and exits with status 3 without replying.
//! - `exit-silently`: reads the request and exits with status 0 without replying.
//! - `abort-mid`: reads the request and is killed by a signal (SIGKILL) without replying:
//!   a crash, with no exit status.
//! - `close-stdout`: reads the request and closes its stdout without replying, then
//!   sleeps a minute without exiting: a pipe closed under a running process.
//! - `close-stdout-mid-line`: as `close-stdout`, but first writes the start of a reply,
//!   `{"jsonrpc":"2.0"`, with no newline: stdout closed inside a line by a process that
//!   goes on running.
//! - `deaf`: never reads stdin at all (it sleeps a minute, then exits 0): a request
//!   larger than the pipe's buffer can never be written whole.
//! - `pretty`: no effects, the reply pretty-printed over several lines (against the
//!   binding: the first line, `{`, is not a message).
//! - `reply-then-exit`: no effects, then exits with status 1.
//! - `reply-then-abort`: no effects, then is killed by a signal (SIGKILL): a backend that
//!   crashed after answering, with no exit status.
//! - `deny-then-exit-at:PATH`: as `deny`, then exits with status 0 at the time PATH
//!   holds (milliseconds since the Unix epoch), read after the reply: a per-event backend
//!   whose teardown takes a while, ending when the test says, whatever its start-up took.
//! - `reply-then-chatter`: no effects, then 100 ms later a line that is not protocol
//!   (against the binding, which a per-event harness must survive), then exits 0.
//! - `huge`: a valid no-effect reply padded with spaces to 2 MiB on one line.
//! - `stubborn`: no effects, but at EOF on stdin it does not exit (it sleeps a minute),
//!   like a backend that ignores its input closing: only a kill ends it.
//! - `exit-3-at-eof`: no effects, and at EOF on stdin it exits with status 3.
//! - `crlf`: no effects, the line ended by CR LF.
//! - `latin1`: a deny whose reason holds a byte that is not UTF-8 (Latin-1 `é`).
//! - `banner`: a line that is not protocol (`starting up`) before each reply, as a
//!   server that prints a greeting on stdout would.
//! - `line:TEMPLATE`: the line TEMPLATE, with every `$ID$` replaced by the request's id
//!   as JSON (a reply the test writes whole, however wrong).
//! - `stderr-flood:BYTES`: BYTES on stderr before each reply (lines of 64 KiB, far past
//!   the harness's logged line and the pipe's buffer), then no effects: a backend whose
//!   stderr nobody drained would block before it answered.
//! - `once:MODE` (LOG required): the first process started with this LOG behaves as
//!   MODE, every later one as `allow` (the first creates `LOG.once`, which later ones
//!   find): a backend that fails once and then answers, as a retry meets. Each of its
//!   processes also logs `line <LINE>` for every line it reads, verbatim, so a test can
//!   compare what each process received byte for byte.
//!
//! Notifications (no `id`) get no reply. If `LOG` is given, the process appends to it
//! `pid <PID>`, `argv0 <PROGRAM>` (the program as it was started), `env <NAMES>` (its
//! environment variables' names, sorted, comma-separated), `cwd <DIR>` and `fds <NUMBERS>` (its open descriptors, comma-separated, with the one
//! listing them) when it starts, and `recv <method>` for every message it reads, so a
//! test can count processes and deliveries and see how they were started. The PID also
//! goes to stderr, which the harness must only log, never parse.

use std::fs::OpenOptions;
use std::io::{BufRead, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

use serde_json::{json, Value};

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args
        .next()
        .unwrap_or_else(|| fail("usage: stdio_backend MODE [LOG]"));
    let log = args.next();
    let verbatim = mode.starts_with("once:");
    let mode = match mode.strip_prefix("once:") {
        Some(first) => {
            let log = log
                .as_deref()
                .unwrap_or_else(|| fail("usage: stdio_backend once:MODE LOG"));
            let marker = format!("{log}.once");
            // Created by exactly one process, however many start at once.
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&marker)
            {
                Ok(_) => first.to_owned(),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => "allow".to_owned(),
                Err(e) => fail(&format!("create {marker}: {e}")),
            }
        }
        None => mode,
    };
    let note = move |line: String| {
        if let Some(path) = &log {
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap_or_else(|e| fail(&format!("open {path}: {e}")));
            // One short write per line, so lines of concurrent processes do not interleave.
            file.write_all(format!("{line}\n").as_bytes())
                .unwrap_or_else(|e| fail(&format!("write {path}: {e}")));
        }
    };
    let pid = std::process::id();
    eprintln!("stdio_backend {mode}: started as pid {pid}");
    note(format!("pid {pid}"));
    let argv0 = std::env::args_os().next().unwrap_or_default();
    note(format!("argv0 {}", argv0.to_string_lossy()));
    let mut env: Vec<String> = std::env::vars_os()
        .map(|(key, _)| key.to_string_lossy().into_owned())
        .collect();
    env.sort();
    note(format!("env {}", env.join(",")));
    let cwd = std::env::current_dir().unwrap_or_else(|e| fail(&format!("current dir: {e}")));
    note(format!("cwd {}", cwd.display()));
    let fds: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .map(|entries| {
            let names = entries.filter_map(|e| e.ok());
            names
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    note(format!("fds {}", fds.join(",")));

    if mode == "deaf" {
        std::thread::sleep(Duration::from_secs(60));
        std::process::exit(0);
    }

    let mut stdout = std::io::stdout();
    let eager = mode.starts_with("eager-sleep:");
    let noted = note.clone();
    let read = move |line: std::io::Result<String>| {
        let line = line.unwrap_or_else(|e| fail(&format!("read stdin: {e}")));
        if verbatim {
            noted(format!("line {line}"));
        }
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| fail(&format!("the harness sent a line that is not JSON: {e}")));
        noted(format!(
            "recv {}",
            message["method"].as_str().unwrap_or("<none>")
        ));
        message
    };
    let messages: Box<dyn Iterator<Item = Value>> = if eager {
        let (send, received) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                if send.send(read(line)).is_err() {
                    return;
                }
            }
        });
        Box::new(received.into_iter())
    } else {
        Box::new(std::io::stdin().lock().lines().map(read))
    };
    for message in messages {
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        let reply = match mode.as_str() {
            "allow" | "no-effect" | "count" | "stubborn" | "reply-then-exit"
            | "reply-then-abort" | "reply-then-chatter" | "exit-3-at-eof" => result(&id, json!([])),
            "crlf" => result(&id, json!([])) + "\r",
            "latin1" => {
                let reply = result(&id, json!([{"type": "deny", "reason": "caf?"}]));
                let mut bytes = reply.into_bytes();
                let at = bytes
                    .iter()
                    .position(|b| *b == b'?')
                    .unwrap_or_else(|| fail("no ?"));
                bytes[at] = 0xe9;
                stdout
                    .write_all(&bytes)
                    .and_then(|()| stdout.write_all(b"\n"))
                    .and_then(|()| stdout.flush())
                    .unwrap_or_else(|e| fail(&format!("write stdout: {e}")));
                continue;
            }
            "banner" => {
                writeln!(stdout, "starting up")
                    .unwrap_or_else(|e| fail(&format!("write stdout: {e}")));
                result(&id, json!([]))
            }
            flood if flood.starts_with("stderr-flood:") => {
                let bytes: usize = flood["stderr-flood:".len()..]
                    .parse()
                    .unwrap_or_else(|e| fail(&format!("bad {flood}: {e}")));
                let line = "x".repeat((64 << 10) - 1) + "\n";
                let mut stderr = std::io::stderr().lock();
                for _ in 0..bytes.div_ceil(line.len()) {
                    stderr
                        .write_all(line.as_bytes())
                        .unwrap_or_else(|e| fail(&format!("write stderr: {e}")));
                }
                result(&id, json!([]))
            }
            "pretty" => serde_json::to_string_pretty(&success(&id, json!([])))
                .unwrap_or_else(|e| fail(&format!("serialize: {e}"))),
            deny if deny == "deny" || deny.starts_with("deny-then-exit-at:") => {
                result(&id, json!([{"type": "deny", "reason": "stdio says no"}]))
            }
            "garbage" => "not json".to_owned(),
            "wrong-id" => result(
                &json!(format!("wrong-{}", id.as_str().unwrap_or("id"))),
                json!([]),
            ),
            "exit-mid" => std::process::exit(3),
            "exit-silently" => std::process::exit(0),
            "abort-mid" => die_by_signal(),
            "close-stdout" | "close-stdout-mid-line" => {
                if mode == "close-stdout-mid-line" {
                    stdout
                        .write_all(br#"{"jsonrpc":"2.0""#)
                        .and_then(|()| stdout.flush())
                        .unwrap_or_else(|e| fail(&format!("write stdout: {e}")));
                }
                // SAFETY: fd 1 is this process's stdout, which nothing uses after this:
                // the owned descriptor is dropped at once, closing the pipe.
                drop(unsafe { OwnedFd::from_raw_fd(1) });
                std::thread::sleep(Duration::from_secs(60));
                std::process::exit(0);
            }
            "huge" => " ".repeat(2 << 20) + &result(&id, json!([])),
            line if line.starts_with("line:") => {
                line["line:".len()..].replace("$ID$", &id.to_string())
            }
            sleep if sleep.starts_with("sleep:") || eager => {
                let ms = sleep
                    .split_once(':')
                    .map_or("", |(_, ms)| ms)
                    .parse()
                    .unwrap_or_else(|e| fail(&format!("bad {sleep}: {e}")));
                std::thread::sleep(Duration::from_millis(ms));
                if eager {
                    note("answering".to_owned());
                }
                result(&id, json!([]))
            }
            other => fail(&format!("unknown mode {other}")),
        };
        writeln!(stdout, "{reply}")
            .and_then(|()| stdout.flush())
            .unwrap_or_else(|e| fail(&format!("write stdout: {e}")));
        if let Some(path) = mode.strip_prefix("deny-then-exit-at:") {
            let at: u64 = std::fs::read_to_string(path)
                .ok()
                .and_then(|text| text.trim().parse().ok())
                .unwrap_or_else(|| fail(&format!("no exit time in {path}")));
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            std::thread::sleep(Duration::from_millis(at.saturating_sub(now)));
            std::process::exit(0);
        }
        if mode == "reply-then-exit" {
            std::process::exit(1);
        }
        if mode == "reply-then-abort" {
            die_by_signal();
        }
        if mode == "reply-then-chatter" {
            std::thread::sleep(Duration::from_millis(100));
            writeln!(stdout, "trailing output")
                .and_then(|()| stdout.flush())
                .unwrap_or_else(|e| fail(&format!("write stdout: {e}")));
            std::process::exit(0);
        }
    }
    match mode.as_str() {
        "stubborn" => std::thread::sleep(Duration::from_secs(60)),
        "exit-3-at-eof" => std::process::exit(3),
        _ => {}
    }
}

/// A JSON-RPC success response with these effects, on one line.
fn result(id: &Value, effects: Value) -> String {
    success(id, effects).to_string()
}

/// A JSON-RPC success response with these effects.
fn success(id: &Value, effects: Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"protocolVersion": "draft", "effects": effects}
    })
}

/// Ends this process by a signal, so that its parent sees no exit status.
///
/// SIGKILL rather than `std::process::abort()` (SIGABRT): SIGABRT may dump core, which
/// depends on the machine (`ulimit -c`, a `core_pattern` that pipes the dump to a
/// handler, which can take a while before the parent sees the exit, or a core file left
/// behind), while SIGKILL ends the process at once on every machine, as the OOM killer
/// would.
fn die_by_signal() -> ! {
    // SAFETY: `raise` has no memory-safety preconditions; SIGKILL cannot be caught, so it
    // does not return.
    unsafe { libc::raise(libc::SIGKILL) };
    fail("SIGKILL did not end the process");
}

fn fail(why: &str) -> ! {
    eprintln!("stdio_backend: {why}");
    std::process::exit(64);
}
