//! The capability handshake's words (capabilities.schema.json): which events a harness
//! can intercept, and per event which effects, with which options, it enforces.
//!
//! The embedding harness declares these once, at load; each request's
//! `params.capabilities` is that declaration for the request's event, narrowed by the
//! call. Which declarations the protocol allows per event is the component's table
//! (`ahp_interceptor::events`), not a property of these types.

use crate::EffectKind;
use serde::{Deserialize, Serialize};

words! {
    /// An event an intercept subscription may select (digest §6 rule 6), in the order of
    /// capabilities.schema.json `$defs`.
    pub enum InterceptableEvent {
        SessionStart = "session.start",
        ConfigChangeBefore = "config.change.before",
        TurnStart = "turn.start",
        TurnFinishBefore = "turn.finish.before",
        ModelRequestBefore = "model.request.before",
        ModelResponseAfter = "model.response.after",
        ModelSwitchBefore = "model.switch.before",
        ToolBefore = "tool.before",
        ToolAfter = "tool.after",
        ToolPermissionRequest = "tool.permission.request",
        ToolBatchAfter = "tool.batch.after",
        ContextCompactBefore = "context.compact.before",
        ContextCompactAfter = "context.compact.after",
        TaskChangeBefore = "task.change.before",
        UserElicitationRequest = "user.elicitation.request",
        UserElicitationResult = "user.elicitation.result",
        UserMessageInbound = "user.message.inbound",
        UserMessageOutbound = "user.message.outbound",
        WorkspaceChangeBefore = "workspace.change.before",
    }
}

words! {
    /// What a `modify` effect changes (effect.schema.json `target`); each event allows
    /// at most one.
    pub enum ModifyTarget {
        Input = "input",
        Output = "output",
        Prompt = "prompt",
        Request = "request",
        Response = "response",
        Content = "content",
        Instructions = "instructions",
        Summary = "summary",
        Workspace = "workspace",
    }
}

words! {
    /// How a `modify` effect changes its target.
    pub enum ModifyOperation {
        /// The value replaces the target.
        Replace = "replace",
        /// Objects merge shallowly (`null` is a literal value); lists append.
        Merge = "merge",
    }
}

words! {
    /// A `flow` effect's operation.
    pub enum FlowOperation {
        /// Ends decision-making; beats continue.
        Stop = "stop",
        /// Asks the harness to go on (only `turn.finish.before` and `tool.after`).
        Continue = "continue",
    }
}

words! {
    /// When an `inject` effect's context is delivered.
    pub enum DeliverAt {
        Now = "now",
        NextTurn = "next_turn",
    }
}

/// `capabilities.modify.<target>`: the target and the operations enforced on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModifyCapability {
    pub target: ModifyTarget,
    pub replace: bool,
    pub merge: bool,
}

impl ModifyCapability {
    /// Whether `operation` is enforced.
    pub fn allows(&self, operation: ModifyOperation) -> bool {
        match operation {
            ModifyOperation::Replace => self.replace,
            ModifyOperation::Merge => self.merge,
        }
    }
}

/// `capabilities.flow`: the operations enforced; continuing needs the harness's own
/// continuation counts, which only it knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlowCapability {
    pub operations: Vec<FlowOperation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_continuations: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_count: Option<u32>,
}

/// What the harness declares for one interceptable event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventCapability {
    pub event: InterceptableEvent,
    /// The effect types enforced; their option blocks follow.
    pub effects: Vec<EffectKind>,
    /// Present exactly when `effects` has `modify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modify: Option<ModifyCapability>,
    /// Present exactly when `effects` has `flow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<FlowCapability>,
    /// `capabilities.inject.context.deliverAt`: non-empty exactly when `effects` has
    /// `inject` (context append is the only injection).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inject: Vec<DeliverAt>,
}

impl EventCapability {
    /// Whether effects of `kind` are enforced.
    pub fn has(&self, kind: EffectKind) -> bool {
        self.effects.contains(&kind)
    }
}
