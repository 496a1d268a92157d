//! Strict JSON text → a tree: an object that names a member twice is rejected, at any
//! depth.
//!
//! RFC 8259 leaves repeated names to the reader, and serde_json's `Value` keeps the last
//! one. Every input this crate reads (registration, event, backend reply) is a security
//! decision, and two readers that resolve a repeat differently see two different
//! documents: a reply with `"result"` twice could be a deny to one and an allow to
//! another. So a repeat is never resolved; it is an error naming the JSON Pointer of the
//! repeated member.
//!
//! Everything else is serde_json's own reading, unchanged: the same grammar and escapes,
//! its nesting limit (127 levels of arrays and objects; the 128th is refused), nothing
//! but whitespace after the value. Names are compared after unescaping (`"a"` and
//! `"\u0061"` are the same name). Numbers are read correctly rounded, because the
//! workspace turns on serde_json's `float_roundtrip`: its default reading is faster but
//! can miss by one unit (0.9210986675838745 became 0.9210986675838744), and a backend's
//! modify value would reach the tool changed.
//!
//! A whole number past 64 bits (`123456789012345678901234567890`), which would be written
//! back as a float, another number, is refused, naming its pointer ([`literal`]). Text
//! serde_json refuses is named at the pointer of the value it was reading (a number out
//! of range, `1e400`, at that number's).
//!
//! [`read`] gives a [`Node`] tree that borrows from the text, for checks that only look
//! (the event of every hook call); [`parse`] gives a `Value` that owns everything. A
//! backend's reply is read by [`read_keeping_inexact`]: only its effects' values are
//! written back, and a number past 64 bits elsewhere in it (extensions, error data,
//! members nobody reads) is valid JSON that changes nothing, so it is refused only where
//! a value is built from it ([`Node::to_value`]).

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;

use ahp_vocab::number_literal::{self as literal, Literals, Written};

/// Why a text is not strict JSON.
#[derive(Debug)]
pub enum Error {
    /// Not JSON at all, as serde_json reads it.
    Syntax(Syntax),
    /// Well-formed, but an object names a member twice.
    Duplicate(Duplicate),
    /// Well-formed, but a whole number past 64 bits, which would be written back as
    /// another number.
    Inexact(Inexact),
    /// More than [`MAX_VALUES`] weighed values ([`MAX_PARSED_VALUES`] for [`parse`] and
    /// [`read_parseable`]):
    /// read and worked on, they would run the component out of memory (an engine
    /// failure) well before the text's own bounds.
    TooMany,
}

/// The most values one text may hold, weighed by what they cost the component's memory
/// once read and worked on: a scalar 1, a member name 1, an array [`ARRAY_WEIGHT`], an
/// object [`OBJECT_WEIGHT`]. Four million: an array of four million numbers is read,
/// checked and sent within its 256 MiB, five million ran it out of memory, as did 1.2
/// million one-member objects (12 million here).
pub const MAX_VALUES: usize = 4_000_000;

/// What an array weighs against [`MAX_VALUES`]: its own allocation and entry.
pub const ARRAY_WEIGHT: usize = 4;

/// What an object weighs against [`MAX_VALUES`]: as a `Value`, each object is a B-tree
/// node of its own, some 400 bytes in the component where a number takes 24. An event
/// of 333,000 one-member objects (weighing 2 million at 4 an object) ran the component
/// out of memory once its content was lowered and a modification applied (three copies
/// of its document); 261,000 did not, and at 8 an object 200,000 reach the limit.
pub const OBJECT_WEIGHT: usize = 8;

/// The rule a text with more than [`MAX_VALUES`] weighed values breaks.
pub const TOO_MANY_RULE: &str = "must hold at most 4000000 JSON values (an array counting 4, \
     an object 8, a member name 1)";

/// The most weighed values a text [`parse`]d into a [`Value`] may hold: half of
/// [`MAX_VALUES`], because the tree read and the `Value` built from it are held at once
/// (a registration of 2.5 million numbers ran the component out of memory; 2 million
/// did not).
pub const MAX_PARSED_VALUES: usize = MAX_VALUES / 2;

