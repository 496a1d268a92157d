//! The serial intercept chain (digest §8, failure-semantics.md "Failure policy").
//!
//! Matching intercept subscriptions run one after another in registration order. Each
//! gets one absolute deadline, `min(start + timeoutMs, budget)`, that covers credential
//! acquisition, delivery, parsing and acceptance; nothing resets it. The first one's
//! start is the call's own, and each later one's is when the one before it ended: a wait
//! for a component instance counts against each deadline in turn, and a deadline that
//! wait used up fails with phase `queue`, nothing sent, ending its interceptor there.
//! An accepted deny or an accepted flow stop ends the chain as a deny; an operational
//! failure is settled by the subscription's own policy: fail-open records it and moves
//! on, fail-closed stops with a synthetic denial. An interrupted or out-of-budget call is
//! a denial, never permission. After a stop, the matching interceptors that were never
//! called get the event as a best-effort observe; a failure settled by policy is reported
//! to the other backends' `hook.failure` observers (`failure_report`).

use crate::content;
use crate::deadline::{elapsed_ms, Deadline};
use crate::effect::{self, Effect};
use crate::elicitation;
use crate::event::Event;
use crate::events::{self, Rules};
use crate::host_api::{AuthError, DeliveryError, Host, Instant};
use crate::observers::{Observers, Why};
use crate::registration::{Backend, Interceptor as Target, Registration};
use crate::response;
use crate::settlement::Settlement;
use crate::wire::{self, Message};
use ahp_vocab::{
    AttemptEntry, AttemptResult, DecidedBy, Decision, Detail, Enforce, EventCapability, EventRef,
    Failure, FailureClass, FailurePolicy, Flow, FlowOperation, Injection, InterceptableEvent,
    InterceptorEntry, ModifyOperation, ObserverKind, Outcome, Phase,
};
use serde_json::Value;
use std::borrow::Cow;
use std::mem::take;

/// One hook call's inputs, already validated.
pub struct Call<'a> {
    pub registration: &'a Registration,
    pub event: &'a Event,
    /// What the protocol allows for this event.
    pub rules: &'static Rules,
    /// What the embedding harness enforces for this event: its declaration narrowed by
    /// the call, sent as `params.capabilities`.
    pub capability: &'a EventCapability,
    /// The enclosing deadline of the whole hook call, if the host set one.
    pub budget: Option<Instant>,
    /// When the hook call began, before any wait for an instance (never later than now).
    pub started: Instant,
}

/// How one interceptor's evaluation ended.
enum Ending {
    Accepted(Vec<Effect>),
    Failed(Failure),
    Interrupted,
}

/// Why the chain stopped early.
struct Stop {
    decided_by: DecidedBy,
    reason: String,
}

impl Stop {
    /// A stop nobody explained: the generic reason of `decided_by`.
    fn synthetic(decided_by: DecidedBy) -> Stop {
        Stop {
            decided_by,
            reason: decided_by.generic_reason().unwrap_or_default().into(),
        }
    }
}

