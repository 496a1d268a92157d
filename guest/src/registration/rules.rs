//! The registration rules (digest §6): what each field of the document must be.
//!
//! One function per object of the document, top-down: document, backend, transport,
//! authentication, subscription and the parts of a subscription. Each checks every field
//! it owns and returns `None` only after recording why (see `problems`); shape checks on
//! single strings are the pure predicates of [`crate::syntax`]. Rule numbers refer to
//! the digest's list in §6.

use super::problems::{
    boolean, choice, distinct_names, distinct_names_that, each, non_empty, non_empty_array, string,
    strings, type_name, Checker, Node,
};
use super::{
    Auth, Backend, EventPattern, FailurePolicy, Lifecycle, Mode, OAuth, OAuthFlow, Subscription,
    Transport, View,
};
use crate::content::{Content, Selection};
use crate::json;
use crate::syntax::{
    argument_carries_a_credential, ends_in_a_credential_word, follows_a_credential_option,
    has_a_reachable_port, has_a_secret_parameter, has_userinfo, holds_a_credential_word,
    is_absolute_uri, is_env_name, is_http_url, is_loopback_http_url, is_reverse_dns,
    is_secret_name, mentions_a_credential, names_a_count_or_data_key, names_a_credential,
    normalized, origin, secret_after_option, unreadable_part, Unreadable, MAX_URL_BYTES,
};
use ahp_vocab::SUPPORTED_TIMEOUT_MS;
use serde_json::Value;

/// A URL with `user:password@`: a literal secret, refused like any other (its value is
/// never echoed).
const USERINFO: &str =
    "must not carry user info (user:password@): credentials belong in `authentication`";
/// A URL with a parameter named as a secret (`?access_token=…`): as literal as user info.
/// Neither the parameter nor its value is repeated.
const SECRET_PARAMETER: &str = "must not carry a credential in a query or fragment parameter \
    named as a secret (such as access_token or api_key): credentials belong in \
    `authentication`";
/// A port no client can read would be read as none: the scheme's default, another
/// service than the one registered.
const PORT: &str = "must name no port, or one from 1 to 65535";

/// Known fields (space-separated): anything else is ignored with a warning (§6 rule 11).
const BACKEND_FIELDS: &str = "id transport authentication subscriptions contentReceiver";
const OAUTH_FIELDS: &str = "type issuer resource clientId flow scopes clientSecretRef";
const SUBSCRIPTION_FIELDS: &str = "id events mode timeoutMs failurePolicy content \
    includeNative upload filters scope disableable";
const LITERAL_SECRET_RULE: &str = "is named as a literal secret, which a registration never \
    holds: name where it lives instead (tokenEnv, tokenRef, clientSecretRef)";

/// The whole document: the supported version and a non-empty, ordered `hooks` array.
pub(super) fn document(c: &mut Checker, root: &Value) -> Option<Vec<Backend>> {
    reject_literal_secrets(c, root, "", Some("hooks"));
    let doc = Node::new(c, root, "")?;
    doc.warn_unknown(c, "protocolVersion hooks");
    doc.need(c, "protocolVersion", |c, v, p| match v.as_str() {
        Some("draft") => Some(()),
        Some(_) => c.fail(p, "only \"draft\" is supported"),
        None => c.fail(p, format!("must be \"draft\", found {}", type_name(v))),
    });
    let hooks = doc.need(c, "hooks", non_empty_array)?;
    // A set: tens of thousands of backends looked up one by one would take the load past
    // the component's time.
    let mut ids = std::collections::HashSet::new();
    each(c, hooks, "/hooks", |c, _, v, p| backend(c, v, p, &mut ids))
}

