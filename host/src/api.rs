//! The public API for embedders: build an [`Interceptor`] from a registration, then ask it
//! about each tool call.
//!
//! A call takes a ready component instance from a pool (the registration was parsed once,
//! when the instance was made), bounds the component's CPU and the whole call by the
//! call's legitimate length plus a small grace, and settles. Anything that goes wrong
//! around the component — a trap, an epoch expiry, a host error — settles as a denial
//! recorded as `engine-failure`: interception that did not complete is never permission.

use crate::audit::AuditLog;
use crate::bindings::interceptor::{
    self as wit, DecidedBy as WitDecidedBy, Decision as WitDecision, Delivery,
};
use crate::bindings::Plugin;
use crate::capabilities::credentials::CredentialProvider;
use crate::capabilities::http::HttpOptions;
use crate::capabilities::{Backends, HostState, RetryPolicy};
use crate::clock;
use crate::declaration::{self, Declaration};
use crate::error::Error;
use crate::interrupt::Interrupt;
use crate::runtime::Runtime;
use ahp_vocab::{
    DecidedBy, Decision, EffectKind, EventRef, ObserverResult, Problem, Record, OBSERVER_TIMEOUT_MS,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::Instrument as _;
use wasmtime::component::ResourceAny;
use wasmtime::error::Context as _;
use wasmtime::Store;

/// Time the component gets after its last deadline to settle and return. Generous
/// enough that a loaded 2-core machine does not turn a late but honest settlement into an
/// engine failure (50 ms did, seen at 528 ms for a 300 ms timeout); a runaway component
/// is still cut off by then.
const GRACE: Duration = Duration::from_millis(250);

/// A settled hook call: the decision, who made it, the reason to show, and the audit record.
#[derive(Clone, Debug, PartialEq)]
pub struct Settlement {
    /// What the harness must do.
    pub decision: Decision,
    /// Who decided, as recorded in the audit.
    pub decided_by: DecidedBy,
    /// The backend's reason for an explicit deny, or a generic local reason.
    pub reason: Option<String>,
    /// The settlement record (DESIGN.md §4), exactly as written to the audit log:
    /// every interceptor's outcome, failure class and attempts, messages, observers.
    pub record: Record,
}

impl Settlement {
    /// A settlement is its record: the top-level fields are the record's own.
    fn of(record: Record) -> Settlement {
        Settlement {
            decision: record.decision,
            decided_by: record.decided_by,
            reason: record.reason.clone(),
            record,
        }
    }

    /// The record as one JSON line, as the CLI prints it and the audit log stores it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.record).unwrap_or_default()
    }
}

/// How one observe notification of [`Interceptor::observe`] ended.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ObserverReport {
    /// The backend it was sent to.
    pub backend: String,
    /// Delivered, or why not.
    pub result: ObserverResult,
}

/// What [`Interceptor::observe`] did: one report per matching observe subscription.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Observed {
    /// In registration order.
    pub observers: Vec<ObserverReport>,
    /// The component failed while preparing the notifications: none was sent.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub engine_failure: bool,
}