/// Runs the chain and settles the call.
///
/// The clock is read where a decision needs the time, and a reading serves every
/// decision made at that moment: each read is a call out of the component.
pub fn run<H: Host>(host: &mut H, call: &Call) -> Settlement {
    let called = host.now();
    // A start in the future would extend the first deadline: never later than now.
    let started = call.started.min(called);
    let targets: Vec<_> = call
        .registration
        .intercepts(&call.event.event_type)
        .collect();
    let mut records = Vec::with_capacity(targets.len());
    // Each failure settled by policy: its place in `records` and when it was settled, the
    // time its `hook.failure` report says.
    let mut settled_failures = Vec::new();
    let mut stop: Option<Stop> = None;
    let mut ask = false;
    let mut messages = Vec::new();
    let mut uncalled = Vec::new();
    // The accepted effective event: each later interceptor is sent this, encoded once.
    // Borrowed until a modification is accepted: most calls never copy the event.
    let mut effective = Cow::Borrowed(call.event);
    let mut enforce = Enforce::default();
    // When the wait for an instance ended the interceptor before, if it did: the next
    // one's clock starts there. The first one's started with the call.
    let mut queue_ended = Some(started);

    for (i, target) in targets.iter().enumerate() {
        if stop.is_none() {
            stop = admission_stop(host, call.budget);
        }
        if stop.is_some() {
            records.push(record(target, Outcome::NotReached, None, Vec::new(), None));
            uncalled.push(target);
            continue;
        }
        // The first interceptor's clock started with the call, each later one's when the
        // one before it ended: at that one's deadline if the wait for an instance used it
        // up. So the wait counts against every deadline in turn, and a call ends within
        // the sum of its interceptors' timeouts however long it waited.
        let now = if i == 0 { called } else { host.now() };
        let from = queue_ended.take().unwrap_or(now);
        let bound = Deadline::within(from, target.timeout_ms, call.budget);
        let (deadline, budget_binds) = (bound.at(), bound.budget_binds());
        let (ending, mut attempts, sha) = if now >= deadline {
            // The call's wait for an instance used the deadline up: nothing is sent.
            queue_ended = Some(deadline);
            let failure = Failure::new(FailureClass::DeadlineExceeded, Phase::Queue);
            (Ending::Failed(failure), Vec::new(), None)
        } else {
            // What this subscription is offered, as it is shown the effective event: sent,
            // and what its reply is checked against.
            let view = &target.subscription.view;
            let offered =
                events::offered_to(call.capability, call.rules, &effective, &view.content);
            let call = &Call {
                capability: &offered,
                ..*call
            };
            let message = wire::intercept(&effective, view, call.capability, |bytes| {
                host.sha256(bytes)
            });
            let (ending, attempts) = evaluate(host, target.backend, &message, now, deadline, call);
            (ending, attempts, Some(message.sha256().to_string()))
        };
        // Modifications are applied to a copy, or one alone to an effective event of the
        // call's own and taken back there if not accepted ([`modified_in_place`]): a
        // response whose merge does not fit is rejected whole, so nothing of it is
        // published. Applying them takes time (a large
        // event is parsed and copied): a reply whose changes are applied only past the
        // deadline came too late, as a reply complete only then does ("the timeout covers
        // atomic acceptance"), and the clock is read as they are applied, so a long reply
        // stops there — but for a denial or a stop that came in time, which stands
        // whenever its changes are applied (the operation does not run; a change beside
        // it is still the event's effective content, a redaction after a tool).
        // What an effect's value must be beside its own shape, where the event decides:
        // its attachments ones the backend was shown, and a supplied elicitation result
        // one its request can take.
        let fits = |effects: &[Effect]| {
            let content = effects
                .iter()
                .filter_map(|effect| effect::content_of(effect, call.rules.event));
            let view = &target.subscription.view.content;
            let answers = |effect: &Effect| match effect {
                Effect::Return { value }
                    if call.rules.event == InterceptableEvent::UserElicitationRequest =>
                {
                    elicitation::answers(&effective, value)
                }
                _ => true,
            };
            view.shows_attachments(content, &effective) && effects.iter().all(answers)
        };
        let ending = match ending {
            Ending::Accepted(effects) if !fits(&effects) => Ending::Failed(misfit()),
            Ending::Accepted(mut effects) => {
                let stopping = stops(&effects);
                let late = || !stopping && host.now() >= deadline;
                // Checking a reply's effects takes time too (its attachments looked up
                // among the event's, an answer against its request): one that is not
                // modified is accepted only if the deadline has not passed by then. A
                // reply of no effects took none since the last reading.
                // Whether a modification was applied, and changed the event.
                let applied =
                    match modified_in_place(&mut effective, call.rules, &mut effects, late) {
                        Some(applied) => applied,
                        None => {
                            modified(&effective, call.rules, &mut effects, late).map(|changed| {
                                changed.map(|event| {
                                    let changed = event != *effective;
                                    if changed {
                                        effective = Cow::Owned(event);
                                    }
                                    changed
                                })
                            })
                        }
                    };
                let accepted = applied.and_then(|applied| {
                    match applied.is_none() && !effects.is_empty() && late() {
                        true => Err(Unaccepted::Late),
                        false => Ok(applied),
                    }
                });
                match accepted {
                    Ok(applied) => {
                        // A later change to the operation invalidates an earlier result;
                        // a modification that leaves it as it was changes nothing. One
                        // beside a denial or a stop is kept as well: the reply is accepted
                        // whole, and after an operation (a tool's output) its change is the
                        // redaction the event's observers must be handed.
                        if applied == Some(true) {
                            enforce.returned = None;
                        }
                        Ending::Accepted(effects)
                    }
                    Err(Unaccepted::Late) => {
                        Ending::Failed(Failure::new(FailureClass::LateResponse, Phase::Accept))
                    }
                    Err(Unaccepted::Misfit) => Ending::Failed(misfit()),
                }
            }
            other => other,
        };
        // A reply then rejected at acceptance (a merge that does not fit, applied only past
        // the deadline) was no accepted attempt: its record says what it became.
        if let (Ending::Failed(failure), Some(last)) = (&ending, attempts.last_mut()) {
            if last.result == AttemptResult::Accepted {
                last.result = AttemptResult::Failed(failure.class);
            }
        }

        match ending {
            Ending::Accepted(effects) => {
                let mut outcome = Outcome::NoEffect;
                let mut deny_code = None;
                let mut kinds = Vec::new();
                for effect in effects {
                    if !kinds.contains(&effect.kind()) {
                        kinds.push(effect.kind());
                    }
                    match effect {
                        Effect::Deny { reason, code } => {
                            outcome = Outcome::Deny;
                            deny_code = code;
                            stop = Some(Stop {
                                decided_by: DecidedBy::BackendDeny,
                                reason,
                            });
                        }
                        Effect::Ask { .. } => {
                            ask = true;
                            outcome = Outcome::Ask;
                        }
                        Effect::Allow => outcome = Outcome::Allow,
                        Effect::Message { text } => messages.push(text),
                        Effect::Modify { .. } => {}
                        Effect::Return { value } => enforce.returned = Some(value),
                        Effect::Inject { deliver_at, value } => {
                            enforce.injections.push(Injection { deliver_at, value })
                        }
                        Effect::Flow { operation, text } => {
                            settle_flow(&mut enforce.flow, operation, text)
                        }
                    }
                }
                // An accepted stop ends decision-making and settles as the backend's
                // denial (its reason shown): a harness reading only the decision must
                // not proceed, on every event, whether or not the event has `deny`.
                // The audit keeps it apart from a deny: outcome `stop`, `flow` kept.
                if stop.is_none() {
                    if let Some(reason) = stopped(&enforce) {
                        outcome = Outcome::Stop;
                        stop = Some(Stop {
                            decided_by: DecidedBy::BackendDeny,
                            reason,
                        });
                    }
                }
                let mut entry = record(target, outcome, None, attempts, sha);
                entry.code = deny_code;
                entry.effects = kinds;
                records.push(entry);
            }
            Ending::Interrupted => {
                stop = Some(Stop::synthetic(DecidedBy::Interrupted));
                records.push(record(target, Outcome::Interrupted, None, attempts, sha));
            }
            // Expiry only once the deadline has passed: a timeout that a transport or
            // credential provider reports before then is its own, settled by policy.
            Ending::Failed(failure)
                if budget_binds && failure.is_deadline() && host.now() >= deadline =>
            {
                stop = Some(Stop::synthetic(DecidedBy::BudgetExpired));
                records.push(record(
                    target,
                    Outcome::BudgetExpired,
                    Some(failure),
                    attempts,
                    sha,
                ));
            }
            Ending::Failed(failure) => {
                let outcome = match target.policy {
                    FailurePolicy::FailOpen => Outcome::FailedOpen,
                    FailurePolicy::FailClosed => {
                        stop = Some(Stop::synthetic(DecidedBy::SyntheticDeny));
                        Outcome::FailedClosed
                    }
                };
                settled_failures.push((records.len(), host.now()));
                records.push(record(target, outcome, Some(failure), attempts, sha));
            }
        }
    }

    // An interrupted call is never permission, whether or not it had an interceptor to
    // ask (the host's wait for an instance settles it so too). An attempt the host
    // cancelled ended the chain as interrupted, whatever its flag says now.
    let cancelled = stop
        .as_ref()
        .is_some_and(|s| s.decided_by == DecidedBy::Interrupted);
    let mut interrupted = host.interrupted() || cancelled;
    let now = host.now();
    let expired = stop
        .as_ref()
        .is_some_and(|s| s.decided_by == DecidedBy::BudgetExpired);
    let mut observers = Observers::from(now, call.budget);
    // An interrupted or expired call starts no new best-effort observations. One whose
    // budget ran out only after its decision records each as withheld: no time is left
    // to prepare them, so none is encoded (`Observers::from`), as `observe` records them.
    if !interrupted && !expired {
        let short_circuited = stop.as_ref().is_some_and(|s| {
            matches!(
                s.decided_by,
                DecidedBy::BackendDeny | DecidedBy::SyntheticDeny
            )
        });
        let uncalled = uncalled.iter().filter(|_| short_circuited);
        let uncalled = uncalled.map(|t| (t.backend, t.subscription));
        let owned = call.registration.observers(&call.event.event_type);
        let notified = Why::kind(ObserverKind::ShortCircuit)
            .targets(uncalled)
            .chain(Why::kind(ObserverKind::Owned).targets(owned));
        observers.of_event(host, &effective, now, call.budget, notified);
        crate::failure_report::reports(
            host,
            call,
            started,
            now,
            &records,
            &settled_failures,
            &mut observers,
        );
        // Preparing them takes time (see `observers`): an interruption meanwhile still
        // comes before the decision is published, and they are not sent.
        if !observers.is_empty() && host.interrupted() {
            interrupted = true;
            observers = Observers::from(now, call.budget);
        }
    }
    // Interruption overrides an approval that was accepted but not yet published, and any
    // synthetic outcome; only an explicit deny already accepted stands as it is.
    if interrupted && !matches!(&stop, Some(s) if s.decided_by == DecidedBy::BackendDeny) {
        stop = Some(Stop::synthetic(DecidedBy::Interrupted));
    }
    let (decision, decided_by, reason) = match stop {
        Some(s) => (Decision::Deny, s.decided_by, Some(s.reason)),
        None if ask => (Decision::Ask, DecidedBy::BackendAsk, None),
        None => (Decision::Allow, DecidedBy::NoObjection, None),
    };
    if matches!(
        decided_by,
        DecidedBy::Interrupted | DecidedBy::BudgetExpired
    ) {
        // Staged effects never revive interrupted or expired work: no effective value,
        // injection, return or message of an earlier reply is handed on.
        enforce = Enforce::default();
        messages.clear();
    } else if decision == Decision::Deny {
        // "Deny, stop or fail-closed stop a candidate from getting around the settled
        // decision" (composition): the operation does not run, so no supplied result,
        // effective value or `continue` is handed on. Accepted messages and injections
        // stay: they tell the user and the model about the denial.
        enforce.returned = None;
        enforce
            .flow
            .take_if(|f| f.operation == FlowOperation::Continue);
    } else if let (Some((target, pointer)), Cow::Owned(changed)) = (call.rules.modify, effective) {
        if changed != *call.event {
            // What the harness applies: at an elicitation result, the answer in its part;
            // elsewhere the value, taken out of the effective event, which goes no
            // further (a copy beside it and the original held three of a large one).
            let value = match call.rules.event {
                InterceptableEvent::UserElicitationResult => {
                    changed.value_at(pointer).and_then(elicitation::answer)
                }
                _ => changed.into_value_at(pointer),
            };
            if let Some(value) = value {
                enforce.effective.insert(target.as_str().to_owned(), value);
            }
        }
    }
    Settlement {
        decision,
        decided_by,
        reason,
        messages,
        enforce,
        event: EventRef {
            id: Some(call.event.id.clone()),
            event_type: Some(call.event.event_type.clone()),
            session: call.event.session_id.clone(),
            call: call.event.call_id.clone(),
        },
        elapsed_ns: now.saturating_sub(started),
        interceptors: records,
        observers: observers.into_vec(),
    }
}