/// One backend: identity, transport, optional credentials and its subscriptions.
fn backend(
    c: &mut Checker,
    v: &Value,
    path: &str,
    ids: &mut std::collections::HashSet<String>,
) -> Option<Backend> {
    reject_literal_secrets(c, v, path, Some("subscriptions"));
    let b = Node::new(c, v, path)?;
    b.warn_unknown(c, BACKEND_FIELDS);
    if b.has("contentReceiver") {
        c.problem(&b.at("contentReceiver"), "is not supported (no alias)");
    }
    let id = b.need(c, "id", |c, v, p| match string(c, v, p)? {
        id if !is_reverse_dns(id) => c.fail(p, "must be a reverse-DNS name like com.example.hooks"),
        id if !ids.insert(id.to_owned()) => c.fail(p, "repeats the id of an earlier backend"),
        id => Some(id.to_owned()),
    });
    let transport = b.need(c, "transport", transport);
    let stdio = v.pointer("/transport/type").and_then(Value::as_str) == Some("stdio");
    let auth = b.opt(c, "authentication", |c, v, p| {
        if stdio {
            c.problem(p, "is only allowed with the http transport");
        }
        authentication(c, v, p)
    });
    if let (Some(Transport::Http { url }), Some(Some(Auth::OAuth(oauth)))) = (&transport, &auth) {
        let resource = origin(&oauth.resource);
        if resource.is_some() && resource != origin(url) {
            c.warn(
                &format!("{}/resource", b.at("authentication")),
                "is at another origin than transport.url: the token issued for it is sent to \
                 that URL, which could use it at the resource (digest §9: credentials are \
                 never forwarded to another origin or resource)",
            );
        }
    }
    let subscriptions = b.need(c, "subscriptions", |c, v, p| {
        let items = non_empty_array(c, v, p)?;
        let mut ids = std::collections::HashSet::new();
        each(c, items, p, |c, i, v, p| subscription(c, v, p, i, &mut ids))
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
        let url = t.need(c, "url", |c, v, p| match connectable(c, v, p)? {
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
    let (command, cwd) = (command?, cwd?);
    // Arguments refused at their place leave the command and `cwd` to be checked still.
    let listed = args.as_ref().and_then(Option::as_deref).unwrap_or_default();
    let unstartable = unstartable(path, command, listed, cwd);
    if !unstartable.is_empty() {
        for (at, rule) in unstartable {
            c.problem(&at, rule);
        }
        return None;
    }
    let args = args?.unwrap_or_default();
    for (i, arg) in args.iter().enumerate() {
        let at = format!("{path}/args/{i}");
        let previous = i.checked_sub(1).map(|o| args[o].as_str());
        let given_after = previous.is_some_and(|o| secret_after_option(o, arg));
        let maybe_after = previous.is_some_and(|o| follows_a_credential_option(o, arg));
        if given_after || argument_carries_a_credential(arg) {
            c.problem(&at, LITERAL_SECRET_ARGUMENT);
        } else if maybe_after {
            c.warn(&at, CREDENTIAL_ARGUMENT);
        } else if cwd.is_none() && names_a_relative_file(arg) {
            c.warn(&at, RELATIVE_ARGUMENT);
        }
    }
    Some(Transport::Stdio {
        command: ahp_vocab::stdio_program(command, cwd),
        args,
        cwd: cwd.map(str::to_owned),
        lifecycle: lifecycle?,
    })
}

/// The rule an argument giving a credential's value breaks: besides being in the
/// registration, it is on the backend's command line, which every local user can read
/// (`/proc/PID/cmdline`).
const LITERAL_SECRET_ARGUMENT: &str = "gives a credential's value literally, which a \
     registration never holds (and every local user can read a command line): have the \
     backend read it from its environment or a file";

/// The warning for an argument after an option named as a credential (`--token`).
const CREDENTIAL_ARGUMENT: &str = "follows an option named as a credential: if it is the \
     credential itself, a registration never holds one (and every local user can read a \
     command line): have the backend read it from its environment or a file";

/// The warning for an argument naming a file by a relative path where no `cwd` says
/// where from.
const RELATIVE_ARGUMENT: &str = "looks like a file's relative path, and the backend has no \
     `cwd`: it is resolved in the directory the backend starts in (`/` under ahp-host, \
     never the agent's project, where the agent could put a file of its own); give `cwd`";

/// Whether a stdio argument looks like a file named by a relative path (`policy/server.js`,
/// `./check.sh`, `server.py`): not an option, a URL, an absolute path or words (a `sh -c`
/// script), and holding a `/` or ending in a script's extension. A guess: an argument is
/// the program's to read.
fn names_a_relative_file(arg: &str) -> bool {
    const SCRIPTS: [&str; 10] = [
        ".js", ".mjs", ".cjs", ".ts", ".py", ".sh", ".rb", ".pl", ".php", ".jar",
    ];
    !arg.starts_with(['/', '-'])
        && !arg.contains("://")
        && !arg.contains(char::is_whitespace)
        && (arg.contains('/') || SCRIPTS.iter().any(|ext| arg.ends_with(ext)))
}

/// Each way a stdio transport does not name a program the host could start, or names one
/// the agent could swap: a problem (its pointer and rule) for each. A relative path would be resolved
/// from the directory the process that starts the backend runs in — for a command hook,
/// the agent's project, which the agent can write: a program there is one it could
/// replace with its own, as a relative secret file is one it could plant (refused alike,
/// see `secret_ref`). A `command` with no `/` is a program found on `PATH`, and one
/// relative to an absolute `cwd` is found there. Nothing expands `~` or `$VARIABLES` (the
/// host starts the program itself, no shell). An empty `cwd` is no directory, a blank
/// `command` (spaces only) names no program, and a NUL byte is in no path or argument:
/// such a backend could never start, and a fail-open subscription of it would let every
/// call through unasked.
fn unstartable(
    path: &str,
    command: &str,
    args: &[String],
    cwd: Option<&str>,
) -> Vec<(String, String)> {
    let relative = |p: &str| !p.starts_with('/');
    let wherever = |p: &str| {
        let unexpanded = match p.starts_with(['~', '$']) {
            true => " (no shell expands `~` or `$` here)",
            false => "",
        };
        format!(
            "is a relative path{unexpanded}: it would be resolved from wherever the backend \
             is started (under a command hook, the agent's project, where the agent could \
             put a program of its own), not from this file"
        )
    };
    let nul = "must not hold a NUL byte: no program could be started with it";
    let mut problems: Vec<(String, String)> = Vec::new();
    if command.trim().is_empty() {
        problems.push((
            format!("{path}/command"),
            "is blank: it names no program that could be started".into(),
        ));
    }
    if command.contains('\0') {
        problems.push((format!("{path}/command"), nul.into()));
    }
    for (i, arg) in args.iter().enumerate() {
        if arg.contains('\0') {
            problems.push((format!("{path}/args/{i}"), nul.into()));
        }
    }
    let cwd_path = format!("{path}/cwd");
    match cwd {
        Some("") => problems.push((
            cwd_path,
            "is empty: the backend could never be started there".into(),
        )),
        Some(dir) if dir.contains('\0') => problems.push((cwd_path, nul.into())),
        Some(dir) if relative(dir) => problems.push((cwd_path, wherever(dir))),
        None if command.contains('/') && relative(command) => problems.push((
            format!("{path}/command"),
            format!(
                "{}; make it absolute, or give an absolute cwd",
                wherever(command)
            ),
        )),
        _ if command.starts_with(['~', '$']) => problems.push((
            format!("{path}/command"),
            "starts with `~` or `$`, which no shell expands here (the host starts the \
             program itself): it names no program; make it absolute"
                .into(),
        )),
        _ => {}
    }
    problems
}

/// A URL the host connects to (a backend's, an OAuth issuer's, an upload endpoint's), as
/// a string: with no literal credential in it (user info, a parameter named as one), a
/// port a client can read or none, and only what the host's HTTP client reads as written
/// ([`unreadable_part`]): one it refuses would otherwise fail when the host sets the
/// backend up (or at every token request), naming no field. Its own field's rules
/// (which scheme) are checked after. The URL is never repeated.
fn connectable<'a>(c: &mut Checker, v: &'a Value, path: &str) -> Option<&'a str> {
    match string(c, v, path)? {
        url if has_userinfo(url) => c.fail(path, USERINFO),
        url if has_a_secret_parameter(url) => c.fail(path, SECRET_PARAMETER),
        url if !has_a_reachable_port(url) => c.fail(path, PORT),
        url => match unreadable_part(url) {
            None => Some(url),
            Some(part) => c.fail(path, unreadable(part)),
        },
    }
}

/// The rule a URL breaks whose `part` the host's HTTP client refuses as written.
fn unreadable(part: Unreadable) -> String {
    const READS: &str = "as the host's HTTP client reads it";
    match part {
        Unreadable::Length => format!("must be at most {MAX_URL_BYTES} bytes long, {READS}"),
        Unreadable::Authority => format!(
            "must hold only ASCII letters, digits, `-._~!$&'()*+,;=` and a port's or IP \
             literal's `:[]` in its host, {READS} (an internationalized name goes in its \
             xn-- form)"
        ),
        Unreadable::Path => format!(
            "must hold no non-ASCII character, space, control, `<`, `>` or `` ` `` in its \
             path, {READS}: percent-encode them"
        ),
        Unreadable::Query => format!(
            "must hold no non-ASCII character, space, control, `\"`, `<` or `>` in its \
             query, {READS}: percent-encode them"
        ),
    }
}

/// RFC 6749 §3.3: one scope token is printable ASCII but space, `"` and `\`; a space
/// inside one would ask for two scopes, one of them not locally permitted.
fn scope_token(c: &mut Checker, scope: &str, path: &str) -> Option<()> {
    match scope
        .bytes()
        .all(|b| matches!(b, 0x21 | 0x23..=0x5b | 0x5d..=0x7e))
    {
        true => Some(()),
        false => c.fail(
            path,
            "must be one scope token (RFC 6749 §3.3: printable ASCII, no space, `\"` or `\\`)",
        ),
    }
}

/// A portable credential binding: `bearer` or `oauth` (AHP-AUTH-001). Problems here
/// name fields only: any value may be a secret.
fn authentication(c: &mut Checker, v: &Value, path: &str) -> Option<Auth> {
    let a = Node::new(c, v, path)?;
    let bearer = a.need(c, "type", |c, v, p| match string(c, v, p)? {
        "bearer" => Some(true),
        "oauth" => Some(false),
        _ => c.fail(p, "is not portable (AHP-AUTH-001): use bearer or oauth"),
    })?;
    if bearer {
        a.warn_unknown(c, "type tokenEnv tokenRef");
        return match (a.has("tokenEnv"), a.has("tokenRef")) {
            (true, true) => c.fail(path, "bearer takes one of tokenEnv or tokenRef, not both"),
            (false, false) => c.fail(path, "bearer needs tokenEnv or tokenRef"),
            (true, false) => a.need(c, "tokenEnv", |c, v, p| match string(c, v, p)? {
                name if is_env_name(name) => Some(Auth::BearerEnv(name.to_owned())),
                _ => c.fail(p, "must be an environment variable name"),
            }),
            (false, true) => a
                .need(c, "tokenRef", secret_reference)
                .map(|r| Auth::BearerRef(r.into())),
        };
    }
    a.warn_unknown(c, OAUTH_FIELDS);
    let issuer = a.need(c, "issuer", |c, v, p| match connectable(c, v, p)? {
        url if !is_http_url(url, true) => c.fail(p, "must be an https:// URL"),
        // An issuer identifier has neither, and the host refuses one at every call.
        url if url.contains(['?', '#']) => {
            c.fail(p, "must have no query or fragment (RFC 8414 §2)")
        }
        url => Some(url.to_owned()),
    });
    // RFC 8707 §2: the resource indicator is an absolute URI without a fragment; the token
    // is bound to it and its audience checked against it. It is sent in every token
    // request (`resource=`), so a credential in it is as literal as in a backend's URL.
    let resource = a.need(c, "resource", |c, v, p| match non_empty(c, v, p)? {
        uri if has_userinfo(uri) => c.fail(p, USERINFO),
        uri if has_a_secret_parameter(uri) => c.fail(p, SECRET_PARAMETER),
        uri if !is_absolute_uri(uri) => c.fail(p, "must be an absolute URI (RFC 8707 §2)"),
        uri if uri.contains('#') => c.fail(p, "must have no fragment (RFC 8707 §2)"),
        uri => Some(uri),
    });
    let client_id = a.need(c, "clientId", non_empty);
    let flow = a.need(c, "flow", |c, v, p| {
        choice(c, v, p, &words(OAuthFlow::ALL, OAuthFlow::as_str))
    });
    let scopes = a.opt(c, "scopes", |c, v, p| {
        distinct_names_that(c, v, p, scope_token)
    });
    let secret_ref = a.opt(c, "clientSecretRef", secret_reference);
    if flow == Some(OAuthFlow::ClientCredentials) && !a.has("clientSecretRef") {
        c.warn(
            path,
            "client_credentials without clientSecretRef cannot authenticate: every call will be auth-failed unless the host injects a credential provider for this backend",
        );
    }
    Some(Auth::OAuth(OAuth {
        issuer: issuer?,
        resource: resource?.to_owned(),
        client_id: client_id?.to_owned(),
        flow: flow?,
        scopes: scopes?.unwrap_or_default(),
        client_secret_ref: secret_ref?.map(str::to_owned),
    }))
}

/// Where a secret lives. A `file:` path must be absolute: the host reads it from wherever
/// it runs, and a hook runs in the project the agent works in, where the agent or the
/// repository's author could put a file of their own, and so another identity. Any
/// reference but `env:NAME` and `file:` is only warned about: the host resolves no
/// other, but an embedder's credential provider for the backend may. The warning
/// repeats nothing of the reference, which may be a secret written in its place.
fn secret_reference<'a>(c: &mut Checker, v: &'a Value, path: &str) -> Option<&'a str> {
    match non_empty(c, v, path)? {
        r if r.strip_prefix("file:").is_some_and(|p| !p.starts_with('/')) => c.fail(
            path,
            "a file: path must be absolute: a relative one is read from wherever the hook runs",
        ),
        r if r.starts_with("file:") || r.strip_prefix("env:").is_some_and(is_env_name) => Some(r),
        r => {
            c.warn(
                path,
                "is neither env:NAME (an environment variable name) nor file:/absolute/path, the references the host resolves: every call will be auth-failed unless the host injects a credential provider for this backend",
            );
            Some(r)
        }
    }
}

