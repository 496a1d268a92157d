//! The interceptable events and what each allows, in one table (capabilities.schema.json
//! `$defs/<event>`, effect.schema.json, digest §3–4, §6 rule 6).
//!
//! Everything that differs per event is read from here: which effects a harness may
//! declare and a backend may return, which `modify` target the event has and where that
//! value lives in the event, which `flow` operations exist, and which payload checks the
//! event gets. `tests::the_table_is_the_upstream_schema` reads the schema itself, so the
//! table cannot drift from it.

use crate::content::{Content, Holds};
use crate::effect::EffectKind::{self, *};
use ahp_vocab::{
    DeliverAt, EventCapability, FlowCapability, FlowOperation, InterceptableEvent as E,
    ModifyCapability, ModifyTarget as T, Problem,
};
use serde_json::Value;
use std::borrow::Cow;

/// The payload checks an event gets beyond the envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// tool-before.schema.json, in full.
    ToolBefore,
    /// tool-after.schema.json, in full.
    ToolAfter,
    /// Each member with its shape, parents before children: required with its JSON type
    /// (the event's `required` lists in the upstream catalogue schemas, see [`TABLE`]),
    /// or one of a list of words, or absent (always, or when another member says so).
    Members(&'static [(&'static str, Shape)]),
}

/// What a member of an event must be: present with a JSON type or one of some words, or
/// absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Object,
    Array,
    /// A non-empty string.
    Text,
    /// A string, possibly empty.
    String,
    /// A list of non-empty strings (a configuration change's `settings`).
    Texts,
    /// A list of objects, each open: config.change.after's `mcpServers`, native
    /// discovery descriptors open by design (interaction-event.schema.json@2b5da58).
    Objects,
    /// A workspace's change or prior state ([`workspace_flaws`]).
    Workspace,
    Bool,
    /// A non-negative integer.
    Count,
    /// A positive integer: a count from one (an attempt's number).
    Ordinal,
    /// A `tool` descriptor, checked as on tool.before (name, parsed input, origin).
    Tool,
    /// The event's own `call` (at `/call`), checked as on tool.before: `{id,
    /// synthesized?}` and nothing else, and the `batch` the call belongs to where there
    /// is one (execution-event.schema.json@62fc780 `$defs/batch`).
    Call,
    /// An identity object, `{id, synthesized?}` and nothing else (tool.batch.after's
    /// `batch`, execution-event.schema.json@62fc780).
    Identity,
    /// An object of these members and no other (`additionalProperties: false`), named
    /// by the first word in the rule: each member's own row checks it.
    Closed(&'static str, &'static [&'static str]),
    /// One canonical message (content-item.schema.json `$defs/modelVisibleItem`):
    /// required here, and checked as a message by its content slot ([`content`]).
    Message,
    /// tool.batch.after's `calls`: a non-empty list of resolved calls, each `{call, tool,
    /// path, batch?, outcome, execution}` and nothing else, checked as tool.after checks
    /// its own (execution-event.schema.json@62fc780).
    ResolvedCalls,
    /// A model call's or a compaction's `execution` (at `/execution`,
    /// execution-event.schema.json@62fc780 `$defs/execution`): one of its branches, each
    /// closed, as tool.after's own is checked; skipped only for one of these reasons (the
    /// event's `allOf`), never when there are none.
    Execution(&'static [&'static str]),
    /// The event's own `error` (at `/error`, execution-event.schema.json@62fc780
    /// `$defs/error`): `{message, class, code?, status?, native?}` and nothing else,
    /// checked as tool.after's own.
    Error,
    /// context.compact.after's `removed`: a list, possibly empty, of `{id}` and nothing
    /// else (execution-event.schema.json@62fc780).
    Removed,
    /// file.changed's `changes`: a non-empty list of `{path, operation, agentCaused,
    /// before?, after?}` and nothing else (task-workspace-event.schema.json@8f91ac4).
    ChangedFiles,
    /// A string, one of these words.
    Word(&'static [&'static str]),
    /// Not present: the member belongs to other events.
    Absent,
    /// Not present when the member at the first pointer is the second word, optional
    /// otherwise (an `if`/`then` `not` of the event's `allOf`).
    AbsentWhen(&'static str, &'static str),
    /// Optional: a usage report of this form (execution-event.schema.json@62fc780
    /// `$defs/usage`, closed), checked where present.
    Usage(Usage),
    /// Optional: a number no less than zero (a model call's `latencyMs`, a proposed
    /// model's prices), checked where present.
    NonNegative,
    /// A currency: three capital letters (`^[A-Z]{3}$`, execution-event.schema.json@62fc780).
    Currency,
    /// Optional: a compaction's token counts (execution-event.schema.json@62fc780
    /// `$defs/tokenCounts`), `{before?, after?}`, each a non-negative integer, and
    /// nothing else; checked where present.
    TokenCounts,
    /// Optional: an object of counts under any names, each a non-negative integer
    /// (session.end's `counters`, session-end.schema.json); checked where present.
    Counters,
    /// Optional: this shape, checked where present (an attempt's `synthesized`).
    Optional(&'static Shape),
    /// This shape, required when the member at the pointer is one of the words,
    /// optional otherwise (an `if`/`then` `required` of the event's `allOf`).
    RequiredWhen(&'static str, &'static [&'static str], &'static Shape),
}

impl Shape {
    /// Whether the member may be left out: its shape is checked only where present.
    pub fn is_optional(self) -> bool {
        matches!(
            self,
            Shape::AbsentWhen(..)
                | Shape::Usage(_)
                | Shape::NonNegative
                | Shape::TokenCounts
                | Shape::Counters
                | Shape::Optional(_)
                | Shape::RequiredWhen(..)
        )
    }
}

/// The form of a usage report (execution-event.schema.json@62fc780 `$defs/attemptUsage`
/// and `$defs/turnUsage`, each `$defs/usage` narrowed): its one kind and scope, and the
/// provenances it may claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub kind: &'static str,
    pub scope: &'static str,
    pub provenance: &'static [&'static str],
}

/// A model call's usage: an amount for the attempt, from the provider or an estimate
/// (`$defs/attemptUsage`; no `mixed`: one call has one source).
pub const ATTEMPT_USAGE: Usage = Usage {
    kind: "amount",
    scope: "attempt",
    provenance: &["provider", "estimate"],
};
/// A turn's usage: a total for the turn, from any source (`$defs/turnUsage`).
pub const TURN_USAGE: Usage = Usage {
    kind: "total",
    scope: "turn",
    provenance: &["provider", "estimate", "mixed"],
};

/// What one interceptable event allows.
#[derive(Debug)]
pub struct Rules {
    pub event: E,
    /// Every effect the event allows, in the schema's order.
    pub effects: &'static [EffectKind],
    /// The event's one `modify` target, and the JSON Pointer of its value in the event.
    pub modify: Option<(T, &'static str)>,
    /// The `flow` operations the event allows (empty without `flow`).
    pub flow: &'static [FlowOperation],
    pub payload: Payload,
}

impl Rules {
    pub fn allows(&self, kind: EffectKind) -> bool {
        self.effects.contains(&kind)
    }