/// Whether `effects` end decision-making: a deny, or a flow stop.
fn stops(effects: &[Effect]) -> bool {
    effects.iter().any(|effect| match effect {
        Effect::Deny { .. } => true,
        Effect::Flow { operation, .. } => *operation == FlowOperation::Stop,
        _ => false,
    })
}

/// The reason of an accepted `flow` stop, if one ended decision-making (the effect
/// schema requires a non-empty reason on every stop).
fn stopped(enforce: &Enforce) -> Option<String> {
    enforce
        .flow
        .as_ref()
        .filter(|f| f.operation == FlowOperation::Stop)
        .map(|f| f.reason.clone().unwrap_or_default())
}

/// Stop beats continue: a continue never replaces a stop, a stop replaces a continue
/// (instructions and all: nothing goes on). Continues compose: each one's instruction is
/// added to those before it, in chain order, as accepted effects are never dropped.
fn settle_flow(flow: &mut Option<Flow>, operation: FlowOperation, text: Option<String>) {
    if flow
        .as_ref()
        .is_some_and(|f| f.operation == FlowOperation::Stop)
    {
        return;
    }
    let (reason, instructions) = match operation {
        FlowOperation::Stop => (text, Vec::new()),
        FlowOperation::Continue => {
            let mut instructions = flow.take().map(|f| f.instructions).unwrap_or_default();
            instructions.extend(text);
            (None, instructions)
        }
    };
    *flow = Some(Flow {
        operation,
        reason,
        instructions,
    });
}