/// Host configuration (everything a registration does not say).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Another build of the component instead of the embedded one.
    pub component: Option<Vec<u8>>,
    /// Append each settlement record to this JSONL file (synced).
    pub audit_path: Option<PathBuf>,
    /// Cap on a backend's response body; default 1 MiB.
    pub max_body_bytes: Option<usize>,
    /// Backend ids allowed plain `http` to non-loopback hosts (local development only:
    /// events and credentials travel unencrypted). Each must be an http backend of the
    /// registration; `warnings()` names each.
    pub allow_insecure_http: Vec<String>,
    /// A PEM file of extra trust roots for `https` backends.
    pub trust_roots: Option<PathBuf>,
    /// Retries after transient failures (refused, reset, lost, 502–504, JSON-RPC
    /// -32003), always inside the original deadline and with the same bytes. Off by default.
    pub retries: RetryPolicy,
    /// Bound on each observer delivery (default 2 s); the call's budget bounds it too.
    pub observer_timeout: Option<Duration>,
    /// Names of host environment variables passed to every stdio backend besides `PATH`
    /// (their environment is otherwise empty).
    pub stdio_env: Vec<String>,
    /// The harness's own credential sources, by backend id (http backends only). Each
    /// replaces the registration's binding for its backend; the interceptor never closes
    /// them.
    pub credential_providers: HashMap<String, Arc<dyn CredentialProvider>>,
    /// What the harness intercepts and enforces, per event (default: every interceptable
    /// event with every effect it allows). A registration intercepting an undeclared
    /// event is refused at load.
    pub declaration: Declaration,
}

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
    runtime: Arc<Runtime>,
    registration: String,
    /// The declaration the registration was loaded with, for every later instance.
    declaration: Vec<wit::EventCapability>,
    warnings: Vec<String>,
    backends: Arc<Backends>,
    bound: Duration,
    pool: Mutex<Vec<Ready>>,
    audit: Option<AuditLog>,
    shut_down: AtomicBool,
    /// Set by shutdown: every in-flight call ends (as a `shutdown` denial).
    closing: Interrupt,
    /// The longest one observer delivery may take (the component's own bound is 2 s).
    observer_timeout: Duration,
}

/// An instance whose engine resource already holds the loaded registration.
struct Ready {
    store: Store<HostState>,
    plugin: Plugin,
    engine: ResourceAny,
}

impl Interceptor {
    /// Validates `registration` inside the component and prepares its backends.
    pub async fn new(registration: &str, options: Options) -> Result<Interceptor, Error> {
        let runtime = match &options.component {
            Some(bytes) => Arc::new(Runtime::new(bytes).map_err(Error::setup)?),
            None => Runtime::embedded().map_err(Error::setup)?,
        };
        // A probe instance validates the registration and tells which backends to serve.
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
        let declaration = options.declaration.resolve(everything);
        let engine = engine_api
            .call_load(&mut store, registration, &declaration)
            .await
            .map_err(Error::setup)?
            .map_err(|problems| Error::registration(from_wit(problems)))?;
        let plan = engine_api
            .call_plan(&mut store, engine)
            .await
            .map_err(Error::setup)?;
        let warnings = engine_api
            .call_warnings(&mut store, engine)
            .await
            .map_err(Error::setup)?;
        let bound_ms = engine_api
            .call_bound_ms(&mut store, engine)
            .await
            .map_err(Error::setup)?;
        let http = http_options(&options).map_err(Error::setup)?;
        let backends = Arc::new(
            Backends::from_plan(plan, &options, &http)
                .map_err(|e| Error::setup(wasmtime::format_err!(e)))?,
        );
        let mut warnings: Vec<String> =
            from_wit(warnings).iter().map(ToString::to_string).collect();
        warnings.extend(backends.warnings());
        let audit = match &options.audit_path {
            Some(path) => Some(
                AuditLog::open(path)
                    .with_context(|| format!("open audit log {}", path.display()))
                    .map_err(Error::setup)?,
            ),
            None => None,
        };
        Ok(Interceptor {
            inner: Arc::new(Inner {
                runtime,
                registration: registration.to_string(),
                declaration,
                warnings,
                backends,
                bound: Duration::from_millis(bound_ms),
                pool: Mutex::new(Vec::new()),
                audit,
                shut_down: AtomicBool::new(false),
                closing: Interrupt::new(),
                observer_timeout: options
                    .observer_timeout
                    .unwrap_or(Duration::from_millis(OBSERVER_TIMEOUT_MS)),
            }),
        })
    }

    /// Valid but questionable settings: the registration's, each naming its JSON path,
    /// then the host's (e.g. plain http off loopback), each naming its backend.
    pub fn warnings(&self) -> &[String] {
        &self.inner.warnings
    }

    /// Settles one event of a declared interceptable type. `effects` narrows the event's
    /// declaration for this call (empty: as declared; `"deny"` must stay where declared);
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

