//! Portable registration documents (digest §6): parse, validate, and hand back typed
//! backends and subscriptions.
//!
//! The harness must reject an invalid or ambiguous registration before using it, and
//! must never skip part of one silently (§6 rules 10–11). So [`parse`] does not stop at
//! the first mistake: it walks the whole document and returns every [`Problem`] (the
//! first hundred, and a count of the rest), each naming the JSON Pointer of the
//! offending field, so an operator can fix them in one go. Unknown fields are ignored
//! with a warning; they never change dispatch or auth. But one named as a credential
//! inside a credential binding is a literal secret, refused (§6: never a literal
//! credential).
//!
//! Values inside an `authentication` object may be secrets, so problems about them name
//! fields only, never values.
//!
//! This module holds the typed result and [`parse`]; `problems` is the collector that
//! lets a check keep going after a mistake, `rules` says what each field must be, and
//! `dispatch` answers which subscriptions receive an event (§6.1).

mod dispatch;
mod problems;
mod rules;
#[cfg(test)]
mod tests;

pub use dispatch::Interceptor;
pub(crate) use problems::Listed;
pub use problems::Problem;

use crate::content::Content;
use crate::json;
use problems::Checker;

/// Whether an intercept subscription may select `event_type` (digest §6 rule 6): the
/// events of the one table, [`crate::events::TABLE`].
pub fn is_interceptable(event_type: &str) -> bool {
    crate::events::named(event_type).is_some()
}

/// Parses and validates a registration document. Any problem rejects the whole document;
/// every problem found is returned, not just the first.
pub fn parse(text: &str) -> Result<Registration, Vec<Problem>> {
    let root = json::parse_to_read(text).map_err(|error| {
        vec![match error {
            json::Error::Duplicate(repeat) => Problem::new(
                repeat.pointer,
                format!("duplicate member `{}`", repeat.member),
            ),
            json::Error::Inexact(number) => Problem::new(number.pointer, json::Inexact::RULE),
            json::Error::Syntax(e) => {
                Problem::new(e.pointer, format!("not valid JSON: {}", e.error))
            }
            json::Error::TooMany => Problem::new("", json::TOO_MANY_PARSED_RULE),
        }]
    })?;
    let mut c = Checker::default();
    let backends = rules::document(&mut c, &root);
    let (backends, warnings) = c.finish(backends)?;
    Ok(Registration { backends, warnings })
}

/// A validated registration: backends in document order (the chain order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub backends: Vec<Backend>,
    /// Accepted oddities: unknown fields, timeouts outside the supported range.
    pub warnings: Vec<Problem>,
}

impl Registration {
    /// The backend with this id, if any (ids are unique).
    pub fn backend(&self, id: &str) -> Option<&Backend> {
        self.backends.iter().find(|b| b.id == id)
    }
}

/// One entry of `hooks`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    /// Reverse-DNS, unique in the document: how the host and the audit name it.
    pub id: String,
    pub transport: Transport,
    /// `None`: the backend is called without credentials.
    pub auth: Option<Auth>,
    /// In document order; a subscription's position is its local id.
    pub subscriptions: Vec<Subscription>,
}

/// How the host reaches a backend: exactly one per backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    Http {
        url: String,
    },
    Stdio {
        command: String,
        args: Vec<String>,
        cwd: Option<String>,
        lifecycle: Lifecycle,
    },
}

/// Whether a stdio backend is one long-lived process or one process per event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    Persistent,
    PerEvent,
}

/// A portable credential binding. Only references to secrets, never secrets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// Bearer token read from this environment variable.
    BearerEnv(String),
    /// Bearer token resolved by the host's credential store under this reference.
    BearerRef(String),
    OAuth(OAuth),
}

/// An OAuth binding; the host acquires and refreshes the token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuth {
    pub issuer: String,
    pub resource: String,
    pub client_id: String,
    /// `authorization_code_pkce` or `client_credentials`.
    pub flow: OAuthFlow,
    pub scopes: Vec<String>,
    pub client_secret_ref: Option<String>,
}

/// One entry of a backend's `subscriptions`: which events, and how they are delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// Position within its backend's `subscriptions` array (the local subscription id).
    pub index: usize,
    pub events: Vec<EventPattern>,
    pub mode: Mode,
    /// What its backend is sent of each event.
    pub view: View,
}

/// What one subscription's backend is sent of an event: `native` only where the
/// registration includes it (`includeNative`), and each content part only as far as its
/// `content` selection allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    pub include_native: bool,
    pub content: Content,
}

/// Intercept (the backend may decide, under a deadline and a policy) or observe (it is
/// told, and nothing waits for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Intercept {
        timeout_ms: u64,
        policy: FailurePolicy,
    },
    Observe,
}

pub use ahp_vocab::{FailurePolicy, OAuthFlow};

pub use ahp_vocab::EventPattern;
