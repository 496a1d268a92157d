//! The problem collector: how a check keeps going after a mistake.
//!
//! Every check takes the [`Checker`] and the JSON Pointer of what it checks, and returns
//! `Option<T>`: `None` only after recording why. So a rule can check all of its fields,
//! combine the results at the end with `?`, and an operator still hears about every
//! broken field at once. [`Node`] is an object under check that knows its own pointer;
//! the free functions below check one JSON value for one generic shape (a string, a
//! non-empty array, one of a few words) and name nothing specific to registrations.

use serde_json::{Map, Value};

pub use ahp_vocab::Problem;
use ahp_vocab::{not_listed, MAX_LISTED};

/// Collects problems and warnings. Every helper that returns `None` has recorded why.
#[derive(Default)]
pub(super) struct Checker {
    problems: Listed,
    warnings: Listed,
    /// Warnings about a name this check does not know, ignored: listed after the
    /// others, so that hundreds of them never push out one that matters.
    ignored: Listed,
}

impl Checker {
    /// The checked value with the warnings, or every problem (each list as [`Listed`]
    /// gives it). A `None` with no problem recorded would be a rule that forgot to say
    /// why; it still rejects the document.
    pub(super) fn finish<T>(self, checked: Option<T>) -> Result<(T, Vec<Problem>), Vec<Problem>> {
        match checked {
            Some(value) if self.problems.is_empty() => {
                let mut warnings = self.warnings.into_vec("warnings");
                warnings.extend(self.ignored.into_vec("ignored names"));
                Ok((value, warnings))
            }
            _ if self.problems.is_empty() => Err(vec![Problem::new("", "could not be validated")]),
            _ => Err(self.problems.into_vec("problems")),
        }
    }
    pub(super) fn problem(&mut self, path: &str, rule: impl Into<String>) {
        self.problems.push(path, rule);
    }
    pub(super) fn fail<T>(&mut self, path: &str, rule: impl Into<String>) -> Option<T> {
        self.problem(path, rule);
        None
    }
    pub(super) fn warn(&mut self, path: &str, rule: impl Into<String>) {
        self.warnings.push(path, rule);
    }
    /// A warning that the name at `path` is not known and is ignored.
    pub(super) fn ignore(&mut self, path: &str, rule: impl Into<String>) {
        self.ignored.push(path, rule);
    }
}

/// Problems (or warnings) in document order, the first [`MAX_LISTED`] of them kept and
/// the rest only counted.
#[derive(Default)]
pub(crate) struct Listed {
    kept: Vec<Problem>,
    left_out: usize,
}

impl Listed {
    pub(crate) fn push(&mut self, path: &str, rule: impl Into<String>) {
        match self.kept.len() < MAX_LISTED {
            true => self.kept.push(Problem::new(path, rule)),
            false => self.left_out += 1,
        }
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
    /// The entries kept, and then, if any were left out, one at the root saying how
    /// many `more` (`problems`, `warnings`, `ignored names`) there were.
    pub(crate) fn into_vec(mut self, more: &str) -> Vec<Problem> {
        if self.left_out > 0 {
            self.kept
                .push(Problem::new("", not_listed(self.left_out, more)));
        }
        self.kept
    }
}

/// An object under validation with its JSON Pointer, so field checks can name paths.
pub(super) struct Node<'a> {
    obj: &'a Map<String, Value>,
    path: String,
}

impl<'a> Node<'a> {
    pub(super) fn new(c: &mut Checker, v: &'a Value, path: &str) -> Option<Self> {
        let found = type_name(v);
        let obj = v
            .as_object()
            .or_else(|| c.fail(path, format!("must be an object, found {found}")))?;
        Some(Node {
            obj,
            path: path.to_owned(),
        })
    }
    pub(super) fn at(&self, key: &str) -> String {
        at(&self.path, key)
    }
    /// Every field, in document order.
    pub(super) fn entries(&self) -> impl Iterator<Item = (&'a String, &'a Value)> {
        self.obj.iter()
    }
    pub(super) fn has(&self, key: &str) -> bool {
        self.obj.contains_key(key)
    }
    /// Unknown fields are ignored (§6 rule 11); `known` is space-separated.
    pub(super) fn warn_unknown(&self, c: &mut Checker, known: &str) {
        let unknown = |k: &&String| !known.split_whitespace().any(|x| x == k.as_str());
        for key in self.obj.keys().filter(unknown) {
            c.ignore(&self.at(key), "unknown field ignored");
        }
    }
    /// A required field, checked by `check`.
    pub(super) fn need<T>(
        &self,
        c: &mut Checker,
        key: &str,
        check: impl FnOnce(&mut Checker, &'a Value, &str) -> Option<T>,
    ) -> Option<T> {
        match self.obj.get(key) {
            Some(v) => check(c, v, &self.at(key)),
            None => c.fail(&self.at(key), "is required"),
        }
    }
    /// An optional field: `Some(None)` when absent, `None` when present but invalid.
    pub(super) fn opt<T>(
        &self,
        c: &mut Checker,
        key: &str,
        check: impl FnOnce(&mut Checker, &'a Value, &str) -> Option<T>,
    ) -> Option<Option<T>> {
        match self.obj.get(key) {
            Some(v) => check(c, v, &self.at(key)).map(Some),
            None => Some(None),
        }
    }
}

// ---- Value checks. Each records a problem before returning `None`. ----

pub(super) fn string<'a>(c: &mut Checker, v: &'a Value, path: &str) -> Option<&'a str> {
    v.as_str()
        .or_else(|| c.fail(path, format!("must be a string, found {}", type_name(v))))
}

