//! The audit record of an `ahp hook` call that failed before its interceptor existed.
//!
//! Once the interceptor is built it writes the call's record itself (the settlement, or
//! the host's own denial for a component failure, an interruption, a shutdown). Before
//! that nobody would: an unreadable or invalid registration, a component that cannot be
//! loaded, a payload that is not the harness's, a signal or the watchdog while any of that
//! is under way, a panic around the call, an async runtime that does not start. Each is
//! answered as the adapter's denial, and [`FailureAudit`] appends its record to `--audit`,
//! so an operator auditing every decision sees these too. The record is the one the host
//! writes when it settles a denial itself ([`Record::host_denial`]): the event as far as it
//! is known ([`EventRef`]: nothing of a payload that is not JSON; the type, session and
//! tool-use id of one that names its event; everything once the event is built), who
//! settled it (`interrupted` after a signal, `budget-expired` after the watchdog, else
//! `engine-failure`), the reason the harness was shown, no interceptor and no failure
//! details — those go to the log, as for every other record.
//!
//! At most one record per process, and none once the interceptor has taken over
//! ([`FailureAudit::hand_over`]): the two never both write for one call. Writing it never
//! changes the answer or the exit code: a record that cannot be written is logged (in
//! `AHP_LOG_FILE` only), and a write that has not finished after [`WRITE_GRACE`] is left
//! behind. A command line clap cannot parse has no audit path to trust: no record.

use crate::audit::AuditLog;
use crate::vocab::EventRef;
use crate::{DecidedBy, Record};
use std::path::PathBuf;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

/// How long writing the record may hold up the answer: a file system that hangs must not
/// make the hook one the harness times out on, and fails open.
const WRITE_GRACE: Duration = Duration::from_millis(500);

/// The failure record of one hook process; see the module documentation.
#[derive(Debug)]
pub struct FailureAudit {
    /// `--audit`; `None`: nothing to write.
    path: Option<PathBuf>,
    /// When the process started, for the record's `elapsedMs`.
    started: Instant,
    state: Mutex<State>,
}

/// Who writes the call's record.
#[derive(Debug)]
enum State {
    /// Nobody yet; what is known of the event so far.
    Open(EventRef),
    /// The interceptor exists: it writes the call's records.
    HandedOver,
    /// This failure's record was written (or tried).
    Written,
}

impl FailureAudit {
    /// The failure record of a hook process started now, appended to `path` (`--audit`)
    /// if there is one.
    pub fn new(path: Option<PathBuf>) -> FailureAudit {
        FailureAudit {
            path,
            started: Instant::now(),
            state: Mutex::new(State::Open(EventRef::default())),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What is now known of the event, replacing what was.
    pub(super) fn identify(&self, event: EventRef) {
        if let State::Open(known) = &mut *self.state() {
            *known = event;
        }
    }

    /// The interceptor exists and writes the call's records from here on. `false` when
    /// this failure's record is written already: the call was answered as a failure, and
    /// must not go on to a second record.
    pub(super) fn hand_over(&self) -> bool {
        let mut state = self.state();
        match *state {
            State::Written => false,
            _ => {
                *state = State::HandedOver;
                true
            }
        }
    }

    /// Appends the record of a denial settled by `decided_by` and answered with `reason`,
    /// unless there is no `--audit`, the interceptor took over, or it was written already.
    /// Waits [`WRITE_GRACE`] at most; a failure to write goes to the log.
    pub(crate) fn record(&self, decided_by: DecidedBy, reason: &str) {
        let Some(path) = self.path.clone() else {
            return;
        };
        let event = {
            let mut state = self.state();
            let State::Open(event) = &mut *state else {
                return;
            };
            let event = std::mem::take(event);
            *state = State::Written;
            event
        };
        let elapsed_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut record = Record::host_denial(event, decided_by, elapsed_ms);
        // What the harness was shown.
        record.reason = Some(reason.to_string());
        let (done, written) = mpsc::channel();
        // A thread of its own, so a hung file system holds up the answer for the grace
        // alone; the process exits from under it.
        let spawned = std::thread::Builder::new()
            .name("ahp-failure-audit".into())
            .spawn(move || {
                let appended = AuditLog::open(&path).and_then(|log| log.append(&record));
                let _ = done.send(appended.map_err(|e| format!("{}: {e}", path.display())));
            });
        let outcome = match spawned {
            Ok(_) => written
                .recv_timeout(WRITE_GRACE)
                .unwrap_or_else(|_| Err("not written in time".to_string())),
            Err(e) => Err(format!("start its thread: {e}")),
        };
        if let Err(e) = outcome {
            tracing::error!("append the failure's audit record: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(path: &std::path::Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[test]
    fn one_record_naming_what_is_known() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let audit = FailureAudit::new(Some(path.clone()));
        audit.identify(EventRef {
            event_type: Some("tool.before".into()),
            session: Some("s".into()),
            ..EventRef::default()
        });
        audit.record(DecidedBy::EngineFailure, "Policy evaluation failed.");
        audit.record(DecidedBy::EngineFailure, "Policy evaluation failed.");
        let records = lines(&path);
        assert_eq!(records.len(), 1, "{records:?}");
        let record = &records[0];
        assert_eq!(record["decision"], "deny");
        assert_eq!(record["decidedBy"], "engine-failure");
        assert_eq!(record["event"]["type"], "tool.before");
        assert_eq!(record["event"]["session"], "s");
        assert_eq!(record["event"]["id"], serde_json::Value::Null);
        assert_eq!(record["interceptors"], serde_json::json!([]));
        assert!(!audit.hand_over(), "written: no hand-over after it");
    }

    #[test]
    fn nothing_once_the_interceptor_took_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let audit = FailureAudit::new(Some(path.clone()));
        assert!(audit.hand_over());
        audit.record(DecidedBy::Interrupted, "Policy evaluation failed.");
        assert!(!path.exists());
    }
}
