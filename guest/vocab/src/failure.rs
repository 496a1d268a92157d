//! The one taxonomy of operational failures (failure-semantics.md, "Failure classes").
//!
//! Every way a backend exchange can go wrong ends up as exactly one [`FailureClass`]
//! plus the [`Phase`] it happened in, optionally narrowed by a fixed [`Detail`]. The audit
//! record names them; the model never sees any (a fail-closed denial carries only the
//! generic synthetic reason).

use serde::{Deserialize, Serialize};

words! {
    /// What went wrong, in the protocol's words.
    #[non_exhaustive]
    pub enum FailureClass {
        DeadlineExceeded = "deadline-exceeded",
        ConnectionRefused = "connection-refused",
        ConnectionReset = "connection-reset",
        ConnectionLost = "connection-lost",
        LaunchFailed = "launch-failed",
        AbnormalExit = "abnormal-exit",
        AuthFailed = "auth-failed",
        HttpStatus = "http-status",
        MalformedUtf8 = "malformed-utf8",
        MalformedJson = "malformed-json",
        MalformedJsonrpc = "malformed-jsonrpc",
        IdMismatch = "id-mismatch",
        JsonrpcError = "jsonrpc-error",
        UnsupportedVersion = "unsupported-version",
        UnsupportedEvent = "unsupported-event",
        MissingResultFields = "missing-result-fields",
        InvalidEffects = "invalid-effects",
        LateResponse = "late-response",
    }
}

words! {
    /// Where in one exchange the failure happened.
    #[non_exhaustive]
    pub enum Phase {
        /// Waiting for a free component instance, before any delivery started: the wait
        /// counts against the interceptors' deadlines in turn (failure-semantics.md,
        /// "Queue waits … consume that same remaining call budget").
        Queue = "queue",
        AcquireCredential = "acquire-credential",
        /// Renewing a credential the host had before (expired, or rejected with a 401).
        RefreshCredential = "refresh-credential",
        Connect = "connect",
        Send = "send",
        AwaitResponse = "await-response",
        ReadResponse = "read-response",
        Parse = "parse",
        Accept = "accept",
    }
}

words! {
    /// A fixed diagnostic word narrowing a failure for the local audit. Never backend
    /// text: the component chooses it from this list.
    #[non_exhaustive]
    pub enum Detail {
        // Credentials.
        Unresolved = "unresolved",
        AcquisitionFailed = "acquisition-failed",
        RefreshFailed = "refresh-failed",
        Unsupported = "unsupported",
        /// The credential could not be had before the deadline.
        DeadlineExceeded = "deadline-exceeded",
        // Transport.
        Tls = "tls",
        /// The backend's host name did not resolve (connection-refused).
        UnresolvedHost = "unresolved-host",
        MalformedHttp = "malformed-http",
        /// An injected transport's reply was not valid framing for its channel
        /// (malformed-json: no JSON text could be had from it).
        MalformedFraming = "malformed-framing",
        ResponseTooLarge = "response-too-large",
        NotPermitted = "not-permitted",
        ContentType = "content-type",
        /// A 200 whose body is empty (http-status): no answer at all.
        EmptyBody = "empty-body",
        // JSON text.
        /// An object names a member twice (malformed-json): no reading of it is trusted.
        DuplicateKey = "duplicate-key",
        // JSON-RPC envelope.
        Batch = "batch",
        NotObject = "not-object",
        NotAResponse = "not-a-response",
        JsonrpcVersion = "jsonrpc-version",
        IdMissing = "id-missing",
        ResultAndError = "result-and-error",
        NoResultOrError = "no-result-or-error",
        ErrorObject = "error-object",
        ResultNotObject = "result-not-object",
        ManifestInResult = "manifest-in-result",
        /// `result.extensions` that is not an object of reverse-DNS names.
        ResultExtensions = "result-extensions",
        // Missing result fields: the field's own name.
        ProtocolVersion = "protocolVersion",
        Effects = "effects",
        // Effects.
        UnknownEffect = "unknown-effect",
        UnadvertisedEffect = "unadvertised-effect",
        MalformedEffect = "malformed-effect",
        UnknownEffectField = "unknown-effect-field",
        ConflictingEffects = "conflicting-effects",
    }
}

