//! The component reads the registration and tells the host which backends it has: where
//! each is, what command starts it, where its secret is read from (`plan`). The host
//! builds what the plan asks for, so it checks first that the plan says nothing the
//! registration does not: otherwise another build of the component, loaded with
//! `--component`, could run any command as the user or send a secret anywhere, and the
//! sandbox would be no sandbox.
//!
//! Each planned string is compared with the registration's member at its own place in
//! the hook of that id (the URL with `transport.url`, a token variable with
//! `authentication.tokenEnv`, …): a string the hook holds elsewhere (a relative `cwd`
//! made of an argument, the OAuth client secret's reference sent as a bearer token to
//! the backend) is refused too, as is a transport or binding of another kind than the
//! hook's `type` says (or another OAuth `flow`). What the members mean is the component's
//! to read; these names are read here for this check alone.
//!
//! The same holds for how long a call may run: the component's `bound-ms` is its word for
//! the sum of the intercept subscriptions' `timeoutMs`, and the host takes no more than
//! the registration's own timeouts add up to ([`bound_ms`]), so another build cannot
//! declare forever and spin where no budget ends the call.

use crate::bindings::interceptor::{AuthPlan, BackendPlan, OauthFlow, StdioPlan, TransportPlan};
use ahp_vocab::{stdio_program, OAuthFlow};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};

/// Refuses a `plan` that names a backend `registration` does not, names one twice, or
/// gives one a URL, command, argument, directory, secret reference or OAuth setting its
/// hook does not, naming the backend and the field (never the value).
///
/// A registration that does not begin (after whitespace or a byte-order mark) with `{` or
/// `[` is no JSON document of hooks (only another build would accept one): each of those
/// strings must then appear in its text as it is, whole ([`appears_whole`]), and no
/// backend may have a credential. One that begins so and does not parse refuses any
/// plan.
pub(crate) fn check(registration: &str, plan: &[BackendPlan]) -> Result<(), String> {
    if plan.is_empty() {
        return Ok(());
    }
    let hooks = match looks_like_json(registration) {
        true => Some(hooks_by_id(registration)?),
        false => None,
    };
    let mut ids = BTreeSet::new();
    for backend in plan {
        let named = format!("the component planned backend `{}`", backend.id);
        if !ids.insert(backend.id.as_str()) {
            return Err(format!("{named} twice"));
        }
        let wrong = match &hooks {
            // A text no one here reads cannot say which backend a credential goes with:
            // any would be one hook's secret sent wherever another's URL points.
            None if backend.auth.is_some() => Some("credential"),
            None => words(backend)
                .find(|(_, word)| !appears_whole(registration, word))
                .map(|w| w.0),
            Some(hooks) => {
                let Some(given) = hooks.get(backend.id.as_str()) else {
                    return Err(format!("{named}, which the registration does not name"));
                };
                // Where a registration repeats an id (another build may take one), the
                // plan must be one of those hooks, whole.
                let mismatches: Vec<_> = given.iter().map(|hook| mismatch(backend, hook)).collect();
                match mismatches.iter().any(Option::is_none) {
                    true => None,
                    false => mismatches.into_iter().flatten().next(),
                }
            }
        };
        if let Some(field) = wrong {
            return Err(format!("{named}: its {field} is not its registration's"));
        }
    }
    Ok(())
}

