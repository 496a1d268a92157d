//! The capability handshake's words (capabilities.schema.json): which events a harness
//! can intercept, and per event which effects, with which options, it enforces.
//!
//! The embedding harness declares these once, at load; each request's
//! `params.capabilities` is that declaration for the request's event, narrowed by the
//! call. Which declarations the protocol allows per event is the component's table
//! (`ahp_interceptor::events`), not a property of these types.

use crate::EffectKind;
use serde::ser::{SerializeMap, Serializer};
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

/// One event's capabilities as the wire spells them (capabilities.schema.json), each
/// effect's option block present exactly when the effect is, serialized straight from
/// the declaration: a request's `params.capabilities` (the call's narrowed
/// declaration), and a manifest's `events[].capabilities`.
pub struct Capabilities<'a>(pub &'a EventCapability);

impl Serialize for Capabilities<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let capability = self.0;
        let mut map = serializer.serialize_map(None)?;
        let effects: Vec<&str> = capability.effects.iter().map(|e| e.as_str()).collect();
        map.serialize_entry("effects", &effects)?;
        if let Some(modify) = &capability.modify {
            map.serialize_entry("modify", &Modify(modify))?;
        }
        if let Some(flow) = &capability.flow {
            map.serialize_entry("flow", flow)?;
        }
        if !capability.inject.is_empty() {
            map.serialize_entry("inject", &Inject(&capability.inject))?;
        }
        map.end()
    }
}

/// `{"<target>":{"merge":…,"replace":…}}`.
struct Modify<'a>(&'a ModifyCapability);

impl Serialize for Modify<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(serde::Serialize)]
        struct Operations {
            merge: bool,
            replace: bool,
        }
        let mut map = serializer.serialize_map(Some(1))?;
        let operations = Operations {
            merge: self.0.merge,
            replace: self.0.replace,
        };
        map.serialize_entry(self.0.target.as_str(), &operations)?;
        map.end()
    }
}

/// `{"context":{"append":true,"deliverAt":[…]}}`: context append is the only injection.
struct Inject<'a>(&'a [DeliverAt]);

impl Serialize for Inject<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Context<'a> {
            append: bool,
            deliver_at: &'a [DeliverAt],
        }
        let mut map = serializer.serialize_map(Some(1))?;
        let context = Context {
            append: true,
            deliver_at: self.0,
        };
        map.serialize_entry("context", &context)?;
        map.end()
    }
}
