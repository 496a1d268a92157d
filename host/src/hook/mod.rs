//! `ahp hook HARNESS`: an AHP interceptor in front of an agent harness's command hooks.
//!
//! The harness starts one process per hook event and writes its own JSON payload on stdin;
//! this module reads it, maps it to the AHP event, asks the interceptor and answers in the
//! harness's own format. Every harness fails open on a hook that crashes, times out or
//! prints something unexpected, so the adapter never leaves that to chance: every error
//! before a decision — a payload that is not the harness's, an unreadable or invalid
//! registration, a component failure, a panic, the whole process running past its budget —
//! is answered as a denial in the harness's format, with a generic reason. The details go
//! to the log, never to stderr, which a harness shows the model on exit 2: stderr holds
//! the answer's own lines alone, and the log is the file `AHP_LOG_FILE` names (see
//! `cli`), else nowhere; a panic's message too, and a command line that does not parse.
//! SIGINT, SIGTERM, SIGHUP or SIGQUIT, caught from the start of [`run`] (before stdin is
//! read), interrupts the call (`decidedBy: "interrupted"` in the audit): its stdio
//! backends are killed and reaped, and the process answers with the same denial before
//! it exits. At an event that is only observed nothing is decided, so a failure there is
//! logged and answered as no objection. Every call answered with a decision has one record
//! in `--audit`, saying what the harness was told, written by [`CallAudit`] (the
//! interceptor writes none): the settlement, the adapter's denial of one it cannot write,
//! or the denial of a failure, the watchdog or a signal.
//!
//! A tool the call denies never runs, so the harness sends no post-tool hook for it: the
//! adapter observes the denial itself as that call's `tool.after` (`outcome: "denied"`,
//! conformance O2) once the answer is decided; see `observe_denial`.
//!
//! Each harness module says three things as data and small functions: which native events
//! map to which AHP events and which effects the harness enforces at each
//! ([`EventSpec`]), how to read its payload into a [`Payload`], and how to write a
//! [`Verdict`] as its answer. `mod.rs` is the flow shared by all of them. An event where
//! the harness enforces something is intercepted, and the harness's capability
//! declaration (those events with those effects) is loaded with the registration, so a
//! subscription intercepting anything else is refused at load — a denial; an event
//! where it enforces nothing is only observed.

mod call_audit;
mod claude_code;
mod codex;
mod copilot;
mod cursor;
mod event;
mod exact;
mod gemini;
pub(crate) mod install;
pub(crate) mod manifest;
mod mcp;
mod payload;

pub use call_audit::CallAudit;
use call_audit::{Recorded, WRITE_GRACE};
pub(crate) use install::{absolute, Selected};
pub use install::{install, Chain, Install, Installed};

use crate::vocab::{
    DeliverAt, Enforce, EventCapability, EventRef, FlowCapability, FlowOperation,
    InterceptableEvent, ModifyCapability, ModifyTarget,
};
use crate::{
    DecidedBy, Decision, Declaration, EffectKind, Interceptor, Interrupt, Options, Record,
    Settlement,
};
use serde_json::{Map, Value};
use std::io::{Read, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The default budget of one hook process, from its start to its answer.
pub const DEFAULT_BUDGET_MS: u64 = 10_000;

/// How long past its budget the process may run before the watchdog answers a denial.
/// The call's I/O ends inside the budget, and the component is cut off 1.25 s past it
/// at the latest (pool.rs: the time to prepare observers begun before it, and a grace);
/// this covers that and a stuck step around it.
pub(crate) const WATCHDOG_GRACE: Duration = Duration::from_millis(1_500);

/// What the log says of a call a signal ended.
const INTERRUPTED: &str = "interrupted by a signal";

/// How long after SIGINT, SIGTERM, SIGHUP or SIGQUIT the process may still take to
/// answer (and a settlement's record being written then, `WRITE_GRACE` more). An
/// interrupted call settles at once; this covers a step that cannot see the signal
/// (reading stdin, compiling the component).
const SIGNAL_GRACE: Duration = Duration::from_millis(500);

/// The largest payload read from stdin; a harness sends one small JSON object. Also the
/// bound on the CLI's event and registration reads.
pub(crate) const MAX_PAYLOAD_BYTES: u64 = 16 << 20;

/// The reason of every denial the adapter makes itself: generic, never the details.
fn generic_reason() -> &'static str {
    DecidedBy::EngineFailure
        .generic_reason()
        .unwrap_or("Policy evaluation failed.")
}

/// `reason`, unless it shows nothing: that is shown as no reason. A backend may give one
/// (the schema asks for one character), and Codex trims a denial's reason and takes a
/// blank one for a failed hook, which runs the tool.
fn shown(reason: Option<&str>) -> Option<&str> {
    reason.filter(|reason| !is_blank(reason))
}

/// Whether `text` shows nothing: only white space as a JavaScript harness trims it
/// (Unicode's, and the byte order mark, which Rust's `trim` keeps), and what
/// [`stderr_line`] turns into spaces — a reason of a bidirectional override alone would
/// reach stderr as a blank line.
fn is_blank(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_whitespace() || c == '\u{feff}' || unprintable(c))
}

/// A character [`stderr_line`] does not write: a control character (a line break, an
/// escape sequence's ESC) but the tab, a line or paragraph separator, or a bidirectional
/// override or isolate.
fn unprintable(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The reason shown with a denial or stop whose reason is blank ([`shown`]). Every denial
/// the interceptor makes itself carries its `DecidedBy::generic_reason`, so a blank one
/// is a backend's decision, and is said to be: shown as one of those generic reasons
/// ("Policy evaluation failed."), it would pass a backend's denial off as the
/// interceptor's own failure.
const BLANK_BACKEND_REASON: &str = "A policy backend refused this without giving a reason.";

/// The reason shown with an `ask` whose backend gave none (the effect carries no text).
const ASK_REASON: &str = "A policy backend asks for approval of this call.";

/// The instruction a `continue` with none goes out with: the harnesses that go on at a
/// stop take the text they are given as the agent's next prompt, and need one.
const CONTINUE_REASON: &str = "A policy backend asks the agent to go on before it stops.";

/// The reason shown with the `ask` a replaced input goes out with.
const MODIFIED_REASON: &str =
    "A policy backend changed this call's input; approve the changed call.";

/// The harnesses with an adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Harness {
    /// Anthropic Claude Code.
    ClaudeCode,
    /// OpenAI Codex CLI.
    Codex,
    /// Google Gemini CLI.
    Gemini,
    /// Cursor.
    Cursor,
    /// GitHub Copilot CLI.
    Copilot,
}

impl Harness {
    /// Every harness, in the order of the README.
    pub const ALL: [Harness; 5] = [
        Harness::ClaudeCode,
        Harness::Codex,
        Harness::Gemini,
        Harness::Cursor,
        Harness::Copilot,
    ];

    /// The command-line name, also the `native.provider` of its events.
    pub fn name(self) -> &'static str {
        match self {
            Harness::ClaudeCode => "claude-code",
            Harness::Codex => "codex",
            Harness::Gemini => "gemini",
            Harness::Cursor => "cursor",
            Harness::Copilot => "copilot",
        }
    }

    /// The harness called `name` on the command line.
    pub fn parse(name: &str) -> Option<Harness> {
        Harness::ALL.into_iter().find(|h| h.name() == name)
    }

    /// The native events this adapter maps, with what the harness enforces at each.
    pub fn events(self) -> &'static [EventSpec] {
        match self {
            Harness::ClaudeCode => claude_code::EVENTS,
            Harness::Codex => codex::EVENTS,
            Harness::Gemini => gemini::EVENTS,
            Harness::Cursor => cursor::EVENTS,
            Harness::Copilot => copilot::EVENTS,
        }
    }

    /// Where its payloads keep the fields an AHP event is built from.
    fn fields(self) -> &'static payload::Fields {
        match self {
            Harness::ClaudeCode => &claude_code::FIELDS,
            Harness::Codex => &codex::FIELDS,
            Harness::Gemini => &gemini::FIELDS,
            Harness::Cursor => &cursor::FIELDS,
            Harness::Copilot => &copilot::FIELDS,
        }
    }

    /// `verdict` written as this harness's answer to `spec`'s event.
    fn answer(self, spec: &EventSpec, verdict: &Verdict) -> Answer {
        match self {
            Harness::ClaudeCode => claude_code::answer(spec, verdict),
            Harness::Codex => codex::answer(spec, verdict),
            Harness::Gemini => gemini::answer(spec, verdict),
            Harness::Cursor => cursor::answer(spec, verdict),
            Harness::Copilot => copilot::answer(spec, verdict),
        }
    }

    /// The harness's capability declaration: every intercepted event with the effects
    /// advertised there.
    pub fn declaration(self) -> Declaration {
        self.declaration_for(None)
    }

    /// The declaration for one call: `call`'s event with what its payload allows there
    /// ([`EventSpec::capability_at`]), every other event as always; each AHP event once
    /// ([`distinct_events`](Self::distinct_events)).
    fn declaration_for(self, call: Option<(&EventSpec, &Payload)>) -> Declaration {
        let capability = |spec: &EventSpec| match call {
            Some((at, payload)) if at.ahp == spec.ahp => at.capability_at(payload),
            _ => spec.capability(),
        };
        Declaration::Exactly(self.distinct_events().filter_map(capability).collect())
    }

    /// The mapped events, one per AHP event: where two native events map to one (a stop
    /// and a subagent's stop; after a tool call, and after one that failed), the first,
    /// whose every property but its name and [`EventSpec::after_failed_call`] (neither in
    /// the declaration) the other shares (tested).
    fn distinct_events(self) -> impl Iterator<Item = &'static EventSpec> {
        let events = self.events();
        let first = move |(i, spec): &(usize, &EventSpec)| {
            !events[..*i].iter().any(|earlier| earlier.ahp == spec.ahp)
        };
        events
            .iter()
            .enumerate()
            .filter(first)
            .map(|(_, spec)| spec)
    }

    /// What to do with the snippet where [`Harness::settings_file`] is a project's file
    /// a team may commit: the snippet names this machine's paths, and wherever they do
    /// not exist (a teammate's machine, a cloud agent) every call would be denied. `None`
    /// where that file is the user's own or is not committed (Claude Code's local one).
    pub fn uncommitted_advice(self) -> Option<&'static str> {
        match self {
            Harness::Codex => None,
            // Its local settings are git-ignored only when Claude Code created them.
            Harness::ClaudeCode => Some(
                "Claude Code git-ignores .claude/settings.local.json only when it made the \
                 file itself (see `git check-ignore .claude/settings.local.json`)",
            ),
            Harness::Gemini => Some(
                "keep it out of version control, or put it in your own ~/.gemini/settings.json",
            ),
            Harness::Cursor => {
                Some("keep it out of version control, or put it in your own ~/.cursor/hooks.json")
            }
            // The user's own hooks directory.
            Harness::Copilot => None,
        }
    }

    /// The file its [`install()`] snippet belongs in.
    pub fn settings_file(self) -> &'static str {
        match self {
            Harness::ClaudeCode => claude_code::SETTINGS_FILE,
            Harness::Codex => codex::SETTINGS_FILE,
            Harness::Gemini => gemini::SETTINGS_FILE,
            Harness::Cursor => cursor::SETTINGS_FILE,
            Harness::Copilot => copilot::SETTINGS_FILE,
        }
    }

    /// The name of the native event in `payload`, or the one the command line names
    /// (Copilot sends none); both present and different is not this harness's payload.
    fn event_name(
        self,
        payload: &Map<String, Value>,
        flag: Option<&str>,
    ) -> Result<String, String> {
        let keys: &[&str] = match self {
            Harness::Copilot => &["hookEventName", "hook_event_name"],
            _ => &["hook_event_name"],
        };
        let field = keys
            .iter()
            .find_map(|key| payload.get(*key).map(|value| (key, value)));
        match (field, flag) {
            (Some((_, Value::String(name))), Some(flag)) if !self.same_event(name, flag) => Err(
                format!("the payload is a {name} event, the command line says {flag}"),
            ),
            (Some((_, Value::String(name))), _) => Ok(name.clone()),
            (Some((key, _)), _) => Err(format!("{key} must be a string")),
            (None, Some(flag)) => Ok(flag.to_string()),
            (None, None) => Err("the payload names no hook event (hook_event_name)".into()),
        }
    }

    /// The mapped event a call with `payload` is answered at: the payload's own, which is
    /// the event the harness fires and acts on, whatever the command line says (a hook
    /// copied under another event's key is still answered where its answer counts); for
    /// a payload that names none (Copilot's), the command line's `flag`. A name of
    /// another type, or one the adapter does not map, is none — the block for an unknown
    /// event — except in a hook installed at a stop (copied to a stop-like event the
    /// adapter does not know, say): that answers as at its stop, where the block would
    /// keep the agent working.
    fn answered_at(
        self,
        payload: &Map<String, Value>,
        flag: Option<&str>,
    ) -> Option<&'static EventSpec> {
        let flagged = flag.and_then(|name| self.spec(name));
        let own = match self.event_name(payload, None) {
            Ok(own) => self.spec(&own),
            Err(_) if self.event_name(payload, flag).is_ok() => return flagged,
            Err(_) => None,
        };
        own.or(flagged.filter(|spec| spec.ahp == AhpEvent::TurnFinishBefore))
    }

    /// The mapped native event called `name`.
    fn spec(self, name: &str) -> Option<&'static EventSpec> {
        self.events()
            .iter()
            .find(|spec| self.same_event(spec.native, name))
    }

    /// Whether two spellings name the same native event: exactly, or for Copilot in
    /// either case (its Claude-compatible form names `preToolUse` `PreToolUse`).
    fn same_event(self, a: &str, b: &str) -> bool {
        a == b || (self == Harness::Copilot && a.eq_ignore_ascii_case(b))
    }
}

