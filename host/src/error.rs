//! The one error type of the public API, in the manner of hyper's: opaque, with
//! predicates to ask what went wrong and accessors for what a caller can act on.

use crate::settlement::Settlement;
use ahp_vocab::Problem;
use std::fmt;

/// Why an interceptor could not be built, or a call could not be made (no decision was
/// reached, except the local `shutdown` denial of [`Error::shutdown_settlement`]).
pub struct Error {
    kind: Kind,
}

enum Kind {
    /// The registration is invalid; every problem, each naming its JSON path.
    Registration(Vec<Problem>),
    /// The event or effects list of a call is invalid; every problem, each naming the field.
    InvalidInput(Vec<Problem>),
    /// The interceptor was shut down; the call settled locally as a denial.
    ShutDown(Box<Settlement>),
    /// The component, the audit log or a backend could not be set up.
    Setup(wasmtime::Error),
}

impl Error {
    pub(crate) fn registration(problems: Vec<Problem>) -> Error {
        Error {
            kind: Kind::Registration(problems),
        }
    }

    pub(crate) fn invalid_input(problems: Vec<Problem>) -> Error {
        Error {
            kind: Kind::InvalidInput(problems),
        }
    }

    pub(crate) fn shut_down(settlement: Settlement) -> Error {
        Error {
            kind: Kind::ShutDown(Box::new(settlement)),
        }
    }

    pub(crate) fn setup(error: impl Into<wasmtime::Error>) -> Error {
        Error {
            kind: Kind::Setup(error.into()),
        }
    }

    /// The registration was rejected ([`Error::problems`] says why).
    pub fn is_registration(&self) -> bool {
        matches!(self.kind, Kind::Registration(_))
    }

    /// The call's event or effects were rejected ([`Error::problems`] says why).
    pub fn is_invalid_input(&self) -> bool {
        matches!(self.kind, Kind::InvalidInput(_))
    }

    /// The interceptor was shut down before the call.
    pub fn is_shut_down(&self) -> bool {
        matches!(self.kind, Kind::ShutDown(_))
    }

    /// Setting up the component, the audit log or a backend failed.
    pub fn is_setup(&self) -> bool {
        matches!(self.kind, Kind::Setup(_))
    }

    /// Every problem with the registration or the call's input, each naming its field;
    /// empty for other errors.
    pub fn problems(&self) -> &[Problem] {
        match &self.kind {
            Kind::Registration(problems) | Kind::InvalidInput(problems) => problems,
            Kind::ShutDown(_) | Kind::Setup(_) => &[],
        }
    }

    /// The local denial of a call made after shutdown, for the harness's own audit.
    pub fn shutdown_settlement(&self) -> Option<&Settlement> {
        match &self.kind {
            Kind::ShutDown(settlement) => Some(settlement),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, what: &str, problems: &[Problem]| {
            let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
            write!(f, "{what}: {}", problems.join("; "))
        };
        match &self.kind {
            Kind::Registration(problems) => list(f, "invalid registration", problems),
            Kind::InvalidInput(problems) => list(f, "invalid input", problems),
            Kind::ShutDown(_) => f.write_str("the interceptor is shut down"),
            Kind::Setup(e) => write!(f, "setup failed: {e:#}"),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ahp_host::Error({self})")
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            Kind::Setup(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}
