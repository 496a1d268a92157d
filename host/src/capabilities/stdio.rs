//! stdio delivery (AHP-STDIO-001): one JSON-RPC message per line on a backend process's
//! stdin, one reply line on its stdout.
//!
//! Two lifecycles:
//! - `persistent`: one long-lived child per backend, started on first use. A
//!   `tokio::sync::Mutex` around it keeps at most one request in flight; waiting for the
//!   lock counts against the waiter's own deadline.
//! - `per_event`: a fresh child per message: write one line, close stdin, read at most one
//!   line, reap. Exit 0 only means the exchange finished; a nonzero exit is
//!   `abnormal-exit` even after a line, and no line with exit 0 is `connection-lost`,
//!   as is stdout closed without a line by a child still running after a short grace;
//!   a reply left without its `\n` at exit 0 is `malformed-framing`.
//!
//! Every phase (lock wait and spawn, write, read) runs inside the one absolute deadline
//! the component passed in, and the phase the deadline hit is reported. The host only
//! frames: a reply line goes back to the component unparsed, which classifies it (a
//! wrong id or garbage is reported at once, never by waiting out the deadline).
//!
//! A persistent child whose state can no longer be trusted is killed (and reaped in the
//! background) and replaced on next use: after a timeout, an I/O error, an oversized
//! line, a reply that is not JSON or carries another id (stale or unattributable
//! output) or is no JSON-RPC 2.0 response (malformed output), or an exchange that was
//! dropped midway by interruption or shutdown. For the last, the session is out of its
//! slot while in use: dropped with the exchange, its pipes close at once, and a
//! kill-on-drop guard stops the child, so an interrupted backend does not go on working
//! and shutdown leaves no descriptor open.
//!
//! Processes are run directly (never through a shell) with an empty environment except
//! `PATH`, `kill_on_drop`, and stderr drained line by line into `tracing::debug!` (never
//! parsed as protocol). Every child is registered with its backend so [`StdioBackend::shut_down`]
//! can kill and reap it even while an exchange holds it. That is why the `Child` sits
//! behind a short-held std mutex and is reaped with `try_wait` only: an awaited
//! `Child::wait` would lock `shut_down` out for as long as it waits. Waiting for an exit is
//! woken by the exit itself (a pidfd, which does not reap), so an exchange ends when its
//! child does, even while a process it started holds its stdout, and a persistent child
//! that exits between exchanges is reaped then; where there is no pidfd (before Linux
//! 5.3, or not Linux), the exit is polled for with a small backoff.

use crate::bindings::delivery::Reply;
use crate::bindings::host_types::{DeliveryError, IoPhase};
use crate::bindings::interceptor::StdioPlan;
use serde_json::Value;
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::time::{timeout_at, Instant};

/// How long shutdown waits, in total, for every killed child to be reaped.
pub const SHUTDOWN_BOUND: Duration = Duration::from_secs(2);
/// How long a killed child gets to be reaped before it is left to the next sweep. Longer
/// under test, so that a test can tell an exchange that waits for it from one that does
/// not whatever the machine's load.
const REAP_BOUND: Duration = Duration::from_millis(if cfg!(test) { 5_000 } else { 100 });
/// How long a killed child not reaped within [`REAP_BOUND`] is still looked for in the
/// background before it is left to the next sweep.
const REAP_PATIENCE: Duration = Duration::from_secs(600);
/// How long to wait, after stdout closed, to learn whether the process exited.
const EXIT_GRACE: Duration = Duration::from_millis(200);
/// Longest stderr line logged; the rest of a longer line is dropped.
const STDERR_LINE_CAP: usize = 8 * 1024;
/// How long a child's stderr is still read once the child is reaped and forgotten: what
/// it wrote last is logged, and a process it started outside its group (`setsid`) that
/// kept the pipe holds the host's end no longer than this.
const STDERR_GRACE: Duration = Duration::from_millis(100);
/// The longest pause between two polls for a child's exit (where it is polled for).
const MAX_POLL: Duration = Duration::from_millis(20);

/// One stdio backend: how to start it, its persistent session, and every child it owns.
pub struct StdioBackend {
    id: String,
    command: String,
    args: Vec<String>,
    cwd: Option<String>,
    /// Host environment variables passed on, besides `PATH` (host configuration).
    env: Vec<String>,
    per_event: bool,
    /// The longest reply line accepted; a longer one is `response-too-large`.
    max_line: usize,
    /// The persistent child, if any (unused for `per_event`).
    session: tokio::sync::Mutex<Option<Session>>,
    children: Arc<Children>,
}

impl std::fmt::Debug for StdioBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioBackend")
            .field("id", &self.id)
            .field("command", &self.command)
            .field("per_event", &self.per_event)
            .finish_non_exhaustive()
    }
}

/// The long-lived child of a persistent backend and its pipes.
struct Session {
    process: Arc<Process>,
    stdin: ChildStdin,
    stdout: LineReader<ChildStdout>,
    /// The deadline of the notification written last, while no request has followed it:
    /// written to the pipe is all its delivery showed, so a process about to exit lets
    /// the child read it first ([`StdioBackend::end_input`]).
    unread_notification: Option<Instant>,
}

impl StdioBackend {
    /// Prepares backend `id`; nothing is started until the first delivery.
    pub fn new(id: &str, plan: &StdioPlan, env: &[String], max_line: usize) -> StdioBackend {
        StdioBackend {
            id: id.to_string(),
            command: plan.command.clone(),
            args: plan.args.clone(),
            cwd: plan.cwd.clone(),
            env: env.to_vec(),
            per_event: plan.per_event,
            max_line,
            session: tokio::sync::Mutex::new(None),
            children: Arc::new(Children::default()),
        }
    }

    /// Delivers `message` (one JSON-RPC object, no raw newline) and, if it is a request
    /// (it has an `id`), returns the reply line without its newline; a notification gets
    /// an empty reply as soon as it was written. All by `deadline`.
    pub async fn exchange(
        &self,
        message: &[u8],
        deadline: Instant,
    ) -> Result<Reply, DeliveryError> {
        // The component's messages never contain a raw newline; one that does would be
        // two frames (or a broken one) on the wire.
        if message.contains(&b'\n') {
            return Err(DeliveryError::NotPermitted);
        }
        let id = request_id(message)?;
        let result = if self.per_event {
            self.per_event(message, id.as_ref(), deadline).await
        } else {
            self.persistent(message, id.as_ref(), deadline).await
        };
        // Whatever broke the exchange after shutdown began, it was shutdown.
        match result {
            Err(_) if self.children.is_closed() => Err(DeliveryError::Cancelled),
            Err(DeliveryError::AbnormalExit(code)) => {
                // The record says `abnormal-exit`; how it ended is said here, so that a
                // backend's own exit status can be told from a kill (the OOM killer).
                match code {
                    Some(status) => {
                        tracing::warn!(backend = %self.id, status, "stdio backend exited abnormally")
                    }
                    None => {
                        tracing::warn!(backend = %self.id, "stdio backend was ended by a signal")
                    }
                }
                Err(DeliveryError::AbnormalExit(code))
            }
            other => other,
        }
    }

    async fn persistent(
        &self,
        message: &[u8],
        id: Option<&Value>,
        deadline: Instant,
    ) -> Result<Reply, DeliveryError> {
        let mut slot = timeout_at(deadline, self.session.lock())
            .await
            .map_err(|_| DeliveryError::DeadlineExceeded(IoPhase::Connect))?;
        // Shutdown could not drop an idle session while a call held this lock: the call
        // that holds it next does (its child is killed; a new one is refused).
        if self.children.were_killed() {
            slot.take();
        }
        // `timeout_at` polls the lock before its timer: a lock handed over in the poll in
        // which the deadline passed is still acquired, and nothing may be sent after it.
        if Instant::now() >= deadline {
            return Err(DeliveryError::DeadlineExceeded(IoPhase::Connect));
        }
        // Output that arrived since the last reply answers no request of ours: a child
        // that writes it cannot be trusted with the next (a second copy of its last reply
        // would be read as this request's).
        let mut session = match slot.take() {
            Some(session) if session.process.exited().is_none() && !session.stdout.pending() => {
                session
            }
            stale => {
                if let Some(old) = stale {
                    tracing::debug!(backend = %self.id, pid = ?old.process.pid, "restarting persistent stdio backend");
                    self.children.retire(&old.process);
                }
                let (process, stdin, stdout) = self.children.spawn(self, true)?;
                let stdout = stdout.ok_or(DeliveryError::LaunchFailed)?;
                self.children.reap_on_exit(&process);
                Session {
                    process,
                    stdin,
                    stdout: LineReader::new(stdout),
                    unread_notification: None,
                }
            }
        };
        // Out of the slot while in use: an exchange dropped midway (interruption,
        // shutdown) drops the session's pipes with it, and leaves the slot empty for the
        // next use to start a new child, the guard having killed this one.
        let guard = KillOnDrop::arm(self.children.clone(), session.process.clone());
        let (result, keep) = self
            .persistent_io(&mut session, message, id, deadline)
            .await;
        guard.disarm();
        // Not back into the slot after shutdown, even with a reply the killed child wrote
        // in time: shutdown leaves no descriptor open.
        if keep && !self.children.were_killed() {
            *slot = Some(session);
        } else {
            self.children.retire(&session.process);
        }
        drop(slot);
        // Shutdown marks the children killed before it tries this lock: one that found it
        // held just now, after the look above, left the session put back to be taken here.
        if self.children.were_killed() {
            if let Ok(mut slot) = self.session.try_lock() {
                slot.take();
            }
        }
        result
    }

