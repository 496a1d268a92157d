//! `ahp hook install HARNESS`: the harness's settings snippet that puts `ahp hook` in
//! front of its hook events.
//!
//! Every hook's command carries the options `ahp hook` was given for the host (the
//! component, trust roots, `--stdio-env`, …), each word quoted for the POSIX shell the
//! harness runs it with. Paths are absolute (the harness runs hooks from wherever the
//! session is) and the snippet names files, never their contents: no secret ever lands in
//! a harness's settings. The harness's timeout is the hook's budget plus headroom for
//! process start, so the budget settles the call and the harness's own timeout never
//! fires first.

use super::{AhpEvent, EventSpec, Harness, SessionField, DEFAULT_BUDGET_MS};
use ahp_vocab::EventPattern;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Headroom between the hook's budget and the harness's timeout: process start, the
/// watchdog's grace, writing the answer.
const HEADROOM_MS: u64 = 5_000;

/// What `ahp hook install` is asked for.
pub struct Install {
    /// Whose settings.
    pub harness: Harness,
    /// The registration file (must exist).
    pub registration: PathBuf,
    /// An audit log file for every call.
    pub audit: Option<PathBuf>,
    /// The hook's budget; `None` for the default.
    pub budget_ms: Option<u64>,
    /// The events' `source` URI; `None` for the default.
    pub source: Option<String>,
    /// The `session` fields left out of every event.
    pub omit_session: Vec<SessionField>,
    /// More options of `ahp hook` (the host's), as command-line words, in order, paths
    /// already absolute.
    pub host_arguments: Vec<String>,
}

/// What one harness's snippet is built from.
pub struct Snippet {
    program: String,
    arguments: Vec<String>,
    /// The harness's timeout for the hook.
    pub timeout_ms: u64,
    /// What the registration's subscriptions select, every entry of every `events`.
    selected: Vec<EventPattern>,
}

