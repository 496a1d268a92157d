//! A problem with an input the harness handed over: a registration, an event, the list
//! of effects it can enforce.

use serde::{Deserialize, Serialize};
use std::fmt;

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