    /// Writes the request and reads its reply; `keep` is false if the child must go.
    async fn persistent_io(
        &self,
        session: &mut Session,
        message: &[u8],
        id: Option<&Value>,
        deadline: Instant,
    ) -> (Result<Reply, DeliveryError>, bool) {
        // Restarting a stale child and starting this one took time, and the write below
        // would complete even past the deadline (`timeout_at` polls it first).
        if Instant::now() >= deadline {
            return (Err(DeliveryError::DeadlineExceeded(IoPhase::Connect)), true);
        }
        match timeout_at(deadline, write_line(&mut session.stdin, message)).await {
            Err(_) => return (Err(DeliveryError::DeadlineExceeded(IoPhase::Send)), false),
            Ok(Err(_)) => {
                return (
                    Err(ended(&session.process, deadline, PERSISTENT_EXIT).await),
                    false,
                )
            }
            Ok(Ok(())) => {}
        }
        let Some(id) = id else {
            // A notification: no reply is expected, none is read.
            session.unread_notification = Some(deadline);
            return (Ok(stdio_reply(Vec::new())), true);
        };
        // Answered, this request was read after the notification before it.
        session.unread_notification = None;
        let reading = reply_line(
            &session.process,
            &mut session.stdout,
            self.max_line,
            deadline,
        );
        let line = match timeout_at(deadline, reading).await {
            Err(_) => {
                return (
                    Err(DeliveryError::DeadlineExceeded(session.stdout.phase())),
                    false,
                )
            }
            Ok(Err(LineError::TooLarge)) => return (Err(DeliveryError::ResponseTooLarge), false),
            Ok(Err(LineError::Closed)) => {
                return (
                    Err(ended(&session.process, deadline, PERSISTENT_EXIT).await),
                    false,
                )
            }
            Ok(Ok(line)) => line,
        };
        // Transport hygiene only (the component still classifies the line): output that
        // is not a JSON-RPC reply to this request means the child's state cannot be
        // trusted, and one that keeps writing malformed output is not kept (the stdio binding).
        let attributable =
            serde_json::from_slice::<Value>(&line).is_ok_and(|reply| answers(&reply, id));
        if !attributable {
            tracing::debug!(backend = %self.id, "stdio reply is not a JSON-RPC reply to this request; restarting the backend");
        }
        // More than the one reply came at once: the rest answers no request of ours.
        let alone = session.stdout.buffered().is_empty();
        if !alone {
            tracing::debug!(backend = %self.id, "stdio backend wrote more than its reply; restarting the backend");
        }
        (Ok(stdio_reply(line)), attributable && alone)
    }

    async fn per_event(
        &self,
        message: &[u8],
        id: Option<&Value>,
        deadline: Instant,
    ) -> Result<Reply, DeliveryError> {
        if Instant::now() >= deadline {
            return Err(DeliveryError::DeadlineExceeded(IoPhase::Connect));
        }
        // A notification's stdout is not read at all.
        let (process, stdin, stdout) = self.children.spawn(self, id.is_some())?;
        let guard = KillOnDrop::arm(self.children.clone(), process.clone());
        let result = self
            .per_event_io(&process, stdin, stdout, message, deadline)
            .await;
        guard.disarm();
        // Exited and reaped already, unless it failed midway: then it is killed, and
        // reaped in the background.
        self.children.retire(&process);
        result
    }

    async fn per_event_io(
        &self,
        process: &Process,
        mut stdin: ChildStdin,
        stdout: Option<ChildStdout>,
        message: &[u8],
        deadline: Instant,
    ) -> Result<Reply, DeliveryError> {
        // Starting the child took time, and the write below would complete even past the
        // deadline (`timeout_at` polls it first).
        if Instant::now() >= deadline {
            return Err(DeliveryError::DeadlineExceeded(IoPhase::Connect));
        }
        match timeout_at(deadline, write_line(&mut stdin, message)).await {
            Err(_) => return Err(DeliveryError::DeadlineExceeded(IoPhase::Send)),
            Ok(Err(_)) => return Err(ended(process, deadline, DeliveryError::ConnectionLost).await),
            Ok(Ok(())) => {}
        }
        // EOF after exactly one message.
        drop(stdin);
        let Some(stdout) = stdout else {
            // A notification: no response is awaited, and the exit status is only logged.
            // A process still running at the deadline is killed, and may not have read
            // what it was sent (an interpreter slow to start): not `delivered`.
            return match process.wait_exit(deadline).await {
                Some(code) => {
                    tracing::debug!(backend = %self.id, ?code, "per_event observer exited");
                    Ok(stdio_reply(Vec::new()))
                }
                None => {
                    tracing::debug!(backend = %self.id, "per_event observer still running at its deadline");
                    Err(DeliveryError::DeadlineExceeded(IoPhase::AwaitResponse))
                }
            };
        };
        let mut reader = LineReader::new(stdout);
        let reading = reply_line(process, &mut reader, self.max_line, deadline);
        let line = match timeout_at(deadline, reading).await {
            Err(_) => return Err(DeliveryError::DeadlineExceeded(reader.phase())),
            Ok(Err(LineError::TooLarge)) => return Err(DeliveryError::ResponseTooLarge),
            // A message is a line ended by `\n` (digest §10), for either lifecycle: what
            // stdout held when it closed without one is no message, and no reply can come
            // after it. Its exit says more than the framing (a non-zero one is
            // `abnormal-exit`, a clean one `malformed-framing`); a child still running
            // after the grace has closed its output as below.
            Ok(Err(LineError::Closed)) if reader.ended_mid_line() => {
                return Err(ended(process, deadline, DeliveryError::MalformedFraming).await)
            }
            // Stdout closed with nothing on it: no reply can come, whatever the exit, so
            // the deadline is not waited out for one (a child still running after the
            // grace is `connection-lost`, as a persistent one is).
            Ok(Err(LineError::Closed)) => {
                return Err(ended(process, deadline, DeliveryError::ConnectionLost).await)
            }
            Ok(Ok(line)) => line,
        };
        // At most one line is the reply. What the process writes after it is read and
        // thrown away until it exits: a write into a closed pipe would kill it (or fail
        // it), and whether a finished exchange counted would depend on timing. The exit
        // is seen when it happens: noticed late, it could push a reply that was in time
        // past the deadline.
        let Some(code) = exit_discarding(process, &mut reader, deadline).await else {
            // The reply came, but the exchange ends with the exit, which did not come in
            // time: past the response's arrival, so not `await-response`, which says no
            // reply came.
            return Err(DeliveryError::DeadlineExceeded(IoPhase::ReadResponse));
        };
        match code {
            Some(0) => Ok(stdio_reply(line)),
            // A nonzero exit fails the exchange even after a complete line.
            code => Err(DeliveryError::AbnormalExit(code)),
        }
    }

    /// Marks the backend closed and kills every child it started (shutdown). Deliveries
    /// in flight end as `cancelled`; later ones are refused the same way.
    pub fn shut_down(&self) {
        self.children.kill_all();
        // Drop an idle session's pipes now; one in use is dropped by its exchange.
        if let Ok(mut slot) = self.session.try_lock() {
            *slot = None;
        }
    }

    /// Closes the stdin of the idle persistent child whose last message was a
    /// notification still within its deadline, and returns it to wait for: at end of
    /// input a stdio server reads what is left and exits. Killed at once instead (the
    /// shutdown of a process about to exit), it would lose that notification, recorded
    /// `delivered`. Taken out of the session; shutdown still kills it, as every child.
    pub fn end_input(&self) -> Option<Ending> {
        // No child is started any more, for a call still under way either: one started
        // now would be killed at shutdown right after it was sent its notification.
        self.children.lock().closed = true;
        let mut slot = self.session.try_lock().ok()?;
        let session = slot.as_ref()?;
        let until = session.unread_notification?;
        if Instant::now() >= until || session.process.exited().is_some() {
            return None;
        }
        let Session {
            process,
            stdin,
            stdout,
            ..
        } = slot.take()?;
        drop(stdin);
        tracing::debug!(backend = %self.id, pid = ?process.pid, "closed the persistent stdio backend's input for it to end");
        Some(Ending {
            backend: self.id.clone(),
            process,
            stdout,
            until,
        })
    }

