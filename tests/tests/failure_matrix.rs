//! The failure matrix: every operational failure an HTTP backend can produce, under both
//! failure policies, through the real component and the real host (failure-semantics.md,
//! DESIGN.md §4 and §6).
//!
//! Each case registers two interceptors: the faulty backend first, a healthy `NoEffect`
//! backend second. Fail-closed must stop the chain with the generic synthetic denial;
//! fail-open must record the failure and carry on to the healthy backend. Every scripted
//! body carries [`MARKER`], which must never reach a reason or the audit record, and the
//! record must never name a backend address.
//!
//! The matrix runs for three interceptable events: `tool.before` (the whole table),
//! and `tool.after` and `session.start`, which have no deny yet are denied when a
//! fail-closed interceptor fails. For those two, the table's rows about effects a
//! tool.before harness advertises are replaced by rows about their own: a `deny` on
//! tool.after and a `modify` on session.start are unadvertised.
//!
//! Deadlines are not exercised here (every timeout is 1000 ms and nothing waits on it);
//! they have tests of their own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ahp_host::{DecidedBy, Decision, EffectKind, Settlement};
use ahp_tests::fault_backend::{refused_url, Behaviour, Cut, FaultBackend};
use ahp_tests::support::{
    call, interceptor, record_json, registration_on, valid_event, Http, SYNTHETIC_REASON,
};
use serde_json::{json, Map, Value};

/// Put in every scripted body and error message; must never leave the backend exchange.
const MARKER: &str = "BACKEND-SECRET-DETAIL-7f3a";
const FAULTY: &str = "com.example.faulty";
const HEALTHY: &str = "com.example.healthy";
const TIMEOUT_MS: u64 = 1_000;
const POLICIES: [&str; 2] = ["fail-closed", "fail-open"];
const EVENTS: [&str; 3] = ["tool.before", "tool.after", "session.start"];
const DENY_ONLY: &[EffectKind] = &[EffectKind::Deny];
const JSON: &str = "application/json";
const HTTP_STATUS: &str = "http-status";
const MALFORMED_JSONRPC: &str = "malformed-jsonrpc";
const MISSING_FIELDS: &str = "missing-result-fields";
const INVALID_EFFECTS: &str = "invalid-effects";
const PARSE: &str = "parse";
const ACCEPT: &str = "accept";
const AWAIT: &str = "await-response";
const READ: &str = "read-response";

/// How the faulty backend misbehaves.
#[derive(Clone, Debug)]
enum Fault {
    /// A `FaultBackend` serving this behaviour to every request.
    Serve(Behaviour),
    /// No backend at all: the URL this gives is dialled and nothing takes the
    /// connection.
    Dial(fn() -> String),
}

/// One row of the matrix: a fault and the exact failure the audit must record for it.
#[derive(Clone, Debug)]
struct Case {
    name: &'static str,
    script: Fault,
    /// What the harness declares it can enforce.
    effects: &'static [EffectKind],
    class: &'static str,
    /// Every case pins the phase as well as the class.
    phase: &'static str,
    detail: Option<&'static str>,
    http_status: Option<u16>,
    rpc_code: Option<i64>,
    effect: Option<usize>,
}

impl Case {
    fn new(
        name: &'static str,
        script: Behaviour,
        class: &'static str,
        phase: &'static str,
    ) -> Case {
        Case::fault(name, Fault::Serve(script), class, phase)
    }

    fn fault(name: &'static str, script: Fault, class: &'static str, phase: &'static str) -> Case {
        Case {
            name,
            script,
            effects: DENY_ONLY,
            class,
            phase,
            detail: None,
            http_status: None,
            rpc_code: None,
            effect: None,
        }
    }

    fn detail(mut self, detail: &'static str) -> Case {
        self.detail = Some(detail);
        self
    }

    fn status(mut self, status: u16) -> Case {
        self.http_status = Some(status);
        self
    }

    fn rpc(mut self, code: i64) -> Case {
        self.rpc_code = Some(code);
        self
    }

    /// The effect of the reply (from 0) the failure names.
    fn at(mut self, effect: usize) -> Case {
        self.effect = Some(effect);
        self
    }

    fn effects(mut self, effects: &'static [EffectKind]) -> Case {
        self.effects = effects;
        self
    }

