//! The effects this crate can decode and enforce, and what the effect schema allows in
//! each (effect.schema.json, deny-effect.schema.json).
//!
//! The word list itself is [`ahp_vocab::EffectKind`]; this module says which of those
//! words the component understands today and what an accepted one carries.

pub use ahp_vocab::EffectKind;

/// One accepted effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Do not execute. `code` is a reverse-DNS policy code.
    Deny {
        reason: String,
        code: Option<String>,
    },
    /// No objection that may suppress an ordinary host prompt; never overrides policy.
    Allow,
    /// Require approval. The current effect schema gives `ask` no members besides
    /// `type`, so `reason` is always `None` when decoded.
    Ask { reason: Option<String> },
    /// A user-facing message.
    Message { text: String },
}

impl Effect {
    /// The kind of this effect.
    pub fn kind(&self) -> EffectKind {
        match self {
            Effect::Deny { .. } => EffectKind::Deny,
            Effect::Allow => EffectKind::Allow,
            Effect::Ask { .. } => EffectKind::Ask,
            Effect::Message { .. } => EffectKind::Message,
        }
    }
}

/// Whether this crate can decode and enforce effects of `kind`. A harness may only
/// advertise these; a backend sending another was never offered it.
pub fn is_decodable(kind: EffectKind) -> bool {
    matches!(
        kind,
        EffectKind::Deny | EffectKind::Allow | EffectKind::Ask | EffectKind::Message
    )
}

/// Every member the effect schema allows in an effect of `kind`.
pub fn fields(kind: EffectKind) -> &'static [&'static str] {
    match kind {
        EffectKind::Deny => &["type", "reason", "code", "extensions"],
        EffectKind::Allow | EffectKind::Ask => &["type"],
        EffectKind::Message => &["type", "text"],
        EffectKind::Modify | EffectKind::Flow | EffectKind::Return | EffectKind::Inject => &[],
    }
}

/// Deny, allow and ask decide the operation; at most one may appear per response.
pub fn is_decision(kind: EffectKind) -> bool {
    matches!(kind, EffectKind::Deny | EffectKind::Allow | EffectKind::Ask)
}