    /// The children [`StdioBackend::shut_down`] killed, to reap without holding the
    /// backend (and what it owns) while waiting.
    pub fn killed(&self) -> Killed {
        Killed(self.children.clone())
    }
}

/// Dropped without [`StdioBackend::shut_down`] (an embedder that drops its interceptor on
/// an error path), the backend still kills every child it started, with its process
/// group: tokio's `kill_on_drop` reaches the child alone, and what a wrapper started
/// would run on, reparented, with nothing left to stop it. The children themselves are
/// reaped by tokio once dropped.
impl Drop for StdioBackend {
    fn drop(&mut self) {
        self.children.kill_all();
    }
}

/// A persistent child whose input [`StdioBackend::end_input`] closed, ending of itself.
pub struct Ending {
    backend: String,
    process: Arc<Process>,
    /// Kept open and read on: a child whose stdout is closed, or full, could not finish.
    stdout: LineReader<ChildStdout>,
    /// The deadline of the notification it was sent last.
    until: Instant,
}

impl Ending {
    /// Waits for the child to exit, until its notification's deadline; what it writes
    /// meanwhile is thrown away. One still running then is left for shutdown to kill.
    pub async fn wait(mut self) {
        match exit_discarding(&self.process, &mut self.stdout, self.until).await {
            Some(code) => {
                tracing::debug!(backend = %self.backend, ?code, "persistent stdio backend ended at end of input")
            }
            None => {
                tracing::debug!(backend = %self.backend, "persistent stdio backend still running at its notification's deadline")
            }
        }
    }
}

/// `process`'s exit code once it exits, by `until` (`None` if it still runs then),
/// reading and throwing away what it writes on `stdout` meanwhile: a write into a closed
/// pipe would kill or fail it.
async fn exit_discarding(
    process: &Process,
    stdout: &mut LineReader<ChildStdout>,
    until: Instant,
) -> Option<Option<i32>> {
    let exited = process.wait_exit(until);
    let discarded = stdout.discard();
    tokio::pin!(exited, discarded);
    tokio::select! {
        exit = &mut exited => exit,
        // Stdout closed: the process is exiting. A fresh wait asks at once, where the
        // first one, if it polls, may be deep in its backoff.
        () = &mut discarded => process.wait_exit(until).await,
    }
}

/// Killed children of one stdio backend, still to be reaped.
pub struct Killed(Arc<Children>);

impl Killed {
    /// Reaps them, blocking until they are all gone or `until`; returns how many remain.
    pub fn reap(&self, until: std::time::Instant) -> usize {
        let mut pause = Duration::from_millis(1);
        loop {
            let remaining = self.0.sweep();
            let now = std::time::Instant::now();
            if remaining == 0 || now >= until {
                return remaining;
            }
            std::thread::sleep(pause.min(until - now));
            pause = (pause * 2).min(MAX_POLL);
        }
    }
}

/// Whether `reply` has a JSON-RPC 2.0 response's shape and answers request `id`: version
/// 2.0, that id, and one of `result` and `error`.
fn answers(reply: &Value, id: &Value) -> bool {
    reply.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && reply.get("id") == Some(id)
        && reply.get("result").is_some() != reply.get("error").is_some()
}

/// What the host tells the component: the line, with no HTTP status or media type.
fn stdio_reply(body: Vec<u8>) -> Reply {
    Reply {
        status: None,
        content_type: None,
        body,
    }
}

/// The message's JSON-RPC `id`, `None` for a notification. Parsed once, here.
fn request_id(message: &[u8]) -> Result<Option<Value>, DeliveryError> {
    match serde_json::from_slice::<IdOnly>(message) {
        Ok(IdOnly(id)) => Ok(id),
        Err(_) => {
            tracing::warn!("refusing to frame a stdio message that is not JSON");
            Err(DeliveryError::NotPermitted)
        }
    }
}

/// A JSON document's `id` member, if it is an object with one (the last, where it is
/// given twice); every other value is read past without being built: a message may be
/// megabytes of event, many times that as a tree, in memory outside the instance's.
struct IdOnly(Option<Value>);

impl<'de> serde::Deserialize<'de> for IdOnly {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<IdOnly, D::Error> {
        deserializer.deserialize_any(IdOnlyVisitor)
    }
}

struct IdOnlyVisitor;

impl<'de> serde::de::Visitor<'de> for IdOnlyVisitor {
    type Value = IdOnly;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<IdOnly, A::Error> {
        let mut id = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "id" => id = Some(map.next_value::<Value>()?),
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(IdOnly(id))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<IdOnly, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(IdOnly(None))
    }

    fn visit_bool<E>(self, _: bool) -> Result<IdOnly, E> {
        Ok(IdOnly(None))
    }

    fn visit_i64<E>(self, _: i64) -> Result<IdOnly, E> {
        Ok(IdOnly(None))
    }

    fn visit_u64<E>(self, _: u64) -> Result<IdOnly, E> {
        Ok(IdOnly(None))
    }

    fn visit_f64<E>(self, _: f64) -> Result<IdOnly, E> {
        Ok(IdOnly(None))
    }

    fn visit_str<E>(self, _: &str) -> Result<IdOnly, E> {
        Ok(IdOnly(None))
    }

    fn visit_unit<E>(self) -> Result<IdOnly, E> {
        Ok(IdOnly(None))
    }
}

/// Writes one frame: the message and a single `\n`, in one write.
async fn write_line(stdin: &mut ChildStdin, message: &[u8]) -> std::io::Result<()> {
    let mut framed = Vec::with_capacity(message.len() + 1);
    framed.extend_from_slice(message);
    framed.push(b'\n');
    stdin.write_all(&framed).await?;
    stdin.flush().await
}

/// The next line of `stdout`, which ends with the child too: a process it started in the
/// background (a helper, a `sleep &`) may hold stdout open after the child exited, and
/// the exchange would wait out its deadline for a reply that cannot come, then be taken
/// for a timeout. Once the child exited (and what it left in its group was killed, see
/// [`Process::exited`]), what it wrote is still read, for at most [`EXIT_GRACE`]; stdout
/// still open then counts as closed.
async fn reply_line(
    process: &Process,
    stdout: &mut LineReader<ChildStdout>,
    cap: usize,
    deadline: Instant,
) -> Result<Vec<u8>, LineError> {
    let line = stdout.next_line(cap);
    tokio::pin!(line);
    tokio::select! {
        biased;
        read = &mut line => return read,
        // Still running at the deadline: the caller's timeout ends the read.
        Some(_) = process.wait_exit(deadline) => {}
    }
    let until = (Instant::now() + EXIT_GRACE).min(deadline);
    timeout_at(until, line)
        .await
        .unwrap_or(Err(LineError::Closed))
}

/// What a persistent child's exit 0 is to [`ended`]: it should never exit, so abnormal.
const PERSISTENT_EXIT: DeliveryError = DeliveryError::AbnormalExit(Some(0));

/// Classifies a child that stopped taking or answering requests, within a short grace:
/// `abnormal-exit` with its code if it exited otherwise than cleanly; `clean` if it exited
/// 0 (per event, `connection-lost` with no line, `malformed-framing` with part of one; a
/// persistent child should never exit, so `abnormal-exit` there too); `connection-lost`
/// if it closed its pipes but is still running.
async fn ended(process: &Process, deadline: Instant, clean: DeliveryError) -> DeliveryError {
    let until = (Instant::now() + EXIT_GRACE).min(deadline);
    match process.wait_exit(until).await {
        Some(Some(0)) => clean,
        Some(code) => DeliveryError::AbnormalExit(code),
        None => DeliveryError::ConnectionLost,
    }
}

/// Every child of one backend, so shutdown can reach those an exchange holds.
#[derive(Default)]
struct Children(Mutex<Registry>);

#[derive(Default)]
struct Registry {
    /// Set by shutdown, and as the input of a child about to be waited for is ended: no
    /// child is started any more.
    closed: bool,
    /// Set by shutdown: every child was killed, and no session is kept.
    killed: bool,
    /// Started and not yet reaped.
    live: Vec<Arc<Process>>,
}

impl Children {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_closed(&self) -> bool {
        self.lock().closed
    }

    fn were_killed(&self) -> bool {
        self.lock().killed
    }