    /// Sends `hooks/observe` for a non-decision event (e.g. `tool.after`) to every
    /// matching observe subscription, concurrently, each bounded by its observer deadline
    /// and `budget`. Reports one result per delivery; an observer's failure is recorded,
    /// never raised.
    pub async fn observe(&self, event: &str, budget: Option<Duration>) -> Result<Observed, Error> {
        if self.inner.shut_down.load(Ordering::SeqCst) {
            return Err(Error::shut_down(host_settlement(
                event,
                DecidedBy::Shutdown,
                Instant::now(),
            )));
        }
        let limit = Instant::now()
            + budget
                .unwrap_or(self.inner.bound)
                .min(Duration::from_secs(5))
            + GRACE;
        let budget_ns = budget.map(|b| clock::to_nanos(Instant::now() + b));
        let prepared = self
            .in_component(limit, &Interrupt::new(), async |ready: &mut Ready| {
                let engine_api = ready.plugin.ahp_interceptor_interceptor().engine();
                engine_api
                    .call_observe(&mut ready.store, ready.engine, event, budget_ns)
                    .await
            })
            .await;
        let deliveries = match prepared {
            Some(Ok(deliveries)) => deliveries,
            Some(Err(problems)) => return Err(Error::invalid_input(from_wit(problems))),
            None => {
                return Ok(Observed {
                    observers: Vec::new(),
                    engine_failure: true,
                })
            }
        };
        let backends: Vec<String> = deliveries.iter().map(|d| d.backend.clone()).collect();
        let results = self.deliver_observers(deliveries, &Interrupt::new()).await;
        let observers = backends
            .into_iter()
            .zip(results)
            .map(|(backend, result)| ObserverReport { backend, result })
            .collect();
        Ok(Observed {
            observers,
            engine_failure: false,
        })
    }

    /// As [`Interceptor::intercept`], interruptible through `interrupt`.
    pub async fn intercept_with(
        &self,
        event: &str,
        effects: &[EffectKind],
        budget: Option<Duration>,
        interrupt: &Interrupt,
    ) -> Result<Settlement, Error> {
        Ok(self
            .settle(event, effects, budget, interrupt)
            .await?
            .complete()
            .await)
    }

