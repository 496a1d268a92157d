//! The backend registry: every backend of one registration, by id, with how it is reached
//! and where its credential comes from. Built once per interceptor from the component's
//! plan and the host's [`BackendConfig`], then shared by all of its instances.

use crate::bindings::delivery::Reply;
use crate::bindings::host_types::{DeliveryError, IoPhase};
use crate::bindings::interceptor::{AuthPlan, BackendPlan, OauthFlow, TransportPlan};
use crate::capabilities::credentials::{CredentialProvider, Source};
use crate::capabilities::discovery::{Discovery, OAuthClient};
use crate::capabilities::http::{HttpBackend, HttpOptions};
use crate::capabilities::oauth::OAuth;
use crate::capabilities::stdio::{self, StdioBackend};
use crate::capabilities::transport::{self, TransportRequest};
use crate::capabilities::zone::Zone;
use crate::interrupt::Interrupt;
use crate::options::StdioEnv;
use crate::retry::RetryPolicy;
use crate::types::Secret;
use ahp_vocab::OAuthFlow;
use std::collections::HashMap;
use std::sync::Arc;

/// What the host says about reaching backends (the registration says the rest).
#[derive(Clone, Debug)]
pub struct BackendConfig {
    /// How http backends are reached (body cap, TLS); per-backend insecure http is below.
    pub http: HttpOptions,
    /// Backend ids allowed plain `http` to non-loopback hosts.
    pub allow_insecure_http: Vec<String>,
    /// Host environment variables passed to stdio backends besides `PATH`.
    pub stdio_env: Vec<StdioEnv>,
    /// Retries after transient failures.
    pub retries: RetryPolicy,
    /// The harness's own credential sources, by backend id.
    pub credential_providers: HashMap<String, Arc<dyn CredentialProvider>>,
    /// The harness's own transports, by backend id.
    pub transports: HashMap<String, Arc<dyn transport::Transport>>,
    /// The local trust policy for http backends whose registration names no credential:
    /// after their 401 challenge, a token from one of these (none: such a 401 fails).
    pub oauth_clients: Arc<[OAuthClient]>,
}

/// How a backend is reached.
#[derive(Debug)]
pub enum Transport {
    Http(HttpBackend),
    /// A child process, persistent or one per event.
    Stdio(StdioBackend),
    /// The embedder's own (`Options::transports`): borrowed, never closed. With the
    /// longest reply taken from it, as from the built-in transports.
    Injected(Arc<dyn transport::Transport>, usize),
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
    /// How many subscriptions each backend's hook has, where the registration says
    /// ([`crate::planned::subscription_counts`]): the places a settlement's observer
    /// entries may name.
    subscriptions: Option<HashMap<String, usize>>,
}

/// The names of the variables of `entries` that backend `id` is given.
fn stdio_env_of(entries: &[StdioEnv], id: &str) -> Vec<String> {
    entries
        .iter()
        .filter(|entry| entry.reaches(id))
        .map(|entry| entry.name().to_string())
        .collect()
}