impl Snippet {
    /// The hook's command line at the native `event`. Named on the command line for
    /// every harness, not only those whose payload names none (Copilot): a payload that
    /// cannot be read is then answered at its event (at an observed one, or before a
    /// stop, not with a block).
    pub fn command(&self, event: &str) -> String {
        let mut words = vec![self.program.clone()];
        words.extend(self.arguments.iter().cloned());
        words.extend(["--event".to_string(), event.to_string()]);
        words
            .iter()
            .map(|word| shell_quote(word))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether `spec`'s hook belongs in the snippet: every one, but an on-demand one only
    /// when the registration selects its event.
    pub fn installs(&self, spec: &EventSpec) -> bool {
        !spec.on_demand || selects(&self.selected, spec)
    }

    /// The timeout in whole seconds, rounded up.
    pub fn timeout_secs(&self) -> u64 {
        self.timeout_ms.div_ceil(1_000)
    }
}

/// Whether `spec`'s hook gets the harness's fail-closed flag (Claude Code's `onFailure:
/// "block"`, Cursor's `failClosed`): only at an intercepted event. At an observed one
/// nothing is decided, so a hook that fails there (a binary that is gone) must not block
/// it; and never before a stop, where a block keeps the agent working.
pub fn fails_closed(spec: &EventSpec) -> bool {
    spec.capability().is_some() && spec.ahp != AhpEvent::TurnFinishBefore
}

/// The snippet for `request`, as the JSON the harness's settings file takes.
pub fn install(request: &Install) -> Result<Value, String> {
    let program = std::env::current_exe().map_err(|e| format!("locate the ahp binary: {e}"))?;
    let registration = absolute(&request.registration, true)?;
    let budget_ms = request.budget_ms.unwrap_or(DEFAULT_BUDGET_MS);
    let mut arguments = vec![
        "hook".to_string(),
        request.harness.name().to_string(),
        "--registration".to_string(),
        registration,
        "--budget-ms".to_string(),
        budget_ms.to_string(),
    ];
    if let Some(audit) = &request.audit {
        arguments.extend(["--audit".to_string(), absolute(audit, false)?]);
    }
    if let Some(source) = &request.source {
        arguments.extend(["--source".to_string(), source.clone()]);
    }
    if !request.omit_session.is_empty() {
        let names: Vec<&str> = request.omit_session.iter().map(|f| f.name()).collect();
        arguments.extend(["--omit-session".to_string(), names.join(",")]);
    }
    arguments.extend(request.host_arguments.iter().cloned());
    let snippet = Snippet {
        program: program.display().to_string(),
        arguments,
        timeout_ms: budget_ms + HEADROOM_MS,
        selected: selected_by(&crate::cli::read_file(
            "--registration",
            &request.registration,
        )?),
    };
    Ok(match request.harness {
        Harness::ClaudeCode => super::claude_code::snippet(&snippet),
        Harness::Codex => super::codex::snippet(&snippet),
        Harness::Gemini => super::gemini::snippet(&snippet),
        Harness::Cursor => super::cursor::snippet(&snippet),
        Harness::Copilot => super::copilot::snippet(&snippet),
    })
}

/// Whether `selected` (a registration's `events` entries) reaches `spec`'s event, in any
/// mode: an observer of it needs the hook as an interceptor does.
pub(crate) fn selects(selected: &[EventPattern], spec: &EventSpec) -> bool {
    selected.iter().any(|p| p.matches(spec.ahp.as_str()))
}

/// Every entry of every subscription's `events` in the registration `text`, read
/// leniently: text that is no registration selects nothing (the component, which
/// checks it, names its problems).
pub(crate) fn selected_by(text: &str) -> Vec<EventPattern> {
    let registration: Value = serde_json::from_str(text).unwrap_or_default();
    let hooks = registration["hooks"].as_array().into_iter().flatten();
    let subscriptions =
        hooks.flat_map(|hook| hook["subscriptions"].as_array().into_iter().flatten());
    let events = subscriptions.flat_map(|s| s["events"].as_array().into_iter().flatten());
    events
        .filter_map(Value::as_str)
        .map(EventPattern::read)
        .collect()
}

/// `path` made absolute; `existing` ones resolved through symlinks (and must exist).
pub(crate) fn absolute(path: &Path, existing: bool) -> Result<String, String> {
    let resolved = match existing {
        true => std::fs::canonicalize(path),
        false => std::path::absolute(path),
    };
    resolved
        .map(|p| p.display().to_string())
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// `word` as one POSIX shell word: as is when it is plainly safe, else single-quoted.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-=:,+@".contains(c));
    match plain {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ahp` with no arguments and a 15 s timeout.
    fn plain_snippet() -> Snippet {
        Snippet {
            program: "ahp".into(),
            arguments: Vec::new(),
            timeout_ms: 15_000,
            selected: Vec::new(),
        }
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_quote("/usr/bin/ahp"), "/usr/bin/ahp");
        assert_eq!(shell_quote("/my dir/it's"), r"'/my dir/it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn the_timeout_leaves_headroom_and_rounds_up() {
        let snippet = Snippet {
            program: "ahp".into(),
            arguments: Vec::new(),
            timeout_ms: 10_001,
            selected: Vec::new(),
        };
        assert_eq!(snippet.timeout_secs(), 11);
        assert_eq!(snippet.command("preToolUse"), "ahp --event preToolUse");
    }

    /// Claude Code blocks where the hook fails at an intercepted event, but not at
    /// `Stop` or `SubagentStop`, where blocking would keep the agent working, nor at an
    /// event only observed, where a missing binary would block it for nothing.
    #[test]
    fn claude_code_blocks_on_failure_only_where_it_intercepts_but_a_stop() {
        let snippet = plain_snippet();
        let hooks = super::super::claude_code::snippet(&snippet)["hooks"].clone();
        let on_failure = |event: &str| hooks[event][0]["hooks"][0]["onFailure"].clone();
        for event in [
            "PreToolUse",
            "PostToolUse",
            "UserPromptSubmit",
            "SessionStart",
        ] {
            assert_eq!(on_failure(event), "block", "{event}: {hooks}");
        }
        for event in ["Stop", "SubagentStop", "SessionEnd", "PreCompact"] {
            assert!(on_failure(event).is_null(), "{event}: {hooks}");
            assert_eq!(hooks[event][0]["hooks"][0]["type"], "command", "{event}");
        }
    }

    /// The hooks `snippet_of` writes for a registration selecting `selected`.
    fn hooks_written(snippet_of: fn(&Snippet) -> Value, selected: &[&str]) -> Value {
        let snippet = Snippet {
            selected: selected.iter().map(|p| EventPattern::read(p)).collect(),
            ..plain_snippet()
        };
        snippet_of(&snippet)["hooks"].clone()
    }

    /// The hooks Gemini's snippet writes for a registration selecting `selected`.
    fn gemini_hooks(selected: &[&str]) -> Value {
        hooks_written(super::super::gemini::snippet, selected)
    }

    /// Gemini's `BeforeModel` runs a process at every model request, and a failure there
    /// ends the turn: it is installed only for a registration that selects
    /// model.request.before (by name, `model.*` or `*`), the tool hooks always.
    #[test]
    fn a_hook_at_every_model_request_is_installed_only_when_selected() {
        for unselected in [
            &["tool.before", "tool.after"][..],
            &["turn.*", "model.error"],
            &[],
        ] {
            let hooks = gemini_hooks(unselected);
            assert!(
                hooks.get("BeforeModel").is_none(),
                "{unselected:?}: {hooks}"
            );
            assert!(hooks.get("BeforeTool").is_some(), "{unselected:?}: {hooks}");
        }
        for selected in ["model.request.before", "model.*", "*"] {
            let hooks = gemini_hooks(&["tool.before", selected]);
            assert_eq!(
                hooks["BeforeModel"][0]["hooks"][0]["command"], "ahp --event BeforeModel",
                "{selected}: {hooks}"
            );
        }
    }

    /// A hook where a failure ends a turn is installed only for a registration that
    /// selects its event: Gemini's `AfterAgent` (Gemini reads a hook that dies there as a
    /// block, which starts another turn) and Codex's `PreCompact` (a failure there aborts
    /// the compaction and the turn).
    #[test]
    fn a_hook_whose_failure_ends_the_turn_is_installed_only_when_selected() {
        for (selected, installed) in [
            (&["tool.before", "turn.*"][..], false),
            (&["context.compact.before"], true),
            (&["context.*"], true),
            (&["*"], true),
        ] {
            let hooks = hooks_written(super::super::codex::snippet, selected);
            assert_eq!(
                hooks.get("PreCompact").is_some(),
                installed,
                "{selected:?}: {hooks}"
            );
        }
        for (selected, installed) in [
            (&["tool.before", "model.*"][..], false),
            (&["turn.start"], false),
            (&["turn.finish.before"], true),
            (&["turn.*"], true),
            (&["*"], true),
        ] {
            let hooks = gemini_hooks(selected);
            assert_eq!(
                hooks.get("AfterAgent").is_some(),
                installed,
                "{selected:?}: {hooks}"
            );
        }
    }

    /// Each harness gets the timeout in its own unit: Gemini in milliseconds, the others
    /// in seconds; Copilot's command names its event (its payloads do not).
    #[test]
    fn each_harness_gets_its_timeout_in_its_own_unit() {
        let snippet = plain_snippet();
        let gemini = super::super::gemini::snippet(&snippet);
        assert_eq!(
            gemini["hooks"]["BeforeTool"][0]["hooks"][0]["timeout"],
            15_000
        );
        let codex = super::super::codex::snippet(&snippet);
        assert_eq!(codex["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"], 15);
        let copilot = super::super::copilot::snippet(&snippet);
        let pre = &copilot["hooks"]["preToolUse"][0];
        assert_eq!(pre["timeoutSec"], 15);
        assert_eq!(pre["bash"], "ahp --event preToolUse");
    }

    /// Cursor likewise: only the intercepted events' hooks fail closed; `stop`, after a
    /// tool and the session events are only observed.
    #[test]
    fn cursor_fails_closed_only_where_it_intercepts() {
        let snippet = plain_snippet();
        let hooks = super::super::cursor::snippet(&snippet)["hooks"].clone();
        let fails_closed = |event: &str| hooks[event][0]["failClosed"].clone();
        assert_eq!(fails_closed("preToolUse"), true);
        assert_eq!(fails_closed("beforeSubmitPrompt"), true);
        for event in ["postToolUse", "stop", "sessionStart", "sessionEnd"] {
            assert!(fails_closed(event).is_null(), "{event}: {hooks}");
            assert_eq!(hooks[event][0]["timeout"], 15, "{event}");
        }
    }
}
