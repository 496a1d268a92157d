//! Whether a number serde_json read as a double is passed on as the number its text said.
//!
//! serde_json reads a whole number that neither `u64` nor `i64` holds as the nearest
//! double, and writes that back as a float: `123456789012345678901234567890` comes back as
//! `1.2345678901234568e29`, another number to any reader of integers (Python, Go, a
//! database), so the tool would get one number and the policy judge another. It reads the
//! integer `-0` as the double -0.0 too, written back as `-0.0`, a float a reader of
//! integers (Go's) refuses. The component re-encodes events for their subscriptions and
//! writes a tool's input back after a backend's modify; the host's hook adapters build
//! events from a harness's payload. Both find such numbers' texts here: the first kind is
//! refused, never rounded, and `-0` is the integer 0 its readers take it for. A number
//! written with a fraction or an exponent is a float to its readers already, and the
//! shortest form of its double reads back as that double whatever digits it was written
//! with (`0.10000000000000001`, as C's `%.17g` writes, is `0.1`).

/// The number literals of one JSON text, in text order: the n-th is the one serde_json
/// reads n-th. Found only when first asked, so a text whose numbers are all integers
/// serde_json holds exactly is never scanned.
pub struct Literals<'t> {
    text: &'t str,
    /// Numbers read so far, of any kind.
    pub read: usize,
    found: Option<Vec<&'t str>>,
}

impl<'t> Literals<'t> {
    pub fn of(text: &'t str) -> Literals<'t> {
        Literals {
            text,
            read: 0,
            found: None,
        }
    }

    /// The text of the `n`-th number literal.
    pub fn nth(&mut self, n: usize) -> Option<&'t str> {
        let text = self.text;
        self.found.get_or_insert_with(|| scan(text)).get(n).copied()
    }
}

/// Every number literal outside strings, in order. The text is well-formed as far as
/// serde_json has read it, so a literal is a maximal run of number characters there.
fn scan(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut literals = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                at += 1;
                while at < bytes.len() && bytes[at] != b'"' {
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
                at += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = at;
                while at < bytes.len()
                    && matches!(bytes[at], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    at += 1;
                }
                literals.push(&text[start..at]);
            }
            _ => at += 1,
        }
    }
    literals
}

/// Magnitudes from here on are past `i64`; a whole number serde_json read as a double
/// below it was written with a fraction or an exponent.
pub const PAST_I64: f64 = 9_223_372_036_854_775_808.0;

/// Whether `literal` is a whole number written without a fraction or an exponent: past
/// [`PAST_I64`], one that no integer type held.
pub fn is_whole(literal: &str) -> bool {
    !literal.contains(['.', 'e', 'E'])
}

/// What a number serde_json read as the double `v` was written as.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Written {
    /// The double itself: written back, it reads as the same number.
    AsRead,
    /// The integer 0, written `-0`.
    Zero,
    /// A whole number past 64 bits, which no double holds.
    PastI64,
}

/// What the number serde_json read as `v` was written as; `literal` (its text, `None`
/// if unknown: then it is taken for whole) is asked only for a double past `i64` or a
/// negative zero.
pub fn written<'t>(v: f64, literal: impl FnOnce() -> Option<&'t str>) -> Written {
    let zero = v == 0.0 && v.is_sign_negative();
    if !zero && v.abs() < PAST_I64 || !literal().is_none_or(is_whole) {
        return Written::AsRead;
    }
    match zero {
        true => Written::Zero,
        false => Written::PastI64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_literals_are_the_numbers_outside_strings_in_order() {
        let text = r#"{"a-1":[1,-2.5e+3,"7 \" 8",true],"b\\":-0,"c":1E9}"#;
        assert_eq!(scan(text), ["1", "-2.5e+3", "-0", "1E9"]);
    }

    #[test]
    fn a_double_is_what_was_written_but_for_a_whole_number_past_64_bits_or_minus_0() {
        for (literal, want) in [
            ("123456789012345678901234567890", Written::PastI64),
            ("-9223372036854775809", Written::PastI64),
            ("1.2345678901234568e29", Written::AsRead),
            ("-0", Written::Zero),
            ("-0.0", Written::AsRead),
            ("-0e0", Written::AsRead),
            ("0.5", Written::AsRead),
            ("-1.5e3", Written::AsRead),
        ] {
            let v: f64 = literal.parse().unwrap();
            assert_eq!(written(v, || Some(literal)), want, "{literal}");
        }
        // The text is looked at only where it may matter.
        assert_eq!(written(0.5, || panic!("looked up")), Written::AsRead);
        assert_eq!(written(-1e300, || None), Written::PastI64);
    }

    #[test]
    fn only_a_literal_without_fraction_or_exponent_is_whole() {
        for (literal, whole) in [
            ("123456789012345678901234567890", true),
            ("-9223372036854775809", true),
            ("1.2345678901234568e29", false),
            ("1E+30", false),
            ("18446744073709551616.0", false),
        ] {
            assert_eq!(is_whole(literal), whole, "{literal}");
        }
    }
}
