//! One loaded registration and the two things a host asks of it: settle an intercept
//! call, and prepare observe notifications. Inputs from the embedding harness (event
//! text, the effects it can enforce) are validated here; a bad one is an error naming the
//! field, because the call could not be made, not a decision.

use crate::chain::{self, Call, OBSERVER_TIMEOUT_MS};
use crate::event::{Event, EventProblem};
use crate::host_api::{Host, Instant, NANOS_PER_MS};
use crate::registration::{self, Mode, Registration};
use crate::response::EffectKind;
use crate::settlement::{ObserverDelivery, Settlement};
use crate::wire;

/// A validated registration, ready for hook calls.
#[derive(Clone, Debug)]
pub struct Engine {
    registration: Registration,
}

impl Engine {
    /// Parses and validates a registration document; every problem is reported.
    pub fn load(text: &str) -> Result<Engine, Vec<String>> {
        registration::parse(text)
            .map(|registration| Engine { registration })
            .map_err(|problems| problems.iter().map(ToString::to_string).collect())
    }

    /// Valid but questionable settings, each naming its JSON path.
    pub fn warnings(&self) -> Vec<String> {
        self.registration
            .warnings
            .iter()
            .map(ToString::to_string)
            .collect()
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
        effects: &[String],
        budget: Option<Instant>,
    ) -> Result<Settlement, Vec<String>> {
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
    ) -> Result<Vec<ObserverDelivery>, Vec<String>> {
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
fn event_problems(problems: Vec<EventProblem>) -> Vec<String> {
    problems.iter().map(|p| format!("event{p}")).collect()
}

/// The effects the harness can enforce: known names, deny among them, no repeats.
fn parse_effects(names: &[String]) -> Result<Vec<EffectKind>, Vec<String>> {
    let mut kinds = Vec::new();
    let mut problems = Vec::new();
    for (i, name) in names.iter().enumerate() {
        match EffectKind::parse(name) {
            Some(kind) if !kinds.contains(&kind) => kinds.push(kind),
            Some(_) => problems.push(format!("effects[{i}]: \"{name}\" is listed twice")),
            None => problems.push(format!(
                "effects[{i}]: unknown or unenforceable effect \"{name}\" (known: deny, allow, ask, message)"
            )),
        }
    }
    if !kinds.contains(&EffectKind::Deny) {
        problems
            .push("effects: must include \"deny\" (every tool.before interceptor can deny)".into());
    }
    if problems.is_empty() {
        Ok(kinds)
    } else {
        Err(problems)
    }
}
