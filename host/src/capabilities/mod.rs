//! The component's only capabilities: delivery to registered backends, credentials, and
//! (through wasmtime-wasi) the shared monotonic clock. Everything a backend or the
//! network can do wrong comes back as a WIT error value; only host bugs trap.

pub mod credentials;
pub mod http;
pub mod stdio;

use crate::bindings::credentials::AuthError;
use crate::bindings::delivery::Reply;
use crate::bindings::host_types::DeliveryError;
use crate::bindings::interceptor::{AuthPlan, BackendPlan, TransportPlan};
use crate::bindings::{credentials as wit_credentials, delivery as wit_delivery, host_types};
use crate::clock;
use crate::interrupt::Interrupt;
use credentials::{AuthFailure, Credential};
use http::{HttpBackend, HttpOptions};
use std::collections::HashMap;
use std::sync::Arc;
use stdio::StdioBackend;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// How a backend is reached.
#[derive(Debug)]
pub enum Transport {
    Http(HttpBackend),
    /// A child process, persistent or one per event.
    Stdio(StdioBackend),
}

/// One registered backend, as the host serves it.
#[derive(Debug)]
pub struct Backend {
    pub transport: Transport,
    pub auth: Option<AuthPlan>,
    /// Retries allowed per exchange after a transient failure (0 = none).
    pub retries: u32,
}

/// Every backend of one registration, by id; shared by all instances of that registration.
#[derive(Debug, Default)]
pub struct Backends(HashMap<String, Backend>);

impl Backends {
    /// Builds the transports the component's plan asks for.
    pub fn from_plan(
        plan: Vec<BackendPlan>,
        http: &HttpOptions,
        retries: &RetryPolicy,
    ) -> Result<Backends, String> {
        let mut map = HashMap::new();
        for backend in plan {
            let transport = match &backend.transport {
                TransportPlan::Http(url) => Transport::Http(
                    HttpBackend::new(url, http.clone())
                        .map_err(|e| format!("backend {}: {e}", backend.id))?,
                ),
                TransportPlan::Stdio(plan) => {
                    Transport::Stdio(StdioBackend::new(&backend.id, plan, http.max_body_bytes))
                }
            };
            let retries = retries.for_backend(&backend.id);
            map.insert(
                backend.id,
                Backend {
                    transport,
                    auth: backend.auth,
                    retries,
                },
            );
        }
        Ok(Backends(map))
    }

    /// Closes idle connections, and kills every stdio child, then reaps them all within
    /// one shared bound (shutdown). Safe to repeat, also concurrently.
    pub fn close(&self) {
        for backend in self.0.values() {
            match &backend.transport {
                Transport::Http(http) => http.close_idle(),
                Transport::Stdio(stdio) => stdio.shut_down(),
            }
        }
        let until = std::time::Instant::now() + stdio::SHUTDOWN_BOUND;
        for (id, backend) in &self.0 {
            if let Transport::Stdio(stdio) = &backend.transport {
                let remaining = stdio.reap(until);
                if remaining > 0 {
                    tracing::warn!(backend = %id, remaining, "stdio backend processes not reaped at shutdown");
                }
            }
        }
    }

    pub fn get(&self, id: &str) -> Option<&Backend> {
        self.0.get(id)
    }

    /// Sends one `hooks/observe` notification by `deadline`, with the backend's
    /// credential if it has one (never without it). Returns `"delivered"` or the failure
    /// class; an observer's failure never changes a decision.
    pub async fn notify(
        &self,
        backend: &str,
        message: &[u8],
        deadline: tokio::time::Instant,
    ) -> &'static str {
        let Some(target) = self.get(backend) else {
            return "connection-refused";
        };
        let bearer = match &target.auth {
            Some(plan) => match credentials::resolve(plan, deadline).await {
                Ok(secret) => Some(secret),
                Err(_) => return "auth-failed",
            },
            None => None,
        };
        let sent = match &target.transport {
            Transport::Http(http) => http.exchange(message, bearer.as_ref(), deadline).await,
            // No status on stdio: a notification written in full is delivered.
            Transport::Stdio(stdio) => {
                return match stdio.exchange(message, deadline).await {
                    Ok(_) => "delivered",
                    Err(e) => failure_class(&e),
                }
            }
        };
        match sent {
            // Observe success is 202 or 204 with no body.
            Ok(reply) if matches!(reply.status, Some(202 | 204)) && reply.body.is_empty() => {
                "delivered"
            }
            Ok(_) => "http-status",
            Err(e) => failure_class(&e),
        }
    }
}

/// The audit class of a transport failure outside the component (observer deliveries).
fn failure_class(error: &DeliveryError) -> &'static str {
    match error {
        DeliveryError::DeadlineExceeded(_) => "deadline-exceeded",
        DeliveryError::Cancelled => "interrupted",
        DeliveryError::ConnectionRefused
        | DeliveryError::TlsFailed
        | DeliveryError::NotPermitted => "connection-refused",
        DeliveryError::ConnectionReset => "connection-reset",
        DeliveryError::ConnectionLost => "connection-lost",
        DeliveryError::MalformedHttp => "http-status",
        DeliveryError::LaunchFailed => "launch-failed",
        DeliveryError::AbnormalExit(_) => "abnormal-exit",
        DeliveryError::ResponseTooLarge => "malformed-json",
    }
}

/// Retries after transient failures, from the host configuration (off by default).
#[derive(Clone, Debug, Default)]
pub struct RetryPolicy {
    /// Retries per exchange for every backend.
    pub default: u32,
    /// Per-backend overrides, by backend id.
    pub per_backend: HashMap<String, u32>,
}

