//! The interceptable events and what each allows, in one table (capabilities.schema.json
//! `$defs/<event>`, effect.schema.json, digest §3–4, §6 rule 6).
//!
//! Everything that differs per event is read from here: which effects a harness may
//! declare and a backend may return, which `modify` target the event has and where that
//! value lives in the event, which `flow` operations exist, and which payload checks the
//! event gets. `tests::the_table_is_the_upstream_schema` reads the schema itself, so the
//! table cannot drift from it.

use crate::effect::EffectKind::{self, *};
use ahp_vocab::{
    DeliverAt, EventCapability, FlowCapability, FlowOperation, InterceptableEvent as E,
    ModifyCapability, ModifyTarget as T, Problem,
};

/// The payload checks an event gets beyond the envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// tool-before.schema.json, in full.
    ToolBefore,
    /// tool-after.schema.json, in full.
    ToolAfter,
    /// Only these members are required (the digest's list; the catalogue schemas are not
    /// among the upstream files this project carries).
    Required(&'static [&'static str]),
}

/// What one interceptable event allows.
#[derive(Debug)]
pub struct Rules {
    pub event: E,
    /// Every effect the event allows, in the schema's order.
    pub effects: &'static [EffectKind],
    /// The event's one `modify` target, and the JSON Pointer of its value in the event.
    pub modify: Option<(T, &'static str)>,
    /// The `flow` operations the event allows (empty without `flow`).
    pub flow: &'static [FlowOperation],
    pub payload: Payload,
}

impl Rules {
    pub fn allows(&self, kind: EffectKind) -> bool {
        self.effects.contains(&kind)
    }
}

const STOP: &[FlowOperation] = &[FlowOperation::Stop];
const STOP_CONTINUE: &[FlowOperation] = &[FlowOperation::Stop, FlowOperation::Continue];
const NONE: Payload = Payload::Required(&[]);

/// One row per interceptable event, in capabilities.schema.json order. Where a target
/// lives in a catalogue event is not in the carried schemas: such targets are taken to
/// be the event member of the same name.
pub const TABLE: &[Rules] = &[
    rules(
        E::SessionStart,
        &[Inject, Message],
        None,
        &[],
        Payload::Required(&[
            "session",
            "trigger",
            "harness",
            "permissionMode",
            "manifest",
            "items",
        ]),
    ),
    rules(E::ConfigChangeBefore, &[Deny, Message], None, &[], NONE),
    rules(
        E::TurnStart,
        &[Deny, Modify, Inject, Flow, Message],
        Some((T::Prompt, "/prompt")),
        STOP,
        NONE,
    ),
    rules(
        E::TurnFinishBefore,
        &[Modify, Flow, Message],
        Some((T::Response, "/response")),
        STOP_CONTINUE,
        NONE,
    ),
    rules(
        E::ModelRequestBefore,
        &[Deny, Modify, Inject, Return, Flow, Message],
        Some((T::Request, "/request")),
        STOP,
        NONE,
    ),
    rules(
        E::ModelResponseAfter,
        &[Modify, Flow, Message],
        Some((T::Response, "/response")),
        STOP,
        NONE,
    ),
    rules(
        E::ModelSwitchBefore,
        &[Deny, Flow, Message],
        None,
        STOP,
        NONE,
    ),
    rules(
        E::ToolBefore,
        &[Deny, Allow, Ask, Modify, Inject, Flow, Return, Message],
        Some((T::Input, "/tool/input")),
        STOP,
        Payload::ToolBefore,
    ),
    rules(
        E::ToolAfter,
        &[Modify, Inject, Flow, Message],
        Some((T::Output, "/tool/output")),
        STOP_CONTINUE,
        Payload::ToolAfter,
    ),
    rules(
        E::ToolPermissionRequest,
        &[Allow, Deny, Modify, Flow, Message],
        Some((T::Input, "/tool/input")),
        STOP,
        NONE,
    ),
    rules(
        E::ToolBatchAfter,
        &[Flow, Inject, Message],
        None,
        STOP,
        NONE,
    ),
    rules(
        E::ContextCompactBefore,
        &[Deny, Modify, Return, Inject, Message],
        Some((T::Instructions, "/instructions")),
        &[],
        NONE,
    ),
    rules(
        E::ContextCompactAfter,
        &[Inject, Modify, Message],
        Some((T::Summary, "/summary")),
        &[],
        NONE,
    ),
    rules(E::TaskChangeBefore, &[Deny, Message], None, &[], NONE),
    rules(
        E::UserElicitationRequest,
        &[Deny, Return, Message],
        None,
        &[],
        NONE,
    ),
    rules(
        E::UserElicitationResult,
        &[Modify, Message],
        Some((T::Content, "/content")),
        &[],
        NONE,
    ),
    rules(
        E::UserMessageInbound,
        &[Deny, Modify, Message],
        Some((T::Prompt, "/prompt")),
        &[],
        NONE,
    ),
    rules(
        E::UserMessageOutbound,
        &[Deny, Modify, Message],
        Some((T::Content, "/content")),
        &[],
        NONE,
    ),
    rules(
        E::WorkspaceChangeBefore,
        &[Deny, Modify, Message],
        Some((T::Workspace, "/workspace")),
        &[],
        NONE,
    ),
];

const fn rules(
    event: E,
    effects: &'static [EffectKind],
    modify: Option<(T, &'static str)>,
    flow: &'static [FlowOperation],
    payload: Payload,
) -> Rules {
    Rules {
        event,
        effects,
        modify,
        flow,
        payload,
    }
}

/// The rules of `event`.
pub fn of(event: E) -> &'static Rules {
    // Every word has its row (checked by a test); the first row is never reached.
    TABLE.iter().find(|r| r.event == event).unwrap_or(&TABLE[0])
}

/// The rules of the event named `name`, if it is interceptable.
pub fn named(name: &str) -> Option<&'static Rules> {
    E::parse(name).map(of)
}