/// Why a response's modifications were not accepted.
enum Unaccepted {
    /// A merge does not fit the current value, or leaves no answer where one must be:
    /// the response is rejected whole.
    Misfit,
    /// Applying them ran past the deadline.
    Late,
}

/// The effective event after one response's modifications, in order; `None` when it has
/// none. They are all applied to one owned copy of the target's value, and the event is
/// rebuilt once: a response of many modifications costs what it and the event weigh,
/// not their product (a copy of the target and of the event per modification let a
/// 1 MiB reply of empty merges to a 1 MiB input copy gigabytes, past the host's CPU
/// bound). `late` is asked between modifications and once the event is rebuilt.
///
/// The modifications' values are moved out of `effects` (nothing reads them after), and
/// the target is copied only for a merge into it: a copy of each beside the event's own
/// held three or four copies of a large value at once, past the component's memory,
/// where one reply or two of a megabyte each held a dense one.
fn modified(
    event: &Event,
    rules: &Rules,
    effects: &mut [Effect],
    mut late: impl FnMut() -> bool,
) -> Result<Option<Event>, Unaccepted> {
    let Some((_, pointer)) = rules.modify else {
        return Ok(None);
    };
    let mut changes = modifications(effects).map(|(operation, value)| (operation, take(value)));
    let Some((operation, change)) = changes.next() else {
        return Ok(None);
    };
    let answers = rules.event == InterceptableEvent::UserElicitationResult;
    let current = match (answers, operation) {
        (true, _) => elicitation::answer_to_modify(event, pointer).ok_or(Unaccepted::Misfit)?,
        (false, ModifyOperation::Replace) => None,
        (false, ModifyOperation::Merge) => event.value_at(pointer).cloned(),
    };
    let mut value = effect::apply(current, operation, change).ok_or(Unaccepted::Misfit)?;
    // At an elicitation result every step must leave an answer. Each change is one
    // (`effect::fits`), and one merged into an answer or replacing it leaves one: only
    // the first step's result needs a look at the whole.
    if answers && !elicitation::is_answer(&value) {
        return Err(Unaccepted::Misfit);
    }
    for (operation, change) in changes {
        if late() {
            return Err(Unaccepted::Late);
        }
        value = effect::apply(Some(value), operation, change).ok_or(Unaccepted::Misfit)?;
    }
    let value = match answers {
        true => elicitation::with_answer(event, pointer, value).ok_or(Unaccepted::Misfit)?,
        false => value,
    };
    let changed = event.with_value(pointer, value);
    match late() {
        true => Err(Unaccepted::Late),
        false => Ok(Some(changed)),
    }
}

