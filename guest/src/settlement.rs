//! The settled decision of one hook call and its audit record (DESIGN.md §4).
//!
//! The record is the same object the CLI prints and the audit log stores. It tells an
//! explicit backend denial (`backend-deny`) apart from a synthetic fail-closed one
//! (`synthetic-deny`), and budget expiry apart from interruption. It never holds a
//! secret, and the `reason` never holds transport details or backend error text.

use crate::failure::Failure;
use crate::host_api::{Instant, NANOS_PER_MS};
use crate::registration::FailurePolicy;
use crate::wire::Message;
use serde_json::{json, Map, Value};

/// The generic reason of a fail-closed denial (failure-semantics.md, "Synthetic denial").
pub const SYNTHETIC_REASON: &str = "Required policy backend unavailable.";
/// The reason of a denial because the embedding harness interrupted the call.
pub const INTERRUPTED_REASON: &str = "Policy evaluation was interrupted.";
/// The reason of a denial because the enclosing hook-call budget ran out.
pub const BUDGET_REASON: &str = "Policy evaluation did not finish within the hook call budget.";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// "No AHP objection": never a grant beyond the harness's own permissions.
    Allow,
    Ask,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

/// Who settled the call. The host adds `engine-failure` and `shutdown` itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecidedBy {
    NoObjection,
    BackendDeny,
    BackendAsk,
    SyntheticDeny,
    Interrupted,
    BudgetExpired,
}

impl DecidedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::NoObjection => "no-objection",
            DecidedBy::BackendDeny => "backend-deny",
            DecidedBy::BackendAsk => "backend-ask",
            DecidedBy::SyntheticDeny => "synthetic-deny",
            DecidedBy::Interrupted => "interrupted",
            DecidedBy::BudgetExpired => "budget-expired",
        }
    }
}

/// What one intercept subscription contributed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    NoEffect,
    Allow,
    Ask,
    Deny,
    FailedOpen,
    FailedClosed,
    NotReached,
    Interrupted,
    BudgetExpired,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::NoEffect => "no-effect",
            Outcome::Allow => "allow",
            Outcome::Ask => "ask",
            Outcome::Deny => "deny",
            Outcome::FailedOpen => "failed-open",
            Outcome::FailedClosed => "failed-closed",
            Outcome::NotReached => "not-reached",
            Outcome::Interrupted => "interrupted",
            Outcome::BudgetExpired => "budget-expired",
        }
    }
}

/// One delivery attempt of an intercept request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub n: u32,
    pub elapsed_ms: u64,
    /// `accepted`, `unauthorized`, `interrupted`, or a failure class.
    pub result: &'static str,
}

/// The audit entry of one intercept subscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterceptorRecord {
    pub backend: String,
    pub subscription: usize,
    pub policy: FailurePolicy,
    pub timeout_ms: u64,
    pub outcome: Outcome,
    pub failure: Option<Failure>,
    pub attempts: Vec<Attempt>,
    pub request_sha256: Option<String>,
}

/// A prepared `hooks/observe` notification owned by the hook call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObserverDelivery {
    pub backend: String,
    pub message: Message,
    pub deadline: Instant,
}

/// Identity of the event a record is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRef {
    pub id: String,
    pub event_type: String,
    pub session: Option<String>,
    pub call: Option<String>,
}

/// The outcome of one hook call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settlement {
    pub decision: Decision,
    pub decided_by: DecidedBy,
    pub reason: Option<String>,
    pub messages: Vec<String>,
    pub event: EventRef,
    pub elapsed_ns: u64,
    pub interceptors: Vec<InterceptorRecord>,
    pub observers: Vec<ObserverDelivery>,
}

impl Settlement {
    /// The audit record as one JSON object.
    pub fn audit(&self) -> Value {
        let mut record = Map::new();
        record.insert(
            "event".into(),
            json!({
                "id": self.event.id,
                "type": self.event.event_type,
                "session": self.event.session,
                "call": self.event.call,
            }),
        );
        record.insert("decision".into(), self.decision.as_str().into());
        record.insert("decidedBy".into(), self.decided_by.as_str().into());
        record.insert("reason".into(), self.reason.clone().into());
        if !self.messages.is_empty() {
            record.insert("messages".into(), json!(self.messages));
        }
        record.insert("elapsedMs".into(), (self.elapsed_ns / NANOS_PER_MS).into());
        record.insert(
            "interceptors".into(),
            self.interceptors.iter().map(interceptor_json).collect(),
        );
        record.insert(
            "observers".into(),
            self.observers
                .iter()
                .map(|o| json!({"backend": o.backend, "kind": "short-circuit", "requestSha256": o.message.sha256()}))
                .collect(),
        );
        Value::Object(record)
    }
}

fn interceptor_json(r: &InterceptorRecord) -> Value {
    let mut entry = Map::new();
    entry.insert("backend".into(), r.backend.clone().into());
    entry.insert("subscription".into(), r.subscription.into());
    entry.insert("policy".into(), r.policy.as_str().into());
    entry.insert("timeoutMs".into(), r.timeout_ms.into());
    entry.insert("outcome".into(), r.outcome.as_str().into());
    if let Some(f) = &r.failure {
        entry.insert("failure".into(), failure_json(f));
    }
    entry.insert(
        "attempts".into(),
        r.attempts
            .iter()
            .map(|a| {
                json!({"n": a.n, "elapsedMs": a.elapsed_ms, "result": a.result,
                       "requestSha256": r.request_sha256})
            })
            .collect(),
    );
    if let Some(sha) = &r.request_sha256 {
        entry.insert("requestSha256".into(), sha.clone().into());
    }
    Value::Object(entry)
}

fn failure_json(f: &Failure) -> Value {
    let mut failure = Map::new();
    failure.insert("class".into(), f.class.as_str().into());
    failure.insert("phase".into(), f.phase.as_str().into());
    if let Some(detail) = f.detail {
        failure.insert("detail".into(), detail.into());
    }
    if let Some(status) = f.http_status {
        failure.insert("httpStatus".into(), status.into());
    }
    if let Some(code) = f.rpc_code {
        failure.insert("rpcCode".into(), code.into());
    }
    Value::Object(failure)
}