    /// Whether the event carries its turn's [`CONTINUATION_COUNT`], by which each call
    /// offers what is left of the continuations declared ([`at_count`]). Without it,
    /// `continue` could be offered only with the declared counts, the same on every call
    /// however many continuations the turn made: an allowance advertised but never
    /// enforced (AHP-CAP-001).
    pub fn counts_continuations(&self) -> bool {
        match self.payload {
            Payload::Members(members) => members.iter().any(|(at, _)| *at == CONTINUATION_COUNT),
            Payload::ToolBefore | Payload::ToolAfter => false,
        }
    }
}

/// Where an event that counts its turn's continuations carries the count.
pub const CONTINUATION_COUNT: &str = "/continuationCount";

const STOP: &[FlowOperation] = &[FlowOperation::Stop];
const STOP_CONTINUE: &[FlowOperation] = &[FlowOperation::Stop, FlowOperation::Continue];

// `Shape::Message` is written out: `Message` is the effect.
use Shape::{
    Absent, AbsentWhen, Array, Bool, Call, ChangedFiles, Count, Counters, Error, Execution,
    Identity, Object, Ordinal, ResolvedCalls, Text, Tool, Word,
};

/// What set a session start off (the SDKs' session-start.schema.json, draft).
const START_TRIGGERS: &[&str] = &["startup", "resume", "clear", "compact", "fork"];

/// A model (execution-event.schema.json@62fc780 `$defs/model`, closed): `{id, provider}`.
const MODEL: Shape = Shape::Closed("model", &["id", "provider"]);
/// A model call's attempt (execution-event.schema.json@62fc780 `$defs/attempt`,
/// closed): `{id, number, synthesized?}`, `synthesized` a boolean where present.
const ATTEMPT: Shape = Shape::Closed("attempt", &["id", "number", "synthesized"]);

/// The rows of a configuration change, proposed or made (interaction-event.schema.json
/// @2b5da58 `change`): the members config.change.before and .after share, then each
/// `"member" => shape` given (config.change.after's `mcpServers`), the change closed
/// (`additionalProperties: false`) to exactly these. A macro: a constant cannot join two
/// lists of rows.
macro_rules! config_change {
    ($($member:literal => $shape:expr),*) => {
        &[
            (
                "/change",
                Shape::Closed(
                    "change",
                    &["source", "scope", "settings", "summary", "path" $(, $member)*],
                ),
            ),
            ("/change/source", Text),
            ("/change/scope", Text),
            ("/change/settings", Shape::Texts),
            ("/change/summary", Text),
            ("/change/path", Shape::Optional(&Text)),
            $((concat!("/change/", $member), $shape),)*
        ]
    };
}

/// One row per interceptable event, in capabilities.schema.json order.
///
/// **Required members.** tool.before and tool.after follow their carried schemas.
/// session.start follows the digest (§14). The other sixteen follow the `required`
/// lists of the upstream catalogue schemas, which this project does not carry
/// (`tests/upstream/MANIFEST.tsv` lists what it does):
/// `execution-event.schema.json@62fc780` (turn.*, model.*, tool.permission.request,
/// tool.batch.after, context.compact.*),
/// `interaction-event.schema.json@2b5da58` (config.change.before, user.*) and
/// `task-workspace-event.schema.json@8f91ac4` (task.change.before,
/// workspace.change.before). The carried fixtures agree where they show one
/// (`model-response-input-target.invalid.json` is a complete model.response.after but
/// for its item, which predates canonical messages; `task-return-capability.invalid.json`
/// a complete task.change.before). Presence and JSON type are checked here, and the
/// closed words and ranges the rows name (`Word`: a task change's operation, a turn's
/// or a compaction's trigger, a turn's outcome, an elicitation's mode and action, a
/// workspace change's kind; `Ordinal`:
/// a model attempt's number; `Execution`: a model call's or a compaction's execution;
/// `Closed`: a model, an attempt, and the task, workspace, configuration change,
/// elicitation and user message objects, each naming nothing else; `Workspace`: a
/// workspace's change and prior state); a user message's messages are of its
/// boundary's one role ([`INBOUND`], [`OUTBOUND`]);
/// other enumerated words are not, and content slots are
/// checked by their shapes ([`content`]). tool.batch.after's `calls` are checked each
/// in full, as tool.after's own call ([`Shape::ResolvedCalls`]).
///
/// **Modify targets.** Input is the tool's (`/tool/input`); output, at tool.after, is
/// the event's `items` (execution-payloads.md@8f91ac4). The others are located from the
/// same upstream files, none of which the project carries either:
/// - prompt (turn.start), request (model.request.before) and response
///   (turn.finish.before, model.response.after) are canonical message lists
///   (effect.schema.json), and those events carry their messages in `items` alone: the
///   carried `model-response-input-target.invalid.json` has the response only there,
///   and upstream `model-response-intercept-modify.valid.json` modifies `response` on
///   exactly that event. So all four live at `/items`.
/// - instructions and summary are text-part lists at `/instructions` and `/summary`
///   (upstream `context.compact.before-inline.valid.json`,
///   `context.compact.after-inline.valid.json`); `/instructions` is optional on the
///   event, so it is required only when modify is declared.
/// - prompt at user.message.inbound and content at user.message.outbound are the
///   message lists at `/message/messages` (interaction-event.schema.json).
/// - content at user.elicitation.result is the MCP answer inside the result part at
///   `/elicitation/result` (optional there, so required when modify is declared): the
///   `content` of the `ElicitResult` serialized in the part's text, edited and written
///   back there ([`crate::elicitation`], interaction-payloads.md@8f91ac4).
/// - **Assumed:** workspace at workspace.change.before is the proposed change
///   `/workspace/change` (an object of `cwd`/`workspaceRoots`, as effect.schema.json's
///   object value, and a modify's value is one such change: [`workspace_flaws`]);
///   `/workspace` itself also holds `kind`, which a modify could not replace without
///   making the event invalid.
pub const TABLE: &[Rules] = &[
    rules(
        E::SessionStart,
        &[Inject, Message],
        None,
        &[],
        Payload::Members(&[
            ("/session", Object),
            // The SDKs' session-start.schema.json (draft, not carried): its words, and
            // the session a clear or a fork came from.
            ("/trigger", Word(START_TRIGGERS)),
            (
                "/resumedFrom",
                Shape::RequiredWhen("/trigger", &["clear", "fork"], &Identity),
            ),
            ("/harness", Object),
            // Digest §14: `harness{name,version}`.
            ("/harness/name", Text),
            ("/harness/version", Text),
            ("/permissionMode", Text),
            ("/manifest", Object),
            ("/items", Array),
            // Upstream session-start.schema.json (not carried): `not` any of tool,
            // outcome; the carried `observe-session-start-tool.invalid.json` shows the
            // first.
            ("/tool", Absent),
            ("/outcome", Absent),
        ]),
    ),
    rules(
        E::ConfigChangeBefore,
        &[Deny, Message],
        None,
        &[],
        Payload::Members(config_change!()),
    ),
    rules(
        E::TurnStart,
        &[Deny, Modify, Inject, Flow, Message],
        Some((T::Prompt, "/items")),
        STOP,
        // Its turn closed, as turn.end's (execution-event.schema.json@62fc780); a
        // tool.before's turn is open.
        Payload::Members(&[
            ("/turn", Identity),
            (
                "/trigger",
                Word(&["user", "continuation", "hook", "external"]),
            ),
            ("/items", Array),
            ("/expandedFrom", Shape::Optional(&Text)),
        ]),
    ),
    rules(
        E::TurnFinishBefore,
        &[Modify, Flow, Message],
        Some((T::Response, "/items")),
        STOP_CONTINUE,
        Payload::Members(&[
            ("/turn", Identity),
            ("/outcome", Word(TURN_OUTCOMES)),
            (CONTINUATION_COUNT, Count),
            ("/items", Array),
            ("/lastAssistantItem", Shape::Optional(&Identity)),
            ("/usage", Shape::Usage(TURN_USAGE)),
        ]),
    ),
    rules(
        E::ModelRequestBefore,
        &[Deny, Modify, Inject, Return, Flow, Message],
        Some((T::Request, "/items")),
        STOP,
        Payload::Members(&[
            // Closed on every execution event (execution-event.schema.json@62fc780).
            ("/turn", Shape::Optional(&Identity)),
            ("/model", MODEL),
            ("/model/id", Text),
            ("/model/provider", Text),
            ("/attempt", ATTEMPT),
            ("/attempt/id", Text),
            ("/attempt/number", Ordinal),
            ("/attempt/synthesized", Shape::Optional(&Bool)),
            ("/params", Object),
            ("/items", Array),
            // `not` any of these: what the request brought about is model.response.after's
            // (usage, execution, finish reason, latency) or model.error's.
            ("/usage", Absent),
            ("/execution", Absent),
            ("/finishReason", Absent),
            ("/latencyMs", Absent),
            ("/error", Absent),
        ]),
    ),
    rules(
        E::ModelResponseAfter,
        &[Modify, Flow, Message],
        Some((T::Response, "/items")),
        STOP,
        Payload::Members(&[
            // Closed on every execution event (execution-event.schema.json@62fc780).
            ("/turn", Shape::Optional(&Identity)),
            ("/model", MODEL),
            ("/model/id", Text),
            ("/model/provider", Text),
            ("/attempt", ATTEMPT),
            ("/attempt/id", Text),
            ("/attempt/number", Ordinal),
            ("/attempt/synthesized", Shape::Optional(&Bool)),
            ("/execution", Execution(SUPPLIED)),
            ("/items", Array),
            ("/finishReason", Text),
            ("/usage", Shape::Usage(ATTEMPT_USAGE)),
            ("/latencyMs", Shape::NonNegative),
            // `if` skipped `then` `not` any of these: a result supplied in place of the
            // call used no tokens and took no time the call could report.
            ("/usage", AbsentWhen("/execution/status", "skipped")),
            ("/latencyMs", AbsentWhen("/execution/status", "skipped")),
            // `not` required error: a call that failed is model.error's.
            ("/error", Absent),
        ]),
    ),
    rules(
        E::ModelSwitchBefore,
        &[Deny, Flow, Message],
        None,
        STOP,
        Payload::Members(&[
            // Closed on every execution event (execution-event.schema.json@62fc780).
            ("/turn", Shape::Optional(&Identity)),
            ("/current", MODEL),
            ("/current/id", Text),
            ("/current/provider", Text),
            ("/proposed", MODEL),
            ("/proposed/id", Text),
            ("/proposed/provider", Text),
            ("/reason", Text),
            (
                "/pricing",
                Shape::Optional(&Shape::Closed(
                    "pricing",
                    &[
                        "currency",
                        "inputPerMillionTokens",
                        "outputPerMillionTokens",
                    ],
                )),
            ),
            ("/pricing/currency", Shape::Currency),
            ("/pricing/inputPerMillionTokens", Shape::NonNegative),
            ("/pricing/outputPerMillionTokens", Shape::NonNegative),
            // `not` required previous: the model left is model.switch.after's.
            ("/previous", Absent),
        ]),
    ),
    rules(
        E::ToolBefore,
        &[Deny, Allow, Ask, Modify, Inject, Flow, Return, Message],
        Some((T::Input, "/tool/input")),
        STOP,
        Payload::ToolBefore,
    ),
    rules(
        E::ToolAfter,
        &[Modify, Inject, Flow, Message],
        // execution-payloads.md@8f91ac4: "At `tool.after`, `modify(output)` maps to `items`".
        Some((T::Output, "/items")),
        // The schema's; a declaration of continue is refused all the same ([`check`]):
        // the event carries no continuation count.
        STOP_CONTINUE,
        Payload::ToolAfter,
    ),
    rules(
        E::ToolPermissionRequest,
        &[Allow, Deny, Modify, Flow, Message],
        Some((T::Input, "/tool/input")),
        STOP,
        // The invocation identity tool.before and tool.after share (digest §3.3).
        Payload::Members(&[
            // Closed on every execution event (execution-event.schema.json@62fc780).
            ("/turn", Shape::Optional(&Identity)),
            ("/call", Call),
            ("/tool", Tool),
            ("/path", Text),
            ("/suggestions", Shape::Objects),
            ("/sandboxBypass", Bool),
            // `not` any of these: the decision is tool.permission.resolved's, the outcome
            // and execution tool.after's.
            ("/decision", Absent),
            ("/decidedBy", Absent),
            ("/outcome", Absent),
            ("/execution", Absent),
        ]),
    ),
    rules(
        E::ToolBatchAfter,
        &[Flow, Inject, Message],
        None,
        STOP,
        Payload::Members(&[
            ("/turn", Shape::Optional(&Identity)),
            ("/batch", Identity),
            ("/calls", ResolvedCalls),
        ]),
    ),
    rules(
        E::ContextCompactBefore,
        &[Deny, Modify, Return, Inject, Message],
        Some((T::Instructions, "/instructions")),
        &[],
        Payload::Members(&[
            // Closed on every execution event (execution-event.schema.json@62fc780).
            ("/turn", Shape::Optional(&Identity)),
            ("/trigger", Word(&["auto", "manual", "hook"])),
            ("/items", Array),
            // `not` any of these: the result (summary, what it removed, how it ran, the
            // count after it) is context.compact.after's.
            ("/summary", Absent),
            ("/removed", Absent),
            ("/execution", Absent),
            ("/tokenCounts/after", Absent),
            // After its `after` row: a count refused as present is not also mistyped.
            ("/tokenCounts", Shape::TokenCounts),
        ]),
    ),
    rules(
        E::ContextCompactAfter,
        &[Inject, Modify, Message],
        Some((T::Summary, "/summary")),
        &[],
        Payload::Members(&[
            // Closed on every execution event (execution-event.schema.json@62fc780).
            ("/turn", Shape::Optional(&Identity)),
            ("/summary", Array),
            ("/removed", Shape::Removed),
            ("/execution", Execution(SUPPLIED)),
            ("/tokenCounts", Shape::TokenCounts),
        ]),
    ),
    rules(
        E::TaskChangeBefore,
        &[Deny, Message],
        None,
        &[],
        Payload::Members(TASK_CHANGE),
    ),
    rules(
        E::UserElicitationRequest,
        &[Deny, Return, Message],
        None,
        &[],
        Payload::Members(&[
            (
                "/elicitation",
                Shape::Closed("elicitation", &["server", "mode", "request"]),
            ),
            ("/elicitation/server", Text),
            ("/elicitation/mode", Word(ELICITATION_MODES)),
        ]),
    ),
    rules(
        E::UserElicitationResult,
        &[Modify, Message],
        Some((T::Content, "/elicitation/result")),
        &[],
        Payload::Members(&[
            (
                "/elicitation",
                Shape::Closed("elicitation", &["server", "mode", "result", "action"]),
            ),
            ("/elicitation/server", Text),
            ("/elicitation/mode", Word(ELICITATION_MODES)),
            (
                "/elicitation/action",
                Word(&["accept", "decline", "cancel"]),
            ),
        ]),
    ),
    rules(
        E::UserMessageInbound,
        &[Deny, Modify, Message],
        Some((T::Prompt, "/message/messages")),
        &[],
        Payload::Members(&[
            (
                "/message",
                Shape::Closed("message", &["channel", "sender", "messages"]),
            ),
            ("/message/channel", Text),
            ("/message/sender", Text),
            ("/message/messages", Array),
        ]),
    ),
    rules(
        E::UserMessageOutbound,
        &[Deny, Modify, Message],
        Some((T::Content, "/message/messages")),
        &[],
        Payload::Members(&[
            (
                "/message",
                Shape::Closed("message", &["channel", "messages"]),
            ),
            ("/message/channel", Text),
            ("/message/messages", Array),
        ]),
    ),
    rules(
        E::WorkspaceChangeBefore,
        &[Deny, Modify, Message],
        Some((T::Workspace, "/workspace/change")),
        &[],
        Payload::Members(WORKSPACE_CHANGE),
    ),
];

/// How a turn ends, or is about to (execution-event.schema.json@62fc780
/// turn.finish.before and turn.end `outcome`).
const TURN_OUTCOMES: &[&str] = &["completed", "failed", "cancelled", "max_iterations"];

/// How a model response or a compaction result may be skipped: only for a result
/// supplied in its place (execution-event.schema.json@62fc780, their `allOf`).
const SUPPLIED: &[&str] = &["supplied_result"];

/// The members of a task change, proposed or made (task-workspace-event.schema.json
/// `task`).
const TASK_CHANGE: &[(&str, Shape)] = &[
    (
        "/task",
        Shape::Closed(
            "task",
            &[
                "id",
                "operation",
                "change",
                "prior",
                "description",
                "synthesized",
            ],
        ),
    ),
    ("/task/id", Text),
    ("/task/operation", Word(&["create", "update", "remove"])),
    ("/task/change", Object),
    ("/task/prior", Shape::Optional(&Object)),
    ("/task/description", Shape::Optional(&Shape::String)),
    ("/task/synthesized", Shape::Optional(&Bool)),
];

/// The members of a workspace change, proposed or made (task-workspace-event.schema.json
/// @8f91ac4 `workspace`, the same on workspace.change.before and .after).
const WORKSPACE_CHANGE: &[(&str, Shape)] = &[
    (
        "/workspace",
        Shape::Closed("workspace", &["kind", "change", "prior", "reason"]),
    ),
    ("/workspace/kind", Word(&["cwd", "roots", "switch"])),
    ("/workspace/change", Shape::Workspace),
    ("/workspace/prior", Shape::Optional(&Shape::Workspace)),
    ("/workspace/reason", Shape::Optional(&Shape::String)),
];

/// How an elicitation asks (interaction-event.schema.json@2b5da58).
const ELICITATION_MODES: &[&str] = &["form", "url"];

/// Every event type there is (event.schema.json `oneOf`), interceptable or observed
/// only. Any other type is unsupported semantics, not an event to pass on (digest §13,
/// `observe-unknown-event.invalid.json`).
pub const CATALOGUE: [&str; 32] = [
    "tool.before",
    "tool.after",
    "session.start",
    "session.end",
    "config.change.before",
    "config.change.after",
    "turn.start",
    "turn.finish.before",
    "turn.end",
    "turn.progress",
    "model.request.before",
    "model.response.after",
    "model.error",
    "model.switch.before",
    "model.switch.after",
    "tool.permission.request",
    "tool.permission.resolved",
    "tool.progress",
    "tool.batch.after",
    "context.compact.before",
    "context.compact.after",
    "task.change.before",
    "task.change.after",
    "user.attention",
    "user.elicitation.request",
    "user.elicitation.result",
    "user.message.inbound",
    "user.message.outbound",
    "workspace.change.before",
    "workspace.change.after",
    "file.changed",
    "hook.failure",
];

/// The payload rules of the types observed only, each of them (with [`TABLE`], every type
/// of the [`CATALOGUE`]): session.end from its carried schema (session-end.schema.json);
/// hook.failure from the digest (§14), its `failure` closed as
/// `interaction-event.schema.json@2b5da58` has it; config.change.after and user.attention
/// from that file too (not carried; config.change.before's row follows it), a
/// configuration change made being one proposed that may also list its `mcpServers`, and
/// an attention `{kind, message, title}` and nothing else, its message and title text
/// parts checked by their content slots ([`content`]); task.change.after,
/// workspace.change.after and file.changed from the schema task.change.before's and
/// workspace.change.before's rows follow (`task-workspace-event.schema.json@8f91ac4`,
/// which the carried event union reaches through `catalogue-event.schema.json`; a change
/// made holds the members of one proposed, and the carried `task-id-missing.invalid.json`
/// lacks its task id); tool.permission.resolved and tool.progress from their `required`
/// lists, words and `not` in `execution-event.schema.json@62fc780` (not carried;
/// tool.permission.request's row follows the same file), model.switch.after from its
/// `required` list and `not` in that file (no `proposed`: a switch made proposes
/// nothing), model.error likewise (an execution that ran, an error, no finish reason),
/// and turn.end and turn.progress likewise (turn.end's `allOf`: no `error` when it
/// completed).
pub const OBSERVED: &[(&str, &[(&str, Shape)])] = &[
    (
        "session.end",
        &[
            ("/session", Object),
            ("/outcome", Word(SESSION_OUTCOMES)),
            ("/reason", Text),
            ("/counters", Counters),
            ("/tool", Absent),
        ],
    ),
    (
        "hook.failure",
        &[
            (
                "/failure",
                Shape::Closed("failure", &["backendId", "reason", "policy"]),
            ),
            ("/failure/backendId", Text),
            ("/failure/reason", Text),
            ("/failure/policy", Word(&["fail-open", "fail-closed"])),
            ("/parentEventId", Text),
        ],
    ),
    ("task.change.after", TASK_CHANGE),
    (
        "config.change.after",
        config_change!("mcpServers" => Shape::Optional(&Shape::Objects)),
    ),
    (
        "user.attention",
        &[
            (
                "/attention",
                Shape::Closed("attention", &["kind", "message", "title"]),
            ),
            ("/attention/kind", Text),
            // Text parts each (content-item.schema.json `$defs/textParts`), checked as
            // such by their content slots ([`content`]).
            ("/attention/message", Array),
            ("/attention/title", Array),
        ],
    ),
    ("workspace.change.after", WORKSPACE_CHANGE),
    (
        "tool.permission.resolved",
        &[
            ("/turn", Shape::Optional(&Identity)),
            ("/call", Call),
            ("/tool", Tool),
            ("/path", Text),
            ("/decision", Word(&["allow", "deny"])),
            (
                "/decidedBy",
                Word(&["user", "policy", "hook", "auto", "classifier"]),
            ),
        ],
    ),
    (
        "tool.progress",
        &[
            ("/turn", Shape::Optional(&Identity)),
            ("/call", Call),
            ("/tool", Tool),
            ("/path", Text),
            ("/partialOutput", Shape::Message),
            ("/backgrounded", Bool),
            ("/outcome", Absent),
            ("/execution", Absent),
        ],
    ),
    ("file.changed", &[("/changes", ChangedFiles)]),
    (
        "model.switch.after",
        &[
            ("/turn", Shape::Optional(&Identity)),
            ("/previous", MODEL),
            ("/previous/id", Text),
            ("/previous/provider", Text),
            ("/current", MODEL),
            ("/current/id", Text),
            ("/current/provider", Text),
            ("/reason", Text),
            // `not` required proposed: a switch made proposes nothing.
            ("/proposed", Absent),
        ],
    ),
    (
        "model.error",
        &[
            ("/turn", Shape::Optional(&Identity)),
            ("/model", MODEL),
            ("/model/id", Text),
            ("/model/provider", Text),
            ("/attempt", ATTEMPT),
            ("/attempt/id", Text),
            ("/attempt/number", Ordinal),
            ("/attempt/synthesized", Shape::Optional(&Bool)),
            // It ran: never skipped.
            ("/execution", Execution(&[])),
            ("/error", Error),
            ("/usage", Shape::Usage(ATTEMPT_USAGE)),
            ("/latencyMs", Shape::NonNegative),
            // `not` required finishReason: a response finishes, an error does not.
            ("/finishReason", Absent),
            ("/recovery", Shape::Optional(&Text)),
        ],
    ),
    (
        "turn.end",
        &[
            ("/turn", Identity),
            ("/outcome", Word(TURN_OUTCOMES)),
            ("/continuationCount", Count),
            ("/items", Array),
            ("/lastAssistantItem", Shape::Optional(&Identity)),
            ("/usage", Shape::Usage(TURN_USAGE)),
            // `if` completed `then` `not` required error: a turn that completed has no
            // error to report.
            ("/error", AbsentWhen("/outcome", "completed")),
            // After its `AbsentWhen` row: an error refused as present is not also
            // mistyped.
            ("/error", Shape::Optional(&Error)),
        ],
    ),
    (
        "turn.progress",
        &[
            ("/turn", Identity),
            ("/item", Identity),
            ("/delta", Shape::Message),
            ("/final", Bool),
        ],
    ),
];

/// How a session ended (session-end.schema.json `outcome`).
const SESSION_OUTCOMES: &[&str] = &["completed", "cancelled", "error", "unknown"];

/// Where an event of type `name` carries content, and in which shape: checked wherever
/// present, as a selection can lower only the parts it finds (see [`crate::content`]).
/// A `*` step is each entry of an array.
///
/// The model-visible `items` of the events whose modify targets them are canonical
/// messages, and so are tool.after's (the carried `synthesized-identities.valid.json`
/// and `synthesized-items-string.invalid.json`) and the user messages
/// (interaction-event.schema.json@2b5da58, which also makes an elicitation's request and
/// result and an attention's message and title text parts). A file snapshot is one part
/// (execution-event and task-workspace-event `fileChange`), compaction instructions and
/// summary text parts (see [`TABLE`]). A progress event's model-visible item, tool.progress
/// `partialOutput` and turn.progress `delta` (execution-event.schema.json@62fc780, one
/// `modelVisibleItem` each), is one canonical message, as model-visible `items` are.
/// Any other event's `items` is messages or parts ([`Holds::Items`]): the schemas
/// carried or read type them as one or the other.
pub fn content(name: &str) -> &'static [(&'static str, Holds)] {
    match name {
        "tool.after" => &[
            ("/items", Holds::Messages),
            ("/fileChanges/*/before", Holds::Part),
            ("/fileChanges/*/after", Holds::Part),
        ],
        "turn.start" | "turn.finish.before" | "model.request.before" | "model.response.after" => {
            &[("/items", Holds::Messages)]
        }
        "user.message.inbound" => &[("/items", Holds::Items), ("/message/messages", INBOUND)],
        "user.message.outbound" => &[("/items", Holds::Items), ("/message/messages", OUTBOUND)],
        "context.compact.before" => &[
            ("/items", Holds::Items),
            ("/instructions", Holds::TextParts),
        ],
        "context.compact.after" => &[("/items", Holds::Items), ("/summary", Holds::TextParts)],
        "user.elicitation.request" => &[
            ("/items", Holds::Items),
            ("/elicitation/request", Holds::TextPart),
        ],
        "user.elicitation.result" => &[
            ("/items", Holds::Items),
            ("/elicitation/result", Holds::TextPart),
        ],
        "user.attention" => &[
            ("/items", Holds::Items),
            ("/attention/message", Holds::TextParts),
            ("/attention/title", Holds::TextParts),
        ],
        "tool.progress" => &[("/items", Holds::Items), ("/partialOutput", Holds::Message)],
        "turn.progress" => &[("/items", Holds::Items), ("/delta", Holds::Message)],
        "file.changed" => &[
            ("/items", Holds::Items),
            ("/changes/*/before", Holds::Part),
            ("/changes/*/after", Holds::Part),
        ],
        _ => &[("/items", Holds::Items)],
    }
}

