//! Host configuration: everything a registration does not say.

use crate::backends::BackendConfig;
use crate::capabilities::credentials::CredentialProvider;
use crate::capabilities::discovery::{check_clients, OAuthClient};
use crate::capabilities::http::HttpOptions;
use crate::capabilities::transport::Transport;
use crate::capabilities::zone::Zone;
use crate::declaration::Declaration;
use crate::retry::RetryPolicy;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The default Engine's `total_component_instances` (`runtime::default_engine`): the
/// default for [`Options::max_instances`].
pub const DEFAULT_MAX_INSTANCES: usize = 512;
/// The most [`Options::max_instances`] may say: far beyond any Engine's pool, and within
/// what a semaphore can count.
pub const MAX_INSTANCES: usize = 1 << 20;

/// A host environment variable a stdio backend is given ([`Options::stdio_env`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StdioEnv {
    /// To every stdio backend.
    All(String),
    /// To this backend only: a credential one backend needs goes to no other (digest
    /// §10: the smallest practical environment).
    Backend {
        /// The backend's id.
        id: String,
        /// The variable's name.
        name: String,
    },
}

impl StdioEnv {
    /// The variable's name.
    pub fn name(&self) -> &str {
        match self {
            StdioEnv::All(name) | StdioEnv::Backend { name, .. } => name,
        }
    }

    /// Whether backend `id` is given it.
    pub fn reaches(&self, id: &str) -> bool {
        match self {
            StdioEnv::All(_) => true,
            StdioEnv::Backend { id: only, .. } => only == id,
        }
    }

    /// The command line's form, `NAME` or `ID:NAME` (an id, reverse-DNS, has no `:`,
    /// nor has a variable's name); else why not.
    pub fn parse(text: &str) -> Result<StdioEnv, String> {
        let entry = match text.split_once(':') {
            None => StdioEnv::All(text.to_string()),
            Some((id, name)) => StdioEnv::Backend {
                id: id.to_string(),
                name: name.to_string(),
            },
        };
        match &entry {
            StdioEnv::Backend { id, .. } if id.is_empty() => {
                Err("names no backend before its `:` (NAME or ID:NAME)".into())
            }
            _ if !entry.names_a_variable() => Err(
                "names no environment variable (NAME or ID:NAME; a name is letters, digits \
                 and `_`, not starting with a digit)"
                    .into(),
            ),
            _ => Ok(entry),
        }
    }

    /// Whether its name is one a variable can have: letters, digits and `_`, not
    /// starting with a digit (an empty one, or `NAME=VALUE`, would never be passed).
    pub fn names_a_variable(&self) -> bool {
        crate::vocab::is_env_name(self.name())
    }
}

impl std::fmt::Display for StdioEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StdioEnv::All(name) => f.write_str(name),
            StdioEnv::Backend { id, name } => write!(f, "{id}:{name}"),
        }
    }
}

