//! What the component needs from its host, as a plain Rust trait.
//!
//! The WIT imports (`credentials`, `delivery`, the monotonic clock) are adapted to this
//! trait in the wasm glue; native unit tests implement it with a scripted fake host and
//! a fake clock, so every protocol path is tested without sockets or wall time.

/// A reading of the monotonic clock, in nanoseconds. Deadlines are absolute instants.
pub type Instant = u64;

/// Nanoseconds in one millisecond.
pub const NANOS_PER_MS: u64 = 1_000_000;

/// How a delivery failed, and where its deadline passed: the shared words (`ahp-vocab`),
/// which also classify them.
pub use ahp_vocab::{DeliveryError, IoPhase};

/// A credential failure as the host classified it (mirrors the WIT `auth-error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthError {
    Unresolved,
    AcquisitionFailed,
    RefreshFailed,
    Unsupported,
    DeadlineExceeded,
    Cancelled,
}

/// What came back from one exchange. `status`/`content_type` are set for HTTP only.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reply {
    pub status: Option<u16>,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// The host's capabilities, as the protocol logic sees them.
pub trait Host {
    /// An opaque credential handle; the secret itself never enters the component.
    type Credential;

    /// The current monotonic time.
    fn now(&self) -> Instant;

    /// Acquires `backend`'s credential by `deadline`; `None` = no authentication configured.
    fn acquire(
        &mut self,
        backend: &str,
        deadline: Instant,
    ) -> Result<Option<Self::Credential>, AuthError>;

    /// The backend rejected `credential` (HTTP 401).
    fn reject(&mut self, credential: &Self::Credential);

    /// One request/response exchange of exactly `message`, returning by `deadline`.
    fn exchange(
        &mut self,
        backend: &str,
        message: &[u8],
        credential: Option<&Self::Credential>,
        deadline: Instant,
    ) -> Result<Reply, DeliveryError>;

    /// True once the embedding harness has interrupted this hook call.
    fn interrupted(&self) -> bool;

    /// Waits the host's backoff before retry number `attempt` (1 = first retry) of an
    /// exchange with `backend`; false when no retry may happen before `deadline`.
    fn retry_after(&mut self, backend: &str, attempt: u32, deadline: Instant) -> bool;

    /// Lowercase hex SHA-256 of `bytes`, for the audit record. The host hashes because
    /// wasm has no SHA instructions: in the component, hashing a request cost as much as
    /// encoding it.
    fn sha256(&self, bytes: &[u8]) -> String;
}
