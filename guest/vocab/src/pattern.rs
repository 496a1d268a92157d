//! What one entry of a subscription's `events` selects (§6 rule 7): one event type, a
//! whole family (`model.*`), or everything (`*`). The component checks the entries of a
//! registration; the host reads them to know which hooks a harness needs.

/// One entry of `events`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EventPattern {
    Exact(String),
    /// `model.*` is stored as `Family("model")`.
    Family(String),
    /// `*`.
    Any,
}

impl EventPattern {
    /// The pattern `text` spells, read without checking it (the component's registration
    /// rules do that): `*`, a family before `.*`, else one event type.
    pub fn read(text: &str) -> EventPattern {
        match text.strip_suffix(".*") {
            _ if text == "*" => EventPattern::Any,
            Some(family) => EventPattern::Family(family.to_owned()),
            None => EventPattern::Exact(text.to_owned()),
        }
    }

    /// Pure pattern matching. It does **not** know about modes: `*` matches `turn.end`
    /// too, so intercept dispatch must also require the event to be interceptable.
    pub fn matches(&self, event_type: &str) -> bool {
        match self {
            EventPattern::Exact(name) => name == event_type,
            EventPattern::Family(family) => event_type
                .strip_prefix(family.as_str())
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|rest| !rest.is_empty()),
            EventPattern::Any => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_read_and_match_purely() {
        let family = EventPattern::read("model.*");
        assert_eq!(family, EventPattern::Family("model".into()));
        assert!(family.matches("model.request.before") && family.matches("model.error"));
        assert!(
            !family.matches("model") && !family.matches("models.x") && !family.matches("model.")
        );
        assert_eq!(EventPattern::read("*"), EventPattern::Any);
        assert!(EventPattern::Any.matches("turn.end"));
        let exact = EventPattern::read("tool.before");
        assert!(exact.matches("tool.before") && !exact.matches("tool.after"));
    }
}
