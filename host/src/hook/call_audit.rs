//! The audit record of an `ahp hook` call: exactly one per call answered with a decision,
//! saying what the harness was told.
//!
//! The hook writes it, never the interceptor (built without an audit path): only here is
//! it known what the harness is answered. Once the call settles, the record is the
//! settlement's ([`CallAudit::settled`]), or the adapter's own denial of a settlement
//! it cannot write. Before that, or instead of it, a failure answered as a denial has the
//! record the host writes when it settles a denial itself ([`Record::host_denial`],
//! [`CallAudit::record`]): an unreadable or invalid registration, a component that
//! cannot be loaded, a payload that is not the harness's, an event the component refuses,
//! a signal or the watchdog, a panic around the call, an async runtime that does not
//! start. It names the event as far as it is known ([`EventRef`]: nothing of a payload
//! that is not JSON; the type, session and tool-use id of one that names its event;
//! everything once the event is built), who settled it (`interrupted` after a signal,
//! `budget-expired` after the watchdog, else `engine-failure`), the reason the harness was
//! shown, no interceptor and no failure details — those go to the log, as for every other
//! record.
//!
//! One record per process: whichever of the two claims the call first writes it, the
//! other writes none. A failure answered while the settlement's record is being appended
//! (the watchdog or a signal as the append is under way) waits for that record instead
//! of writing a second, [`WRITE_GRACE`] at most, as long as its own record would have held
//! up the answer; if that record was still waiting for the file's lock, it is written as
//! the failure's denial, what the harness was told. If it was chosen already (the file
//! locked), the failure yields: the settlement is answered, as its record says
//! ([`CallAudit::answer_failure`]). Writing never changes the answer or the exit code: a record that cannot
//! be written is logged (in `AHP_LOG_FILE` only), and a failure's write that has not
//! finished after [`WRITE_GRACE`] is left behind. An audit file that cannot be opened is
//! refused once the interceptor is ready ([`CallAudit::ready`]), which the hook answers
//! as a denial, so nothing is decided unrecorded. A command line clap cannot parse has no
//! audit path to trust: no record.

use crate::audit::AuditLog;
use crate::interrupt::Interrupt;
use crate::vocab::EventRef;
use crate::{DecidedBy, Decision, Record};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// How long writing a record may hold up the answer to a failure (the failure's own, or
/// the settlement's chosen before it): a file system that hangs must not make the hook
/// one the harness times out on, and fails open.
pub(super) const WRITE_GRACE: Duration = Duration::from_millis(500);

/// The audit record of one hook process; see the module documentation.
#[derive(Debug)]
pub struct CallAudit {
    /// `--audit`; `None`: nothing to write.
    path: Option<PathBuf>,
    /// When the process started, for a failure record's `elapsedMs`.
    started: Instant,
    /// `path`, opened once the interceptor is ready.
    log: OnceLock<Arc<AuditLog>>,
    /// What the call's record says, and so what the harness must be told.
    choice: Arc<OnceLock<Choice>>,
    state: Mutex<State>,
}

/// What the call's record says, fixed once by whichever comes first: the settlement's
/// append as it writes (the file locked), or a failure answered before that (the
/// watchdog, a signal), whose denial the settlement's append then writes instead.
#[derive(Debug)]
enum Choice {
    Settlement,
    /// Who settled, and the reason shown.
    Failure(DecidedBy, String),
}

/// What [`CallAudit::settled`] made of a settlement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Recorded {
    /// It stands (recorded, unless there is no `--audit` or the call was answered
    /// already).
    Settled,
    /// A signal came first, or a failure answered before the record was chosen (the
    /// watchdog): the call is that failure (recorded so, with `--audit`).
    Overridden,
}

impl Recorded {
    fn of(overridden: bool) -> Recorded {
        if overridden {
            Recorded::Overridden
        } else {
            Recorded::Settled
        }
    }
}

/// Whether the call's record is written.
#[derive(Debug)]
enum State {
    /// Not yet; what is known of the event so far.
    Open(EventRef),
    /// Its append is under way, or over (written or tried).
    Claimed(Arc<Append>),
}