/// The answer where the harness has no better word: a denial (the adapter's own, after a
/// failure, or a fail-closed one) is exit 2 with the reason, the one block every harness
/// honours almost everywhere (at a session start Claude Code only shows it, and there
/// and before a compaction Codex goes on as after a failed hook); anything else is no
/// answer. Except before the agent stops (`turn.finish.before`): there exit 2 blocks the
/// stop and keeps the agent working, the opposite of a denial, so a denial is no answer
/// and the agent stops as it meant to.
fn exit_code_answer(spec: &EventSpec, verdict: &Verdict) -> Answer {
    match verdict.decision {
        Decision::Deny if spec.ahp != AhpEvent::TurnFinishBefore => {
            Answer::blocked(verdict.reason())
        }
        _ => Answer::silent(),
    }
}

/// `{"continue": false, "stopReason": …}`: how Claude Code, Codex and Gemini CLI stop the
/// agent, at any event.
fn stop_answer(reason: &str) -> Answer {
    Answer::json(serde_json::json!({"continue": false, "stopReason": reason}))
}

/// `{"decision": word, "reason": reason}`: Claude Code's and Codex's block (`block`),
/// Gemini CLI's (`deny`).
fn decided(word: &str, reason: &str) -> Answer {
    Answer::json(serde_json::json!({"decision": word, "reason": reason}))
}

/// The answer at a stop (`turn.finish.before`) of a harness whose block there makes the
/// agent go on with the reason as its next prompt (Claude Code, Codex, Gemini CLI): a
/// continue is `go_on` with the instruction; a flow stop, or a denial (the adapter's, or
/// fail-closed: there is no deny effect here), stops the agent — a block would keep it
/// working — and anything else is no answer.
fn at_stop(verdict: &Verdict, go_on: impl FnOnce(&str) -> Answer) -> Answer {
    if let Some(reason) = verdict.stop_reason() {
        return stop_answer(reason);
    }
    if verdict.decision == Decision::Deny {
        return stop_answer(verdict.reason());
    }
    match verdict.continue_text() {
        Some(instruction) => go_on(&instruction),
        None => Answer::silent(),
    }
}

/// The AHP events the adapters produce. Spelled here until the component's event list
/// reaches the shared vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AhpEvent {
    /// Before a tool runs.
    ToolBefore,
    /// After a tool ran.
    ToolAfter,
    /// A user prompt starts a turn.
    TurnStart,
    /// The agent is about to end its turn.
    TurnFinishBefore,
    /// A session starts or resumes.
    SessionStart,
    /// A session ends.
    SessionEnd,
    /// The context is about to be compacted.
    ContextCompactBefore,
    /// A request is about to go to the model.
    ModelRequestBefore,
}

impl AhpEvent {
    /// The event `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            AhpEvent::ToolBefore => "tool.before",
            AhpEvent::ToolAfter => "tool.after",
            AhpEvent::TurnStart => "turn.start",
            AhpEvent::TurnFinishBefore => "turn.finish.before",
            AhpEvent::SessionStart => "session.start",
            AhpEvent::SessionEnd => "session.end",
            AhpEvent::ContextCompactBefore => "context.compact.before",
            AhpEvent::ModelRequestBefore => "model.request.before",
        }
    }

    /// The event as an interceptable one, when the protocol lets it be intercepted.
    pub fn interceptable(self) -> Option<InterceptableEvent> {
        InterceptableEvent::parse(self.as_str())
    }
}

/// One native hook event of a harness: the AHP event it becomes and the effects the
/// harness really enforces there (its capability declaration for that event).
#[derive(Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// The harness's event name, e.g. `PreToolUse`.
    pub native: &'static str,
    /// The AHP event it maps to.
    pub ahp: AhpEvent,
    /// The AHP effects the harness really enforces at this event, among those the
    /// protocol allows there (before a tool: always deny). `flow` means stop, and
    /// continue too where [`continues`](Self::continues) says.
    pub enforces: &'static [EffectKind],
    /// Whether a `modify` may replace the tool input whole: the harness runs the input
    /// the adapter writes as it is, rather than merging it into the model's arguments.
    pub replaces_input: bool,
    /// Whether `ahp hook install` writes this hook only for a registration that selects
    /// its AHP event (in any mode): a hook that costs much more than it is worth to a
    /// registration that never looks (Gemini's BeforeModel runs a process at every model
    /// request, and a failure there ends the turn; at its AfterAgent a hook that dies
    /// starts another turn).
    pub on_demand: bool,
    /// Whether the harness goes on working when the adapter says so at this stop
    /// (`turn.finish.before`): its block there makes the agent take the reason as its
    /// next prompt. Offered only while the payload says no stop hook has continued the
    /// turn yet (`capability_at`).
    pub continues: bool,
    /// Whether the harness fires this after a tool call that failed or was interrupted,
    /// and never after one that succeeded (Claude Code's `PostToolUseFailure`): the
    /// call's `tool.after` says it failed (`payload::Ended`).
    pub after_failed_call: bool,
}

/// The [`EventSpec`] of `native`: it becomes `ahp`, where the harness enforces `enforces`
/// (a modified input as written).
const fn on(native: &'static str, ahp: AhpEvent, enforces: &'static [EffectKind]) -> EventSpec {
    EventSpec {
        native,
        ahp,
        enforces,
        replaces_input: true,
        on_demand: false,
        continues: false,
        after_failed_call: false,
    }
}

impl EventSpec {
    /// This event where the harness merges the input the adapter writes into the
    /// model's arguments: a key a replace drops would survive, so only merge holds.
    const fn merging_input(self) -> EventSpec {
        EventSpec {
            replaces_input: false,
            ..self
        }
    }

    /// This event, installed only for a registration that selects it.
    const fn on_demand(self) -> EventSpec {
        EventSpec {
            on_demand: true,
            ..self
        }
    }

    /// This stop, where the harness goes on when told.
    const fn continuing(self) -> EventSpec {
        EventSpec {
            continues: true,
            ..self
        }
    }

    /// This event after a tool call, fired only when the call failed or was interrupted.
    const fn after_failed_call(self) -> EventSpec {
        EventSpec {
            after_failed_call: true,
            ..self
        }
    }

    /// Whether a denial at this intercepted event is told by stopping the agent
    /// (`continue: false`), the harness having no block that holds here: a session start
    /// cannot be blocked, Codex stops a compaction only so, and after a failed call no
    /// block is documented (the call has failed already).
    fn stops_on_denial(&self) -> bool {
        self.after_failed_call
            || matches!(
                self.ahp,
                AhpEvent::SessionStart | AhpEvent::ContextCompactBefore
            )
    }

    /// The effects advertised to backends: what the harness enforces and the adapter
    /// can also write. A backend is never offered an effect either would drop.
    pub fn advertised(&self) -> Vec<EffectKind> {
        self.enforces
            .iter()
            .copied()
            .filter(|&kind| self.adapter_writes(kind))
            .collect()
    }

