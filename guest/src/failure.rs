//! The one taxonomy of operational failures (failure-semantics.md, "Failure classes").
//!
//! Every way a backend exchange can go wrong ends up as exactly one [`FailureClass`]
//! plus the [`Phase`] it happened in. The audit record names both; the model never sees
//! either (a fail-closed denial carries only the generic synthetic reason).

/// What went wrong, in the protocol's words. Kebab-case names are what the audit records.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureClass {
    DeadlineExceeded,
    ConnectionRefused,
    ConnectionReset,
    ConnectionLost,
    LaunchFailed,
    AbnormalExit,
    AuthFailed,
    HttpStatus,
    MalformedUtf8,
    MalformedJson,
    MalformedJsonrpc,
    IdMismatch,
    JsonrpcError,
    UnsupportedVersion,
    UnsupportedEvent,
    MissingResultFields,
    InvalidEffects,
    LateResponse,
}

impl FailureClass {
    /// The audit name of this class.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::DeadlineExceeded => "deadline-exceeded",
            FailureClass::ConnectionRefused => "connection-refused",
            FailureClass::ConnectionReset => "connection-reset",
            FailureClass::ConnectionLost => "connection-lost",
            FailureClass::LaunchFailed => "launch-failed",
            FailureClass::AbnormalExit => "abnormal-exit",
            FailureClass::AuthFailed => "auth-failed",
            FailureClass::HttpStatus => "http-status",
            FailureClass::MalformedUtf8 => "malformed-utf8",
            FailureClass::MalformedJson => "malformed-json",
            FailureClass::MalformedJsonrpc => "malformed-jsonrpc",
            FailureClass::IdMismatch => "id-mismatch",
            FailureClass::JsonrpcError => "jsonrpc-error",
            FailureClass::UnsupportedVersion => "unsupported-version",
            FailureClass::UnsupportedEvent => "unsupported-event",
            FailureClass::MissingResultFields => "missing-result-fields",
            FailureClass::InvalidEffects => "invalid-effects",
            FailureClass::LateResponse => "late-response",
        }
    }
}

/// Where in one exchange the failure happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    AcquireCredential,
    /// Renewing a credential the host had before (expired, or rejected with a 401).
    RefreshCredential,
    Connect,
    Send,
    AwaitResponse,
    ReadResponse,
    Parse,
    Accept,
}

impl Phase {
    /// The audit name of this phase.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::AcquireCredential => "acquire-credential",
            Phase::RefreshCredential => "refresh-credential",
            Phase::Connect => "connect",
            Phase::Send => "send",
            Phase::AwaitResponse => "await-response",
            Phase::ReadResponse => "read-response",
            Phase::Parse => "parse",
            Phase::Accept => "accept",
        }
    }
}

/// One classified failure. `detail` is a fixed vocabulary chosen by this crate (never
/// backend text); `http_status` and `rpc_code` are diagnostics for the local audit only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub class: FailureClass,
    pub phase: Phase,
    pub detail: Option<&'static str>,
    pub http_status: Option<u16>,
    pub rpc_code: Option<i64>,
}

impl Failure {
    pub fn new(class: FailureClass, phase: Phase) -> Self {
        Failure {
            class,
            phase,
            detail: None,
            http_status: None,
            rpc_code: None,
        }
    }

    /// Adds a fixed-vocabulary detail, e.g. `"unadvertised-effect"`.
    pub fn with_detail(mut self, detail: &'static str) -> Self {
        self.detail = Some(detail);
        self
    }

    pub fn with_http_status(mut self, status: u16) -> Self {
        self.http_status = Some(status);
        self
    }

    pub fn with_rpc_code(mut self, code: i64) -> Self {
        self.rpc_code = Some(code);
        self
    }

    /// Whether a retry inside the original deadline could plausibly succeed: transport
    /// faults and "temporarily unavailable" answers, never a response rejected for its
    /// content.
    pub fn is_transient(&self) -> bool {
        match self.class {
            FailureClass::ConnectionRefused
            | FailureClass::ConnectionReset
            | FailureClass::ConnectionLost => true,
            FailureClass::HttpStatus => matches!(self.http_status, Some(502..=504)),
            FailureClass::JsonrpcError => self.rpc_code == Some(-32003),
            _ => false,
        }
    }
}