/// Each modification of a reply, in order: its operation and its value, which the
/// applying takes (nothing reads it after).
fn modifications(effects: &mut [Effect]) -> impl Iterator<Item = (ModifyOperation, &mut Value)> {
    effects.iter_mut().filter_map(|effect| match effect {
        Effect::Modify {
            operation, value, ..
        } => Some((*operation, value)),
        _ => None,
    })
}

/// [`modified`] for a reply of one modification where the effective event is this
/// call's own already (an earlier interceptor modified it): made in its target in place,
/// so that no copy of the target is held beside it and the original event's document,
/// which the chain holds throughout (two interceptors merging into a large input held
/// three copies, past the component's memory). Still accepted whole or not at all: a
/// replacement is made once the deadline is known not to have passed, and a merge is
/// taken back if it has. `None` where it does not apply: then [`modified`] copies.
fn modified_in_place(
    effective: &mut Cow<'_, Event>,
    rules: &Rules,
    effects: &mut [Effect],
    mut late: impl FnMut() -> bool,
) -> Option<Result<Option<bool>, Unaccepted>> {
    let (_, pointer) = rules.modify?;
    if rules.event == InterceptableEvent::UserElicitationResult {
        return None;
    }
    let mut changes = modifications(effects);
    let (operation, value) = changes.next()?;
    if changes.next().is_some() {
        return None;
    }
    let Cow::Owned(event) = effective else {
        return None;
    };
    let target = event.value_at_mut(pointer)?;
    let value = take(value);
    let brought = content::least_claimed_in([&value]);
    let applied = match operation {
        ModifyOperation::Replace => {
            let changed = *target != value;
            match late() {
                true => Err(Unaccepted::Late),
                false => {
                    *target = value;
                    Ok(Some(changed))
                }
            }
        }
        ModifyOperation::Merge => match effect::merge_in_place(target, value) {
            None => Err(Unaccepted::Misfit),
            Some((undo, _)) if late() => {
                undo.undo(target);
                Err(Unaccepted::Late)
            }
            Some((_, changed)) => Ok(Some(changed)),
        },
    };
    if applied.is_ok() {
        event.brought_parts(brought);
    }
    Some(applied)
}