    /// Whether a [`Verdict`] carries effects of `kind` to the harness here. `allow` is
    /// never advertised: an AHP allow is "no objection", and no harness has a word for
    /// that which is not also a grant. `return` has no harness word. `modify` is
    /// written for a tool's input only (the settlement's `effective.input`).
    fn adapter_writes(&self, kind: EffectKind) -> bool {
        match kind {
            EffectKind::Deny
            | EffectKind::Ask
            | EffectKind::Message
            | EffectKind::Flow
            | EffectKind::Inject => true,
            EffectKind::Modify => self.ahp == AhpEvent::ToolBefore,
            EffectKind::Allow | EffectKind::Return => false,
        }
    }

    /// This event's entry in the harness's declaration; `None` (observed only) when the
    /// harness enforces nothing here or the protocol does not intercept the event.
    fn capability(&self) -> Option<EventCapability> {
        let effects = self.advertised();
        let event = self.ahp.interceptable().filter(|_| !effects.is_empty())?;
        let flow = effects.contains(&EffectKind::Flow).then(|| FlowCapability {
            operations: vec![FlowOperation::Stop],
            remaining_continuations: None,
            continuation_count: None,
        });
        // The adapter writes the whole effective input, so merge always holds, and
        // replace where the harness runs that input as written.
        let modify = effects
            .contains(&EffectKind::Modify)
            .then_some(ModifyCapability {
                target: ModifyTarget::Input,
                replace: self.replaces_input,
                merge: true,
            });
        // Every harness context field takes text for the model at once.
        let inject = match effects.contains(&EffectKind::Inject) {
            true => vec![DeliverAt::Now],
            false => Vec::new(),
        };
        Some(EventCapability {
            event,
            effects,
            modify,
            flow,
            inject,
        })
    }

    /// This event's entry for the call `payload` is: [`capability`](Self::capability),
    /// and at a stop where the harness goes on when told, `continue` too when the payload
    /// says no stop hook has continued this turn yet. One continuation per turn, counted
    /// by the harness itself (`stop_hook_active`), so that a policy that always says
    /// continue cannot keep the agent working forever; a payload that does not say is
    /// offered none.
    /// Nor is an effect offered that this payload's call cannot have ([`withheld`]).
    fn capability_at(&self, payload: &Payload) -> Option<EventCapability> {
        let mut capability = self.capability()?;
        let fresh = self.continues && payload.continued == Some(false);
        if let Some(flow) = capability.flow.as_mut().filter(|_| fresh) {
            flow.operations.push(FlowOperation::Continue);
            flow.remaining_continuations = Some(1);
            flow.continuation_count = Some(0);
        }
        let withheld = withheld(payload);
        capability.effects.retain(|kind| !withheld.contains(kind));
        if withheld.contains(&EffectKind::Modify) {
            capability.modify = None;
        }
        Some(capability)
    }

    /// The effects advertised for the call `payload` is: [`advertised`](Self::advertised)
    /// but those it cannot have ([`withheld`]).
    fn advertised_at(&self, payload: &Payload) -> Vec<EffectKind> {
        let mut effects = self.advertised();
        let withheld = withheld(payload);
        effects.retain(|kind| !withheld.contains(kind));
        effects
    }
}

/// The effects the call `payload` is cannot have, whatever its event enforces:
/// - `modify`, for an input that could not be written back as it came
///   ([`Payload::input_is_inexact`]);
/// - `ask`, in a session whose permission mode asks nobody: Claude Code's `auto`, where
///   a classifier decides in the user's place, and a hook's `ask` has been reported to
///   let the tool run unasked (anthropics/claude-code#51255, #89561). A policy that
///   wants a person's word there has to deny.
fn withheld(payload: &Payload) -> Vec<EffectKind> {
    let mut withheld = Vec::new();
    if payload.input_is_inexact() {
        withheld.push(EffectKind::Modify);
    }
    if payload.permission_mode.as_deref() == Some("auto") {
        withheld.push(EffectKind::Ask);
    }
    withheld
}

/// A harness payload read into the fields every AHP event is built from.
#[derive(Debug, Default, PartialEq)]
pub struct Payload {
    /// The native session (or conversation) id.
    pub session_id: String,
    /// The working directory, when the harness says (Cursor: else its first workspace
    /// root).
    pub cwd: Option<String>,
    /// Whether `cwd` is the first workspace root, the harness having named none: it is
    /// left out with the roots, which it would otherwise reveal.
    pub cwd_is_a_root: bool,
    /// The workspace's root directories, when the harness says (Cursor).
    pub workspace_roots: Vec<String>,
    /// The model the agent runs on, when the harness says.
    pub model: Option<String>,
    /// Tool events: the native tool name and its parsed input.
    pub tool: Option<(String, Map<String, Value>)>,
    /// Tool events: what the harness says of the MCP server the call goes to (Gemini's
    /// `mcp_context`), when it does.
    pub mcp_context: Option<Map<String, Value>>,
    /// The harness's version, when it says (Cursor).
    pub harness_version: Option<String>,
    /// The subagent a call runs in, when the harness names it: its id and type (Claude
    /// Code's `agent_id` and `agent_type`).
    pub agent: Option<(String, Option<String>)>,
    /// The session's permission mode, when the harness says (Claude Code's and Codex's
    /// `permission_mode`).
    pub permission_mode: Option<String>,
    /// `turn.finish.before`: whether a stop hook has already made the agent go on in this
    /// turn, when the harness says (`stop_hook_active`).
    pub continued: Option<bool>,
    /// `turn.finish.before`: how the agent's work ended, when the harness's stop says
    /// (Cursor's `status`).
    pub stop_status: Option<payload::StopStatus>,
    /// `turn.finish.before`: how many times a stop hook has made the agent go on in this
    /// loop, when the harness counts them (Cursor's `loop_count`).
    pub continuation_count: Option<u64>,
    /// `model.request.before`: the model the request names, when the harness says.
    pub request_model: Option<String>,
    /// `model.request.before`: the request's generation parameters, when the harness
    /// says.
    pub request_params: Option<Map<String, Value>>,
    /// The harness's tool-use id, when it has one.
    pub call_id: Option<String>,
    /// The harness's turn id, when it sends one.
    pub turn_id: Option<String>,
    /// `session.start`: why the session started; `context.compact.before`: what set
    /// the compaction off; in the harness's words.
    pub trigger: Option<String>,
    /// `session.end`: why it ended, in the harness's words.
    pub reason: Option<String>,
    /// `tool.after`: how the call ended, as far as the harness says.
    pub ended: payload::Ended,
}

/// An optional field of the events' `session` that an administrator may leave out of
/// every event (digest §3.2: "Admins MUST be able to leave out the optional session
/// fields"): `ahp hook --omit-session`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionField {
    /// `session.cwd`, the working directory.
    Cwd,
    /// `session.workspaceRoots` (Cursor's workspace roots).
    WorkspaceRoots,
    /// `session.model` (Claude Code's, Codex's and Cursor's model).
    Model,
    /// `session.agent` (the subagent Claude Code or Codex names).
    Agent,
}

impl SessionField {
    /// Every one, in the order `--help` names them.
    pub const ALL: [SessionField; 4] = [
        SessionField::Cwd,
        SessionField::WorkspaceRoots,
        SessionField::Model,
        SessionField::Agent,
    ];

    /// Its member name in `session`.
    pub fn name(self) -> &'static str {
        match self {
            SessionField::Cwd => "cwd",
            SessionField::WorkspaceRoots => "workspaceRoots",
            SessionField::Model => "model",
            SessionField::Agent => "agent",
        }
    }

    /// The field whose member name is `word`.
    pub fn parse(word: &str) -> Option<SessionField> {
        SessionField::ALL.into_iter().find(|f| f.name() == word)
    }
}

impl Payload {
    /// Without `fields`, whatever the harness said of them.
    fn leave_out(&mut self, fields: &[SessionField]) {
        for field in fields {
            match field {
                SessionField::Cwd => self.cwd = None,
                SessionField::WorkspaceRoots => {
                    self.workspace_roots.clear();
                    if self.cwd_is_a_root {
                        self.cwd = None;
                    }
                }
                SessionField::Model => self.model = None,
                SessionField::Agent => self.agent = None,
            }
        }
    }

    /// Whether the tool input holds U+FFFD anywhere, as a lone UTF-16 surrogate is read
    /// ([`payload::parse`]): the adapter writes back the whole input after a `modify`,
    /// and would then change what no backend changed (a file's content cut in an emoji).
    /// A U+FFFD the harness sent as one is taken for one read so too.
    fn input_is_inexact(&self) -> bool {
        use std::char::REPLACEMENT_CHARACTER as REPLACED;
        fn in_members(members: &Map<String, Value>) -> bool {
            members
                .iter()
                .any(|(name, value)| name.contains(REPLACED) || in_value(value))
        }
        fn in_value(value: &Value) -> bool {
            match value {
                Value::String(text) => text.contains(REPLACED),
                Value::Array(items) => items.iter().any(in_value),
                Value::Object(members) => in_members(members),
                _ => false,
            }
        }
        self.tool
            .as_ref()
            .is_some_and(|(_, input)| in_members(input))
    }
}

/// What the adapter tells the harness, before formatting, read from the typed
/// settlement: the decision, its reason, and what `record.enforce` says to apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Deny, ask, or no objection (never a grant).
    pub decision: Decision,
    /// The reason to show: the backend's for an explicit deny, else a generic one; a
    /// denial's accepted messages and injected context follow it after a blank line.
    pub reason: Option<String>,
    /// Accepted `message` effects, in chain order.
    pub messages: Vec<String>,
    /// The text of accepted `inject` effects (context for the model), in chain order.
    pub context: Vec<String>,
    /// The effective tool input after accepted `modify` effects (merges applied).
    pub input: Option<Map<String, Value>>,
    /// A settled `flow` stop: the agent should stop, with the backend's reason if any.
    pub stop: Option<Option<String>>,
    /// A settled `flow` continue: the agent should go on instead of stopping, with the
    /// backends' instructions (none, one, or one per backend, in chain order).
    pub continuation: Option<Vec<String>>,
}

