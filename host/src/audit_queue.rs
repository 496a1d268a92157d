//! An interceptor's audit records reach its log through one thread of their own, in the
//! order the calls hand them over. A lock another process holds on the file parks that
//! thread only — never a call past its budget, never the runtime's blocking pool (which
//! name lookups share) — and the records queue behind it, in order, until it is free.

use crate::audit::AuditLog;
use ahp_vocab::Record;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long dropping the queue waits for the records still in it: a process that exits
/// right after dropping its interceptor keeps them, and one whose log another process
/// keeps locked is not held for long.
const DRAIN_BOUND: Duration = Duration::from_secs(2);

/// What the record to append is replaced with, chosen once the file is locked: a call
/// whose decision is not handed out yet is recorded as what it is by then.
pub(crate) type Instead = Box<dyn FnOnce(&Record) -> Option<Record> + Send>;

/// What the writer thread is handed, in order.
enum Queued {
    /// One record to append (or what `instead` chooses), and whom to tell once it is
    /// synced.
    Record {
        // Boxed: a flush mark is small.
        record: Box<Record>,
        instead: Option<Instead>,
        written: Option<oneshot::Sender<()>>,
    },
    /// Whom to tell once everything handed over before is written.
    Flush(mpsc::Sender<()>),
}

/// The queue in front of an audit log's writer thread.
pub(crate) struct AuditQueue {
    /// `None` once dropped: the writer ends when the queue is closed and empty.
    queue: Option<mpsc::Sender<Queued>>,
    /// Closed by the writer when it ends.
    drained: Mutex<mpsc::Receiver<()>>,
    /// How many records were queued, and how many were when a flush last gave up
    /// waiting (the file locked elsewhere): dropping the queue waits no more for the same
    /// lock unless a record was queued since.
    counts: Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    queued: AtomicU64,
    /// `queued` at the flush that gave up, plus one; 0 while none has.
    gave_up_at: AtomicU64,
}

impl AuditQueue {
    /// Starts the writer thread of `log`.
    pub fn start(log: AuditLog) -> std::io::Result<AuditQueue> {
        let (queue, queued) = mpsc::channel::<Queued>();
        let (done, drained) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("ahp-audit".into())
            .spawn(move || {
                for job in queued {
                    match job {
                        Queued::Record {
                            record,
                            instead,
                            written,
                        } => {
                            let mut chosen = None;
                            let appended = log.append_chosen(|| {
                                match instead.and_then(|instead| instead(&record)) {
                                    Some(other) => chosen.insert(other),
                                    None => &record,
                                }
                            });
                            if let Err(e) = appended {
                                tracing::error!(path = %log.path().display(), error = %e, "audit append failed");
                            }
                            if let Some(written) = written {
                                let _ = written.send(());
                            }
                        }
                        Queued::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
                drop(done);
            })?;
        Ok(AuditQueue {
            queue: Some(queue),
            drained: Mutex::new(drained),
            counts: Arc::default(),
        })
    }

    /// Appends `record`, synced, or what `instead` replaces it with once the file is
    /// locked, and returns once it is; or at `until`, or once `stopped` ends (a signal, a
    /// shutdown), if either comes first (the file locked elsewhere), leaving it queued,
    /// to be written once it can be.
    pub async fn write(
        &self,
        record: Record,
        instead: Option<Instead>,
        until: Option<Instant>,
        stopped: impl std::future::Future<Output = ()>,
    ) {
        let (written, synced) = oneshot::channel();
        self.hand_over(Queued::Record {
            record: Box::new(record),
            instead,
            written: Some(written),
        });
        let past_budget = async {
            match until {
                Some(until) => tokio::time::sleep_until(until.into()).await,
                None => std::future::pending().await,
            }
        };
        let synced = tokio::select! {
            synced = synced => synced.is_ok(),
            () = past_budget => false,
            () = stopped => false,
        };
        if !synced {
            tracing::error!(
                "the audit record was not written by the call's budget or before it was \
                 stopped (the audit file locked elsewhere?): it is written once the file can be"
            );
        }
    }

    /// Queues `record` without waiting for it (a call dropped, with nothing to await).
    pub fn write_detached(&self, record: Record) {
        self.hand_over(Queued::Record {
            record: Box::new(record),
            instead: None,
            written: None,
        });
    }

    /// Marks what is queued now; [`Flushed::wait`] returns once all of it is written.
    pub fn flush(&self) -> Flushed {
        let (done, flushed) = mpsc::channel();
        // Counted before the marker goes in: a record another thread queues in between
        // stands behind it and is counted after this read (`hand_over`), so it counts as
        // queued since (an undercount only makes a later drop wait for it).
        let queued_before = self.counts.queued.load(Ordering::SeqCst);
        self.hand_over(Queued::Flush(done));
        Flushed {
            done: flushed,
            queued_before,
            counts: Arc::clone(&self.counts),
        }
    }

    /// Puts `queued` in the queue. A record is counted once it is in: a record sent behind
    /// a flush's marker is then always counted after the flush read the count, so a drop
    /// after that flush gave up still waits for it (counted before it was sent, a record
    /// could land behind the marker yet be in the flush's count, and be left unwritten).
    fn hand_over(&self, queued: Queued) {
        let record = matches!(queued, Queued::Record { .. });
        let sent = match &self.queue {
            Some(queue) => queue.send(queued).is_ok(),
            None => false,
        };
        if !sent {
            tracing::error!("the audit writer has stopped: a record was not written");
        } else if record {
            self.counts.queued.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The records queued before an [`AuditQueue::flush`], being written.
pub(crate) struct Flushed {
    /// Closed once they are.
    done: mpsc::Receiver<()>,
    /// How many records had been queued by then.
    queued_before: u64,
    counts: Arc<Counts>,
}

impl Flushed {
    /// Blocks until the records queued before the flush are written, or for
    /// [`DRAIN_BOUND`] at most (another process holding the file's lock).
    pub fn wait(self) {
        if let Err(mpsc::RecvTimeoutError::Timeout) = self.done.recv_timeout(DRAIN_BOUND) {
            let gave_up_at = self.queued_before + 1;
            self.counts.gave_up_at.store(gave_up_at, Ordering::SeqCst);
            tracing::error!(
                "audit records still queued at shutdown (the audit file locked elsewhere?)"
            );
        }
    }
}

impl Drop for AuditQueue {
    /// Closes the queue and waits (up to [`DRAIN_BOUND`]) for what is still in it, unless
    /// a flush gave up on it already and nothing was queued since.
    fn drop(&mut self) {
        self.queue = None;
        let counts = &self.counts;
        let gave_up_at = counts.gave_up_at.load(Ordering::SeqCst);
        if gave_up_at != 0 && counts.queued.load(Ordering::SeqCst) + 1 == gave_up_at {
            return;
        }
        let drained = self.drained.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Err(mpsc::RecvTimeoutError::Timeout) = drained.recv_timeout(DRAIN_BOUND) {
            tracing::error!("audit records still queued when the interceptor was dropped");
        }
    }
}