    /// The exact `failure` object the audit record must hold.
    fn expected_failure(&self) -> Value {
        let mut failure = Map::new();
        failure.insert("class".into(), self.class.into());
        failure.insert("phase".into(), self.phase.into());
        if let Some(detail) = self.detail {
            failure.insert("detail".into(), detail.into());
        }
        if let Some(status) = self.http_status {
            failure.insert("httpStatus".into(), status.into());
        }
        if let Some(code) = self.rpc_code {
            failure.insert("rpcCode".into(), code.into());
        }
        if let Some(effect) = self.effect {
            failure.insert("effect".into(), effect.into());
        }
        Value::Object(failure)
    }
}

/// A reply with any status, content type and body; `$ID$` becomes the request id.
fn reply(status: u16, content_type: Option<&str>, body: impl Into<Vec<u8>>) -> Behaviour {
    Behaviour::Reply {
        status,
        content_type: content_type.map(str::to_owned),
        body: body.into(),
    }
}

/// A 200 `application/json` reply.
fn json200(body: impl Into<Vec<u8>>) -> Behaviour {
    reply(200, Some(JSON), body)
}

/// A body template: `message` serialized, with the string `"$ID$"` turned into the bare
/// `$ID$` placeholder, which the backend replaces with the request's id.
fn template(message: Value) -> String {
    message.to_string().replace(r#""$ID$""#, "$ID$")
}

/// A JSON-RPC success response template whose `result` is `result`.
fn with_result(result: Value) -> String {
    template(json!({"jsonrpc": "2.0", "id": "$ID$", "result": result}))
}

/// A valid result denying with the marker as reason, plus an ignored extra member: a
/// reply that would be accepted as a deny if anything else about it were right.
fn marker_result() -> Value {
    json!({"protocolVersion": "draft", "effects": marker_deny(), "note": MARKER})
}

/// A JSON-RPC error object with the marker as its message and data.
fn error_object(code: i64) -> Value {
    json!({"code": code, "message": MARKER, "data": {"trace": MARKER}})
}

/// A JSON-RPC error response template.
fn rpc_error(code: i64) -> String {
    template(json!({"jsonrpc": "2.0", "id": "$ID$", "error": error_object(code)}))
}

/// A deny effect whose reason is the marker: accepting any part of a bad reply would leak it.
fn marker_deny() -> Value {
    json!([{"type": "deny", "reason": MARKER}])
}

/// A complete, well-formed 302 whose `Location` is `target`.
fn redirect_to(target: &str) -> Behaviour {
    let body = format!("<a href=\"{target}\">{MARKER}</a>");
    let head = format!(
        "HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Type: text/html\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    Behaviour::RawThenClose([head.into_bytes(), body.into_bytes()].concat())
}

/// A 200 whose body is chunked (no `Content-Length` to reject up front) and one byte
/// over `cap`: the host must stop reading at its cap.
fn chunked_over(cap: usize) -> Behaviour {
    let size = cap + 1;
    let mut raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                    Transfer-Encoding: chunked\r\n\r\n"
        .to_vec();
    raw.extend_from_slice(format!("{size:x}\r\n").as_bytes());
    raw.extend_from_slice(MARKER.as_bytes());
    raw.resize(raw.len() + size - MARKER.len(), b' ');
    raw.extend_from_slice(b"\r\n0\r\n\r\n");
    Behaviour::RawThenClose(raw)
}

/// Spaces after a complete reply body that the reset mid-body never sends.
const UNSENT_PADDING: usize = 16;

/// A 200 whose status line and first header arrive, then a reset (F2: RST mid-response).
fn reset_in_head(body: &str) -> Behaviour {
    let status_and_header = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n";
    Behaviour::ResetMidResponse {
        inner: Box::new(json200(body)),
        cut: Cut::InHead(status_and_header.len()),
    }
}

/// A 200 whose head and a complete, valid JSON-RPC reply in its body arrive, then a
/// reset before the padding its `Content-Length` also counts: whatever the host made of
/// the bytes it got, they are not a response (F2: RST mid-response).
fn reset_in_body(body: &str) -> Behaviour {
    let padded = format!("{body}{}", " ".repeat(UNSENT_PADDING));
    Behaviour::ResetMidResponse {
        inner: Box::new(json200(padded)),
        cut: Cut::BodyShortBy(UNSENT_PADDING),
    }
}

/// Every HTTP failure case. `redirect_target` is where the 302 points.
fn table(redirect_target: &str) -> Vec<Case> {
    let valid_deny = with_result(marker_result());
    let (reset_head, reset_body) = (reset_in_head(&valid_deny), reset_in_body(&valid_deny));
    let mut invalid_utf8 = br#"{"jsonrpc":"2.0","id":$ID$,"result":""#.to_vec();
    invalid_utf8.extend_from_slice(MARKER.as_bytes());
    invalid_utf8.extend_from_slice(b"\xff\xfe\xc3\x28\"}");
    let invalid_json = format!(r#"{{"jsonrpc":"2.0","id":$ID$,"result":{MARKER}"#);
    let out_of_range = valid_deny.replacen(
        r#""note":"#,
        r#""extensions":{"com.example.n":1e400},"note":"#,
        1,
    );
    assert_ne!(out_of_range, valid_deny, "the number is in the reply");
    let batch = format!("[{valid_deny}]");
    let jsonrpc_1 = template(json!({"jsonrpc": "1.0", "id": "$ID$", "result": marker_result()}));
    let both = template(json!({
        "jsonrpc": "2.0", "id": "$ID$", "result": marker_result(), "error": error_object(-32003)
    }));
    let neither = template(json!({"jsonrpc": "2.0", "id": "$ID$", "note": MARKER}));
    let other_id = json!({"jsonrpc": "2.0", "id": "evt_someone_else", "result": marker_result()});
    let no_version = with_result(json!({"effects": marker_deny()}));
    let old_version =
        with_result(json!({"protocolVersion": "1900-01-01", "effects": marker_deny()}));
    let no_effects = with_result(json!({"protocolVersion": "draft", "note": MARKER}));
    let garbage = format!("NOT HTTP {MARKER}\r\n\r\n").into_bytes();
    let bad_chunk_size = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\nZZ\r\n{MARKER}\r\n0\r\n\r\n"
    )
    .into_bytes();
    use Behaviour::Effects;

    vec![
        // --- non-success HTTP ---
        Case::new(
            "status-500",
            reply(500, Some(JSON), rpc_error(-32603)),
            HTTP_STATUS,
            PARSE,
        )
        .status(500)
        .rpc(-32603),
        // A reply that would be a valid deny under 200 is still not a decision under 202.
        Case::new(
            "status-202",
            reply(202, Some(JSON), valid_deny.clone()),
            HTTP_STATUS,
            PARSE,
        )
        .status(202),
        Case::new(
            "status-204",
            reply(204, None, Vec::new()),
            HTTP_STATUS,
            PARSE,
        )
        .status(204),
        Case::new(
            "status-302",
            redirect_to(redirect_target),
            HTTP_STATUS,
            PARSE,
        )
        .status(302),
        // No authentication configured: a 401 is an auth failure under the configured
        // policy, and there is nothing to re-acquire.
        Case::new(
            "status-401-no-auth",
            reply(401, Some(JSON), template(json!({"error": MARKER}))),
            "auth-failed",
            "await-response",
        )
        .status(401),
        Case::new(
            "status-404",
            reply(404, Some("text/plain"), format!("{MARKER} not found")),
            HTTP_STATUS,
            PARSE,
        )
        .status(404),
        // --- content type ---
        Case::new(
            "content-type-html",
            reply(200, Some("text/html"), valid_deny.clone()),
            HTTP_STATUS,
            PARSE,
        )
        .status(200)
        .detail("content-type"),
        Case::new(
            "content-type-missing",
            reply(200, None, valid_deny.clone()),
            HTTP_STATUS,
            PARSE,
        )
        .status(200)
        .detail("content-type"),
        // --- body encoding ---
        Case::new(
            "invalid-utf8",
            json200(invalid_utf8),
            "malformed-utf8",
            PARSE,
        ),
        Case::new(
            "invalid-json",
            json200(invalid_json),
            "malformed-json",
            PARSE,
        ),
        // A number no double holds, even where nothing reads it (serde_json refuses it).
        Case::new(
            "number-out-of-range",
            json200(out_of_range),
            "malformed-json",
            PARSE,
        ),
        Case::new("empty-body", json200(Vec::new()), HTTP_STATUS, PARSE)
            .status(200)
            .detail("empty-body"),
        // --- JSON-RPC envelope ---
        Case::new("batch", json200(batch), MALFORMED_JSONRPC, PARSE).detail("batch"),
        Case::new("jsonrpc-1.0", json200(jsonrpc_1), MALFORMED_JSONRPC, PARSE)
            .detail("jsonrpc-version"),
        Case::new("result-and-error", json200(both), MALFORMED_JSONRPC, PARSE)
            .detail("result-and-error"),
        Case::new(
            "neither-result-nor-error",
            json200(neither),
            MALFORMED_JSONRPC,
            PARSE,
        )
        .detail("no-result-or-error"),
        Case::new(
            "id-mismatch",
            json200(other_id.to_string()),
            "id-mismatch",
            PARSE,
        ),
        // --- JSON-RPC errors ---
        Case::new(
            "rpc-error-32003",
            json200(rpc_error(-32003)),
            "jsonrpc-error",
            PARSE,
        )
        .rpc(-32003),
        Case::new(
            "rpc-error-32001",
            json200(rpc_error(-32001)),
            "unsupported-version",
            PARSE,
        )
        .rpc(-32001),
        Case::new(
            "rpc-error-32002",
            json200(rpc_error(-32002)),
            "unsupported-event",
            PARSE,
        )
        .rpc(-32002),
        // --- result ---
        Case::new(
            "protocol-version-missing",
            json200(no_version),
            MISSING_FIELDS,
            PARSE,
        )
        .detail("protocolVersion"),
        Case::new(
            "protocol-version-1900",
            json200(old_version),
            "unsupported-version",
            PARSE,
        ),
        Case::new(
            "effects-missing",
            json200(no_effects),
            MISSING_FIELDS,
            PARSE,
        )
        .detail("effects"),
        // --- effects ---
        Case::new(
            "unknown-effect-type",
            Effects(json!([{"type": "com.example.quarantine", "reason": MARKER}])),
            INVALID_EFFECTS,
            ACCEPT,
        )
        .detail("unknown-effect")
        .at(0),
        // `allow` is a known effect, but this harness declared only `deny`.
        Case::new(
            "unadvertised-allow",
            Effects(json!([{"type": "allow"}, {"type": "message", "text": MARKER}])),
            INVALID_EFFECTS,
            ACCEPT,
        )
        .detail("unadvertised-effect")
        .at(0),
        // Both are advertised here, so the only thing wrong is that they conflict.
        Case::new(
            "conflicting-deny-allow",
            Effects(json!([{"type": "deny", "reason": MARKER}, {"type": "allow"}])),
            INVALID_EFFECTS,
            ACCEPT,
        )
        .effects(&[EffectKind::Deny, EffectKind::Allow])
        .detail("conflicting-effects")
        .at(1),
        Case::new(
            "conflicting-returns",
            Effects(json!([{"type": "return", "value": MARKER},
                           {"type": "return", "value": "another"}])),
            INVALID_EFFECTS,
            ACCEPT,
        )
        .effects(&[EffectKind::Deny, EffectKind::Return])
        .detail("conflicting-effects")
        .at(1),
        Case::new(
            "deny-unknown-field",
            Effects(json!([{"type": "deny", "reason": MARKER, "severity": "high"}])),
            INVALID_EFFECTS,
            ACCEPT,
        )
        .detail("unknown-effect-field")
        .at(0),
        // Fixture atomic-unknown.invalid: a valid, advertised message is not salvaged.
        Case::new(
            "atomic-unknown",
            Effects(json!([{"type": "message", "text": MARKER}, {"type": "unknown"}])),
            INVALID_EFFECTS,
            ACCEPT,
        )
        .effects(&[EffectKind::Deny, EffectKind::Message])
        .detail("unknown-effect")
        .at(1),
        // --- transport ---
        Case::fault(
            "connection-refused",
            Fault::Dial(refused_url),
            "connection-refused",
            "connect",
        ),
        // `.invalid` never resolves (RFC 6761).
        Case::fault(
            "unresolved-host",
            Fault::Dial(|| "https://ahp-backend.invalid/hooks".into()),
            "connection-refused",
            "connect",
        )
        .detail("unresolved-host"),
        // Linux refuses a TCP connection to a multicast address (ENETUNREACH) whatever
        // its routes: no route, so nothing was sent. (A port of five digits, so that its
        // `:PORT` needle cannot match an `elapsedMs` in the record.)
        Case::fault(
            "no-route",
            Fault::Dial(|| "https://224.0.0.1:45678/hooks".into()),
            "connection-refused",
            "connect",
        ),
        Case::new(
            "connection-reset",
            Behaviour::Reset,
            "connection-reset",
            AWAIT,
        ),
        // A reset mid-response is a reset wherever it cuts. The WIT `connection-reset`
        // carries no phase, so the record says `await-response` even mid-body.
        Case::new(
            "connection-reset-in-head",
            reset_head,
            "connection-reset",
            AWAIT,
        ),
        // The bytes that did arrive are a valid deny with the marker as its reason: taking
        // them as the response would deny as the backend and leak the marker.
        Case::new(
            "connection-reset-in-body",
            reset_body,
            "connection-reset",
            AWAIT,
        ),
        Case::new(
            "connection-closed",
            Behaviour::Close,
            "connection-lost",
            AWAIT,
        ),
        Case::new(
            "garbage-http",
            Behaviour::RawThenClose(garbage),
            HTTP_STATUS,
            AWAIT,
        )
        .detail("malformed-http"),
        // A 200 in a content coding the request did not accept (it asks for `identity`):
        // its bytes are not the reply's JSON, whatever they hold (here a valid deny, with
        // a second header written through the content type's).
        Case::new(
            "content-coded-200",
            reply(
                200,
                Some("application/json\r\nContent-Encoding: gzip"),
                valid_deny.clone(),
            ),
            HTTP_STATUS,
            AWAIT,
        )
        .detail("malformed-http"),
        // A chunk-size line that is not hexadecimal: malformed HTTP in the body, which the
        // backend sent (not a lost connection, and not worth a retry).
        Case::new(
            "garbage-chunk-size",
            Behaviour::RawThenClose(bad_chunk_size),
            HTTP_STATUS,
            AWAIT,
        )
        .detail("malformed-http"),
        // 2 MiB against the host's 1 MiB cap: rejected by its Content-Length.
        Case::new(
            "oversized-body",
            Behaviour::Oversized(2 << 20),
            "malformed-json",
            READ,
        )
        .detail("response-too-large"),
        // Chunked, so the cap must hold while streaming.
        Case::new(
            "oversized-chunked-body",
            chunked_over(1 << 20),
            "malformed-json",
            READ,
        )
        .detail("response-too-large"),
    ]
}

/// The faulty interceptor, then the healthy one, both under `policy`, intercepting
/// `event_type`.
fn faulty_then_healthy_on(
    faulty_url: &str,
    healthy_url: &str,
    policy: &str,
    event_type: &str,
) -> String {
    registration_on(
        &[
            Http::new(FAULTY, faulty_url)
                .policy(policy)
                .timeout_ms(TIMEOUT_MS),
            Http::new(HEALTHY, healthy_url)
                .policy(policy)
                .timeout_ms(TIMEOUT_MS),
        ],
        &[event_type],
    )
}

/// The rows that stand for `event_type`: the whole table for tool.before; for the others,
/// every row not about effects (those assume tool.before's advertisement), plus one about
/// an effect the event does not have. The harness advertises what it declared.
fn rows(event_type: &str, redirect_target: &str) -> Vec<Case> {
    if event_type == "tool.before" {
        return table(redirect_target);
    }
    let mut rows: Vec<Case> = table(redirect_target)
        .into_iter()
        .filter(|c| c.class != INVALID_EFFECTS)
        .map(|c| c.effects(&[]))
        .collect();
    let foreign = match event_type {
        "tool.after" => Case::new(
            "deny-on-tool-after",
            Behaviour::Effects(
                json!([{"type": "message", "text": MARKER}, {"type": "deny", "reason": MARKER}]),
            ),
            INVALID_EFFECTS,
            ACCEPT,
        ),
        _ => Case::new(
            "modify-on-session-start",
            Behaviour::Effects(
                json!([{"type": "modify", "target": "input", "operation": "replace",
                            "value": {"note": MARKER}}]),
            ),
            INVALID_EFFECTS,
            ACCEPT,
        ),
    };
    // Its second effect, past the message the call does accept.
    let foreign = match event_type {
        "tool.after" => foreign.at(1),
        _ => foreign.at(0),
    };
    rows.push(foreign.effects(&[]).detail("unadvertised-effect"));
    rows
}

/// The faulty interceptor, then the healthy one, both under `policy`.
fn faulty_then_healthy(faulty_url: &str, healthy_url: &str, policy: &str) -> String {
    faulty_then_healthy_on(faulty_url, healthy_url, policy, "tool.before")
}

// Expected settlements: the host's value with the record's word for it.
const DENY: (Decision, &str) = (Decision::Deny, "deny");
const ALLOW: (Decision, &str) = (Decision::Allow, "allow");
const SYNTHETIC_DENY: (DecidedBy, &str) = (DecidedBy::SyntheticDeny, "synthetic-deny");
const NO_OBJECTION: (DecidedBy, &str) = (DecidedBy::NoObjection, "no-objection");
const BACKEND_DENY: (DecidedBy, &str) = (DecidedBy::BackendDeny, "backend-deny");

/// The settlement and its record both hold the expected decision, decider and reason.
/// (Unlike `support::assert_settled`, the record's words are spelled out here, not taken
/// from the host's `DecidedBy::as_str`, and every message names the case.)
fn assert_case_settled(
    context: &str,
    settled: &Settlement,
    (decision, decision_word): (Decision, &str),
    (decided_by, decided_by_word): (DecidedBy, &str),
    reason: Option<&str>,
) {
    let record = &record_json(settled);
    assert_eq!(settled.decision, decision, "{context}: {record}");
    assert_eq!(settled.decided_by, decided_by, "{context}: {record}");
    assert_eq!(settled.reason.as_deref(), reason, "{context}: {record}");
    assert_eq!(record["decision"], decision_word, "{context}: {record}");
    assert_eq!(record["decidedBy"], decided_by_word, "{context}: {record}");
    assert_eq!(record["reason"], json!(reason), "{context}: {record}");
}

/// The record never holds the marker, a backend URL, or a backend address.
fn assert_no_leaks(context: &str, settled: &Settlement, forbidden: &[String]) {
    let record = serde_json::to_string(&settled.record).expect("a record serializes");
    let reason = settled.reason.clone().unwrap_or_default();
    assert!(
        !reason.contains(MARKER),
        "{context}: backend text in the reason: {reason:?}"
    );
    assert!(
        !record.contains(MARKER),
        "{context}: backend text in the record: {record}"
    );
    for needle in forbidden {
        assert!(
            !record.contains(needle.as_str()) && !reason.contains(needle.as_str()),
            "{context}: {needle:?} leaked into the settlement: {record}"
        );
    }
}

/// Addresses that must never appear in a record: for each of `urls`, the URL, its host
/// and its `:PORT`.
fn address_needles(urls: &[&str]) -> Vec<String> {
    let mut needles = Vec::new();
    for url in urls {
        let authority = url
            .split_once("://")
            .and_then(|(_, rest)| rest.split('/').next())
            .unwrap_or_else(|| panic!("unexpected backend URL shape: {url}"));
        let (host, port) = authority.split_once(':').unwrap_or((authority, ""));
        needles.extend([url.to_string(), host.to_string()]);
        if !port.is_empty() {
            needles.push(format!(":{port}"));
        }
    }
    needles
}

/// Runs one case under one policy and checks everything about it. Counts an allow under
/// fail-closed in `closed_allows` before asserting, so the tally survives a failed case.
async fn run_case(
    case: Case,
    event_type: &'static str,
    policy: &'static str,
    redirect_needles: Vec<String>,
    closed_allows: Arc<AtomicUsize>,
) {
    let context = format!("{} / {event_type} / {policy}", case.name);
    let (faulty, faulty_url) = match &case.script {
        Fault::Serve(behaviour) => {
            let backend = FaultBackend::start(vec![behaviour.clone()]).await;
            let url = backend.url();
            (Some(backend), url)
        }
        Fault::Dial(url) => (None, url()),
    };
    let healthy = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let document = faulty_then_healthy_on(&faulty_url, &healthy.url(), policy, event_type);
    let hooks = interceptor(&document).await;
    let event_id = format!("evt_{}_{event_type}_{policy}", case.name);
    let settled = hooks
        .intercept(&valid_event(event_type, &event_id), case.effects, None)
        .await
        .unwrap_or_else(|e| panic!("{context}: the call could not be made: {e}"));
    if policy == "fail-closed" && settled.decision == Decision::Allow {
        closed_allows.fetch_add(1, Ordering::SeqCst);
    }
    let record = &record_json(&settled);
    let first = &record["interceptors"][0];
    let second = &record["interceptors"][1];

    // The record's identity and shape, whatever the policy.
    assert_eq!(
        record["event"]["id"],
        json!(event_id),
        "{context}: {record}"
    );
    assert_eq!(record["event"]["type"], event_type, "{context}: {record}");
    assert_eq!(
        record["interceptors"].as_array().map(Vec::len),
        Some(2),
        "{context}: {record}"
    );
    assert_eq!(first["backend"], FAULTY, "{context}: {record}");
    assert_eq!(first["policy"], policy, "{context}: {record}");
    assert_eq!(first["timeoutMs"], json!(TIMEOUT_MS), "{context}: {record}");
    assert_eq!(
        first["failure"],
        case.expected_failure(),
        "{context}: wrong failure classification: {record}"
    );
    assert_eq!(second["backend"], HEALTHY, "{context}: {record}");
    let attempts = first["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("{context}: no attempts: {record}"));
    assert!(!attempts.is_empty(), "{context}: {record}");
    let last = &attempts[attempts.len() - 1];
    let last_result = if case.class == "auth-failed" {
        "unauthorized"
    } else {
        case.class
    };
    assert_eq!(last["result"], last_result, "{context}: {record}");

    // The fault was really exercised: the request reached the backend (every attempt of
    // it), and it was an intercept request.
    match &faulty {
        Some(backend) => {
            let received = backend.requests();
            assert_eq!(
                received.len(),
                attempts.len(),
                "{context}: one request per recorded attempt: {record}"
            );
            for request in &received {
                assert_eq!(request.json()["method"], "hooks/intercept", "{context}");
                assert_eq!(request.json()["id"], json!(event_id), "{context}");
            }
        }
        None => assert_eq!(attempts.len(), 1, "{context}: {record}"),
    }

    let mut needles = address_needles(&[&faulty_url, &healthy.url()]);
    needles.extend(redirect_needles);
    assert_no_leaks(&context, &settled, &needles);

    if policy == "fail-closed" {
        assert_case_settled(
            &context,
            &settled,
            DENY,
            SYNTHETIC_DENY,
            Some(SYNTHETIC_REASON),
        );
        assert_eq!(first["outcome"], "failed-closed", "{context}: {record}");
        assert_eq!(second["outcome"], "not-reached", "{context}: {record}");
        assert_eq!(second.get("failure"), None, "{context}: {record}");
        assert_eq!(second["attempts"], json!([]), "{context}: {record}");
        // Short circuit: the healthy backend was never asked to decide. It is only listed
        // as a best-effort observer (a `hooks/observe` notification, if the host delivers
        // one, is not an intercept and is allowed here).
        assert_eq!(
            healthy.requests_with_method("hooks/intercept").len(),
            0,
            "{context}: the chain went on after a fail-closed failure"
        );
        for request in healthy.requests() {
            assert_eq!(request.json()["method"], "hooks/observe", "{context}");
        }
        let observers: Vec<&Value> = record["observers"]
            .as_array()
            .map(|o| o.iter().map(|entry| &entry["backend"]).collect())
            .unwrap_or_default();
        assert_eq!(observers, [&json!(HEALTHY)], "{context}: {record}");
    } else {
        assert_case_settled(&context, &settled, ALLOW, NO_OBJECTION, None);
        assert_eq!(first["outcome"], "failed-open", "{context}: {record}");
        assert_eq!(second["outcome"], "no-effect", "{context}: {record}");
        assert_eq!(
            healthy.requests().len(),
            1,
            "{context}: fail-open must go on to the next interceptor exactly once"
        );
        assert_eq!(
            healthy.requests_with_method("hooks/intercept").len(),
            1,
            "{context}"
        );
        assert_eq!(record["observers"], json!([]), "{context}: {record}");
    }
}

/// The whole table under both policies. Every case runs even if an earlier one fails;
/// the failures are listed at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_http_failure_class_under_both_policies_for_each_event() {
    let redirect_target = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let redirect_needles = address_needles(&[&redirect_target.url()]);
    let closed_allows = Arc::new(AtomicUsize::new(0));
    let mut failed = Vec::new();
    let mut ran = 0;
    let mut expected = 0;
    for event_type in EVENTS {
        let cases = rows(event_type, &redirect_target.url());
        expected += cases.len() * 2;
        for case in &cases {
            for policy in POLICIES {
                let run = tokio::spawn(run_case(
                    case.clone(),
                    event_type,
                    policy,
                    redirect_needles.clone(),
                    closed_allows.clone(),
                ));
                ran += 1;
                if run.await.is_err() {
                    failed.push(format!("{} / {event_type} / {policy}", case.name));
                }
            }
        }
    }
    assert_eq!(ran, expected);
    assert_eq!(
        redirect_target.requests().len(),
        0,
        "a redirect was followed"
    );
    assert_eq!(
        redirect_target.connections(),
        0,
        "a redirect target was contacted"
    );
    assert_eq!(
        closed_allows.load(Ordering::SeqCst),
        0,
        "fail-closed produced an allow"
    );
    assert!(
        failed.is_empty(),
        "failing cases (see panics above): {failed:#?}"
    );
}

/// The table covers every failure class an HTTP backend can cause. (Deadlines are timing
/// tests elsewhere; late-response is `injected_transports.rs`'s
/// `a_reply_at_the_deadline_is_a_late_response_never_acted_on`; launch and exit are
/// stdio-only.)
#[test]
fn the_table_covers_every_http_failure_class() {
    let mut covered: Vec<&str> = table("http://127.0.0.1:9/hooks")
        .iter()
        .map(|c| c.class)
        .collect();
    covered.sort_unstable();
    covered.dedup();
    let mut expected = vec![
        "auth-failed",
        "connection-lost",
        "connection-refused",
        "connection-reset",
        "http-status",
        "id-mismatch",
        "invalid-effects",
        "jsonrpc-error",
        "malformed-json",
        "malformed-jsonrpc",
        "malformed-utf8",
        "missing-result-fields",
        "unsupported-event",
        "unsupported-version",
    ];
    expected.sort_unstable();
    assert_eq!(covered, expected);
    let names: Vec<&str> = table("http://127.0.0.1:9/hooks")
        .iter()
        .map(|c| c.name)
        .collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "case names must be unique");
}

/// An explicit deny is not an operational failure: it denies under either policy, with
/// the backend's own reason, and is recorded as `backend-deny`, never `synthetic-deny`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_deny_is_the_backends_reason_under_both_policies() {
    for policy in POLICIES {
        let reason = format!("Writes to /etc are blocked ({policy}).");
        let denier = FaultBackend::start(vec![Behaviour::Deny(reason.clone())]).await;
        let healthy = FaultBackend::start(vec![Behaviour::NoEffect]).await;
        let hooks = interceptor(&faulty_then_healthy(&denier.url(), &healthy.url(), policy)).await;
        let event_id = format!("evt_explicit_{policy}");
        let settled = call(&hooks, &event_id).await;
        let record = &record_json(&settled);
        assert_case_settled(policy, &settled, DENY, BACKEND_DENY, Some(&reason));
        let first = &record["interceptors"][0];
        assert_eq!(first["backend"], FAULTY, "{policy}: {record}");
        assert_eq!(first["outcome"], "deny", "{policy}: {record}");
        assert_eq!(first.get("failure"), None, "{policy}: {record}");
        assert_eq!(
            first["attempts"],
            json!([{"n": 1, "elapsedMs": first["attempts"][0]["elapsedMs"], "result": "accepted",
                    "requestSha256": first["requestSha256"]}]),
            "{policy}: {record}"
        );
        assert_eq!(
            record["interceptors"][1]["outcome"], "not-reached",
            "{policy}: {record}"
        );
        // A deny is never retried, and stops the chain.
        assert_eq!(denier.requests().len(), 1, "{policy}");
        assert_eq!(
            healthy.requests_with_method("hooks/intercept").len(),
            0,
            "{policy}"
        );
        let needles = address_needles(&[&denier.url(), &healthy.url()]);
        assert_no_leaks(policy, &settled, &needles);
    }
}

