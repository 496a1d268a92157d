//! The WebAssembly glue: WIT types in, protocol modules, WIT types out. No behaviour.

use crate::effect::EffectKind as Kind;
use crate::engine::Engine;
use crate::host_api::{self, AuthError, DeliveryError, Host, Instant, IoPhase, Reply};
use crate::settlement::{ObserverDelivery, Settlement as Settled};
use crate::wire::Message;
use ahp_vocab::{
    DecidedBy as Decided, Decision as Dec, DeliverAt as At, EventCapability as Declared,
    FlowCapability as FlowDeclared, FlowOperation as FlowOp, InterceptableEvent,
    ModifyCapability as ModifyDeclared, ModifyTarget as Target, OAuthFlow, Problem as Broken,
};

wit_bindgen::generate!({ path: "../wit", world: "plugin" });

use ahp::interceptor::credentials::{self as wit_credentials, Credential};
use ahp::interceptor::delivery as wit_delivery;
use ahp::interceptor::host_types::{DeliveryError as WitDeliveryError, IoPhase as WitIoPhase};
use exports::ahp::interceptor::interceptor::{
    AuthPlan, BackendPlan, DecidedBy, Decision, DeliverAt, Delivery, EffectKind, EventCapability,
    FlowCapability, FlowOperation, Guest, GuestEngine, ModifyCapability, ModifyTarget, OauthFlow,
    OauthPlan, Problem, Settlement, StdioPlan, TransportPlan,
};

use crate::size_classes::SizeClasses;

struct Component;

export!(Component);

/// Free lists of small blocks (see [`crate::size_classes`]) in front of talc (see its
/// entry in Cargo.toml). The component is single-threaded (no `atomics`).
#[global_allocator]
static ALLOCATOR: SizeClasses<talc::wasm::WasmDynamicTalc> =
    SizeClasses::new(talc::wasm::new_wasm_dynamic_allocator());

impl Guest for Component {
    type Engine = EngineResource;
}

/// The exported `engine` resource: one validated registration.
struct EngineResource(Engine);

impl GuestEngine for EngineResource {
    fn interceptable() -> Vec<EventCapability> {
        crate::events::full_declaration()
            .into_iter()
            .map(to_wit_capability)
            .collect()
    }

    fn load(
        registration: String,
        declaration: Vec<EventCapability>,
    ) -> Result<exports::ahp::interceptor::interceptor::Engine, Vec<Problem>> {
        // Every unknown event is named, not only the first.
        let mut unknown = Vec::new();
        let declaration: Vec<Declared> = declaration
            .into_iter()
            .enumerate()
            .filter_map(|(i, c)| from_wit_capability(i, c).map_err(|p| unknown.push(p)).ok())
            .collect();
        if !unknown.is_empty() {
            return Err(problems(unknown));
        }
        Engine::load_declared(&registration, declaration)
            .map(|engine| {
                exports::ahp::interceptor::interceptor::Engine::new(EngineResource(engine))
            })
            .map_err(problems)
    }

    fn plan(&self) -> Vec<BackendPlan> {
        self.0
            .registration()
            .backends
            .iter()
            .map(backend_plan)
            .collect()
    }

    fn warnings(&self) -> Vec<Problem> {
        problems(self.0.warnings().to_vec())
    }

    fn bound_ms(&self) -> u64 {
        self.0.bound_ms()
    }

    fn chain_timeouts(&self) -> Vec<(String, Vec<u64>)> {
        self.0.chain_timeouts()
    }

    fn intercept(
        &self,
        event: String,
        effects: Vec<EffectKind>,
        budget: Option<Instant>,
        started: Instant,
    ) -> Result<Settlement, Vec<Problem>> {
        let effects: Vec<Kind> = effects.into_iter().map(effect_kind).collect();
        let settled = self
            .0
            .intercept_since(&mut ComponentHost, &event, &effects, budget, started)
            .map_err(problems)?;
        Ok(settlement(settled))
    }

    fn observe(
        &self,
        event: String,
        budget: Option<Instant>,
        started: Instant,
    ) -> Result<Vec<Delivery>, Vec<Problem>> {
        // A start in the future would extend the observers' deadlines.
        let started = started.min(ComponentHost.now());
        let deliveries = self
            .0
            .observe(&ComponentHost, started, &event, budget)
            .map_err(problems)?;
        Ok(deliveries.into_iter().map(delivery).collect())
    }
}

fn backend_plan(backend: &crate::registration::Backend) -> BackendPlan {
    use crate::registration::{Auth, Lifecycle, Transport};
    let transport = match &backend.transport {
        Transport::Http { url } => TransportPlan::Http(url.clone()),
        Transport::Stdio {
            command,
            args,
            cwd,
            lifecycle,
        } => TransportPlan::Stdio(StdioPlan {
            command: command.clone(),
            args: args.clone(),
            cwd: cwd.clone(),
            per_event: matches!(lifecycle, Lifecycle::PerEvent),
        }),
    };
    let auth = backend.auth.as_ref().map(|auth| match auth {
        Auth::BearerEnv(name) => AuthPlan::BearerEnv(name.clone()),
        Auth::BearerRef(reference) => AuthPlan::BearerRef(reference.clone()),
        Auth::OAuth(o) => AuthPlan::Oauth(OauthPlan {
            issuer: o.issuer.clone(),
            resource: o.resource.clone(),
            client_id: o.client_id.clone(),
            flow: match o.flow {
                OAuthFlow::ClientCredentials => OauthFlow::ClientCredentials,
                OAuthFlow::AuthorizationCodePkce => OauthFlow::AuthorizationCodePkce,
            },
            scopes: o.scopes.clone(),
            client_secret_ref: o.client_secret_ref.clone(),
        }),
    });
    BackendPlan {
        id: backend.id.clone(),
        transport,
        auth,
    }
}