    /// Starts a child for `backend`; its stdout is piped only if `read_stdout`.
    fn spawn(
        &self,
        backend: &StdioBackend,
        read_stdout: bool,
    ) -> Result<(Arc<Process>, ChildStdin, Option<ChildStdout>), DeliveryError> {
        // Held across the spawn so that shutdown cannot miss a child started concurrently.
        let mut registry = self.lock();
        if registry.closed {
            return Err(DeliveryError::Cancelled);
        }
        registry.live.retain(|p| p.exited().is_none());
        let mut command = Command::new(&backend.command);
        command
            .args(&backend.args)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(if read_stdout {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::piped())
            // Its own process group, so that a kill reaches what it started too (a
            // wrapper such as `npx`, `uv run` or a shell script starts the real server).
            .process_group(0)
            .kill_on_drop(true);
        // The smallest practical environment: PATH, so a bare command name resolves, and
        // what the host configuration names, with their values at spawn time.
        for name in std::iter::once("PATH").chain(backend.env.iter().map(String::as_str)) {
            match std::env::var_os(name) {
                Some(value) if name == "PATH" => command.env(name, absolute_entries(&value)),
                Some(value) => command.env(name, value),
                None => continue,
            };
        }
        // Never the harness's own working directory: under a command hook that is the
        // agent's project, where a relative argument (`node policy/server.js`, `python3
        // -m policy`) would name code the agent could have written.
        command.current_dir(backend.cwd.as_deref().unwrap_or(NO_CWD));
        let mut child = command.spawn().map_err(|e| {
            tracing::warn!(backend = %backend.id, command = %backend.command, error = %e, "stdio backend failed to launch");
            DeliveryError::LaunchFailed
        })?;
        let pid = child.id();
        let (Some(stdin), stdout, Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            // Not possible with piped stdio; the dropped child is killed.
            return Err(DeliveryError::LaunchFailed);
        };
        let (stderr_owner, forgotten) = tokio::sync::oneshot::channel();
        tokio::spawn(drain_stderr(backend.id.clone(), pid, stderr, forgotten));
        tracing::debug!(backend = %backend.id, ?pid, "stdio backend started");
        let process = Arc::new(Process {
            pid,
            // Opened while the child is not reaped: the id names it and no later process.
            exit: pid.and_then(exit_notice),
            child: Mutex::new((child, None)),
            stderr_owner: Mutex::new(Some(stderr_owner)),
            #[cfg(test)]
            asked: std::sync::atomic::AtomicUsize::new(0),
        });
        registry.live.push(process.clone());
        Ok((process, stdin, stdout))
    }

    /// Kills `process` (if it still runs) and forgets it once reaped. Returns at once: a
    /// killed child is reaped in the background (bounded cleanup, not delivery), so a
    /// child slow to die never holds back the result of the exchange that gave it up.
    /// One not reaped within [`REAP_BOUND`] is warned about and still looked for (every
    /// [`MAX_POLL`]), up to [`REAP_PATIENCE`]: left to a later sweep, a zombie could stay
    /// for hours (the next spawn of its backend, or shutdown). With no runtime to wait
    /// on, it is left so.
    fn retire(self: &Arc<Self>, process: &Arc<Process>) {
        process.kill();
        if process.exited().is_some() {
            self.forget(process);
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (children, process) = (self.clone(), process.clone());
            runtime.spawn(async move {
                let mut reaped = process.wait_exit(Instant::now() + REAP_BOUND).await;
                if reaped.is_none() {
                    tracing::warn!(pid = ?process.pid, "killed stdio backend not reaped yet");
                    reaped = process.wait_exit(Instant::now() + REAP_PATIENCE).await;
                }
                if reaped.is_some() {
                    children.forget(&process);
                }
            });
        }
    }

    /// Reaps a persistent child as soon as it exits, between exchanges too: a backend used
    /// rarely (at a session's start) would otherwise stay a zombie, and what it left
    /// running in its group would run on, until its next use or shutdown. Only where the
    /// exit wakes the wait (a pidfd); elsewhere the next use or shutdown finds it.
    fn reap_on_exit(self: &Arc<Self>, process: &Arc<Process>) {
        if process.exit.is_none() {
            return;
        }
        let (children, process) = (self.clone(), process.clone());
        tokio::spawn(async move {
            const WATCH: Duration = Duration::from_secs(60 * 60);
            while process.wait_exit(Instant::now() + WATCH).await.is_none() {}
            children.forget(&process);
        });
    }

    /// Drops a reaped child from the registry.
    fn forget(&self, process: &Arc<Process>) {
        self.lock().live.retain(|p| !Arc::ptr_eq(p, process));
    }

    /// Marks the registry closed and kills every child in it.
    fn kill_all(&self) {
        let live = {
            let mut registry = self.lock();
            registry.closed = true;
            registry.killed = true;
            registry.live.clone()
        };
        for process in &live {
            process.kill();
        }
    }

    /// Reaps whichever children have exited; returns how many are left.
    fn sweep(&self) -> usize {
        let mut registry = self.lock();
        registry.live.retain(|p| p.exited().is_none());
        registry.live.len()
    }
}

/// One child process. The `Child` is only ever locked for a non-blocking call.
struct Process {
    pid: Option<u32>,
    /// Readable once the process has exited, without reaping it (a pidfd); `None` where
    /// the system has none, and then the exit is polled for.
    exit: Option<AsyncFd<OwnedFd>>,
    /// `Some(exit code)` once reaped (see [`Process::exited`]); locked only for
    /// non-blocking calls.
    child: Mutex<(Child, Option<Option<i32>>)>,
    /// Dropped once the process is reaped (or with it): its stderr drain then stops
    /// within [`STDERR_GRACE`], even while a process it started outside its group holds
    /// the pipe and its session still holds the process.
    stderr_owner: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    /// How many times [`Process::wait_exit`] asked the child whether it had exited.
    #[cfg(test)]
    asked: std::sync::atomic::AtomicUsize,
}

impl Process {
    fn lock(&self) -> MutexGuard<'_, (Child, Option<Option<i32>>)> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends SIGKILL to the child's process group, then to the child; a no-op once it
    /// has been reaped.
    fn kill(&self) {
        let mut guard = self.lock();
        let (child, reaped) = &mut *guard;
        if reaped.is_none() {
            // Running, or exited and not yet reaped: the group's id is the child's own.
            self.kill_group();
            let _ = child.start_kill();
        }
    }