impl Backends {
    /// Builds the transports and credential sources the component's plan asks for. An
    /// injected provider replaces the registration's binding for its backend. Every
    /// backend id the configuration names must be a backend of the plan (of its kind,
    /// where only one kind takes it): a misspelt one would silently configure nothing.
    pub fn new(plan: Vec<BackendPlan>, config: &BackendConfig) -> Result<Backends, String> {
        let is_http = |id: &str| {
            plan.iter()
                .any(|b| b.id == id && matches!(b.transport, TransportPlan::Http(_)))
        };
        if let Some(unknown) = config.credential_providers.keys().find(|id| !is_http(id)) {
            return Err(format!(
                "credential provider for `{unknown}`, which is not an http backend of this registration"
            ));
        }
        if let Some(unknown) = config.allow_insecure_http.iter().find(|id| !is_http(id)) {
            return Err(format!(
                "allow-insecure-http names `{unknown}`, which is not an http backend of this registration"
            ));
        }
        let is_stdio = |id: &str| {
            plan.iter()
                .any(|b| b.id == id && matches!(b.transport, TransportPlan::Stdio(_)))
        };
        if let Some(at) = config.stdio_env.iter().position(|e| !e.names_a_variable()) {
            return Err(format!(
                "stdio-env entry {at} names no environment variable"
            ));
        }
        let mut scoped = config.stdio_env.iter().filter_map(|entry| match entry {
            StdioEnv::Backend { id, .. } => Some(id),
            StdioEnv::All(_) => None,
        });
        if let Some(unknown) = scoped.find(|id| !is_stdio(id)) {
            return Err(format!(
                "stdio-env names `{unknown}`, which is not a stdio backend of this registration"
            ));
        }
        let is_backend = |id: &str| plan.iter().any(|b| b.id == id);
        if let Some(unknown) = config.transports.keys().find(|id| !is_backend(id)) {
            return Err(format!(
                "transport for `{unknown}`, which is not a backend of this registration"
            ));
        }
        if let Some(unknown) = config.retries.per_backend.keys().find(|id| !is_backend(id)) {
            return Err(format!(
                "retries for `{unknown}`, which is not a backend of this registration"
            ));
        }
        let oauth = Arc::new(OAuth::new(config.http.clone()));
        let mut by_id = HashMap::new();
        for backend in plan {
            let transport = match (config.transports.get(&backend.id), &backend.transport) {
                (Some(injected), _) => {
                    Transport::Injected(Arc::clone(injected), config.http.max_body_bytes)
                }
                (None, TransportPlan::Http(url)) => {
                    let mut http = config.http.clone();
                    http.allow_insecure_http = config.allow_insecure_http.contains(&backend.id);
                    Transport::Http(
                        HttpBackend::new(url, http)
                            .map_err(|e| format!("backend {}: {e}", backend.id))?,
                    )
                }
                (None, TransportPlan::Stdio(_)) if stdio::children_reaped_by_the_kernel() => {
                    return Err(format!(
                        "backend {}: SIGCHLD is ignored in this process, so the kernel reaps \
                         stdio backends and their exit status cannot be read (an answer would \
                         be taken for an abnormal exit); restore its default action first",
                        backend.id
                    ));
                }
                (None, TransportPlan::Stdio(_)) if stdio::broken_pipes_kill_the_process() => {
                    return Err(format!(
                        "backend {}: SIGPIPE has its default action in this process, so a \
                         stdio backend that exits before reading its request would kill \
                         this process; ignore SIGPIPE first",
                        backend.id
                    ));
                }
                (None, TransportPlan::Stdio(plan)) => Transport::Stdio(StdioBackend::new(
                    &backend.id,
                    plan,
                    &stdio_env_of(&config.stdio_env, &backend.id),
                    config.http.max_body_bytes,
                )),
            };
            let credentials = match (config.credential_providers.get(&backend.id), backend.auth) {
                (Some(provider), _) => {
                    // Told to the provider at every acquisition; held once here.
                    let destination = match &backend.transport {
                        TransportPlan::Http(url) => Some(Arc::from(url.as_str())),
                        TransportPlan::Stdio(_) => None,
                    };
                    Some(Source::Provided(Arc::clone(provider), destination))
                }
                (None, Some(AuthPlan::Oauth(plan))) => {
                    Some(Source::OAuth(plan, Arc::clone(&oauth), Arc::default()))
                }
                (None, Some(bearer)) => Some(Source::Bearer(bearer)),
                // Discovery for https backends only: a plain-http one would get its token in
                // the clear, and anyone on the way could have sent the challenge.
                (None, None) => match (&transport, &backend.transport) {
                    (Transport::Http(http), TransportPlan::Http(url))
                        if !config.oauth_clients.is_empty() && http.is_https() =>
                    {
                        Some(Source::Discovered(Arc::new(Discovery::new(
                            url,
                            Arc::clone(&config.oauth_clients),
                            Arc::clone(&oauth),
                            &config.http,
                        ))))
                    }
                    _ => None,
                },
            };
            let retries = config.retries.for_backend(&backend.id);
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
            subscriptions: None,
        })
    }

    /// These backends, knowing how many subscriptions each one's hook has (`None`: a
    /// registration whose hooks cannot be read, another build's format).
    pub fn with_subscriptions(self, subscriptions: Option<HashMap<String, usize>>) -> Backends {
        Backends {
            subscriptions,
            ..self
        }
    }

    /// How many subscriptions each backend's hook has, if known.
    pub fn subscriptions(&self) -> Option<&HashMap<String, usize>> {
        self.subscriptions.as_ref()
    }

    /// Closes idle connections and kills every stdio child (shutdown); never blocks.
    /// [`reap`] then waits for the children. Safe to repeat, also concurrently.
    pub fn close(&self) {
        // Discoveries first (they ask OAuth for tokens), then OAuth, which starts no
        // acquisition after it closed.
        for backend in self.by_id.values() {
            if let Some(Source::Discovered(discovery)) = &backend.credentials {
                discovery.close();
            }
        }
        if let Some(oauth) = &self.oauth {
            oauth.close();
        }
        for backend in self.by_id.values() {
            match &backend.transport {
                Transport::Http(http) => http.close_idle(),
                Transport::Stdio(stdio) => stdio.shut_down(),
                Transport::Injected(..) => {}
            }
        }
    }

    /// Closes the input of each persistent stdio child whose last message was a
    /// notification not yet past its deadline ([`stdio::StdioBackend::end_input`]).
    pub fn end_inputs(&self) -> Vec<stdio::Ending> {
        self.by_id
            .values()
            .filter_map(|backend| match &backend.transport {
                Transport::Stdio(stdio) => stdio.end_input(),
                Transport::Http(_) | Transport::Injected(..) => None,
            })
            .collect()
    }

    /// The stdio children [`Backends::close`] killed, to reap with [`reap`] on a blocking
    /// thread. Holds only the children: the rest of the registry (credential providers
    /// among it) is released as soon as the interceptor is.
    pub fn killed(&self) -> Vec<(String, stdio::Killed)> {
        self.by_id
            .iter()
            .filter_map(|(id, backend)| match &backend.transport {
                Transport::Stdio(stdio) => Some((id.clone(), stdio.killed())),
                Transport::Http(_) | Transport::Injected(..) => None,
            })
            .collect()
    }
}

