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
mod component_cache;
/// `ahp component push|export` and `--component oci://…`.
pub mod component_cmd;
/// The built-in policy backend and script of `ahp demo`.
pub mod demo;
mod interrupt;
mod oci;
mod runtime;
mod tls;

pub use api::{
    BuildError, CallError, DecidedBy, Decision, HookCall, Interceptor, Options, Settlement,
};
pub use capabilities::credentials::{
    AuthFailure, BoxFuture, CredentialProvider, CredentialRequest, Secret,
};
pub use capabilities::RetryPolicy;
pub use interrupt::Interrupt;
pub use runtime::{EMBEDDED_COMPONENT, EMBEDDED_WIT_PACKAGE};
