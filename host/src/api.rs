//! The owned client: an [`Interceptor`] for one registration, and the [`HookCall`] of
//! each tool call.
//!
//! A call runs in a pooled component instance (see `pool`), bounded by the call's
//! legitimate length plus a small grace, and settles. Anything that goes wrong around
//! the component — a trap, an epoch expiry, a host error — settles as a denial recorded
//! as `engine-failure`: interception that did not complete is never permission.

use crate::audit::AuditLog;
use crate::audit_queue::{AuditQueue, Flushed, Instead};
use crate::backends::{self, Backends};
use crate::bindings::interceptor::{self as wit, Delivery};
use crate::builder::InterceptorBuilder;
use crate::clock;
use crate::convert::{from_wit, to_wit};
use crate::error::Error;
use crate::interrupt::Interrupt;
use crate::lanes::Unserved;
use crate::observe::{deliver_observers, Results};
use crate::options::Options;
use crate::pool::{Admission, Limit, Pool, Ready};
use crate::runtime::Runtime;
use crate::settlement::{
    dropped_by, from_component, host_settlement, once_read, overridden, overriding, stopped_by,
    Observed, ObserverReport, Settlement,
};
use crate::state::HostState;
use ahp_vocab::{
    DecidedBy, Decision, EffectKind, EventRef, ObserverResult, Record, OBSERVER_TIMEOUT_MS,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use tracing::Instrument as _;
use wasmtime::error::Context as _;

/// An AHP interceptor for one registration.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use ahp_host::{Decision, EffectKind, Interceptor, Options};
/// let registration = std::fs::read_to_string("registration.json")?;
/// let interceptor = Interceptor::new(&registration, Options::default()).await?;
/// let event = std::fs::read_to_string("tool-before.json")?;
/// let settled = interceptor.intercept(&event, &[EffectKind::Deny], None).await?;
/// if settled.decision == Decision::Deny {
///     println!("blocked: {}", settled.reason.unwrap_or_default());
/// }
/// interceptor.shutdown();
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Interceptor {
    inner: Arc<Inner>,
}

struct Inner {
    warnings: Vec<String>,
    backends: Arc<Backends>,
    bound: Duration,
    pool: Pool,
    audit: Option<AuditQueue>,
    shut_down: AtomicBool,
    /// Set by shutdown: every in-flight call ends (as a `shutdown` denial).
    closing: Interrupt,
    /// The longest one observer delivery may take (the component's own bound is 2 s).
    observer_timeout: Duration,
}

impl Interceptor {
    /// Validates `registration` inside the component and prepares its backends.
    pub async fn new(registration: &str, options: Options) -> Result<Interceptor, Error> {
        InterceptorBuilder::new()
            .options(options)
            .build(registration)
            .await
    }

    /// The interceptor of `registration` on `runtime` (see [`InterceptorBuilder`]).
    async fn start(
        runtime: Arc<Runtime>,
        registration: &str,
        options: Options,
    ) -> Result<Interceptor, Error> {
        // A probe instance validates the registration and tells which backends to serve.
        // It holds one of the Engine's slots like any instance.
        let slot = match runtime.slots() {
            Some(slots) => Some(slots.for_setup().await.map_err(Error::setup)?),
            None => None,
        };
        let ticking = runtime.ticking();
        let (mut store, plugin) = runtime
            .instantiate(HostState::new(
                Arc::new(Backends::default()),
                Interrupt::new(),
            ))
            .await
            .map_err(Error::setup)?;
        let engine_api = plugin.ahp_interceptor_interceptor().engine();
        let everything = engine_api
            .call_interceptable(&mut store)
            .await
            .map_err(Error::setup)?;
        let declaration = options
            .declaration
            .resolve(everything)
            .map_err(|e| Error::setup(wasmtime::format_err!(e)))?;
        let engine = engine_api
            .call_load(&mut store, registration, &declaration)
            .await
            .map_err(Error::setup)?
            .map_err(|problems| refused_at_load(from_wit(problems)))?;
        let plan = engine_api
            .call_plan(&mut store, engine)
            .await
            .map_err(Error::setup)?;
        let warnings = engine_api
            .call_warnings(&mut store, engine)
            .await
            .map_err(Error::setup)?;
        let claimed_bound_ms = engine_api
            .call_bound_ms(&mut store, engine)
            .await
            .map_err(Error::setup)?;
        let chain_timeouts = engine_api
            .call_chain_timeouts(&mut store, engine)
            .await
            .map_err(Error::setup)?;
        let instances = options.instances().map_err(Error::setup)?;
        drop((store, plugin, ticking));
        // Given back once the store is gone, which frees the Engine's slot.
        drop(slot);
        // The plan is the component's word; what it may run and where it may send is the
        // registration's.
        crate::planned::check(registration, &plan)
            .map_err(|e| Error::setup(wasmtime::format_err!(e)))?;
        // So is the longest a call may run: no more than the registration's timeouts.
        let bound_ms = crate::planned::bound_ms(registration, claimed_bound_ms);
        let chain_timeouts = crate::planned::chain_timeouts(chain_timeouts, bound_ms);
        let config = options.backend_config().map_err(Error::setup)?;
        let backends = Backends::new(plan, &config)
            .map_err(|e| Error::setup(wasmtime::format_err!(e)))?
            .with_subscriptions(crate::planned::subscription_counts(registration));
        let backends = Arc::new(backends);
        let mut warnings: Vec<String> =
            from_wit(warnings).iter().map(ToString::to_string).collect();
        warnings.extend(backends.warnings());
        let audit = match &options.audit_path {
            Some(path) => {
                let log = AuditLog::open(path);
                if let Some(warning) = log.as_ref().ok().and_then(AuditLog::warning) {
                    warnings.push(format!("audit log {}: {warning}", path.display()));
                }
                Some(
                    log.and_then(AuditQueue::start)
                        .with_context(|| format!("open audit log {}", path.display()))
                        .map_err(Error::setup)?,
                )
            }
            None => None,
        };
        let closing = Interrupt::new();
        let pool = Pool::new(
            runtime,
            registration.to_string(),
            declaration,
            backends.clone(),
            closing.clone(),
            instances,
            chain_timeouts,
        );
        Ok(Interceptor {
            inner: Arc::new(Inner {
                warnings,
                backends,
                bound: Duration::from_millis(bound_ms),
                pool,
                audit,
                shut_down: AtomicBool::new(false),
                closing,
                observer_timeout: options
                    .observer_timeout
                    .unwrap_or(Duration::from_millis(OBSERVER_TIMEOUT_MS)),
            }),
        })
    }

    /// The longest one intercept call's chain may run: the component's `bound-ms`, but no
    /// more than the registration's timeouts add up to (another build may claim more). At
    /// the linker level, bound each call by this plus [`crate::BOUND_MARGIN`], as this
    /// interceptor bounds its own.
    pub fn call_bound(&self) -> Duration {
        self.inner.bound
    }

    /// The registration this interceptor was built from: the one to load in a store of
    /// the embedder's whose data is [`Interceptor::host_state`]. That state delivers to
    /// this registration's backends, by id: under another registration, a backend id this
    /// one lacks is a refused connection, settled by its policy (under fail-open, allowed
    /// unasked), and one it shares reaches this registration's backend of that id, asked
    /// under the other's subscriptions and policies.
    pub fn registration(&self) -> &str {
        self.inner.pool.registration()
    }

    /// The data for a store of the embedder's own (see `add_to_linker`): serves this
    /// interceptor's backends, and ends its calls when the interceptor shuts down.
    pub fn host_state(&self) -> HostState {
        HostState::new(self.inner.backends.clone(), self.inner.closing.clone())
    }

    /// The declared event whose intercept subscriptions' timeouts add up to the most (they
    /// run one after another), and that sum, as the component counts them: what a hook's
    /// budget must cover ([`crate::hook`] install).
    #[cfg(feature = "cli")]
    pub(crate) fn longest_chain(&self) -> Option<(&str, Duration)> {
        self.inner.pool.longest_chain()
    }

    /// The files the registration's credential bindings name (`file:` references), each
    /// with its backend's id and the field that names it ([`crate::hook`] install).
    #[cfg(feature = "cli")]
    pub(crate) fn secret_files(&self) -> Vec<(&str, &'static str, &str)> {
        self.inner.backends.secret_files()
    }

    /// Valid but questionable settings: the registration's, each naming its JSON path,
    /// then the host's (e.g. plain http off loopback, each naming its backend, the first
    /// 100 by backend id and a line counting the rest; an audit log everybody can read or
    /// write).
    pub fn warnings(&self) -> &[String] {
        &self.inner.warnings
    }

    /// Settles one event of a declared interceptable type. `effects` narrows the event's
    /// declaration for this call (empty: as declared; `deny` must stay where declared);
    /// `budget` bounds the whole call.
    pub async fn intercept(
        &self,
        event: &str,
        effects: &[EffectKind],
        budget: Option<Duration>,
    ) -> Result<Settlement, Error> {
        self.intercept_with(event, effects, budget, &Interrupt::new())
            .await
    }

    /// Sends `hooks/observe` for a non-decision event (e.g. `turn.end`, or a `tool.after`
    /// no interceptor selects) to every matching observe subscription, concurrently, each
    /// bounded by its observer deadline and `budget`. An event of a declared type that an
    /// intercept subscription selects is refused (invalid input at `event/type`): it is
    /// for [`Interceptor::intercept`], and observed it would ask none of its interceptors;
    /// a denied tool's `tool.after` (`outcome: "denied"`) is observed all the same, as the
    /// decision already made. Reports one result per delivery; an observer's failure is recorded,
    /// never raised.
    pub async fn observe(&self, event: &str, budget: Option<Duration>) -> Result<Observed, Error> {
        if self.inner.shut_down.load(Ordering::SeqCst) {
            return Err(Error::shut_down(host_settlement(
                event,
                DecidedBy::Shutdown,
                Instant::now(),
            )));
        }
        let started = Instant::now();
        // A budget past the end of time (`Duration::MAX`) bounds nothing.
        let budget_at = budget.and_then(|b| started.checked_add(b));
        // No chain: the component only prepares the notifications.
        let limit = Limit {
            bound: Duration::ZERO,
            budget: budget_at,
        };
        let budget_ns = budget_at.map(clock::to_nanos);
        let started_ns = clock::to_nanos(started);
        let prepared = self
            .inner
            .pool
            .in_component(
                Admission::NoIo { budget: budget_at },
                limit,
                &Interrupt::new(),
                async |ready: &mut Ready| {
                    let engine_api = ready.plugin.ahp_interceptor_interceptor().engine();
                    engine_api
                        .call_observe(&mut ready.store, ready.engine, event, budget_ns, started_ns)
                        .await
                },
            )
            .await;
        let deliveries = match prepared {
            Ok(Ok(deliveries)) => deliveries,
            Ok(Err(problems)) => return Err(Error::invalid_input(from_wit(problems))),
            Err(Unserved::ShutDown) => {
                let denial = host_settlement(event, DecidedBy::Shutdown, started);
                return Err(Error::shut_down(denial));
            }
            Err(Unserved::BudgetExpired) => {
                // Logged as a notification the budget withheld is (below): nothing else
                // records it. How many subscriptions went unserved only the component
                // knows, and it never ran.
                let event = EventRef::read(event);
                tracing::error!(
                    event_id = event.id.as_deref().unwrap_or_default(),
                    event_type = event.event_type.as_deref().unwrap_or_default(),
                    "the budget ran out while waiting for an instance: no observer was sent the event"
                );
                return Ok(Observed {
                    observers: Vec::new(),
                    engine_failure: false,
                    budget_expired: true,
                });
            }
            Err(_) => {
                return Ok(Observed {
                    observers: Vec::new(),
                    engine_failure: true,
                    budget_expired: false,
                })
            }
        };
        let backends: Vec<String> = deliveries.iter().map(|d| d.backend.clone()).collect();
        let results = self
            .deliver_observers(deliveries, &Interrupt::new(), &Results::default())
            .await;
        let observers: Vec<ObserverReport> = backends
            .into_iter()
            .zip(results)
            .map(|(backend, result)| ObserverReport { backend, result })
            .collect();
        // No audit record holds these (nothing was decided): an observer that failed is
        // recorded in the log (digest §15, observer delivery failures), at the level a
        // log shows by default.
        for report in &observers {
            if report.result != ObserverResult::Delivered {
                tracing::error!(backend = %report.backend, result = report.result.as_str(), "observer delivery did not complete");
            }
        }
        Ok(Observed {
            observers,
            engine_failure: false,
            budget_expired: false,
        })
    }

    /// As [`Interceptor::intercept`], interruptible through `interrupt`: until the audit
    /// record is written, the owned observers' deliveries included, an interruption (or
    /// shutdown, or the future dropped) makes any decision but a denial the call's
    /// `interrupted` (`shutdown`) denial: the caller has not been handed it yet. While the
    /// record waits for another process's lock on the file, so does the decision: it is
    /// the one found once the file is locked, or, if the wait ends first (the budget and
    /// 250 ms passed, or 250 ms after a signal), the one found then — the record says the
    /// same, whichever comes first.
    pub async fn intercept_with(
        &self,
        event: &str,
        effects: &[EffectKind],
        budget: Option<Duration>,
        interrupt: &Interrupt,
    ) -> Result<Settlement, Error> {
        let mut call = self.settle(event, effects, budget, interrupt).await?;
        // Nobody has been handed the decision until this returns: an interruption (or a
        // shutdown) while the observers run overrides it as one before would
        // ("interruption overrides fail-open or accepted approval"), and so does dropping
        // this future. `settle`'s caller has it already.
        call.unanswered = true;
        Ok(call.complete().await)
    }

    /// Settles the decision and hands it out at once, before the call's owned observer
    /// deliveries run: act on [`HookCall::settlement`], and await [`HookCall::complete`]
    /// for normal completion (the deliveries finished or hit their bounds, the audit
    /// record written). Start `complete` right away, beside acting on the decision (spawn
    /// it, or join the two): each delivery's deadline counts from the settlement, so one
    /// started only after a long operation finds it passed and sends nothing. The audit
    /// record is written once the deliveries end (it holds their results): a process
    /// killed before then has no record of a decision it may have acted on. Dropping the
    /// `HookCall` instead cancels the deliveries and still writes the audit record.
    pub async fn settle(
        &self,
        event: &str,
        effects: &[EffectKind],
        budget: Option<Duration>,
        interrupt: &Interrupt,
    ) -> Result<HookCall, Error> {
        let started = Instant::now();
        let span = tracing::info_span!(
            "ahp.hook_call",
            event_id = tracing::field::Empty,
            decided_by = tracing::field::Empty
        );
        let abandoned = Abandoned {
            interceptor: self,
            event,
            interrupt,
            started,
        };
        // A budget past the end of time (`Duration::MAX`) bounds nothing.
        let budget_at = budget.and_then(|b| started.checked_add(b));
        let settled = async {
            if self.inner.shut_down.load(Ordering::SeqCst) {
                // A denial like any other: the log still holds one record per call. Queued,
                // not awaited: nothing here may wait (for another process's lock on the
                // file), and a future dropped while waiting would add an `interrupted` one.
                let refused = host_settlement(event, DecidedBy::Shutdown, started);
                self.write_audit_detached(refused.record.clone());
                return Err(Error::shut_down(refused));
            }
            self.run(event, effects, budget_at, interrupt, started)
                .await
        }
        .instrument(span.clone())
        .await;
        abandoned.settled();
        let (settlement, observers) = settled?;
        if let Some(id) = &settlement.record.event.id {
            span.record("event_id", id.as_str());
        }
        span.record("decided_by", settlement.decided_by.as_str());
        tracing::info!(parent: &span, decision = ?settlement.decision, "settled");
        Ok(HookCall {
            interceptor: self.clone(),
            settlement: Some(settlement),
            observers,
            interrupt: interrupt.clone(),
            budget: budget_at,
            span,
            delivering: false,
            results: Results::default(),
            unanswered: false,
        })
    }

    async fn run(
        &self,
        event: &str,
        effects: &[EffectKind],
        budget_at: Option<Instant>,
        interrupt: &Interrupt,
        started: Instant,
    ) -> Result<(Settlement, Vec<Delivery>), Error> {
        let limit = Limit {
            bound: self.inner.bound,
            budget: budget_at,
        };
        let effects: Vec<wit::EffectKind> = effects.iter().copied().map(to_wit).collect();
        let budget_ns = budget_at.map(clock::to_nanos);
        let started_ns = clock::to_nanos(started);
        let admission = Admission::Intercept {
            event,
            started,
            budget: budget_at,
        };
        let settled = self
            .inner
            .pool
            .in_component(admission, limit, interrupt, async |ready: &mut Ready| {
                let engine_api = ready.plugin.ahp_interceptor_interceptor().engine();
                engine_api
                    .call_intercept(
                        &mut ready.store,
                        ready.engine,
                        event,
                        &effects,
                        budget_ns,
                        started_ns,
                    )
                    .await
            })
            .await;
        let settled = match settled {
            Ok(Ok(settled)) => settled,
            Ok(Err(problems)) => return Err(Error::invalid_input(from_wit(problems))),
            Err(unserved) => {
                let decided_by = match unserved {
                    Unserved::EngineFailure => DecidedBy::EngineFailure,
                    Unserved::Interrupted => DecidedBy::Interrupted,
                    Unserved::BudgetExpired => DecidedBy::BudgetExpired,
                    Unserved::ShutDown => DecidedBy::Shutdown,
                };
                return Ok((host_settlement(event, decided_by, started), Vec::new()));
            }
        };
        let subscriptions = self.inner.backends.subscriptions();
        let (settlement, observers) = from_component(settled, event, started, subscriptions);
        if settlement.decided_by == DecidedBy::EngineFailure {
            self.inner.pool.discard_idle();
        }
        // Looked at only now, after the notifications were copied out and checked: an
        // interruption or a shutdown during that still overrides an allow (`once_read`).
        let stopped = stopped_by(interrupt, &self.inner.closing);
        Ok((once_read(settlement, stopped), observers))
    }

    /// At the linker level, the owned observers `Settlement::from_component` gave with
    /// `settlement`: sends them to this interceptor's backends (concurrently, each bounded
    /// by the observer timeout; the call's `interrupt` or this interceptor's shutdown
    /// cancels those not done) and returns the settlement with each one's result recorded,
    /// as [`HookCall::complete`] records them before writing the record. The decision is
    /// the one already settled: an observer never changes it.
    pub async fn send_observers(
        &self,
        mut settlement: Settlement,
        observers: Vec<Delivery>,
        interrupt: &Interrupt,
    ) -> Settlement {
        let results = self
            .deliver_observers(observers, interrupt, &Results::default())
            .await;
        record_results(&mut settlement.record, &results);
        settlement
    }

    /// Sends the call's observe notifications, each bounded; see `observe`.
    async fn deliver_observers(
        &self,
        deliveries: Vec<Delivery>,
        interrupt: &Interrupt,
        results: &Results,
    ) -> Vec<ObserverResult> {
        let inner = &self.inner;
        deliver_observers(
            &inner.backends,
            deliveries,
            inner.observer_timeout,
            interrupt,
            &inner.closing,
            results,
        )
        .await
    }

    /// Appends `record` to the audit log, synced, and returns once it is — unless, while
    /// it waits for the file's lock (another process holding it), the call's `budget`
    /// passes and [`AUDIT_GRACE`] more (counted from now if later), or the call is
    /// interrupted or the interceptor shut down and [`AUDIT_GRACE`] passes: the call is
    /// not held past its budget, nor past a signal, and the record is written as soon as
    /// the lock is free. A decision not handed out yet (`answer`) is recorded as its
    /// [`Answer`] says once the file is locked.
    async fn write_audit(
        &self,
        record: &Record,
        answer: Option<&Answer>,
        budget: Option<Instant>,
        interrupt: &Interrupt,
    ) {
        if let Some(audit) = &self.inner.audit {
            let until = budget.and_then(|b| b.max(Instant::now()).checked_add(AUDIT_GRACE));
            let closing = &self.inner.closing;
            let stopped = async {
                tokio::select! {
                    () = interrupt.wait() => {}
                    () = closing.wait() => {}
                }
                tokio::time::sleep(AUDIT_GRACE).await;
            };
            let instead = answer.cloned().map(|answer| -> Instead {
                Box::new(move |record| {
                    let by = answer.overridden_by()?;
                    Some(overridden(record.clone(), by).record)
                })
            });
            audit.write(record.clone(), instead, until, stopped).await;
        }
    }

    /// As [`Interceptor::write_audit`], for a call dropped before completion, where
    /// there is nothing to await: the record is queued.
    fn write_audit_detached(&self, record: Record) {
        if let Some(audit) = &self.inner.audit {
            audit.write_detached(record);
        }
    }

    /// Stops admission of new calls and releases owned I/O: kills stdio children and
    /// reaps them, and waits for the audit records queued before it to be written (each
    /// bounded, without stalling the async workers; see `blocking`). On a
    /// current-thread runtime the reaping and the writing finish after this returns:
    /// await [`Interceptor::shutdown_async`] there. Safe to call repeatedly, also
    /// concurrently.
    pub fn shutdown(&self) {
        let closed = self.close();
        // Reaping the killed stdio children and flushing the audit log wait (bounded):
        // not on an async worker.
        blocking(move || closed.wait());
    }

    /// As [`Interceptor::shutdown`], for async callers: reaps the stdio children on the
    /// blocking pool and returns once they are reaped (or the bound passed), blocking no
    /// async worker on any runtime flavour. Safe to call repeatedly, also concurrently.
    pub async fn shutdown_async(&self) {
        let closed = self.close();
        if let Err(e) = tokio::task::spawn_blocking(move || closed.wait()).await {
            tracing::error!(error = %e, "reaping stdio backends failed");
        }
    }

    /// As [`Interceptor::shutdown_async`], for a process about to exit (`ahp observe`,
    /// `intercept`, `hook`): first, a persistent stdio child whose last message was a
    /// notification has its stdin closed and until that notification's deadline to read
    /// it and exit of itself. A notification gets no reply, so written to the child's
    /// pipe was all its delivery showed: killed at once, the child would lose what it
    /// had not read yet, recorded `delivered`. New calls are refused meanwhile;
    /// `interrupt` (a signal) ends the wait at once, and whatever still runs is then
    /// killed, as by `shutdown_async`. A call still under way ends at once as shut down,
    /// as under `shutdown_async`: left running while the children drain, a stdio backend
    /// it reached (which starts no child any more) failed it as a lost connection, and a
    /// fail-open policy let it through.
    pub async fn shutdown_draining(&self, interrupt: &Interrupt) {
        self.inner.shut_down.store(true, Ordering::SeqCst);
        self.inner.closing.interrupt();
        let endings = self.inner.backends.end_inputs();
        if !endings.is_empty() {
            let ended = async {
                for ending in endings {
                    ending.wait().await;
                }
            };
            tokio::select! {
                () = ended => {}
                () = interrupt.wait() => {}
            }
        }
        self.shutdown_async().await;
    }

    /// The non-blocking part of shutdown: stops admission, ends in-flight calls and
    /// their observer deliveries, closes connection pools (the OAuth ones too), kills
    /// the stdio children and marks the audit records queued so far (dropped calls',
    /// and those waiting for another process's lock on the file); returns what to wait
    /// for. Injected transports and credential providers are the caller's and stay
    /// untouched.
    fn close(&self) -> Closed {
        self.inner.shut_down.store(true, Ordering::SeqCst);
        self.inner.closing.interrupt();
        self.inner.pool.close();
        self.inner.backends.close();
        Closed {
            killed: self.inner.backends.killed(),
            flushed: self.inner.audit.as_ref().map(AuditQueue::flush),
        }
    }
}

/// What shutdown waits for once admission has stopped.
struct Closed {
    /// The stdio children killed, to reap.
    killed: Vec<(String, crate::capabilities::stdio::Killed)>,
    /// The audit records queued before shutdown, being written.
    flushed: Option<Flushed>,
}

impl Closed {
    /// Reaps the children and waits for the records, each bounded: blocking.
    fn wait(self) {
        backends::reap(self.killed);
        self.flushed.into_iter().for_each(Flushed::wait);
    }
}

impl InterceptorBuilder {
    /// Validates `registration` inside the component and prepares its backends. The
    /// component is compiled (or its cached compile read and checked) on the blocking
    /// pool: a compile takes some 0.4 s of CPU, which on an async worker would stall every
    /// other task of a current-thread runtime (other calls' deadline timers included).
    ///
    /// The interceptor runs on Tokio (its timers, its sockets, its blocking pool, its
    /// delivery tasks): built outside a Tokio runtime (polled by another executor), or
    /// in one without its timer or I/O driver (a builder without `enable_all()`), it is a
    /// setup error that says so, not a panic at the first timer or socket.
    pub async fn build(self, registration: &str) -> Result<Interceptor, Error> {
        if let Some(missing) = tokio_lacks() {
            return Err(Error::setup(wasmtime::Error::msg(format!(
                "{missing}: the interceptor needs a Tokio runtime with time and I/O \
                 (`enable_all()`)"
            ))));
        }
        let (runtime, options) = tokio::task::spawn_blocking(move || self.into_parts())
            .await
            .map_err(|e| {
                Error::setup(wasmtime::Error::msg(format!(
                    "preparing the component failed: {e}"
                )))
            })??;
        Interceptor::start(runtime, registration, options).await
    }
}

/// What the current Tokio runtime lacks of what an interceptor needs, if anything: its
/// timers and sockets panic without their drivers, so each is tried once here (the
/// panic hook still reports the one caught).
fn tokio_lacks() -> Option<&'static str> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Some("not inside a Tokio runtime");
    }
    let panics = |probe: fn()| std::panic::catch_unwind(probe).is_err();
    if panics(|| drop(tokio::time::sleep(Duration::ZERO))) {
        return Some("the Tokio runtime has no timer");
    }
    fn loopback_socket() -> Option<std::net::UdpSocket> {
        let socket = std::net::UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0)).ok()?;
        socket.set_nonblocking(true).ok()?;
        Some(socket)
    }
    if panics(|| drop(loopback_socket().map(tokio::net::UdpSocket::from_std))) {
        return Some("the Tokio runtime has no I/O driver");
    }
    None
}

