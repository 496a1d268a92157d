//! Portable registration documents (digest §6): parse, validate, and hand back typed
//! backends and subscriptions.
//!
//! The harness must reject an invalid or ambiguous registration before using it, and
//! must never skip part of one silently (§6 rules 10–11). So [`parse`] does not stop at
//! the first mistake: it walks the whole document and returns every [`Problem`], each
//! naming the JSON Pointer of the offending field, so an operator can fix them all in one
//! go. Unknown fields are ignored with a warning; they never change dispatch or auth.
//!
//! Values inside an `authentication` object may be secrets, so problems about them name
//! fields only, never values.

use crate::syntax::{is_env_name, is_http_url};
use serde_json::{Map, Value};
use std::fmt;

/// `response` still reaches the reverse-DNS predicate through this module.
pub(crate) use crate::syntax::is_reverse_dns;

/// Events an intercept subscription may select (digest §6 rule 6).
pub const INTERCEPTABLE_EVENTS: &[&str] = &[
    "tool.before",
    "tool.after",
    "session.start",
    "config.change.before",
    "turn.start",
    "turn.finish.before",
    "model.request.before",
    "model.response.after",
    "model.switch.before",
    "tool.permission.request",
    "tool.batch.after",
    "context.compact.before",
    "context.compact.after",
    "task.change.before",
    "user.elicitation.request",
    "user.elicitation.result",
    "user.message.inbound",
    "user.message.outbound",
    "workspace.change.before",
];

/// Keys that would hold a credential in the clear. A registration names where a secret
/// lives (`tokenEnv`, `tokenRef`, `clientSecretRef`), never the secret itself.
const LITERAL_SECRET_KEYS: &str =
    "token bearerToken value secret clientSecret password accessToken";

/// Known fields (space-separated): anything else is ignored with a warning (§6 rule 11).
const BACKEND_FIELDS: &str = "id transport authentication subscriptions contentReceiver";
const OAUTH_FIELDS: &str = "type issuer resource clientId flow scopes clientSecretRef";
const SUBSCRIPTION_FIELDS: &str = "id events mode timeoutMs failurePolicy content \
    includeNative upload filters scope disableable";
const LITERAL_SECRET_RULE: &str = "literal secrets are not allowed; use tokenEnv or tokenRef";

/// Timeouts outside this range are accepted but are likely a mistake.
const SUPPORTED_TIMEOUT_MS: std::ops::RangeInclusive<u64> = 100..=30_000;

/// A validated registration: backends in document order (the chain order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub backends: Vec<Backend>,
    /// Accepted oddities: unknown fields, timeouts outside the supported range.
    pub warnings: Vec<Problem>,
}

impl Registration {
    /// The backend with this id, if any (ids are unique).
    pub fn backend(&self, id: &str) -> Option<&Backend> {
        self.backends.iter().find(|b| b.id == id)
    }
}

/// One entry of `hooks`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    pub id: String,
    pub transport: Transport,
    pub auth: Option<Auth>,
    pub subscriptions: Vec<Subscription>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    Http {
        url: String,
    },
    Stdio {
        command: String,
        args: Vec<String>,
        cwd: Option<String>,
        lifecycle: Lifecycle,
    },
}

/// Whether a stdio backend is one long-lived process or one process per event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    Persistent,
    PerEvent,
}

/// A portable credential binding. Only references to secrets, never secrets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// Bearer token read from this environment variable.
    BearerEnv(String),
    /// Bearer token resolved by the host's credential store under this reference.
    BearerRef(String),
    OAuth(OAuth),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuth {
    pub issuer: String,
    pub resource: String,
    pub client_id: String,
    /// `authorization_code_pkce` or `client_credentials`.
    pub flow: String,
    pub scopes: Vec<String>,
    pub client_secret_ref: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// Position within its backend's `subscriptions` array (the local subscription id).
    pub index: usize,
    pub events: Vec<EventPattern>,
    pub mode: Mode,
    pub include_native: bool,
}

impl Subscription {
    /// Whether this subscription receives `event_type`. An intercept subscription only
    /// ever selects interceptable events, even through a wildcard (§6.1).
    pub fn selects(&self, event_type: &str) -> bool {
        let interceptable = INTERCEPTABLE_EVENTS.contains(&event_type);
        (interceptable || self.mode == Mode::Observe)
            && self.events.iter().any(|p| p.matches(event_type))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Intercept {
        timeout_ms: u64,
        policy: FailurePolicy,
    },
    Observe,
}

/// What an operational failure of an interceptor does (there is no default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailurePolicy {
    FailOpen,
    FailClosed,
}

impl FailurePolicy {
    /// The registration spelling, also used in audit records.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::FailOpen => "fail-open",
            FailurePolicy::FailClosed => "fail-closed",
        }
    }
}

/// One entry of `events`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EventPattern {
    Exact(String),
    /// `model.*` is stored as `Family("model")`.
    Family(String),
    /// `*`.
    Any,
}

impl EventPattern {
    /// Pure pattern matching. It does **not** know about modes: `*` matches `turn.end`
    /// too, so intercept dispatch must also require the event to be interceptable (see
    /// [`Subscription::selects`]).
    pub fn matches(&self, event_type: &str) -> bool {
        match self {
            EventPattern::Exact(name) => name == event_type,
            EventPattern::Family(family) => event_type
                .strip_prefix(family.as_str())
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|rest| !rest.is_empty()),
            EventPattern::Any => true,
        }
    }
}