/// The longest a call may run, in milliseconds: the component's `claimed` bound, but no
/// more than every subscription's `timeoutMs` in `registration` adds up to (an observe
/// subscription has none; counting one anyway only makes the ceiling higher). A text
/// that does not begin with `{` or `[` is not read (see [`check`]): there the claim
/// stands. One that begins so and does not parse has no timeouts.
pub(crate) fn bound_ms(registration: &str, claimed: u64) -> u64 {
    if !looks_like_json(registration) {
        return claimed;
    }
    let document: Value = serde_json::from_str(registration).unwrap_or(Value::Null);
    let hooks = document["hooks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let subscriptions = hooks
        .iter()
        .filter_map(|hook| hook["subscriptions"].as_array())
        .flatten();
    let ceiling = subscriptions
        .filter_map(|subscription| {
            let timeout = &subscription["timeoutMs"];
            // `as` saturates: a negative timeout counts nothing, one past u64 everything.
            timeout
                .as_u64()
                .or(timeout.as_f64().map(|ms| ms.ceil() as u64))
        })
        .fold(0u64, u64::saturating_add);
    claimed.min(ceiling)
}

/// The component's `chain-timeouts`, each event's chain cut to end within `bound_ms`
/// (what [`bound_ms`] gave): a call waiting for an instance waits until the next of
/// those deadlines, and another build could claim them endless. An honest chain is the
/// timeouts of some of the registration's intercept subscriptions, whose sum is no more
/// than the bound: it is left as it is.
pub(crate) fn chain_timeouts(
    claimed: Vec<(String, Vec<u64>)>,
    bound_ms: u64,
) -> Vec<(String, Vec<u64>)> {
    let cut = |timeouts: Vec<u64>| {
        let mut left = bound_ms;
        let within = |timeout: u64| {
            let kept = timeout.min(left);
            left -= kept;
            kept
        };
        timeouts.into_iter().map(within).collect()
    };
    claimed
        .into_iter()
        .map(|(event, timeouts)| (event, cut(timeouts)))
        .collect()
}

/// How many subscriptions each backend id's hook has (the most, where an id is
/// repeated): the places an audit record's observer entry may name. `None` for a
/// registration that is no JSON document of hooks (another build's format).
pub(crate) fn subscription_counts(registration: &str) -> Option<HashMap<String, usize>> {
    if !looks_like_json(registration) {
        return None;
    }
    let hooks = hooks_by_id(registration).ok()?;
    let count = |hook: &Value| {
        hook.get("subscriptions")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    };
    let counts = hooks
        .into_iter()
        .map(|(id, hooks)| (id, hooks.iter().map(count).max().unwrap_or(0)))
        .collect();
    Some(counts)
}

/// Whether `registration` begins, after whitespace or a byte-order mark, as a JSON
/// document of hooks must: with `{` (or `[`, which another build might read).
fn looks_like_json(registration: &str) -> bool {
    registration
        .trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
        .starts_with(['{', '['])
}

/// The registration's hooks by their `id`, in one pass.
fn hooks_by_id(registration: &str) -> Result<HashMap<String, Vec<Value>>, String> {
    let mut document: Value = serde_json::from_str(registration).map_err(|_| {
        "the component planned backends for a registration the host cannot read as JSON".to_string()
    })?;
    let mut hooks: HashMap<String, Vec<Value>> = HashMap::new();
    if let Some(Value::Array(list)) = document.get_mut("hooks").map(Value::take) {
        for hook in list {
            if let Some(id) = hook.get("id").and_then(Value::as_str) {
                hooks.entry(id.to_owned()).or_default().push(hook);
            }
        }
    }
    Ok(hooks)
}

/// The first field of `backend` whose planned value is not `hook`'s at that place.
fn mismatch(backend: &BackendPlan, hook: &Value) -> Option<&'static str> {
    let (transport, auth) = (&hook["transport"], &hook["authentication"]);
    // The member is this string; `None`: absent (or no string).
    let is = |member: &Value, planned: Option<&str>| member.as_str() == planned;
    let checks: Vec<(&'static str, bool)> = match &backend.transport {
        TransportPlan::Http(url) => vec![
            ("transport", transport["type"] == "http"),
            ("URL", is(&transport["url"], Some(url))),
        ],
        TransportPlan::Stdio(stdio) => vec![
            ("transport", transport["type"] == "stdio"),
            (
                "working directory",
                is(&transport["cwd"], stdio.cwd.as_deref()),
            ),
            ("command", command_given(stdio, &transport["command"])),
            ("argument", same_strings(&transport["args"], &stdio.args)),
        ],
    };
    let auth_checks: Vec<(&'static str, bool)> = match &backend.auth {
        None => Vec::new(),
        Some(AuthPlan::BearerEnv(name)) => vec![
            ("authentication", auth["type"] == "bearer"),
            ("token variable", is(&auth["tokenEnv"], Some(name))),
        ],
        Some(AuthPlan::BearerRef(reference)) => vec![
            ("authentication", auth["type"] == "bearer"),
            ("token reference", is(&auth["tokenRef"], Some(reference))),
        ],
        Some(AuthPlan::Oauth(oauth)) => vec![
            ("authentication", auth["type"] == "oauth"),
            ("OAuth flow", auth["flow"] == flow_word(oauth.flow)),
            ("OAuth issuer", is(&auth["issuer"], Some(&oauth.issuer))),
            (
                "OAuth resource",
                is(&auth["resource"], Some(&oauth.resource)),
            ),
            (
                "OAuth client",
                is(&auth["clientId"], Some(&oauth.client_id)),
            ),
            ("OAuth scope", same_strings(&auth["scopes"], &oauth.scopes)),
            (
                "client secret reference",
                is(&auth["clientSecretRef"], oauth.client_secret_ref.as_deref()),
            ),
        ],
    };
    let mut all = checks.into_iter().chain(auth_checks);
    all.find(|(_, given)| !given).map(|(field, _)| field)
}

