//! What a hook call decided, who decided it, and what each interceptor contributed.

words! {
    /// The settled outcome of one hook call.
    pub enum Decision {
        /// "No AHP objection": never a grant beyond the harness's own permissions.
        Allow = "allow",
        /// Ask the user (only when the harness declared it can enforce `ask`).
        Ask = "ask",
        /// Do not proceed.
        Deny = "deny",
    }
}

words! {
    /// Who settled a call. Tells an explicit backend denial apart from every synthetic
    /// one, and budget expiry apart from interruption. The component settles the first
    /// six; the host settles `engine-failure` and `shutdown` when the component could not
    /// finish, and `interrupted` or `budget-expired` when it could not even start (the
    /// call interrupted, or its budget spent, while it waited for an instance) or when
    /// `ahp hook`'s watchdog answers for it.
    #[non_exhaustive]
    pub enum DecidedBy {
        /// Every interceptor answered without objection (or failed open).
        NoObjection = "no-objection",
        /// A backend explicitly denied; its reason is shown.
        BackendDeny = "backend-deny",
        /// A backend asked for approval.
        BackendAsk = "backend-ask",
        /// A fail-closed subscription failed operationally: a generic local denial.
        SyntheticDeny = "synthetic-deny",
        /// The embedding harness interrupted the call.
        Interrupted = "interrupted",
        /// The enclosing hook-call budget ran out.
        BudgetExpired = "budget-expired",
        /// The component trapped, overran its bound, or the host failed around it.
        EngineFailure = "engine-failure",
        /// The interceptor was shut down before or during the call.
        Shutdown = "shutdown",
    }
}

impl DecidedBy {
    /// The generic reason shown to the model for a denial nobody explained: synthetic
    /// denials never carry network details, backend text or secrets
    /// (failure-semantics.md, "Synthetic denial"). `None` for backend decisions.
    pub fn generic_reason(self) -> Option<&'static str> {
        match self {
            DecidedBy::SyntheticDeny => Some("Required policy backend unavailable."),
            DecidedBy::Interrupted => Some("Policy evaluation was interrupted."),
            DecidedBy::BudgetExpired => {
                Some("Policy evaluation did not finish within the hook call budget.")
            }
            DecidedBy::EngineFailure => Some("Policy evaluation failed."),
            DecidedBy::Shutdown => Some("The policy interceptor is shut down."),
            DecidedBy::NoObjection | DecidedBy::BackendDeny | DecidedBy::BackendAsk => None,
        }
    }

    /// The one decision this settles as: no objection allows, a backend's ask asks,
    /// everything else denies. A settlement saying otherwise is not to be trusted.
    pub fn decision(self) -> Decision {
        match self {
            DecidedBy::NoObjection => Decision::Allow,
            DecidedBy::BackendAsk => Decision::Ask,
            _ => Decision::Deny,
        }
    }
}

words! {
    /// What one intercept subscription contributed to the call.
    pub enum Outcome {
        NoEffect = "no-effect",
        Allow = "allow",
        Ask = "ask",
        Deny = "deny",
        /// An accepted `flow` stop ended decision-making here.
        Stop = "stop",
        FailedOpen = "failed-open",
        FailedClosed = "failed-closed",
        /// The chain stopped before this interceptor was called.
        NotReached = "not-reached",
        Interrupted = "interrupted",
        BudgetExpired = "budget-expired",
    }
}

impl Outcome {
    /// Whether this interceptor's outcome ends its call in a denial: a settlement that
    /// allows or asks can hold none of these.
    pub fn denies(self) -> bool {
        matches!(
            self,
            Outcome::Deny
                | Outcome::Stop
                | Outcome::FailedClosed
                | Outcome::Interrupted
                | Outcome::BudgetExpired
        )
    }
}

words! {
    /// What an operational failure of an intercept subscription does. There is no
    /// default: every intercept subscription names one (AHP-FAIL-001).
    pub enum FailurePolicy {
        /// Continue unchanged after an operational failure.
        FailOpen = "fail-open",
        /// Deny the operation after an operational failure.
        FailClosed = "fail-closed",
    }
}

words! {
    /// How the host obtains an OAuth 2.0 access token for a backend.
    pub enum OAuthFlow {
        /// Needs a user agent; a host without one refuses it.
        AuthorizationCodePkce = "authorization_code_pkce",
        /// A machine-to-machine token from the issuer's token endpoint.
        ClientCredentials = "client_credentials",
    }
}