/// One broken (or, in `warnings`, questionable) field: where, and which rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// JSON Pointer to the field; `""` for the document root.
    pub path: String,
    pub rule: String,
}

impl Problem {
    fn new(path: &str, rule: impl Into<String>) -> Self {
        Problem {
            path: path.into(),
            rule: rule.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.rule)
    }
}

/// Parses and validates a registration document. Any problem rejects the whole document.
pub fn parse(text: &str) -> Result<Registration, Vec<Problem>> {
    let root: Value = serde_json::from_str(text)
        .map_err(|e| vec![Problem::new("", format!("not valid JSON: {e}"))])?;
    let mut c = Checker::default();
    match document(&mut c, &root) {
        Some(backends) if c.problems.is_empty() => Ok(Registration {
            backends,
            warnings: c.warnings,
        }),
        _ if c.problems.is_empty() => Err(vec![Problem::new("", "could not be validated")]),
        _ => Err(c.problems),
    }
}

/// Collects problems and warnings. Every helper that returns `None` has recorded why.
#[derive(Default)]
struct Checker {
    problems: Vec<Problem>,
    warnings: Vec<Problem>,
}

impl Checker {
    fn problem(&mut self, path: &str, rule: impl Into<String>) {
        self.problems.push(Problem::new(path, rule));
    }
    fn fail<T>(&mut self, path: &str, rule: impl Into<String>) -> Option<T> {
        self.problem(path, rule);
        None
    }
    fn warn(&mut self, path: &str, rule: impl Into<String>) {
        self.warnings.push(Problem::new(path, rule));
    }
}

/// An object under validation with its JSON Pointer, so field checks can name paths.
struct Node<'a> {
    obj: &'a Map<String, Value>,
    path: String,
}

