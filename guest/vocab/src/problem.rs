//! A problem with an input the harness handed over: a registration, an event, the list
//! of effects it can enforce.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The most entries each of a check's lists holds (problems, warnings, warnings about
/// names ignored, the host's warnings about its backends). A registration under the
/// 16 MiB bound can break one rule hundreds of thousands of times (700,000 unknown
/// content categories, or as many events that are no string), and every entry is held
/// in the component's memory, handed to the host and printed: listed without a bound,
/// they ran the component out of memory (a trap, not a refusal). An operator fixes the
/// first hundred and checks again.
pub const MAX_LISTED: usize = 100;

/// The line that ends a list of a check's entries of which `left_out` were not listed
/// (`more`: `problems`, `warnings`, `ignored names`...).
pub fn not_listed(left_out: usize, more: &str) -> String {
    format!("{left_out} more {more} not listed (only the first {MAX_LISTED} are)")
}

/// A JSON value's type in words ("a string", "an object"), for a rule that names what it
/// found: never the value itself, which could be a secret given in the wrong place.
pub fn type_name(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One broken (or, as a warning, questionable) field: where, and which rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// Where: a JSON Pointer into the document (`""` is its root), prefixed with the
    /// input's name where a call has several inputs (`event/tool/input`, `effects[2]`).
    pub path: String,
    /// The rule it breaks, in words. Never a value that could be a secret.
    pub rule: String,
}

impl Problem {
    pub fn new(path: impl Into<String>, rule: impl Into<String>) -> Self {
        Problem {
            path: path.into(),
            rule: rule.into(),
        }
    }
}

impl fmt::Display for Problem {
    /// `path: rule`, the root shown as `/`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.rule)
    }
}
