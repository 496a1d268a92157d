//! The effects a backend may return and what the effect schema allows in each
//! (effect.schema.json, deny-effect.schema.json), and how a `modify` changes its target.
//!
//! The word lists are in [`ahp_vocab`]; which effects an event allows is the table in
//! [`crate::events`]; this module says what an accepted effect carries.

use crate::{content, events};
pub use ahp_vocab::EffectKind;
use ahp_vocab::{DeliverAt, FlowOperation, InterceptableEvent, ModifyOperation, ModifyTarget};
use serde_json::Value;

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
    /// Change the event's one modifiable value.
    Modify {
        target: ModifyTarget,
        operation: ModifyOperation,
        value: Value,
    },
    /// `flow`: stop (with a reason) or continue (with an optional instruction).
    Flow {
        operation: FlowOperation,
        text: Option<String>,
    },
    /// A supplied result instead of the original execution.
    Return { value: Value },
    /// Canonical messages appended to the context.
    Inject { deliver_at: DeliverAt, value: Value },
}

impl Effect {
    /// The kind of this effect.
    pub fn kind(&self) -> EffectKind {
        match self {
            Effect::Deny { .. } => EffectKind::Deny,
            Effect::Allow => EffectKind::Allow,
            Effect::Ask { .. } => EffectKind::Ask,
            Effect::Message { .. } => EffectKind::Message,
            Effect::Modify { .. } => EffectKind::Modify,
            Effect::Flow { .. } => EffectKind::Flow,
            Effect::Return { .. } => EffectKind::Return,
            Effect::Inject { .. } => EffectKind::Inject,
        }
    }
}

/// Every member the effect schema allows in an effect of `kind`.
pub fn fields(kind: EffectKind) -> &'static [&'static str] {
    match kind {
        EffectKind::Deny => &["type", "reason", "code", "extensions"],
        EffectKind::Allow | EffectKind::Ask => &["type"],
        EffectKind::Message => &["type", "text"],
        EffectKind::Modify => &["type", "target", "operation", "value"],
        EffectKind::Flow => &["type", "operation", "reason", "instruction"],
        EffectKind::Return => &["type", "value"],
        EffectKind::Inject => &["type", "target", "operation", "deliverAt", "value"],
    }
}

/// Deny, allow and ask decide the operation; one response holds one of them (repeated,
/// it is still one), never two that disagree.
pub fn is_decision(kind: EffectKind) -> bool {
    matches!(kind, EffectKind::Deny | EffectKind::Allow | EffectKind::Ask)
}

/// Whether `value` has the shape `target` takes at `event` (effect.schema.json), for
/// `operation`: an object for input, a workspace change for workspace, or members of one
/// to merge ([`events::workspace_flaws`]),
/// text parts for instructions and summary, canonical messages otherwise. At a user
/// message's boundary the messages are of its one role, and `content` is the target
/// whose shape is the boundary's: the MCP answer at `user.elicitation.result`
/// ([`elicitation::is_answer`](crate::elicitation::is_answer)), the assistant's
/// messages at `user.message.outbound` ("the host MUST validate the boundary-specific
/// target contract").
pub fn fits(
    target: ModifyTarget,
    operation: ModifyOperation,
    event: InterceptableEvent,
    value: &Value,
) -> bool {
    use InterceptableEvent::{UserElicitationResult, UserMessageInbound};
    match target {
        ModifyTarget::Input => value.is_object(),
        ModifyTarget::Workspace => {
            let whole = operation == ModifyOperation::Replace;
            events::workspace_flaws(value, whole).is_empty()
        }
        ModifyTarget::Content if event == UserElicitationResult => {
            crate::elicitation::is_answer(value)
        }
        ModifyTarget::Content => events::OUTBOUND.flaws(value).is_empty(),
        ModifyTarget::Prompt if event == UserMessageInbound => {
            events::INBOUND.flaws(value).is_empty()
        }
        ModifyTarget::Instructions | ModifyTarget::Summary => content::is_text_parts(value),
        ModifyTarget::Output
        | ModifyTarget::Prompt
        | ModifyTarget::Request
        | ModifyTarget::Response => content::is_messages(value),
    }
}

/// Whether `value` can be a `return`'s supplied result at `event` (composition.md@8f91ac4,
/// "Validate supplied values against the active boundary, not merely the generic effect
/// envelope"): a model result is canonical messages, a compaction summary text parts,
/// an elicitation's the MCP result the user would have given
/// ([`elicitation::is_result`](crate::elicitation::is_result)), and a tool's result any
/// JSON ("retains the actual JSON tool-result value").
pub fn supplies(event: InterceptableEvent, value: &Value) -> bool {
    match event {
        InterceptableEvent::ModelRequestBefore => content::is_messages(value),
        InterceptableEvent::ContextCompactBefore => content::is_text_parts(value),
        InterceptableEvent::UserElicitationRequest => crate::elicitation::is_result(value),
        _ => true,
    }
}