/// Flags every member named as a literal secret ([`is_secret_name`]) that holds a
/// string or number, at any depth of `v` but its member `owned`, which its own rule
/// searches (a subscription's `content` is not searched at all: its names are content
/// categories, its values selection words). Anywhere, not only in `authentication`: a
/// token at the transport or in a misspelled `authentification` is as much in the clear.
/// But `value` is a common name for what is no secret (an environment variable's or a
/// header's, beside its `name`): it counts inside a credential binding
/// ([`CREDENTIAL_BINDINGS`]), and elsewhere only where it holds a string or number beside
/// a `name` or `key` named as a credential ([`names_a_credential`],
/// [`ends_in_a_credential_word`], [`holds_a_credential_word`]: `API_KEY`,
/// `SECRET_KEY_BASE`, `Authorization`, not `KEYCLOAK_URL`). Inside a binding, so does any member named as a
/// credential by the wider rules ([`names_a_credential_in_a_binding`]: `apiToken`,
/// `client_secret_value`, `pat`), which elsewhere would be warned about as unknown at
/// most. And `auth` holding an object is an upload's binding
/// (content-upload.schema.json), searched like `authentication`; any other secret's
/// name holding an object may hold references and a `type` in it ([`Holds::literal`]),
/// nothing else. The problem names the member, never its value.
fn reject_literal_secrets(c: &mut Checker, v: &Value, path: &str, owned: Option<&str>) {
    let mut holds = Vec::new();
    Holds::of(v, owned, &mut holds);
    let mut search = Search {
        c,
        path: path.to_owned(),
        holds: &holds,
        next: 0,
    };
    search.members(v, owned, false);
}