pub(super) fn non_empty<'a>(c: &mut Checker, v: &'a Value, path: &str) -> Option<&'a str> {
    match string(c, v, path)? {
        "" => c.fail(path, "must not be empty"),
        s => Some(s),
    }
}

pub(super) fn boolean(c: &mut Checker, v: &Value, path: &str) -> Option<bool> {
    v.as_bool().or_else(|| {
        c.fail(
            path,
            format!("must be true or false, found {}", type_name(v)),
        )
    })
}

pub(super) fn non_empty_array<'a>(
    c: &mut Checker,
    v: &'a Value,
    path: &str,
) -> Option<&'a [Value]> {
    match v.as_array() {
        None => c.fail(path, format!("must be an array, found {}", type_name(v))),
        Some(items) if items.is_empty() => c.fail(path, "must not be empty"),
        Some(items) => Some(items),
    }
}

pub(super) fn strings(c: &mut Checker, v: &Value, path: &str) -> Option<Vec<String>> {
    let found = type_name(v);
    let items = v
        .as_array()
        .or_else(|| c.fail(path, format!("must be an array, found {found}")))?;
    each(c, items, path, |c, _, v, p| {
        string(c, v, p).map(str::to_owned)
    })
}

/// An array of distinct, non-empty strings: the schema's `uniqueItems` over items of
/// `minLength: 1` (`filters.toolKinds`, `filters.paths`). An empty path or a repeated
/// kind is a mistake to report, not a value to pass on. Each offender is named at its
/// own index; the message never repeats the value.
pub(super) fn distinct_names(c: &mut Checker, v: &Value, path: &str) -> Option<Vec<String>> {
    distinct_names_that(c, v, path, |_, _, _| Some(()))
}

/// [`distinct_names`] whose every name is also checked by `check` (`scopes`: each one
/// scope token). The first of a repeated name is checked, the repeat is named as one:
/// a bad name repeated is two problems, each at its own index.
pub(super) fn distinct_names_that<'a>(
    c: &mut Checker,
    v: &'a Value,
    path: &str,
    mut check: impl FnMut(&mut Checker, &'a str, &str) -> Option<()>,
) -> Option<Vec<String>> {
    let found = type_name(v);
    let items = v
        .as_array()
        .or_else(|| c.fail(path, format!("must be an array, found {found}")))?;
    let mut seen = std::collections::BTreeSet::new();
    each(c, items, path, |c, _, v, p| {
        let name = non_empty(c, v, p)?;
        if !seen.insert(name) {
            return c.fail(p, "repeats an earlier item");
        }
        check(c, name, p)?;
        Some(name.to_owned())
    })
}

/// Checks every item (never stopping at the first bad one); `None` if any was bad.
pub(super) fn each<'a, T>(
    c: &mut Checker,
    items: &'a [Value],
    path: &str,
    mut check: impl FnMut(&mut Checker, usize, &'a Value, &str) -> Option<T>,
) -> Option<Vec<T>> {
    let checked: Vec<Option<T>> = items
        .iter()
        .enumerate()
        .map(|(i, v)| check(c, i, v, &format!("{path}/{i}")))
        .collect();
    checked.into_iter().collect()
}

/// One of a fixed set of strings. The message lists the options, never the value.
pub(super) fn choice<T: Copy>(
    c: &mut Checker,
    v: &Value,
    path: &str,
    options: &[(&str, T)],
) -> Option<T> {
    let found = options.iter().find(|(name, _)| v.as_str() == Some(*name));
    found.map(|(_, t)| *t).or_else(|| {
        let names: Vec<String> = options
            .iter()
            .map(|(name, _)| format!("\"{name}\""))
            .collect();
        c.fail(path, format!("must be one of {}", names.join(", ")))
    })
}

/// Appends one JSON Pointer segment, escaped per RFC 6901.
pub(super) fn at(path: &str, key: &str) -> String {
    format!("{path}/{}", crate::json::segment(key))
}

pub(super) use ahp_vocab::type_name;