/// The canonical content `effect` hands on at `event` (message lists, text parts), whose
/// attachments are checked against the event's: a modify of a message or text-part
/// target, an injection, a supplied model result or summary. Not a tool's input, a
/// workspace, an elicitation answer or a tool's result: JSON of their own, no content.
pub fn content_of(effect: &Effect, event: InterceptableEvent) -> Option<&Value> {
    use InterceptableEvent::{ContextCompactBefore, ModelRequestBefore, UserElicitationResult};
    match effect {
        Effect::Modify { target, value, .. } => match target {
            ModifyTarget::Input | ModifyTarget::Workspace => None,
            ModifyTarget::Content if event == UserElicitationResult => None,
            _ => Some(value),
        },
        Effect::Inject { value, .. } => Some(value),
        Effect::Return { value } => {
            matches!(event, ModelRequestBefore | ContextCompactBefore).then_some(value)
        }
        _ => None,
    }
}

/// The target's value after one modification: replace substitutes; merge merges objects
/// shallowly (a `null` member is a literal value, nested values are replaced whole) and
/// appends lists in order. `None` when a merge meets a value of another shape.
///
/// It takes the current value and the modification's and changes the first in place: a
/// reply's modifications are applied one after another to one copy of the target, so
/// each costs what its own value weighs, never a copy of the whole target or of itself.
pub fn apply(current: Option<Value>, operation: ModifyOperation, value: Value) -> Option<Value> {
    match (operation, current) {
        (ModifyOperation::Replace, _) | (ModifyOperation::Merge, None) => Some(value),
        (ModifyOperation::Merge, Some(mut base)) => merge_in_place(&mut base, value).map(|_| base),
    }
}

/// How to take a merge made in place back out ([`merge_in_place`]).
pub enum Undo {
    /// Each member the merge set, with the value it had, if any.
    Members(Vec<(String, Option<Value>)>),
    /// The length of the list the merge appended to.
    Items(usize),
}

/// A merge of `value` into `target` itself (what [`apply`] makes of a copy): `None`
/// where it does not fit (nothing is changed then), else how to take it back and whether
/// it changed anything.
pub fn merge_in_place(target: &mut Value, value: Value) -> Option<(Undo, bool)> {
    match (target, value) {
        (Value::Object(base), Value::Object(members)) => {
            let mut changed = false;
            let set = members
                .into_iter()
                .map(|(name, member)| {
                    changed |= base.get(&name) != Some(&member);
                    let had = base.insert(name.clone(), member);
                    (name, had)
                })
                .collect();
            Some((Undo::Members(set), changed))
        }
        (Value::Array(base), Value::Array(items)) => {
            let (length, changed) = (base.len(), !items.is_empty());
            base.extend(items);
            Some((Undo::Items(length), changed))
        }
        _ => None,
    }
}