impl<'a> Node<'a> {
    fn new(c: &mut Checker, v: &'a Value, path: &str) -> Option<Self> {
        let found = type_name(v);
        let obj = v
            .as_object()
            .or_else(|| c.fail(path, format!("must be an object, found {found}")))?;
        Some(Node {
            obj,
            path: path.to_owned(),
        })
    }
    fn at(&self, key: &str) -> String {
        at(&self.path, key)
    }
    fn has(&self, key: &str) -> bool {
        self.obj.contains_key(key)
    }
    /// Unknown fields are ignored (§6 rule 11); `known` is space-separated.
    fn warn_unknown(&self, c: &mut Checker, known: &str) {
        let unknown = |k: &&String| !known.split_whitespace().any(|x| x == k.as_str());
        for key in self.obj.keys().filter(unknown) {
            c.warn(&self.at(key), "unknown field ignored");
        }
    }
    /// A required field, checked by `check`.
    fn need<T>(
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
    fn opt<T>(
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

fn document(c: &mut Checker, root: &Value) -> Option<Vec<Backend>> {
    let doc = Node::new(c, root, "")?;
    doc.warn_unknown(c, "protocolVersion hooks");
    doc.need(c, "protocolVersion", |c, v, p| match v.as_str() {
        Some("draft") => Some(()),
        Some(_) => c.fail(p, "only \"draft\" is supported"),
        None => c.fail(p, format!("must be \"draft\", found {}", type_name(v))),
    });
    let hooks = doc.need(c, "hooks", non_empty_array)?;
    let mut ids = Vec::new();
    each(c, hooks, "/hooks", |c, _, v, p| backend(c, v, p, &mut ids))
}

/// One backend: identity, transport, optional credentials and its subscriptions.
fn backend(c: &mut Checker, v: &Value, path: &str, ids: &mut Vec<String>) -> Option<Backend> {
    let b = Node::new(c, v, path)?;
    b.warn_unknown(c, BACKEND_FIELDS);
    if b.has("contentReceiver") {
        c.problem(&b.at("contentReceiver"), "is not supported (no alias)");
    }
    let id = b.need(c, "id", |c, v, p| match string(c, v, p)? {
        id if !is_reverse_dns(id) => c.fail(p, "must be a reverse-DNS name like com.example.hooks"),
        id if ids.iter().any(|seen| seen == id) => {
            c.fail(p, "repeats the id of an earlier backend")
        }
        id => {
            ids.push(id.to_owned());
            Some(id.to_owned())
        }
    });
    let transport = b.need(c, "transport", transport);
    let stdio = v.pointer("/transport/type").and_then(Value::as_str) == Some("stdio");
    let auth = b.opt(c, "authentication", |c, v, p| {
        if stdio {
            c.problem(p, "is only allowed with the http transport");
        }
        authentication(c, v, p)
    });
    let subscriptions = b.need(c, "subscriptions", |c, v, p| {
        let items = non_empty_array(c, v, p)?;
        each(c, items, p, |c, i, v, p| subscription(c, v, p, i))
    });
    Some(Backend {
        id: id?,
        transport: transport?,
        auth: auth?,
        subscriptions: subscriptions?,
    })
}

/// Exactly one transport: `http` (a URL) or `stdio` (a command and its lifecycle).
fn transport(c: &mut Checker, v: &Value, path: &str) -> Option<Transport> {
    let t = Node::new(c, v, path)?;
    let kinds = [("http", true), ("stdio", false)];
    if t.need(c, "type", |c, v, p| choice(c, v, p, &kinds))? {
        t.warn_unknown(c, "type url");
        let url = t.need(c, "url", |c, v, p| match string(c, v, p)? {
            url if is_http_url(url, false) => Some(url.to_owned()),
            _ => c.fail(p, "must be an absolute http(s) URL with a host"),
        });
        return Some(Transport::Http { url: url? });
    }
    t.warn_unknown(c, "type command args cwd lifecycle");
    let command = t.need(c, "command", non_empty);
    let args = t.opt(c, "args", strings);
    let cwd = t.opt(c, "cwd", string);
    let lifecycles = [
        ("persistent", Lifecycle::Persistent),
        ("per_event", Lifecycle::PerEvent),
    ];
    let lifecycle = t.need(c, "lifecycle", |c, v, p| choice(c, v, p, &lifecycles));
    Some(Transport::Stdio {
        command: command?.to_owned(),
        args: args?.unwrap_or_default(),
        cwd: cwd?.map(str::to_owned),
        lifecycle: lifecycle?,
    })
}

/// A portable credential binding: `bearer` or `oauth` (AHP-AUTH-001). Problems here
/// name fields only: any value may be a secret.
fn authentication(c: &mut Checker, v: &Value, path: &str) -> Option<Auth> {
    reject_literal_secrets(c, v, path);
    let a = Node::new(c, v, path)?;
    let bearer = a.need(c, "type", |c, v, p| match string(c, v, p)? {
        "bearer" => Some(true),
        "oauth" => Some(false),
        _ => c.fail(p, "is not portable (AHP-AUTH-001): use bearer or oauth"),
    })?;
    if bearer {
        a.warn_unknown(c, &format!("type tokenEnv tokenRef {LITERAL_SECRET_KEYS}"));
        return match (a.has("tokenEnv"), a.has("tokenRef")) {
            (true, true) => c.fail(path, "bearer takes one of tokenEnv or tokenRef, not both"),
            (false, false) => c.fail(path, "bearer needs tokenEnv or tokenRef"),
            (true, false) => a.need(c, "tokenEnv", |c, v, p| match string(c, v, p)? {
                name if is_env_name(name) => Some(Auth::BearerEnv(name.to_owned())),
                _ => c.fail(p, "must be an environment variable name"),
            }),
            (false, true) => a
                .need(c, "tokenRef", non_empty)
                .map(|r| Auth::BearerRef(r.into())),
        };
    }
    a.warn_unknown(c, &format!("{OAUTH_FIELDS} {LITERAL_SECRET_KEYS}"));
    let issuer = a.need(c, "issuer", |c, v, p| match string(c, v, p)? {
        url if is_http_url(url, true) => Some(url.to_owned()),
        _ => c.fail(p, "must be an https:// URL"),
    });
    let resource = a.need(c, "resource", non_empty);
    let client_id = a.need(c, "clientId", non_empty);
    let flows = [("authorization_code_pkce", ()), ("client_credentials", ())];
    let flow = a.need(c, "flow", |c, v, p| choice(c, v, p, &flows).and(v.as_str()));
    let scopes = a.opt(c, "scopes", strings);
    let secret_ref = a.opt(c, "clientSecretRef", non_empty);
    if flow == Some("client_credentials") && !a.has("clientSecretRef") {
        c.warn(
            path,
            "client_credentials without clientSecretRef cannot authenticate: every call will be auth-failed",
        );
    }
    Some(Auth::OAuth(OAuth {
        issuer: issuer?,
        resource: resource?.to_owned(),
        client_id: client_id?.to_owned(),
        flow: flow?.to_owned(),
        scopes: scopes?.unwrap_or_default(),
        client_secret_ref: secret_ref?.map(str::to_owned),
    }))
}

/// Flags every literal-secret key, at any depth, without ever reading its value.
fn reject_literal_secrets(c: &mut Checker, v: &Value, path: &str) {
    match v {
        Value::Object(obj) => {
            for (key, inner) in obj {
                let inner_path = at(path, key);
                if LITERAL_SECRET_KEYS
                    .split_whitespace()
                    .any(|secret| secret == key)
                {
                    c.problem(&inner_path, LITERAL_SECRET_RULE);
                }
                reject_literal_secrets(c, inner, &inner_path);
            }
        }
        Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                reject_literal_secrets(c, inner, &format!("{path}/{i}"));
            }
        }
        _ => {}
    }
}

/// An intercept or observe subscription, with the fields both kinds share.
fn subscription(c: &mut Checker, v: &Value, path: &str, index: usize) -> Option<Subscription> {
    let s = Node::new(c, v, path)?;
    s.warn_unknown(c, SUBSCRIPTION_FIELDS);
    let events = s.need(c, "events", events);
    let modes = [("intercept", true), ("observe", false)];
    let mode = match s.need(c, "mode", |c, v, p| choice(c, v, p, &modes)) {
        Some(true) => {
            require_interceptable(c, events.iter().flatten(), &s.at("events"));
            intercept_mode(c, &s)
        }
        Some(false) => {
            for key in ["timeoutMs", "failurePolicy"] {
                if s.has(key) {
                    c.problem(&s.at(key), "is not allowed on an observe subscription");
                }
            }
            Some(Mode::Observe)
        }
        None => None,
    };
    let content = s.need(c, "content", content);
    let include_native = s.opt(c, "includeNative", boolean);
    let id = s.opt(c, "id", string);
    let filters = s.opt(c, "filters", filters);
    let upload = s.opt(c, "upload", upload);
    managed_scope(c, &s);
    content.and(id).and(filters).and(upload)?;
    Some(Subscription {
        index,
        events: events?.into_iter().collect::<Option<_>>()?,
        mode: mode?,
        include_native: include_native?.unwrap_or(false),
    })
}

/// `events`: non-empty and unique. Positions are kept (`None` for a bad entry) so the
/// interceptable check can still name its own offenders.
fn events(c: &mut Checker, v: &Value, path: &str) -> Option<Vec<Option<EventPattern>>> {
    let items = non_empty_array(c, v, path)?;
    let patterns = items.iter().enumerate().map(|(i, item)| {
        let item_path = format!("{path}/{i}");
        let text = string(c, item, &item_path)?;
        if items.iter().take(i).any(|earlier| earlier == item) {
            return c.fail(&item_path, "repeats an earlier event");
        }
        event_pattern(text).map_or_else(|rule| c.fail(&item_path, rule), Some)
    });
    Some(patterns.collect())
}

/// Wildcards are a whole family (`model.*`) or everything (`*`); nothing else (§6 rule 7).
fn event_pattern(text: &str) -> Result<EventPattern, &'static str> {
    if text == "*" {
        return Ok(EventPattern::Any);
    }
    if let Some(family) = text.strip_suffix(".*") {
        let mut chars = family.chars();
        let lowercase_word = chars.next().is_some_and(|ch| ch.is_ascii_lowercase())
            && chars.all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit());
        if !lowercase_word {
            return Err("a family wildcard is a lowercase family name and .*");
        }
        return Ok(EventPattern::Family(family.to_owned()));
    }
    match text {
        _ if text.contains('*') => Err("wildcards must be a whole family (family.*) or *"),
        _ if is_reverse_dns(text) => Ok(EventPattern::Exact(text.to_owned())),
        _ => Err("must be a dotted event name like tool.before"),
    }
}