/// [`reject_literal_secrets`] walking the value, in the order [`Holds::of`] did.
struct Search<'c, 'h> {
    c: &'c mut Checker,
    /// One pointer, grown by each member's segment and cut back after it: a copy per
    /// member would make a long name over a large array quadratic, past the load's CPU
    /// bound.
    path: String,
    /// What each member's value holds, in the walk's order.
    holds: &'h [Holds],
    /// The place in `holds` of the next member the walk meets.
    next: usize,
}

impl Search<'_, '_> {
    /// Searches `v` but its member `owned`, `in_binding` once inside a credential binding.
    fn members(&mut self, v: &Value, owned: Option<&str>, in_binding: bool) {
        let own = self.path.len();
        match v {
            Value::Object(members) => {
                let beside_a_secret = ["name", "key"]
                    .iter()
                    .filter_map(|k| members.get(*k).and_then(Value::as_str))
                    .any(|name| {
                        names_a_credential(name)
                            || holds_a_credential_word(name)
                            || (ends_in_a_credential_word(name) && !names_a_count_or_data_key(name))
                    });
                let in_upload = self.path.ends_with("/upload");
                for (key, inner) in members
                    .iter()
                    .filter(|(key, _)| Some(key.as_str()) != owned)
                {
                    self.path.push('/');
                    self.path.push_str(&crate::json::segment(key));
                    let name = normalized(key);
                    let holds = self.holds[self.next];
                    self.next += 1;
                    let secret = match name.as_str() {
                        "value" => in_binding || beside_a_secret && holds.text,
                        // An upload's binding (its schema says what it holds): searched.
                        "auth" if inner.is_object() && in_upload => false,
                        // An object under a secret's name may name references and its
                        // kind (`tokenEnv`, `type`); any other text in it is a secret.
                        name if inner.is_object() && is_secret_name(name) => holds.literal,
                        name if is_secret_name(name) => holds.text,
                        name if in_binding && names_a_credential_in_a_binding(name) => {
                            holds.literal
                        }
                        _ => false,
                    };
                    if secret {
                        self.c.problem(&self.path, LITERAL_SECRET_RULE);
                    }
                    let binding = in_binding || CREDENTIAL_BINDINGS.contains(&name.as_str());
                    self.members(inner, None, binding);
                    self.path.truncate(own);
                }
            }
            Value::Array(items) => {
                for (i, inner) in items.iter().enumerate() {
                    use std::fmt::Write as _;
                    let _ = write!(self.path, "/{i}");
                    self.members(inner, None, in_binding);
                    self.path.truncate(own);
                }
            }
            _ => {}
        }
    }
}