impl Undo {
    /// Takes the merge back out of `target`, which it was made in.
    pub fn undo(self, target: &mut Value) {
        match (self, target) {
            (Undo::Members(set), Value::Object(base)) => {
                for (name, had) in set.into_iter().rev() {
                    match had {
                        Some(had) => base.insert(name, had),
                        None => base.remove(&name),
                    };
                }
            }
            (Undo::Items(length), Value::Array(base)) => base.truncate(length),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_is_shallow_with_null_as_a_literal() {
        let base = json!({"command": "rm -rf /", "cwd": "/", "env": {"A": "1"}});
        let merged = apply(
            Some(base.clone()),
            ModifyOperation::Merge,
            json!({"command": "ls", "cwd": null, "env": {"B": "2"}}),
        );
        assert_eq!(
            merged,
            Some(json!({"command": "ls", "cwd": null, "env": {"B": "2"}}))
        );
        let replaced = apply(Some(base), ModifyOperation::Replace, json!({"x": 1}));
        assert_eq!(replaced, Some(json!({"x": 1})));
    }

    /// A merge made in place is the one `apply` makes, says whether it changed anything,
    /// and is taken back exactly; one of another shape changes nothing.
    #[test]
    fn a_merge_in_place_is_apply_s_and_is_taken_back_exactly() {
        for (base, value, changed) in [
            (json!({"a": 1, "b": 2}), json!({"a": 3, "c": null}), true),
            (json!({"a": 1}), json!({"a": 1}), false),
            (json!({"a": 1}), json!({}), false),
            (json!([1]), json!([2, 3]), true),
            (json!([1]), json!([]), false),
        ] {
            let mut target = base.clone();
            let (undo, said) = merge_in_place(&mut target, value.clone()).expect("fits");
            let applied = apply(Some(base.clone()), ModifyOperation::Merge, value);
            assert_eq!(Some(&target), applied.as_ref());
            assert_eq!(said, changed, "{base}");
            undo.undo(&mut target);
            assert_eq!(target, base);
        }
        for (base, value) in [(json!({"a": 1}), json!([1])), (json!([1]), json!({"a": 1}))] {
            let mut target = base.clone();
            assert!(merge_in_place(&mut target, value).is_none());
            assert_eq!(target, base);
        }
    }

    #[test]
    fn merge_appends_lists_and_refuses_mixed_shapes() {
        let merged = apply(
            Some(json!([{"a": 1}])),
            ModifyOperation::Merge,
            json!([{"b": 2}]),
        );
        assert_eq!(merged, Some(json!([{"a": 1}, {"b": 2}])));
        assert_eq!(
            apply(Some(json!([])), ModifyOperation::Merge, json!({})),
            None
        );
        assert_eq!(
            apply(Some(json!("x")), ModifyOperation::Merge, json!({})),
            None
        );
    }

    /// A backend's value is checked as the event's own would be at that target: a
    /// workspace change by its closed shape, a user message's list by its boundary's one
    /// role (any role's at a model request).
    #[test]
    fn each_target_takes_its_shape() {
        use InterceptableEvent::{
            ModelRequestBefore, ToolBefore, UserElicitationResult, UserMessageInbound,
            UserMessageOutbound, WorkspaceChangeBefore,
        };
        use ModifyOperation::{Merge, Replace};
        use ModifyTarget::{Content, Input, Instructions, Output, Prompt, Request, Summary};
        let part = json!({"id": "p", "kind": "text", "mediaType": "text/plain",
                          "selection": "body", "text": "x"});
        let said_by = |role: &str| json!([{"id": "m", "role": role, "parts": [part]}]);
        let message = json!({"id": "m", "role": "tool", "parts": [part]});
        assert!(fits(Input, Replace, ToolBefore, &json!({})));
        assert!(!fits(Input, Replace, ToolBefore, &json!([])));
        assert!(fits(Output, Replace, ToolBefore, &json!([message])));
        assert!(!fits(Output, Replace, ToolBefore, &json!([{"id": "m"}])));
        assert!(
            !fits(Output, Replace, ToolBefore, &json!([part])),
            "bare parts are no messages"
        );
        assert!(!fits(Output, Replace, ToolBefore, &json!({"text": "x"})));
        // content is the boundary's own: an answer object, or the outbound messages.
        assert!(fits(
            Content,
            Replace,
            UserElicitationResult,
            &json!({"answer": 1})
        ));
        assert!(!fits(
            Content,
            Replace,
            UserElicitationResult,
            &json!([message])
        ));
        assert!(fits(
            Content,
            Replace,
            UserMessageOutbound,
            &said_by("assistant")
        ));
        assert!(!fits(
            Content,
            Replace,
            UserMessageOutbound,
            &said_by("user")
        ));
        assert!(!fits(
            Content,
            Replace,
            UserMessageOutbound,
            &json!({"answer": 1})
        ));
        assert!(fits(Prompt, Replace, UserMessageInbound, &said_by("user")));
        assert!(!fits(
            Prompt,
            Replace,
            UserMessageInbound,
            &said_by("system")
        ));
        assert!(fits(
            Request,
            Replace,
            ModelRequestBefore,
            &said_by("system")
        ));
        assert!(fits(Instructions, Replace, ToolBefore, &json!([part])));
        assert!(!fits(Summary, Replace, ToolBefore, &json!([message])));
        assert!(!fits(Prompt, Replace, ToolBefore, &json!(["text"])));
        let workspace = |operation, value: Value| {
            fits(
                ModifyTarget::Workspace,
                operation,
                WorkspaceChangeBefore,
                &value,
            )
        };
        for operation in [Replace, Merge] {
            assert!(workspace(operation, json!({"cwd": "/repo"})));
            assert!(workspace(
                operation,
                json!({"workspaceRoots": ["/a", "/b"]})
            ));
            for misfit in [json!({"cwd": 7}), json!({"dir": "/"}), json!("/")] {
                assert!(!workspace(operation, misfit.clone()), "{misfit}");
            }
        }
        // Replaced by nothing, the change would name nothing; merged, nothing changes.
        assert!(!workspace(Replace, json!({})));
        assert!(workspace(Merge, json!({})));
        // Many roots are checked by set, not each against all before it.
        let mut roots: Vec<Value> = (0..100_000).map(|i| json!(format!("/r{i}"))).collect();
        assert!(workspace(Replace, json!({"workspaceRoots": roots.clone()})));
        roots.push(json!("/r99999"));
        assert!(!workspace(Replace, json!({"workspaceRoots": roots})));
    }
}