/// A reply whose effects do not fit the event (a merge of another shape, an attachment
/// the event does not show), rejected whole at acceptance.
fn misfit() -> Failure {
    Failure::new(FailureClass::InvalidEffects, Phase::Accept).with_detail(Detail::MalformedEffect)
}

/// Whether the call may start another interceptor: not once interrupted or out of budget.
fn admission_stop<H: Host>(host: &H, budget: Option<Instant>) -> Option<Stop> {
    if host.interrupted() {
        return Some(Stop::synthetic(DecidedBy::Interrupted));
    }
    match budget {
        Some(b) if host.now() >= b => Some(Stop::synthetic(DecidedBy::BudgetExpired)),
        _ => None,
    }
}

/// One interceptor: acquire, exchange, decode, accept. It may take several attempts, all
/// sending the same bytes and all inside the one deadline: at most one re-acquisition
/// after a 401 (for a request sent without a credential, the host's answer to the
/// backend's challenge, digest §12), and retries after transient failures as the host
/// allows. Never a retry after an accepted answer (deny or empty) or a response rejected
/// for its content. The first attempt begins at `now`, a reading just taken.
fn evaluate<H: Host>(
    host: &mut H,
    backend: &Backend,
    message: &Message,
    now: Instant,
    deadline: Instant,
    call: &Call,
) -> (Ending, Vec<AttemptEntry>) {
    let mut attempts = Vec::new();
    let mut reacquired = false;
    let mut answering = Answering::Nothing;
    // Retries after transient failures, counted apart from attempts: the resend after a
    // 401 is not one of the retries the host's configuration grants.
    let mut retries = 0;
    loop {
        let begun = if attempts.is_empty() { now } else { host.now() };
        let (result, ended) = attempt(host, backend, message, begun, deadline, call, answering);
        // Only the resend right after the 401 answers it; a retry after that is a retry.
        answering = Answering::Nothing;
        let entry = match &result {
            Tried::Ended(Ending::Accepted(_)) => Some((AttemptResult::Accepted, None, None)),
            Tried::Ended(Ending::Interrupted) => Some((AttemptResult::Interrupted, None, None)),
            Tried::Ended(Ending::Failed(f)) => {
                Some((AttemptResult::Failed(f.class), f.http_status, f.rpc_code))
            }
            Tried::Unauthorized { .. } => Some((AttemptResult::Unauthorized, None, None)),
            Tried::Unanswered => None,
        };
        if let Some((label, http_status, rpc_code)) = entry {
            attempts.push(AttemptEntry {
                n: attempts.len() as u32 + 1,
                elapsed_ms: elapsed_ms(begun, ended),
                result: label,
                http_status,
                rpc_code,
                request_sha256: Some(message.sha256().to_string()),
            });
        }
        match result {
            // A transient failure may be retried with the same bytes, only while the
            // original deadline remains and only as the host's configuration allows.
            Tried::Ended(Ending::Failed(f)) if f.is_transient() && ended < deadline => {
                retries += 1;
                if host.retry_after(&backend.id, retries, deadline) && !host.interrupted() {
                    // A backoff can end at the deadline (a timer overshoots): then no
                    // attempt starts, and the deadline ends the exchange where it stood.
                    if host.now() >= deadline {
                        let late = Failure::new(FailureClass::DeadlineExceeded, f.phase);
                        return (Ending::Failed(late), attempts);
                    }
                    continue;
                }
                if host.interrupted() {
                    return (Ending::Interrupted, attempts);
                }
                return (Ending::Failed(f), attempts);
            }
            Tried::Ended(ending) => return (ending, attempts),
            Tried::Unauthorized { had_credential } => {
                if host.interrupted() {
                    return (Ending::Interrupted, attempts);
                }
                if !reacquired && ended < deadline {
                    reacquired = true;
                    answering = match had_credential {
                        true => Answering::Refusal,
                        false => Answering::Challenge,
                    };
                    continue;
                }
                return (Ending::Failed(unauthorized()), attempts);
            }
            // Nothing was sent again: the record stays the one of the 401 it answers.
            Tried::Unanswered => return (Ending::Failed(unauthorized()), attempts),
        }
    }
}

