//! How one delivery failed, as the host classified it (the WIT `delivery-error`), and the
//! one reading of each such failure as an audit failure class and phase: the component
//! uses it for interceptors, the host for the observers it delivers itself.

use crate::{Detail, Failure, FailureClass, Phase};

/// Where an exchange was when its deadline passed (mirrors the WIT `io-phase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoPhase {
    Connect,
    Send,
    AwaitResponse,
    ReadResponse,
}

/// A transport failure as the host classified it (mirrors the WIT `delivery-error`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeliveryError {
    DeadlineExceeded(IoPhase),
    Cancelled,
    ConnectionRefused,
    UnresolvedHost,
    ConnectionReset,
    ConnectionLost,
    TlsFailed,
    MalformedHttp,
    MalformedFraming,
    LaunchFailed,
    AbnormalExit(Option<i32>),
    ResponseTooLarge,
    NotPermitted,
}

impl From<IoPhase> for Phase {
    fn from(phase: IoPhase) -> Phase {
        match phase {
            IoPhase::Connect => Phase::Connect,
            IoPhase::Send => Phase::Send,
            IoPhase::AwaitResponse => Phase::AwaitResponse,
            IoPhase::ReadResponse => Phase::ReadResponse,
        }
    }
}

impl DeliveryError {
    /// The failure the audit records for this error. Nothing reached the backend when the
    /// phase is `connect`. `Cancelled` is an interruption, which callers settle before
    /// asking; it reads as a deadline only to keep this total.
    pub fn failure(&self) -> Failure {
        use FailureClass as C;
        let (class, phase, detail) = match self {
            DeliveryError::DeadlineExceeded(phase) => (C::DeadlineExceeded, (*phase).into(), None),
            DeliveryError::Cancelled => (C::DeadlineExceeded, Phase::AwaitResponse, None),
            DeliveryError::ConnectionRefused => (C::ConnectionRefused, Phase::Connect, None),
            DeliveryError::UnresolvedHost => (
                C::ConnectionRefused,
                Phase::Connect,
                Some(Detail::UnresolvedHost),
            ),
            DeliveryError::TlsFailed => (C::ConnectionRefused, Phase::Connect, Some(Detail::Tls)),
            DeliveryError::NotPermitted => (
                C::ConnectionRefused,
                Phase::Connect,
                Some(Detail::NotPermitted),
            ),
            DeliveryError::ConnectionReset => (C::ConnectionReset, Phase::AwaitResponse, None),
            DeliveryError::ConnectionLost => (C::ConnectionLost, Phase::AwaitResponse, None),
            DeliveryError::MalformedHttp => (
                C::HttpStatus,
                Phase::AwaitResponse,
                Some(Detail::MalformedHttp),
            ),
            DeliveryError::MalformedFraming => (
                C::MalformedJson,
                Phase::ReadResponse,
                Some(Detail::MalformedFraming),
            ),
            DeliveryError::ResponseTooLarge => (
                C::MalformedJson,
                Phase::ReadResponse,
                Some(Detail::ResponseTooLarge),
            ),
            DeliveryError::LaunchFailed => (C::LaunchFailed, Phase::Connect, None),
            DeliveryError::AbnormalExit(_) => (C::AbnormalExit, Phase::AwaitResponse, None),
        };
        let failure = Failure::new(class, phase);
        match detail {
            Some(detail) => failure.with_detail(detail),
            None => failure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_reads_as_its_class_phase_and_detail() {
        let read = |error: DeliveryError| {
            let failure = error.failure();
            (failure.class, failure.phase, failure.detail)
        };
        assert_eq!(
            read(DeliveryError::UnresolvedHost),
            (
                FailureClass::ConnectionRefused,
                Phase::Connect,
                Some(Detail::UnresolvedHost)
            )
        );
        assert_eq!(
            read(DeliveryError::MalformedFraming),
            (
                FailureClass::MalformedJson,
                Phase::ReadResponse,
                Some(Detail::MalformedFraming)
            )
        );
        assert_eq!(
            read(DeliveryError::DeadlineExceeded(IoPhase::Send)),
            (FailureClass::DeadlineExceeded, Phase::Send, None)
        );
        // A resolver may answer "try again": retried like a refusal, unlike a TLS failure.
        assert!(DeliveryError::UnresolvedHost.failure().is_transient());
        assert!(DeliveryError::ConnectionRefused.failure().is_transient());
        assert!(!DeliveryError::TlsFailed.failure().is_transient());
    }
}
