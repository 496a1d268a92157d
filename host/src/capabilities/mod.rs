//! The component's only capabilities: delivery to registered backends, credentials, and
//! (through wasmtime-wasi) the shared monotonic clock. Everything a backend or the
//! network can do wrong comes back as a WIT error value; only host bugs trap.

pub mod credentials;
pub mod http;
pub mod oauth;
pub mod stdio;

use crate::api::Options;
use crate::bindings::credentials::AuthError;
use crate::bindings::delivery::Reply;
use crate::bindings::host_types::DeliveryError;
use crate::bindings::interceptor::{AuthPlan, BackendPlan, OauthFlow, TransportPlan};
use crate::bindings::{credentials as wit_credentials, delivery as wit_delivery, host_types};
use crate::clock;
use crate::interrupt::Interrupt;
use ahp_vocab::{Detail, Failure, FailureClass, OAuthFlow, ObserverResult, Phase};
use credentials::{AuthFailure, Credential, Source};
use http::{HttpBackend, HttpOptions};
use oauth::OAuth;
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
    /// Where its credential comes from; `None` means it is called without one.
    pub credentials: Option<Source>,
    /// Retries allowed per exchange after a transient failure (0 = none).
    pub retries: u32,
}

/// Every backend of one registration, by id; shared by all instances of that registration.
#[derive(Debug, Default)]
pub struct Backends {
    by_id: HashMap<String, Backend>,
    /// The OAuth client and token cache all of them share.
    oauth: Option<Arc<OAuth>>,
}

impl Backends {
    /// Builds the transports and credential sources the component's plan asks for. An
    /// injected provider replaces the registration's binding for its backend. Every
    /// backend id the options name must be an http backend of the plan.
    pub fn from_plan(
        plan: Vec<BackendPlan>,
        options: &Options,
        http: &HttpOptions,
    ) -> Result<Backends, String> {
        let is_http = |id: &str| {
            plan.iter()
                .any(|b| b.id == id && matches!(b.transport, TransportPlan::Http(_)))
        };
        if let Some(unknown) = options.credential_providers.keys().find(|id| !is_http(id)) {
            return Err(format!(
                "credential provider for `{unknown}`, which is not an http backend of this registration"
            ));
        }
        if let Some(unknown) = options.allow_insecure_http.iter().find(|id| !is_http(id)) {
            return Err(format!(
                "allow-insecure-http names `{unknown}`, which is not an http backend of this registration"
            ));
        }
        let oauth = Arc::new(OAuth::new(http.clone()));
        let mut by_id = HashMap::new();
        for backend in plan {
            let transport = match &backend.transport {
                TransportPlan::Http(url) => {
                    let mut http = http.clone();
                    http.allow_insecure_http = options.allow_insecure_http.contains(&backend.id);
                    Transport::Http(
                        HttpBackend::new(url, http)
                            .map_err(|e| format!("backend {}: {e}", backend.id))?,
                    )
                }
                TransportPlan::Stdio(plan) => Transport::Stdio(StdioBackend::new(
                    &backend.id,
                    plan,
                    &options.stdio_env,
                    http.max_body_bytes,
                )),
            };
            let credentials = match (options.credential_providers.get(&backend.id), backend.auth) {
                (Some(provider), _) => Some(Source::Provided(Arc::clone(provider))),
                (None, Some(AuthPlan::Oauth(plan))) => {
                    Some(Source::OAuth(plan, Arc::clone(&oauth)))
                }
                (None, Some(bearer)) => Some(Source::Bearer(bearer)),
                (None, None) => None,
            };
            let retries = options.retries.for_backend(&backend.id);
            by_id.insert(
                backend.id,
                Backend {
                    transport,
                    credentials,
                    retries,
                },
            );
        }
        Ok(Backends {
            by_id,
            oauth: Some(oauth),
        })
    }