/// What a value holds, as a member named as a secret is judged by its value: found once
/// for every member's value, before the search, so that a secret's name over another's
/// (`{"secret":{"secret":…}}`, to any depth) does not walk the same values again at
/// each level, which was quadratic, past the load's CPU bound.
#[derive(Clone, Copy, Default)]
struct Holds {
    /// It is or holds a string or a number: what a secret could be written as.
    text: bool,
    /// It holds text other than references (members named `…Env`, `…Ref` holding a
    /// string) and a `type`: what an object under a secret's name may hold without
    /// holding one.
    literal: bool,
}

impl Holds {
    /// What `v` (but its member `owned`) holds, after what each value in it holds; that of
    /// each member's value pushed to `members`, in the order the search meets them (a
    /// member before those of its value).
    fn of(v: &Value, owned: Option<&str>, members: &mut Vec<Holds>) -> Holds {
        let mut holds = Holds::default();
        match v {
            Value::Object(object) => {
                for (key, inner) in object.iter().filter(|(key, _)| Some(key.as_str()) != owned) {
                    let at = members.len();
                    members.push(Holds::default());
                    let within = Holds::of(inner, None, members);
                    members[at] = within;
                    let reference = || {
                        let name = normalized(key);
                        name == "type" || is_reference(&name)
                    };
                    holds.text |= within.text;
                    holds.literal |= within.literal && !(inner.is_string() && reference());
                }
            }
            Value::Array(items) => {
                for inner in items {
                    let within = Holds::of(inner, None, members);
                    holds.text |= within.text;
                    holds.literal |= within.literal;
                }
            }
            Value::String(_) | Value::Number(_) => {
                holds = Holds {
                    text: true,
                    literal: true,
                }
            }
            Value::Null | Value::Bool(_) => {}
        }
        holds
    }
}

