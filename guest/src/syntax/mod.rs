//! Pure syntax predicates: does this string have the right shape?
//!
//! Registration and event checks both need to know whether a string is an RFC 3986 URI,
//! an RFC 3339 date-time or a reverse-DNS name. Those answers depend on the string alone,
//! never on where it sits in a document, so they live here, apart from the rules that
//! decide which field must have which shape and what to say when it does not. Each
//! predicate is total (any `&str`, no panics) and allocation-free but the secret ones,
//! which compare names normalised; one reads a JSON value, whose member names are its
//! strings (an `extensions` object). One function computes rather than checks: a
//! date-time some milliseconds later ([`later`]), which reads the date-time the way its
//! predicate does. The secret ones say which names name a credential, and so which URL
//! carries one in a parameter ([`has_a_secret_parameter`]): a registration and an event
//! refuse the same.

mod date_time;
mod name;
mod secret;
mod uri;

pub(crate) use date_time::{is_date_time, later};
pub(crate) use name::{is_env_name, is_extensions, is_reverse_dns};
#[cfg(test)]
pub(crate) use secret::SECRET_NAMES;
pub(crate) use secret::{
    argument_carries_a_credential, ends_in_a_credential_word, follows_a_credential_option,
    has_a_secret_parameter, holds_a_credential_word, is_secret_name, mentions_a_credential,
    names_a_count_or_data_key, names_a_credential, normalized, secret_after_option,
};
pub(crate) use uri::{
    has_a_reachable_port, has_userinfo, is_absolute_uri, is_http_url, is_loopback_http_url, origin,
    unreadable_part, Unreadable, MAX_URL_BYTES,
};

/// Asserts that `is` accepts every one of `good` (strings, or pairs such as an option
/// and its value) and rejects every one of `bad`.
#[cfg(test)]
fn assert_shape<T: Copy + std::fmt::Debug>(is: impl Fn(T) -> bool, good: &[T], bad: &[T]) {
    for &text in good {
        assert!(is(text), "{text:?} rejected");
    }
    for &text in bad {
        assert!(!is(text), "{text:?} accepted");
    }
}

/// Strings each predicate must accept and reject. Shared with the event tests, which
/// prove that every one of these reaches (or stays out of) the event's problem list.
#[cfg(test)]
pub(crate) mod examples {
    pub(crate) use super::date_time::examples::{DATE_TIMES, NOT_DATE_TIMES};
    pub(crate) use super::uri::examples::{ABSOLUTE_URIS, NOT_ABSOLUTE_URIS};
}