fn problems(problems: Vec<Broken>) -> Vec<Problem> {
    problems
        .into_iter()
        .map(|p| Problem {
            path: p.path,
            rule: p.rule,
        })
        .collect()
}

fn effect_kind(kind: EffectKind) -> Kind {
    match kind {
        EffectKind::Deny => Kind::Deny,
        EffectKind::Allow => Kind::Allow,
        EffectKind::Ask => Kind::Ask,
        EffectKind::Message => Kind::Message,
        EffectKind::Modify => Kind::Modify,
        EffectKind::Flow => Kind::Flow,
        EffectKind::Return => Kind::Return,
        EffectKind::Inject => Kind::Inject,
    }
}

/// The WIT names events by their protocol word; an unknown one is a problem naming it.
fn from_wit_capability(i: usize, c: EventCapability) -> Result<Declared, Broken> {
    let event = InterceptableEvent::parse(&c.event).ok_or_else(|| {
        Broken::new(
            format!("declaration[{i}]/event"),
            format!("\"{}\" is not an interceptable event", c.event),
        )
    })?;
    Ok(Declared {
        event,
        effects: c.effects.into_iter().map(effect_kind).collect(),
        modify: c.modify.map(|m| ModifyDeclared {
            target: match m.target {
                ModifyTarget::Input => Target::Input,
                ModifyTarget::Output => Target::Output,
                ModifyTarget::Prompt => Target::Prompt,
                ModifyTarget::Request => Target::Request,
                ModifyTarget::Response => Target::Response,
                ModifyTarget::Content => Target::Content,
                ModifyTarget::Instructions => Target::Instructions,
                ModifyTarget::Summary => Target::Summary,
                ModifyTarget::Workspace => Target::Workspace,
            },
            replace: m.replace,
            merge: m.merge,
        }),
        flow: c.flow.map(|f| FlowDeclared {
            operations: f
                .operations
                .into_iter()
                .map(|op| match op {
                    FlowOperation::Stop => FlowOp::Stop,
                    FlowOperation::Continue => FlowOp::Continue,
                })
                .collect(),
            remaining_continuations: f.remaining_continuations,
            continuation_count: f.continuation_count,
        }),
        inject: c
            .inject
            .into_iter()
            .map(|at| match at {
                DeliverAt::Now => At::Now,
                DeliverAt::NextTurn => At::NextTurn,
            })
            .collect(),
    })
}

fn to_wit_capability(c: Declared) -> EventCapability {
    EventCapability {
        event: c.event.as_str().to_owned(),
        effects: c.effects.into_iter().map(to_wit_effect).collect(),
        modify: c.modify.map(|m| ModifyCapability {
            target: match m.target {
                Target::Input => ModifyTarget::Input,
                Target::Output => ModifyTarget::Output,
                Target::Prompt => ModifyTarget::Prompt,
                Target::Request => ModifyTarget::Request,
                Target::Response => ModifyTarget::Response,
                Target::Content => ModifyTarget::Content,
                Target::Instructions => ModifyTarget::Instructions,
                Target::Summary => ModifyTarget::Summary,
                Target::Workspace => ModifyTarget::Workspace,
            },
            replace: m.replace,
            merge: m.merge,
        }),
        flow: c.flow.map(|f| FlowCapability {
            operations: f
                .operations
                .into_iter()
                .map(|op| match op {
                    FlowOp::Stop => FlowOperation::Stop,
                    FlowOp::Continue => FlowOperation::Continue,
                })
                .collect(),
            remaining_continuations: f.remaining_continuations,
            continuation_count: f.continuation_count,
        }),
        inject: c
            .inject
            .into_iter()
            .map(|at| match at {
                At::Now => DeliverAt::Now,
                At::NextTurn => DeliverAt::NextTurn,
            })
            .collect(),
    }
}

fn to_wit_effect(kind: Kind) -> EffectKind {
    match kind {
        Kind::Deny => EffectKind::Deny,
        Kind::Allow => EffectKind::Allow,
        Kind::Ask => EffectKind::Ask,
        Kind::Message => EffectKind::Message,
        Kind::Modify => EffectKind::Modify,
        Kind::Flow => EffectKind::Flow,
        Kind::Return => EffectKind::Return,
        Kind::Inject => EffectKind::Inject,
    }
}

