//! One loaded registration and the two things a host asks of it: settle an intercept
//! call, and prepare observe notifications. Inputs from the embedding harness (event
//! text, the effects it can enforce) are validated here; a bad one is an error naming the
//! field, because the call could not be made, not a decision.

use crate::chain::{self, Call};
use crate::effect::{self, EffectKind};
use crate::event::{Event, EventProblem};
use crate::host_api::{Host, Instant, NANOS_PER_MS};
use crate::registration::{self, Mode, Registration};
use crate::settlement::{ObserverDelivery, Settlement};
use crate::wire;
use ahp_vocab::{Problem, OBSERVER_TIMEOUT_MS};

/// A validated registration, ready for hook calls.
#[derive(Clone, Debug)]
pub struct Engine {
    registration: Registration,
}

impl Engine {
    /// Parses and validates a registration document; every problem is reported.
    pub fn load(text: &str) -> Result<Engine, Vec<Problem>> {
        registration::parse(text).map(|registration| Engine { registration })
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

    /// Runs the intercept chain for one `tool.before` event.
    pub fn intercept<H: Host>(
        &self,
        host: &mut H,
        event: &str,
        effects: &[EffectKind],
        budget: Option<Instant>,
    ) -> Result<Settlement, Vec<Problem>> {
        let effects = parse_effects(effects)?;
        let event = Event::parse_tool_before(event).map_err(event_problems)?;
        let call = Call {
            registration: &self.registration,
            event: &event,
            effects: &effects,
            budget,
        };
        Ok(chain::run(host, &call))
    }

    /// One notification per observe subscription matching the event, in registration
    /// order, each bounded by the observer timeout and the budget.
    pub fn observe(
        &self,
        now: Instant,
        event: &str,
        budget: Option<Instant>,
    ) -> Result<Vec<ObserverDelivery>, Vec<Problem>> {
        let event = Event::parse_any(event).map_err(event_problems)?;
        let own = now.saturating_add(OBSERVER_TIMEOUT_MS * NANOS_PER_MS);
        let deadline = budget.map_or(own, |b| b.min(own));
        let deliveries = self
            .registration
            .observers(&event.event_type)
            .map(|(backend, subscription)| ObserverDelivery {
                backend: backend.id.clone(),
                message: wire::observe(&event, subscription.include_native),
                deadline,
            })
            .collect();
        Ok(deliveries)
    }
}

/// Event problems as caller errors, each path prefixed with `event`.
fn event_problems(problems: Vec<EventProblem>) -> Vec<Problem> {
    problems
        .into_iter()
        .map(|p| Problem::new(format!("event{}", p.path), p.rule))
        .collect()
}

/// The effects the harness can enforce: ones this crate can decode, deny among them, no
/// repeats.
fn parse_effects(kinds: &[EffectKind]) -> Result<Vec<EffectKind>, Vec<Problem>> {
    let mut accepted = Vec::new();
    let mut problems = Vec::new();
    for (i, &kind) in kinds.iter().enumerate() {
        let path = format!("effects[{i}]");
        if accepted.contains(&kind) {
            problems.push(Problem::new(path, format!("\"{kind}\" is listed twice")));
        } else if !effect::is_decodable(kind) {
            problems.push(Problem::new(
                path,
                format!("effect \"{kind}\" cannot be enforced by this component yet (known: deny, allow, ask, message)"),
            ));
        } else {
            accepted.push(kind);
        }
    }
    if !accepted.contains(&EffectKind::Deny) {
        problems.push(Problem::new(
            "effects",
            "must include \"deny\" (every tool.before interceptor can deny)",
        ));
    }
    if problems.is_empty() {
        Ok(accepted)
    } else {
        Err(problems)
    }
}