/// A hook call whose decision is settled; its owned observer deliveries have not run yet.
pub struct HookCall {
    interceptor: Interceptor,
    settlement: Option<Settlement>,
    observers: Vec<Delivery>,
    interrupt: Interrupt,
    /// The call's budget, which writing its record does not outlast.
    budget: Option<Instant>,
    span: tracing::Span,
    /// Whether `complete` has taken the observers to deliver: if it is dropped now,
    /// they were cut off, not left unsent — but for those whose delivery ended, in
    /// `results`.
    delivering: bool,
    results: Results,
    /// Whether the decision is handed out only by `complete` (`intercept_with`): an
    /// interruption by then overrides one that is not a denial.
    unanswered: bool,
}

impl HookCall {
    /// The settled decision, final before any observer runs: act on it now.
    pub fn settlement(&self) -> &Settlement {
        self.settlement
            .as_ref()
            .expect("present until completed or dropped")
    }

    /// Runs the owned observer deliveries (concurrently, each bounded; interruption and
    /// shutdown cancel them), records their results and writes the audit record. Returns
    /// the final settlement; the decision in it is the one already handed out.
    pub async fn complete(mut self) -> Settlement {
        let observers = std::mem::take(&mut self.observers);
        self.delivering = true;
        // Interruption or shutdown before completion: none is started (`not-sent`).
        let results = self
            .interceptor
            .deliver_observers(observers, &self.interrupt, &self.results)
            .instrument(self.span.clone())
            .await;
        let settlement = self
            .finish(&results)
            .expect("present until completed or dropped");
        let answer = self.unanswered.then(|| Answer {
            decision: settlement.decision,
            interrupt: self.interrupt.clone(),
            closing: self.interceptor.inner.closing.clone(),
            by: Arc::default(),
        });
        // This future dropped while the record waits (a caller's own timeout): nobody was
        // handed the decision, which is then the dropped call's, as `HookCall`'s drop
        // makes it before the record is handed over.
        let _dropped = answer.clone().map(UnlessHandedOut);
        let budget = self.budget;
        self.interceptor
            .write_audit(&settlement.record, answer.as_ref(), budget, &self.interrupt)
            .await;
        match answer.and_then(|answer| answer.overridden_by()) {
            Some(by) => {
                self.span.record("decided_by", by.as_str());
                tracing::info!(parent: &self.span, "the decision, not handed out yet, was overridden");
                overridden(settlement.record, by)
            }
            None => settlement,
        }
    }