fn settlement(s: Settled) -> Settlement {
    let (record, observers) = s.into_record();
    Settlement {
        decision: match record.decision {
            Dec::Allow => Decision::Allow,
            Dec::Ask => Decision::Ask,
            Dec::Deny => Decision::Deny,
        },
        decided_by: match record.decided_by {
            Decided::NoObjection => DecidedBy::NoObjection,
            Decided::BackendDeny => DecidedBy::BackendDeny,
            Decided::BackendAsk => DecidedBy::BackendAsk,
            Decided::SyntheticDeny => DecidedBy::SyntheticDeny,
            Decided::Interrupted => DecidedBy::Interrupted,
            Decided::BudgetExpired => DecidedBy::BudgetExpired,
            Decided::EngineFailure => DecidedBy::EngineFailure,
            Decided::Shutdown => DecidedBy::Shutdown,
            // A word this build of the component does not know cannot be its own decision.
            _ => DecidedBy::EngineFailure,
        },
        audit: audit_text(&record),
        reason: record.reason,
        observers: observers.into_iter().map(delivery).collect(),
    }
}

/// The record as JSON, written into a buffer a call's record fits in (so it is not
/// grown and copied on the way). A record that does not serialize cannot happen (plain
/// data); were it to, an empty audit makes the host settle the call as an engine
/// failure, never as permission.
fn audit_text(record: &ahp_vocab::Record) -> String {
    const RECORD_CAPACITY: usize = 1024;
    let mut text = Vec::with_capacity(RECORD_CAPACITY);
    match serde_json::to_writer(&mut text, record) {
        Ok(()) => String::from_utf8(text).unwrap_or_default(),
        Err(_) => String::new(),
    }
}

fn delivery(d: ObserverDelivery) -> Delivery {
    Delivery {
        backend: d.backend,
        message: d.message.map(Message::into_bytes).unwrap_or_default(),
        deadline: d.deadline,
    }
}

/// The component's imports seen as the protocol's [`Host`].
struct ComponentHost;

impl Host for ComponentHost {
    type Credential = Credential;

    fn now(&self) -> Instant {
        wasi::clocks::monotonic_clock::now()
    }

    fn acquire(
        &mut self,
        backend: &str,
        deadline: Instant,
    ) -> Result<Option<Credential>, AuthError> {
        wit_credentials::acquire(backend, deadline).map_err(|e| match e {
            wit_credentials::AuthError::Unresolved => AuthError::Unresolved,
            wit_credentials::AuthError::AcquisitionFailed => AuthError::AcquisitionFailed,
            wit_credentials::AuthError::RefreshFailed => AuthError::RefreshFailed,
            wit_credentials::AuthError::Unsupported => AuthError::Unsupported,
            wit_credentials::AuthError::DeadlineExceeded => AuthError::DeadlineExceeded,
            wit_credentials::AuthError::Cancelled => AuthError::Cancelled,
        })
    }

    fn reject(&mut self, credential: &Credential) {
        wit_credentials::reject(credential);
    }

    fn exchange(
        &mut self,
        backend: &str,
        message: &[u8],
        credential: Option<&Credential>,
        deadline: Instant,
    ) -> Result<Reply, DeliveryError> {
        wit_delivery::exchange(backend, message, credential, deadline)
            .map(|r| host_api::Reply {
                status: r.status,
                content_type: r.content_type,
                body: r.body,
            })
            .map_err(|e| match e {
                WitDeliveryError::DeadlineExceeded(phase) => {
                    DeliveryError::DeadlineExceeded(match phase {
                        WitIoPhase::Connect => IoPhase::Connect,
                        WitIoPhase::Send => IoPhase::Send,
                        WitIoPhase::AwaitResponse => IoPhase::AwaitResponse,
                        WitIoPhase::ReadResponse => IoPhase::ReadResponse,
                    })
                }
                WitDeliveryError::Cancelled => DeliveryError::Cancelled,
                WitDeliveryError::ConnectionRefused => DeliveryError::ConnectionRefused,
                WitDeliveryError::UnresolvedHost => DeliveryError::UnresolvedHost,
                WitDeliveryError::ConnectionReset => DeliveryError::ConnectionReset,
                WitDeliveryError::ConnectionLost => DeliveryError::ConnectionLost,
                WitDeliveryError::TlsFailed => DeliveryError::TlsFailed,
                WitDeliveryError::MalformedHttp => DeliveryError::MalformedHttp,
                WitDeliveryError::MalformedFraming => DeliveryError::MalformedFraming,
                WitDeliveryError::LaunchFailed => DeliveryError::LaunchFailed,
                WitDeliveryError::AbnormalExit(code) => DeliveryError::AbnormalExit(code),
                WitDeliveryError::ResponseTooLarge => DeliveryError::ResponseTooLarge,
                WitDeliveryError::NotPermitted => DeliveryError::NotPermitted,
            })
    }

    fn interrupted(&self) -> bool {
        wit_delivery::interrupted()
    }

    fn retry_after(&mut self, backend: &str, attempt: u32, deadline: Instant) -> bool {
        wit_delivery::retry_after(backend, attempt, deadline)
    }

    fn sha256(&self, bytes: &[u8]) -> String {
        wit_delivery::sha256(bytes)
    }
}