/// Members (named as [`normalized`] gives) that bind a credential: within them, `value`
/// is one.
const CREDENTIAL_BINDINGS: [&str; 4] = ["authentication", "auth", "contentreceiver", "upload"];

/// Whether a member of a credential binding, [`normalized`], is named as a credential
/// by more than an exact secret name ([`is_secret_name`]): named as a URL parameter
/// holding one is ([`names_a_credential`]: `apiToken`, `private_token`, `secretKey`,
/// `pat`), or ending in a credential's word ([`ends_in_a_credential_word`]:
/// `proxyAuthorization`, `signingKey`, `sessionCookie`), or as the value of one (a
/// credential's word, [`mentions_a_credential`], and `value` at its end:
/// `client_secret_value`). A binding's own members are references (`tokenEnv`,
/// `clientSecretRef`: [`is_reference`]) or settings named otherwise (`issuer`,
/// `clientId`), so such a name is an unknown member, and one holding text is a literal
/// credential, not a field to ignore with a warning. But a name saying where to go
/// (`tokenEndpoint`, `keyUrl`) holds an address, and one merely holding such a word
/// (`tokenType`, `bearerFormat`, `keyId`) a setting this component does not know:
/// ignored with a warning, as any unknown member.
fn names_a_credential_in_a_binding(name: &str) -> bool {
    let names_a_place = ["endpoint", "url", "uri"]
        .iter()
        .any(|end| name.ends_with(end));
    let a_credentials_value = name.ends_with("value") && mentions_a_credential(name);
    !is_reference(name)
        && !names_a_place
        && (names_a_credential(name) || ends_in_a_credential_word(name) || a_credentials_value)
}

/// Whether a member's name, [`normalized`], says it names where a secret lives
/// (`tokenEnv`, `clientSecretRef`, `passwordEnv`), not the secret.
fn is_reference(name: &str) -> bool {
    name.ends_with("env") || name.ends_with("ref")
}

/// An intercept or observe subscription, with the fields both kinds share. Its optional
/// `id` is a label the schema does not define (digest §6: "used in examples"), and the
/// harness names a subscription by its position: so an `id` that is no string is ignored
/// with a warning, as any unknown field is (§6 rule 11), not refused, and one that
/// repeats an earlier id of the backend (`ids`) is warned about (subscriptions are
/// independent, their ids local to the harness; no rule makes them unique), as a record
/// or log keyed by id would mix the two up.
fn subscription(
    c: &mut Checker,
    v: &Value,
    path: &str,
    index: usize,
    ids: &mut std::collections::HashSet<String>,
) -> Option<Subscription> {
    reject_literal_secrets(c, v, path, Some("content"));
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
    if let (Some(Some(true)), Some(content)) = (include_native, &content) {
        native_with_whole_content(c, content, &s.at("includeNative"));
    }
    s.opt(c, "id", |c, v, p| {
        match v.as_str() {
            Some(id) if !ids.insert(id.to_owned()) => c.warn(
                p,
                "repeats the id of an earlier subscription of this backend: both are kept, \
                 each named by its position",
            ),
            Some(_) => {}
            None => c.warn(
                p,
                format!(
                    "is {}, not a string: ignored (the schema defines no subscription id)",
                    type_name(v)
                ),
            ),
        }
        Some(())
    });
    let filters = s.opt(c, "filters", filters);
    let upload = s.opt(c, "upload", upload);
    managed_scope(c, &s);
    filters.and(upload)?;
    Some(Subscription {
        index,
        events: events?.into_iter().collect::<Option<_>>()?,
        mode: mode?,
        view: View {
            include_native: include_native?.unwrap_or(false),
            content: content?,
        },
    })
}