/// A user message's list on its way in: the user's words only
/// (interaction-event.schema.json@2b5da58), as are a `modify` of its `prompt`.
pub const INBOUND: Holds = Holds::MessagesOf("user");
/// A user message's list on its way out: the assistant's words only, as are a `modify`
/// of its `content`.
pub const OUTBOUND: Holds = Holds::MessagesOf("assistant");

/// Where a workspace's change or prior state (task-workspace-event.schema.json@8f91ac4,
/// closed, at least one member) breaks its shape: `cwd` a non-empty string,
/// `workspaceRoots` distinct non-empty strings, nothing else; each flaw at its pointer
/// below the value. A `modify` of `workspace` is such a change, or, merged into one,
/// such members (`whole` false: none changes nothing).
pub fn workspace_flaws(value: &Value, whole: bool) -> Vec<(String, &'static str)> {
    let Some(change) = value.as_object() else {
        return vec![(String::new(), "must be an object")];
    };
    if whole && change.is_empty() {
        return vec![(String::new(), "must name cwd or workspaceRoots")];
    }
    let mut flaws = Vec::new();
    for (key, member) in change {
        // No more than an event is refused with, looked for no further (`content::each`).
        if flaws.len() >= crate::event::MAX_PROBLEMS {
            break;
        }
        let at = format!("/{}", crate::json::segment(key));
        match (key.as_str(), member) {
            ("cwd", Value::String(cwd)) if !cwd.is_empty() => {}
            ("cwd", _) => flaws.push((at, "must be a non-empty string")),
            ("workspaceRoots", Value::Array(roots)) => {
                // A set, not a look back over every root before: the list's length is
                // the sender's (a backend's reply may hold 100,000).
                let mut seen = std::collections::BTreeSet::new();
                for (i, root) in roots.iter().enumerate() {
                    if flaws.len() >= crate::event::MAX_PROBLEMS {
                        break;
                    }
                    match root.as_str().filter(|r| !r.is_empty()) {
                        Some(r) if seen.insert(r) => {}
                        Some(_) => flaws.push((format!("{at}/{i}"), "repeats a root")),
                        None => flaws.push((format!("{at}/{i}"), "must be a non-empty string")),
                    }
                }
            }
            ("workspaceRoots", _) => flaws.push((at, "must be an array of strings")),
            _ => flaws.push((at, "is not a member of a workspace change")),
        }
    }
    flaws
}

