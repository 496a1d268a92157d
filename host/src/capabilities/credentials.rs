//! Credentials: resolved by the host at dispatch, inside the subscription's deadline, and
//! handed to the component only as an opaque resource. The secret itself never crosses
//! the boundary, and every type that holds one prints a redaction.

use crate::bindings::interceptor::AuthPlan;
use std::fmt;
use tokio::time::Instant;

/// A secret value. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the one place that must send it: the Authorization header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// The host side of the WIT `credential` resource: whose it is, and the token.
#[derive(Debug)]
pub struct Credential {
    pub backend: String,
    pub bearer: Secret,
}

/// Why a credential could not be had (mapped to the WIT `auth-error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthFailure {
    Unresolved,
    Unsupported,
    DeadlineExceeded,
}

/// Resolves a backend's configured credential reference by `deadline`.
pub async fn resolve(plan: &AuthPlan, deadline: Instant) -> Result<Secret, AuthFailure> {
    let lookup = async {
        match plan {
            AuthPlan::BearerEnv(name) => from_env(name),
            AuthPlan::BearerRef(reference) => from_reference(reference).await,
            AuthPlan::Oauth(_) => Err(AuthFailure::Unsupported),
        }
    };
    tokio::time::timeout_at(deadline, lookup)
        .await
        .unwrap_or(Err(AuthFailure::DeadlineExceeded))
}

fn from_env(name: &str) -> Result<Secret, AuthFailure> {
    std::env::var(name)
        .ok()
        .and_then(|v| usable(v.trim()))
        .ok_or(AuthFailure::Unresolved)
}

/// `file:PATH` (read at every dispatch, so a rotated file is picked up) or `env:NAME`.
async fn from_reference(reference: &str) -> Result<Secret, AuthFailure> {
    if let Some(path) = reference.strip_prefix("file:") {
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|_| AuthFailure::Unresolved)?;
        return usable(text.trim()).ok_or(AuthFailure::Unresolved);
    }
    if let Some(name) = reference.strip_prefix("env:") {
        return from_env(name);
    }
    Err(AuthFailure::Unsupported)
}

/// A token fit for an HTTP header: non-empty visible ASCII, no spaces.
fn usable(token: &str) -> Option<Secret> {
    let ok = !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic());
    ok.then(|| Secret::new(token))
}
