//! The wasmtime host for the `ahp-interceptor` component, and the `ahp` CLI.
//!
//! The component holds the Agent Hooks Protocol logic; this crate gives it its only
//! capabilities — the shared monotonic clock, delivery to registered backends, and
//! credentials that never enter the sandbox — and exposes a small API for harnesses:
//! build an [`Interceptor`] from a registration, [`Interceptor::intercept`] each tool
//! call, [`Interceptor::shutdown`] at the end.
#![warn(missing_docs)]

mod api;
/// The durable JSONL audit log.
pub mod audit;
mod bindings;
mod capabilities;
/// The `ahp` command line.
pub mod cli;
mod clock;
mod declaration;
/// The built-in policy backend and script of `ahp demo`.
pub mod demo;
mod error;
mod interrupt;
mod runtime;
mod tls;

pub use ahp_vocab as vocab;
pub use ahp_vocab::{DecidedBy, Decision, EffectKind, FailureClass, Problem, Record};
pub use api::{HookCall, Interceptor, Observed, ObserverReport, Options, Settlement};
pub use capabilities::credentials::{
    AuthFailure, BoxFuture, CredentialProvider, CredentialRequest, Secret,
};
pub use capabilities::RetryPolicy;
pub use declaration::Declaration;
pub use error::Error;
pub use interrupt::Interrupt;
pub use runtime::EMBEDDED_COMPONENT;