/// The registration's word for an OAuth flow.
fn flow_word(flow: OauthFlow) -> &'static str {
    match flow {
        OauthFlow::ClientCredentials => OAuthFlow::ClientCredentials.as_str(),
        OauthFlow::AuthorizationCodePkce => OAuthFlow::AuthorizationCodePkce.as_str(),
    }
}

/// Whether the planned command is the program the hook's command starts under its
/// `cwd` ([`ahp_vocab::stdio_program`], as the component plans it).
fn command_given(stdio: &StdioPlan, command: &Value) -> bool {
    command
        .as_str()
        .is_some_and(|command| stdio.command == stdio_program(command, stdio.cwd.as_deref()))
}

/// Whether `value` is the list of strings `planned` (absent: none).
fn same_strings(value: &Value, planned: &[String]) -> bool {
    match value {
        Value::Null => planned.is_empty(),
        Value::Array(items) => {
            items.len() == planned.len()
                && items
                    .iter()
                    .zip(planned)
                    .all(|(item, p)| item.as_str() == Some(p))
        }
        _ => false,
    }
}

/// Whether `word` stands in `text` as a whole: somewhere neither a letter, digit or
/// character a URL or path goes on with is right before it, nor one right after it, so
/// `https://policy.example.co` is not found in `https://policy.example.com/hooks`, nor
/// `sh` in `/bin/bash`, nor a port's first digits in the port.
fn appears_whole(text: &str, word: &str) -> bool {
    let goes_on = |c: char| c.is_alphanumeric() || "-._~/%:@?#&+!$*".contains(c);
    let Some(first) = word.chars().next() else {
        return false;
    };
    // Every place it starts, overlapping ones too (`x x` in `1x x x`).
    let mut from = 0;
    while let Some(found) = text[from..].find(word) {
        let at = from + found;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        if !before.is_some_and(goes_on) && !after.is_some_and(goes_on) {
            return true;
        }
        from = at + first.len_utf8();
    }
    false
}

