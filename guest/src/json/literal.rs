//! Whether a number read as a double is written back as the number its text said.
//!
//! serde_json reads a number outside `u64` and `i64`, or one with a fraction or an
//! exponent, as the nearest double, and writes that double back in its shortest form. A
//! text with more digits than a double holds comes back as another number:
//! `123456789012345678901234567890` as `1.2345678901234568e29`. Every number this crate
//! reads may be written back (a tool's input after a backend's modify, an event re-encoded
//! for its subscriptions), and a policy must judge the value the tool gets; so such a
//! number is refused, never rounded. The texts a double does hold — every shortest form
//! (what JavaScript, Python and serde_json write), `750.0`, `1e300` — read as before.

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

/// Whether `value`, written back in its shortest form, is the number `literal` says.
pub fn writes_back_as(literal: &str, value: f64) -> bool {
    Decimal::of(literal) == Decimal::of(&format!("{value:e}"))
}

/// A decimal number as significant digits and a power of ten: `-1.50e2` is
/// `(true, "15", 1)`. Zero, however written, is `(false, "", 0)`.
#[derive(Debug, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    digits: String,
    exponent: i64,
}

impl Decimal {
    /// Reads a JSON number's text (or Rust's `{:e}` form, which is one).
    fn of(text: &str) -> Decimal {
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa, power) = unsigned
            .split_once(['e', 'E'])
            .map_or((unsigned, "0"), |(m, p)| (m, p));
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        // An exponent too long for an i64 is past any double either way; saturating keeps
        // it past.
        let power = power.strip_prefix('+').unwrap_or(power);
        let power = power.parse::<i64>().unwrap_or(if power.starts_with('-') {
            i64::MIN / 2
        } else {
            i64::MAX / 2
        });
        let all = format!("{whole}{fraction}");
        let significant = all.trim_start_matches('0');
        let digits = significant.trim_end_matches('0');
        if digits.is_empty() {
            return Decimal {
                negative: false,
                digits: String::new(),
                exponent: 0,
            };
        }
        let trailing = (significant.len() - digits.len()) as i64;
        Decimal {
            negative,
            digits: digits.to_owned(),
            exponent: power - fraction.len() as i64 + trailing,
        }
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
    fn a_number_is_written_back_as_itself_only_if_a_double_holds_its_text() {
        for (literal, held) in [
            ("0.1", true),
            ("0.30000000000000004", true),
            ("750.0", true),
            ("7.5e2", true),
            ("1E+300", true),
            ("-0.0", true),
            ("0e-5", true),
            ("-1e-7", true),
            ("1.8446744073709552e19", true),
            ("0.9210986675838745", true),
            ("123456789012345678901234567890", false),
            ("18446744073709551616", false),
            ("9007199254740993.0", false),
            ("0.10000000000000000001", false),
            ("1e-400", false),
        ] {
            let value: f64 = literal.parse().unwrap();
            assert_eq!(writes_back_as(literal, value), held, "{literal}");
        }
    }
}
