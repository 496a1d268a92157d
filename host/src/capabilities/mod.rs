//! How the host reaches backends and obtains their credentials: the transports (`http`,
//! `stdio`, injected `transport`) and the credential sources (`credentials`, `oauth`,
//! `discovery`, and the `flight` the last two share; an http backend's name `lookup`s). The WIT impls that serve
//! them to the component are `credentials_impl` and `delivery_impl`.

pub mod credentials;
pub mod discovery;
mod flight;
pub mod http;
mod lookup;
pub mod oauth;
pub mod stdio;
pub mod transport;
pub(crate) mod www_authenticate;
pub mod zone;