    /// Records each observer's result in the settlement, once.
    fn finish(&mut self, results: &[ObserverResult]) -> Option<Settlement> {
        let mut settlement = self.settlement.take()?;
        record_results(&mut settlement.record, results);
        Some(settlement)
    }
}

/// Each observer's result in `record`, in order; a withheld notification stays so: it was
/// never going to be sent.
fn record_results(record: &mut Record, results: &[ObserverResult]) {
    for (entry, result) in record.observers.iter_mut().zip(results) {
        entry.result.get_or_insert(*result);
    }
}

impl Drop for HookCall {
    /// A call dropped before completion still leaves its audit record: its observers
    /// were never sent, or, with `complete`'s future dropped, cut off while being sent.
    fn drop(&mut self) {
        let Some(settlement) = &self.settlement else {
            return;
        };
        let count = settlement.record.observers.len();
        let ended =
            std::mem::take(&mut *self.results.lock().unwrap_or_else(PoisonError::into_inner));
        let results = match self.delivering {
            // Cut off while being sent: each as far as its delivery got.
            true if ended.len() == count => ended,
            true => vec![ObserverResult::Interrupted; count],
            false => vec![ObserverResult::NotSent; count],
        };
        if let Some(mut settlement) = self.finish(&results) {
            // Dropped before it was handed out (`intercept_with`'s future): nobody got it.
            let dropped = dropped_by(&self.interrupt, &self.interceptor.inner.closing);
            if let Some(by) =
                overriding(settlement.decision, Some(dropped)).filter(|_| self.unanswered)
            {
                settlement = overridden(settlement.record, by);
            }
            self.interceptor.write_audit_detached(settlement.record);
        }
    }
}