/// `events`: non-empty and unique. Positions are kept (`None` for a bad entry) so the
/// interceptable check can still name its own offenders.
fn events(c: &mut Checker, v: &Value, path: &str) -> Option<Vec<Option<EventPattern>>> {
    let items = non_empty_array(c, v, path)?;
    // A set, not a look back at every earlier entry: tens of thousands of entries would
    // take the load past the component's time.
    let mut seen = std::collections::HashSet::new();
    let patterns = items.iter().enumerate().map(|(i, item)| {
        let item_path = format!("{path}/{i}");
        let text = string(c, item, &item_path)?;
        if !seen.insert(text) {
            return c.fail(&item_path, "repeats an earlier event");
        }
        let pattern = event_pattern(text).map_or_else(|rule| c.fail(&item_path, rule), Some)?;
        // A name is one of the catalogue's (registration.schema.json): any other type is
        // unsupported semantics (digest §13), never an event `Event::parse_any` passes
        // on. A family wildcard the schema allows may still select none of them; it is
        // kept, but would never be delivered.
        let selects = crate::events::CATALOGUE.iter().any(|t| pattern.matches(t));
        match pattern {
            EventPattern::Exact(_) if !selects => {
                return c.fail(&item_path, "must be an event type of the catalogue")
            }
            _ if !selects => c.warn(
                &item_path,
                "selects no event type of the catalogue: never delivered",
            ),
            _ => {}
        }
        Some(pattern)
    });
    Some(patterns.collect())
}

/// Wildcards are a whole family (`model.*`) or everything (`*`); nothing else (§6 rule 7).
/// A pattern that passes is read as the host reads it ([`EventPattern::read`]).
fn event_pattern(text: &str) -> Result<EventPattern, &'static str> {
    if let Some(family) = text.strip_suffix(".*") {
        let mut chars = family.chars();
        let lowercase_word = chars.next().is_some_and(|ch| ch.is_ascii_lowercase())
            && chars.all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit());
        if !lowercase_word {
            return Err("a family wildcard is a lowercase family name and .*");
        }
    } else if text != "*" {
        if text.contains('*') {
            return Err("wildcards must be a whole family (family.*) or *");
        }
        if !is_reverse_dns(text) {
            return Err("must be a dotted event name like tool.before");
        }
    }
    Ok(EventPattern::read(text))
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
        if !crate::events::TABLE
            .iter()
            .any(|r| pattern.matches(r.event.as_str()))
        {
            c.problem(&format!("{path}/{i}"), "selects no interceptable event");
        }
    }
}

/// `timeoutMs` and `failurePolicy` are both required: there is no default policy.
fn intercept_mode(c: &mut Checker, s: &Node) -> Option<Mode> {
    let timeout_ms = s.need(c, "timeoutMs", |c, v, p| {
        match json::integer_value::<u64>(v) {
            Some(ms @ 1..) => {
                if !SUPPORTED_TIMEOUT_MS.contains(&ms) {
                    c.warn(p, "supported range is 100..30000 ms");
                }
                Some(ms)
            }
            _ if is_too_large(v) => c.fail(p, too_large("milliseconds")),
            _ => c.fail(p, "must be a positive integer (milliseconds)"),
        }
    });
    let policies = words(FailurePolicy::ALL, FailurePolicy::as_str);
    let policy = s.need(c, "failurePolicy", |c, v, p| choice(c, v, p, &policies));
    Some(Mode::Intercept {
        timeout_ms: timeout_ms?,
        policy: policy?,
    })
}

/// Content selection: a required `default`, and every category is body|metadata|omit
/// (any category name is allowed; one not named takes the default).
/// The members content-selection.schema.json names: the default and the categories.
const NAMED_CATEGORIES: [&str; 7] = [
    "default",
    "text",
    "reasoning",
    "images",
    "audio",
    "video",
    "files",
];

fn content(c: &mut Checker, v: &Value, path: &str) -> Option<Content> {
    let n = Node::new(c, v, path)?;
    let selections = [
        ("body", Selection::Body),
        ("metadata", Selection::Metadata),
        ("omit", Selection::Omit),
    ];
    let checked: Vec<_> = n
        .entries()
        .map(|(key, v)| choice(c, v, &n.at(key), &selections).map(|s| (key.clone(), s)))
        .collect();
    // Another name is allowed (a part may name its own category), but is more likely a
    // typo (`image`), which would leave the category meant at the default.
    let unnamed = format!(
        "is no category the schema names ({}): it selects only the parts that name it as \
         their own category",
        NAMED_CATEGORIES[1..].join(", ")
    );
    for (key, _) in n.entries() {
        if !NAMED_CATEGORIES.contains(&key.as_str()) {
            c.ignore(&n.at(key), unnamed.as_str());
        }
    }
    let present = n.need(c, "default", |_, _, _| Some(()));
    let mut categories = checked
        .into_iter()
        .collect::<Option<std::collections::BTreeMap<_, _>>>()?;
    present?;
    let default = categories.remove("default")?;
    Some(Content {
        default,
        categories,
    })
}