impl Verdict {
    /// The settlement's verdict; an accepted effect the adapter cannot write (an input
    /// that is no object, injected content that is not text) is an error, answered as
    /// a denial, never dropped.
    fn of(settlement: &Settlement) -> Result<Verdict, String> {
        let enforce = &settlement.record.enforce;
        let input = match enforce.effective.get(ModifyTarget::Input.as_str()) {
            None => None,
            Some(Value::Object(input)) => Some(input.clone()),
            Some(_) => return Err("the effective tool input is not a JSON object".into()),
        };
        let context: Vec<String> = enforce
            .injections
            .iter()
            .map(|injection| injected_text(&injection.value))
            .collect::<Result<_, _>>()?;
        let (stop, continuation) = match &enforce.flow {
            None => (None, None),
            Some(flow) if flow.operation == FlowOperation::Stop => {
                (Some(flow.reason.clone()), None)
            }
            Some(flow) => (None, Some(flow.instructions.clone())),
        };
        let messages = settlement.record.messages.clone();
        let (reason, stop) = match joined(&messages, &context) {
            // A denial's block (or stop) carries one text, and its accepted messages and
            // injected context are there to tell the user and the model about it: they
            // follow its reason, and a flow stop's own.
            Some(text) if settlement.decision == Decision::Deny => {
                let told = |reason: &str| format!("{reason}\n\n{text}");
                let reason = shown(settlement.reason.as_deref()).unwrap_or(BLANK_BACKEND_REASON);
                let stop = stop.map(|own: Option<String>| shown(own.as_deref()).map(told));
                (Some(told(reason)), stop)
            }
            _ => (settlement.reason.clone(), stop),
        };
        Ok(Verdict {
            decision: settlement.decision,
            reason,
            messages,
            context,
            input,
            stop,
            continuation,
        })
    }

    /// The verdict after a failure at `spec`'s event: the adapter's denial, except at an
    /// event that is only observed. Nothing is decided there: observation fails open and
    /// a failure never changes the settled decision (failure semantics), so the harness
    /// gets its neutral answer — an exit 2 there is no denial but, say at Cursor's
    /// `stop`, an agent kept working.
    fn after_failure(spec: Option<&EventSpec>) -> Verdict {
        match spec {
            Some(spec) if spec.capability().is_none() => Verdict::no_objection(),
            _ => Verdict::failed(),
        }
    }

    /// The adapter's own denial after a failure.
    fn failed() -> Verdict {
        Verdict {
            decision: Decision::Deny,
            reason: Some(generic_reason().to_string()),
            ..Verdict::no_objection()
        }
    }

    fn no_objection() -> Verdict {
        Verdict {
            decision: Decision::Allow,
            reason: None,
            messages: Vec::new(),
            context: Vec::new(),
            input: None,
            stop: None,
            continuation: None,
        }
    }

    /// The reason to show; a backend's blank one is [`BLANK_BACKEND_REASON`].
    fn reason(&self) -> &str {
        shown(self.reason.as_deref()).unwrap_or(BLANK_BACKEND_REASON)
    }

    /// The reason of a settled `flow` stop, the denial's when the backend gave none to
    /// show.
    fn stop_reason(&self) -> Option<&str> {
        let reason = self.stop.as_ref()?;
        Some(shown(reason.as_deref()).unwrap_or(self.reason()))
    }

    /// What the agent is told to go on with after a settled `continue`: the backends'
    /// instructions, one per line, else a generic one ([`CONTINUE_REASON`]).
    fn continue_text(&self) -> Option<String> {
        let instructions = self.continuation.as_ref()?;
        let shown: Vec<&str> = instructions
            .iter()
            .map(String::as_str)
            .filter(|text| !is_blank(text))
            .collect();
        Some(match shown.is_empty() {
            true => CONTINUE_REASON.to_owned(),
            false => shown.join("\n"),
        })
    }

    /// The reason to show with an ask.
    fn ask_reason(&self) -> &str {
        shown(self.reason.as_deref()).unwrap_or(ASK_REASON)
    }

    /// The messages and then the injected context as one text, `None` when there is
    /// neither: the harnesses' one context field carries both.
    fn context_text(&self) -> Option<String> {
        joined(&self.messages, &self.context)
    }
}

/// `messages` and then `context`, one per line; `None` when there is neither.
fn joined(messages: &[String], context: &[String]) -> Option<String> {
    let all: Vec<&str> = messages.iter().chain(context).map(String::as_str).collect();
    (!all.is_empty()).then(|| all.join("\n"))
}

/// The text of one injection's canonical messages (`[{id, role, parts: [{kind: "text",
/// text}]}]`), parts joined by newlines; any other part cannot go into a harness's
/// context text.
fn injected_text(messages: &Value) -> Result<String, String> {
    let unwritable = || "an accepted inject carries content other than text parts".to_string();
    let mut texts = Vec::new();
    for message in messages.as_array().ok_or_else(unwritable)? {
        let parts = message.get("parts").and_then(Value::as_array);
        for part in parts.ok_or_else(unwritable)? {
            match (part.get("kind").and_then(Value::as_str), part.get("text")) {
                (Some("text"), Some(Value::String(text))) => texts.push(text.as_str()),
                _ => return Err(unwritable()),
            }
        }
    }
    Ok(texts.join("\n"))
}

/// One answer to the harness: stdout, lines for stderr, the exit code.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    /// Written to stdout as is (empty: nothing).
    pub stdout: String,
    /// Written to stderr, one line each.
    pub stderr: Vec<String>,
    /// The process exit code.
    pub exit: u8,
}

impl Answer {
    /// Exit 0 with nothing on stdout: the harness goes on under its own permissions.
    fn silent() -> Answer {
        Answer {
            stdout: String::new(),
            stderr: Vec::new(),
            exit: 0,
        }
    }

    /// Exit 0 with one JSON object on stdout.
    fn json(value: Value) -> Answer {
        Answer {
            stdout: format!("{value}\n"),
            stderr: Vec::new(),
            exit: 0,
        }
    }

    /// A JSON denial that also blocks by exit code: `value` on stdout, for a harness that
    /// reads it, and exit 2 with `reason` on stderr, for one that reads only that (a
    /// harness running another's hooks: Copilot CLI and Cursor run Claude Code's, and
    /// may not read its JSON; one whose stdout a shell's startup files wrote into first).
    /// Claude Code ignores stdout on exit 2 and shows the reason.
    fn json_and_blocked(value: Value, reason: &str) -> Answer {
        Answer {
            stderr: vec![reason.to_string()],
            exit: 2,
            ..Answer::json(value)
        }
    }

    /// Exit 2 with the reason on stderr: the block every harness honours at every event
    /// that can be blocked ([`exit_code_answer`]).
    fn blocked(reason: &str) -> Answer {
        Answer {
            stdout: String::new(),
            stderr: vec![reason.to_string()],
            exit: 2,
        }
    }

    /// Writes the answer and returns its exit code. An answer stdout cannot take (a
    /// closed pipe, a full disk) is lost, and the harness would read the silence as no
    /// objection: then `unwritten`, whose stdout is empty, is given instead — unless the
    /// answer blocks by exit code already, which needs no stdout and keeps its reason.
    ///
    /// stderr holds the answer's own lines and nothing else: a harness shows it to the
    /// model on exit 2, and the model should see the generic reason only — no network
    /// details or stack traces (failure semantics). `detail` (what went wrong) is for the
    /// operator: it goes to the log (`AHP_LOG_FILE`). stderr is best effort: one that
    /// cannot be written must not become a panic.
    fn write(self, unwritten: Answer, detail: Option<String>) -> i32 {
        let mut out = std::io::stdout().lock();
        let answer = match out
            .write_all(self.stdout.as_bytes())
            .and_then(|()| out.flush())
        {
            Ok(()) => self,
            Err(e) => {
                tracing::error!("write the answer to stdout: {e}");
                if self.exit == 2 {
                    self
                } else {
                    unwritten
                }
            }
        };
        if let Some(detail) = detail {
            tracing::error!("{detail}");
        }
        let mut err = std::io::stderr().lock();
        for line in &answer.stderr {
            let _ = writeln!(err, "{}", stderr_line(line));
        }
        i32::from(answer.exit)
    }
}

/// `text` as one line of stderr: a control character (a line break, an escape sequence's
/// ESC), a line or paragraph separator, or a bidirectional override or isolate becomes a
/// space. A backend's reason goes there verbatim otherwise, and a harness may show that
/// stream in the user's terminal, where an escape sequence would act and a bidirectional
/// control would make text read in an order other than its own.
fn stderr_line(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains(unprintable) {
        text.replace(unprintable, " ").into()
    } else {
        text.into()
    }
}

/// The answer of a process that failed around the call, before [`run`] read the payload
/// or after it could not answer (a command line that does not parse, the async runtime
/// did not start, a panic outside the call's task): the failure answered at the event of
/// the payload still on stdin (`read_unread`), else at the command line's `--event`
/// (`event`), else `harness`'s block for an unknown event — which at a stop would keep
/// the agent working forever. The detail goes to the log, the record to `audit`'s file
/// (none for a command line that does not parse: its `--audit` is not to be trusted).
/// Never a crash exit, which a harness reads as a failed hook and runs the tool.
pub fn answer_failure(
    harness: Harness,
    event: Option<&str>,
    detail: &str,
    audit: Option<&CallAudit>,
) -> ExitCode {
    let unread = read_unread(harness, event).or_at(harness, event);
    answer_failure_at(harness, unread, detail, audit)
}

/// [`answer_failure`] with stdin read already ([`read_unread`]).
pub(crate) fn answer_failure_at(
    harness: Harness,
    unread: Unread,
    detail: &str,
    audit: Option<&CallAudit>,
) -> ExitCode {
    let spec = match unread {
        Unread::Event(spec, identity) => {
            if let Some(audit) = audit {
                audit.identify(identity);
            }
            Some(spec)
        }
        Unread::Nothing | Unread::Unreadable | Unread::Unknown => None,
    };
    let failed = Failed::engine(detail.to_string());
    let code = answer(harness, spec, audited(audit, spec, Err(failed)));
    ExitCode::from(u8::try_from(code).unwrap_or(2))
}

/// How long a process that failed before reading its payload waits for it to learn the
/// event it answers. A harness writes the payload as it starts the hook, so it is in the
/// pipe already; one that never closes stdin delays the answer by this much. The
/// process's signal handling is not set up on these paths: a harness's SIGTERM in this
/// window ends it as a killed process — the block where `hook install` wrapped the hook
/// (where a hook decides), else a failed hook (harnesses signal at their own timeout,
/// which `hook install` sets seconds past the budget).
const UNREAD_PAYLOAD_WAIT: Duration = Duration::from_secs(2);