/// An intercept subscription may select only interceptable events, and a family
/// wildcard must reach at least one (§6 rule 6). `turn.end` is observe-only.
fn require_interceptable<'e>(
    c: &mut Checker,
    events: impl Iterator<Item = &'e Option<EventPattern>>,
    path: &str,
) {
    for (i, pattern) in events.enumerate() {
        let Some(pattern) = pattern else { continue };
        if !INTERCEPTABLE_EVENTS.iter().any(|e| pattern.matches(e)) {
            c.problem(&format!("{path}/{i}"), "selects no interceptable event");
        }
    }
}

/// `timeoutMs` and `failurePolicy` are both required: there is no default policy.
fn intercept_mode(c: &mut Checker, s: &Node) -> Option<Mode> {
    let timeout_ms = s.need(c, "timeoutMs", |c, v, p| match v.as_u64() {
        Some(ms @ 1..) => {
            if !SUPPORTED_TIMEOUT_MS.contains(&ms) {
                c.warn(p, "supported range is 100..30000 ms");
            }
            Some(ms)
        }
        _ => c.fail(p, "must be a positive integer (milliseconds)"),
    });
    let policies = [
        ("fail-open", FailurePolicy::FailOpen),
        ("fail-closed", FailurePolicy::FailClosed),
    ];
    let policy = s.need(c, "failurePolicy", |c, v, p| choice(c, v, p, &policies));
    Some(Mode::Intercept {
        timeout_ms: timeout_ms?,
        policy: policy?,
    })
}

/// Content selection: a required `default`, and every category is body|metadata|omit.
fn content(c: &mut Checker, v: &Value, path: &str) -> Option<()> {
    let n = Node::new(c, v, path)?;
    let selections = [("body", ()), ("metadata", ()), ("omit", ())];
    let checked: Vec<_> = n
        .obj
        .iter()
        .map(|(key, v)| choice(c, v, &n.at(key), &selections))
        .collect();
    let default = n.need(c, "default", |_, _, _| Some(()));
    checked.into_iter().collect::<Option<()>>().and(default)
}

/// Managed policy must not be user-disableable: fail rather than silently degrade.
fn managed_scope(c: &mut Checker, s: &Node) {
    let scopes = [("managed", true), ("project", false), ("user", false)];
    let managed = s.opt(c, "scope", |c, v, p| choice(c, v, p, &scopes));
    let disableable = s.opt(c, "disableable", boolean);
    if managed == Some(Some(true)) && matches!(disableable, Some(None | Some(true))) {
        c.problem(&s.at("disableable"), "must be false for scope \"managed\"");
    }
}

/// Filters are optimisation hints only (never a reason to drop a call): types only.
fn filters(c: &mut Checker, v: &Value, path: &str) -> Option<()> {
    let f = Node::new(c, v, path)?;
    f.warn_unknown(c, "toolKinds paths");
    let tool_kinds = f.opt(c, "toolKinds", strings);
    tool_kinds.and(f.opt(c, "paths", strings)).map(drop)
}

