//! Support code for the end-to-end tests: loopback backends that misbehave on demand,
//! and builders for registrations and events.

pub mod fault_backend;
pub mod hook;
pub mod oauth_server;
pub mod peers;
pub mod pki;
pub mod registry;
pub mod schema;
pub mod support;
