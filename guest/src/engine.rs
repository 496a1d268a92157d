//! One loaded registration and the two things a host asks of it: settle an intercept
//! call, and prepare observe notifications. Inputs from the embedding harness (event
//! text, the effects it can enforce) are validated here; a bad one is an error naming the
//! field, because the call could not be made, not a decision.

use crate::chain::{self, Call};
use crate::effect::EffectKind;
use crate::event::{Event, EventProblem};
use crate::events;
use crate::host_api::{Host, Instant};
use crate::observers::{Observers, Why};
use crate::registration::{self, EventPattern, Mode, Registration};
use crate::settlement::{ObserverDelivery, Settlement};
use ahp_vocab::{EventCapability, FlowOperation, InterceptableEvent, ObserverKind, Problem};

/// A validated registration and the harness's declaration, ready for hook calls.
#[derive(Clone, Debug)]
pub struct Engine {
    registration: Registration,
    /// What the embedding harness intercepts, per event, and enforces there.
    declaration: Vec<EventCapability>,
}

impl Engine {
    /// Loads a registration for a harness that intercepts every interceptable event with
    /// every effect each allows ([`events::full_declaration`]).
    pub fn load(text: &str) -> Result<Engine, Vec<Problem>> {
        Engine::load_declared(text, events::full_declaration())
    }