/// Content upload is not implemented here, but its credentials still get checked.
fn upload(c: &mut Checker, v: &Value, path: &str) -> Option<()> {
    let u = Node::new(c, v, path)?;
    c.warn(path, "content upload is not supported here and is ignored");
    u.opt(c, "auth", authentication).map(drop)
}

// ---- Value helpers. Each records a problem before returning `None`. ----

fn string<'a>(c: &mut Checker, v: &'a Value, path: &str) -> Option<&'a str> {
    v.as_str()
        .or_else(|| c.fail(path, format!("must be a string, found {}", type_name(v))))
}

fn non_empty<'a>(c: &mut Checker, v: &'a Value, path: &str) -> Option<&'a str> {
    match string(c, v, path)? {
        "" => c.fail(path, "must not be empty"),
        s => Some(s),
    }
}

fn boolean(c: &mut Checker, v: &Value, path: &str) -> Option<bool> {
    v.as_bool().or_else(|| {
        c.fail(
            path,
            format!("must be true or false, found {}", type_name(v)),
        )
    })
}

fn non_empty_array<'a>(c: &mut Checker, v: &'a Value, path: &str) -> Option<&'a [Value]> {
    match v.as_array() {
        None => c.fail(path, format!("must be an array, found {}", type_name(v))),
        Some(items) if items.is_empty() => c.fail(path, "must not be empty"),
        Some(items) => Some(items),
    }
}

fn strings(c: &mut Checker, v: &Value, path: &str) -> Option<Vec<String>> {
    let found = type_name(v);
    let items = v
        .as_array()
        .or_else(|| c.fail(path, format!("must be an array, found {found}")))?;
    each(c, items, path, |c, _, v, p| {
        string(c, v, p).map(str::to_owned)
    })
}

