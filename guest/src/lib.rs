//! The Agent Hooks Protocol (AHP) interception logic, harness side.
//!
//! This crate is all of the protocol: registration rules ([`registration`]), event
//! checks ([`event`]), all three read as strict JSON ([`json`]: no repeated names), JSON-RPC encoding done once ([`wire`]), strict response decoding
//! ([`response`]) of the effects it knows ([`effect`]), the serial intercept chain with
//! its failure policy ([`chain`]) and the settlement/audit record ([`settlement`]). Its
//! words and the record's types are shared with the host through [`vocab`]. It does no I/O of its own: it reaches the
//! world through the [`host_api::Host`] trait, which the WebAssembly build adapts to the
//! component's imports (`wit/interceptor.wit`) and native tests fake.

/// The text of an upstream draft fixture (`tests/upstream/fixtures/draft/PATH`), for the
/// unit tests that check the readers against them.
#[cfg(test)]
macro_rules! fixture {
    ($path:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/upstream/fixtures/draft/",
            $path
        ))
    };
}

pub mod chain;
pub mod content;
pub mod deadline;
pub mod effect;
pub mod elicitation;
pub mod engine;
pub mod event;
pub mod events;
pub mod failure_report;
pub mod host_api;
pub mod json;
pub mod observers;
pub mod registration;
pub mod response;
pub mod settlement;
pub mod size_classes;
mod syntax;
pub mod wire;

pub use ahp_vocab as vocab;

#[cfg(target_family = "wasm")]
mod component;