impl RetryPolicy {
    fn for_backend(&self, id: &str) -> u32 {
        self.per_backend.get(id).copied().unwrap_or(self.default)
    }
}

/// The backoff before retry number `attempt`: exponential from 10 ms, capped at 200 ms,
/// with full jitter in its upper half so retrying callers do not move in lockstep.
fn backoff(attempt: u32) -> std::time::Duration {
    use std::hash::{BuildHasher, Hasher};
    let ceiling_ms = (10u64 << attempt.saturating_sub(1).min(5)).min(200);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(attempt);
    let jitter = hasher.finish() % (ceiling_ms * 500 + 1);
    std::time::Duration::from_micros(ceiling_ms * 500 + jitter)
}

/// The data of one component instance's store.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    backends: Arc<Backends>,
    /// The interruption signal of the hook call currently running in this instance.
    pub interrupt: Interrupt,
    /// Set when the interceptor shuts down: ends every in-flight call.
    pub shutdown: Interrupt,
    /// When the component's CPU time for the current call runs out (epoch check).
    pub cpu_deadline: std::time::Instant,
}

impl HostState {
    pub fn new(backends: Arc<Backends>, shutdown: Interrupt) -> HostState {
        let wasi = wasmtime_wasi::WasiCtxBuilder::new()
            .monotonic_clock(clock::SharedMonotonicClock)
            .build();
        HostState {
            wasi,
            table: ResourceTable::new(),
            backends,
            interrupt: Interrupt::new(),
            shutdown,
            cpu_deadline: std::time::Instant::now(),
        }
    }

    /// Whether the call was interrupted or the interceptor is shutting down.
    fn stopped(&self) -> bool {
        self.interrupt.is_set() || self.shutdown.is_set()
    }

    /// Resolves when the call is interrupted or the interceptor shuts down.
    fn when_stopped(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (call, shutdown) = (self.interrupt.clone(), self.shutdown.clone());
        async move {
            tokio::select! {
                () = call.wait() => {}
                () = shutdown.wait() => {}
            }
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl host_types::Host for HostState {}

impl wit_credentials::HostCredential for HostState {
    fn drop(&mut self, credential: Resource<Credential>) -> wasmtime::Result<()> {
        self.table.delete(credential)?;
        Ok(())
    }
}

impl wit_credentials::Host for HostState {
    async fn acquire(
        &mut self,
        backend: String,
        deadline: u64,
    ) -> wasmtime::Result<Result<Option<Resource<Credential>>, AuthError>> {
        let Some(plan) = self.backends.get(&backend).and_then(|b| b.auth.clone()) else {
            return Ok(Ok(None));
        };
        let deadline = tokio::time::Instant::from_std(clock::to_instant(deadline));
        let stopped = self.when_stopped();
        let resolved = tokio::select! {
            r = credentials::resolve(&plan, deadline) => r,
            () = stopped => return Ok(Err(AuthError::Cancelled)),
        };
        Ok(match resolved {
            Ok(bearer) => Ok(Some(self.table.push(Credential { backend, bearer })?)),
            Err(AuthFailure::Unresolved) => Err(AuthError::Unresolved),
            Err(AuthFailure::Unsupported) => Err(AuthError::Unsupported),
            Err(AuthFailure::DeadlineExceeded) => Err(AuthError::DeadlineExceeded),
        })
    }

    fn reject(&mut self, _credential: Resource<Credential>) -> wasmtime::Result<()> {
        // Bearer references are re-resolved at every dispatch: there is no cache to drop.
        Ok(())
    }
}

impl wit_delivery::Host for HostState {
    async fn exchange(
        &mut self,
        backend: String,
        message: Vec<u8>,
        credential: Option<Resource<Credential>>,
        deadline: u64,
    ) -> wasmtime::Result<Result<Reply, DeliveryError>> {
        let bearer = match &credential {
            Some(handle) => {
                let credential = self.table.get(handle)?;
                // A credential is only ever sent to the backend it was acquired for.
                if credential.backend != backend {
                    return Ok(Err(DeliveryError::NotPermitted));
                }
                Some(credential.bearer.clone())
            }
            None => None,
        };
        let backends = self.backends.clone();
        let Some(target) = backends.get(&backend) else {
            return Ok(Err(DeliveryError::NotPermitted));
        };
        // Never send without the credential an endpoint is configured with.
        if target.auth.is_some() && bearer.is_none() {
            return Ok(Err(DeliveryError::NotPermitted));
        }
        let deadline = tokio::time::Instant::from_std(clock::to_instant(deadline));
        let stopped = self.when_stopped();
        let exchange = async {
            match &target.transport {
                Transport::Http(http) => http.exchange(&message, bearer.as_ref(), deadline).await,
                Transport::Stdio(stdio) => stdio.exchange(&message, deadline).await,
            }
        };
        Ok(tokio::select! {
            r = exchange => r,
            () = stopped => Err(DeliveryError::Cancelled),
        })
    }

    fn interrupted(&mut self) -> wasmtime::Result<bool> {
        Ok(self.stopped())
    }

    async fn retry_after(
        &mut self,
        backend: String,
        attempt: u32,
        deadline: u64,
    ) -> wasmtime::Result<bool> {
        let allowed = self.backends.get(&backend).map_or(0, |b| b.retries);
        if attempt > allowed || self.stopped() {
            return Ok(false);
        }
        let wake = tokio::time::Instant::now() + backoff(attempt);
        // Never sleep past the deadline: a retry that could not start in time is no retry.
        if wake >= tokio::time::Instant::from_std(clock::to_instant(deadline)) {
            return Ok(false);
        }
        let stopped = self.when_stopped();
        Ok(tokio::select! {
            () = tokio::time::sleep_until(wake) => true,
            () = stopped => false,
        })
    }
}