/// Everything the protocol allows for `event`, as a declaration: every effect, both
/// modify operations, both delivery times. Flow advertises stop only: continuing needs
/// the harness's own continuation counts.
pub fn full(event: E) -> EventCapability {
    let r = of(event);
    EventCapability {
        event,
        effects: r.effects.to_vec(),
        modify: r.modify.map(|(target, _)| ModifyCapability {
            target,
            replace: true,
            merge: true,
        }),
        flow: r.allows(Flow).then(|| FlowCapability {
            operations: vec![FlowOperation::Stop],
            remaining_continuations: None,
            continuation_count: None,
        }),
        inject: if r.allows(Inject) {
            DeliverAt::ALL.to_vec()
        } else {
            Vec::new()
        },
    }
}

/// The declaration of a harness that can intercept every event with everything.
pub fn full_declaration() -> Vec<EventCapability> {
    E::ALL.iter().map(|&e| full(e)).collect()
}

/// Checks a declaration against the table: each event once, only effects the event
/// allows, deny wherever it allows deny (a harness that intercepts an operation it cannot
/// refuse would turn fail-closed into permission), and each effect's option block present
/// exactly when the effect is, within what the event allows. `at` prefixes every path.
pub fn check(capability: &EventCapability, at: &str) -> Vec<Problem> {
    let r = of(capability.event);
    let event = capability.event;
    let mut problems = Vec::new();
    let mut add = |path: String, rule: String| problems.push(Problem::new(path, rule));
    for (i, &kind) in capability.effects.iter().enumerate() {
        if capability.effects[..i].contains(&kind) {
            add(
                format!("{at}/effects/{i}"),
                format!("\"{kind}\" is listed twice"),
            );
        } else if !r.allows(kind) {
            add(
                format!("{at}/effects/{i}"),
                format!("{event} has no \"{kind}\" effect"),
            );
        }
    }
    if r.allows(Deny) && !capability.has(Deny) {
        add(
            format!("{at}/effects"),
            format!("must include \"deny\" ({event} can be denied)"),
        );
    }
    match (&capability.modify, capability.has(Modify)) {
        (None, true) => add(format!("{at}/modify"), "is required with \"modify\"".into()),
        (Some(_), false) => add(format!("{at}/modify"), "needs \"modify\" in effects".into()),
        (Some(m), true) => {
            if r.modify.map(|(t, _)| t) != Some(m.target) {
                add(
                    format!("{at}/modify/target"),
                    format!("{event} cannot modify \"{}\"", m.target),
                );
            }
            if !m.replace && !m.merge {
                add(
                    format!("{at}/modify"),
                    "must enforce replace or merge".into(),
                );
            }
        }
        (None, false) => {}
    }
    match (&capability.flow, capability.has(Flow)) {
        (None, true) => add(format!("{at}/flow"), "is required with \"flow\"".into()),
        (Some(_), false) => add(format!("{at}/flow"), "needs \"flow\" in effects".into()),
        (Some(f), true) => {
            if f.operations.is_empty() {
                add(format!("{at}/flow/operations"), "must not be empty".into());
            }
            for (i, op) in f.operations.iter().enumerate() {
                if !r.flow.contains(op) {
                    add(
                        format!("{at}/flow/operations/{i}"),
                        format!("{event} cannot \"{op}\""),
                    );
                }
            }
            let counts = f.remaining_continuations.is_some() && f.continuation_count.is_some();
            if f.operations.contains(&FlowOperation::Continue) && !counts {
                add(
                    format!("{at}/flow"),
                    "continue needs remainingContinuations and continuationCount".into(),
                );
            }
        }
        (None, false) => {}
    }
    match (capability.inject.is_empty(), capability.has(Inject)) {
        (true, true) => add(
            format!("{at}/inject"),
            "needs at least one deliverAt with \"inject\"".into(),
        ),
        (false, false) => add(format!("{at}/inject"), "needs \"inject\" in effects".into()),
        _ => {}
    }
    problems
}