    /// SIGKILL to every process of the child's group, which includes what a wrapper
    /// (`npx`, `uv run`, a shell script) started and left running. Only while the child
    /// is not reaped: its id is then still the group's, and can name no other group.
    fn kill_group(&self) {
        if let Some(group) = self.pid.and_then(|pid| i32::try_from(pid).ok()) {
            // SAFETY: kill(2) only sends a signal; it touches no memory of ours.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
    }

    /// `Some(exit code)` once exited (and reaped), the code `None` if a signal ended it;
    /// `None` while it runs. Before the child is reaped, whatever it left running in its
    /// group is killed: reaped, its id would no longer be safe to signal. Reaped once;
    /// the code is kept.
    fn exited(&self) -> Option<Option<i32>> {
        let mut guard = self.lock();
        let (child, reaped) = &mut *guard;
        if let Some(code) = reaped {
            return Some(*code);
        }
        match self.pid.map(exited_unreaped) {
            Some(Ok(false)) => return None,
            Some(Ok(true)) => self.kill_group(),
            // No id, or it cannot be asked: as tokio says.
            None | Some(Err(())) => {}
        }
        let code = match child.try_wait() {
            Ok(None) => return None,
            Ok(Some(status)) => status.code(),
            // It can no longer be waited for: as good as gone.
            Err(_) => None,
        };
        *reaped = Some(code);
        drop(self.stderr_owner.lock().map(|mut owner| owner.take()));
        Some(code)
    }

    /// Waits for the exit until `until`; `None` if it still runs then. Woken by the exit
    /// itself where there is a pidfd; polled for with a backoff otherwise, and after a
    /// wake-up that found the process not yet reapable (a tracer sees its exit first).
    async fn wait_exit(&self, until: Instant) -> Option<Option<i32>> {
        if let Some(exit) = &self.exit {
            // Readable from the exit on (the readiness is never cleared). Whatever ends
            // this wait, the exit, the deadline or an error, the child itself is asked next.
            let _ = timeout_at(until, exit.readable()).await;
        }
        let mut pause = Duration::from_millis(1);
        loop {
            #[cfg(test)]
            self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if let Some(code) = self.exited() {
                return Some(code);
            }
            let now = Instant::now();
            if now >= until {
                return None;
            }
            tokio::time::sleep_until((now + pause).min(until)).await;
            pause = (pause * 2).min(MAX_POLL);
        }
    }
}

/// A descriptor that becomes readable when process `pid` exits (`pidfd_open(2)`, close-on-
/// exec), registered with the runtime; `None` where there is none (before Linux 5.3) or
/// it cannot be registered. Open it only while `pid` is an unreaped child of ours.
#[cfg(target_os = "linux")]
fn exit_notice(pid: u32) -> Option<AsyncFd<OwnedFd>> {
    use std::os::fd::FromRawFd as _;
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open(2) takes a pid and flags, touches no memory of ours, and returns
    // a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let error = std::io::Error::last_os_error();
    let Some(fd) = i32::try_from(fd).ok().filter(|fd| *fd >= 0) else {
        tracing::debug!(%error, "no pidfd; polling for the stdio backend's exit");
        return None;
    };
    // SAFETY: a descriptor the kernel just returned, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: the `OwnedFd` keeps the descriptor open, and the same, until the `AsyncFd`
    // drops it.
    unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.ok()
}

/// No pidfd outside Linux: exits are polled for.
#[cfg(not(target_os = "linux"))]
fn exit_notice(_pid: u32) -> Option<AsyncFd<OwnedFd>> {
    None
}

/// Whether child `pid` has exited, leaving it to be reaped (`WNOWAIT`); `Err` if it
/// cannot be asked (no such child of ours).
fn exited_unreaped(pid: u32) -> Result<bool, ()> {
    // SAFETY: a zeroed siginfo_t is a valid value for waitid(2) to fill.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: waitid(2) writes only `info`; WNOWAIT leaves the child waitable.
    if unsafe { libc::waitid(libc::P_PID, pid, &mut info, flags) } != 0 {
        return Err(());
    }
    // SAFETY: waitid filled `info` (si_pid stays 0 when the child has not exited).
    Ok(unsafe { info.si_pid() } != 0)
}

/// Kills a child whose exchange future is dropped midway (interruption); it is reaped in
/// the background ([`Children::retire`]).
struct KillOnDrop {
    children: Arc<Children>,
    process: Arc<Process>,
    armed: bool,
}

impl KillOnDrop {
    fn arm(children: Arc<Children>, process: Arc<Process>) -> KillOnDrop {
        KillOnDrop {
            children,
            process,
            armed: true,
        }
    }

    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.children.retire(&self.process);
        }
    }
}

/// A line reader that never buffers more than `cap` bytes of one line. The partial line
/// lives in the reader, so a read cut short by the deadline still tells how far it got.
struct LineReader<R> {
    inner: BufReader<R>,
    partial: Vec<u8>,
}

enum LineError {
    /// The line is longer than the cap; it was not read to the end.
    TooLarge,
    /// EOF or a read error before the newline.
    Closed,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    fn new(inner: R) -> LineReader<R> {
        LineReader {
            inner: BufReader::new(inner),
            partial: Vec::new(),
        }
    }

    /// The next line without its `\n`.
    async fn next_line(&mut self, cap: usize) -> Result<Vec<u8>, LineError> {
        loop {
            let chunk = self.inner.fill_buf().await.map_err(|_| LineError::Closed)?;
            if chunk.is_empty() {
                return Err(LineError::Closed);
            }
            let newline = chunk.iter().position(|&b| b == b'\n');
            let take = newline.unwrap_or(chunk.len());
            if self.partial.len() + take > cap {
                return Err(LineError::TooLarge);
            }
            self.partial.extend_from_slice(&chunk[..take]);
            self.inner.consume(take + usize::from(newline.is_some()));
            if newline.is_some() {
                return Ok(std::mem::take(&mut self.partial));
            }
        }
    }

    /// Where a read stands: nothing of the reply yet, or part of it.
    fn phase(&self) -> IoPhase {
        if self.partial.is_empty() {
            IoPhase::AwaitResponse
        } else {
            IoPhase::ReadResponse
        }
    }

    /// What was read past the last line taken, not yet consumed.
    fn buffered(&self) -> &[u8] {
        self.inner.buffer()
    }

    /// Whether bytes were read after the last newline: the stream ended inside a line.
    fn ended_mid_line(&self) -> bool {
        !self.partial.is_empty()
    }

    /// Reads and drops everything up to the end of the stream (or a read error).
    async fn discard(&mut self) {
        loop {
            match self.inner.fill_buf().await {
                Ok([]) | Err(_) => return,
                Ok(chunk) => {
                    let read = chunk.len();
                    self.inner.consume(read);
                }
            }
        }
    }
}

impl LineReader<ChildStdout> {
    /// Whether anything waits to be read right now: bytes read already, bytes in the pipe,
    /// or its end. Asks the pipe itself (`poll(2)`, no wait), not the runtime's record of
    /// its readiness, which may not have seen the bytes yet.
    fn pending(&self) -> bool {
        use std::os::fd::AsRawFd as _;
        if !self.buffered().is_empty() {
            return true;
        }
        let mut pipe = libc::pollfd {
            fd: self.inner.get_ref().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll(2) reads and writes only `pipe`, one valid pollfd.
        let ready = unsafe { libc::poll(&mut pipe, 1, 0) };
        // Interrupted (EINTR) or failed, it says nothing of the pipe: not pending.
        ready > 0
    }
}

/// Logs a child's stderr line by line (never parsed as protocol), until it closes, or
/// [`STDERR_GRACE`] after the child's [`Process`] is dropped (`forgotten`).
async fn drain_stderr(
    backend: String,
    pid: Option<u32>,
    stderr: ChildStderr,
    forgotten: tokio::sync::oneshot::Receiver<()>,
) {
    let drained = log_lines(&backend, pid, stderr);
    tokio::pin!(drained);
    tokio::select! {
        () = &mut drained => return,
        _ = forgotten => {}
    }
    let _ = tokio::time::timeout(STDERR_GRACE, drained).await;
}

/// Whether this process's children are reaped by the kernel as they exit (SIGCHLD
/// ignored, or `SA_NOCLDWAIT`): their exit status can then never be read, and every exit
/// looks like one ended by a signal.
pub(crate) fn children_reaped_by_the_kernel() -> bool {
    // SAFETY: with a null new action, sigaction(2) only fills `current`, a valid sigaction.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGCHLD, std::ptr::null(), &mut current) == 0
            && (current.sa_sigaction == libc::SIG_IGN || current.sa_flags & libc::SA_NOCLDWAIT != 0)
    }
}

/// Whether writing to a pipe whose reader is gone would kill this process (SIGPIPE at its
/// default action): a stdio backend that exits before reading its request would then end
/// the harness instead of failing its exchange. Rust programs ignore SIGPIPE unless told
/// otherwise; an embedder may have restored it.
pub(crate) fn broken_pipes_kill_the_process() -> bool {
    // SAFETY: with a null new action, sigaction(2) only fills `current`, a valid sigaction.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_DFL
    }
}

/// Where a backend with no `cwd` registered starts: the root, which nothing the agent
/// runs as its user can write to.
const NO_CWD: &str = "/";

/// `path` (a `PATH` value) with its absolute directories alone. An empty entry means the
/// working directory to `execvp`, and a relative one (`node_modules/.bin`) a directory
/// under it: entries the harness meant for its own working directory (under a command
/// hook the agent's project), which name nothing the operator chose where the backend
/// starts.
/// With none left, the system's own directories: an empty `PATH` is itself the working
/// directory to `execvp`.
fn absolute_entries(path: &std::ffi::OsStr) -> std::ffi::OsString {
    let kept = std::env::split_paths(path).filter(|dir| dir.is_absolute());
    // An absolute directory cannot hold the separator (`split_paths` split on it).
    match std::env::join_paths(kept) {
        Ok(joined) if !joined.is_empty() => joined,
        _ => SYSTEM_PATH.into(),
    }
}

/// The `PATH` of a backend whose host `PATH` has no absolute directory.
const SYSTEM_PATH: &str = "/usr/bin:/bin";