/// One append of the call's record, which tells when it is over.
#[derive(Debug, Default)]
struct Append {
    over: Mutex<bool>,
    told: Condvar,
}

impl Append {
    fn finish(&self) {
        *self.over.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.told.notify_all();
    }

    /// Whether the append is over, waiting `grace` at most; logs the wait.
    fn wait(&self, grace: Duration) -> bool {
        let over = self.over.lock().unwrap_or_else(PoisonError::into_inner);
        if *over {
            return true;
        }
        tracing::warn!("the call's audit record is being written: waiting for it");
        let (over, _) = self
            .told
            .wait_timeout_while(over, grace, |over| !*over)
            .unwrap_or_else(PoisonError::into_inner);
        *over
    }
}

impl CallAudit {
    /// The audit record of a hook process started now, appended to `path` (`--audit`)
    /// if there is one.
    pub fn new(path: Option<PathBuf>) -> CallAudit {
        CallAudit {
            path,
            started: Instant::now(),
            log: OnceLock::new(),
            choice: Arc::default(),
            state: Mutex::new(State::Open(EventRef::default())),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What is now known of the event, replacing what was.
    pub(super) fn identify(&self, event: EventRef) {
        if let State::Open(known) = &mut *self.state() {
            *known = event;
        }
    }

    /// The interceptor exists: opens `--audit` for the call's record. `Err` when it cannot
    /// be opened (or is refused), to be answered as a denial: nothing is decided
    /// unrecorded. `Ok(false)` when the call's record is claimed already: the call was
    /// answered meanwhile (the watchdog, a signal), and must not go on.
    pub(super) fn ready(&self) -> Result<bool, String> {
        if matches!(*self.state(), State::Claimed(_)) {
            return Ok(false);
        }
        if let Some(path) = &self.path {
            let log = AuditLog::open(path)
                .map_err(|e| format!("open audit log {}: {e}", path.display()))?;
            // An error, not a warning: the default log filter shows errors only.
            if let Some(warning) = log.warning() {
                tracing::error!(path = %path.display(), "the audit log: {warning}");
            }
            let _ = self.log.set(Arc::new(log));
        }
        Ok(true)
    }

    /// The call's append and the event as far as known, if nobody claimed it before;
    /// else the append that claimed it.
    fn claim(&self) -> Result<(EventRef, Arc<Append>), Arc<Append>> {
        let mut state = self.state();
        let event = match &mut *state {
            State::Open(event) => std::mem::take(event),
            State::Claimed(append) => return Err(Arc::clone(append)),
        };
        let append = Arc::new(Append::default());
        *state = State::Claimed(Arc::clone(&append));
        Ok((event, append))
    }

    /// Appends `record`, the settled call's as the harness is answered, unless the call's
    /// record is claimed already (the watchdog or a signal answered it meanwhile).
    /// Returns once it is written, or failed (logged): as the interceptor's own append,
    /// it holds up the answer, which the watchdog bounds.
    ///
    /// `interrupt` set by the time the record is written (once the file is locked)
    /// overrides a settlement that is not a denial: interruption overrides an approval
    /// accepted and not yet answered (failure-semantics.md). The record is then the
    /// interruption's denial, answered with `reason`, and the call must be answered as
    /// the failure it is ([`Recorded::Overridden`]); so too after a failure answered
    /// before the record was chosen ([`CallAudit::answer_failure`]), whose denial the
    /// record is.
    pub(super) async fn settled(
        &self,
        record: Record,
        interrupt: &Interrupt,
        reason: &str,
    ) -> Recorded {
        let denies = record.decision == Decision::Deny;
        let overrides = {
            let interrupt = interrupt.clone();
            move || !denies && interrupt.is_set()
        };
        let Some(log) = self.log.get().cloned() else {
            return Recorded::of(overrides());
        };
        let Ok((_, append)) = self.claim() else {
            return Recorded::Settled;
        };
        let (started, reason) = (self.started, reason.to_string());
        let choice = Arc::clone(&self.choice);
        let appended = tokio::task::spawn_blocking(move || {
            let (mut chosen, mut overridden) = (false, None);
            let appended = log.append_chosen(|| {
                chosen = true;
                let choice = choice.get_or_init(|| match overrides() {
                    true => Choice::Failure(DecidedBy::Interrupted, reason),
                    false => Choice::Settlement,
                });
                let Choice::Failure(decided_by, shown) = choice else {
                    return &record;
                };
                let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                let mut denial = Record::host_denial(record.event.clone(), *decided_by, elapsed_ms);
                denial.reason = Some(shown.clone());
                overridden.insert(denial)
            });
            append.finish();
            let written = appended.map_err(|e| format!("{}: {e}", log.path().display()));
            // An append that failed before a record was chosen (the file could not be
            // locked, or opened again) chose nothing: a signal still overrides.
            let recorded = match chosen {
                true => Recorded::of(overridden.is_some()),
                false => Recorded::of(overrides()),
            };
            (recorded, written)
        })
        .await;
        let (recorded, written) = appended.unwrap_or_else(|join| {
            let recorded = Recorded::of(!denies && interrupt.is_set());
            (recorded, Err(join.to_string()))
        });
        if let Err(e) = written {
            tracing::error!("append the call's audit record: {e}");
        }
        recorded
    }

    /// Whether a failure settled by `decided_by` and answered with `reason` (the watchdog,
    /// a signal) may be the call's answer, and so its record: yes, unless the
    /// settlement's record was chosen first (being written, or written), whose verdict
    /// must then be the answer. Decided for good: a settlement's append that chooses later
    /// writes this failure's denial instead.
    pub(super) fn answer_failure(&self, decided_by: DecidedBy, reason: &str) -> bool {
        let choice = self
            .choice
            .get_or_init(|| Choice::Failure(decided_by, reason.to_string()));
        !matches!(choice, Choice::Settlement)
    }

    /// Appends the record of a denial settled by `decided_by` and answered with `reason`,
    /// unless there is no `--audit` or the call's record is claimed already; one being
    /// appended is waited for instead. Waits [`WRITE_GRACE`] at most; a failure to write
    /// goes to the log.
    pub(crate) fn record(&self, decided_by: DecidedBy, reason: &str) {
        let Some(path) = self.path.clone() else {
            return;
        };
        let (event, append) = match self.claim() {
            Ok(claimed) => claimed,
            Err(claimed) => {
                // Written instead of the settlement's, if that is not chosen yet.
                self.answer_failure(decided_by, reason);
                if !claimed.wait(WRITE_GRACE) {
                    tracing::error!("append the call's audit record: not written in time");
                }
                return;
            }
        };
        let elapsed_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut record = Record::host_denial(event, decided_by, elapsed_ms);
        // What the harness was shown.
        record.reason = Some(reason.to_string());
        let log = self.log.get().cloned();
        // A hung file system holds up the answer for the grace alone.
        let outcome = super::bounded("ahp-call-audit", WRITE_GRACE, move || {
            let appended = match log {
                Some(log) => log.append(&record),
                None => AuditLog::open(&path).and_then(|log| log.append(&record)),
            };
            append.finish();
            appended.map_err(|e| format!("{}: {e}", path.display()))
        });
        if let Err(e) = outcome.and_then(|appended| appended) {
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

    /// A call's audit writing to `audit.jsonl` in a new directory (kept while held).
    fn audited_in_temp() -> (tempfile::TempDir, std::path::PathBuf, CallAudit) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let audit = CallAudit::new(Some(path.clone()));
        (dir, path, audit)
    }

    const FAILED: &str = "Policy evaluation failed.";

    /// A settlement's record: no objection to a known call.
    fn no_objection() -> Record {
        let event = EventRef {
            event_type: Some("tool.before".into()),
            call: Some("call_1".into()),
            ..EventRef::default()
        };
        let mut record = Record::host_denial(event, DecidedBy::NoObjection, 1);
        record.decision = Decision::Allow;
        record.reason = None;
        record
    }

    /// A ready call's audit whose file another process holds locked (the handle
    /// returned), in a new directory (kept while held).
    fn held_by_another_process() -> (
        tempfile::TempDir,
        std::path::PathBuf,
        std::fs::File,
        Arc<CallAudit>,
    ) {
        let (dir, path, audit) = audited_in_temp();
        let held = std::fs::File::create(&path).unwrap();
        held.lock().unwrap();
        assert_eq!(audit.ready(), Ok(true));
        (dir, path, held, Arc::new(audit))
    }

    /// Writes `record` as the settlement while another process holds the file's lock,
    /// a signal coming meanwhile; returns what it made of it and the file's records.
    async fn settled_after_a_signal(record: Record) -> (Recorded, Vec<serde_json::Value>) {
        let (_dir, path, held, audit) = held_by_another_process();
        let interrupt = Interrupt::new();
        let (settling, signalled) = (Arc::clone(&audit), interrupt.clone());
        let settled =
            tokio::spawn(async move { settling.settled(record, &signalled, FAILED).await });
        while matches!(*audit.state(), State::Open(_)) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        interrupt.interrupt();
        held.unlock().unwrap();
        let recorded = settled.await.unwrap();
        (recorded, lines(&path))
    }

    /// A signal while no objection waits to be written overrides it: the record is the
    /// interruption's denial of the same call, and the call is answered as one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_signal_before_no_objection_is_written_overrides_it() {
        let (recorded, records) = settled_after_a_signal(no_objection()).await;
        assert_eq!(recorded, Recorded::Overridden);
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["decision"], "deny");
        assert_eq!(records[0]["decidedBy"], "interrupted");
        assert_eq!(records[0]["reason"], FAILED);
        assert_eq!(records[0]["event"]["call"], "call_1");
    }

    /// A denial stands whatever comes after it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_signal_does_not_override_a_denial() {
        let (recorded, records) = settled_after_a_signal(backend_deny()).await;
        assert_eq!(recorded, Recorded::Settled);
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["decidedBy"], "backend-deny");
    }

    /// Without `--audit` a signal before the answer still overrides no objection.
    #[tokio::test]
    async fn a_signal_overrides_no_objection_without_an_audit_log() {
        let audit = CallAudit::new(None);
        assert_eq!(audit.ready(), Ok(true));
        let interrupt = Interrupt::new();
        let settled = audit.settled(no_objection(), &interrupt, FAILED).await;
        assert_eq!(settled, Recorded::Settled);
        interrupt.interrupt();
        let settled = audit.settled(no_objection(), &interrupt, FAILED).await;
        assert_eq!(settled, Recorded::Overridden);
    }

    /// A signal overrides no objection also when its record cannot be written: the
    /// log removed since it was opened and a directory at its path.
    #[tokio::test]
    async fn a_signal_overrides_no_objection_whose_record_cannot_be_written() {
        let (_dir, path, audit) = audited_in_temp();
        assert_eq!(audit.ready(), Ok(true));
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let interrupt = Interrupt::new();
        interrupt.interrupt();
        let settled = audit.settled(no_objection(), &interrupt, FAILED).await;
        assert_eq!(settled, Recorded::Overridden);
        assert!(path.is_dir(), "nothing written");
    }

    /// A settlement's record: a backend's deny.
    fn backend_deny() -> Record {
        let mut record = Record::host_denial(EventRef::default(), DecidedBy::BackendDeny, 1);
        record.reason = Some("not this".into());
        record
    }

    #[test]
    fn one_record_naming_what_is_known() {
        let (_dir, path, audit) = audited_in_temp();
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
        assert_eq!(
            audit.ready(),
            Ok(false),
            "written: the call goes no further"
        );
    }

    /// The watchdog (or a signal, or an event the component refuses) after the
    /// interceptor is ready and before the call settled: its record, and the settlement
    /// that comes after it adds none.
    #[tokio::test]
    async fn a_failure_after_the_interceptor_is_ready_is_the_record() {
        let (_dir, path, audit) = audited_in_temp();
        assert_eq!(audit.ready(), Ok(true));
        audit.record(DecidedBy::BudgetExpired, "Policy evaluation failed.");
        audit
            .settled(backend_deny(), &Interrupt::new(), FAILED)
            .await;
        let records = lines(&path);
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["decidedBy"], "budget-expired");
    }

    /// The settlement's record first: a failure after it adds none.
    #[tokio::test]
    async fn the_settlement_written_first_is_the_record() {
        let (_dir, path, audit) = audited_in_temp();
        assert_eq!(audit.ready(), Ok(true));
        audit
            .settled(backend_deny(), &Interrupt::new(), FAILED)
            .await;
        audit
            .settled(backend_deny(), &Interrupt::new(), FAILED)
            .await;
        audit.record(DecidedBy::BudgetExpired, "Policy evaluation failed.");
        let records = lines(&path);
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["decidedBy"], "backend-deny");
    }

    /// The watchdog while the settlement's record waits for the file's lock (another
    /// process appending): it waits for that record rather than writing a second, and
    /// the record is the watchdog's denial, which the harness was told, not the no
    /// objection it never got.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failure_while_the_settlement_is_written_waits_for_it() {
        let (_dir, path, held, audit) = held_by_another_process();
        let settling = Arc::clone(&audit);
        let settled = tokio::spawn(async move {
            settling
                .settled(no_objection(), &Interrupt::new(), FAILED)
                .await
        });
        while matches!(*audit.state(), State::Open(_)) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (failing, written) = (Arc::clone(&audit), path.clone());
        // What the file holds once the watchdog is done, and the process would exit.
        let watchdog = std::thread::spawn(move || {
            failing.record(DecidedBy::BudgetExpired, "Policy evaluation failed.");
            lines(&written)
        });
        // Once the watchdog has said what it answered (it waits for the append then).
        let until = Instant::now() + Duration::from_secs(10);
        while audit.choice.get().is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        held.unlock().unwrap();
        let records = watchdog.join().unwrap();
        assert_eq!(settled.await.unwrap(), Recorded::Overridden);
        assert_eq!(lines(&path), records);
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["decision"], "deny", "{records:?}");
        assert_eq!(records[0]["decidedBy"], "budget-expired", "{records:?}");
        assert_eq!(records[0]["reason"], FAILED, "{records:?}");
        assert_eq!(records[0]["event"]["call"], "call_1", "{records:?}");
    }

    /// A failure answered once the settlement's record was chosen (written here) may not
    /// be the answer: the settlement's verdict is, as its record says.
    #[tokio::test]
    async fn a_failure_after_the_settlement_was_chosen_yields_to_it() {
        let (_dir, path, audit) = audited_in_temp();
        assert_eq!(audit.ready(), Ok(true));
        let settled = audit
            .settled(no_objection(), &Interrupt::new(), FAILED)
            .await;
        assert_eq!(settled, Recorded::Settled);
        assert!(!audit.answer_failure(DecidedBy::BudgetExpired, FAILED));
        let records = lines(&path);
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["decidedBy"], "no-objection");
    }

    /// A failure answered before the settlement's record was chosen is the answer, and
    /// the settlement's append writes its denial, what the harness was told.
    #[tokio::test]
    async fn a_failure_answered_first_is_what_the_settlement_writes() {
        let (_dir, path, audit) = audited_in_temp();
        assert_eq!(audit.ready(), Ok(true));
        assert!(audit.answer_failure(DecidedBy::BudgetExpired, FAILED));
        let settled = audit
            .settled(no_objection(), &Interrupt::new(), FAILED)
            .await;
        assert_eq!(settled, Recorded::Overridden);
        assert!(
            audit.answer_failure(DecidedBy::Interrupted, FAILED),
            "still"
        );
        let records = lines(&path);
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["decision"], "deny");
        assert_eq!(records[0]["decidedBy"], "budget-expired");
        assert_eq!(records[0]["reason"], FAILED);
    }

    #[test]
    fn an_audit_file_that_cannot_be_opened_is_refused_when_ready() {
        let dir = tempfile::tempdir().unwrap();
        let audit = CallAudit::new(Some(dir.path().to_path_buf()));
        let refused = audit.ready().unwrap_err();
        assert!(refused.starts_with("open audit log"), "{refused}");
        assert_eq!(CallAudit::new(None).ready(), Ok(true));
    }
}