/// Whether an interruption or a shutdown overrides a decision not handed out yet
/// (`intercept_with`), fixed by whichever looks first: the audit writer once it has the
/// file's lock, or `complete` once it stops waiting for that (the lock held elsewhere).
/// So the record always says what the caller is handed: a signal after `complete` handed
/// out an allow does not turn its record into a denial, and one the writer found first
/// turns the answer into the denial it wrote.
#[derive(Clone)]
struct Answer {
    decision: Decision,
    interrupt: Interrupt,
    closing: Interrupt,
    /// Who overrides it (`None`: nobody), once looked at.
    by: Arc<OnceLock<Option<DecidedBy>>>,
}

impl Answer {
    /// Who overrides the decision: who had stopped the call when it was first looked at.
    fn overridden_by(&self) -> Option<DecidedBy> {
        *self
            .by
            .get_or_init(|| overriding(self.decision, stopped_by(&self.interrupt, &self.closing)))
    }
}

/// An [`Answer`] fixed, when this is dropped, as a dropped call's ([`dropped_by`]) unless
/// it was looked at before (by the writer, or by `complete` handing the decision out).
struct UnlessHandedOut(Answer);

impl Drop for UnlessHandedOut {
    fn drop(&mut self) {
        let answer = &self.0;
        let dropped = Some(dropped_by(&answer.interrupt, &answer.closing));
        answer
            .by
            .get_or_init(|| overriding(answer.decision, dropped));
    }
}