/// `declared` narrowed to `effects` by one call: an empty list narrows nothing; otherwise
/// each effect must be declared, deny kept where declared, the call's order is the
/// advertised order, and the option blocks of effects left out are dropped.
pub fn narrow(
    declared: &EventCapability,
    effects: &[EffectKind],
) -> Result<EventCapability, Vec<Problem>> {
    if effects.is_empty() {
        return Ok(declared.clone());
    }
    let mut problems = Vec::new();
    for (i, &kind) in effects.iter().enumerate() {
        if effects[..i].contains(&kind) {
            problems.push(Problem::new(
                format!("effects[{i}]"),
                format!("\"{kind}\" is listed twice"),
            ));
        } else if !declared.has(kind) {
            problems.push(Problem::new(
                format!("effects[{i}]"),
                format!("\"{kind}\" is not declared for {}", declared.event),
            ));
        }
    }
    if declared.has(Deny) && !effects.contains(&Deny) {
        problems.push(Problem::new(
            "effects",
            format!(
                "must include \"deny\" (every {} interceptor can deny)",
                declared.event
            ),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let keep = |kind| effects.contains(&kind);
    Ok(EventCapability {
        event: declared.event,
        effects: effects.to_vec(),
        modify: declared.modify.filter(|_| keep(Modify)),
        flow: declared.flow.clone().filter(|_| keep(Flow)),
        inject: if keep(Inject) {
            declared.inject.clone()
        } else {
            Vec::new()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const SCHEMA: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/upstream/schema/draft/capabilities.schema.json"
    ));

    #[test]
    fn the_table_is_the_upstream_schema() {
        let schema: Value = serde_json::from_str(SCHEMA).expect("schema is JSON");
        let defs = schema["$defs"].as_object().expect("$defs");
        let names: Vec<&str> = defs.keys().map(String::as_str).collect();
        let ours: Vec<&str> = TABLE.iter().map(|r| r.event.as_str()).collect();
        let mut sorted = ours.clone();
        sorted.sort_unstable();
        let mut upstream = names.clone();
        upstream.sort_unstable();
        assert_eq!(sorted, upstream);
        assert_eq!(ours, E::ALL.iter().map(|e| e.as_str()).collect::<Vec<_>>());
        for r in TABLE {
            let narrowing = &defs[r.event.as_str()]["allOf"][1]["properties"];
            let words = |v: &Value| -> Vec<String> {
                v.as_array().map_or(Vec::new(), |a| {
                    a.iter()
                        .filter_map(|w| w.as_str().map(str::to_owned))
                        .collect()
                })
            };
            let effects: Vec<String> = r.effects.iter().map(|k| k.as_str().to_owned()).collect();
            assert_eq!(
                effects,
                words(&narrowing["effects"]["items"]["enum"]),
                "{}",
                r.event
            );
            let target = r.modify.map(|(t, _)| t.as_str().to_owned());
            assert_eq!(
                target,
                words(&narrowing["modify"]["propertyNames"]["enum"]).pop(),
                "{}",
                r.event
            );
            let flow: Vec<String> = r.flow.iter().map(|f| f.as_str().to_owned()).collect();
            let upstream_flow = match r.allows(Flow) {
                true => words(&narrowing["flow"]["properties"]["operations"]["items"]["enum"]),
                false => Vec::new(),
            };
            assert_eq!(flow, upstream_flow, "{}", r.event);
        }
    }

    #[test]
    fn the_full_declaration_passes_its_own_check() {
        for (i, capability) in full_declaration().iter().enumerate() {
            assert_eq!(
                check(capability, &format!("[{i}]")),
                vec![],
                "{}",
                capability.event
            );
        }
    }

    #[test]
    fn a_declaration_outside_the_event_is_refused_naming_each_field() {
        let mut after = full(E::ToolAfter);
        after.effects.push(Deny);
        after.modify = Some(ModifyCapability {
            target: T::Input,
            replace: true,
            merge: false,
        });
        after.flow = Some(FlowCapability {
            operations: vec![FlowOperation::Continue],
            remaining_continuations: None,
            continuation_count: None,
        });
        let problems = check(&after, "d");
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["d/effects/4", "d/modify/target", "d/flow"]);

        let mut before = full(E::ToolBefore);
        before.effects.retain(|&k| k != Deny && k != Inject);
        let rules: Vec<String> = check(&before, "d").iter().map(|p| p.to_string()).collect();
        assert_eq!(
            rules,
            [
                "d/effects: must include \"deny\" (tool.before can be denied)",
                "d/inject: needs \"inject\" in effects"
            ]
        );
        let mut continuing = full(E::ToolBefore);
        continuing.flow = Some(FlowCapability {
            operations: vec![FlowOperation::Continue],
            remaining_continuations: Some(1),
            continuation_count: Some(0),
        });
        assert_eq!(
            check(&continuing, "d").len(),
            1,
            "tool.before cannot continue"
        );
    }

    #[test]
    fn a_call_narrows_its_declaration_and_never_widens_it() {
        let declared = full(E::ToolBefore);
        let narrowed = narrow(&declared, &[Deny, Message]).expect("narrower");
        assert_eq!(narrowed.effects, [Deny, Message]);
        assert_eq!(
            (narrowed.modify, narrowed.flow, narrowed.inject.len()),
            (None, None, 0)
        );
        assert_eq!(narrow(&declared, &[]), Ok(declared.clone()));
        let after = full(E::ToolAfter);
        let problems = narrow(&after, &[Message, Deny]).expect_err("deny is not declared");
        assert_eq!(
            problems[0].to_string(),
            "effects[1]: \"deny\" is not declared for tool.after"
        );
        let problems = narrow(&declared, &[Message]).expect_err("deny dropped");
        assert_eq!(problems[0].path, "effects");
    }
}
