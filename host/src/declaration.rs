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
    /// The declaration to load, given the component's whole interceptable set. An event
    /// of [`Declaration::Events`] outside that set (a component older than this host) is
    /// an error naming it: dropped, it would surface at load as a subscription "not
    /// declared interceptable by this harness", blaming the harness.
    pub(crate) fn resolve(
        &self,
        everything: Vec<wit::EventCapability>,
    ) -> Result<Vec<wit::EventCapability>, String> {
        match self {
            Declaration::Everything => Ok(everything),
            Declaration::Events(events) => {
                let find =
                    |e: &InterceptableEvent| everything.iter().find(|c| c.event == e.as_str());
                let unknown: Vec<String> = events
                    .iter()
                    .filter(|e| find(e).is_none())
                    .map(|e| format!("{:?}", e.as_str()))
                    .collect();
                if !unknown.is_empty() {
                    return Err(format!(
                        "declared interceptable, but the loaded component does not support: {}",
                        unknown.join(", ")
                    ));
                }
                Ok(events.iter().filter_map(find).cloned().collect())
            }
            Declaration::Exactly(capabilities) => Ok(capabilities.iter().map(to_wit).collect()),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn capability(event: &str) -> wit::EventCapability {
        wit::EventCapability {
            event: event.to_owned(),
            effects: Vec::new(),
            modify: None,
            flow: None,
            inject: Vec::new(),
        }
    }

    /// An event the loaded component does not know (an older one, say) is an error naming
    /// it, not dropped: loading would then blame the harness for not declaring it.
    #[test]
    fn events_the_component_does_not_know_are_an_error_naming_them() {
        use InterceptableEvent::{ModelRequestBefore, ToolBefore};
        let older = || vec![capability("tool.before")];
        let declared = Declaration::Events(vec![ToolBefore, ModelRequestBefore]);
        let error = declared.resolve(older()).unwrap_err();
        assert!(error.contains("\"model.request.before\""), "{error}");
        assert!(!error.contains("tool.before"), "{error}");
        let error = Declaration::Events(vec![ToolBefore])
            .resolve(Vec::new())
            .unwrap_err();
        assert!(error.contains("\"tool.before\""), "{error}");
        let known = Declaration::Events(vec![ToolBefore]).resolve(older());
        let events: Vec<_> = known.unwrap().into_iter().map(|c| c.event).collect();
        assert_eq!(events, ["tool.before"]);
    }
}
