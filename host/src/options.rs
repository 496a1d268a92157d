//! Host configuration: everything a registration does not say.

use crate::backends::BackendConfig;
use crate::capabilities::credentials::CredentialProvider;
use crate::capabilities::http::HttpOptions;
use crate::capabilities::transport::Transport;
use crate::declaration::Declaration;
use crate::retry::RetryPolicy;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
    /// The harness's own transports, by backend id (any backend of the registration).
    /// Each replaces that backend's `http` or `stdio` binding; deadlines, cancellation,
    /// retries, policy and audit apply as to any backend, and the interceptor never
    /// closes them.
    pub transports: HashMap<String, Arc<dyn Transport>>,
    /// What the harness intercepts and enforces, per event (default: every interceptable
    /// event with every effect it allows). A registration intercepting an undeclared
    /// event is refused at load.
    pub declaration: Declaration,
}

impl Options {
    /// The part of the options that says how backends are reached.
    pub(crate) fn backend_config(&self) -> wasmtime::Result<BackendConfig> {
        Ok(BackendConfig {
            http: HttpOptions {
                max_body_bytes: self.max_body_bytes.unwrap_or(1 << 20),
                allow_insecure_http: false,
                tls: Arc::new(crate::tls::client_config(self.trust_roots.as_deref())?),
            },
            allow_insecure_http: self.allow_insecure_http.clone(),
            stdio_env: self.stdio_env.clone(),
            retries: self.retries.clone(),
            credential_providers: self.credential_providers.clone(),
            transports: self.transports.clone(),
        })
    }
}
