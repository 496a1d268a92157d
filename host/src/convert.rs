//! Between the WIT's generated types and the shared vocabulary (`ahp-vocab`): one small
//! total function per type, so a new word is a compile error here until it is mapped.

use crate::bindings::interceptor as wit;
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
