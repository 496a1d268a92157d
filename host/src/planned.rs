//! The component reads the registration and tells the host which backends it has: where
//! each is, what command starts it, where its secret is read from (`plan`). The host
//! builds what the plan asks for, so it checks first that the plan says nothing the
//! registration does not: otherwise another build of the component, loaded with
//! `--component`, could run any command as the user or send a secret anywhere, and the
//! sandbox would be no sandbox.
//!
//! The check reads no field of the registration by its meaning (that is the component's
//! job, done once): every string of a planned backend that reaches the outside world
//! must be a string value of the registration's hook of that id. So a plan can only
//! repeat what that hook says, never another hook's secret beside this hook's URL.

use crate::bindings::interceptor::{AuthPlan, BackendPlan, StdioPlan, TransportPlan};
use serde_json::Value;
use std::collections::BTreeSet;

/// Refuses a `plan` that names a backend `registration` does not, names one twice, or
/// gives one a URL, command, argument, directory, secret reference or OAuth setting its
/// hook does not hold, naming the backend and the field (never the value).
///
/// A registration that is not JSON (only another build would accept one) has no hooks
/// to look in: each of those strings must then appear in its text as it is.
pub(crate) fn check(registration: &str, plan: &[BackendPlan]) -> Result<(), String> {
    let hooks = serde_json::from_str::<Value>(registration).ok();
    let mut ids = BTreeSet::new();
    for backend in plan {
        if !ids.insert(backend.id.as_str()) {
            return Err(format!(
                "the component planned backend `{}` twice",
                backend.id
            ));
        }
        let holds: Box<dyn Fn(&str) -> bool> = match &hooks {
            Some(document) => {
                let strings = strings_of_hooks(document, &backend.id);
                if strings.is_empty() {
                    return Err(format!(
                        "the component planned backend `{}`, which the registration does not name",
                        backend.id
                    ));
                }
                Box::new(move |s: &str| strings.contains(s))
            }
            None => Box::new(|s: &str| registration.contains(s)),
        };
        if let TransportPlan::Stdio(stdio) = &backend.transport {
            if !holds(&stdio.command) && !under_its_cwd(stdio, &holds) {
                return Err(format!(
                    "the component planned backend `{}` with a command its registration does \
                     not give it",
                    backend.id
                ));
            }
        }
        if let Some(field) = outside_words(backend).find(|(_, word)| !holds(word)) {
            return Err(format!(
                "the component planned backend `{}` with a {} its registration does not give it",
                backend.id, field.0
            ));
        }
    }
    Ok(())
}

/// Whether a stdio `command` is the hook's relative one (a path with a `/`) joined to the
/// hook's `cwd`: the component plans a relative program by its absolute path there.
fn under_its_cwd(stdio: &StdioPlan, holds: &dyn Fn(&str) -> bool) -> bool {
    let Some(cwd) = stdio.cwd.as_deref() else {
        return false;
    };
    let relative = stdio
        .command
        .strip_prefix(cwd.trim_end_matches('/'))
        .and_then(|rest| rest.strip_prefix('/'));
    relative.is_some_and(|r| r.contains('/') && !r.starts_with('/') && holds(r))
}

/// Every string value inside the registration's hooks whose `id` is `id` (none if no
/// hook has it).
fn strings_of_hooks<'a>(document: &'a Value, id: &str) -> BTreeSet<&'a str> {
    let mut strings = BTreeSet::new();
    let hooks = document.get("hooks").and_then(Value::as_array);
    let named = hooks.into_iter().flatten().filter(|hook| hook["id"] == id);
    for hook in named {
        collect(hook, &mut strings);
    }
    strings
}