/// The backend refused the request with a 401 that got no answer.
fn unauthorized() -> Failure {
    Failure::new(FailureClass::AuthFailed, Phase::AwaitResponse).with_http_status(401)
}

enum Tried {
    Ended(Ending),
    /// HTTP 401: the credential (if any) was rejected and dropped from the host's cache.
    Unauthorized {
        had_credential: bool,
    },
    /// After a 401, the host had no credential to answer it with: nothing was sent
    /// again, as a resend without one would be an unauthenticated fallback delivery
    /// (failure-semantics.md), which fail-open does not permit either.
    Unanswered,
}

/// The 401 an attempt answers, if any.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answering {
    /// None: a first attempt, or a retry after a transient failure.
    Nothing,
    /// A 401 to a request that carried a credential, which the host dropped: it is
    /// asked for a fresh one.
    Refusal,
    /// A 401 to a request that carried none: the host is offered the backend's
    /// challenge (digest §12).
    Challenge,
}

/// One attempt, begun at `begun` (a reading just taken), answering a 401 or not. Returns
/// how it went and when it ended, a reading the caller reuses.
fn attempt<H: Host>(
    host: &mut H,
    backend: &Backend,
    message: &Message,
    begun: Instant,
    deadline: Instant,
    call: &Call,
    answering: Answering,
) -> (Tried, Instant) {
    use Tried::Ended;
    // Out of time before a credential (a first, a renewed one, or one answering a
    // challenge) is in hand: the deadline's failure, never the 401's, so a binding budget
    // settles it as expired.
    let out_of_time = || Failure::new(FailureClass::DeadlineExceeded, Phase::AcquireCredential);
    if begun >= deadline {
        return (Ended(Ending::Failed(out_of_time())), begun);
    }
    let credential = match host.acquire(&backend.id, deadline) {
        // A resend after a 401 goes with a credential or not at all.
        Ok(None) if answering != Answering::Nothing => {
            let ended = host.now();
            if ended >= deadline {
                return (Ended(Ending::Failed(out_of_time())), ended);
            }
            return (Tried::Unanswered, ended);
        }
        Ok(credential) => credential,
        Err(AuthError::Cancelled) => return (Ended(Ending::Interrupted), host.now()),
        Err(e) => return failed_by(host, auth_failure(e), deadline),
    };
    let reply = match host.exchange(&backend.id, message.bytes(), credential.as_ref(), deadline) {
        Ok(reply) => reply,
        Err(DeliveryError::Cancelled) => return (Ended(Ending::Interrupted), host.now()),
        Err(e) => return failed_by(host, e.failure(), deadline),
    };
    let decoded = response::decode(&reply, &call.event.id, call.capability);
    // A refused credential leaves the host's cache however the call goes on: late or
    // interrupted, the next call must not send it again. Only the cache is touched.
    if reply.status == Some(401) {
        if let Some(c) = &credential {
            host.reject(c);
        }
    }
    // Re-check cancellation and the original deadline immediately before acting on the
    // reply: one that is complete only after the deadline never revives the call, and a
    // late 401 does not trigger a re-acquisition.
    let ended = host.now();
    if host.interrupted() {
        return (Ended(Ending::Interrupted), ended);
    }
    if ended >= deadline {
        let failure = Failure::new(FailureClass::LateResponse, Phase::Accept);
        return (Ended(Ending::Failed(failure)), ended);
    }
    if reply.status == Some(401) {
        let unauthorized = Tried::Unauthorized {
            had_credential: credential.is_some(),
        };
        return (unauthorized, ended);
    }
    let ending = match decoded {
        Ok(effects) => Ending::Accepted(effects),
        Err(failure) => Ending::Failed(failure),
    };
    (Ended(ending), ended)
}