/// Each string of `backend` that says where to go, what to run or which secret to read,
/// with what it is: what a registration that is not JSON must hold as it is.
fn words(backend: &BackendPlan) -> impl Iterator<Item = (&'static str, &str)> {
    let mut words: Vec<(&'static str, &str)> = Vec::new();
    match &backend.transport {
        TransportPlan::Http(url) => words.push(("URL", url)),
        TransportPlan::Stdio(stdio) => {
            words.push(("command", &stdio.command));
            words.extend(stdio.args.iter().map(|arg| ("argument", arg.as_str())));
            words.extend(stdio.cwd.as_deref().map(|cwd| ("working directory", cwd)));
        }
    }
    match &backend.auth {
        Some(AuthPlan::BearerEnv(name)) => words.push(("token variable", name)),
        Some(AuthPlan::BearerRef(reference)) => words.push(("token reference", reference)),
        Some(AuthPlan::Oauth(oauth)) => {
            words.push(("OAuth issuer", &oauth.issuer));
            words.push(("OAuth resource", &oauth.resource));
            words.push(("OAuth client", &oauth.client_id));
            words.extend(
                oauth
                    .scopes
                    .iter()
                    .map(|scope| ("OAuth scope", scope.as_str())),
            );
            let secret = oauth.client_secret_ref.as_deref();
            words.extend(secret.map(|reference| ("client secret reference", reference)));
        }
        None => {}
    }
    words.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::interceptor::{OauthFlow, OauthPlan};
    use serde_json::json;

    fn registration() -> String {
        json!({"protocolVersion": "draft", "hooks": [
            {"id": "com.example.web", "transport": {"type": "http", "url": "https://policy.example/hooks"},
             "authentication": {"type": "oauth", "flow": "client_credentials", "issuer": "https://as.example",
                                "resource": "https://policy.example/hooks", "clientId": "c1", "scopes": ["hooks"],
                                "clientSecretRef": "file:/run/secret"}},
            {"id": "com.example.local", "transport": {"type": "stdio", "command": "python3",
             "args": ["-m", "policy"], "cwd": "/srv/policy"},
             "authentication": {"type": "bearer", "tokenEnv": "LOCAL_TOKEN"}},
            {"id": "com.example.open", "transport": {"type": "http", "url": "https://third.example/hooks"}}
        ]})
        .to_string()
    }

    fn web() -> BackendPlan {
        BackendPlan {
            id: "com.example.web".into(),
            transport: TransportPlan::Http("https://policy.example/hooks".into()),
            auth: Some(AuthPlan::Oauth(OauthPlan {
                issuer: "https://as.example".into(),
                resource: "https://policy.example/hooks".into(),
                client_id: "c1".into(),
                flow: OauthFlow::ClientCredentials,
                scopes: vec!["hooks".into()],
                client_secret_ref: Some("file:/run/secret".into()),
            })),
        }
    }

    fn local() -> BackendPlan {
        BackendPlan {
            id: "com.example.local".into(),
            transport: TransportPlan::Stdio(StdioPlan {
                command: "python3".into(),
                args: vec!["-m".into(), "policy".into()],
                cwd: Some("/srv/policy".into()),
                per_event: false,
            }),
            auth: Some(AuthPlan::BearerEnv("LOCAL_TOKEN".into())),
        }
    }

    fn open() -> BackendPlan {
        BackendPlan {
            id: "com.example.open".into(),
            transport: TransportPlan::Http("https://third.example/hooks".into()),
            auth: None,
        }
    }

    /// `local()`'s kind of plan, its stdio transport to change.
    fn stdio(plan: &mut BackendPlan) -> &mut StdioPlan {
        match &mut plan.transport {
            TransportPlan::Stdio(stdio) => stdio,
            TransportPlan::Http(_) => panic!("not a stdio plan"),
        }
    }

    /// `web()`'s kind of plan, its OAuth binding to change.
    fn oauth(plan: &mut BackendPlan) -> &mut OauthPlan {
        match &mut plan.auth {
            Some(AuthPlan::Oauth(oauth)) => oauth,
            _ => panic!("not an OAuth plan"),
        }
    }

    /// A plan of the registration's own words passes, whole or in part.
    #[test]
    fn a_plan_of_the_registrations_own_words_passes() {
        assert_eq!(check(&registration(), &[web(), local(), open()]), Ok(()));
        assert_eq!(check(&registration(), &[open()]), Ok(()));
    }

    /// A relative program (a path with a `/`) is planned by its absolute path under the
    /// hook's `cwd`, as the component resolves it; only there, and not as written (which
    /// a child's changed directory may resolve from the host's own).
    #[test]
    fn a_relative_command_may_be_planned_under_its_cwd() {
        let registration = json!({"hooks": [{"id": "com.example.local",
            "transport": {"type": "stdio", "command": "bin/policy", "cwd": "/srv/policy/"}}]})
        .to_string();
        let planned = |command: &str| BackendPlan {
            id: "com.example.local".into(),
            transport: TransportPlan::Stdio(StdioPlan {
                command: command.into(),
                args: Vec::new(),
                cwd: Some("/srv/policy/".into()),
                per_event: true,
            }),
            auth: None,
        };
        assert_eq!(
            check(&registration, &[planned("/srv/policy/bin/policy")]),
            Ok(())
        );
        for elsewhere in [
            "bin/policy",
            "/srv/bin/policy",
            "/srv/policy/bin/other",
            "/srv/policy//bin/policy",
        ] {
            let refused = check(&registration, &[planned(elsewhere)]).unwrap_err();
            assert!(
                refused.contains(": its command is not"),
                "{elsewhere}: {refused}"
            );
        }
    }

    /// A backend the registration does not name, one named twice, or one given a word
    /// its hook does not hold (invented, or another hook's) is refused, naming the field.
    #[test]
    fn a_plan_that_says_more_than_the_registration_is_refused() {
        let with = |change: fn(&mut BackendPlan), base: fn() -> BackendPlan| {
            let mut backend = base();
            change(&mut backend);
            check(&registration(), &[backend]).unwrap_err()
        };
        let unknown = with(|b| b.id = "com.example.other".into(), open);
        assert!(unknown.contains("does not name"), "{unknown}");
        let twice = check(&registration(), &[open(), open()]).unwrap_err();
        assert!(twice.contains("twice"), "{twice}");
        /// A change to a planned backend, the backend it changes, and the field named.
        type Case = (fn(&mut BackendPlan), fn() -> BackendPlan, &'static str);
        let cases: [Case; 11] = [
            (
                |b| b.transport = TransportPlan::Http("https://evil.example/".into()),
                open,
                "URL",
            ),
            (|b| stdio(b).command = "sh".into(), local, "command"),
            (|b| stdio(b).args.push("-c".into()), local, "argument"),
            (
                |b| stdio(b).cwd = Some("/".into()),
                local,
                "working directory",
            ),
            // A string the hook holds, at another place: an argument as the directory (a
            // relative one, the harness's), the client secret's reference as a bearer token
            // sent to the backend.
            (
                |b| stdio(b).cwd = Some("policy".into()),
                local,
                "working directory",
            ),
            (
                |b| b.auth = Some(AuthPlan::BearerRef("file:/run/secret".into())),
                web,
                "authentication",
            ),
            // Another hook's secret beside this hook's URL: each word is the registration's,
            // but not this hook's.
            (
                |b| b.auth = Some(AuthPlan::BearerEnv("LOCAL_TOKEN".into())),
                open,
                "authentication",
            ),
            (
                |b| b.auth = Some(AuthPlan::BearerEnv("HOME".into())),
                local,
                "token variable",
            ),
            (
                |b| b.auth = Some(AuthPlan::BearerRef("file:/etc/shadow".into())),
                local,
                "token reference",
            ),
            (
                |b| oauth(b).issuer = "https://as.evil.example".into(),
                web,
                "OAuth issuer",
            ),
            (
                |b| oauth(b).client_secret_ref = Some("env:HOME".into()),
                web,
                "client secret reference",
            ),
        ];
        for (change, base, field) in cases {
            let refused = with(change, base);
            assert!(
                refused.contains(&format!(": its {field} is not")),
                "{field}: {refused}"
            );
            assert!(
                !refused.contains("evil") && !refused.contains("shadow"),
                "{refused}"
            );
        }
    }

    /// Hooks are found by id in one pass: a registration of 20,000 backends, all planned,
    /// is checked at once; one of them planned wrong is still found.
    #[test]
    fn many_hooks_are_found_by_id() {
        let hooks: Vec<Value> = (0..20_000)
            .map(|i| {
                json!({"id": format!("com.example.b{i}"),
                            "transport": {"type": "http", "url": format!("https://b{i}.example/")}})
            })
            .collect();
        let registration = json!({"hooks": hooks}).to_string();
        let mut plan: Vec<BackendPlan> = (0..20_000)
            .map(|i| BackendPlan {
                id: format!("com.example.b{i}"),
                transport: TransportPlan::Http(format!("https://b{i}.example/")),
                auth: None,
            })
            .collect();
        assert_eq!(check(&registration, &plan), Ok(()));
        plan[19_999].transport = TransportPlan::Http("https://b0.example/".into());
        let refused = check(&registration, &plan).unwrap_err();
        assert!(
            refused.contains("`com.example.b19999`: its URL is not"),
            "{refused}"
        );
    }

    /// A transport or binding planned as another kind than the hook's is refused, though
    /// its strings are there (a stray `command` beside an http hook's URL, an OAuth
    /// binding's words planned as a bearer token, another flow).
    #[test]
    fn a_plan_of_another_kind_is_refused() {
        let registration_of = |hook: Value| json!({"hooks": [hook]}).to_string();
        let http = registration_of(json!({"id": "com.example.local",
            "transport": {"type": "http", "url": "https://policy.example/", "command": "sh"}}));
        let stdio = BackendPlan {
            id: "com.example.local".into(),
            transport: TransportPlan::Stdio(StdioPlan {
                command: "sh".into(),
                args: Vec::new(),
                cwd: None,
                per_event: true,
            }),
            auth: None,
        };
        let refused = check(&http, &[stdio]).unwrap_err();
        assert!(refused.contains(": its transport is not"), "{refused}");
        let mut other_flow = web();
        oauth(&mut other_flow).flow = OauthFlow::AuthorizationCodePkce;
        let refused = check(&registration(), &[other_flow]).unwrap_err();
        assert!(refused.contains(": its OAuth flow is not"), "{refused}");
        let oauth_words = registration_of(json!({"id": "com.example.open",
            "transport": {"type": "http", "url": "https://third.example/hooks"},
            "authentication": {"type": "oauth", "tokenEnv": "LOCAL_TOKEN"}}));
        let mut planned = open();
        planned.auth = Some(AuthPlan::BearerEnv("LOCAL_TOKEN".into()));
        let refused = check(&oauth_words, &[planned]).unwrap_err();
        assert!(refused.contains(": its authentication is not"), "{refused}");
    }

    /// A text that begins like JSON (after whitespace or a byte-order mark) is read as
    /// JSON: one that does not parse (here too with a mark) refuses any plan, whatever
    /// strings it holds.
    #[test]
    fn a_text_that_begins_like_json_is_read_as_json() {
        let refused = check("{hooks: https://third.example/hooks", &[open()]).unwrap_err();
        assert!(refused.contains("cannot read as JSON"), "{refused}");
        let marked = format!("\u{feff} {}", registration());
        let mut secret_as_token = web();
        secret_as_token.auth = Some(AuthPlan::BearerRef("file:/run/secret".into()));
        assert!(check(&marked, &[secret_as_token]).is_err());
    }

    /// A registration that is not JSON has no hooks: a plan's words must be in its text.
    #[test]
    fn a_registration_that_is_not_json_must_hold_the_words_as_they_are() {
        let text = "mode https://third.example/hooks";
        assert_eq!(check(text, &[open()]), Ok(()));
        let mut local = local();
        local.auth = None;
        let refused = check(text, &[local]).unwrap_err();
        assert!(refused.contains(": its command is not"), "{refused}");
    }

    /// In a registration no one here reads, each planned string must stand whole, not as
    /// the start or end of another (a look-alike domain, a shorter port, `sh` out of
    /// `bash`), and no backend may have a credential: the text cannot say which backend
    /// a secret goes with.
    #[test]
    fn a_registration_that_is_not_json_gives_no_credential_and_whole_words_only() {
        let text = "hooks:\n  - url: https://policy.example.com:8443/hooks\n    \
                    command: /bin/bash\n    args: [-m, policy]\n    tokenEnv: POLICY_TOKEN";
        let http = |url: &str| BackendPlan {
            transport: TransportPlan::Http(url.into()),
            ..open()
        };
        assert_eq!(
            check(text, &[http("https://policy.example.com:8443/hooks")]),
            Ok(())
        );
        for part in [
            "https://policy.example.co",
            "https://policy.example.com:84",
            "https://policy.example.com:8443/hook",
            "olicy.example.com:8443/hooks",
        ] {
            let refused = check(text, &[http(part)]).unwrap_err();
            assert!(refused.contains(": its URL is not"), "{part}: {refused}");
        }
        let mut program = local();
        program.auth = None;
        *stdio(&mut program) = StdioPlan {
            command: "/bin/bash".into(),
            args: vec!["-m".into(), "policy".into()],
            cwd: None,
            per_event: false,
        };
        assert_eq!(check(text, &[program.clone()]), Ok(()));
        stdio(&mut program).command = "sh".into();
        let refused = check(text, &[program]).unwrap_err();
        assert!(refused.contains(": its command is not"), "{refused}");

        // A letter that goes on (a combining mark is alphabetic) joins the word; a word
        // found twice over itself is found where it stands whole.
        let marked = "url: https://x.example/hooks\u{345} ";
        assert!(check(marked, &[http("https://x.example/hooks")]).is_err());
        let mut overlapping = local();
        overlapping.auth = None;
        *stdio(&mut overlapping) = StdioPlan {
            command: "/bin/x".into(),
            args: vec!["x x".into()],
            cwd: None,
            per_event: false,
        };
        assert_eq!(
            check("command: /bin/x args: [1x x x]", &[overlapping]),
            Ok(())
        );

        let mut secret = http("https://policy.example.com:8443/hooks");
        secret.auth = Some(AuthPlan::BearerEnv("POLICY_TOKEN".into()));
        let refused = check(text, &[secret]).unwrap_err();
        assert!(refused.contains(": its credential is not"), "{refused}");
    }

    /// Each backend id's count of subscriptions, the most where an id is repeated; none
    /// for a registration that is no JSON document of hooks.
    #[test]
    fn subscriptions_are_counted_per_backend() {
        let registration = serde_json::json!({"hooks": [
            {"id": "a", "subscriptions": [{}, {}]},
            {"id": "b", "subscriptions": []},
            {"id": "a", "subscriptions": [{}, {}, {}]},
            {"id": "c"},
        ]})
        .to_string();
        let counts = subscription_counts(&registration).expect("JSON hooks");
        let expected = HashMap::from([("a".into(), 3), ("b".into(), 0), ("c".into(), 0)]);
        assert_eq!(counts, expected);
        assert_eq!(subscription_counts("another build's format"), None);
    }

    /// The component's bound stands up to what the registration's timeouts add up to,
    /// and no further: a claim of forever is cut to that sum.
    #[test]
    fn the_bound_is_no_more_than_the_registrations_timeouts() {
        let registration = json!({"hooks": [
            {"id": "com.example.a", "subscriptions": [
                {"mode": "intercept", "timeoutMs": 300},
                {"mode": "observe"}]},
            {"id": "com.example.b", "subscriptions": [{"mode": "intercept", "timeoutMs": 1200}]}
        ]})
        .to_string();
        assert_eq!(bound_ms(&registration, 1500), 1500);
        assert_eq!(bound_ms(&registration, 300), 300);
        assert_eq!(bound_ms(&registration, u64::MAX), 1500);
        assert_eq!(bound_ms(&format!(" \n{registration}"), 1501), 1500);
        // serde_json reads no byte-order mark, nor does the component.
        assert_eq!(bound_ms(&format!("\u{feff}{registration}"), 1500), 0);
        // Odd numbers count up, never short of what another build might read.
        let odd = json!({"hooks": [{"subscriptions": [
            {"timeoutMs": 2.5}, {"timeoutMs": -4}, {"timeoutMs": "9000"}]}]})
        .to_string();
        assert_eq!(bound_ms(&odd, u64::MAX), 3);
        let huge = json!({"hooks": [{"subscriptions": [{"timeoutMs": 1e300}]}]}).to_string();
        assert_eq!(bound_ms(&huge, u64::MAX), u64::MAX);
    }

    /// A chain of deadlines ends within the bound: an honest one (its timeouts some of
    /// the registration's) is left alone, one claiming more is cut where the bound ends.
    #[test]
    fn a_chain_of_deadlines_ends_within_the_bound() {
        let honest = vec![
            ("tool.before".to_string(), vec![300, 1200]),
            ("user.message.inbound".to_string(), vec![1200]),
        ];
        assert_eq!(chain_timeouts(honest.clone(), 1500), honest);
        let endless = vec![("tool.before".to_string(), vec![u64::MAX, u64::MAX, 5])];
        assert_eq!(
            chain_timeouts(endless, 1500),
            [("tool.before".to_string(), vec![1500, 0, 0])]
        );
    }

    /// A JSON text with no timeouts (or none the host can read) allows no chain; a text
    /// that is no JSON document is not read, and its claim stands.
    #[test]
    fn a_registration_without_timeouts_bounds_the_claim_to_nothing() {
        assert_eq!(bound_ms(r#"{"hooks": []}"#, 100), 0);
        assert_eq!(bound_ms(r#"{"hooks": [{"#, 100), 0);
        assert_eq!(bound_ms("[1, 2]", 100), 0);
        assert_eq!(bound_ms("spins", 100), 100);
    }
}