/// Logs `stderr` line by line until it closes.
async fn log_lines(backend: &str, pid: Option<u32>, stderr: ChildStderr) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    // Escaped: a control character (a carriage return) could make a terminal show the
    // line under another backend's name.
    let log = |line: &[u8]| {
        tracing::debug!(backend = %backend, ?pid, line = %String::from_utf8_lossy(line).escape_debug(), "stdio backend stderr");
    };
    loop {
        let chunk = match reader.fill_buf().await {
            Ok(chunk) if !chunk.is_empty() => chunk,
            _ => break,
        };
        let newline = chunk.iter().position(|&b| b == b'\n');
        let take = newline.unwrap_or(chunk.len());
        let room = STDERR_LINE_CAP.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..take.min(room)]);
        reader.consume(take + usize::from(newline.is_some()));
        if newline.is_some() {
            log(&line);
            line.clear();
        }
    }
    if !line.is_empty() {
        log(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message's id is read as a tree of it would give it (the last where it is given
    /// twice, `null` kept); another document has none; text that is not JSON (or has
    /// more after it) is not framed.
    #[test]
    fn a_message_id_is_read_without_the_rest() {
        let id = |text: &str| request_id(text.as_bytes()).ok();
        let big = format!(
            r#"{{"params":{{"event":"{}"}},"id":"evt_1"}}"#,
            "x".repeat(1 << 20)
        );
        assert_eq!(id(&big), Some(Some(Value::from("evt_1"))));
        assert_eq!(
            id(r#"{"id":1,"a":[{"id":9}],"id":2}"#),
            Some(Some(Value::from(2)))
        );
        assert_eq!(id(r#"{"id":null}"#), Some(Some(Value::Null)));
        for none in [
            r#"{"method":"hooks/observe"}"#,
            "[1]",
            r#""id""#,
            "7",
            "null",
            "true",
        ] {
            assert_eq!(id(none), Some(None), "{none}");
        }
        for refused in ["not json", r#"{"id":1} {}"#, r#"{"id":"#] {
            let framed = request_id(refused.as_bytes());
            assert!(
                matches!(framed, Err(DeliveryError::NotPermitted)),
                "{refused}"
            );
        }
    }

    /// Only a `PATH`'s absolute directories reach a backend: not the empty entry or a
    /// relative one, which would look in the working directory.
    #[test]
    fn a_backend_path_has_absolute_directories_alone() {
        let path = std::ffi::OsStr::new(":/usr/local/bin::bin:/usr/bin:./x:node_modules/.bin:");
        assert_eq!(absolute_entries(path), "/usr/local/bin:/usr/bin");
        for nothing_absolute in ["", ".", "node_modules/.bin", "::"] {
            let path = std::ffi::OsStr::new(nothing_absolute);
            assert_eq!(absolute_entries(path), SYSTEM_PATH, "{nothing_absolute:?}");
        }
    }

    const REQUEST: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tool.before"}"#;

    /// A persistent backend that answers every line it reads with the reply to id 1.
    fn answering_backend() -> StdioBackend {
        scripted_backend(
            r#"while IFS= read -r line; do echo '{"jsonrpc":"2.0","id":1,"result":{}}'; done"#,
        )
    }

    /// A persistent backend running `script` (sh), which reads the requests itself.
    fn scripted_backend(script: &str) -> StdioBackend {
        sh_backend(script, false)
    }

    /// A backend running `script` (sh): one child for every message if `per_event`, else
    /// one for all.
    fn sh_backend(script: &str, per_event: bool) -> StdioBackend {
        let plan = StdioPlan {
            command: "sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: None,
            per_event,
        };
        StdioBackend::new("policy", &plan, &[], 64 * 1024)
    }

    /// A persistent backend that reads one request, starts `leftover` in the background,
    /// answers with its pid (`result.left`), then runs `then`.
    fn leaving(leftover: &str, then: &str) -> StdioBackend {
        scripted_backend(&format!(
            r#"IFS= read -r line; {leftover} & echo "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"left\":$!}}}}"; {then}"#
        ))
    }

    /// The pid of what `backend`'s child ([`leaving`]) left running, from its reply.
    async fn pid_left_by(backend: &StdioBackend) -> u64 {
        let far = Instant::now() + Duration::from_secs(10);
        let reply = backend.exchange(REQUEST, far).await.expect("the reply");
        let reply: Value = serde_json::from_slice(&reply.body).expect("JSON");
        reply["result"]["left"].as_u64().expect("the pid it left")
    }

    /// The child of `backend`'s persistent session, if it has one.
    async fn session_child(backend: &StdioBackend) -> Option<Arc<Process>> {
        let slot = backend.session.lock().await;
        slot.as_ref().map(|s| s.process.clone())
    }

    fn shut_down(backend: &StdioBackend) {
        backend.shut_down();
        backend
            .killed()
            .reap(std::time::Instant::now() + SHUTDOWN_BOUND);
    }

    /// Only a child whose last message was a notification, not yet past its deadline, is
    /// given the end of its input to finish: once a request after it was answered
    /// nothing is unread, and past the deadline there is no time. Given it, the child
    /// reads what is left and exits of itself.
    #[tokio::test]
    async fn only_an_unread_notification_within_its_deadline_is_waited_for() {
        const NOTIFICATION: &[u8] = br#"{"jsonrpc":"2.0","method":"hooks/observe"}"#;
        let backend = scripted_backend(
            r#"while IFS= read -r line; do case "$line" in *'"id"'*) echo '{"jsonrpc":"2.0","id":1,"result":{}}';; esac; done"#,
        );
        let far = Instant::now() + Duration::from_secs(10);
        backend.exchange(NOTIFICATION, far).await.expect("written");
        backend.exchange(REQUEST, far).await.expect("the reply");
        assert!(
            backend.end_input().is_none(),
            "a request was answered since"
        );
        let soon = Instant::now() + Duration::from_millis(500);
        backend.exchange(NOTIFICATION, soon).await.expect("written");
        tokio::time::sleep_until(soon).await;
        assert!(backend.end_input().is_none(), "past its deadline");
        backend.exchange(NOTIFICATION, far).await.expect("written");
        let child = session_child(&backend).await.expect("the child");
        let ending = backend.end_input().expect("an unread notification");
        ending.wait().await;
        assert!(child.exited().is_some(), "the child ended at end of input");
        assert!(session_child(&backend).await.is_none());
        // Nothing is started any more: a child started now would be killed at once.
        let refused = backend.exchange(NOTIFICATION, far).await;
        assert!(
            matches!(refused, Err(DeliveryError::Cancelled)),
            "{refused:?}"
        );
        shut_down(&backend);
    }

    /// A message is a line ended by `\n` (digest §10) under either lifecycle: a
    /// per_event child that writes a whole reply without one and exits 0 has sent no
    /// message (`malformed-framing`), where a non-zero exit is still `abnormal-exit`;
    /// the same reply with its newline is the reply.
    #[tokio::test]
    async fn a_per_event_reply_without_its_newline_is_malformed_framing() {
        let reply = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        let cases = [
            ("printf '%s' ", 0, Err(DeliveryError::MalformedFraming)),
            ("printf '%s' ", 3, Err(DeliveryError::AbnormalExit(Some(3)))),
            ("printf '%s\\n' ", 0, Ok(reply.as_bytes().to_vec())),
        ];
        for (write, status, expected) in cases {
            let script = format!("IFS= read -r line; {write}'{reply}'; exit {status}");
            let backend = sh_backend(&script, true);
            let far = Instant::now() + Duration::from_secs(10);
            let result = backend.exchange(REQUEST, far).await.map(|r| r.body);
            let (got, want) = (format!("{result:?}"), format!("{expected:?}"));
            assert_eq!(got, want, "{script}");
            shut_down(&backend);
        }
    }

    /// A child that writes its reply twice in one write is not kept: the second copy,
    /// already read, would be taken as the next request's reply (same id).
    #[tokio::test]
    async fn a_reply_written_twice_at_once_retires_the_child() {
        let reply = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        let backend = scripted_backend(&format!(
            r#"while IFS= read -r line; do printf '%s\n%s\n' '{reply}' '{reply}'; done"#
        ));
        let far = Instant::now() + Duration::from_secs(10);
        let first = backend.exchange(REQUEST, far).await.expect("the reply");
        assert_eq!(first.body, reply.as_bytes());
        assert!(
            session_child(&backend).await.is_none(),
            "the child was kept"
        );
        let second = backend
            .exchange(REQUEST, far)
            .await
            .expect("a new child's reply");
        assert_eq!(second.body, reply.as_bytes());
        shut_down(&backend);
    }

    /// A reply with this request's id that is no JSON-RPC 2.0 response retires the child
    /// (a backend that keeps writing malformed output is not kept); a well-formed one,
    /// result or error, keeps it.
    #[tokio::test]
    async fn a_malformed_reply_retires_the_child() {
        let far = Instant::now() + Duration::from_secs(10);
        let cases = [
            (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, true),
            (
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}"#,
                true,
            ),
            (r#"{"id":1,"result":{}}"#, false),
            (r#"{"jsonrpc":"1.0","id":1,"result":{}}"#, false),
            (r#"{"jsonrpc":"2.0","id":1}"#, false),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}"#,
                false,
            ),
            (r#"{"jsonrpc":"2.0","id":2,"result":{}}"#, false),
        ];
        for (reply, kept) in cases {
            let backend =
                scripted_backend(&format!("while IFS= read -r line; do echo '{reply}'; done"));
            let answer = backend.exchange(REQUEST, far).await.expect("the line");
            assert_eq!(answer.body, reply.as_bytes());
            assert_eq!(session_child(&backend).await.is_some(), kept, "{reply}");
            shut_down(&backend);
        }
    }

    /// Output that arrives between two exchanges answers no request: the next exchange
    /// goes to a new child, never reads it as its reply.
    #[tokio::test]
    async fn output_between_exchanges_restarts_the_child() {
        let backend = scripted_backend(
            r#"n=0; while IFS= read -r line; do n=$((n+1)); echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"n\":$n}}"; sleep 0.05; echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"late\":$n}}"; done"#,
        );
        let far = Instant::now() + Duration::from_secs(10);
        let first = backend.exchange(REQUEST, far).await.expect("the reply");
        assert_eq!(first.body, br#"{"jsonrpc":"2.0","id":1,"result":{"n":1}}"#);
        let first_child = session_child(&backend).await.expect("kept after one line");
        // Until the late copy is in the pipe (10 s at most, on a loaded machine).
        let late = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < late {
            let slot = backend.session.lock().await;
            if slot.as_ref().is_some_and(|s| s.stdout.pending()) {
                break;
            }
            drop(slot);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let second = backend.exchange(REQUEST, far).await.expect("the reply");
        // A new child's first reply, not the old one's late copy.
        assert_eq!(second.body, br#"{"jsonrpc":"2.0","id":1,"result":{"n":1}}"#);
        let second_child = session_child(&backend).await.expect("a session");
        assert!(
            !Arc::ptr_eq(&first_child, &second_child),
            "the child was reused"
        );
        // Killed (a signal ended it), not left to run on; reaped in the background.
        assert_eq!(
            first_child.wait_exit(far).await,
            Some(None),
            "the old child was not killed"
        );
        shut_down(&backend);
    }

    /// A wrapper that exits leaves what it started running in its process group (the
    /// real server of `npx` or `uv run`): reaping the wrapper kills it first.
    #[tokio::test]
    async fn what_an_exited_child_left_running_is_killed() {
        let backend = leaving("sleep 30", "exit 0");
        let left = pid_left_by(&backend).await;
        let child = session_child(&backend).await.expect("a session");
        let far = Instant::now() + Duration::from_secs(10);
        let exited = child.wait_exit(far).await;
        assert_eq!(exited, Some(Some(0)), "the wrapper exits");
        assert!(dies(left).await, "left running: {:?}", state(left));
        shut_down(&backend);
    }

    /// A child that exits while a process it started in the background still holds its
    /// stdout ends the exchange with its exit, not at the deadline as a timeout, and what
    /// it left running in its group is killed. Both lifecycles; per event, an exit 0
    /// with no line is `connection-lost`.
    #[tokio::test]
    async fn a_child_that_exits_ends_its_exchange_while_its_stdout_is_held() {
        // The leftover's pid goes to stderr's file, which only the test reads.
        let dir = tempfile::tempdir().expect("a temporary directory");
        let cases = [
            (false, 3, DeliveryError::AbnormalExit(Some(3))),
            (true, 3, DeliveryError::AbnormalExit(Some(3))),
            (true, 0, DeliveryError::ConnectionLost),
        ];
        for (n, (per_event, status, expected)) in cases.into_iter().enumerate() {
            let left = dir.path().join(n.to_string());
            let script = format!(
                "IFS= read -r line; sleep 30 & echo $! > '{}'; exit {status}",
                left.display()
            );
            let backend = sh_backend(&script, per_event);
            let far = Instant::now() + Duration::from_secs(10);
            let result = backend.exchange(REQUEST, far).await;
            let case = format!("per_event {per_event}, exit {status}");
            let failure = result.err().map(|e| format!("{e:?}"));
            assert_eq!(failure, Some(format!("{expected:?}")), "{case}");
            let left: u64 = std::fs::read_to_string(&left)
                .expect("the leftover's pid")
                .trim()
                .parse()
                .expect("a pid");
            assert!(dies(left).await, "{case}: left running: {:?}", state(left));
            shut_down(&backend);
        }
    }

    /// A persistent child that exits between exchanges is reaped then, not at its
    /// backend's next use, and what it left running in its group is killed.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn an_idle_persistent_child_that_exits_is_reaped() {
        let backend = leaving("sleep 30", "sleep 0.2; exit 0");
        let left = pid_left_by(&backend).await;
        let child = session_child(&backend).await.expect("a session");
        let pid = u64::from(child.pid.expect("a pid"));
        assert!(dies(left).await, "left running: {:?}", state(left));
        // Reaped: gone, not a zombie, with no call and no shutdown to find it.
        let gone = comes_to(pid, |state| state.is_none()).await;
        assert!(gone, "the exited child was not reaped: {:?}", state(pid));
        assert!(
            backend.children.lock().live.is_empty(),
            "the reaped child is still registered"
        );
        shut_down(&backend);
    }

    /// An idle persistent child reaped as it exits lets go of its stderr then, not when
    /// its session is next used: a process it started outside its group (`setsid`),
    /// which keeps writing to that stderr, finds the pipe closed and ends (SIGPIPE).
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn an_idle_reaped_child_s_stderr_is_let_go() {
        let backend = leaving(
            "setsid sh -c 'while :; do echo x >&2 || exit; sleep 0.05; done'",
            "sleep 0.2; exit 0",
        );
        let left = pid_left_by(&backend).await;
        let ended = dies(left).await;
        // SAFETY: kill(2) only sends a signal (the leftover, should the test fail).
        unsafe { libc::kill(i32::try_from(left).expect("a pid"), libc::SIGKILL) };
        assert!(ended, "the leftover still writes to a stderr read on");
        assert!(session_child(&backend).await.is_some(), "no next use came");
        shut_down(&backend);
    }

    /// Dropping a backend without shutting it down (an embedder that drops its
    /// interceptor on an error path) kills what its child started too: tokio's
    /// kill-on-drop reaches the child alone, and the rest of its process group would run
    /// on, reparented, with nothing left to stop it.
    #[tokio::test]
    async fn dropping_a_backend_kills_what_its_child_started() {
        let backend = leaving("sleep 30", "while IFS= read -r line; do :; done");
        let left = pid_left_by(&backend).await;
        assert!(
            session_child(&backend)
                .await
                .is_some_and(|c| c.exited().is_none()),
            "the child is still running"
        );
        drop(backend);
        assert!(dies(left).await, "left running: {:?}", state(left));
    }

    /// After a failure the exchange returns once the child is killed, and the reaping
    /// runs in the background: a child slow to die would otherwise hold the error back
    /// for up to [`REAP_BOUND`], which could take it past the deadline, where the
    /// component reads it as a timeout. Here the child is slow to die because a tracer
    /// holds it (its exit is reported to the tracer first, so its parent cannot reap it).
    #[tokio::test]
    async fn a_failure_is_returned_without_waiting_for_the_killed_child_to_be_reaped() {
        for per_event in [false, true] {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let go = dir.path().join("go");
            let fifo = std::ffi::CString::new(go.as_os_str().as_encoded_bytes()).expect("a path");
            // SAFETY: mkfifo(3) only reads the path, a valid C string.
            assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");
            // Takes the request, waits for the test's word, then writes a line over the cap
            // (response-too-large) and blocks. Shell builtins only: a signal (SIGCHLD)
            // would stop the shell under the tracer.
            let script = format!(
                r#"IFS= read -r line; read -r word < '{go}'; printf '%070000d\n' 0; read -r word < '{go}'"#,
                go = go.display()
            );
            let backend = Arc::new(sh_backend(&script, per_event));
            let far = Instant::now() + Duration::from_secs(10);
            let exchange = tokio::spawn({
                let backend = backend.clone();
                async move { backend.exchange(REQUEST, far).await }
            });
            let child = loop {
                if let Some(child) = backend.children.lock().live.last() {
                    break child.clone();
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            };
            let Some(tracer) = Tracer::attach(child.pid.expect("a pid")) else {
                exchange.abort();
                shut_down(&backend);
                return;
            };
            let mut word = open_for_writing(&go).await;
            assert!(!exchange.is_finished(), "ended before the child failed");
            std::io::Write::write_all(&mut word, b"go\n").expect("the word");
            drop(word);
            let said = Instant::now();
            let result = exchange.await.expect("the exchange");
            let took = said.elapsed();
            println!("per_event {per_event}: {result:?} after {took:?}");
            assert!(
                matches!(result, Err(DeliveryError::ResponseTooLarge)),
                "per_event {per_event}: {result:?}"
            );
            // Waiting for the reap would take REAP_BOUND (5 s under test) at least.
            assert!(
                took < Duration::from_secs(2),
                "per_event {per_event}: the error came {took:?} after the word: it waited for the reap"
            );
            if per_event {
                // Held past REAP_BOUND, the child is still waited for in the background:
                // reaped and forgotten once the tracer lets go, with no sweep (no spawn,
                // no shutdown) to do it.
                tokio::time::sleep(REAP_BOUND + Duration::from_millis(300)).await;
                drop(tracer);
                let forgotten = || {
                    !backend
                        .children
                        .lock()
                        .live
                        .iter()
                        .any(|p| Arc::ptr_eq(p, &child))
                };
                let deadline = Instant::now() + Duration::from_secs(3);
                while !forgotten() && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                assert!(forgotten(), "the killed child was left for a sweep");
                assert_eq!(child.exited(), Some(None), "a signal ended it");
            } else {
                // It was killed all the same: a signal ended it, reaped once the tracer let go.
                drop(tracer);
                assert_eq!(
                    child.wait_exit(far).await,
                    Some(None),
                    "per_event {per_event}"
                );
            }
            shut_down(&backend);
        }
    }

    /// A process that traces `pid` (`PTRACE_SEIZE`, which does not stop it) and never
    /// waits for it: until the tracer is dropped, `pid`'s exit is reported to the tracer
    /// alone and its parent cannot reap it. `None` where tracing is not permitted (Yama
    /// `ptrace_scope` 1 or more without `CAP_SYS_PTRACE`, a seccomp filter).
    struct Tracer(std::process::Child);

    impl Tracer {
        fn attach(pid: u32) -> Option<Tracer> {
            use std::os::unix::process::CommandExt as _;
            let pid = libc::pid_t::try_from(pid).expect("a pid");
            let mut command = std::process::Command::new("sleep");
            command.arg("60");
            // SAFETY: between fork and exec the closure makes one system call and reads
            // errno, nothing that could wait for a lock held by another thread.
            unsafe {
                command.pre_exec(move || {
                    let null = std::ptr::null_mut::<libc::c_void>();
                    if libc::ptrace(libc::PTRACE_SEIZE, pid, null, null) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            match command.spawn() {
                Ok(tracer) => Some(Tracer(tracer)),
                Err(e) => {
                    // Straight to stderr: the harness captures `eprintln!` of a passing
                    // test, and a skip must be seen.
                    use std::io::Write as _;
                    let skipped = format!("SKIPPED: this process may not trace its child ({e})\n");
                    let _ = std::io::stderr().write_all(skipped.as_bytes());
                    None
                }
            }
        }
    }

    impl Drop for Tracer {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Opens fifo `path` for writing once a reader has opened it.
    async fn open_for_writing(path: &std::path::Path) -> std::fs::File {
        use std::os::unix::fs::OpenOptionsExt as _;
        loop {
            let opened = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path);
            match opened {
                Ok(file) => return file,
                // No reader yet.
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err(e) => panic!("open {}: {e}", path.display()),
            }
        }
    }

    /// The state letter of process `pid` (`S`, `Z`, ...), `None` once it is gone.
    fn state(pid: u64) -> Option<String> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit(") ").next().map(|rest| rest[..1].to_string())
    }

    /// Whether process `pid` is dead (gone, or a zombie until its new parent reaps it)
    /// within 5 s.
    async fn dies(pid: u64) -> bool {
        comes_to(pid, |state| state.is_none_or(|s| s == "Z")).await
    }

    /// Whether process `pid`'s [`state`] satisfies `settled` within 5 s.
    async fn comes_to(pid: u64, settled: impl Fn(Option<String>) -> bool) -> bool {
        let given_up = std::time::Instant::now() + Duration::from_secs(5);
        while !settled(state(pid)) && std::time::Instant::now() < given_up {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        settled(state(pid))
    }

    /// The wait for a child's exit is woken by the exit itself (a pidfd): it asks the
    /// child once, where polling would ask a dozen times in the 0.3 s this child runs
    /// (every 1, 2, 4 … up to 20 ms), however loaded the machine, and a per_event
    /// exchange ends when its child does.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_wait_for_an_exit_is_woken_by_the_exit() {
        let backend = scripted_backend("sleep 0.3");
        let (process, _stdin, _stdout) = backend.children.spawn(&backend, false).unwrap();
        assert!(process.exit.is_some(), "no pidfd");
        let far = Instant::now() + Duration::from_secs(10);
        assert_eq!(process.wait_exit(far).await, Some(Some(0)));
        let asked = process.asked.load(std::sync::atomic::Ordering::SeqCst);
        assert!(asked <= 2, "asked {asked} times: polled");
        shut_down(&backend);
    }

    #[tokio::test]
    async fn a_lock_handed_over_after_the_deadline_sends_nothing() {
        a_lock_handed_over_after_the_deadline_sends_nothing_on(false).await;
    }

    /// Shutdown drops an idle session's pipes unless a call holds the session's lock: the
    /// call that holds it next drops them, even one whose deadline passed as it waited.
    #[tokio::test]
    async fn a_session_idle_behind_a_held_lock_at_shutdown_is_dropped_by_the_next_holder() {
        a_lock_handed_over_after_the_deadline_sends_nothing_on(true).await;
    }

    /// An [`answering_backend`] whose persistent child has answered once, and a deadline
    /// no exchange here reaches.
    async fn answered_once() -> (StdioBackend, Instant) {
        let backend = answering_backend();
        let far = Instant::now() + Duration::from_secs(10);
        backend
            .exchange(REQUEST, far)
            .await
            .expect("the first exchange");
        (backend, far)
    }

    /// A session whose exchange takes the reply its child wrote before shutdown killed it
    /// does not go back into the slot: shutdown leaves no descriptor open.
    #[tokio::test]
    async fn a_session_answered_across_shutdown_is_not_kept() {
        let (backend, far) = answered_once().await;
        let mut answering = Box::pin(backend.exchange(REQUEST, far));
        // Polled once: the request is written and the reply awaited.
        tokio::select! {
            biased;
            result = &mut answering => panic!("answered at once: {result:?}"),
            () = std::future::ready(()) => {}
        }
        // The runtime held up: the child's reply waits in the pipe while shutdown kills it.
        std::thread::sleep(Duration::from_millis(200));
        backend.shut_down();
        let answered = answering.await;
        assert!(answered.is_ok(), "{answered:?}");
        assert!(
            backend.session.try_lock().expect("free").is_none(),
            "the session went back into the slot"
        );
        backend
            .killed()
            .reap(std::time::Instant::now() + SHUTDOWN_BOUND);
    }

    /// [`a_lock_handed_over_after_the_deadline_sends_nothing`], the interceptor shut down
    /// while the lock is held if `shutting_down`.
    async fn a_lock_handed_over_after_the_deadline_sends_nothing_on(shutting_down: bool) {
        let (backend, _) = answered_once().await;
        let child = backend
            .session
            .lock()
            .await
            .as_ref()
            .map(|s| s.process.clone());
        let child = child.expect("a persistent session");

        // Another exchange holds the session while this one's deadline passes; the lock is
        // handed over in the same poll that would see the deadline.
        let held = backend.session.lock().await;
        let mut waiting =
            Box::pin(backend.exchange(REQUEST, Instant::now() + Duration::from_millis(20)));
        tokio::select! {
            biased;
            result = &mut waiting => panic!("the exchange ended while the lock was held: {result:?}"),
            () = std::future::ready(()) => {}
        }
        std::thread::sleep(Duration::from_millis(40));
        if shutting_down {
            backend.shut_down();
        }
        drop(held);
        let result = waiting.await;

        if shutting_down {
            // Every delivery of a backend shut down ends so.
            assert!(
                matches!(result, Err(DeliveryError::Cancelled)),
                "{result:?}"
            );
            let slot = backend.session.try_lock().expect("free");
            assert!(slot.is_none(), "the idle session outlived shutdown");
            drop(slot);
            backend
                .killed()
                .reap(std::time::Instant::now() + SHUTDOWN_BOUND);
            return;
        }
        assert!(
            matches!(
                result,
                Err(DeliveryError::DeadlineExceeded(IoPhase::Connect))
            ),
            "{result:?}"
        );
        // Nothing was written, so the healthy child was neither confused nor killed.
        let slot = backend.session.lock().await;
        let session = slot.as_ref().expect("the session is kept");
        assert!(Arc::ptr_eq(&session.process, &child));
        assert!(session.process.exited().is_none());
        drop(slot);
        backend.shut_down();
        backend
            .killed()
            .reap(std::time::Instant::now() + SHUTDOWN_BOUND);
    }
}
