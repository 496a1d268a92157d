//! A harness payload's numbers, handed on as the harness wrote them.
//!
//! serde_json reads a whole number past 64 bits as the nearest double and the integer
//! `-0` as the double -0.0, and writes either back as a float ([`number_literal`]). The
//! adapter builds the event every backend judges from the payload, and writes a tool's
//! whole input back after a `modify`: a backend would judge another number than the tool
//! gets, and a `modify` of one member would change another. So, as the component does
//! with an event, a whole number past 64 bits is refused, naming its pointer, and `-0` is
//! the integer 0. Most payloads hold neither: a look at the bytes decides whether the
//! numbers are read a second time, one by one.

use ahp_vocab::number_literal::{self, Literals, Written};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// Makes each `-0` in `value`, read from `json`, the integer 0; or names the pointer of
/// a whole number past 64 bits in it.
pub fn exact(json: &str, value: &mut Value) -> Result<(), String> {
    if !may_be_misread(json.as_bytes()) {
        return Ok(());
    }
    let mut walk = Walk {
        literals: Literals::of(json),
        path: Vec::new(),
        past_64: None,
    };
    let mut reader = serde_json::Deserializer::from_str(json);
    let zeros = (&mut walk).deserialize(&mut reader);
    if let Some(pointer) = walk.past_64 {
        return Err(format!(
            "holds a whole number past 64 bits at {pointer:?}, which a backend would read as another number"
        ));
    }
    // The text was read once already: the second reading fails only at such a number.
    debug_assert!(zeros.is_ok(), "{zeros:?}");
    if let Ok(zeros) = zeros {
        zeros.apply(value);
    }
    Ok(())
}

/// Whether `json` may hold a number serde_json misreads: a run of 19 digits (no whole
/// number below 2^63 has more than 19) or a `-0` that is not the start of `-0.5` or of
/// `-01` in a date. A yes inside a string only costs the second reading.
fn may_be_misread(json: &[u8]) -> bool {
    let mut digits = 0;
    json.iter().enumerate().any(|(at, &byte)| {
        digits = if byte.is_ascii_digit() { digits + 1 } else { 0 };
        let starts_a_value = |before: &u8| b":,[ \t\r\n".contains(before);
        let ends_there = |after: &u8| !matches!(after, b'0'..=b'9' | b'.' | b'e' | b'E');
        digits >= 19
            || byte == b'-'
                && json.get(at + 1) == Some(&b'0')
                && json.get(at + 2).is_none_or(ends_there)
                && at
                    .checked_sub(1)
                    .and_then(|b| json.get(b))
                    .is_none_or(starts_a_value)
    })
}

/// Where a value's `-0`s are, as a tree of the members and items down to them: each
/// member name is kept once, however many zeros lie below it. A pointer string per zero
/// cost their count times their depth's names (a payload of 200 KB, a long name above
/// 40,000 zeros, took gigabytes: the hook aborted with no answer and no record).
#[derive(Debug)]
enum Zeros {
    None,
    /// The value is one.
    Here,
    /// Some are in these members or items.
    Within(Vec<(Step, Zeros)>),
}

#[derive(Debug)]
enum Step {
    Member(String),
    Item(usize),
}

impl Zeros {
    /// A container's: none where none of its members or items holds one.
    fn within(steps: Vec<(Step, Zeros)>) -> Zeros {
        match steps.is_empty() {
            true => Zeros::None,
            false => Zeros::Within(steps),
        }
    }

    /// Makes each zero of `value` it names the integer 0.
    fn apply(self, value: &mut Value) {
        match self {
            Zeros::None => {}
            Zeros::Here => *value = Value::from(0u64),
            Zeros::Within(steps) => {
                for (step, zeros) in steps {
                    let inner = match step {
                        Step::Member(name) => value.get_mut(name.as_str()),
                        Step::Item(index) => value.get_mut(index),
                    };
                    if let Some(inner) = inner {
                        zeros.apply(inner);
                    }
                }
            }
        }
    }
}

/// The second reading: each number's literal by its place in text order.
struct Walk<'t> {
    literals: Literals<'t>,
    /// The member names and indexes down to the value being read, for the pointer of a
    /// whole number past 64 bits.
    path: Vec<String>,
    /// The pointer of a whole number past 64 bits, where the reading stopped.
    past_64: Option<String>,
}

impl Walk<'_> {
    fn pointer(&self) -> String {
        let escaped = |step: &String| step.replace('~', "~0").replace('/', "~1");
        self.path
            .iter()
            .map(|step| format!("/{}", escaped(step)))
            .collect()
    }
}