/// What was on stdin when a process that failed before reading its payload read it
/// ([`read_unread`]).
#[derive(Debug)]
pub(crate) enum Unread {
    /// Nothing: stdin was empty (or only whitespace) and closed.
    Nothing,
    /// A payload of this harness naming an event the adapter maps: that event, with
    /// what the payload says of the call, for the audit.
    Event(&'static EventSpec, EventRef),
    /// Nothing that could be read (yet), or not a JSON object.
    Unreadable,
    /// A JSON object naming no event the adapter maps: no event to answer at.
    Unknown,
}

impl Unread {
    /// This, or where nothing could be read as a payload, the command line's `event`
    /// (every installed hook names its own): the failure is answered there. A payload
    /// that names another event is answered as [`Harness::answered_at`] says.
    pub(crate) fn or_at(self, harness: Harness, event: Option<&str>) -> Unread {
        match (self, event.and_then(|name| harness.spec(name))) {
            (Unread::Nothing | Unread::Unreadable, Some(spec)) => {
                let known = EventRef {
                    event_type: Some(spec.ahp.as_str().to_string()),
                    ..EventRef::default()
                };
                Unread::Event(spec, known)
            }
            (unread, _) => unread,
        }
    }
}

/// Reads the payload on stdin now, bounded as [`read_payload`] is and in time by
/// [`UNREAD_PAYLOAD_WAIT`]. `event` is the command line's `--event`, for Copilot.
pub(crate) fn read_unread(harness: Harness, event: Option<&str>) -> Unread {
    // Stdin may never close: the process answers and exits past the read.
    let read = bounded("ahp-read-payload", UNREAD_PAYLOAD_WAIT, read_payload);
    let Ok(Ok(payload)) = read else {
        return Unread::Unreadable;
    };
    if payload.iter().all(u8::is_ascii_whitespace) {
        return Unread::Nothing;
    }
    let Ok(payload::Parsed {
        value: Value::Object(object),
        ..
    }) = payload::parse(&payload)
    else {
        return Unread::Unreadable;
    };
    let Some(spec) = harness.answered_at(&object, event) else {
        return Unread::Unknown;
    };
    Unread::Event(spec, payload::identity(harness.fields(), &object, spec))
}

/// `work`, a blocking step on the way to an answer (reading stdin that may never close,
/// writing to a file system that may hang), on a thread of its own and waited for
/// `bound` at most: it holds up the answer no longer, and the process exits from under
/// it. `Err` says why there is no result; a thread that cannot be made (the limit that
/// may have stopped the async runtime) is one, never a panic on the way to the answer.
pub(crate) fn bounded<T: Send + 'static>(
    name: &str,
    bound: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || done.send(work()))
        .map_err(|e| format!("start its thread: {e}"))?;
    result
        .recv_timeout(bound)
        .map_err(|_| format!("not done within {} ms", bound.as_millis()))
}

/// A call that ended without a verdict: answered as [`Verdict::after_failure`].
struct Failed {
    /// Who its audit record says settled it: `interrupted` (a signal), `budget-expired`
    /// (the watchdog), else `engine-failure`.
    decided_by: DecidedBy,
    /// What went wrong, for the log.
    detail: String,
}

impl Failed {
    /// A failure of the call itself: `engine-failure`.
    fn engine(detail: String) -> Failed {
        Failed::by(DecidedBy::EngineFailure, detail)
    }

    /// The call's task panicked: `engine-failure`.
    fn panicked(join: tokio::task::JoinError) -> Failed {
        Failed::engine(format!("the hook call failed: {join}"))
    }

    fn by(decided_by: DecidedBy, detail: impl Into<String>) -> Failed {
        Failed {
            decided_by,
            detail: detail.into(),
        }
    }
}

/// `outcome` with its failure's detail alone, once a failure answered as a denial at the
/// event `spec` (`None`: not known) has its record in `audit` (see [`CallAudit`];
/// none when the call's record is written already, one under way is waited for): the
/// record is written before the answer, as a settlement's is, and whatever happens to it
/// the answer stays as it was.
fn audited(
    audit: Option<&CallAudit>,
    spec: Option<&EventSpec>,
    outcome: Result<Verdict, Failed>,
) -> Result<Verdict, String> {
    outcome.map_err(|failed| {
        let answered = Verdict::after_failure(spec);
        if let Some(audit) = audit.filter(|_| answered.decision == Decision::Deny) {
            audit.record(failed.decided_by, answered.reason());
        }
        failed.detail
    })
}

/// Writes `harness`'s answer to the call's `outcome` at the event `spec` (`None`: not
/// known), a failure as [`Verdict::after_failure`] there; returns the exit code.
fn answer(harness: Harness, spec: Option<&EventSpec>, outcome: Result<Verdict, String>) -> i32 {
    let (verdict, detail) = match outcome {
        Ok(verdict) => (verdict, None),
        Err(detail) => (Verdict::after_failure(spec), Some(detail)),
    };
    let answer = formatted(harness, spec, &verdict);
    answer.write(unwritten(spec, &verdict), detail)
}

/// One `ahp hook HARNESS` invocation.
pub struct Request {
    /// Whose payload and answer format.
    pub harness: Harness,
    /// The registration JSON file.
    pub registration: PathBuf,
    /// The native event name, for harnesses whose payload names none (Copilot).
    pub event: Option<String>,
    /// The whole process's budget, from start to answer.
    pub budget: Duration,
    /// The `source` URI of the events; by default a stable URN of this installation.
    pub source: Option<String>,
    /// The `session` fields left out of every event.
    pub omit_session: Vec<SessionField>,
    /// Builds the host options, or says why it could not (answered as a denial). Run
    /// inside the budget: it may pull the component from a registry.
    pub options: crate::BoxFuture<'static, Result<Options, String>>,
    /// The call's audit record, in `--audit`: the interceptor is built without an
    /// `audit_path` (the options' is ignored), and the hook writes the record itself.
    pub audit: Arc<CallAudit>,
}

/// Runs one hook call and answers the harness; see the module documentation.
pub async fn run(request: Request) -> ExitCode {
    // First of all, before stdin is read or the interceptor built: from here on SIGINT,
    // SIGTERM, SIGHUP or SIGQUIT is the harness's block, no longer the end of the process,
    // which the harness would read as a crashed hook and fail open.
    let signals = crate::cli::Signals::listen();
    let deadline = Instant::now() + request.budget;
    let harness = request.harness;
    let audit = Arc::clone(&request.audit);
    // The payload's event once it is known: whatever ends the call after that (the
    // watchdog, a signal, a panic), the answer is that event's, not one for an unknown
    // event — exit 2 would keep the agent working at a stop. `None` once a payload names
    // no event the adapter can answer at.
    let mapped = Arc::new(OnceLock::new());
    // Until then, or for a payload that cannot be read, the command line's event (every
    // installed hook names its own).
    let flagged = request.event.as_deref().and_then(|name| harness.spec(name));
    // In a task of its own, so a panic anywhere in the call (the payload, the
    // interceptor, the watchdog) is an error answered below, never a crash.
    let outcome = tokio::spawn(settle(
        request,
        deadline,
        signals,
        Arc::clone(&mapped),
        flagged,
    ))
    .await
    .unwrap_or_else(|join| Err(Failed::panicked(join)));
    let spec = mapped.get().copied().unwrap_or(flagged);
    let outcome = audited(Some(&audit), spec, outcome);
    // Exit at once: a harness that never closes stdin leaves the blocking read behind,
    // and the runtime would wait for it forever on the way out.
    std::process::exit(answer(harness, spec, outcome))
}

/// Reads the payload and decides, bounded by `deadline` and its watchdog's grace; the
/// first of `signals` interrupts the call. The payload's event goes into `mapped` as
/// soon as it is known; `flagged` is the command line's. The watchdog or a signal
/// answers a failure, unless the settlement's record was chosen first: then the
/// settlement is answered, as the record says, once its append is done.
async fn settle(
    request: Request,
    deadline: Instant,
    mut signals: crate::cli::Signals,
    mapped: Arc<OnceLock<Option<&'static EventSpec>>>,
    flagged: Option<&'static EventSpec>,
) -> Result<Verdict, Failed> {
    let interrupt = Interrupt::new();
    let signalled = interrupt.clone();
    let (audit, known) = (Arc::clone(&request.audit), Arc::clone(&mapped));
    let mut flow = tokio::spawn(async move {
        let payload = tokio::task::spawn_blocking(read_payload)
            .await
            .map_err(|e| e.to_string())
            .and_then(|read| read)?;
        decide(request, &payload, deadline, &signalled, &mapped).await
    });
    let watchdog = deadline + WATCHDOG_GRACE;
    let joined = tokio::select! {
        joined = tokio::time::timeout_at(watchdog.into(), &mut flow) => joined,
        () = signals.recv() => {
            interrupt.interrupt();
            // In the log as the interruption takes hold (a harness's own timeout, often).
            tracing::warn!("{INTERRUPTED}: the call is answered as interrupted");
            let bound = watchdog.min(Instant::now() + SIGNAL_GRACE);
            tokio::time::timeout_at(bound.into(), &mut flow).await
        }
    };
    let failed = match joined {
        Ok(done) => return finished(done),
        Err(_) if interrupt.is_set() => Failed::by(DecidedBy::Interrupted, INTERRUPTED),
        Err(_) => Failed::by(
            DecidedBy::BudgetExpired,
            "the hook call ran past its budget",
        ),
    };
    // A settlement whose record was chosen before this failure (being written, or
    // written) is the answer, as its record says: the call only has the append left to
    // finish, given the grace a failure's own record would have held up the answer for.
    let answered = Verdict::after_failure(known.get().copied().unwrap_or(flagged));
    let failure_answers = answered.decision != Decision::Deny
        || audit.answer_failure(failed.decided_by, answered.reason());
    if !failure_answers {
        match tokio::time::timeout(WRITE_GRACE, &mut flow).await {
            Ok(done) => return finished(done),
            Err(_) => tracing::error!(
                "the settlement's audit record was not written in time: the call is answered as a failure its record does not say"
            ),
        }
    }
    Err(failed)
}