/// One classified failure. `http_status`, `rpc_code` and `effect` are diagnostics for the
/// local audit only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    pub class: FailureClass,
    pub phase: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Detail>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_code: Option<i64>,
    /// Which effect of the reply (from 0) was refused, for `invalid-effects` (and for
    /// `malformed-json` when the number no reader takes is in its value): a backend's
    /// author finds the one at fault in a long list without the reply's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<usize>,
}

impl Failure {
    pub fn new(class: FailureClass, phase: Phase) -> Self {
        Failure {
            class,
            phase,
            detail: None,
            http_status: None,
            rpc_code: None,
            effect: None,
        }
    }

    pub fn with_detail(mut self, detail: Detail) -> Self {
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

    pub fn with_effect(mut self, index: usize) -> Self {
        self.effect = Some(index);
        self
    }

    /// Whether a retry inside the original deadline could plausibly succeed: transport
    /// faults and "temporarily unavailable" answers (HTTP 502–504, JSON-RPC -32003),
    /// never a response rejected for its content. The one rule for intercept requests
    /// and observer notifications alike.
    pub fn is_transient(&self) -> bool {
        match self.class {
            // A name that did not resolve may resolve on a second asking (a resolver's
            // "try again"); a refusal by policy or a certificate cannot change.
            FailureClass::ConnectionRefused
            | FailureClass::ConnectionReset
            | FailureClass::ConnectionLost => {
                matches!(self.detail, None | Some(Detail::UnresolvedHost))
            }
            FailureClass::HttpStatus => matches!(self.http_status, Some(502..=504)),
            FailureClass::JsonrpcError => self.rpc_code == Some(-32003),
            _ => false,
        }
    }

    /// Whether the clock ran out (rather than the backend misbehaving): a deadline hit
    /// in any phase, a reply complete only after it, or a credential not had in time.
    pub fn is_deadline(&self) -> bool {
        matches!(
            self.class,
            FailureClass::DeadlineExceeded | FailureClass::LateResponse
        ) || self.detail == Some(Detail::DeadlineExceeded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_through_serde_and_parse() {
        for class in FailureClass::ALL {
            let json = serde_json::to_string(class).unwrap();
            assert_eq!(json, format!("\"{}\"", class.as_str()));
            assert_eq!(serde_json::from_str::<FailureClass>(&json).unwrap(), *class);
            assert_eq!(FailureClass::parse(class.as_str()), Some(*class));
        }
        assert_eq!(FailureClass::parse("Deadline-Exceeded"), None);
    }

    #[test]
    fn transient_failures_are_transport_faults_and_unavailable_answers() {
        let f = |class| Failure::new(class, Phase::Connect);
        assert!(f(FailureClass::ConnectionReset).is_transient());
        // Refused by the host's own configuration, or a TLS failure: retrying cannot help.
        assert!(!f(FailureClass::ConnectionRefused)
            .with_detail(Detail::NotPermitted)
            .is_transient());
        assert!(!f(FailureClass::ConnectionRefused)
            .with_detail(Detail::Tls)
            .is_transient());
        assert!(f(FailureClass::HttpStatus)
            .with_http_status(503)
            .is_transient());
        assert!(!f(FailureClass::HttpStatus)
            .with_http_status(500)
            .is_transient());
        assert!(f(FailureClass::JsonrpcError)
            .with_rpc_code(-32003)
            .is_transient());
        assert!(!f(FailureClass::InvalidEffects).is_transient());
        assert!(!f(FailureClass::DeadlineExceeded).is_transient());
    }

    #[test]
    fn failure_serializes_only_what_it_has() {
        let f = Failure::new(FailureClass::HttpStatus, Phase::AwaitResponse).with_http_status(503);
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            serde_json::json!({"class": "http-status", "phase": "await-response", "httpStatus": 503})
        );
    }
}