    /// Closes idle connections, and kills every stdio child, then reaps them all within
    /// one shared bound (shutdown). Safe to repeat, also concurrently.
    pub fn close(&self) {
        if let Some(oauth) = &self.oauth {
            oauth.close();
        }
        for backend in self.by_id.values() {
            match &backend.transport {
                Transport::Http(http) => http.close_idle(),
                Transport::Stdio(stdio) => stdio.shut_down(),
            }
        }
        let until = std::time::Instant::now() + stdio::SHUTDOWN_BOUND;
        for (id, backend) in &self.by_id {
            if let Transport::Stdio(stdio) = &backend.transport {
                let remaining = stdio.reap(until);
                if remaining > 0 {
                    tracing::warn!(backend = %id, remaining, "stdio backend processes not reaped at shutdown");
                }
            }
        }
    }

    /// What `ahp check` should say about how backends are reached: plain `http` off
    /// loopback, and credentials this host cannot obtain.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        for (id, backend) in &self.by_id {
            if let Transport::Http(http) = &backend.transport {
                if let Some(host) = http.insecure_host() {
                    warnings.push(match http.allows_insecure_http() {
                        true => format!(
                            "backend `{id}`: plain http to `{host}` is allowed by allow-insecure-http; \
                             events and credentials travel unencrypted (local development only)"
                        ),
                        false => format!(
                            "backend `{id}`: plain http to `{host}` will be refused at delivery \
                             (http is for loopback only; use https)"
                        ),
                    });
                }
            }
            if let Some(Source::OAuth(plan, _)) = &backend.credentials {
                if plan.flow != OauthFlow::ClientCredentials {
                    warnings.push(format!(
                        "backend `{id}`: OAuth flow `{}` needs a user agent this host does not \
                         have; every call is auth-failed unless a credential provider is injected",
                        OAuthFlow::AuthorizationCodePkce
                    ));
                }
            }
        }
        warnings.sort();
        warnings
    }

    pub fn get(&self, id: &str) -> Option<&Backend> {
        self.by_id.get(id)
    }

    /// Sends one `hooks/observe` notification by `deadline`, with the backend's
    /// credential if it has one (never without it); an observer's failure never changes
    /// a decision. A transient failure (refused, reset, lost, HTTP 502–504) is retried
    /// with the same bytes as the backend's retry policy allows.
    pub async fn notify(
        &self,
        backend: &str,
        message: &[u8],
        deadline: tokio::time::Instant,
        cancelled: &Interrupt,
    ) -> ObserverResult {
        let Some(target) = self.get(backend) else {
            return ObserverResult::Failed(FailureClass::ConnectionRefused);
        };
        let bearer = match &target.credentials {
            Some(source) => match source.acquire(backend, deadline, cancelled).await {
                Ok(secret) => Some(secret),
                Err(_) => return ObserverResult::Failed(FailureClass::AuthFailed),
            },
            None => None,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (result, transient) = notify_once(target, message, bearer.as_ref(), deadline).await;
            if !transient || !target.wait_to_retry(attempt, deadline).await {
                return result;
            }
        }
    }
}

impl Backend {
    /// Waits the backoff before retry number `attempt`, and says whether to make it: only
    /// while the retry policy allows one more, and only if the wait ends before
    /// `deadline` (a retry that could not start in time is no retry).
    async fn wait_to_retry(&self, attempt: u32, deadline: tokio::time::Instant) -> bool {
        let wake = tokio::time::Instant::now() + backoff(attempt);
        if attempt > self.retries || wake >= deadline {
            return false;
        }
        tokio::time::sleep_until(wake).await;
        true
    }
}

