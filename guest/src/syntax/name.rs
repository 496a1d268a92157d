//! Names: reverse-DNS identifiers (and the extension objects keyed by them) and
//! environment-variable names.

use crate::json::Node;

/// A reverse-DNS name, the registration schema's
/// `^(?:[A-Za-z][A-Za-z0-9_-]*\.)+[A-Za-z][A-Za-z0-9_-]*$`: two or more dot-separated
/// labels, each starting with an ASCII letter. Used for backend ids, dotted event names,
/// extension keys and effect codes, so a name from one vendor cannot collide with
/// another's. Note the pattern, unlike DNS, lets a label end in `-` or `_`.
pub(crate) fn is_reverse_dns(s: &str) -> bool {
    let label = |l: &str| {
        let mut chars = l.chars();
        chars.next().is_some_and(|ch| ch.is_ascii_alphabetic())
            && chars.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
    };
    s.contains('.') && s.split('.').all(label)
}

/// An `extensions` object (extensions.schema.json, AHP-EXT-001): an object whose member
/// names are reverse-DNS, so one vendor's extension cannot take another's name; its
/// values are any JSON. Events and replies carry the same one.
pub(crate) fn is_extensions(extensions: &Node) -> bool {
    extensions
        .as_object()
        .is_some_and(|e| e.keys().all(is_reverse_dns))
}

/// The shape of a bearer `tokenEnv` and an `env:` reference: the vocabulary's, which
/// the host's own files and flags check too.
pub(crate) use ahp_vocab::is_env_name;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::assert_shape;

    #[test]
    fn reverse_dns_names_are_two_or_more_labels_starting_with_a_letter() {
        let good = [
            "com.example",
            "com.example.local_review",
            "tool.before",
            "Com.Example2.a-b",
            "com.example-",
            "a.b_",
        ];
        let bad = [
            "",
            ".",
            "policy",
            "com..example",
            ".com.example",
            "com.example.",
            "1com.example",
            "com.1example",
            "-com.example",
            "com.-example",
            "_com.example",
            "com.ex ample",
            "com.ex*",
            "com.exämple",
        ];
        assert_shape(is_reverse_dns, &good, &bad);
    }

    #[test]
    fn env_names_start_with_a_letter_or_underscore() {
        let good = ["AHP_TOKEN", "_X", "a", "A1_B", "_"];
        let bad = ["", "1BAD", "A-B", "A B", "A.B", "TOKÉN", "A="];
        assert_shape(is_env_name, &good, &bad);
    }
}
