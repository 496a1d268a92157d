//! The capability handshake on the host side: what the embedding harness declares it can
//! intercept and enforce, turned into the component's `event-capability` list at load.
//!
//! Which declarations each event allows is the component's table; the host only picks
//! (everything, some events with everything they allow, or an exact declaration) and
//! converts. The component checks the result and refuses anything outside the protocol.

use crate::bindings::interceptor as wit;
use crate::convert::to_wit as to_wit_effect;
use ahp_vocab::{
    DeliverAt, EventCapability, FlowCapability, FlowOperation, InterceptableEvent,
    ModifyCapability, ModifyTarget,
};

/// What the embedding harness intercepts, per event, and enforces there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Declaration {
    /// Every interceptable event with every effect each allows (flow: stop only).
    #[default]
    Everything,
    /// These events only, each with every effect it allows.
    Events(Vec<InterceptableEvent>),
    /// Exactly this, event by event.
    Exactly(Vec<EventCapability>),
}

impl Declaration {
    /// The declaration to load, given the component's whole interceptable set.
    pub(crate) fn resolve(
        &self,
        everything: Vec<wit::EventCapability>,
    ) -> Vec<wit::EventCapability> {
        match self {
            Declaration::Everything => everything,
            Declaration::Events(events) => events
                .iter()
                .filter_map(|e| everything.iter().find(|c| c.event == e.as_str()).cloned())
                .collect(),
            Declaration::Exactly(capabilities) => capabilities.iter().map(to_wit).collect(),
        }
    }
}

fn to_wit(c: &EventCapability) -> wit::EventCapability {
    wit::EventCapability {
        event: c.event.as_str().to_owned(),
        effects: c.effects.iter().copied().map(to_wit_effect).collect(),
        modify: c.modify.map(modify),
        flow: c.flow.as_ref().map(flow),
        inject: c
            .inject
            .iter()
            .map(|at| match at {
                DeliverAt::Now => wit::DeliverAt::Now,
                DeliverAt::NextTurn => wit::DeliverAt::NextTurn,
            })
            .collect(),
    }
}

fn modify(m: ModifyCapability) -> wit::ModifyCapability {
    use wit::ModifyTarget as W;
    wit::ModifyCapability {
        target: match m.target {
            ModifyTarget::Input => W::Input,
            ModifyTarget::Output => W::Output,
            ModifyTarget::Prompt => W::Prompt,
            ModifyTarget::Request => W::Request,
            ModifyTarget::Response => W::Response,
            ModifyTarget::Content => W::Content,
            ModifyTarget::Instructions => W::Instructions,
            ModifyTarget::Summary => W::Summary,
            ModifyTarget::Workspace => W::Workspace,
        },
        replace: m.replace,
        merge: m.merge,
    }
}

fn flow(f: &FlowCapability) -> wit::FlowCapability {
    wit::FlowCapability {
        operations: f
            .operations
            .iter()
            .map(|op| match op {
                FlowOperation::Stop => wit::FlowOperation::Stop,
                FlowOperation::Continue => wit::FlowOperation::Continue,
            })
            .collect(),
        remaining_continuations: f.remaining_continuations,
        continuation_count: f.continuation_count,
    }
}
