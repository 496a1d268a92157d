//! The Agent Hooks Protocol (AHP) interception logic, harness side.
//!
//! This crate is all of the protocol: registration rules, event checks, JSON-RPC
//! encoding, strict response decoding, the serial intercept chain with its failure
//! policy, and the settlement/audit record. It does no I/O of its own: it reaches the
//! world through the [`host_api::Host`] trait, which the WebAssembly build adapts to the
//! component's imports (`wit/interceptor.wit`) and native tests fake.

pub mod failure;
pub mod host_api;
pub mod registration;
pub mod event;
pub mod response;

#[cfg(target_family = "wasm")]
mod component;