impl Backend {
    /// One exchange carrying exactly `message`, by `deadline`, over this backend's
    /// transport; `cancelled` tells an injected transport to stop its own work. Nothing
    /// is sent once `deadline` has passed (a delivery started late, such as an owned
    /// observer completed after its bound): a ready pipe would otherwise take it at once.
    pub async fn exchange(
        &self,
        id: &str,
        message: &[u8],
        bearer: Option<&Secret>,
        deadline: tokio::time::Instant,
        cancelled: &Interrupt,
    ) -> Result<Reply, DeliveryError> {
        if tokio::time::Instant::now() >= deadline {
            return Err(DeliveryError::DeadlineExceeded(IoPhase::Connect));
        }
        let reply = match &self.transport {
            Transport::Http(http) => {
                let received = http.exchange(message, bearer, deadline).await?;
                if let (Some(Source::Discovered(discovery)), Some(401)) =
                    (&self.credentials, received.reply.status)
                {
                    let zone = Zone::of(received.peer);
                    discovery.challenged(received.challenge.as_deref(), zone, bearer.is_some());
                }
                received.reply
            }
            // No status on stdio: a message written in full and answered is delivered.
            Transport::Stdio(stdio) => return stdio.exchange(message, deadline).await,
            Transport::Injected(injected, max_body) => {
                let request = TransportRequest {
                    backend: id,
                    message,
                    credential: bearer,
                    deadline: deadline.into_std(),
                    cancelled,
                };
                transport::exchange(injected.as_ref(), request, *max_body).await?
            }
        };
        // A token answered with anything but a 401 was taken (`Refusals`).
        if let (Some(source), Some(_), Some(status)) = (&self.credentials, bearer, reply.status) {
            if status != 401 {
                source.accepted();
            }
        }
        Ok(reply)
    }
}