/// The payload rules of `name` if it is a type observed only and this project knows
/// them ([`OBSERVED`]).
pub fn observed(name: &str) -> Option<&'static [(&'static str, Shape)]> {
    OBSERVED
        .iter()
        .find(|(observed, _)| *observed == name)
        .map(|(_, members)| *members)
}

const fn rules(
    event: E,
    effects: &'static [EffectKind],
    modify: Option<(T, &'static str)>,
    flow: &'static [FlowOperation],
    payload: Payload,
) -> Rules {
    Rules {
        event,
        effects,
        modify,
        flow,
        payload,
    }
}

/// The rules of `event`.
pub fn of(event: E) -> &'static Rules {
    // Every word has its row (checked by a test); the first row is never reached.
    TABLE.iter().find(|r| r.event == event).unwrap_or(&TABLE[0])
}

/// The rules of the event named `name`, if it is interceptable.
pub fn named(name: &str) -> Option<&'static Rules> {
    E::parse(name).map(of)
}

/// Everything the protocol allows for `event`, as a declaration: every effect, both
/// modify operations, both delivery times. Flow advertises stop only: continuing needs
/// the harness's own continuation counts.
pub fn full(event: E) -> EventCapability {
    let r = of(event);
    EventCapability {
        event,
        effects: r.effects.to_vec(),
        modify: r.modify.map(|(target, _)| ModifyCapability {
            target,
            replace: true,
            merge: true,
        }),
        flow: r.allows(Flow).then(|| FlowCapability {
            operations: vec![FlowOperation::Stop],
            remaining_continuations: None,
            continuation_count: None,
        }),
        inject: if r.allows(Inject) {
            DeliverAt::ALL.to_vec()
        } else {
            Vec::new()
        },
    }
}

