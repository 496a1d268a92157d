//! Small builders shared by the end-to-end tests: registrations, events, components.

use serde_json::{json, Value};

/// One HTTP interceptor in a test registration.
#[derive(Clone, Debug)]
pub struct Http<'a> {
    pub id: &'a str,
    pub url: String,
    pub policy: &'a str,
    pub timeout_ms: u64,
    /// `Some(name)`: bearer token from that environment variable.
    pub token_env: Option<&'a str>,
}

impl<'a> Http<'a> {
    /// A fail-closed interceptor with a 1 s timeout.
    pub fn new(id: &'a str, url: impl Into<String>) -> Http<'a> {
        Http {
            id,
            url: url.into(),
            policy: "fail-closed",
            timeout_ms: 1_000,
            token_env: None,
        }
    }

    pub fn policy(mut self, policy: &'a str) -> Self {
        self.policy = policy;
        self
    }

    pub fn timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = timeout_ms;
        self
    }

    pub fn token_env(mut self, name: &'a str) -> Self {
        self.token_env = Some(name);
        self
    }
}

/// A registration with the given interceptors on `tool.before`, in order.
pub fn registration(backends: &[Http]) -> String {
    let hooks: Vec<Value> = backends
        .iter()
        .map(|b| {
            let mut hook = json!({
                "id": b.id,
                "transport": {"type": "http", "url": b.url},
                "subscriptions": [{
                    "events": ["tool.before"], "mode": "intercept",
                    "timeoutMs": b.timeout_ms, "failurePolicy": b.policy,
                    "content": {"default": "metadata"}
                }]
            });
            if let Some(name) = b.token_env {
                hook["authentication"] = json!({"type": "bearer", "tokenEnv": name});
            }
            hook
        })
        .collect();
    json!({"protocolVersion": "draft", "hooks": hooks}).to_string()
}

/// A valid `tool.before` event with the given id.
pub fn event(id: &str) -> String {
    json!({
        "id": id,
        "source": "urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d",
        "type": "tool.before",
        "time": "2026-11-30T12:00:00Z",
        "session": {"id": "sess_e2e"},
        "call": {"id": format!("call_{id}")},
        "tool": {"name": "Bash", "input": {"command": "make test"}, "origin": "native"},
        "path": "native"
    })
    .to_string()
}

/// The hostile test component (`tests/runaway-guest`): spins or panics in `intercept`.
pub fn runaway_component() -> Vec<u8> {
    std::fs::read(env!("RUNAWAY_COMPONENT"))
        .expect("the runaway component was built by tests/build.rs")
}

/// Builds an interceptor with the embedded component and default options.
pub async fn interceptor(registration: &str) -> ahp_host::Interceptor {
    ahp_host::Interceptor::new(registration, ahp_host::Options::default())
        .await
        .expect("valid test registration")
}