/// The rule a text [`parse`]d with more than [`MAX_PARSED_VALUES`] breaks.
pub const TOO_MANY_PARSED_RULE: &str = "must hold at most 2000000 JSON values (an array \
     counting 4, an object 8, a member name 1)";

/// A member whose name appears more than once in its object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Duplicate {
    /// JSON Pointer (RFC 6901) of the repeated member, e.g. `/result/effects/0/type`.
    pub pointer: String,
    /// Its name, unescaped.
    pub member: String,
}

/// Text serde_json refuses, and where.
#[derive(Debug)]
pub struct Syntax {
    /// serde_json's reason, with its line and column.
    pub error: serde_json::Error,
    /// JSON Pointer (RFC 6901) of the innermost value being read when it stopped, e.g.
    /// `/hooks/0/subscriptions/0/timeoutMs` for a number out of range there: the
    /// object whose member name or separator broke, or `""` (the root, text after it,
    /// or text cut short).
    pub pointer: String,
}

/// A whole number past 64 bits, which would be written back as a float: another number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inexact {
    /// JSON Pointer (RFC 6901) of the number, e.g. `/tool/input/account`. Its digits
    /// are not kept: a problem never repeats a value, which could be a secret.
    pub pointer: String,
}

impl Inexact {
    /// The rule the number breaks.
    pub const RULE: &'static str =
        "must be a whole number of at most 64 bits: a larger one would be passed on as another number";
}

/// One JSON value read by [`read`]. A string or name without escapes borrows its text,
/// so reading a document allocates little more than its arrays and objects.
#[derive(Clone, Debug)]
pub enum Node<'a> {
    Null,
    Bool(bool),
    Number(Number),
    /// A whole number past 64 bits, kept by [`read_keeping_inexact`] only as the fact of
    /// it: no `Value` holds it exactly, so [`Node::to_value`] refuses it.
    Inexact,
    Text(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    Object(Object<'a>),
}

/// An object's members in text order, each name once.
#[derive(Clone, Debug)]
pub struct Object<'a>(Vec<(Cow<'a, str>, Node<'a>)>);

impl<'a> Object<'a> {
    /// The member named `name`.
    pub fn get(&self, name: &str) -> Option<&Node<'a>> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The member names, in text order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(name, _)| name.as_ref())
    }

    /// The members, in text order.
    pub fn members(&self) -> impl Iterator<Item = (&str, &Node<'a>)> {
        self.0.iter().map(|(name, value)| (name.as_ref(), value))
    }
}

impl<'a> Node<'a> {
    /// The member named `name`, if this is an object.
    pub fn get(&self, name: &str) -> Option<&Node<'a>> {
        self.as_object()?.get(name)
    }

    pub fn as_object(&self) -> Option<&Object<'a>> {
        match self {
            Node::Object(object) => Some(object),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Node<'a>]> {
        match self {
            Node::Array(items) => Some(items),
            _ => None,
        }
    }

    /// This number as an `i64`, read the JSON Schema way ([`integer`]: `-32003.0` is
    /// -32003).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Node::Number(n) => integer(n),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Text(text) => Some(text),
            _ => None,
        }
    }

    pub fn is_string(&self) -> bool {
        matches!(self, Node::Text(_))
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Node::Object(_))
    }

    pub fn is_array(&self) -> bool {
        matches!(self, Node::Array(_))
    }

    pub fn is_boolean(&self) -> bool {
        matches!(self, Node::Bool(_))
    }

    /// Whether this is a non-negative integer, read the JSON Schema way ([`integer`]:
    /// `3.0` is one).
    pub fn is_u64(&self) -> bool {
        matches!(self, Node::Number(n) if integer::<u64>(n).is_some())
    }

    /// Whether this is a whole number past the largest count held ([`is_too_large`]).
    pub fn is_too_large(&self) -> bool {
        matches!(self, Node::Number(n) if is_too_large(n))
    }

    /// The same document as an owned `Value`, unless it holds a whole number past 64
    /// bits ([`Node::Inexact`]): written back, that would be another number, so it is
    /// refused at its pointer.
    pub fn to_value(&self) -> Result<Value, Inexact> {
        // The pointer is assembled on the way back up, one segment per level.
        let under = |segment: String| {
            move |inner: Inexact| Inexact {
                pointer: format!("/{segment}{}", inner.pointer),
            }
        };
        Ok(match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Number(n) => Value::Number(n.clone()),
            Node::Inexact => {
                return Err(Inexact {
                    pointer: String::new(),
                })
            }
            Node::Text(text) => Value::String(text.to_string()),
            Node::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| item.to_value().map_err(under(i.to_string())))
                    .collect::<Result<_, _>>()?,
            ),
            Node::Object(Object(members)) => Value::Object(
                members
                    .iter()
                    .map(|(name, value)| {
                        let value = value.to_value().map_err(under(segment(name)))?;
                        Ok((name.to_string(), value))
                    })
                    .collect::<Result<Map<_, _>, _>>()?,
            ),
        })
    }
}