/// The reply reader's nesting limit holds inside the component, whose stack is
/// wasmtime's, not a native test thread's: a deny nested to the limit (127 levels of
/// objects and arrays, the message itself the first) is the backend's deny; one level
/// deeper is `malformed-json`, settled by the policy. Never a trap, which would be an
/// engine failure: a denial even under fail-open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_nested_to_the_readers_limit_is_read_and_past_it_is_malformed_json() {
    const LIMIT: usize = 127;
    let reason = "Nested, and still a deny.";
    // The message, its result and the result's extensions are three levels; the rest
    // are arrays in that extension.
    let nested = |levels: usize| {
        let arrays = levels - 3;
        let deep = format!("{}{}", "[".repeat(arrays), "]".repeat(arrays));
        let mut result = json!({"protocolVersion": "draft",
            "effects": [{"type": "deny", "reason": reason}]});
        let deep: Value = serde_json::from_str(&deep).expect("nested arrays");
        result["extensions"] = json!({"com.example.deep": deep});
        json200(with_result(result))
    };
    for policy in POLICIES {
        for (levels, read) in [(LIMIT, true), (LIMIT + 1, false)] {
            let context = format!("{policy}, {levels} levels");
            let faulty = FaultBackend::start(vec![nested(levels)]).await;
            let healthy = FaultBackend::start(vec![Behaviour::NoEffect]).await;
            let hooks =
                interceptor(&faulty_then_healthy(&faulty.url(), &healthy.url(), policy)).await;
            let settled = call(&hooks, &format!("evt_nested_{levels}")).await;
            let record = &record_json(&settled);
            let first = &record["interceptors"][0];
            match (read, policy) {
                (true, _) => {
                    assert_case_settled(&context, &settled, DENY, BACKEND_DENY, Some(reason));
                    assert_eq!(first.get("failure"), None, "{context}: {record}");
                }
                (false, "fail-closed") => {
                    let synthetic = Some(SYNTHETIC_REASON);
                    assert_case_settled(&context, &settled, DENY, SYNTHETIC_DENY, synthetic);
                }
                (false, _) => assert_case_settled(&context, &settled, ALLOW, NO_OBJECTION, None),
            }
            if !read {
                let failure = json!({"class": "malformed-json", "phase": PARSE});
                assert_eq!(first["failure"], failure, "{context}: {record}");
            }
            assert_eq!(faulty.requests().len(), 1, "{context}");
        }
    }
}