/// Reaps killed stdio children, all within one shared bound. Blocks the thread (up to
/// [`stdio::SHUTDOWN_BOUND`]): keep it off async workers.
pub fn reap(killed: Vec<(String, stdio::Killed)>) {
    let until = std::time::Instant::now() + stdio::SHUTDOWN_BOUND;
    for (id, children) in killed {
        let remaining = children.reap(until);
        if remaining > 0 {
            tracing::warn!(backend = %id, remaining, "stdio backend processes not reaped at shutdown");
        }
    }
}

impl Backends {
    /// What `ahp check` should say about how backends are reached: plain `http` off
    /// loopback, and credentials this host cannot obtain; the first
    /// [`MAX_LISTED`](crate::vocab::MAX_LISTED) by backend id, then one line counting
    /// the rest, as the component's lists end.
    pub fn warnings(&self) -> Vec<String> {
        // Each with its backend's id, to be put in order by it.
        let mut warnings: Vec<(&str, String)> = Vec::new();
        for (id, backend) in &self.by_id {
            if let Transport::Http(http) = &backend.transport {
                if let Some(host) = http.insecure_host() {
                    let warning = match http.allows_insecure_http() {
                        true => format!(
                            "backend `{id}`: plain http to `{host}` is allowed by allow-insecure-http; \
                             events and credentials travel unencrypted (local development only)"
                        ),
                        false => format!(
                            "backend `{id}`: plain http to `{host}` will be refused at delivery \
                             unless every address it resolves to is loopback (http is for \
                             loopback only; use https)"
                        ),
                    };
                    warnings.push((id.as_str(), warning));
                }
            }
            if let Some(Source::OAuth(plan, ..)) = &backend.credentials {
                if plan.flow != OauthFlow::ClientCredentials {
                    let warning = format!(
                        "backend `{id}`: OAuth flow `{}` needs a user agent this host does not \
                         have; every call is auth-failed unless a credential provider is injected",
                        OAuthFlow::AuthorizationCodePkce
                    );
                    warnings.push((id.as_str(), warning));
                }
            }
        }
        warnings.sort();
        let mut warnings: Vec<String> = warnings.into_iter().map(|(_, w)| w).collect();
        let left_out = warnings.len().saturating_sub(crate::vocab::MAX_LISTED);
        if left_out > 0 {
            warnings.truncate(crate::vocab::MAX_LISTED);
            warnings.push(crate::vocab::not_listed(left_out, "backend warnings"));
        }
        warnings
    }

    /// The files the backends' credential bindings name (`file:` references, read anew
    /// at every dispatch), each with its backend's id and the field that names it.
    #[cfg(feature = "cli")]
    pub fn secret_files(&self) -> Vec<(&str, &'static str, &str)> {
        use crate::capabilities::credentials::file_of;
        self.by_id
            .iter()
            .filter_map(|(id, backend)| {
                let (field, reference) = match backend.credentials.as_ref()? {
                    Source::Bearer(AuthPlan::BearerRef(reference)) => ("tokenRef", reference),
                    Source::OAuth(plan, ..) => {
                        ("clientSecretRef", plan.client_secret_ref.as_ref()?)
                    }
                    _ => return None,
                };
                Some((id.as_str(), field, file_of(reference)?))
            })
            .collect()
    }

    /// The backend registered as `id`.
    pub fn get(&self, id: &str) -> Option<&Backend> {
        self.by_id.get(id)
    }
}