/// How long past its budget a call still waits for its audit record to be synced: a
/// normal `fsync` takes milliseconds.
const AUDIT_GRACE: Duration = Duration::from_millis(250);

/// A hook call not settled yet, recorded as interrupted if its future is dropped first
/// (a harness's `timeout` or `select!` around the call) — as shut down if the interceptor
/// was, and the call itself not interrupted ([`dropped_by`]): backends may have been
/// asked already, and the audit log still holds one record per call.
struct Abandoned<'a> {
    interceptor: &'a Interceptor,
    event: &'a str,
    /// The call's own interruption.
    interrupt: &'a Interrupt,
    started: Instant,
}

impl Abandoned<'_> {
    /// The call settled: its record is the settlement's, not this one.
    fn settled(self) {
        std::mem::forget(self);
    }
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        let by = dropped_by(self.interrupt, &self.interceptor.inner.closing);
        tracing::warn!(
            decided_by = by.as_str(),
            "a hook call was dropped before it settled"
        );
        let dropped = host_settlement(self.event, by, self.started);
        self.interceptor.write_audit_detached(dropped.record);
    }
}

/// Runs blocking `work` (reaping children) from a synchronous function
/// without stalling the async workers. On a multi-threaded runtime it runs in place
/// after the worker hands its other tasks off, so it is done when this returns; with no
/// runtime it simply runs. A current-thread runtime has no other worker to hand off to:
/// there `work` goes to the blocking pool and finishes after this returns.
fn blocking(work: impl FnOnce() + Send + 'static) {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == RuntimeFlavor::CurrentThread => {
            drop(runtime.spawn_blocking(work));
        }
        Ok(_) => tokio::task::block_in_place(work),
        Err(_) => work(),
    }
}