/// `native` is the provider's payload, opaque and sent verbatim: the prompt, the tool's
/// output and every attachment are in it as the provider wrote them. Content selection
/// lowers parts, never `native`, so `includeNative` beside a selection below `body`
/// would send what that selection withholds (common.schema.json `native`: native data
/// cannot bypass content selection). It is refused rather than `native` being dropped:
/// a backend that asked for it must not silently get less.
fn native_with_whole_content(c: &mut Checker, content: &Content, path: &str) {
    let lowered: Vec<&str> = std::iter::once(("default", content.default))
        .chain(
            content
                .categories
                .iter()
                .map(|(name, s)| (name.as_str(), *s)),
        )
        .filter(|(_, selection)| *selection != Selection::Body)
        .map(|(name, _)| name)
        .collect();
    if !lowered.is_empty() {
        c.problem(
            path,
            format!(
                "needs content \"body\" for every category (lowered here: {}): native data is \
                 opaque and would carry what content selection lowers",
                lowered.join(", ")
            ),
        );
    }
}

/// Managed policy must not be user-disableable (R16), and mandatory policy this
/// interceptor cannot enforce fails rather than silently degrades (§6 rule 8). Nothing
/// here can keep a user from disabling a hook: `ahp hook install` writes to the user's
/// or the project's settings, and a harness embedding the component owns its own
/// switches (the manifest says `scopes: [user|project], disableable: true`). So a
/// managed or non-disableable subscription is refused, never loaded as a disableable one.
fn managed_scope(c: &mut Checker, s: &Node) {
    let scopes = [("managed", true), ("project", false), ("user", false)];
    let managed = s.opt(c, "scope", |c, v, p| choice(c, v, p, &scopes));
    let disableable = s.opt(c, "disableable", boolean);
    let managed = managed == Some(Some(true));
    if managed {
        // Both at once: made `false` as the first asks, it would be refused for the second.
        if matches!(disableable, Some(None | Some(true))) {
            c.problem(&s.at("disableable"), "must be false for scope \"managed\"");
        }
        c.problem(&s.at("scope"), UNENFORCEABLE);
    } else if disableable == Some(Some(false)) {
        c.problem(&s.at("disableable"), UNENFORCEABLE);
    }
}

/// Why a managed or non-disableable subscription is refused.
const UNENFORCEABLE: &str = "asks for managed policy (a subscription users cannot \
    disable), which this interceptor cannot enforce: refused rather than loaded as one \
    they can disable (digest §6 rule 8)";

/// Filters are optimisation hints only (never a reason to drop a call): types only.
fn filters(c: &mut Checker, v: &Value, path: &str) -> Option<()> {
    let f = Node::new(c, v, path)?;
    f.warn_unknown(c, "toolKinds paths");
    let tool_kinds = f.opt(c, "toolKinds", distinct_names);
    tool_kinds.and(f.opt(c, "paths", distinct_names)).map(drop)
}

/// Content upload is not implemented here and is ignored with a warning, but only once
/// it is well-formed (content-upload.schema.json): an endpoint, a timeout and a size
/// bound are required, and its credentials are checked like any other binding. A
/// malformed one is refused, as the schema refuses it: ignoring it would hide a mistake
/// that breaks the same registration in a harness that does upload.
fn upload(c: &mut Checker, v: &Value, path: &str) -> Option<()> {
    let u = Node::new(c, v, path)?;
    u.warn_unknown(c, "endpoint auth timeoutMs maxBytes");
    let endpoint = u.need(c, "endpoint", |c, v, p| match connectable(c, v, p)? {
        url if is_http_url(url, true) || is_loopback_http_url(url) => Some(()),
        _ => c.fail(
            p,
            "must be an https:// URL (http:// only to localhost, 127.x.x.x or [::1])",
        ),
    });
    let timeout_ms = u.need(c, "timeoutMs", |c, v, p| {
        match json::integer_value::<u64>(v) {
            Some(1..) => Some(()),
            _ if is_too_large(v) => c.fail(p, too_large("milliseconds")),
            _ => c.fail(p, "must be a positive integer (milliseconds)"),
        }
    });
    let max_bytes = u.need(c, "maxBytes", |c, v, p| {
        match json::integer_value::<u64>(v) {
            Some(_) => Some(()),
            None if is_too_large(v) => c.fail(p, too_large("bytes")),
            None => c.fail(p, "must be a non-negative integer (bytes)"),
        }
    });
    let auth = u.opt(c, "auth", authentication);
    endpoint.and(timeout_ms).and(max_bytes).and(auth)?;
    c.warn(path, "content upload is not supported here and is ignored");
    Some(())
}

/// Whether `v` is a whole number past the largest count held ([`json::is_too_large`]).
fn is_too_large(v: &Value) -> bool {
    v.as_number().is_some_and(json::is_too_large)
}

/// The rule for a count of `unit` past the largest held.
fn too_large(unit: &str) -> String {
    format!("is too large: at most {} {unit}", u64::MAX)
}

/// A closed word list as the `(spelling, value)` options of [`choice`].
fn words<T: Copy>(all: &[T], spell: fn(T) -> &'static str) -> Vec<(&'static str, T)> {
    all.iter().map(|&w| (spell(w), w)).collect()
}