/// `n` as an integer of type `T`, read as JSON Schema reads `"type": "integer"`: any
/// number with a zero fractional part (2020-12 Validation §6.1.1), so `750`, `750.0` and
/// `7.5e2` are all 750. serde_json keeps the last two as floats, which its own `as_u64`
/// and `as_i64` refuse: a `timeoutMs` the schema accepts would be refused, and a JSON-RPC
/// error coded `-32003.0` taken for a malformed error object. Every integer field of a
/// registration, an event or a reply is read through this. `None` for a fraction, or a
/// value outside `T`.
pub fn integer<T: TryFrom<i64> + TryFrom<u64>>(n: &Number) -> Option<T> {
    if let Some(i) = n.as_i64() {
        return T::try_from(i).ok();
    }
    if let Some(u) = n.as_u64() {
        return T::try_from(u).ok();
    }
    let f = n.as_f64().filter(|f| f.fract() == 0.0)?;
    // In [-2^63, 0) and [0, 2^64) the casts are exact; beyond, no `T` here holds it.
    if (i64::MIN as f64..0.0).contains(&f) {
        T::try_from(f as i64).ok()
    } else if (0.0..2f64.powi(64)).contains(&f) {
        T::try_from(f as u64).ok()
    } else {
        None
    }
}

/// Whether `n` is a whole number past the largest count held (`u64::MAX`): an integer to
/// JSON Schema, so refused for its size, not as no integer. `u64::MAX` itself is held,
/// though as a float it rounds up to 2^64.
pub fn is_too_large(n: &Number) -> bool {
    n.as_u64().is_none()
        && n.as_f64()
            .is_some_and(|f| f.fract() == 0.0 && f >= 2f64.powi(64))
}

/// `v` as an integer of type `T` ([`integer`]); `None` for anything but such a number.
pub fn integer_value<T: TryFrom<i64> + TryFrom<u64>>(v: &Value) -> Option<T> {
    v.as_number().and_then(integer)
}

/// Parses one JSON text, rejecting repeated member names and whole numbers past 64 bits
/// at any depth.
pub fn parse(text: &str) -> Result<Value, Error> {
    read_with(text, Past64::Keep, MAX_PARSED_VALUES)?
        .to_value()
        .map_err(Error::Inexact)
}

/// [`parse`], for a text that is only read, never written back (a registration): a
/// whole number past 64 bits is kept as the nearest double, as serde_json reads it, so
/// that a count can be refused for its size where it is read, and a member nobody reads
/// (an unknown field, ignored) is no reason to refuse the document.
pub fn parse_to_read(text: &str) -> Result<Value, Error> {
    read_with(text, Past64::Round, MAX_PARSED_VALUES)?
        .to_value()
        .map_err(Error::Inexact)
}

/// Reads one JSON text into a tree borrowing from it, rejecting repeated member names and
/// whole numbers past 64 bits at any depth.
pub fn read(text: &str) -> Result<Node<'_>, Error> {
    read_with(text, Past64::Refuse, MAX_VALUES)
}

/// [`read`], but refusing a text [`parse`] would refuse for its weight: for a text read
/// to be checked and parsed whole later (an event, whose document is built again from
/// its text when a modification or content selection needs it), so that the later
/// [`parse`] cannot fail on a text this accepted.
pub fn read_parseable(text: &str) -> Result<Node<'_>, Error> {
    read_with(text, Past64::Refuse, MAX_PARSED_VALUES)
}