/// How an observer delivery failed, in the intercept failure classes, and whether that
/// failure is transient (the one rule, [`Failure::is_transient`]).
fn observer_failure(error: &DeliveryError) -> Failure {
    let (class, phase) = match error {
        DeliveryError::DeadlineExceeded(_) => {
            (FailureClass::DeadlineExceeded, Phase::AwaitResponse)
        }
        DeliveryError::Cancelled => {
            return Failure::new(FailureClass::DeadlineExceeded, Phase::AwaitResponse)
        }
        DeliveryError::ConnectionRefused => (FailureClass::ConnectionRefused, Phase::Connect),
        DeliveryError::TlsFailed => {
            return Failure::new(FailureClass::ConnectionRefused, Phase::Connect)
                .with_detail(Detail::Tls)
        }
        DeliveryError::NotPermitted => {
            return Failure::new(FailureClass::ConnectionRefused, Phase::Connect)
                .with_detail(Detail::NotPermitted)
        }
        DeliveryError::ConnectionReset => (FailureClass::ConnectionReset, Phase::AwaitResponse),
        DeliveryError::ConnectionLost => (FailureClass::ConnectionLost, Phase::AwaitResponse),
        DeliveryError::MalformedHttp => {
            return Failure::new(FailureClass::HttpStatus, Phase::AwaitResponse)
                .with_detail(Detail::MalformedHttp)
        }
        DeliveryError::LaunchFailed => (FailureClass::LaunchFailed, Phase::Connect),
        DeliveryError::AbnormalExit(_) => (FailureClass::AbnormalExit, Phase::AwaitResponse),
        DeliveryError::ResponseTooLarge => (FailureClass::MalformedJson, Phase::ReadResponse),
    };
    Failure::new(class, phase)
}

/// One attempt at an observe notification: its result, and whether it may be retried.
async fn notify_once(
    target: &Backend,
    message: &[u8],
    bearer: Option<&credentials::Secret>,
    deadline: tokio::time::Instant,
) -> (ObserverResult, bool) {
    let sent = match &target.transport {
        Transport::Http(http) => http.exchange(message, bearer, deadline).await,
        // No status on stdio: a notification written in full is delivered.
        Transport::Stdio(stdio) => stdio.exchange(message, deadline).await,
    };
    let failure = match sent {
        Ok(reply) => match reply.status {
            None => return (ObserverResult::Delivered, false),
            // Observe success is 202 or 204 with no body.
            Some(202 | 204) if reply.body.is_empty() => return (ObserverResult::Delivered, false),
            Some(status) => Failure::new(FailureClass::HttpStatus, Phase::AwaitResponse)
                .with_http_status(status),
        },
        Err(DeliveryError::Cancelled) => return (ObserverResult::Interrupted, false),
        Err(e) => observer_failure(&e),
    };
    (
        ObserverResult::Failed(failure.class),
        failure.is_transient(),
    )
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
        let backends = self.backends.clone();
        let Some(source) = backends.get(&backend).and_then(|b| b.credentials.as_ref()) else {
            return Ok(Ok(None));
        };
        let deadline = tokio::time::Instant::from_std(clock::to_instant(deadline));
        let stopped = self.when_stopped();
        let cancelled = Interrupt::new();
        let resolved = tokio::select! {
            r = source.acquire(&backend, deadline, &cancelled) => r,
            () = stopped => {
                cancelled.interrupt();
                return Ok(Err(AuthError::Cancelled));
            }
        };
        Ok(match resolved {
            Ok(bearer) => Ok(Some(self.table.push(Credential { backend, bearer })?)),
            Err(AuthFailure::Unresolved) => Err(AuthError::Unresolved),
            Err(AuthFailure::AcquisitionFailed) => Err(AuthError::AcquisitionFailed),
            Err(AuthFailure::RefreshFailed) => Err(AuthError::RefreshFailed),
            Err(AuthFailure::Unsupported) => Err(AuthError::Unsupported),
            Err(AuthFailure::DeadlineExceeded) => Err(AuthError::DeadlineExceeded),
        })
    }

    fn reject(&mut self, credential: Resource<Credential>) -> wasmtime::Result<()> {
        let credential = self.table.get(&credential)?;
        if let Some(source) = self
            .backends
            .get(&credential.backend)
            .and_then(|b| b.credentials.as_ref())
        {
            source.reject(&credential.backend, &credential.bearer);
        }
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
        if target.credentials.is_some() && bearer.is_none() {
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
        let backends = self.backends.clone();
        let Some(target) = backends.get(&backend) else {
            return Ok(false);
        };
        if self.stopped() {
            return Ok(false);
        }
        let deadline = tokio::time::Instant::from_std(clock::to_instant(deadline));
        let stopped = self.when_stopped();
        Ok(tokio::select! {
            retry = target.wait_to_retry(attempt, deadline) => retry,
            () = stopped => false,
        })
    }
}