/// The declaration of a harness that can intercept every event with everything.
pub fn full_declaration() -> Vec<EventCapability> {
    E::ALL.iter().map(|&e| full(e)).collect()
}

/// Checks a declaration against the table: each event once, only effects the event
/// allows, deny wherever it allows deny (a harness that intercepts an operation it cannot
/// refuse would turn fail-closed into permission), each effect's option block present
/// exactly when the effect is, within what the event allows, nothing in a list twice (the
/// schema's uniqueItems), and `continue` only where the event counts continuations
/// ([`Rules::counts_continuations`]). `at` prefixes every path.
pub fn check(capability: &EventCapability, at: &str) -> Vec<Problem> {
    let r = of(capability.event);
    let event = capability.event;
    let mut problems = Vec::new();
    let mut add = |path: String, rule: String| problems.push(Problem::new(path, rule));
    for (i, &kind) in capability.effects.iter().enumerate() {
        if capability.effects[..i].contains(&kind) {
            add(
                format!("{at}/effects/{i}"),
                format!("\"{kind}\" is listed twice"),
            );
        } else if !r.allows(kind) {
            add(
                format!("{at}/effects/{i}"),
                format!("{event} has no \"{kind}\" effect"),
            );
        }
    }
    if r.allows(Deny) && !capability.has(Deny) {
        add(
            format!("{at}/effects"),
            format!("must include \"deny\" ({event} can be denied)"),
        );
    }
    match (&capability.modify, capability.has(Modify)) {
        (None, true) => add(format!("{at}/modify"), "is required with \"modify\"".into()),
        (Some(_), false) => add(format!("{at}/modify"), "needs \"modify\" in effects".into()),
        (Some(m), true) => {
            if r.modify.map(|(t, _)| t) != Some(m.target) {
                add(
                    format!("{at}/modify/target"),
                    format!("{event} cannot modify \"{}\"", m.target),
                );
            }
            if !m.replace && !m.merge {
                add(
                    format!("{at}/modify"),
                    "must enforce replace or merge".into(),
                );
            }
        }
        (None, false) => {}
    }
    match (&capability.flow, capability.has(Flow)) {
        (None, true) => add(format!("{at}/flow"), "is required with \"flow\"".into()),
        (Some(_), false) => add(format!("{at}/flow"), "needs \"flow\" in effects".into()),
        (Some(f), true) => {
            if f.operations.is_empty() {
                add(format!("{at}/flow/operations"), "must not be empty".into());
            }
            for (i, op) in f.operations.iter().enumerate() {
                // capabilities.schema.json: `operations` has uniqueItems.
                if f.operations[..i].contains(op) {
                    add(
                        format!("{at}/flow/operations/{i}"),
                        format!("\"{op}\" is listed twice"),
                    );
                } else if !r.flow.contains(op) {
                    add(
                        format!("{at}/flow/operations/{i}"),
                        format!("{event} cannot \"{op}\""),
                    );
                } else if *op == FlowOperation::Continue && !r.counts_continuations() {
                    add(
                        format!("{at}/flow/operations/{i}"),
                        format!(
                            "{event} carries no continuationCount: \"continue\" would be \
                             offered with the same remainingContinuations on every call, \
                             however many the turn made"
                        ),
                    );
                }
            }
            let counts = f.remaining_continuations.is_some() && f.continuation_count.is_some();
            if f.operations.contains(&FlowOperation::Continue) && !counts {
                add(
                    format!("{at}/flow"),
                    "continue needs remainingContinuations and continuationCount".into(),
                );
            }
            // AHP-CAP-001: advertise only what can be enforced, allowance included.
            if f.operations.contains(&FlowOperation::Continue)
                && f.remaining_continuations == Some(0)
            {
                add(
                    format!("{at}/flow/remainingContinuations"),
                    "is 0: with no continuation left, \"continue\" cannot be declared".into(),
                );
            }
        }
        (None, false) => {}
    }
    // capabilities.schema.json: `inject.context.deliverAt` has uniqueItems.
    for (i, deliver_at) in capability.inject.iter().enumerate() {
        if capability.inject[..i].contains(deliver_at) {
            add(
                format!("{at}/inject/{i}"),
                format!("\"{deliver_at}\" is listed twice"),
            );
        }
    }
    match (capability.inject.is_empty(), capability.has(Inject)) {
        (true, true) => add(
            format!("{at}/inject"),
            "needs at least one deliverAt with \"inject\"".into(),
        ),
        (false, false) => add(format!("{at}/inject"), "needs \"inject\" in effects".into()),
        _ => {}
    }
    problems
}