/// [`read`], but a whole number past 64 bits is kept as [`Node::Inexact`], refused only
/// where a value is built from it: for a text only parts of which are written back.
pub fn read_keeping_inexact(text: &str) -> Result<Node<'_>, Error> {
    read_with(text, Past64::Keep, MAX_VALUES)
}

/// Reads `text`, which may hold at most `max_values` weighed values.
/// What the reader does with a whole number past 64 bits, which no `Value` holds exactly.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Past64 {
    /// Refused where it is read ([`Fault::Inexact`]).
    Refuse,
    /// Kept as [`Node::Inexact`], refused only where a value is built from it.
    Keep,
    /// Kept as the nearest double ([`parse_to_read`]).
    Round,
}

fn read_with(text: &str, past_64: Past64, max_values: usize) -> Result<Node<'_>, Error> {
    let mut reading = Reading {
        found: None,
        broken_at: Vec::new(),
        numbers: Literals::of(text),
        past_64,
        values_left: max_values,
    };
    let mut reader = serde_json::Deserializer::from_str(text);
    let parsed = Strict {
        reading: &mut reading,
    }
    .deserialize(&mut reader)
    .and_then(|value| reader.end().map(|()| value));
    match (parsed, reading.found) {
        (_, Some(found)) => Err(found.into_error()),
        (Ok(value), None) => Ok(value),
        // Text cut short is not broken at any one value: it is named at the root.
        (Err(error), None) => Err(Error::Syntax(Syntax {
            pointer: match error.classify() {
                serde_json::error::Category::Eof => String::new(),
                _ => pointer(&reading.broken_at),
            },
            error,
        })),
    }
}

/// The JSON Pointer of escaped segments, innermost first.
fn pointer(segments: &[String]) -> String {
    segments.iter().rev().map(|s| format!("/{s}")).collect()
}

/// A fault found deep inside the text. The pointer is assembled while the error travels
/// back up, one segment per level, so a text without faults costs no path bookkeeping.
struct Found {
    fault: Fault,
    /// Escaped pointer segments, innermost first.
    segments: Vec<String>,
}

enum Fault {
    /// The repeated member's name.
    Duplicate(String),
    /// A whole number past 64 bits.
    Inexact,
    /// One value more than the reading may hold.
    TooMany,
}

impl Found {
    fn into_error(self) -> Error {
        let pointer = pointer(&self.segments);
        match self.fault {
            Fault::Duplicate(member) => Error::Duplicate(Duplicate { pointer, member }),
            Fault::Inexact => Error::Inexact(Inexact { pointer }),
            Fault::TooMany => Error::TooMany,
        }
    }
}

/// What one reading shares across its levels: the fault that made it fail, if one did,
/// and the numbers read.
struct Reading<'t> {
    found: Option<Found>,
    /// Where serde_json's own error arose, escaped segments innermost first (as in
    /// [`Found`]).
    broken_at: Vec<String>,
    numbers: Literals<'t>,
    /// What becomes of a whole number past 64 bits.
    past_64: Past64,
    /// How many more values may be read ([`MAX_VALUES`] in all, or
    /// [`MAX_PARSED_VALUES`]).
    values_left: usize,
}

/// Reads one value into its reading's notes.
struct Strict<'f, 't> {
    reading: &'f mut Reading<'t>,
}

impl<'t> Strict<'_, 't> {
    /// The reader for a child value, sharing this one's notes.
    fn child(&mut self) -> Strict<'_, 't> {
        Strict {
            reading: &mut *self.reading,
        }
    }

    /// A child's error, passed up: its segment is added to the pointer of the fault, or
    /// of serde_json's own error.
    fn up<E>(&mut self, segment: impl FnOnce() -> String, error: E) -> E {
        let segments = match self.reading.found.as_mut() {
            Some(found) => &mut found.segments,
            None => &mut self.reading.broken_at,
        };
        segments.push(segment());
        error
    }

    /// Takes `units` from what the text may still hold; fails the value on
    /// [`Fault::TooMany`] if that is not enough.
    fn spend<E: de::Error>(&mut self, units: usize) -> Result<(), E> {
        match self.reading.values_left.checked_sub(units) {
            Some(left) => {
                self.reading.values_left = left;
                Ok(())
            }
            None => Err(self.fail(Fault::TooMany, Vec::new())),
        }
    }

    /// Fails this value on `fault`; its parents add their segments.
    fn fail<E: de::Error>(&mut self, fault: Fault, segments: Vec<String>) -> E {
        self.reading.found = Some(Found { fault, segments });
        E::custom("strict JSON")
    }
}