/// Checks every item (never stopping at the first bad one); `None` if any was bad.
fn each<'a, T>(
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
fn choice<T: Copy>(c: &mut Checker, v: &Value, path: &str, options: &[(&str, T)]) -> Option<T> {
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
fn at(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FIXTURES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/upstream/fixtures/draft/registration"
    );
    /// Where each invalid fixture is wrong. Unlisted new fixtures must still be rejected.
    const OFFENDING: &[(&str, &str)] = &[
        (
            "content-default-missing",
            "/hooks/0/subscriptions/0/content/default",
        ),
        ("empty-hooks", "/hooks"),
        (
            "intercept-content-missing",
            "/hooks/0/subscriptions/0/content",
        ),
        (
            "intercept-observation-event",
            "/hooks/0/subscriptions/0/events/0",
        ),
        ("literal-token", "/hooks/0/authentication/token"),
        ("mtls", "/hooks/0/authentication/type"),
        (
            "observe-content-missing",
            "/hooks/1/subscriptions/1/content",
        ),
        (
            "observe-policy-fields",
            "/hooks/0/subscriptions/0/failurePolicy",
        ),
        ("workload", "/hooks/0/authentication/type"),
    ];

    /// A valid document: an http bearer backend with one intercept subscription (`$i`),
    /// then a stdio backend with one observe subscription (`$o`).
    fn base() -> Value {
        json!({ "protocolVersion": "draft", "hooks": [
            { "id": "com.example.policy",
              "transport": { "type": "http", "url": "https://policy.example.com/hooks" },
              "authentication": { "type": "bearer", "tokenEnv": "AHP_TOKEN" },
              "subscriptions": [{ "events": ["tool.before"], "mode": "intercept",
                  "timeoutMs": 750, "failurePolicy": "fail-closed",
                  "content": { "default": "metadata" } }] },
            { "id": "com.example.local",
              "transport": { "type": "stdio", "command": "review", "lifecycle": "per_event" },
              "subscriptions": [{ "events": ["*"], "mode": "observe",
                  "content": { "default": "omit" } }] }
        ]})
    }

    /// Test pointers may say `$i`, `$o` (see [`base`]) and `$a` (the first backend's auth).
    fn expand(pointer: &str) -> String {
        let auth = "/hooks/0/authentication";
        let (intercept, observe) = ("/hooks/0/subscriptions/0", "/hooks/1/subscriptions/0");
        pointer
            .replace("$i", intercept)
            .replace("$o", observe)
            .replace("$a", auth)
    }

    /// [`base`] with each `(pointer, JSON text)` set, or removed when the text is empty.
    fn edited(edits: &[(&str, &str)]) -> String {
        let mut doc = base();
        for (pointer, text) in edits {
            let pointer = expand(pointer);
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            let value = serde_json::from_str(text).ok();
            match (doc.pointer_mut(parent).unwrap(), value) {
                (Value::Object(obj), Some(value)) => drop(obj.insert(key.into(), value)),
                (Value::Object(obj), None) => drop(obj.remove(key)),
                (Value::Array(items), Some(value)) => items[key.parse::<usize>().unwrap()] = value,
                _ => panic!("cannot edit {pointer}"),
            }
        }
        doc.to_string()
    }

    fn accepted(edits: &[(&str, &str)]) -> Registration {
        parse(&edited(edits)).unwrap_or_else(|p| panic!("{edits:?} rejected: {p:#?}"))
    }

    fn rejected_at(edits: &[(&str, &str)], path: &str) -> Vec<Problem> {
        let problems = parse(&edited(edits)).expect_err(&format!("{edits:?} accepted"));
        let path = expand(path);
        assert!(
            problems.iter().any(|p| p.path == path),
            "{edits:?}: want {path}, got {problems:#?}"
        );
        problems
    }

    /// Each case sets one field and must be rejected with a problem at the given path.
    fn rejects(cases: &[(&str, &str, &str)]) {
        for (pointer, text, path) in cases {
            rejected_at(&[(pointer, text)], path);
        }
    }

    #[test]
    fn every_fixture_is_accepted_iff_it_is_named_valid() {
        let mut count = 0;
        for entry in std::fs::read_dir(FIXTURES).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let text = std::fs::read_to_string(format!("{FIXTURES}/{name}")).unwrap();
            count += 1;
            if name.ends_with(".valid.json") {
                parse(&text).unwrap_or_else(|p| panic!("{name} rejected: {p:#?}"));
            } else if let Some(stem) = name.strip_suffix(".invalid.json") {
                let problems = parse(&text).expect_err(&name);
                if let Some((_, path)) = OFFENDING.iter().find(|(s, _)| *s == stem) {
                    assert!(
                        problems.iter().any(|p| p.path == *path),
                        "{name}: {problems:#?}"
                    );
                }
                let echoed = |p: &Problem| p.to_string().contains("do-not-store-literal-tokens");
                assert!(!problems.iter().any(echoed), "{name} echoes a secret");
            }
        }
        assert!(count > 0, "no fixtures found in {FIXTURES}");
    }

    #[test]
    fn r1_portable_fixture_keeps_two_backends_and_three_subscriptions_in_order() {
        let text = std::fs::read_to_string(format!("{FIXTURES}/portable.valid.json")).unwrap();
        let reg = parse(&text).unwrap();
        let sub = |index, event: &str, mode| Subscription {
            index,
            events: vec![EventPattern::Exact(event.into())],
            mode,
            include_native: false,
        };
        let intercept = |timeout_ms, policy| Mode::Intercept { timeout_ms, policy };
        let policy = Backend {
            id: "com.example.policy".into(),
            transport: Transport::Http {
                url: "https://policy.example.com/agent-hooks".into(),
            },
            auth: Some(Auth::BearerEnv("AHP_POLICY_TOKEN".into())),
            subscriptions: vec![sub(
                0,
                "tool.before",
                intercept(750, FailurePolicy::FailClosed),
            )],
        };
        let review = Backend {
            id: "com.example.local_review".into(),
            transport: Transport::Stdio {
                command: "/usr/local/bin/local-review".into(),
                args: vec!["serve".into()],
                cwd: None,
                lifecycle: Lifecycle::Persistent,
            },
            auth: None,
            subscriptions: vec![
                sub(0, "tool.before", intercept(500, FailurePolicy::FailOpen)),
                sub(1, "tool.after", Mode::Observe),
            ],
        };
        assert_eq!(
            reg,
            Registration {
                backends: vec![policy, review.clone()],
                warnings: vec![]
            }
        );
        assert_eq!(reg.backend("com.example.local_review"), Some(&review));
        assert_eq!(FailurePolicy::FailOpen.as_str(), "fail-open");
    }

    #[test]
    fn text_that_is_not_a_json_object_is_one_problem_at_the_root() {
        let problems = parse("{\"hooks\": [").unwrap_err();
        assert_eq!(problems.len(), 1);
        assert_eq!(
            (
                problems[0].path.as_str(),
                problems[0].to_string().contains("line 1")
            ),
            ("", true)
        );
        assert_eq!(
            parse("[]").unwrap_err()[0].to_string(),
            "/: must be an object, found an array"
        );
    }

    #[test]
    fn r2_r3_protocol_version_is_draft_and_hooks_are_a_non_empty_array() {
        rejects(&[
            ("/protocolVersion", r#""1.0""#, "/protocolVersion"),
            ("/protocolVersion", "1", "/protocolVersion"),
            ("/protocolVersion", "", "/protocolVersion"),
            ("/hooks", "[]", "/hooks"),
            ("/hooks", "{}", "/hooks"),
            ("/hooks", "", "/hooks"),
        ]);
    }

    #[test]
    fn r4_r5_intercept_needs_a_failure_policy_and_a_positive_integer_timeout() {
        rejects(&[
            ("$i/failurePolicy", "", "$i/failurePolicy"),
            ("$i/failurePolicy", r#""fail-soft""#, "$i/failurePolicy"),
            ("$i/timeoutMs", "", "$i/timeoutMs"),
            ("$i/timeoutMs", "0", "$i/timeoutMs"),
            ("$i/timeoutMs", "-5", "$i/timeoutMs"),
            ("$i/timeoutMs", "1.5", "$i/timeoutMs"),
            ("$i/timeoutMs", r#""500""#, "$i/timeoutMs"),
        ]);
    }

    #[test]
    fn timeout_outside_the_supported_range_is_accepted_with_a_warning() {
        for ms in [1, 60_000] {
            let reg = accepted(&[("$i/timeoutMs", &ms.to_string())]);
            let policy = FailurePolicy::FailClosed;
            assert_eq!(
                reg.backends[0].subscriptions[0].mode,
                Mode::Intercept {
                    timeout_ms: ms,
                    policy
                }
            );
            let warned =
                |w: &Problem| w.path == expand("$i/timeoutMs") && w.rule.contains("100..30000");
            assert!(reg.warnings.iter().any(warned), "{:#?}", reg.warnings);
        }
    }

    #[test]
    fn r6_observe_must_not_carry_policy_fields() {
        rejects(&[
            ("$o/timeoutMs", "100", "$o/timeoutMs"),
            ("$o/failurePolicy", r#""fail-open""#, "$o/failurePolicy"),
        ]);
    }

    #[test]
    fn r7_r11_intercept_selects_only_interceptable_events() {
        rejects(&[
            ("$i/events", r#"["tool.before", "turn.end"]"#, "$i/events/1"),
            ("$i/events", r#"["file.*"]"#, "$i/events/0"),
            ("$i/events", r#"["com.example.custom"]"#, "$i/events/0"),
        ]);
        let reg = accepted(&[("$i/events", r#"["model.*", "*"]"#)]);
        let want = vec![EventPattern::Family("model".into()), EventPattern::Any];
        assert_eq!(reg.backends[0].subscriptions[0].events, want);
        accepted(&[("$o/events", r#"["turn.end", "file.*"]"#)]);
    }

    #[test]
    fn r8_every_subscription_needs_content_with_a_valid_default() {
        rejects(&[
            ("$i/content", "", "$i/content"),
            ("$o/content", r#"{"text": "body"}"#, "$o/content/default"),
            ("$i/content/text", r#""full""#, "$i/content/text"),
            ("$i/content/default", "null", "$i/content/default"),
        ]);
        accepted(&[("$o/content/x-custom", r#""body""#)]);
    }

    #[test]
    fn r9_non_portable_authentication_types_are_rejected() {
        for kind in ["mtls", "workload", "basic"] {
            let auth = json!({"type": kind, "credentialRef": "x"}).to_string();
            let problems = rejected_at(&[("$a", &auth)], "$a/type");
            assert!(problems.iter().any(|p| p.rule.contains("AHP-AUTH-001")));
        }
    }

    #[test]
    fn r10_literal_secrets_are_rejected_and_never_echoed() {
        let marker = "SECRET-VALUE-42";
        for key in LITERAL_SECRET_KEYS.split_whitespace() {
            let path = format!("$a/{key}");
            let problems = rejected_at(&[(&path, &format!("{marker:?}"))], &path);
            assert!(problems.iter().all(|p| !p.to_string().contains(marker)));
        }
        let nested = json!({"type": marker, "tokenEnv": marker, "x": [{"password": marker}]});
        let problems = rejected_at(&[("$a", &nested.to_string())], "$a/x/0/password");
        assert!(
            problems
                .iter()
                .all(|p| !format!("{p}{p:?}").contains(marker)),
            "{problems:#?}"
        );
    }

    #[test]
    fn r12_wildcards_are_a_whole_family_or_star_and_events_are_unique() {
        for pattern in [
            "tool.be*",
            "*.before",
            "**",
            "Tool.*",
            "tool.before.*",
            "tool",
            "",
        ] {
            rejected_at(&[("$i/events/0", &format!("{pattern:?}"))], "$i/events/0");
        }
        rejects(&[
            (
                "$i/events",
                r#"["tool.before", "tool.before"]"#,
                "$i/events/1",
            ),
            ("$i/events", "[]", "$i/events"),
        ]);
    }

    #[test]
    fn patterns_match_purely_and_subscriptions_filter_by_mode() {
        let family = EventPattern::Family("model".into());
        assert!(family.matches("model.request.before") && family.matches("model.error"));
        assert!(
            !family.matches("model") && !family.matches("models.x") && !family.matches("model.")
        );
        assert!(EventPattern::Any.matches("turn.end"));
        let mode = Mode::Intercept {
            timeout_ms: 500,
            policy: FailurePolicy::FailOpen,
        };
        let sub = Subscription {
            index: 0,
            events: vec![EventPattern::Any],
            mode,
            include_native: false,
        };
        assert!(sub.selects("tool.before") && !sub.selects("turn.end"));
        assert!(Subscription {
            mode: Mode::Observe,
            ..sub
        }
        .selects("turn.end"));
    }

    #[test]
    fn r13_backend_ids_are_reverse_dns_and_unique() {
        rejects(&[
            ("/hooks/0/id", r#""policy""#, "/hooks/0/id"),
            ("/hooks/0/id", r#""1com.example""#, "/hooks/0/id"),
            ("/hooks/0/id", r#""com..example""#, "/hooks/0/id"),
            ("/hooks/0/id", "7", "/hooks/0/id"),
            ("/hooks/1/id", r#""com.example.policy""#, "/hooks/1/id"),
        ]);
    }

    #[test]
    fn r14_stdio_auth_two_bearer_sources_and_content_receiver_are_rejected() {
        rejects(&[
            (
                "/hooks/1/authentication",
                r#"{"type": "bearer", "tokenRef": "vault:p"}"#,
                "/hooks/1/authentication",
            ),
            ("$a/tokenRef", r#""vault:p""#, "$a"),
            ("$a/tokenEnv", "", "$a"),
            ("$a/tokenEnv", r#""1BAD""#, "$a/tokenEnv"),
            (
                "/hooks/0/contentReceiver",
                r#"{"url": "https://r.example.com"}"#,
                "/hooks/0/contentReceiver",
            ),
        ]);
    }

    #[test]
    fn r15_unknown_fields_are_ignored_with_a_warning() {
        let paths = [
            "/x-root",
            "/hooks/0/x-backend",
            "/hooks/0/transport/x-t",
            "$i/x-sub",
        ];
        let edits: Vec<_> = paths.iter().map(|p| (*p, r#"{"anything": 1}"#)).collect();
        let reg = accepted(&edits);
        assert_eq!(reg.backends, accepted(&[]).backends);
        for path in paths.map(expand) {
            assert!(
                reg.warnings.iter().any(|w| w.path == path),
                "{path}: {:#?}",
                reg.warnings
            );
        }
    }

    #[test]
    fn r16_managed_scope_requires_disableable_false() {
        let managed = ("$i/scope", r#""managed""#);
        rejected_at(&[managed], "$i/disableable");
        rejected_at(&[managed, ("$i/disableable", "true")], "$i/disableable");
        accepted(&[managed, ("$i/disableable", "false")]);
        rejected_at(&[("$i/scope", r#""global""#)], "$i/scope");
    }

    #[test]
    fn transports_are_checked() {
        for url in [
            "ftp://x.example",
            "https://",
            "https:// x.example",
            "/hooks",
            "https://:80/",
        ] {
            rejected_at(
                &[("/hooks/0/transport/url", &format!("{url:?}"))],
                "/hooks/0/transport/url",
            );
        }
        accepted(&[("/hooks/0/transport/url", r#""http://[::1]:8080/h?q""#)]);
        rejects(&[
            (
                "/hooks/1/transport/lifecycle",
                "",
                "/hooks/1/transport/lifecycle",
            ),
            (
                "/hooks/1/transport/command",
                r#""""#,
                "/hooks/1/transport/command",
            ),
            (
                "/hooks/1/transport/args",
                r#"["ok", 1]"#,
                "/hooks/1/transport/args/1",
            ),
            (
                "/hooks/1/transport/type",
                r#""ws""#,
                "/hooks/1/transport/type",
            ),
        ]);
    }

    #[test]
    fn oauth_bindings_are_parsed_and_checked() {
        let oauth = r#"{"type": "oauth", "issuer": "https://id.example.com", "resource": "r",
            "clientId": "c", "flow": "client_credentials", "scopes": ["s"],
            "clientSecretRef": "v"}"#;
        let reg = accepted(&[("$a", oauth)]);
        let Some(Auth::OAuth(got)) = &reg.backends[0].auth else {
            panic!("{reg:?}")
        };
        assert_eq!(
            (got.flow.as_str(), got.scopes.as_slice()),
            ("client_credentials", &["s".into()][..])
        );
        assert_eq!(got.client_secret_ref.as_deref(), Some("v"));
        assert!(reg.warnings.is_empty(), "{:#?}", reg.warnings);
        let secretless = accepted(&[("$a", oauth), ("$a/clientSecretRef", "")]);
        assert!(
            secretless
                .warnings
                .iter()
                .any(|w| w.path == expand("$a") && w.rule.contains("clientSecretRef")),
            "{:#?}",
            secretless.warnings
        );
        let problems = rejected_at(
            &[("$a", r#"{"type": "oauth", "issuer": "http://id"}"#)],
            "$a/issuer",
        );
        for missing in ["resource", "clientId", "flow"].map(|k| expand(&format!("$a/{k}"))) {
            assert!(problems.iter().any(|p| p.path == missing), "{missing}");
        }
        rejected_at(&[("$a", oauth), ("$a/flow", r#""implicit""#)], "$a/flow");
    }

    #[test]
    fn shared_subscription_fields_are_type_checked() {
        rejects(&[
            ("$o/includeNative", r#""yes""#, "$o/includeNative"),
            (
                "$o/filters",
                r#"{"toolKinds": [1]}"#,
                "$o/filters/toolKinds/0",
            ),
            (
                "$o/upload",
                r#"{"auth": {"type": "bearer", "token": "t"}}"#,
                "$o/upload/auth/token",
            ),
            ("$o/id", "3", "$o/id"),
        ]);
        assert!(
            accepted(&[("$o/includeNative", "true")]).backends[1].subscriptions[0].include_native
        );
    }

    #[test]
    fn all_problems_are_collected_and_odd_shapes_never_panic() {
        let edits = [
            ("/protocolVersion", "2"),
            ("/hooks/0/id", "7"),
            ("$i/timeoutMs", "0"),
            ("$o/content", ""),
        ];
        let problems = parse(&edited(&edits)).unwrap_err();
        let paths: Vec<_> = problems.iter().map(|p| p.path.clone()).collect();
        assert_eq!(paths, edits.map(|(pointer, _)| expand(pointer)));
        let odd = r#"null 1 "x" [] {} [{}] -1.5 {"type":[]} {"type":"oauth"}"#;
        let slots =
            "/hooks /hooks/0 /hooks/0/transport $a /hooks/0/subscriptions $i $i/events $i/content";
        for slot in slots.split(' ') {
            for value in odd.split(' ') {
                let _ = parse(&edited(&[(slot, value)]));
            }
        }
    }
}