    /// Settles the decision and hands it out at once, before the call's owned observer
    /// deliveries run: act on [`HookCall::settlement`], then await [`HookCall::complete`]
    /// for normal completion (the deliveries finished or hit their bounds, the audit
    /// record written). Dropping the `HookCall` instead cancels the deliveries and still
    /// writes the audit record.
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
        let (settlement, observers) = async {
            if self.inner.shut_down.load(Ordering::SeqCst) {
                return Err(Error::shut_down(host_settlement(
                    event,
                    DecidedBy::Shutdown,
                    started,
                )));
            }
            let budget_at = budget.map(|b| started + b);
            self.run(event, effects, budget_at, interrupt, started)
                .await
        }
        .instrument(span.clone())
        .await?;
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
            span,
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
        let own_bound = started + self.inner.bound;
        let limit = budget_at.map_or(own_bound, |b| b.min(own_bound)) + GRACE;
        let effects: Vec<wit::EffectKind> =
            effects.iter().copied().map(declaration::effect).collect();
        let budget_ns = budget_at.map(clock::to_nanos);
        let settled = self
            .in_component(limit, interrupt, async |ready: &mut Ready| {
                let engine_api = ready.plugin.ahp_interceptor_interceptor().engine();
                engine_api
                    .call_intercept(&mut ready.store, ready.engine, event, &effects, budget_ns)
                    .await
            })
            .await;
        let mut settled = match settled {
            Some(Ok(settled)) => settled,
            Some(Err(problems)) => return Err(Error::invalid_input(from_wit(problems))),
            None => return Ok((engine_failure(event, started), Vec::new())),
        };
        let observers = std::mem::take(&mut settled.observers);
        let mut settlement = from_component(settled, event, started);
        if settlement.decided_by == DecidedBy::Interrupted && self.inner.closing.is_set() {
            // Interrupted by our own shutdown, not by the harness: say so in the audit.
            settlement.record.decided_by = DecidedBy::Shutdown;
            settlement = Settlement::of(settlement.record);
        }
        Ok((settlement, observers))
    }

    /// Runs `call` on a ready instance, with `interrupt` as the call's signal and the
    /// component's CPU (epochs) and wall time bounded by `limit`. The instance goes back
    /// to the pool only after a normal return. `None` is an engine failure (no instance,
    /// a trap, or the bound overrun), already logged: never permission.
    async fn in_component<T>(
        &self,
        limit: Instant,
        interrupt: &Interrupt,
        call: impl AsyncFnOnce(&mut Ready) -> wasmtime::Result<T>,
    ) -> Option<T> {
        let mut ready = match self.take_ready().await {
            Ok(ready) => ready,
            Err(e) => {
                tracing::error!(error = %e, "could not prepare a component instance");
                return None;
            }
        };
        ready.store.data_mut().cpu_deadline = limit;
        ready.store.data_mut().interrupt = interrupt.clone();
        ready.store.set_epoch_deadline(1);
        match tokio::time::timeout_at(limit.into(), call(&mut ready)).await {
            Ok(Ok(value)) => {
                self.put_ready(ready);
                Some(value)
            }
            Ok(Err(trap)) => {
                tracing::error!(error = %trap, "component trapped");
                None
            }
            Err(_elapsed) => {
                tracing::error!("component exceeded its call bound");
                None
            }
        }
    }

    /// Sends the call's observe notifications concurrently, each bounded by its own
    /// deadline; interruption cancels them. Results are in the order given.
    async fn deliver_observers(
        &self,
        deliveries: Vec<Delivery>,
        interrupt: &Interrupt,
    ) -> Vec<ObserverResult> {
        let mut tasks = tokio::task::JoinSet::new();
        let count = deliveries.len();
        for (i, delivery) in deliveries.into_iter().enumerate() {
            let backends = self.inner.backends.clone();
            let interrupt = interrupt.clone();
            let bound = tokio::time::Instant::now() + self.inner.observer_timeout;
            tasks.spawn(async move {
                let deadline =
                    tokio::time::Instant::from_std(clock::to_instant(delivery.deadline)).min(bound);
                let result = tokio::select! {
                    r = backends.notify(&delivery.backend, &delivery.message, deadline, &interrupt) => r,
                    () = interrupt.wait() => ObserverResult::Interrupted,
                };
                (i, result)
            });
        }
        let mut results = vec![ObserverResult::Interrupted; count];
        while let Some(joined) = tasks.join_next().await {
            if let Ok((i, result)) = joined {
                results[i] = result;
            }
        }
        results
    }

    fn write_audit(&self, record: &Record) {
        if let Some(audit) = &self.inner.audit {
            if let Err(e) = audit.append(record) {
                tracing::error!(path = %audit.path().display(), error = %e, "audit append failed");
            }
        }
    }

    async fn take_ready(&self) -> wasmtime::Result<Ready> {
        if let Some(ready) = self
            .inner
            .pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
        {
            return Ok(ready);
        }
        let state = HostState::new(self.inner.backends.clone(), self.inner.closing.clone());
        let (mut store, plugin) = self.inner.runtime.instantiate(state).await?;
        store.data_mut().cpu_deadline = std::time::Instant::now() + Duration::from_secs(5);
        let engine = plugin
            .ahp_interceptor_interceptor()
            .engine()
            .call_load(
                &mut store,
                &self.inner.registration,
                &self.inner.declaration,
            )
            .await?
            .map_err(|problems| {
                let problems: Vec<String> =
                    from_wit(problems).iter().map(ToString::to_string).collect();
                wasmtime::format_err!("registration rejected on reload: {}", problems.join("; "))
            })?;
        Ok(Ready {
            store,
            plugin,
            engine,
        })
    }

    /// Returns an instance whose call completed normally; aborted ones are dropped.
    fn put_ready(&self, ready: Ready) {
        if !self.inner.shut_down.load(Ordering::SeqCst) {
            self.inner
                .pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(ready);
        }
    }

    /// Stops admission of new calls and releases owned I/O. Safe to call repeatedly.
    pub fn shutdown(&self) {
        self.inner.shut_down.store(true, Ordering::SeqCst);
        self.inner.closing.interrupt();
        self.inner
            .pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.inner.backends.close();
    }
}