/// A load's `problems`: the registration's, or the harness's declaration's
/// (`Options::declaration`, which the component checks first and reports alone, at
/// `declaration[i]…`): a setup error of the embedder's, never laid at the registration.
fn refused_at_load(problems: Vec<ahp_vocab::Problem>) -> Error {
    if !problems.iter().any(|p| p.path.starts_with("declaration[")) {
        return Error::registration(problems);
    }
    let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
    Error::setup(wasmtime::format_err!(
        "Options::declaration: {}",
        listed.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future as _;

    /// In a Tokio runtime without its timer or its I/O driver, building is a setup error
    /// naming what is missing: never a panic at the first timer or socket.
    #[test]
    fn a_tokio_runtime_without_time_or_io_is_a_setup_error() {
        let cases = [
            (
                tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .build(),
                "no timer",
            ),
            (
                tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build(),
                "no I/O",
            ),
        ];
        for (runtime, missing) in cases {
            let runtime = runtime.expect("a runtime");
            let built = runtime.block_on(Interceptor::new("{}", Options::default()));
            let e = built.err().expect("a setup error");
            assert!(e.is_setup() && e.to_string().contains(missing), "{e}");
        }
    }

    /// Built outside a Tokio runtime (another executor polls it), an interceptor is a
    /// setup error naming Tokio, at the first poll: never a panic at its first timer.
    #[test]
    fn outside_a_tokio_runtime_building_is_a_setup_error() {
        let mut building = std::pin::pin!(Interceptor::new("{}", Options::default()));
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        match building.as_mut().poll(&mut context) {
            std::task::Poll::Ready(Err(e)) => {
                assert!(e.is_setup(), "{e}");
                assert!(e.to_string().contains("Tokio runtime"), "{e}");
            }
            std::task::Poll::Ready(Ok(_)) => panic!("built outside a Tokio runtime"),
            std::task::Poll::Pending => panic!("pending: it went on to Tokio's blocking pool"),
        }
    }
}