/// `capability` as a call whose event has made `count` continuations this turn
/// (`continuationCount`) can offer it. A declaration is made once, so its counts are the
/// turn's allowance, `remainingContinuations + continuationCount` continuations: the call
/// advertises its event's count and what is left of the allowance, and withdraws
/// `continue` (keeping `stop`) once nothing is (AHP-CAP-001: advertise only what can be
/// enforced, "remaining allowance" included). Unchanged without counts on either side.
pub fn at_count(mut capability: EventCapability, count: Option<u64>) -> EventCapability {
    let Some(count) = count else {
        return capability;
    };
    let Some(flow) = capability.flow.as_mut() else {
        return capability;
    };
    let (Some(remaining), Some(made)) = (flow.remaining_continuations, flow.continuation_count)
    else {
        return capability;
    };
    let left = (u64::from(remaining) + u64::from(made)).saturating_sub(count);
    flow.remaining_continuations = Some(u32::try_from(left).unwrap_or(u32::MAX));
    flow.continuation_count = Some(u32::try_from(count).unwrap_or(u32::MAX));
    if left == 0 {
        flow.operations.retain(|op| *op != FlowOperation::Continue);
        if flow.operations.is_empty() {
            capability.flow = None;
            capability.effects.retain(|kind| *kind != Flow);
        }
    }
    capability
}