/// A hook call whose decision is settled; its owned observer deliveries have not run yet.
pub struct HookCall {
    interceptor: Interceptor,
    settlement: Option<Settlement>,
    observers: Vec<Delivery>,
    interrupt: Interrupt,
    span: tracing::Span,
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
        let inner = &self.interceptor.inner;
        let stopped = self.interrupt.is_set() || inner.closing.is_set();
        // Interruption or shutdown before completion: none is started.
        let results = match stopped || observers.is_empty() {
            true => vec![ObserverResult::NotSent; observers.len()],
            false => {
                self.interceptor
                    .deliver_observers(observers, &self.interrupt)
                    .instrument(self.span.clone())
                    .await
            }
        };
        self.finish(&results)
            .expect("present until completed or dropped")
    }

    /// Records each observer's result and writes the audit record, once.
    fn finish(&mut self, results: &[ObserverResult]) -> Option<Settlement> {
        let mut settlement = self.settlement.take()?;
        for (entry, result) in settlement.record.observers.iter_mut().zip(results) {
            entry.result = Some(*result);
        }
        self.interceptor.write_audit(&settlement.record);
        Some(settlement)
    }
}

impl Drop for HookCall {
    /// A call dropped before completion still leaves its audit record; its observers
    /// were never sent and are recorded so.
    fn drop(&mut self) {
        let not_sent = vec![ObserverResult::NotSent; self.observers.len()];
        self.finish(&not_sent);
    }
}

fn http_options(options: &Options) -> wasmtime::Result<HttpOptions> {
    Ok(HttpOptions {
        max_body_bytes: options.max_body_bytes.unwrap_or(1 << 20),
        allow_insecure_http: false,
        tls: Arc::new(crate::tls::client_config(options.trust_roots.as_deref())?),
    })
}

/// The component's settlement, read into the shared record type. A component whose
/// record does not parse, or contradicts its own decision, is not trusted with one.
fn from_component(s: wit::Settlement, event: &str, started: Instant) -> Settlement {
    let decision = match s.decision {
        WitDecision::Allow => Decision::Allow,
        WitDecision::Ask => Decision::Ask,
        WitDecision::Deny => Decision::Deny,
    };
    let decided_by = match s.decided_by {
        WitDecidedBy::NoObjection => DecidedBy::NoObjection,
        WitDecidedBy::BackendDeny => DecidedBy::BackendDeny,
        WitDecidedBy::BackendAsk => DecidedBy::BackendAsk,
        WitDecidedBy::SyntheticDeny => DecidedBy::SyntheticDeny,
        WitDecidedBy::Interrupted => DecidedBy::Interrupted,
        WitDecidedBy::BudgetExpired => DecidedBy::BudgetExpired,
        WitDecidedBy::EngineFailure => DecidedBy::EngineFailure,
        WitDecidedBy::Shutdown => DecidedBy::Shutdown,
    };
    match serde_json::from_str::<Record>(&s.audit) {
        Ok(record)
            if record.decision == decision
                && record.decided_by == decided_by
                && record.reason == s.reason =>
        {
            Settlement::of(record)
        }
        _ => {
            tracing::error!("the component's settlement record is unreadable or inconsistent");
            engine_failure(event, started)
        }
    }
}

/// The denial for a component that trapped, overran its bound or could not be prepared.
fn engine_failure(event: &str, started: Instant) -> Settlement {
    host_settlement(event, DecidedBy::EngineFailure, started)
}

/// A denial settled by the host itself, with as much event identity as can be read.
fn host_settlement(event: &str, decided_by: DecidedBy, started: Instant) -> Settlement {
    let elapsed_ms = started.elapsed().as_millis() as u64;
    Settlement::of(Record::host_denial(
        EventRef::read(event),
        decided_by,
        elapsed_ms,
    ))
}

/// Problems as the component reports them, in the shared type.
fn from_wit(problems: Vec<wit::Problem>) -> Vec<Problem> {
    problems
        .into_iter()
        .map(|p| Problem::new(p.path, p.rule))
        .collect()
}