/// The outcome of the call's flow, which ended (`Err`: it panicked).
fn finished(
    done: Result<Result<Verdict, String>, tokio::task::JoinError>,
) -> Result<Verdict, Failed> {
    match done {
        Ok(decided) => decided.map_err(Failed::engine),
        Err(join) => Err(Failed::panicked(join)),
    }
}

/// The answer when `verdict`'s cannot be written to stdout. No objection loses nothing:
/// silence says the same. Anything else becomes the adapter's denial by exit code,
/// which needs no stdout — and which before a stop is no answer, as it would keep the
/// agent working.
fn unwritten(spec: Option<&EventSpec>, verdict: &Verdict) -> Answer {
    match spec {
        _ if *verdict == Verdict::no_objection() => Answer::silent(),
        Some(spec) => exit_code_answer(spec, &Verdict::failed()),
        None => Answer::blocked(generic_reason()),
    }
}

/// The payload on stdin; see [`read_bounded`].
fn read_payload() -> Result<Vec<u8>, String> {
    read_bounded(std::io::stdin().lock(), "the payload on stdin")
}

/// All of `input`, up to [`MAX_PAYLOAD_BYTES`]: a payload, an event or a registration is
/// one small JSON document, and reading on without a bound (`/dev/zero`) would end only
/// when memory does; one cut off at the bound would be misreported as broken JSON.
/// Errors start with `what`.
pub(crate) fn read_bounded(input: impl Read, what: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    input
        .take(MAX_PAYLOAD_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{what}: {e}"))?;
    if bytes.len() as u64 > MAX_PAYLOAD_BYTES {
        return Err(format!(
            "{what}: larger than {} MiB",
            MAX_PAYLOAD_BYTES >> 20
        ));
    }
    Ok(bytes)
}

/// `verdict` in the harness's format. If formatting it panics, the answer after a
/// failure in the harness's format ([`Verdict::after_failure`]: the adapter's denial —
/// at a stop the agent stopped, at Codex's session start and compaction, where a failed
/// hook goes on, the same — and no objection at an observed event), and if that panics
/// too, by exit code ([`exit_code_answer`]: none before a stop). For an unknown event,
/// exit 2: every harness honours it as a block there.
fn formatted(harness: Harness, spec: Option<&EventSpec>, verdict: &Verdict) -> Answer {
    let Some(spec) = spec else {
        return harness_deny_everywhere(harness, verdict);
    };
    let answer = |verdict: &Verdict| std::panic::catch_unwind(|| harness.answer(spec, verdict));
    let failed = Verdict::after_failure(Some(spec));
    answer(verdict)
        .or_else(|_| answer(&failed))
        .unwrap_or_else(|_| exit_code_answer(spec, &failed))
}

/// The denial for a payload whose event is unknown: exit 2 with the reason, which every
/// harness reads as a block on every event (Claude Code then ignores stdout) — but
/// Copilot, which decides only before a tool, where its JSON denial on exit 0 is the one
/// every version of it reads (see `copilot`).
fn harness_deny_everywhere(harness: Harness, verdict: &Verdict) -> Answer {
    match harness {
        Harness::Copilot => copilot::tool_answer(verdict),
        _ => Answer::blocked(verdict.reason()),
    }
}

/// Maps the payload (its event into `mapped`, as soon as it is known), asks the
/// interceptor and returns its verdict; `interrupt` (a signal) ends the call as
/// interrupted.
async fn decide(
    request: Request,
    payload: &[u8],
    deadline: Instant,
    interrupt: &Interrupt,
    mapped: &OnceLock<Option<&'static EventSpec>>,
) -> Result<Verdict, String> {
    let (object, inexact) = match payload::parse(payload) {
        Ok(payload::Parsed {
            value: Value::Object(object),
            inexact,
        }) => (object, inexact),
        Ok(_) => return Err("the payload is not a JSON object".into()),
        Err(e) => return Err(format!("the payload {e}")),
    };
    let harness = request.harness;
    let flag = request.event.as_deref();
    // A payload read decides the event it is answered at ([`Harness::answered_at`]): its
    // own, or for one the adapter does not map none (the block for an unknown event) but
    // in a hook installed at a stop. One the command line contradicts fails the call,
    // answered there, its record naming the payload's identity.
    let found = harness.answered_at(&object, flag);
    let _ = mapped.set(found);
    let audit = &request.audit;
    if let Some(spec) = found {
        audit.identify(payload::identity(harness.fields(), &object, spec));
    }
    // Refused once the answer's event and the record's identity are known.
    if let Some(inexact) = inexact {
        return Err(format!("the payload {inexact}"));
    }
    let name = harness.event_name(&object, flag)?;
    let spec =
        found.ok_or_else(|| format!("{} has no mapped hook event {name}", harness.name()))?;
    let mut read = payload::read(harness.fields(), &object, spec)
        .map_err(|e| format!("not a {} {name} payload: {e}", harness.name()))?;
    read.leave_out(&request.omit_session);
    let source = match &request.source {
        Some(source) => source.clone(),
        None => event::installation_source(harness, &request.registration),
    };
    let built = event::build(harness, spec, &read, &source, object);
    let event = built.to_string();
    audit.identify(EventRef::of(&built));
    let registration = crate::cli::read_file("--registration", &request.registration)?;
    let mut options = request.options.await?;
    options.declaration = harness.declaration_for(Some((spec, &read)));
    // The call's one record is written here (`audit`), as the harness is answered.
    options.audit_path = None;
    let interceptor = Interceptor::new(&registration, options)
        .await
        .map_err(|e| e.to_string())?;
    let not_ready = match audit.ready() {
        Ok(true) => None,
        // The watchdog or a signal answered (and recorded) the call meanwhile.
        Ok(false) => Some("the call was answered before its interceptor was ready".into()),
        // The adapter's own denial, with the interceptor there to observe it through.
        Err(e) => {
            if spec.ahp == AhpEvent::ToolBefore && !interrupt.is_set() {
                observe_denial(&interceptor, &built, false, deadline, interrupt).await;
            }
            Some(e)
        }
    };
    if let Some(why) = not_ready {
        interceptor.shutdown_async().await;
        return Err(why);
    }
    let remaining = deadline.saturating_duration_since(Instant::now());
    let (verdict, record) = if spec.capability().is_some() {
        let settled = interceptor
            .intercept_with(
                &event,
                &spec.advertised_at(&read),
                Some(remaining),
                interrupt,
            )
            .await;
        let settlement = match &settled {
            Ok(settled) => Ok(settled),
            Err(e) => e.shutdown_settlement().ok_or(e),
        };
        let decided_by = settlement.as_ref().ok().map(|settled| settled.decided_by);
        // An event the component refuses has no settlement: its record is the adapter's
        // denial, written as the failure is answered (`audited`).
        let (verdict, record) = match settlement {
            Ok(settled) => {
                let (verdict, record) = answered(settled);
                (verdict, Some(record))
            }
            Err(e) => (Err(e.to_string()), None),
        };
        let interrupted = interrupt.is_set()
            || matches!(
                decided_by,
                Some(DecidedBy::Interrupted | DecidedBy::Shutdown)
            );
        let denied = verdict
            .as_ref()
            .map_or(true, |v| v.decision == Decision::Deny);
        if spec.ahp == AhpEvent::ToolBefore && denied && !interrupted {
            // An accepted modification of the input, which the denial does not hand on.
            let modified = (record.iter().flat_map(|record| &record.interceptors))
                .any(|entry| entry.effects.contains(&EffectKind::Modify));
            observe_denial(&interceptor, &built, modified, deadline, interrupt).await;
        }
        (verdict, record)
    } else {
        // The harness enforces nothing here: the event is only observed. A signal drops
        // the deliveries (their stdio children are killed, reaped below).
        let observed = tokio::select! {
            observed = interceptor.observe(&event, Some(remaining)) => observed,
            () = interrupt.wait() => {
                interceptor.shutdown_async().await;
                return Err(INTERRUPTED.into());
            }
        };
        let verdict = match observed {
            Ok(observed) if observed.engine_failure => {
                Err("the component failed preparing the notifications".into())
            }
            Ok(_) => Ok(Verdict::no_objection()),
            Err(e) => Err(e.to_string()),
        };
        // Nothing is decided: no record.
        (verdict, None)
    };
    // A persistent observer reads what it was sent last; a signal kills it at once.
    interceptor.shutdown_draining(interrupt).await;
    // Last, so that what the record says is what the answer will be: the watchdog or a
    // signal answering before it has their record instead, and a signal by the time it
    // is written overrides what was settled unless it denies.
    if let Some(record) = record {
        let answered = Verdict::after_failure(Some(spec));
        if audit.settled(record, interrupt, answered.reason()).await == Recorded::Overridden {
            return Err(INTERRUPTED.into());
        }
    }
    verdict
}

/// The verdict of `settled` and the record of what the harness is answered: the
/// settlement's own, or, for an accepted effect the adapter cannot write (answered as its
/// own denial, see [`Verdict::of`]), that denial — `engine-failure` with the reason
/// shown, the interceptors as they ended, and nothing applied: no messages, no effects to
/// enforce. The detail goes to the log with the answer.
fn answered(settled: &Settlement) -> (Result<Verdict, String>, Record) {
    let verdict = Verdict::of(settled);
    let mut record = settled.record.clone();
    if verdict.is_err() {
        let denied = Verdict::failed();
        record.decision = denied.decision;
        record.decided_by = DecidedBy::EngineFailure;
        record.reason = denied.reason;
        record.messages.clear();
        record.enforce = Enforce::default();
    }
    (verdict, record)
}

/// Observes the denial of the tool call `before` (its `tool.before`) as the call's
/// `tool.after` with `outcome: "denied"`, skipped by policy ([`event::denied_after`];
/// conformance O2): the harness never runs a denied tool, so it never sends the post-tool
/// hook that would report it. Sent through the interceptor's `observe` to the observe
/// subscriptions that select `tool.after` (none: nothing is sent), bounded by what is left
/// of the budget and each observer's timeout, after the answer is decided; it never
/// changes the answer, and a failure (a panic too) is logged. `observe` writes no audit
/// record, nor does this: the denial's record is the `tool.before`'s settlement.
///
/// A denial is every `deny` the hook answers with at a `tool.before` once the interceptor
/// exists, which the harness enforces by not running the tool: a backend's deny, a
/// fail-closed synthetic one, a budget that ran out (with no budget left nothing is sent),
/// a settlement the component could not finish (`engine-failure`), and the adapter's own
/// denial of a settlement it cannot write or a call the interceptor refused. Not an `ask`
/// (the user may still run the tool) nor no objection; not an interrupted call (a signal,
/// a shutdown), since interruption starts no new observation; and not a failure before the
/// interceptor exists, which has nothing to observe through.
async fn observe_denial(
    interceptor: &Interceptor,
    before: &Value,
    modified: bool,
    deadline: Instant,
    interrupt: &Interrupt,
) {
    let remaining = deadline.saturating_duration_since(Instant::now());
    if remaining.is_zero() {
        tracing::warn!("no budget left to observe the denial as tool.after");
        return;
    }
    let after = event::denied_after(before, modified).to_string();
    let observing = interceptor.clone();
    // A task of its own: a panic there is logged, never the call's failure.
    let mut task = tokio::spawn(async move { observing.observe(&after, Some(remaining)).await });
    let joined = tokio::select! {
        joined = tokio::time::timeout_at(deadline.into(), &mut task) => joined,
        () = interrupt.wait() => {
            task.abort();
            tracing::warn!("interrupted: the denial is not observed as tool.after");
            return;
        }
    };
    let failure = match joined {
        Err(_) => {
            task.abort();
            "it ran past the budget".to_string()
        }
        Ok(Err(join)) => join.to_string(),
        Ok(Ok(Err(e))) => e.to_string(),
        Ok(Ok(Ok(observed))) if observed.engine_failure => {
            "the component failed preparing the notifications".to_string()
        }
        Ok(Ok(Ok(observed))) if observed.budget_expired => "no budget was left".to_string(),
        Ok(Ok(Ok(observed))) => {
            tracing::debug!(
                observers = observed.observers.len(),
                "the denial observed as tool.after"
            );
            return;
        }
    };
    tracing::error!("observe the denial as tool.after: {failure}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Flow;
    use serde_json::json;

    #[test]
    fn advertised_effects_are_enforced_decodable_and_never_a_grant() {
        for harness in Harness::ALL {
            for spec in harness.events() {
                let advertised = spec.advertised();
                if spec.ahp == AhpEvent::ToolBefore {
                    assert!(advertised.contains(&EffectKind::Deny), "{spec:?}");
                }
                assert!(!advertised.contains(&EffectKind::Allow), "{spec:?}");
                if spec.ahp != AhpEvent::ToolBefore {
                    assert!(!advertised.contains(&EffectKind::Modify), "{spec:?}");
                }
                assert!(!advertised.contains(&EffectKind::Return), "{spec:?}");
                assert!(
                    advertised.iter().all(|k| spec.enforces.contains(k)),
                    "{spec:?}"
                );
            }
        }
    }

    /// `value`, a JSON object, as a payload.
    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("a JSON object")
    }

    /// The entries of `harness`'s declaration for a call at `native` with `payload`, or
    /// of its declaration for every call.
    fn declared(harness: Harness, call: Option<(&str, &Payload)>) -> Vec<EventCapability> {
        let call = call.map(|(native, payload)| (harness.spec(native).expect("mapped"), payload));
        match harness.declaration_for(call) {
            Declaration::Exactly(entries) => entries,
            other => panic!("an exact declaration, not {other:?}"),
        }
    }

    /// The stops where the harness goes on when told, and the word of its block there.
    const CONTINUING_STOPS: [(Harness, &str, &str); 5] = [
        (Harness::ClaudeCode, "Stop", "block"),
        (Harness::ClaudeCode, "SubagentStop", "block"),
        (Harness::Codex, "Stop", "block"),
        (Harness::Codex, "SubagentStop", "block"),
        (Harness::Gemini, "AfterAgent", "deny"),
    ];

    #[test]
    fn a_mistyped_event_name_is_named_as_it_was_sent() {
        let payload = |key: &str| object(json!({key: 5}));
        let named = |harness: Harness, key| harness.event_name(&payload(key), None).unwrap_err();
        assert_eq!(
            named(Harness::Copilot, "hookEventName"),
            "hookEventName must be a string"
        );
        assert_eq!(
            named(Harness::Copilot, "hook_event_name"),
            "hook_event_name must be a string"
        );
        assert_eq!(
            named(Harness::Codex, "hook_event_name"),
            "hook_event_name must be a string"
        );
    }

    #[test]
    fn harness_names_round_trip() {
        for harness in Harness::ALL {
            assert_eq!(Harness::parse(harness.name()), Some(harness));
        }
        assert_eq!(Harness::parse("claude"), None);
    }

    #[test]
    fn a_deny_without_a_better_word_is_exit_2_with_the_reason() {
        let after = Harness::Cursor.spec("postToolUse").expect("mapped");
        let answer = exit_code_answer(after, &Verdict::failed());
        assert_eq!(answer.exit, 2);
        assert_eq!(answer.stderr, vec![generic_reason().to_string()]);
        assert_eq!(
            exit_code_answer(after, &Verdict::no_objection()),
            Answer::silent()
        );
    }

    /// Two native events on one AHP event (a stop, a subagent's stop; after a tool call,
    /// after a failed one) are alike in all but their names and whether they follow a
    /// failed call, and the declaration names each AHP event once: for a call at either,
    /// with what its payload allows.
    #[test]
    fn a_stop_and_a_subagent_s_stop_are_one_event_in_the_declaration() {
        for harness in Harness::ALL {
            for (i, spec) in harness.events().iter().enumerate() {
                for earlier in harness.events()[..i].iter().filter(|e| e.ahp == spec.ahp) {
                    let renamed = EventSpec {
                        native: spec.native,
                        after_failed_call: spec.after_failed_call,
                        ..*earlier
                    };
                    assert_eq!(&renamed, spec, "{harness:?}");
                }
            }
        }
        let fresh = Payload {
            continued: Some(false),
            ..Payload::default()
        };
        for (harness, native, _) in CONTINUING_STOPS {
            let entries = declared(harness, Some((native, &fresh)));
            let stops: Vec<_> = entries
                .iter()
                .filter(|e| e.event.as_str() == "turn.finish.before")
                .collect();
            assert_eq!(stops.len(), 1, "{native}: {stops:?}");
            let flow = stops[0].flow.as_ref().expect("flow");
            assert!(
                flow.operations.contains(&FlowOperation::Continue),
                "{native}"
            );
        }
    }

    /// Exit 2 or a block before a stop would keep the agent working: a denial there
    /// stops it where the stop is intercepted, and is the observed stop's neutral answer
    /// elsewhere (Cursor's `{}`).
    #[test]
    fn no_denial_before_a_stop_keeps_the_agent_working() {
        for harness in Harness::ALL {
            for spec in harness.events() {
                if spec.ahp != AhpEvent::TurnFinishBefore {
                    continue;
                }
                let answer = harness.answer(spec, &Verdict::failed());
                match spec.capability() {
                    Some(_) => assert_eq!(answer, stop_answer(generic_reason()), "{harness:?}"),
                    None => assert_eq!(
                        answer,
                        harness.answer(spec, &Verdict::no_objection()),
                        "{harness:?}"
                    ),
                }
            }
        }
    }

    /// A payload whose own event the adapter does not map, in a hook installed at a stop
    /// (`--event Stop` copied to Claude Code's `Notification`), is answered at that stop;
    /// at any other installed event, at none (the block for an unknown event). A payload
    /// naming a mapped event is answered at its own, whatever the command line says.
    #[test]
    fn a_payload_is_answered_at_its_own_event_or_at_the_stop_it_was_installed_at() {
        let payload = |name: &str| object(json!({"hook_event_name": name}));
        let answered = |name: &str, flag: &str| {
            let at = Harness::ClaudeCode.answered_at(&payload(name), Some(flag));
            at.map(|spec| spec.native)
        };
        assert_eq!(answered("Notification", "Stop"), Some("Stop"));
        assert_eq!(answered("Notification", "PostToolUse"), None);
        assert_eq!(answered("SubagentStop", "Stop"), Some("SubagentStop"));
        assert_eq!(answered("PreToolUse", "PostToolUse"), Some("PreToolUse"));
        assert_eq!(answered("PreToolUse", "Stop"), Some("PreToolUse"));
        let mistyped = object(json!({"hook_event_name": 7}));
        let at = |flag| {
            Harness::ClaudeCode
                .answered_at(&mistyped, flag)
                .map(|s| s.native)
        };
        assert_eq!(at(Some("Stop")), Some("Stop"));
        assert_eq!((at(Some("PostToolUse")), at(None)), (None, None));
        let copilot = |payload: Value| {
            let at = Harness::Copilot.answered_at(&object(payload), Some("preToolUse"));
            at.map(|spec| spec.native)
        };
        assert_eq!(copilot(json!({"toolName": "bash"})), Some("preToolUse"));
        assert_eq!(
            copilot(json!({"hook_event_name": "PreToolUse"})),
            Some("preToolUse")
        );
    }

    /// A stop offers `continue` (with the harness's counts) only where the harness goes
    /// on when told and its payload says no stop hook has continued the turn yet; every
    /// other event, and the static declaration, as always.
    #[test]
    fn continue_is_offered_once_per_turn_where_the_harness_goes_on() {
        let flow_at = |harness: Harness, native: &str, continued: Option<bool>| {
            let ahp = harness.spec(native).expect("mapped").ahp;
            let payload = Payload {
                continued,
                ..Payload::default()
            };
            let entries = declared(harness, Some((native, &payload)));
            let entry = entries
                .into_iter()
                .find(|e| e.event.as_str() == ahp.as_str());
            entry.and_then(|e| e.flow)
        };
        for (harness, stop, _) in CONTINUING_STOPS {
            let fresh = flow_at(harness, stop, Some(false)).expect("flow at the stop");
            assert_eq!(
                (
                    fresh.operations,
                    fresh.remaining_continuations,
                    fresh.continuation_count
                ),
                (
                    vec![FlowOperation::Stop, FlowOperation::Continue],
                    Some(1),
                    Some(0)
                ),
                "{harness:?}"
            );
            for continued in [Some(true), None] {
                let flow = flow_at(harness, stop, continued).expect("flow at the stop");
                assert_eq!(flow.operations, [FlowOperation::Stop], "{harness:?}");
                assert_eq!(flow.remaining_continuations, None, "{harness:?}");
            }
        }
        // Cursor's and Copilot's stops are observed: no flow at all.
        assert_eq!(flow_at(Harness::Cursor, "stop", Some(false)), None);
        // Elsewhere a payload that says so changes nothing.
        let after = flow_at(Harness::ClaudeCode, "PostToolUse", Some(false));
        assert_eq!(after.map(|f| f.operations), Some(vec![FlowOperation::Stop]));
        assert!(declared(Harness::Gemini, None)
            .iter()
            .filter_map(|e| e.flow.as_ref())
            .all(|f| f.operations == [FlowOperation::Stop]));
    }

    /// At a stop, a continue goes out as the harness's block with the instructions (or a
    /// generic one), a flow stop or a denial as `continue: false`, never as the block.
    #[test]
    fn a_continue_is_the_block_at_a_stop_and_a_denial_stops() {
        for (harness, stop, word) in CONTINUING_STOPS {
            let spec = harness.spec(stop).expect("mapped");
            let mut continued = Verdict::no_objection();
            continued.continuation = Some(vec!["run the tests".into(), "then stop".into()]);
            let answer = harness.answer(spec, &continued);
            let expected = json!({"decision": word, "reason": "run the tests\nthen stop"});
            assert_eq!(answer, Answer::json(expected), "{harness:?}");
            continued.continuation = Some(vec![" ".into()]);
            let answer = harness.answer(spec, &continued);
            let expected = json!({"decision": word, "reason": CONTINUE_REASON});
            assert_eq!(answer, Answer::json(expected), "{harness:?}");
            // A denial never goes on, whatever else the verdict carries.
            continued.decision = Decision::Deny;
            let answer = harness.answer(spec, &continued);
            let expected = json!({"continue": false, "stopReason": BLANK_BACKEND_REASON});
            assert_eq!(answer, Answer::json(expected), "{harness:?}");
            let mut stopped = Verdict::no_objection();
            stopped.stop = Some(Some("done".into()));
            let expected = json!({"continue": false, "stopReason": "done"});
            assert_eq!(harness.answer(spec, &stopped), Answer::json(expected));
            let expected = json!({"continue": false, "stopReason": generic_reason()});
            assert_eq!(
                harness.answer(spec, &Verdict::failed()),
                Answer::json(expected)
            );
            assert_eq!(
                harness.answer(spec, &Verdict::no_objection()),
                Answer::silent()
            );
        }
    }

    /// A blocking step that outlasts its bound holds the answer up for the bound alone,
    /// and says so; one within it gives its result.
    #[test]
    fn a_bounded_step_is_waited_for_its_bound_at_most() {
        let bound = Duration::from_millis(100);
        let started = Instant::now();
        let stuck = bounded("test-stuck", bound, || {
            std::thread::sleep(Duration::from_secs(5));
        });
        assert_eq!(stuck, Err("not done within 100 ms".to_string()));
        assert!(started.elapsed() < Duration::from_secs(5), "not waited out");
        assert_eq!(bounded("test-quick", bound, || 7), Ok(7));
    }

    #[test]
    fn every_harness_denies_before_a_tool_and_never_writes_allow() {
        for harness in Harness::ALL {
            let spec = &harness.events()[0];
            assert_eq!(spec.ahp, AhpEvent::ToolBefore, "{harness:?}");
            let denied = harness.answer(spec, &verdict(Decision::Deny, Some("because")));
            assert!(denied.stdout.contains("because"), "{harness:?}: {denied:?}");
            let silent = harness.answer(spec, &Verdict::no_objection());
            assert!(!silent.stdout.contains("allow"), "{harness:?}: {silent:?}");
        }
    }

    /// A reason that shows nothing (white space, or only characters stderr does not
    /// write: a bidirectional override, ESC) is shown as none: Codex trims the reason of
    /// a denial and takes a blank one for a failed hook, which runs the tool.
    #[test]
    fn a_blank_reason_is_never_what_a_harness_is_shown() {
        for harness in Harness::ALL {
            for spec in harness.events() {
                for (decision, reason) in
                    [Decision::Deny, Decision::Ask].into_iter().flat_map(|d| {
                        [
                            " \t\n",
                            "\u{feff}",
                            "\u{3000}\u{feff} ",
                            "\u{202e}",
                            "\u{2066}\u{2069}",
                            "\u{1b}",
                        ]
                        .map(|r| (d, r))
                    })
                {
                    let mut blank = verdict(decision, Some(reason));
                    let answer = harness.answer(spec, &blank);
                    blank.stop = Some(Some(" ".into()));
                    let stopped = harness.answer(spec, &blank);
                    for answer in [answer, stopped] {
                        let texts = shown_texts(&answer);
                        let context =
                            format!("{harness:?} {} {decision:?}: {answer:?}", spec.native);
                        // A denial where the harness takes one shows a reason: not silence,
                        // which it would read as no objection.
                        let denies = decision == Decision::Deny && spec.capability().is_some();
                        assert!(!denies || !texts.is_empty(), "{context}");
                        for text in texts {
                            assert!(!is_blank(&text), "{context}");
                        }
                        // As written: stderr's lines as a harness reads them.
                        for line in &answer.stderr {
                            assert!(!is_blank(&stderr_line(line)), "{context}");
                        }
                    }
                }
            }
        }
    }

    /// A backend's deny or flow stop with a blank reason is shown as the backend's
    /// decision, never as a generic reason: "Policy evaluation failed." would tell the
    /// user and the model that the interceptor failed, where the audit says
    /// `backend-deny`.
    #[test]
    fn a_backend_s_blank_reason_is_shown_as_the_backend_s_decision() {
        let generic: Vec<&str> = DecidedBy::ALL
            .iter()
            .filter_map(|by| by.generic_reason())
            .collect();
        let mut record = Record::host_denial(EventRef::default(), DecidedBy::BackendDeny, 1);
        record.reason = Some("  ".into());
        let denied = Settlement::of(record.clone());
        record.enforce.flow = Some(Flow {
            operation: FlowOperation::Stop,
            reason: Some("  ".into()),
            instructions: Vec::new(),
        });
        let stopped = Settlement::of(record);
        for settled in [denied, stopped] {
            let verdict = Verdict::of(&settled).expect("nothing to write back");
            for harness in Harness::ALL {
                for spec in harness.events().iter().filter(|s| s.capability().is_some()) {
                    let answer = harness.answer(spec, &verdict);
                    let texts = shown_texts(&answer);
                    let context = format!("{harness:?} {}: {answer:?}", spec.native);
                    assert!(
                        texts.iter().any(|t| t.contains(BLANK_BACKEND_REASON)),
                        "{context}"
                    );
                    assert!(
                        texts.iter().all(|t| !generic.contains(&t.as_str())),
                        "{context}"
                    );
                }
            }
        }
    }

    /// A denial's accepted messages and injected context are shown with its reason,
    /// wherever a harness is answered with a denial: its block has no other place for
    /// them, and the record lists them as what the harness was told.
    #[test]
    fn a_denial_shows_its_messages_and_context_after_its_reason() {
        let mut record = Record::host_denial(EventRef::default(), DecidedBy::BackendDeny, 1);
        record.reason = Some("not on main".into());
        record.messages = vec!["ask #secops for access".into()];
        record.enforce.injections = vec![crate::vocab::Injection {
            deliver_at: crate::vocab::DeliverAt::Now,
            value: json!([{"id": "m", "role": "system", "parts": [{"id": "p",
                "kind": "text", "mediaType": "text/plain", "selection": "body",
                "text": "the branch is protected"}]}]),
        }];
        let denied = Settlement::of(record.clone());
        let verdict = Verdict::of(&denied).expect("text to write");
        assert_eq!(
            verdict.reason(),
            "not on main\n\nask #secops for access\nthe branch is protected"
        );
        // A flow stop's own reason (the denial's, as the component settles one) is
        // followed by them too.
        record.reason = Some("enough for today".into());
        record.enforce.flow = Some(Flow {
            operation: FlowOperation::Stop,
            reason: Some("enough for today".into()),
            instructions: Vec::new(),
        });
        let stopped = Settlement::of(record);
        for (settled, reason) in [(denied, "not on main"), (stopped, "enough for today")] {
            let verdict = Verdict::of(&settled).expect("text to write");
            for harness in Harness::ALL {
                for spec in harness.events().iter().filter(|s| s.capability().is_some()) {
                    let texts = shown_texts(&harness.answer(spec, &verdict));
                    let context = format!("{harness:?} {}: {texts:?}", spec.native);
                    for said in [reason, "ask #secops", "the branch is protected"] {
                        assert!(texts.iter().any(|t| t.contains(said)), "{said}: {context}");
                    }
                }
            }
        }
        // Beside a decision that is no denial they stay in the context field alone.
        let mut noted = Record::host_denial(EventRef::default(), DecidedBy::NoObjection, 1);
        noted.decision = Decision::Allow;
        noted.reason = None;
        noted.messages = vec!["ask #secops for access".into()];
        let verdict = Verdict::of(&Settlement::of(noted)).expect("text to write");
        assert_eq!(verdict.reason, None);
    }

    /// A stderr line is one line, and no escape sequence reaches a terminal through it.
    #[test]
    fn a_stderr_line_holds_no_control_character() {
        let reason = "Denied:\r\nrm -rf \u{1b}[2Jgone\u{0}\u{85}\tend\u{2028}\u{202e}txt\u{2066}";
        assert_eq!(stderr_line(reason), "Denied:  rm -rf  [2Jgone  \tend  txt ");
        assert!(matches!(
            stderr_line("plain"),
            std::borrow::Cow::Borrowed("plain")
        ));
    }

    /// Every text an answer shows: its stderr lines and every string in its stdout JSON.
    fn shown_texts(answer: &Answer) -> Vec<String> {
        let stdout = (!answer.stdout.is_empty())
            .then(|| serde_json::from_str::<Value>(&answer.stdout).expect("JSON on stdout"));
        let shown = stdout.iter().flat_map(strings);
        answer.stderr.iter().cloned().chain(shown).collect()
    }

    /// Every string in `value`, at any depth.
    fn strings(value: &Value) -> Vec<String> {
        match value {
            Value::String(text) => vec![text.clone()],
            Value::Array(items) => items.iter().flat_map(strings).collect(),
            Value::Object(members) => members.values().flat_map(strings).collect(),
            _ => Vec::new(),
        }
    }

    /// A verdict as a settlement would give it.
    pub fn verdict(decision: Decision, reason: Option<&str>) -> Verdict {
        Verdict {
            decision,
            reason: reason.map(str::to_string),
            ..Verdict::no_objection()
        }
    }
}
