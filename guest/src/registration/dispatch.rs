//! Dispatch (digest §6.1 [AHP-REG-002]): which subscriptions of a registration receive
//! an event, in which mode, in which order.
//!
//! The chain and the observe path both ask this, and must never disagree: an intercept
//! wildcard covers only interceptable boundaries, an observe subscription sees any event
//! its patterns match, and order is document order (backends, then their
//! subscriptions), which is the chain order. So the rule is written once, here.

use super::is_interceptable;
use super::{Backend, FailurePolicy, Mode, Registration, Subscription};

/// An intercept subscription selected for one event, with its mode's settings unpacked
/// so the chain need not match on [`Mode`] again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interceptor<'a> {
    pub backend: &'a Backend,
    pub subscription: &'a Subscription,
    pub timeout_ms: u64,
    pub policy: FailurePolicy,
}

impl Registration {
    /// The intercept subscriptions that receive `event_type`, in chain order.
    pub fn intercepts<'a>(
        &'a self,
        event_type: &'a str,
    ) -> impl Iterator<Item = Interceptor<'a>> + 'a {
        self.selecting(event_type)
            .filter_map(|(backend, subscription)| match subscription.mode {
                Mode::Intercept { timeout_ms, policy } => Some(Interceptor {
                    backend,
                    subscription,
                    timeout_ms,
                    policy,
                }),
                Mode::Observe => None,
            })
    }

    /// The observe subscriptions that receive `event_type`, in registration order.
    pub fn observers<'a>(
        &'a self,
        event_type: &'a str,
    ) -> impl Iterator<Item = (&'a Backend, &'a Subscription)> + 'a {
        self.selecting(event_type)
            .filter(|(_, subscription)| subscription.mode == Mode::Observe)
    }

    /// Every subscription, of either mode, that receives `event_type`.
    fn selecting<'a>(
        &'a self,
        event_type: &'a str,
    ) -> impl Iterator<Item = (&'a Backend, &'a Subscription)> + 'a {
        self.backends
            .iter()
            .flat_map(|backend| backend.subscriptions.iter().map(move |s| (backend, s)))
            .filter(move |(_, subscription)| subscription.selects(event_type))
    }
}

impl Subscription {
    /// Whether this subscription receives `event_type`. An intercept subscription only
    /// ever selects interceptable events, even through a wildcard (§6.1).
    pub fn selects(&self, event_type: &str) -> bool {
        let interceptable = is_interceptable(event_type);
        (interceptable || self.mode == Mode::Observe)
            && self.events.iter().any(|p| p.matches(event_type))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::{Content, Selection};
    use crate::registration::{parse, EventPattern, View};

    #[test]
    fn subscriptions_filter_patterns_by_mode() {
        // How a pattern matches is ahp-vocab's (`EventPattern`); here, the mode.
        let mode = Mode::Intercept {
            timeout_ms: 500,
            policy: FailurePolicy::FailOpen,
        };
        let sub = Subscription {
            index: 0,
            events: vec![EventPattern::Any],
            mode,
            view: View {
                include_native: false,
                content: Content::all(Selection::Omit),
            },
        };
        assert!(sub.selects("tool.before") && !sub.selects("turn.end"));
        assert!(Subscription {
            mode: Mode::Observe,
            ..sub
        }
        .selects("turn.end"));
    }

    /// Two backends; each subscription's `id` says what it is. `a.i` intercepts every
    /// interceptable event, `a.o` observes `turn.*`, `b.i` intercepts `tool.before`,
    /// `b.o` observes everything.
    fn two_backends() -> Registration {
        let sub = |id: &str, events: &str, mode: &str| {
            let policy = r#", "timeoutMs": 500, "failurePolicy": "fail-open""#;
            let policy = if mode == "intercept" { policy } else { "" };
            format!(
                r#"{{"id": "{id}", "events": {events}, "mode": "{mode}"{policy},
                    "content": {{"default": "omit"}}}}"#
            )
        };
        let backend = |id: &str, subs: [String; 2]| {
            format!(
                r#"{{"id": "{id}", "transport": {{"type": "http", "url": "https://h.example"}},
                    "subscriptions": [{}]}}"#,
                subs.join(",")
            )
        };
        let a = backend(
            "com.example.a",
            [
                sub("a.i", r#"["*"]"#, "intercept"),
                sub("a.o", r#"["turn.*"]"#, "observe"),
            ],
        );
        let b = backend(
            "com.example.b",
            [
                sub("b.i", r#"["tool.before"]"#, "intercept"),
                sub("b.o", r#"["*"]"#, "observe"),
            ],
        );
        let text = format!(r#"{{"protocolVersion": "draft", "hooks": [{a}, {b}]}}"#);
        parse(&text).unwrap_or_else(|p| panic!("{p:#?}"))
    }

    /// (backend id, subscription index) pairs, in the order given.
    fn named<'a>(pairs: impl Iterator<Item = (&'a Backend, &'a Subscription)>) -> Vec<String> {
        pairs
            .map(|(b, s)| format!("{}/{}", b.id, s.index))
            .collect()
    }

    #[test]
    fn intercepts_are_in_chain_order_with_their_own_timeout_and_policy() {
        let reg = two_backends();
        let got: Vec<_> = reg.intercepts("tool.before").collect();
        let pairs = got.iter().map(|i| (i.backend, i.subscription));
        assert_eq!(named(pairs), ["com.example.a/0", "com.example.b/0"]);
        assert!(got
            .iter()
            .all(|i| (i.timeout_ms, i.policy) == (500, FailurePolicy::FailOpen)));
        let pairs = reg
            .intercepts("tool.after")
            .map(|i| (i.backend, i.subscription));
        assert_eq!(named(pairs), ["com.example.a/0"]);
    }

    #[test]
    fn an_intercept_wildcard_never_reaches_an_observe_only_event() {
        let reg = two_backends();
        assert_eq!(reg.intercepts("turn.end").count(), 0);
        assert_eq!(
            named(reg.observers("turn.end")),
            ["com.example.a/1", "com.example.b/1"]
        );
    }

    #[test]
    fn observers_are_observe_subscriptions_only_in_registration_order() {
        let reg = two_backends();
        assert_eq!(named(reg.observers("tool.before")), ["com.example.b/1"]);
        assert_eq!(reg.observers("com.example.custom").count(), 1);
        assert_eq!(reg.intercepts("com.example.custom").count(), 0);
    }
}