/// `capability` without modify: for a call whose event exposes nothing to modify.
pub fn without_modify(mut capability: EventCapability) -> EventCapability {
    capability.modify = None;
    capability.effects.retain(|kind| *kind != Modify);
    capability
}

/// `capability` as it is offered to one subscription, whose `content` selection shows it
/// `event` (composition.md@8f91ac4): no whole-list `replace` of a target that holds
/// content the subscription was not shown whole ([`Content::withholds`]), and no modify at
/// all of an elicitation answer it was not shown as body ("It requires an accepted form
/// result and body selection"). An object target (a tool's input, a workspace) is no
/// content a selection lowers. Borrowed when nothing is withdrawn.
pub fn offered_to<'c>(
    capability: &'c EventCapability,
    rules: &Rules,
    event: &crate::event::Event,
    content: &Content,
) -> Cow<'c, EventCapability> {
    let (Some(modify), Some((target, pointer))) = (&capability.modify, rules.modify) else {
        return Cow::Borrowed(capability);
    };
    let withheld = !matches!(target, T::Input | T::Workspace)
        && event
            .value_at(pointer)
            .is_some_and(|value| content.withholds(value));
    if !withheld {
        return Cow::Borrowed(capability);
    }
    // An elicitation answer needs body selection for either operation; a list's merge
    // appends, dropping nothing the subscription was not shown.
    let merge_stays = modify.merge && rules.event != E::UserElicitationResult;
    match (merge_stays, modify.replace) {
        (true, false) => Cow::Borrowed(capability),
        (true, true) => {
            let mut narrowed = capability.clone();
            if let Some(modify) = narrowed.modify.as_mut() {
                modify.replace = false;
            }
            Cow::Owned(narrowed)
        }
        (false, _) => Cow::Owned(without_modify(capability.clone())),
    }
}