/// A member name as one JSON Pointer segment (RFC 6901 §3): `~` and `/` escaped. The one
/// escaping every problem's pointer uses.
pub(crate) fn segment(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

impl<'de> DeserializeSeed<'de> for Strict<'_, '_> {
    type Value = Node<'de>;

    fn deserialize<D: Deserializer<'de>>(mut self, reader: D) -> Result<Node<'de>, D::Error> {
        self.spend(1)?;
        reader.deserialize_any(self)
    }
}

/// Up to this many members, a name is looked for among the earlier ones one by one;
/// a larger object keeps a set, so a huge object costs no quadratic time.
const SCANNED_MEMBERS: usize = 16;

/// Builds the values serde_json's own visitor builds, as [`Node`]s.
impl<'de> Visitor<'de> for Strict<'_, '_> {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Node<'de>, E> {
        self.reading.numbers.read += 1;
        Ok(Node::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Node<'de>, E> {
        self.reading.numbers.read += 1;
        Ok(Node::Number(v.into()))
    }

    /// A double, kept unless its text was a whole number past 64 bits ([`literal`]), and
    /// the integer 0 where the text was `-0`: only a double that large, or a negative
    /// zero, is looked up in the text.
    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<Node<'de>, E> {
        let numbers = &mut self.reading.numbers;
        let n = numbers.read;
        numbers.read += 1;
        match literal::written(v, || numbers.nth(n)) {
            Written::Zero => Ok(Node::Number(0u64.into())),
            Written::PastI64 if self.reading.past_64 == Past64::Keep => Ok(Node::Inexact),
            Written::PastI64 if self.reading.past_64 != Past64::Round => {
                Err(self.fail(Fault::Inexact, Vec::new()))
            }
            _ => Ok(Number::from_f64(v).map_or(Node::Null, Node::Number)),
        }
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::Text(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Node<'de>, E> {
        Ok(Node::Text(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Node<'de>, E> {
        Ok(Node::Text(Cow::Owned(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut items: A) -> Result<Node<'de>, A::Error> {
        // Counted once as a value already.
        self.spend(ARRAY_WEIGHT - 1)?;
        let mut array = Vec::new();
        while let Some(item) = items
            .next_element_seed(self.child())
            .map_err(|e| self.up(|| array.len().to_string(), e))?
        {
            array.push(item);
        }
        Ok(Node::Array(array))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut members: A) -> Result<Node<'de>, A::Error> {
        self.spend(OBJECT_WEIGHT - 1)?;
        let mut object = Vec::new();
        let mut names: Option<BTreeSet<Cow<'de, str>>> = None;
        while let Some(name) = members.next_key_seed(Name)? {
            self.spend(1)?;
            let value = members
                .next_value_seed(self.child())
                .map_err(|e| self.up(|| segment(&name), e))?;
            let repeated = match &mut names {
                Some(names) => !names.insert(name.clone()),
                None => object.iter().any(|(earlier, _)| *earlier == name),
            };
            if repeated {
                let member = name.into_owned();
                let segments = vec![segment(&member)];
                return Err(self.fail(Fault::Duplicate(member), segments));
            }
            object.push((name, value));
            if names.is_none() && object.len() == SCANNED_MEMBERS {
                names = Some(object.iter().map(|(name, _)| name.clone()).collect());
            }
        }
        Ok(Node::Object(Object(object)))
    }
}

/// Reads a member name, borrowing it when it has no escapes.
struct Name;

impl<'de> DeserializeSeed<'de> for Name {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, reader: D) -> Result<Cow<'de, str>, D::Error> {
        reader.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Name {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn duplicate(text: &str) -> Duplicate {
        match parse(text) {
            Err(Error::Duplicate(found)) => found,
            other => panic!("{text}: expected a duplicate, got {other:?}"),
        }
    }

    /// A text of at most four million weighed values is read; one more is refused,
    /// however small the text: each `0` weighs 1, each `{"a":0}` 10 (the object 8, its
    /// name and its value 1 each).
    #[test]
    fn at_most_four_million_weighed_values_are_read() {
        let array = |element: &str, elements: usize| {
            format!("[{}{element}]", format!("{element},").repeat(elements - 1))
        };
        let zeros = MAX_VALUES - ARRAY_WEIGHT;
        assert!(read(&array("0", zeros)).is_ok());
        assert!(matches!(read(&array("0", zeros + 1)), Err(Error::TooMany)));
        let objects = (MAX_VALUES - ARRAY_WEIGHT) / 10;
        assert!(read(&array(r#"{"a":0}"#, objects)).is_ok());
        assert!(matches!(
            read(&array(r#"{"a":0}"#, objects + 1)),
            Err(Error::TooMany)
        ));
        let nested = format!(
            r#"{{"tool":{{"input":{{"xs":{}}}}}}}"#,
            array("0", MAX_VALUES)
        );
        assert!(matches!(read(&nested), Err(Error::TooMany)));
        // Parsed into a `Value` (a registration), half as many: both trees are held.
        let zeros = MAX_PARSED_VALUES - ARRAY_WEIGHT;
        assert!(parse(&array("0", zeros)).is_ok());
        assert!(read(&array("0", zeros + 1)).is_ok());
        assert!(matches!(parse(&array("0", zeros + 1)), Err(Error::TooMany)));
        assert!(TOO_MANY_PARSED_RULE.contains(&MAX_PARSED_VALUES.to_string()));
        assert!(TOO_MANY_RULE.contains(&MAX_VALUES.to_string()));
    }

    #[test]
    fn a_repeat_is_named_by_its_pointer_at_every_depth() {
        for (text, pointer, member) in [
            (r#"{"a":1,"a":2}"#, "/a", "a"),
            (r#"{"a":1,"b":{"c":true,"c":false}}"#, "/b/c", "c"),
            (r#"[0,{"x":[{"y":1},{"y":1,"y":1}]}]"#, "/1/x/1/y", "y"),
            (
                r#"{"result":{"effects":[{"type":"deny","type":"allow"}]}}"#,
                "/result/effects/0/type",
                "type",
            ),
            (r#"{"a/b":{"~":0,"~":0}}"#, "/a~1b/~0", "~"),
            (r#"{"":0,"":1}"#, "/", ""),
        ] {
            let found = duplicate(text);
            assert_eq!(found.pointer, pointer, "{text}");
            assert_eq!(found.member, member, "{text}");
        }
    }

    #[test]
    fn names_are_compared_unescaped() {
        assert_eq!(duplicate(r#"{"a":1,"\u0061":2}"#).pointer, "/a");
        assert_eq!(duplicate(r#"{"é":1,"\u00e9":2}"#).pointer, "/é");
    }

    #[test]
    fn a_repeat_in_a_large_object_is_found() {
        let members: Vec<String> = (0..40).map(|i| format!(r#""m{i}":{i}"#)).collect();
        let text = format!("{{{}}}", members.join(","));
        let read = parse(&text).expect("no repeat");
        assert_eq!(read, serde_json::from_str::<Value>(&text).unwrap());
        for repeat in [0, 15, 16, 39] {
            let repeated = format!(r#"{{"x":{{{},"m{repeat}":true}}}}"#, members.join(","));
            assert_eq!(duplicate(&repeated).pointer, format!("/x/m{repeat}"));
        }
    }

    #[test]
    fn a_read_tree_borrows_what_has_no_escapes() {
        let text = r#"{"plain":"text","\u0065scaped":"line\n"}"#;
        let Ok(Node::Object(Object(members))) = read(text) else {
            panic!("an object");
        };
        let borrowed = |c: &Cow<str>| matches!(c, Cow::Borrowed(_));
        let Node::Text(plain) = &members[0].1 else {
            panic!("a string");
        };
        let Node::Text(escaped) = &members[1].1 else {
            panic!("a string");
        };
        assert_eq!(
            (borrowed(&members[0].0), borrowed(plain)),
            (true, true),
            "plain name and value"
        );
        assert_eq!(
            (members[1].0.as_ref(), escaped.as_ref()),
            ("escaped", "line\n")
        );
        assert!(!borrowed(&members[1].0) && !borrowed(escaped));
    }

    #[test]
    fn the_same_name_in_different_objects_is_no_repeat() {
        let text = r#"{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}"#;
        let strict = parse(text).expect("no object repeats a name");
        assert_eq!(strict, serde_json::from_str::<Value>(text).unwrap());
    }

    /// Apart from repeats (and the integer `-0`, below), strict reading is serde_json's
    /// reading: same values, same rejections (grammar, numbers, escapes, trailing text,
    /// nesting limit).
    #[test]
    fn otherwise_it_reads_exactly_as_serde_json() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let texts = [
            r#"{"n":[0,-0.0,1.5,-1e-7,1E300,18446744073709551615,-9223372036854775808]}"#
                .to_owned(),
            r#"{"s":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}"#.to_owned(),
            r#"{"s":"\ud800"}"#.to_owned(),
            "1E400".to_owned(),
            r#"[null,true,false,"",{},[]]"#.to_owned(),
            " \n\t{} \r\n".to_owned(),
            "{} {}".to_owned(),
            "{},".to_owned(),
            "[1,]".to_owned(),
            r#"{"a":1,}"#.to_owned(),
            "01".to_owned(),
            "NaN".to_owned(),
            "'a'".to_owned(),
            "\"\u{1}\"".to_owned(),
            String::new(),
            nested(127),
            nested(128),
            nested(129),
            format!(r#"{}1{}"#, r#"{"a":"#.repeat(128), "}".repeat(128)),
            format!(r#"{}1{}"#, r#"{"a":"#.repeat(129), "}".repeat(129)),
        ];
        // The limit the module's doc states: 127 levels, not 128.
        assert!(parse(&nested(127)).is_ok() && parse(&nested(128)).is_err());
        for text in &texts {
            let strict = parse(text).map_err(|e| match e {
                Error::Syntax(e) => e.error.to_string(),
                Error::Duplicate(d) => panic!("{text}: no repeat, got {d:?}"),
                Error::Inexact(n) => panic!("{text}: every number held, got {n:?}"),
                Error::TooMany => panic!("{text}: a few values, read as too many"),
            });
            let lenient = serde_json::from_str::<Value>(text).map_err(|e| e.to_string());
            assert_eq!(
                strict.is_ok(),
                lenient.is_ok(),
                "{text}: {strict:?} / {lenient:?}"
            );
            if let (Ok(strict), Ok(lenient)) = (strict, lenient) {
                assert_eq!(strict, lenient, "{text}");
            }
        }
    }

    /// Every number is the double nearest its text, as Rust's own `f64` parser (correctly
    /// rounded) reads it: serde_json does so only with `float_roundtrip`.
    #[test]
    fn numbers_are_read_correctly_rounded() {
        for text in [
            "0.9210986675838745",
            "0.1",
            "2.2250738585072011e-308",
            "1.7976931348623157e308",
            "4.9406564584124654e-324",
            "9007199254740993.0",
            "-0.000000000000000000000000000000000000001234567890123456789",
        ] {
            let read = parse(text).expect("a number");
            assert_eq!(read.as_f64(), text.parse::<f64>().ok(), "{text}");
        }
    }

    /// A number with a zero fraction is an integer, whichever way it is written; one
    /// with a fraction, or outside the type, is not.
    #[test]
    fn integers_are_read_the_json_schema_way() {
        let number = |text: &str| match parse(text) {
            Ok(Value::Number(n)) => n,
            other => panic!("{text}: {other:?}"),
        };
        for (text, want) in [
            ("750", Some(750)),
            ("750.0", Some(750)),
            ("7.5e2", Some(750)),
            ("1e3", Some(1000)),
            ("1E+3", Some(1000)),
            ("-0.0", Some(0)),
            ("18446744073709551615", Some(u64::MAX)),
            ("1.5", None),
            ("7.5e-1", None),
            ("-1", None),
            ("-1.0", None),
            ("1.8446744073709552e19", None),
            ("1e300", None),
        ] {
            assert_eq!(integer::<u64>(&number(text)), want, "{text}");
        }
        for (text, want) in [
            ("-32003", Some(-32003)),
            ("-32003.0", Some(-32003)),
            ("-3.2003e4", Some(-32003)),
            ("-9223372036854775808.0", Some(i64::MIN)),
            ("9223372036854775807", Some(i64::MAX)),
            ("9223372036854775808", None),
            ("-32003.5", None),
            ("-1e19", None),
        ] {
            assert_eq!(integer::<i64>(&number(text)), want, "{text}");
        }
        let read = |text| read(text).expect("JSON");
        assert!(read("3.0").is_u64() && read("3").is_u64() && !read("3.5").is_u64());
        assert_eq!(read("-32003.0").as_i64(), Some(-32003));
    }

    /// A whole number past 64 bits would be written back as a float, another number, so
    /// it is refused at its pointer, by [`read`] and when built into a value ([`parse`]);
    /// every other number reads as before, whatever came before it (numbers inside
    /// strings are no numbers), a float written with more digits than it needs too.
    #[test]
    fn a_whole_number_past_64_bits_is_refused_at_its_pointer() {
        for (text, pointer) in [
            (
                r#"{"tool":{"input":{"account":123456789012345678901234567890}}}"#,
                "/tool/input/account",
            ),
            (
                r#"[1,2.5,{"a/b":[0.1,-92233720368547758090]}]"#,
                "/2/a~1b/1",
            ),
            (
                r#"{"s":"1.00000000000000000001","n":[1e2,-7,18446744073709551616]}"#,
                "/n/2",
            ),
            ("123456789012345678901234567890", ""),
        ] {
            for reading in [read(text).map(|_| ()), parse(text).map(|_| ())] {
                match reading {
                    Err(Error::Inexact(n)) => assert_eq!(n.pointer, pointer, "{text}"),
                    other => panic!("{text}: expected an inexact number, got {other:?}"),
                }
            }
            assert!(read_keeping_inexact(text).is_ok(), "{text}: kept as read");
        }
        let held = r#"{"a":0.1,"b":1e300,"c":-0.0,"d":750.0,"e":18446744073709551615,"f":-9223372036854775808,"g":0.30000000000000004,"h":"123456789012345678901234567890","i":0.10000000000000001,"j":1.2345678901234568e29,"k":9007199254740993.0,"l":1e-400,"m":18446744073709551616.0}"#;
        assert_eq!(
            parse(held).expect("every number held"),
            serde_json::from_str::<Value>(held).unwrap()
        );
    }

    /// The integer `-0` stays an integer when written back; the float `-0.0` a float.
    #[test]
    fn an_integer_minus_zero_is_written_back_as_an_integer() {
        for (text, written) in [
            (r#"{"offset":-0}"#, r#"{"offset":0}"#),
            (r#"[-0,-0.0,-0e0,0]"#, r#"[0,-0.0,-0.0,0]"#),
        ] {
            let value = parse(text).expect("JSON");
            assert_eq!(serde_json::to_string(&value).unwrap(), written, "{text}");
        }
    }

    /// What serde_json refuses is named at the value it was reading: a number out of
    /// range at its own pointer, a broken separator or name at its object's, trailing
    /// text and text cut short at the root.
    #[test]
    fn a_syntax_error_is_named_at_the_value_being_read() {
        for (text, at) in [
            (r#"{"hooks":[{"timeoutMs":1e400}]}"#, "/hooks/0/timeoutMs"),
            (r#"[1,{"a/b":-1e400}]"#, "/1/a~1b"),
            (r#"{"a":{"b":1 "c":2}}"#, "/a"),
            ("1e400", ""),
            ("{} {}", ""),
            (r#"{"hooks":[{"timeoutMs":"#, ""),
        ] {
            match parse(text) {
                Err(Error::Syntax(e)) => assert_eq!(e.pointer, at, "{text}: {}", e.error),
                other => panic!("{text}: expected a syntax error, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_syntax_error_after_a_repeat_free_prefix_is_a_syntax_error() {
        for text in [r#"{"a":1,"b":"#, r#"{"a":{"b":1}"#, r#"[{"a":1},{"a":"#] {
            assert!(matches!(parse(text), Err(Error::Syntax(_))), "{text}");
        }
    }
}
