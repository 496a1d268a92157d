//! One vocabulary for the component and its host.
//!
//! Every word of the protocol that crosses the boundary or lands in the audit record is
//! defined here once: the decision, who decided it, what each interceptor contributed,
//! the failure taxonomy, and the record itself (DESIGN.md §4). The component writes the
//! record with these types; the host reads it back into the same types and builds its
//! own records (engine failure, shutdown, observer results) with them. A new word is one
//! new variant, and the compiler finds every place that must handle it.

#[macro_use]
mod words;
mod capability;
mod decision;
mod delivery;
mod effect;
mod failure;
pub mod number_literal;
mod pattern;
mod problem;
mod program;
mod record;
mod secret;
mod uri;

pub use capability::{
    Capabilities, DeliverAt, EventCapability, FlowCapability, FlowOperation, InterceptableEvent,
    ModifyCapability, ModifyOperation, ModifyTarget,
};
pub use decision::{DecidedBy, Decision, FailurePolicy, OAuthFlow, Outcome};
pub use delivery::{DeliveryError, IoPhase};
pub use effect::EffectKind;
pub use failure::{Detail, Failure, FailureClass, Phase};
pub use pattern::EventPattern;
pub use problem::{not_listed, type_name, Problem, MAX_LISTED};
pub use program::stdio_program;
pub use record::{
    AttemptEntry, AttemptResult, Enforce, EventRef, Flow, Injection, InterceptorEntry,
    ObserverEntry, ObserverKind, ObserverResult, Record,
};
pub use secret::{
    argument_carries_a_credential, argument_gives_a_credential, ends_in_a_credential_word,
    follows_a_credential_option, has_a_secret_parameter, holds_a_credential_word, is_env_name,
    is_secret_name, looks_secret, mentions_a_credential, names_a_count_or_data_key,
    names_a_credential, normalized, secret_after_option, SECRET_NAMES,
};
pub use uri::{has_userinfo, is_absolute_uri};

/// The wire `protocolVersion` both official SDKs speak, and the only registration
/// `protocolVersion` accepted (DESIGN.md §5).
pub const PROTOCOL_VERSION: &str = "draft";

/// How long one best-effort observe notification may take, at most, in milliseconds.
/// The component stamps it into each prepared delivery's deadline; the host bounds its
/// own observer deliveries by it unless configured shorter.
pub const OBSERVER_TIMEOUT_MS: u64 = 2_000;

/// How long after a call settles its decision the component may still start preparing
/// observe notifications, in milliseconds: each holds the event, one encoding per
/// distinct view, and the decision waits for them (they go out with it). One not begun
/// by then is withheld. The host lets a call run this much longer than its chain's
/// bound, and more, for a notification begun just before.
pub const OBSERVER_PREPARE_MS: u64 = 250;

/// The `timeoutMs` range this interceptor supports: a registration outside it is accepted
/// with a warning (likely a mistake), and a harness's manifest says it (`limits`).
pub const SUPPORTED_TIMEOUT_MS: std::ops::RangeInclusive<u64> = 100..=30_000;