impl<'de> DeserializeSeed<'de> for &mut Walk<'_> {
    type Value = Zeros;

    fn deserialize<D: Deserializer<'de>>(self, reader: D) -> Result<Zeros, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &mut Walk<'_> {
    type Value = Zeros;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Zeros, E> {
        Ok(Zeros::None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Zeros, E> {
        self.literals.read += 1;
        Ok(Zeros::None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Zeros, E> {
        self.literals.read += 1;
        Ok(Zeros::None)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Zeros, E> {
        let n = self.literals.read;
        self.literals.read += 1;
        match number_literal::written(v, || self.literals.nth(n)) {
            Written::AsRead => Ok(Zeros::None),
            Written::Zero => Ok(Zeros::Here),
            Written::PastI64 => {
                self.past_64 = Some(self.pointer());
                Err(E::custom("a whole number past 64 bits"))
            }
        }
    }
    fn visit_str<E>(self, _: &str) -> Result<Zeros, E> {
        Ok(Zeros::None)
    }
    fn visit_unit<E>(self) -> Result<Zeros, E> {
        Ok(Zeros::None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Zeros, A::Error> {
        let mut within = Vec::new();
        for index in 0.. {
            self.path.push(index.to_string());
            let item = items.next_element_seed(&mut *self)?;
            self.path.pop();
            match item {
                None => break,
                Some(Zeros::None) => {}
                Some(zeros) => within.push((Step::Item(index), zeros)),
            }
        }
        Ok(Zeros::within(within))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Zeros, A::Error> {
        // The `-0`s of each member's value, by name: the harness's reader keeps a
        // repeated member's last value, as serde_json's does, so a later member of the
        // same name replaces an earlier one's, with its own or none.
        let mut found = std::collections::HashMap::new();
        while let Some(name) = members.next_key::<String>()? {
            self.path.push(name);
            let zeros = members.next_value_seed(&mut *self)?;
            let name = self.path.pop().unwrap_or_default();
            found.insert(name, zeros);
        }
        let within = found
            .into_iter()
            .filter(|(_, zeros)| !matches!(zeros, Zeros::None))
            .map(|(name, zeros)| (Step::Member(name), zeros))
            .collect();
        Ok(Zeros::within(within))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(json: &str) -> Result<Value, String> {
        let mut value = serde_json::from_str(json).unwrap();
        exact(json, &mut value).map(|()| value)
    }

    /// Whatever the harness wrote is what serde_json wrote back, but `-0`, the integer 0.
    #[test]
    fn minus_zero_is_the_integer_0_and_every_other_number_as_written() {
        for (json, written) in [
            (r#"{"a":-0}"#, r#"{"a":0}"#),
            (
                r#"{"a":[1,-0 ,{"b/c~":-0}],"d":-0.0,"e":"-0","f":"2024-01-05"}"#,
                r#"{"a":[1,0,{"b/c~":0}],"d":-0.0,"e":"-0","f":"2024-01-05"}"#,
            ),
            ("-0", "0"),
            // The harness's reader keeps a repeated member's last value, as serde_json's.
            (r#"{"a":-0,"a":"rm"}"#, r#"{"a":"rm"}"#),
            (r#"{"a":[-0],"a":["rm","-rf"]}"#, r#"{"a":["rm","-rf"]}"#),
            (r#"{"a":"rm","a":-0}"#, r#"{"a":0}"#),
            (
                r#"{"a":{"b":-0},"c":1,"a":{"b":"x","d":-0}}"#,
                r#"{"a":{"b":"x","d":0},"c":1}"#,
            ),
            (r#"{"a":-0.5,"b":-0e3}"#, r#"{"a":-0.5,"b":-0.0}"#),
            (
                r#"{"n":[18446744073709551615,-9223372036854775808,1e300,0.1]}"#,
                r#"{"n":[18446744073709551615,-9223372036854775808,1e+300,0.1]}"#,
            ),
        ] {
            let read = read(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(serde_json::to_string(&read).unwrap(), written, "{json}");
        }
    }

    /// A whole number past 64 bits is named at its pointer, escaped as RFC 6901 says.
    #[test]
    fn a_whole_number_past_64_bits_is_refused_at_its_pointer() {
        for (json, pointer) in [
            (
                r#"{"tool_input":{"account":123456789012345678901234567890}}"#,
                "/tool_input/account",
            ),
            (r#"[0,"x",{"a/b~":[-92233720368547758090]}]"#, "/2/a~1b~0/0"),
            ("18446744073709551616", ""),
        ] {
            let refused = read(json).expect_err(json);
            assert_eq!(
                refused,
                format!("holds a whole number past 64 bits at \"{pointer}\", which a backend would read as another number"),
            );
        }
        // Written with a fraction or an exponent, it is a float already.
        assert!(read(r#"{"a":1.2345678901234568e29,"b":18446744073709551616.0}"#).is_ok());
    }

    /// Each member name above the zeros is kept once: 40,000 of them under a name of a
    /// megabyte (a payload of 1.1 MB) once took a pointer string each, 40 GB.
    #[test]
    fn many_zeros_under_a_long_name_cost_the_payload_s_length() {
        let name = "k".repeat(1 << 20);
        let zeros = vec!["-0"; 40_000].join(",");
        let json = format!(r#"{{"tool_input":{{"{name}":[{zeros}],"b":-0}}}}"#);
        let read = read(&json).expect("read");
        let items = read["tool_input"][&name].as_array().expect("the list");
        assert_eq!(items.len(), 40_000);
        assert!(items.iter().all(|zero| zero.as_u64() == Some(0)));
        assert_eq!(read["tool_input"]["b"], json!(0));
    }

    #[test]
    fn only_a_text_that_may_hold_either_is_read_again() {
        for (json, may) in [
            (r#"{"a":-0}"#, true),
            (r#"[-0]"#, true),
            ("-0", true),
            (r#"{"a": -0 }"#, true),
            (r#"{"a":"1234567890123456789"}"#, true),
            (
                r#"{"a":-0.5,"b":-0e1,"c":"x-0","d":"2024-01-05","e":-10}"#,
                false,
            ),
            (r#"{"a":123456789012345678}"#, false),
        ] {
            assert_eq!(may_be_misread(json.as_bytes()), may, "{json}");
        }
    }
}
