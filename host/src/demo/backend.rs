//! The demo's built-in policy backend on loopback: a strict AHP server (digest §2, §5,
//! §9, §13) whose routes play the scenarios.
//!
//! Whatever is not a valid `hooks/intercept` request is answered as the protocol says
//! before any route sees it, so the one thing a scenario's route answers — deliberately
//! late on `/slow`, deliberately broken on `/garbled` — is a request it should answer.

use ahp_vocab::{EffectKind, InterceptableEvent, PROTOCOL_VERSION};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;

/// How long the `/slow` route sleeps: longer than any scripted timeout.
const SLOW: Duration = Duration::from_millis(1_500);

/// The largest request body read. AHP sets no limit (digest §9); a scripted call needs a
/// few hundred bytes, and a cap keeps any other client from making the demo buffer
/// without end.
const MAX_BODY: usize = 1 << 20;

/// Serves the backend on a random loopback port until the task is aborted.
pub(super) async fn serve() -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        while let Ok((stream, _)) = listener.accept().await {
            admit(&mut connections, async move {
                let service = hyper::service::service_fn(|request| async {
                    Ok::<_, Infallible>(answer(request).await)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((addr, task))
}

/// Serves a new `connection` among `connections`, first letting go of those that ended:
/// the set is owned so that aborting the server ends them all, and would otherwise keep
/// every finished one until then.
fn admit(
    connections: &mut tokio::task::JoinSet<()>,
    connection: impl std::future::Future<Output = ()> + Send + 'static,
) {
    while connections.try_join_next().is_some() {}
    connections.spawn(connection);
}

/// The HTTP binding (digest §9): one JSON-RPC message per `POST` of JSON, a JSON-RPC
/// response with a 200, a notification's 202 with no body.
async fn answer(request: Request<Incoming>) -> Response<Full<Bytes>> {
    let Some(route) = Route::of(request.uri().path()) else {
        return empty(StatusCode::NOT_FOUND);
    };
    if request.method() != Method::POST {
        let mut response = empty(StatusCode::METHOD_NOT_ALLOWED);
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    if !is_json(request.headers()) {
        return empty(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
    let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) if e.is::<LengthLimitError>() => return empty(StatusCode::PAYLOAD_TOO_LARGE),
        Err(_) => return empty(StatusCode::BAD_REQUEST),
    };
    let reply = match Message::read(&body) {
        Message::Intercept { id, params } => route.answer(&id, &params["event"]).await,
        Message::Notification => return empty(StatusCode::ACCEPTED),
        Message::Refused(refusal, id) => refusal.reply(&id),
    };
    let mut response = Response::new(Full::new(Bytes::from(reply)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A reply without a body: an HTTP refusal, or a notification's 202.
fn empty(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::default());
    *response.status_mut() = status;
    response
}

/// Whether the body is declared as JSON, `application/json` with any parameters.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// What one body asks of the backend, read as JSON-RPC 2.0 (digest §2).
enum Message {
    /// A valid `hooks/intercept` request: the only message a route answers.
    Intercept { id: Value, params: Value },
    /// A notification, `hooks/observe` or any other: never answered, not even with an
    /// error (digest §5); the demo records no observations.
    Notification,
    /// Anything else: the error to answer, with the request's id when it has a valid one.
    Refused(Refusal, Value),
}

impl Message {
    fn read(body: &[u8]) -> Message {
        let Ok(message) = serde_json::from_slice::<Value>(body) else {
            return Message::Refused(Refusal::ParseError, Value::Null);
        };
        // A batch (an array) is forbidden (digest §2); a scalar is no request at all.
        let Value::Object(mut message) = message else {
            return Message::Refused(Refusal::InvalidRequest, Value::Null);
        };
        let id = match message.remove("id") {
            None => None,
            Some(id) if is_id(&id) => Some(id),
            Some(_) => return Message::Refused(Refusal::InvalidRequest, Value::Null),
        };
        let params = message.remove("params").unwrap_or_default();
        let method = message.get("method").and_then(Value::as_str);
        let version = message.get("jsonrpc").and_then(Value::as_str);
        let (Some(method), Some("2.0")) = (method, version) else {
            return Message::Refused(Refusal::InvalidRequest, id.unwrap_or_default());
        };
        let Some(id) = id else {
            return Message::Notification;
        };
        match method {
            "hooks/intercept" => Message::intercept(id, params),
            // A notification-only method sent as a request.
            "hooks/observe" => Message::Refused(Refusal::InvalidRequest, id),
            _ => Message::Refused(Refusal::MethodNotFound, id),
        }
    }

    /// An intercept request the demo can answer, or the error for one it cannot.
    fn intercept(id: Value, params: Value) -> Message {
        match check_intercept(&id, &params) {
            Ok(()) => Message::Intercept { id, params },
            Err(refusal) => Message::Refused(refusal, id),
        }
    }
}

/// What is wrong, if anything, with the `params` of intercept request `id`. A field the
/// digest requires that is missing or of the wrong kind is invalid params: the version,
/// the event's type, an event `id` equal to the request's (digest §2), an `effects` array
/// of names (digest §3.1). One that is present but not this backend's is unsupported
/// (digest §5, §13), never ignored: a version other than `draft`, checked first as the
/// rest has that version's shape, and an event other than `tool.before`. Last, a
/// `tool.before` must advertise `deny` (AHP-CAP-002), so a route can always answer with
/// one: without it, a route would have to choose between an effect it may not return
/// (digest §4.2) and `[]`, which would let through what its policy denies.
fn check_intercept(id: &Value, params: &Value) -> Result<(), Refusal> {
    let Some(version) = params.get("protocolVersion").and_then(Value::as_str) else {
        return Err(Refusal::InvalidParams);
    };
    if version != PROTOCOL_VERSION {
        return Err(Refusal::UnsupportedVersion);
    }
    // `event` is an object when it has a type.
    let event = &params["event"];
    let Some(event_type) = event["type"].as_str() else {
        return Err(Refusal::InvalidParams);
    };
    if event["id"] != *id {
        return Err(Refusal::InvalidParams);
    }
    let effects = params["capabilities"]["effects"].as_array();
    let Some(effects) = effects.filter(|effects| effects.iter().all(Value::is_string)) else {
        return Err(Refusal::InvalidParams);
    };
    if event_type != InterceptableEvent::ToolBefore.as_str() {
        return Err(Refusal::UnsupportedEvent);
    }
    let deny = EffectKind::Deny.as_str();
    if !effects.iter().any(|effect| effect.as_str() == Some(deny)) {
        return Err(Refusal::InvalidParams);
    }
    Ok(())
}

/// A request id as AHP's schema has it: a non-empty string or an integer.
fn is_id(id: &Value) -> bool {
    match id {
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.is_i64() || n.is_u64(),
        _ => false,
    }
}

/// The JSON-RPC errors the backend answers with: JSON-RPC 2.0's own, and the two AHP
/// reserves for what a backend does not support (digest §5).
#[derive(Clone, Copy)]
enum Refusal {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    UnsupportedVersion,
    UnsupportedEvent,
}

impl Refusal {
    fn code(self) -> i64 {
        match self {
            Refusal::ParseError => -32700,
            Refusal::InvalidRequest => -32600,
            Refusal::MethodNotFound => -32601,
            Refusal::InvalidParams => -32602,
            Refusal::UnsupportedVersion => -32001,
            Refusal::UnsupportedEvent => -32002,
        }
    }

    fn message(self) -> &'static str {
        match self {
            Refusal::ParseError => "Parse error",
            Refusal::InvalidRequest => "Invalid Request",
            Refusal::MethodNotFound => "Method not found",
            Refusal::InvalidParams => "Invalid params",
            Refusal::UnsupportedVersion => "Unsupported AHP protocol version",
            Refusal::UnsupportedEvent => "Unsupported event",
        }
    }

    /// The error response to request `id`; null when the id could not be read.
    fn reply(self, id: &Value) -> Vec<u8> {
        let mut error = json!({"code": self.code(), "message": self.message()});
        if let Refusal::UnsupportedVersion = self {
            error["data"] = json!({"supported": [PROTOCOL_VERSION]});
        }
        json!({"jsonrpc": "2.0", "id": id, "error": error})
            .to_string()
            .into_bytes()
    }
}

/// The scenario a path plays.
#[derive(Clone, Copy)]
enum Route {
    /// Denies recursive deletion, raises no objection to the rest. Every request that
    /// reaches it advertises `deny` ([`check_intercept`]).
    Policy,
    /// Raises no objection, after [`SLOW`].
    Slow,
    /// Answers with JSON cut short.
    Garbled,
}

impl Route {
    fn of(path: &str) -> Option<Route> {
        match path {
            "/policy" => Some(Route::Policy),
            "/slow" => Some(Route::Slow),
            "/garbled" => Some(Route::Garbled),
            _ => None,
        }
    }

    /// The reply to the valid intercept request `id` about `event`.
    async fn answer(self, id: &Value, event: &Value) -> Vec<u8> {
        match self {
            Route::Slow => {
                tokio::time::sleep(SLOW).await;
                result(id, json!([]))
            }
            Route::Garbled => br#"{"jsonrpc":"2.0","id":"#.to_vec(),
            Route::Policy => {
                let command = event["tool"]["input"]["command"].as_str().unwrap_or("");
                if command.contains("rm -rf") {
                    let deny = json!({"type": "deny", "reason": "Recursive deletion needs a human review."});
                    result(id, json!([deny]))
                } else {
                    result(id, json!([]))
                }
            }
        }
    }
}

/// The intercept result for request `id` with these `effects`.
fn result(id: &Value, effects: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": PROTOCOL_VERSION, "effects": effects}})
        .to_string()
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::{ALLOW, CONTENT_TYPE, HOST};
    use hyper::{Method, StatusCode};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpStream;

    /// A `hooks/intercept` request as the component sends it, at `version`, for an event
    /// of type `event_type`.
    fn intercept(version: &str, event_type: &str) -> Value {
        json!({
            "jsonrpc": "2.0", "id": "evt_1", "method": "hooks/intercept",
            "params": {
                "protocolVersion": version,
                "event": {
                    "id": "evt_1", "source": "urn:ahp:test", "type": event_type,
                    "time": "2026-11-30T12:00:00Z", "session": {"id": "sess_1"},
                    "call": {"id": "call_1"}, "path": "native",
                    "tool": {"name": "Bash", "input": {"command": "ls"}, "origin": "native"}
                },
                "capabilities": {"effects": ["deny"]}
            }
        })
    }

    /// A JSON POST to `route`, as the component sends it.
    fn post(route: &str) -> hyper::http::request::Builder {
        Request::post(format!("/{route}")).header(CONTENT_TYPE, "application/json")
    }

    /// Sends `request` with `body` to a new backend over loopback and reads the whole reply.
    async fn send(
        request: hyper::http::request::Builder,
        body: impl Into<Bytes>,
    ) -> Response<Bytes> {
        let (addr, _server) = serve().await.expect("the backend");
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(connection);
        let request = request
            .header(HOST, addr.to_string())
            .body(Full::new(body.into()))
            .expect("a request");
        let (parts, body) = sender
            .send_request(request)
            .await
            .expect("a reply")
            .into_parts();
        let body = body.collect().await.expect("the body").to_bytes();
        Response::from_parts(parts, body)
    }

    /// POSTs `message` to `route` and reads the JSON-RPC reply, which must come with a 200.
    async fn rpc(route: &str, message: &[u8]) -> Value {
        let reply = send(post(route), message.to_vec()).await;
        assert_eq!(reply.status(), StatusCode::OK, "{reply:?}");
        serde_json::from_slice(reply.body()).expect("a JSON reply")
    }

    /// Posts `message` to every route and checks that each answers with the JSON-RPC
    /// error `code` for request `id`: the message reaches no scenario. Returns the errors.
    async fn assert_refused(message: impl AsRef<[u8]>, id: Value, code: i64) -> Vec<Value> {
        let mut errors = Vec::new();
        for route in ["policy", "slow", "garbled"] {
            let reply = rpc(route, message.as_ref()).await;
            assert_eq!(reply["jsonrpc"], "2.0", "/{route}: {reply}");
            assert_eq!(reply["id"], id, "/{route}: {reply}");
            assert_eq!(reply["error"]["code"], code, "/{route}: {reply}");
            assert!(reply["error"]["message"].is_string(), "/{route}: {reply}");
            assert!(reply.get("result").is_none(), "/{route}: {reply}");
            errors.push(reply["error"].clone());
        }
        errors
    }

    #[tokio::test]
    async fn a_method_other_than_post_is_405_naming_post() {
        for method in [Method::GET, Method::PUT] {
            let reply = send(post("policy").method(method), Bytes::new()).await;
            assert_eq!(reply.status(), StatusCode::METHOD_NOT_ALLOWED, "{reply:?}");
            assert_eq!(reply.headers()[ALLOW], "POST", "{reply:?}");
        }
    }

    #[tokio::test]
    async fn a_route_the_demo_does_not_serve_is_404() {
        let message = intercept("draft", "tool.before").to_string();
        for route in ["", "policy/", "other"] {
            let reply = send(post(route), message.clone()).await;
            assert_eq!(reply.status(), StatusCode::NOT_FOUND, "{reply:?}");
        }
    }

    #[tokio::test]
    async fn a_body_that_is_not_json_is_415() {
        let message = intercept("draft", "tool.before").to_string();
        for content_type in ["text/plain", "application/jsonl"] {
            let request = Request::post("/policy").header(CONTENT_TYPE, content_type);
            let reply = send(request, message.clone()).await;
            assert_eq!(
                reply.status(),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{reply:?}"
            );
        }
        let request = Request::post("/policy");
        assert_eq!(
            send(request, message.clone()).await.status(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
        let request =
            Request::post("/policy").header(CONTENT_TYPE, "Application/JSON; charset=utf-8");
        assert_eq!(send(request, message).await.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn a_body_over_the_cap_is_413() {
        let reply = send(post("policy"), vec![b' '; MAX_BODY + 1]).await;
        assert_eq!(reply.status(), StatusCode::PAYLOAD_TOO_LARGE, "{reply:?}");
    }

    /// A chunked body whose framing breaks half way cannot be read: 400, not an answer
    /// to whatever part of it arrived.
    #[tokio::test]
    async fn an_unreadable_body_is_400() {
        let (addr, _server) = serve().await.expect("the backend");
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let request = format!(
            "POST /policy HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             transfer-encoding: chunked\r\n\r\n2\r\n{{}}\r\nzz\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut reply = String::new();
        let _ = stream.read_to_string(&mut reply).await;
        assert!(reply.starts_with("HTTP/1.1 400 "), "{reply}");
    }

    #[tokio::test]
    async fn unparsable_json_is_a_parse_error_with_a_null_id() {
        for body in [&b"{\"jsonrpc\":\"2.0\",\"id\":"[..], b"", b"\xff"] {
            assert_refused(body, Value::Null, -32700).await;
        }
    }

    #[tokio::test]
    async fn a_batch_or_a_message_that_is_not_a_request_is_an_invalid_request() {
        let request = intercept("draft", "tool.before");
        let mut no_version = request.clone();
        no_version["jsonrpc"] = json!("1.0");
        let mut no_method = request.clone();
        no_method
            .as_object_mut()
            .expect("an object")
            .remove("method");
        let mut bad_id = request.clone();
        bad_id["id"] = json!({"n": 1});
        for message in [json!([request]), json!("hooks/intercept"), bad_id] {
            assert_refused(message.to_string(), Value::Null, -32600).await;
        }
        for message in [no_version, no_method] {
            assert_refused(message.to_string(), json!("evt_1"), -32600).await;
        }
    }

    #[tokio::test]
    async fn an_unknown_method_is_method_not_found() {
        let mut message = intercept("draft", "tool.before");
        message["method"] = json!("hooks/capabilities");
        assert_refused(message.to_string(), json!("evt_1"), -32601).await;
    }

    /// An observe notification is accepted with no body; sent with an id it is not one.
    #[tokio::test]
    async fn an_observe_notification_is_202_with_no_body() {
        let mut message = intercept("draft", "tool.after");
        message["method"] = json!("hooks/observe");
        message.as_object_mut().expect("an object").remove("id");
        for route in ["policy", "slow", "garbled"] {
            let reply = send(post(route), message.to_string()).await;
            assert_eq!(reply.status(), StatusCode::ACCEPTED, "{reply:?}");
            assert!(reply.body().is_empty(), "{reply:?}");
        }
        message["id"] = json!("evt_1");
        assert_refused(message.to_string(), json!("evt_1"), -32600).await;
    }

    #[tokio::test]
    async fn another_protocol_version_is_unsupported_naming_draft() {
        for version in ["0.1", "1900-01-01"] {
            let message = intercept(version, "tool.before").to_string();
            for error in assert_refused(message, json!("evt_1"), -32001).await {
                assert_eq!(error["data"], json!({"supported": ["draft"]}), "{error}");
            }
        }
    }

    #[tokio::test]
    async fn an_event_other_than_tool_before_is_unsupported() {
        let message = intercept("draft", "session.start");
        assert_refused(message.to_string(), json!("evt_1"), -32002).await;
    }

    #[tokio::test]
    async fn a_request_without_an_event_has_invalid_params() {
        let mut message = intercept("draft", "tool.before");
        message["params"]["event"] = json!("tool.before");
        assert_refused(message.to_string(), json!("evt_1"), -32602).await;
    }

    /// An upstream fixture of an HTTP message (`tests/upstream/fixtures/draft/http/`).
    macro_rules! http_fixture {
        ($name:literal) => {
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../tests/upstream/fixtures/draft/http/",
                $name
            ))
        };
    }

    #[tokio::test]
    async fn a_request_whose_id_is_not_its_events_has_invalid_params() {
        let fixture = http_fixture!("intercept-request-id-mismatch.invalid.json");
        assert_refused(fixture, json!("evt_http_outer"), -32602).await;
        let mut no_event_id = intercept("draft", "tool.before");
        no_event_id["params"]["event"]
            .as_object_mut()
            .expect("an object")
            .remove("id");
        assert_refused(no_event_id.to_string(), json!("evt_1"), -32602).await;
    }

    #[tokio::test]
    async fn a_request_without_an_effects_array_has_invalid_params() {
        let fixture = http_fixture!("intercept-request-effects-missing.invalid.json");
        assert_refused(fixture, json!("evt_missing_effects"), -32602).await;
        for effects in [json!("deny"), json!({"deny": true}), json!([1])] {
            let mut message = intercept("draft", "tool.before");
            message["params"]["capabilities"]["effects"] = effects;
            assert_refused(message.to_string(), json!("evt_1"), -32602).await;
        }
        // Malformed whatever the event: not an event this backend does not support.
        let mut other_event = intercept("draft", "session.start");
        other_event["params"]["capabilities"] = json!({});
        assert_refused(other_event.to_string(), json!("evt_1"), -32602).await;
    }

    /// A `tool.before` that does not advertise `deny` breaks AHP-CAP-002: refused, never
    /// answered with the `[]` that would let a recursive deletion through.
    #[tokio::test]
    async fn a_tool_before_that_does_not_advertise_deny_has_invalid_params() {
        for effects in [json!([]), json!(["allow", "ask"])] {
            let mut message = intercept("draft", "tool.before");
            message["params"]["event"]["tool"]["input"]["command"] = json!("rm -rf /");
            message["params"]["capabilities"]["effects"] = effects;
            assert_refused(message.to_string(), json!("evt_1"), -32602).await;
        }
    }

    #[tokio::test]
    async fn params_that_are_not_an_object_are_invalid() {
        let request = intercept("draft", "tool.before");
        let mut no_params = request.clone();
        no_params
            .as_object_mut()
            .expect("an object")
            .remove("params");
        let mut array = request.clone();
        array["params"] = json!([request["params"]]);
        for message in [no_params, array] {
            assert_refused(message.to_string(), json!("evt_1"), -32602).await;
        }
    }

    /// A version that is missing, or no string, is no version this backend does not
    /// support: the request is malformed.
    #[tokio::test]
    async fn a_request_without_a_version_string_has_invalid_params() {
        let mut no_version = intercept("draft", "tool.before");
        no_version["params"]
            .as_object_mut()
            .expect("an object")
            .remove("protocolVersion");
        let mut number = intercept("draft", "tool.before");
        number["params"]["protocolVersion"] = json!(1);
        for message in [no_version, number] {
            assert_refused(message.to_string(), json!("evt_1"), -32602).await;
        }
    }

    /// An event without a type is malformed, not of a type this backend does not support.
    #[tokio::test]
    async fn an_event_without_a_type_has_invalid_params() {
        let mut message = intercept("draft", "tool.before");
        message["params"]["event"]
            .as_object_mut()
            .expect("an object")
            .remove("type");
        assert_refused(message.to_string(), json!("evt_1"), -32602).await;
    }

    /// Connections that ended are let go of as the next one comes, not kept until the
    /// server is aborted.
    #[tokio::test]
    async fn a_connection_that_ended_leaves_the_set() {
        let mut connections = tokio::task::JoinSet::new();
        admit(&mut connections, async {});
        admit(&mut connections, async {});
        // On this single-threaded runtime both run to their end before this resumes.
        tokio::task::yield_now().await;
        admit(&mut connections, std::future::pending());
        assert_eq!(connections.len(), 1);
    }

    /// The scenarios' own answers, unchanged: a valid request reaches them.
    #[tokio::test]
    async fn a_valid_request_reaches_the_scenario() {
        let mut deny = intercept("draft", "tool.before");
        deny["params"]["event"]["tool"]["input"]["command"] = json!("rm -rf /");
        let reply = rpc("policy", deny.to_string().as_bytes()).await;
        assert_eq!(reply["id"], "evt_1", "{reply}");
        assert_eq!(reply["result"]["effects"][0]["type"], "deny", "{reply}");

        let allow = intercept("draft", "tool.before").to_string();
        let reply = rpc("policy", allow.as_bytes()).await;
        assert_eq!(
            reply["result"],
            json!({"protocolVersion": "draft", "effects": []})
        );

        let reply = send(post("garbled"), allow).await;
        assert_eq!(reply.body(), &br#"{"jsonrpc":"2.0","id":"#[..]);
    }
}