/// `declared` narrowed to `effects` by one call: an empty list narrows nothing; otherwise
/// each effect must be declared, deny kept where declared, the call's order is the
/// advertised order, and the option blocks of effects left out are dropped.
pub fn narrow(
    declared: &EventCapability,
    effects: &[EffectKind],
) -> Result<EventCapability, Vec<Problem>> {
    if effects.is_empty() {
        return Ok(declared.clone());
    }
    let mut problems = Vec::new();
    for (i, &kind) in effects.iter().enumerate() {
        if effects[..i].contains(&kind) {
            problems.push(Problem::new(
                format!("effects[{i}]"),
                format!("\"{kind}\" is listed twice"),
            ));
        } else if !declared.has(kind) {
            problems.push(Problem::new(
                format!("effects[{i}]"),
                format!("\"{kind}\" is not declared for {}", declared.event),
            ));
        }
    }
    if declared.has(Deny) && !effects.contains(&Deny) {
        problems.push(Problem::new(
            "effects",
            format!(
                "must include \"deny\" (every {} interceptor can deny)",
                declared.event
            ),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let keep = |kind| effects.contains(&kind);
    Ok(EventCapability {
        event: declared.event,
        effects: effects.to_vec(),
        modify: declared.modify.filter(|_| keep(Modify)),
        flow: declared.flow.clone().filter(|_| keep(Flow)),
        inject: if keep(Inject) {
            declared.inject.clone()
        } else {
            Vec::new()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const SCHEMA: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/upstream/schema/draft/capabilities.schema.json"
    ));

    fn schema(name: &str) -> Value {
        let path = format!(
            "{}/../tests/upstream/schema/draft/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).expect("schema is JSON")
    }

    #[test]
    fn the_catalogue_is_the_upstream_event_union() {
        let union = schema("event.schema.json");
        let upstream: Vec<String> = union["oneOf"]
            .as_array()
            .expect("oneOf")
            .iter()
            .filter_map(|r| r["$ref"].as_str())
            .map(|r| match r.split_once("#/$defs/") {
                Some((_, name)) => name.to_owned(),
                None => r.trim_end_matches(".schema.json").replacen('-', ".", 1),
            })
            .collect();
        assert_eq!(CATALOGUE.to_vec(), upstream);
        for event in E::ALL {
            assert!(CATALOGUE.contains(&event.as_str()), "{event}");
        }
        for (name, _) in OBSERVED {
            assert!(CATALOGUE.contains(name) && named(name).is_none(), "{name}");
        }
        // Every type has payload rules: none is passed on with the envelope's alone.
        for name in CATALOGUE {
            assert!(named(name).is_some() || observed(name).is_some(), "{name}");
        }
    }

    #[test]
    fn session_end_rules_are_its_schema() {
        let schema = schema("session-end.schema.json");
        let envelope = ["id", "source", "type", "time"];
        let required: Vec<&str> = schema["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(Value::as_str)
            .filter(|m| !envelope.contains(m))
            .collect();
        let members = observed("session.end").expect("session.end has rules");
        let ours: Vec<&str> = members
            .iter()
            .filter(|(_, shape)| *shape != Absent && !shape.is_optional())
            .map(|(pointer, _)| &pointer[1..])
            .collect();
        assert_eq!(ours, required);
        let counts = &schema["properties"]["counters"]["additionalProperties"];
        assert_eq!(
            counts,
            &serde_json::json!({"type": "integer", "minimum": 0})
        );
        assert!(members.contains(&("/counters", Shape::Counters)));
        let outcomes: Vec<&str> = schema["properties"]["outcome"]["enum"]
            .as_array()
            .expect("outcome enum")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(SESSION_OUTCOMES.to_vec(), outcomes);
        assert_eq!(schema["not"]["required"], serde_json::json!(["tool"]));
        assert!(members.contains(&("/tool", Absent)));
    }

    #[test]
    fn the_table_is_the_upstream_schema() {
        let schema: Value = serde_json::from_str(SCHEMA).expect("schema is JSON");
        let defs = schema["$defs"].as_object().expect("$defs");
        let names: Vec<&str> = defs.keys().map(String::as_str).collect();
        let ours: Vec<&str> = TABLE.iter().map(|r| r.event.as_str()).collect();
        let mut sorted = ours.clone();
        sorted.sort_unstable();
        let mut upstream = names.clone();
        upstream.sort_unstable();
        assert_eq!(sorted, upstream);
        assert_eq!(ours, E::ALL.iter().map(|e| e.as_str()).collect::<Vec<_>>());
        for r in TABLE {
            let narrowing = &defs[r.event.as_str()]["allOf"][1]["properties"];
            let words = |v: &Value| -> Vec<String> {
                v.as_array().map_or(Vec::new(), |a| {
                    a.iter()
                        .filter_map(|w| w.as_str().map(str::to_owned))
                        .collect()
                })
            };
            let effects: Vec<String> = r.effects.iter().map(|k| k.as_str().to_owned()).collect();
            assert_eq!(
                effects,
                words(&narrowing["effects"]["items"]["enum"]),
                "{}",
                r.event
            );
            let target = r.modify.map(|(t, _)| t.as_str().to_owned());
            assert_eq!(
                target,
                words(&narrowing["modify"]["propertyNames"]["enum"]).pop(),
                "{}",
                r.event
            );
            let flow: Vec<String> = r.flow.iter().map(|f| f.as_str().to_owned()).collect();
            let upstream_flow = match r.allows(Flow) {
                true => words(&narrowing["flow"]["properties"]["operations"]["items"]["enum"]),
                false => Vec::new(),
            };
            assert_eq!(flow, upstream_flow, "{}", r.event);
        }
    }

    #[test]
    fn the_full_declaration_passes_its_own_check() {
        for (i, capability) in full_declaration().iter().enumerate() {
            assert_eq!(
                check(capability, &format!("[{i}]")),
                vec![],
                "{}",
                capability.event
            );
        }
    }

    /// A declaration that can only continue offers no flow at all once the turn's
    /// allowance is used up; counts on neither side leave it as declared.
    #[test]
    fn a_flow_of_continue_alone_goes_with_the_allowance() {
        let mut only = full(E::TurnFinishBefore);
        only.flow = Some(FlowCapability {
            operations: vec![FlowOperation::Continue],
            remaining_continuations: Some(1),
            continuation_count: Some(0),
        });
        let spent = at_count(only.clone(), Some(1));
        assert_eq!(spent.flow, None);
        assert!(!spent.has(Flow), "{:?}", spent.effects);
        assert_eq!(at_count(only.clone(), Some(0)), only);
        assert_eq!(at_count(only.clone(), None), only);
        let stop_only = full(E::TurnFinishBefore);
        assert_eq!(at_count(stop_only.clone(), Some(3)), stop_only);
    }

    #[test]
    fn a_declaration_outside_the_event_is_refused_naming_each_field() {
        let mut after = full(E::ToolAfter);
        after.effects.push(Deny);
        after.modify = Some(ModifyCapability {
            target: T::Input,
            replace: true,
            merge: false,
        });
        after.flow = Some(FlowCapability {
            operations: vec![FlowOperation::Continue],
            remaining_continuations: None,
            continuation_count: None,
        });
        let problems = check(&after, "d");
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "d/effects/4",
                "d/modify/target",
                "d/flow/operations/0",
                "d/flow"
            ]
        );

        let mut before = full(E::ToolBefore);
        before.effects.retain(|&k| k != Deny && k != Inject);
        let rules: Vec<String> = check(&before, "d").iter().map(|p| p.to_string()).collect();
        assert_eq!(
            rules,
            [
                "d/effects: must include \"deny\" (tool.before can be denied)",
                "d/inject: needs \"inject\" in effects"
            ]
        );
        let mut continuing = full(E::ToolBefore);
        continuing.flow = Some(FlowCapability {
            operations: vec![FlowOperation::Continue],
            remaining_continuations: Some(1),
            continuation_count: Some(0),
        });
        assert_eq!(
            check(&continuing, "d").len(),
            1,
            "tool.before cannot continue"
        );
        let mut stopping = full(E::TurnFinishBefore);
        stopping.flow = Some(FlowCapability {
            operations: vec![FlowOperation::Stop, FlowOperation::Continue],
            remaining_continuations: Some(1),
            continuation_count: Some(2),
        });
        assert!(
            check(&stopping, "d").is_empty(),
            "{:?}",
            check(&stopping, "d")
        );
        stopping.flow.as_mut().unwrap().remaining_continuations = Some(0);
        let paths: Vec<String> = check(&stopping, "d").into_iter().map(|p| p.path).collect();
        assert_eq!(paths, ["d/flow/remainingContinuations"]);
    }

    /// capabilities.schema.json makes flow operations and inject delivery times unique
    /// items: a declaration naming one twice would be advertised as it is, in a
    /// `params.capabilities` the schema refuses. It is refused at the repeat, as a
    /// repeated effect is.
    #[test]
    fn a_repeated_flow_operation_or_delivery_time_is_refused_where_repeated() {
        let mut twice = full(E::ToolBefore);
        if let Some(flow) = twice.flow.as_mut() {
            flow.operations = vec![FlowOperation::Stop, FlowOperation::Stop];
        }
        twice.inject = vec![DeliverAt::Now, DeliverAt::NextTurn, DeliverAt::Now];
        let found: Vec<String> = check(&twice, "d").iter().map(|p| p.to_string()).collect();
        assert_eq!(
            found,
            [
                "d/flow/operations/1: \"stop\" is listed twice",
                "d/inject/2: \"now\" is listed twice"
            ]
        );
    }

    /// `continue` is offered with what is left of the turn's continuations, counted down
    /// by the event's `continuationCount` ([`at_count`]). tool.after may continue
    /// (capabilities.schema.json) but carries no count, so its offer would name the same
    /// counts on every call: a declaration of it is refused, at the operation, counts or
    /// not. Where the event counts (turn.finish.before), the same declaration passes.
    #[test]
    fn continue_is_refused_where_the_event_carries_no_count() {
        let continuing = |event| {
            let mut capability = full(event);
            capability.flow = Some(FlowCapability {
                operations: vec![FlowOperation::Stop, FlowOperation::Continue],
                remaining_continuations: Some(1),
                continuation_count: Some(0),
            });
            capability
        };
        let found: Vec<String> = check(&continuing(E::ToolAfter), "d")
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(
            found,
            [
                "d/flow/operations/1: tool.after carries no continuationCount: \"continue\" \
              would be offered with the same remainingContinuations on every call, however \
              many the turn made"
            ]
        );
        assert_eq!(check(&continuing(E::TurnFinishBefore), "d"), vec![]);
        let counting: Vec<E> = TABLE
            .iter()
            .filter(|r| r.flow.contains(&FlowOperation::Continue) && r.counts_continuations())
            .map(|r| r.event)
            .collect();
        assert_eq!(counting, [E::TurnFinishBefore]);
    }

    /// Conformance T6: tool.before never advertises `continue`; the upstream request
    /// that does (`tool-before-continue-capability.invalid.json`) is refused as a
    /// declaration, at the operation.
    #[test]
    fn upstream_tool_before_continue_capability_is_refused() {
        let fixture: Value = serde_json::from_str(fixture!(
            "http/tool-before-continue-capability.invalid.json"
        ))
        .expect("fixture is JSON");
        let mut declared = fixture["params"]["capabilities"].clone();
        declared["event"] = fixture["params"]["event"]["type"].clone();
        let capability: EventCapability =
            serde_json::from_value(declared).expect("the fixture's capabilities");
        let problems = check(&capability, "d");
        let found: Vec<(&str, &str)> = problems
            .iter()
            .map(|p| (p.path.as_str(), p.rule.as_str()))
            .collect();
        // It also lacks deny, which tool.before must enforce (CAP-002).
        assert_eq!(
            found,
            [
                (
                    "d/effects",
                    "must include \"deny\" (tool.before can be denied)"
                ),
                ("d/flow/operations/0", "tool.before cannot \"continue\"")
            ]
        );
    }

    #[test]
    fn a_call_narrows_its_declaration_and_never_widens_it() {
        let declared = full(E::ToolBefore);
        let narrowed = narrow(&declared, &[Deny, Message]).expect("narrower");
        assert_eq!(narrowed.effects, [Deny, Message]);
        assert_eq!(
            (narrowed.modify, narrowed.flow, narrowed.inject.len()),
            (None, None, 0)
        );
        assert_eq!(narrow(&declared, &[]), Ok(declared.clone()));
        let after = full(E::ToolAfter);
        let problems = narrow(&after, &[Message, Deny]).expect_err("deny is not declared");
        assert_eq!(
            problems[0].to_string(),
            "effects[1]: \"deny\" is not declared for tool.after"
        );
        let problems = narrow(&declared, &[Message]).expect_err("deny dropped");
        assert_eq!(problems[0].path, "effects");
    }
}
