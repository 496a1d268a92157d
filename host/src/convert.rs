//! Between the WIT's generated types and the shared vocabulary (`ahp-vocab`): one small
//! total function per type, so a new word is a compile error here until it is mapped.

use crate::bindings::host_types;
use crate::bindings::interceptor as wit;
use ahp_vocab as vocab;
use ahp_vocab::{DecidedBy, Decision, EffectKind, Problem};

/// Problems as the component reports them, in the shared type.
pub(crate) fn from_wit(problems: Vec<wit::Problem>) -> Vec<Problem> {
    problems
        .into_iter()
        .map(|p| Problem::new(p.path, p.rule))
        .collect()
}

pub(crate) fn to_wit(kind: EffectKind) -> wit::EffectKind {
    match kind {
        EffectKind::Deny => wit::EffectKind::Deny,
        EffectKind::Allow => wit::EffectKind::Allow,
        EffectKind::Ask => wit::EffectKind::Ask,
        EffectKind::Message => wit::EffectKind::Message,
        EffectKind::Modify => wit::EffectKind::Modify,
        EffectKind::Flow => wit::EffectKind::Flow,
        EffectKind::Return => wit::EffectKind::Return,
        EffectKind::Inject => wit::EffectKind::Inject,
    }
}

pub(crate) fn decision(decision: wit::Decision) -> Decision {
    match decision {
        wit::Decision::Allow => Decision::Allow,
        wit::Decision::Ask => Decision::Ask,
        wit::Decision::Deny => Decision::Deny,
    }
}

pub(crate) fn decided_by(decided_by: wit::DecidedBy) -> DecidedBy {
    match decided_by {
        wit::DecidedBy::NoObjection => DecidedBy::NoObjection,
        wit::DecidedBy::BackendDeny => DecidedBy::BackendDeny,
        wit::DecidedBy::BackendAsk => DecidedBy::BackendAsk,
        wit::DecidedBy::SyntheticDeny => DecidedBy::SyntheticDeny,
        wit::DecidedBy::Interrupted => DecidedBy::Interrupted,
        wit::DecidedBy::BudgetExpired => DecidedBy::BudgetExpired,
        wit::DecidedBy::EngineFailure => DecidedBy::EngineFailure,
        wit::DecidedBy::Shutdown => DecidedBy::Shutdown,
    }
}

/// A delivery failure as the host's transports report it, in the shared type that
/// classifies it (`DeliveryError::failure`).
pub(crate) fn delivery_error(error: host_types::DeliveryError) -> vocab::DeliveryError {
    use host_types::DeliveryError as Wit;
    use vocab::DeliveryError as Vocab;
    match error {
        Wit::DeadlineExceeded(phase) => Vocab::DeadlineExceeded(match phase {
            host_types::IoPhase::Connect => vocab::IoPhase::Connect,
            host_types::IoPhase::Send => vocab::IoPhase::Send,
            host_types::IoPhase::AwaitResponse => vocab::IoPhase::AwaitResponse,
            host_types::IoPhase::ReadResponse => vocab::IoPhase::ReadResponse,
        }),
        Wit::Cancelled => Vocab::Cancelled,
        Wit::ConnectionRefused => Vocab::ConnectionRefused,
        Wit::UnresolvedHost => Vocab::UnresolvedHost,
        Wit::ConnectionReset => Vocab::ConnectionReset,
        Wit::ConnectionLost => Vocab::ConnectionLost,
        Wit::TlsFailed => Vocab::TlsFailed,
        Wit::MalformedHttp => Vocab::MalformedHttp,
        Wit::MalformedFraming => Vocab::MalformedFraming,
        Wit::LaunchFailed => Vocab::LaunchFailed,
        Wit::AbnormalExit(status) => Vocab::AbnormalExit(status),
        Wit::ResponseTooLarge => Vocab::ResponseTooLarge,
        Wit::NotPermitted => Vocab::NotPermitted,
    }
}