/// Host configuration (everything a registration does not say).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Another build of the component instead of the embedded one. Without
    /// [`crate::InterceptorBuilder::engine`] it runs on an Engine made for it at each
    /// build (its own instance pool, ticker thread and slots), not on the process's
    /// default one, which only the embedded component shares.
    pub component: Option<Vec<u8>>,
    /// Append each settlement record to this JSONL file (synced). A relative path is
    /// taken from the working directory when the interceptor is built.
    pub audit_path: Option<PathBuf>,
    /// Cap on a backend's response body; default 1 MiB. What replies hand on (messages,
    /// injections, a supplied result, an effective value) is recorded: a call's record
    /// longer than twice its event and 64 MiB is an engine failure, so caps far above the
    /// default on long chains can deny a call whose replies add up past that.
    pub max_body_bytes: Option<usize>,
    /// Backend ids allowed plain `http` to non-loopback hosts (local development only:
    /// events and credentials travel unencrypted). Each must be an http backend of the
    /// registration; `warnings()` names each (the first 100 by backend id, then a line
    /// counting the rest).
    pub allow_insecure_http: Vec<String>,
    /// A PEM file of extra trust roots for `https` backends.
    pub trust_roots: Option<PathBuf>,
    /// Retries after transient failures (refused, reset, lost, 502–504, JSON-RPC
    /// -32003), always inside the original deadline and with the same bytes. Off by default.
    pub retries: RetryPolicy,
    /// Bound on each observer delivery (default 2 s, also the most: the component bounds
    /// every notification to 2 s, which a longer one does not lift); the call's budget
    /// bounds it too.
    pub observer_timeout: Option<Duration>,
    /// Host environment variables passed to stdio backends besides `PATH` (their
    /// environment is otherwise empty), each to every stdio backend or to one only
    /// ([`StdioEnv`]). A backend id that is no stdio backend of the registration is an
    /// error.
    pub stdio_env: Vec<StdioEnv>,
    /// The harness's own credential sources, by backend id (http backends only). Each
    /// replaces the registration's binding for its backend; the interceptor never closes
    /// them.
    pub credential_providers: HashMap<String, Arc<dyn CredentialProvider>>,
    /// The harness's own transports, by backend id (any backend of the registration).
    /// Each replaces that backend's `http` or `stdio` binding; deadlines, cancellation,
    /// retries, policy and audit apply as to any backend (to a transport that does not
    /// block the thread: [`Transport`]), and the interceptor never closes them.
    pub transports: HashMap<String, Arc<dyn Transport>>,
    /// The local trust policy for http backends whose registration names no credential
    /// (digest §12): such a backend is called without one, and if it answers 401 with a
    /// `Bearer` challenge (or no `WWW-Authenticate`), its protected resource metadata
    /// (RFC 9728) is read and a token is requested for it from the first of these
    /// clients' issuers it lists; the same bytes then go once more with it. Empty (the
    /// default): that 401 is `auth-failed`. At most one client per issuer.
    pub oauth_clients: Vec<OAuthClient>,
    /// What the harness intercepts and enforces, per event (default: every interceptable
    /// event with every effect it allows). A registration intercepting an undeclared
    /// event is refused at load.
    pub declaration: Declaration,
    /// The most component instances this interceptor has at once, idle or busy
    /// (default [`DEFAULT_MAX_INSTANCES`], the default Engine's capacity; at least 2, at
    /// most [`MAX_INSTANCES`]); of those it keeps at most 32 idle, giving the others' slots back to the Engine.
    /// Calls beyond it wait in order, and the wait counts against each call's
    /// deadlines in turn (the first from the call's start, each later one from the one
    /// before) and its budget: a call whose time runs out waiting is settled by its
    /// subscription's policy (`deadline-exceeded`, phase `queue`) on one of a few
    /// instances held back for that (1 per 16, at least 1), never as an engine
    /// failure. No I/O is done on those: a call whose fail-open interceptor ran out
    /// waiting, with a later one still to ask, waits on for one of the others until
    /// that one's deadline, and it is asked with what is left of its timeout. Those
    /// few instances settle one call at a time each, so in a burst a call whose time ran
    /// out may be settled late, after the others ahead of it (its policy still decides,
    /// and no backend is asked).
    /// Interceptors on the process's default Engine (every `Interceptor::new` without
    /// [`Options::component`]) also share its instance slots and wait for them the same
    /// way. On an Engine of your own, instances in use at the same moment
    /// beyond its pooling limit (`PoolingAllocationConfig::total_component_instances`)
    /// fail to instantiate, which settles as `engine-failure`: keep the sum of its
    /// interceptors' `max_instances` plus your own instances within it where their
    /// bursts can coincide, and its core instances, tables and memories within theirs
    /// (see [`crate::InterceptorBuilder::engine`]).
    pub max_instances: Option<usize>,
}

impl Options {
    /// [`Options::max_instances`], checked.
    pub(crate) fn instances(&self) -> wasmtime::Result<usize> {
        match self.max_instances.unwrap_or(DEFAULT_MAX_INSTANCES) {
            n if (2..=MAX_INSTANCES).contains(&n) => Ok(n),
            n if n < 2 => Err(wasmtime::format_err!(
                "max_instances must be at least 2 (one for calls, one held back to settle \
                 calls whose time ran out waiting), got {n}"
            )),
            n => Err(wasmtime::format_err!(
                "max_instances must be at most {MAX_INSTANCES}, got {n}"
            )),
        }
    }

    /// The part of the options that says how backends are reached.
    pub(crate) fn backend_config(&self) -> wasmtime::Result<BackendConfig> {
        check_clients(&self.oauth_clients)
            .map_err(|e| wasmtime::format_err!("oauth_clients{e}"))?;
        Ok(BackendConfig {
            http: HttpOptions {
                max_body_bytes: self.max_body_bytes.unwrap_or(1 << 20),
                allow_insecure_http: false,
                tls: Arc::new(crate::tls::client_config(self.trust_roots.as_deref())?),
                innermost: Zone::Loopback,
            },
            allow_insecure_http: self.allow_insecure_http.clone(),
            stdio_env: self.stdio_env.clone(),
            retries: self.retries.clone(),
            credential_providers: self.credential_providers.clone(),
            transports: self.transports.clone(),
            oauth_clients: self.oauth_clients.clone().into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stdio_env_entry_names_a_variable_and_a_backend_if_any() {
        assert_eq!(StdioEnv::parse("TOKEN"), Ok(StdioEnv::All("TOKEN".into())));
        let scoped = StdioEnv::parse("com.example.a:_TOKEN_2");
        assert_eq!(
            scoped,
            Ok(StdioEnv::Backend {
                id: "com.example.a".into(),
                name: "_TOKEN_2".into()
            })
        );
        assert_eq!(
            scoped.map(|e| e.to_string()).as_deref(),
            Ok("com.example.a:_TOKEN_2")
        );
        for bad in [
            "",
            "com.example.a:",
            ":TOKEN",
            "A:B:C",
            "TOKEN=value",
            "2FA",
            "A B",
        ] {
            assert!(StdioEnv::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn max_instances_is_bounded_on_both_sides_by_name() {
        for (n, ok) in [
            (1, false),
            (2, true),
            (MAX_INSTANCES, true),
            (usize::MAX, false),
        ] {
            let options = Options {
                max_instances: Some(n),
                ..Options::default()
            };
            match options.instances() {
                Ok(got) => assert!(ok && got == n, "{n}"),
                Err(e) => assert!(!ok && e.to_string().contains("max_instances"), "{n}: {e}"),
            }
        }
    }
}