fn collect<'a>(value: &'a Value, strings: &mut BTreeSet<&'a str>) {
    match value {
        Value::String(s) => {
            strings.insert(s);
        }
        Value::Array(items) => items.iter().for_each(|item| collect(item, strings)),
        Value::Object(members) => members.values().for_each(|member| collect(member, strings)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Each string of `backend` that says where to go, what to run or which secret to read,
/// with what it is.
fn outside_words(backend: &BackendPlan) -> impl Iterator<Item = (&'static str, &str)> {
    let mut words: Vec<(&'static str, &str)> = Vec::new();
    match &backend.transport {
        TransportPlan::Http(url) => words.push(("URL", url)),
        // The command is checked on its own (it may be planned joined to `cwd`).
        TransportPlan::Stdio(stdio) => {
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
             "authentication": {"type": "oauth", "issuer": "https://as.example", "resource": "https://policy.example/hooks",
                                "clientId": "c1", "scopes": ["hooks"], "clientSecretRef": "file:/run/secret"}},
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

    /// The plan the shipped component makes of this registration passes, whole or in
    /// part.
    #[test]
    fn a_plan_of_the_registrations_own_words_passes() {
        assert_eq!(check(&registration(), &[web(), local(), open()]), Ok(()));
        assert_eq!(check(&registration(), &[open()]), Ok(()));
    }

    /// A relative program (a path with a `/`) is planned by its absolute path under the
    /// hook's `cwd`, as the component resolves it; only there.
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
        assert_eq!(check(&registration, &[planned("bin/policy")]), Ok(()));
        assert_eq!(
            check(&registration, &[planned("/srv/policy/bin/policy")]),
            Ok(())
        );
        for elsewhere in [
            "/srv/bin/policy",
            "/srv/policy/bin/other",
            "/srv/policy//bin/policy",
        ] {
            let refused = check(&registration, &[planned(elsewhere)]).unwrap_err();
            assert!(
                refused.contains("with a command "),
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
        let cases: [Case; 8] = [
            (
                |b| b.transport = TransportPlan::Http("https://evil.example/".into()),
                open,
                "URL",
            ),
            (
                |b| {
                    if let TransportPlan::Stdio(s) = &mut b.transport {
                        s.command = "sh".into();
                    }
                },
                local,
                "command",
            ),
            (
                |b| {
                    if let TransportPlan::Stdio(s) = &mut b.transport {
                        s.args.push("-c".into());
                    }
                },
                local,
                "argument",
            ),
            (
                |b| {
                    if let TransportPlan::Stdio(s) = &mut b.transport {
                        s.cwd = Some("/".into());
                    }
                },
                local,
                "working directory",
            ),
            // Another hook's secret beside this hook's URL: each word is the registration's,
            // but not this hook's.
            (
                |b| b.auth = Some(AuthPlan::BearerEnv("LOCAL_TOKEN".into())),
                open,
                "token variable",
            ),
            (
                |b| b.auth = Some(AuthPlan::BearerRef("file:/etc/shadow".into())),
                open,
                "token reference",
            ),
            (
                |b| {
                    if let Some(AuthPlan::Oauth(o)) = &mut b.auth {
                        o.issuer = "https://as.evil.example".into();
                    }
                },
                web,
                "OAuth issuer",
            ),
            (
                |b| {
                    if let Some(AuthPlan::Oauth(o)) = &mut b.auth {
                        o.client_secret_ref = Some("env:HOME".into());
                    }
                },
                web,
                "client secret reference",
            ),
        ];
        for (change, base, field) in cases {
            let refused = with(change, base);
            assert!(
                refused.contains(&format!("with a {field} ")),
                "{field}: {refused}"
            );
            assert!(
                !refused.contains("evil") && !refused.contains("shadow"),
                "{refused}"
            );
        }
    }

    /// A registration that is not JSON has no hooks: a plan's words must be in its text.
    #[test]
    fn a_registration_that_is_not_json_must_hold_the_words_as_they_are() {
        let text = "mode https://third.example/hooks";
        assert_eq!(check(text, &[open()]), Ok(()));
        let refused = check(text, &[local()]).unwrap_err();
        assert!(refused.contains("with a command "), "{refused}");
    }
}
