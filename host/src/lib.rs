//! The wasmtime host for the `ahp-interceptor` component, and the `ahp` CLI.
//!
//! The component holds the Agent Hooks Protocol logic; this crate gives it its only
//! capabilities — the shared monotonic clock, delivery to registered backends, and
//! credentials that never enter the sandbox — and exposes a small API for harnesses:
//! build an [`Interceptor`] from a registration, [`Interceptor::intercept`] each tool
//! call, [`Interceptor::shutdown`] at the end.
//!
//! Layout, in the manner of wasmtime's wasi-http: `bindings` (generated only), `types`
//! (resource state the bindings name), `state` (the store's data), one `*_impl` module per
//! imported WIT interface, the transports and credential sources in `capabilities`, the
//! backend registry (`backends`), `retry`, `observe`, the instance `pool` (waiting
//! in `lanes`, sharing the Engine's `slots`), and the owned client (`api`).
#![warn(missing_docs)]

mod api;
pub mod audit;
mod audit_queue;
mod backends;
#[allow(missing_docs)]
mod bindings;
mod builder;
mod cache_prune;
mod capabilities;
mod caught;
#[cfg(feature = "cli")]
pub mod cli;
mod clock;
pub mod compile_cache;
#[cfg(feature = "cli")]
mod component_cache;
/// `ahp component push|export` and `--component oci://…`.
#[cfg(feature = "cli")]
pub mod component_cmd;
mod convert;
mod credentials_impl;
mod declaration;
mod delivery_impl;
#[cfg(feature = "cli")]
pub mod demo;
mod error;
#[cfg(feature = "cli")]
pub mod hook;
mod host_types_impl;
mod interrupt;
mod lanes;
mod linker;
mod observe;
#[cfg(feature = "cli")]
mod oci;
mod options;
mod planned;
mod pool;
#[cfg(feature = "cli")]
mod registry;
mod regular_file;
mod retry;
mod runtime;
mod settlement;
mod slots;
mod state;
mod tls;
mod types;

pub use ahp_vocab as vocab;
pub use ahp_vocab::{DecidedBy, Decision, EffectKind, FailureClass, Problem, Record};
pub use api::{HookCall, Interceptor};
pub use bindings::{Plugin, PluginPre};
pub use builder::InterceptorBuilder;
pub use capabilities::credentials::{
    AuthFailure, BoxFuture, CredentialProvider, CredentialPurpose, CredentialRequest,
};
pub use capabilities::discovery::OAuthClient;
pub use capabilities::transport::{Transport, TransportError, TransportReply, TransportRequest};
pub use declaration::Declaration;
pub use error::Error;
pub use interrupt::Interrupt;
pub use linker::{add_to_linker, check_engine, component_instant, AhpView};
pub use options::{Options, StdioEnv, DEFAULT_MAX_INSTANCES, MAX_INSTANCES};
pub use pool::BOUND_MARGIN;
pub use retry::RetryPolicy;
pub use runtime::EMBEDDED_WIT_PACKAGE;
pub use runtime::{bound_cpu, EpochTicker, Epochs, EMBEDDED_COMPONENT};
pub use settlement::{Observed, ObserverReport, Settlement};
pub use state::HostState;
pub use types::Secret;
/// The wasmtime this crate is built with: use its types to share an `Engine`.
pub use wasmtime;
/// The wasmtime-wasi this crate is built with.
pub use wasmtime_wasi;