/// An attempt that failed, read when the host reported it: a failure reported at or
/// after the deadline is the deadline's, whatever broke (the host enforces the deadline;
/// this does not rely on it), so a binding budget settles it as expired, not by policy.
fn failed_by<H: Host>(host: &H, failure: Failure, deadline: Instant) -> (Tried, Instant) {
    let ended = host.now();
    let failure = if ended >= deadline && !failure.is_deadline() {
        Failure::new(FailureClass::DeadlineExceeded, failure.phase)
    } else {
        failure
    };
    (Tried::Ended(Ending::Failed(failure)), ended)
}

fn auth_failure(error: AuthError) -> Failure {
    let detail = match error {
        AuthError::Unresolved => Detail::Unresolved,
        AuthError::AcquisitionFailed => Detail::AcquisitionFailed,
        AuthError::RefreshFailed => Detail::RefreshFailed,
        AuthError::Unsupported => Detail::Unsupported,
        AuthError::DeadlineExceeded | AuthError::Cancelled => Detail::DeadlineExceeded,
    };
    let phase = match error {
        AuthError::RefreshFailed => Phase::RefreshCredential,
        _ => Phase::AcquireCredential,
    };
    Failure::new(FailureClass::AuthFailed, phase).with_detail(detail)
}

fn record(
    target: &Target,
    outcome: Outcome,
    failure: Option<Failure>,
    attempts: Vec<AttemptEntry>,
    request_sha256: Option<String>,
) -> InterceptorEntry {
    InterceptorEntry {
        backend: target.backend.id.clone(),
        subscription: target.subscription.index,
        policy: target.policy,
        timeout_ms: target.timeout_ms,
        outcome,
        code: None,
        effects: Vec::new(),
        failure,
        attempts,
        request_sha256,
    }
}