    /// Parses and validates a registration document for a harness that declares
    /// `declaration`; every problem is reported (the first hundred of each kind listed,
    /// the rest counted, as `registration::Listed` does). The declaration must stay
    /// within what each event allows, and an intercept subscription may select only
    /// declared events: an undeclared exact event, or a wildcard reaching none, is
    /// refused here, never skipped at call time (§6 rules 6 and 10).
    pub fn load_declared(
        text: &str,
        declaration: Vec<EventCapability>,
    ) -> Result<Engine, Vec<Problem>> {
        let mut problems = Vec::new();
        for (i, capability) in declaration.iter().enumerate() {
            let at = format!("declaration[{i}]");
            if declaration[..i].iter().any(|c| c.event == capability.event) {
                problems.push(Problem::new(
                    &at,
                    format!("{} is declared twice", capability.event),
                ));
            }
            problems.extend(events::check(capability, &at));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let registration = registration::parse(text)?;
        let declared = |name: &str| declaration.iter().any(|c| c.event.as_str() == name);
        // As many as the registration has subscriptions: listed as its own problems are.
        let mut undeclared = registration::Listed::default();
        for (b, backend) in registration.backends.iter().enumerate() {
            for subscription in &backend.subscriptions {
                if subscription.mode == Mode::Observe {
                    continue;
                }
                for (i, pattern) in subscription.events.iter().enumerate() {
                    let path =
                        format!("/hooks/{b}/subscriptions/{}/events/{i}", subscription.index);
                    match pattern {
                        EventPattern::Exact(name) if !declared(name) => undeclared.push(
                            &path,
                            format!("\"{name}\" is not declared interceptable by this harness"),
                        ),
                        EventPattern::Exact(_) => {}
                        wildcard => {
                            if !declaration
                                .iter()
                                .any(|c| wildcard.matches(c.event.as_str()))
                            {
                                undeclared.push(
                                    &path,
                                    "selects no event this harness declares interceptable",
                                );
                            }
                        }
                    }
                }
            }
        }
        if undeclared.is_empty() {
            Ok(Engine {
                registration,
                declaration,
            })
        } else {
            Err(undeclared.into_vec("problems"))
        }
    }

    /// Valid but questionable settings, each naming its JSON path.
    pub fn warnings(&self) -> &[Problem] {
        &self.registration.warnings
    }

    pub fn registration(&self) -> &Registration {
        &self.registration
    }

    /// The sum of every intercept subscription's timeout: no intercept call can
    /// legitimately take longer.
    pub fn bound_ms(&self) -> u64 {
        let mut total: u64 = 0;
        for backend in &self.registration.backends {
            for subscription in &backend.subscriptions {
                if let Mode::Intercept { timeout_ms, .. } = subscription.mode {
                    total = total.saturating_add(timeout_ms);
                }
            }
        }
        total
    }

    /// Per declared event that some intercept subscription selects, its interceptors'
    /// `timeoutMs` in chain order: a call of that event waiting for an instance uses up
    /// each one's deadline in turn (see `chain`).
    pub fn chain_timeouts(&self) -> Vec<(String, Vec<u64>)> {
        self.declaration
            .iter()
            .filter_map(|c| {
                let timeouts: Vec<u64> = self
                    .registration
                    .intercepts(c.event.as_str())
                    .map(|target| target.timeout_ms)
                    .collect();
                (!timeouts.is_empty()).then(|| (c.event.as_str().to_owned(), timeouts))
            })
            .collect()
    }

    /// Runs the intercept chain for one event of a declared interceptable type. `effects`
    /// narrows that event's declaration for this call (empty: as declared); the request's
    /// `params.capabilities` is the result. The call's own observe subscriptions are
    /// prepared as owned observers of the settlement.
    pub fn intercept<H: Host>(
        &self,
        host: &mut H,
        event: &str,
        effects: &[EffectKind],
        budget: Option<Instant>,
    ) -> Result<Settlement, Vec<Problem>> {
        let now = host.now();
        self.intercept_since(host, event, effects, budget, now)
    }

    /// As [`Engine::intercept`], for a call that began at `started` and waited for this
    /// instance since: the wait counts against the interceptors' deadlines in turn (and
    /// the budget, already absolute), so a deadline it used up settles by that
    /// subscription's policy with phase `queue`, before any I/O.
    pub fn intercept_since<H: Host>(
        &self,
        host: &mut H,
        event: &str,
        effects: &[EffectKind],
        budget: Option<Instant>,
        started: Instant,
    ) -> Result<Settlement, Vec<Problem>> {
        let (event, rules) = Event::parse_intercepted(event).map_err(event_problems)?;
        let Some(declared) = self.declaration.iter().find(|c| c.event == rules.event) else {
            return Err(vec![Problem::new(
                "event/type",
                format!(
                    "\"{}\" is not declared interceptable by this harness",
                    rules.event
                ),
            )]);
        };
        let capability = events::narrow(declared, effects)?;
        // Only where continue is offered is the event's count read (the document is
        // then parsed): a tool.before call never pays for it.
        let offers_continue = capability
            .flow
            .as_ref()
            .is_some_and(|f| f.operations.contains(&FlowOperation::Continue));
        let capability = if offers_continue {
            let count = event
                .value_at(events::CONTINUATION_COUNT)
                .and_then(crate::json::integer_value::<u64>);
            events::at_count(capability, count)
        } else {
            capability
        };
        // An elicitation result that exposes no answer (declined, not a form, its part
        // not selected as body, or none, or its content no answer) offers nothing to
        // modify: modify is withdrawn for this call (AHP-CAP-001, as continue is once the
        // allowance is spent), so a backend's change is unadvertised, settled by its
        // policy.
        let capability = match rules.modify {
            Some((_, pointer))
                if rules.event == InterceptableEvent::UserElicitationResult
                    && !crate::elicitation::exposes_answer(&event, pointer) =>
            {
                events::without_modify(capability)
            }
            _ => capability,
        };
        if let Some(problem) = event.missing_target(rules, &capability) {
            return Err(event_problems(vec![problem]));
        }
        let call = Call {
            registration: &self.registration,
            event: &event,
            rules,
            capability: &capability,
            budget,
            started,
        };
        Ok(chain::run(host, &call))
    }

    /// One notification per observe subscription matching the event, in registration
    /// order, each bounded by the observer timeout from `started` (when the call began,
    /// before any wait for an instance) and by the budget; withheld past the observer
    /// limits (memory, and time to prepare from now) as for a hook call's own.
    ///
    /// An event of a declared type that an intercept subscription selects is refused at
    /// `event/type`: observed, it would reach none of its interceptors, and the tool or
    /// turn would go on unchecked. One exception: a `tool.after` whose tool was denied
    /// (`outcome: "denied"`, never run) reports a decision already made, with nothing left
    /// to intercept; that is how a denial is observed (conformance O2).
    pub fn observe<H: Host>(
        &self,
        host: &H,
        started: Instant,
        event: &str,
        budget: Option<Instant>,
    ) -> Result<Vec<ObserverDelivery>, Vec<Problem>> {
        let event = Event::parse_any(event).map_err(event_problems)?;
        if self.is_intercepted(&event) {
            return Err(vec![Problem::new(
                "event/type",
                format!(
                    "\"{}\" is intercepted by this registration: use intercept",
                    event.event_type
                ),
            )]);
        }
        let mut deliveries = Observers::from(host.now(), budget);
        let owned =
            Why::kind(ObserverKind::Owned).targets(self.registration.observers(&event.event_type));
        deliveries.of_event(host, &event, started, budget, owned);
        Ok(deliveries.into_vec())
    }

    /// Whether `event` is for [`Engine::intercept`]: of a declared type some intercept
    /// subscription selects, and no denied tool's `tool.after`.
    fn is_intercepted(&self, event: &Event) -> bool {
        let declared = self
            .declaration
            .iter()
            .any(|c| c.event.as_str() == event.event_type);
        let denied_tool = event.event_type == InterceptableEvent::ToolAfter.as_str()
            && event
                .value_at("/outcome")
                .and_then(serde_json::Value::as_str)
                == Some("denied");
        declared
            && !denied_tool
            && self
                .registration
                .intercepts(&event.event_type)
                .next()
                .is_some()
    }
}

/// Event problems as caller errors, each path prefixed with `event`.
fn event_problems(problems: Vec<EventProblem>) -> Vec<Problem> {
    problems
        .into_iter()
        .map(|p| Problem::new(format!("event{}", p.path), p.rule))
        .collect()
}
