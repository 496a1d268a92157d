//! A loopback OAuth 2.0 authorization server over HTTPS, for the credential tests.
//!
//! It serves RFC 8414 metadata (and OpenID Connect discovery), and a client credentials
//! token endpoint that checks the client's Basic credentials and issues unique,
//! short-lived tokens (or one token again and again). Every request is recorded. What it does can be changed while it
//! runs: be slow, fail, answer garbage, or claim another issuer.
//!
//! It is also a protected resource for the discovery tests: an AHP endpoint at
//! [`OAuthServer::resource_url`] (and at the root, `/`, for a backend registered as the
//! bare origin) that answers a request bearing a token it issued and
//! challenges any other with a 401 and a configurable `WWW-Authenticate`, and protected
//! resource metadata (RFC 9728) at whatever paths a test gives it.

use crate::pki::Pki;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The client this server knows.
pub const CLIENT_ID: &str = "ahp-harness";

/// How the token endpoint answers.
#[derive(Clone, Debug)]
pub enum TokenMode {
    /// Issues a fresh token (when the client authenticated correctly).
    Issue,
    /// Issues the first token it issued again, still valid, at every request (a fresh one
    /// if it has issued none), as some issuers do until a token nears its expiry.
    Same,
    /// Waits, then behaves as the inner mode.
    Slow(Duration, Box<TokenMode>),
    /// This status with an OAuth error body.
    Status(u16),
    /// 200 with a body that is not JSON.
    Malformed,
}

/// How discovery answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataMode {
    /// RFC 8414 metadata at `/.well-known/oauth-authorization-server`.
    Normal,
    /// Only OpenID Connect discovery is served; the RFC 8414 location is 404.
    OpenIdOnly,
    /// Metadata naming a different issuer.
    WrongIssuer,
    /// Metadata offering `client_secret_post` alone: the client's credentials go in the
    /// form, and the token endpoint takes them only there.
    PostOnly,
}

/// One token request, as received.
#[derive(Clone, Debug)]
pub struct TokenRequest {
    /// The decoded form fields.
    pub form: HashMap<String, String>,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// When it arrived.
    pub at: Instant,
}

struct State {
    issuer: String,
    /// The `token_endpoint` the metadata names.
    token_endpoint: String,
    client_secret: String,
    token_mode: TokenMode,
    metadata_mode: MetadataMode,
    expires_in: u64,
    token_requests: Vec<TokenRequest>,
    metadata_requests: Vec<String>,
    issued: Vec<String>,
    resource: Resource,
}

/// The protected resource's side.
#[derive(Default)]
struct Resource {
    /// The `WWW-Authenticate` of a 401 (`None`: no such header).
    challenge: Option<String>,
    /// Protected resource metadata by path.
    metadata: HashMap<String, Value>,
    /// How long a metadata request waits before its answer.
    metadata_delay: Duration,
    /// The first this many issued tokens are refused.
    revoked: usize,
    /// Every token is refused (an audience the resource does not take).
    refuses_every_token: bool,
    requests: Vec<ResourceRequest>,
}

/// One request to the protected resource or its metadata, as received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceRequest {
    pub path: String,
    pub authorization: Option<String>,
    pub body: Vec<u8>,
}

/// A running authorization server (on `127.0.0.1` unless a test asks otherwise);
/// dropping it stops it.
pub struct OAuthServer {
    issuer: String,
    state: Arc<Mutex<State>>,
    accept: JoinHandle<()>,
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl OAuthServer {
    /// Starts a server presenting a certificate from `pki`, issuing tokens that live
    /// `expires_in` seconds to [`CLIENT_ID`] with `client_secret`.
    pub async fn start(pki: &Pki, client_secret: &str, expires_in: u64) -> OAuthServer {
        let loopback = IpAddr::from([127, 0, 0, 1]);
        OAuthServer::start_split(pki, client_secret, expires_in, loopback, loopback).await
    }

    /// As [`OAuthServer::start`], listening on every address of this machine, its issuer
    /// at `issuer` and the token endpoint its metadata names at `token_endpoint` (the
    /// same server: only the address differs). `pki`'s certificate must name both.
    pub async fn start_split(
        pki: &Pki,
        client_secret: &str,
        expires_in: u64,
        issuer: IpAddr,
        token_endpoint: IpAddr,
    ) -> OAuthServer {
        let bound = match (
            issuer == token_endpoint,
            issuer.is_ipv4() && token_endpoint.is_ipv4(),
        ) {
            (true, _) => SocketAddr::from((issuer, 0)),
            (false, true) => SocketAddr::from(([0, 0, 0, 0], 0)),
            (false, false) => SocketAddr::from(([0u16; 8], 0)),
        };
        let listener = TcpListener::bind(bound).await.expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let origin = |ip: IpAddr| SocketAddr::from((ip, port));
        let issuer = format!("https://{}", origin(issuer));
        let state = Arc::new(Mutex::new(State {
            issuer: issuer.clone(),
            token_endpoint: format!("https://{}/token", origin(token_endpoint)),
            client_secret: client_secret.to_string(),
            token_mode: TokenMode::Issue,
            metadata_mode: MetadataMode::Normal,
            expires_in,
            token_requests: Vec::new(),
            metadata_requests: Vec::new(),
            issued: Vec::new(),
            resource: Resource::default(),
        }));
        let acceptor = pki.acceptor();
        let shared = state.clone();
        let accept = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let state = shared.clone();
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |r| serve(state.clone(), r));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        OAuthServer {
            issuer,
            state,
            accept,
        }
    }

    /// The issuer identifier, e.g. `https://127.0.0.1:41234`.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Changes how the token endpoint answers from now on.
    pub fn set_token_mode(&self, mode: TokenMode) {
        self.state.lock().unwrap().token_mode = mode;
    }

    /// Changes how discovery answers from now on.
    pub fn set_metadata_mode(&self, mode: MetadataMode) {
        self.state.lock().unwrap().metadata_mode = mode;
    }

    /// Every token request so far.
    pub fn token_requests(&self) -> Vec<TokenRequest> {
        self.state.lock().unwrap().token_requests.clone()
    }

    /// The path of every discovery request so far.
    pub fn metadata_requests(&self) -> Vec<String> {
        self.state.lock().unwrap().metadata_requests.clone()
    }

    /// Every token issued so far, in order.
    pub fn issued(&self) -> Vec<String> {
        self.state.lock().unwrap().issued.clone()
    }

    /// The protected resource's AHP endpoint: `{issuer}/hooks`.
    pub fn resource_url(&self) -> String {
        format!("{}/hooks", self.issuer)
    }

    /// The `WWW-Authenticate` value the resource's 401 carries from now on.
    pub fn set_challenge(&self, challenge: Option<&str>) {
        self.state.lock().unwrap().resource.challenge = challenge.map(str::to_string);
    }

    /// Serves `document` as protected resource metadata at `path` (200, JSON).
    pub fn serve_resource_metadata(&self, path: &str, document: Value) {
        let mut state = self.state.lock().unwrap();
        state.resource.metadata.insert(path.to_string(), document);
    }

    /// Stops serving protected resource metadata at `path` (404 from now on).
    pub fn withdraw_resource_metadata(&self, path: &str) {
        self.state.lock().unwrap().resource.metadata.remove(path);
    }

    /// Makes every metadata request wait `delay` before its answer.
    pub fn set_resource_metadata_delay(&self, delay: Duration) {
        self.state.lock().unwrap().resource.metadata_delay = delay;
    }

    /// Makes the resource refuse every token issued so far (a later one is accepted).
    pub fn revoke_issued(&self) {
        let mut state = self.state.lock().unwrap();
        state.resource.revoked = state.issued.len();
    }

    /// Makes the resource refuse every token, those issued later too.
    pub fn refuse_every_token(&self) {
        self.state.lock().unwrap().resource.refuses_every_token = true;
    }

    /// Every request to the resource and to its metadata paths so far.
    pub fn resource_requests(&self) -> Vec<ResourceRequest> {
        self.state.lock().unwrap().resource.requests.clone()
    }

    /// Waits until `n` tokens have been issued, or `within` passes.
    pub async fn wait_for_issued(&self, n: usize, within: Duration) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if self.issued().len() >= n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }
}

async fn serve(
    state: Arc<Mutex<State>>,
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_string();
    let authorization = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    Ok(match path.as_str() {
        "/.well-known/oauth-authorization-server" | "/.well-known/openid-configuration" => {
            metadata(&state, &path)
        }
        "/token" => {
            let form = form_urlencoded::parse(&body).into_owned().collect();
            let record = TokenRequest {
                form,
                authorization,
                at: Instant::now(),
            };
            let mode = {
                let mut state = state.lock().unwrap();
                state.token_requests.push(record.clone());
                state.token_mode.clone()
            };
            token(&state, &record, mode).await
        }
        _ => {
            let record = ResourceRequest {
                path: path.clone(),
                authorization,
                body: body.to_vec(),
            };
            match path.as_str() {
                "/hooks" | "/" => protected(&state, record),
                _ => resource_metadata(&state, record).await,
            }
        }
    })
}

/// Protected resource metadata at the request's path (404 if none is served there),
/// after the configured delay.
async fn resource_metadata(
    state: &Mutex<State>,
    request: ResourceRequest,
) -> Response<Full<Bytes>> {
    let (document, delay) = {
        let mut state = state.lock().unwrap();
        let document = state.resource.metadata.get(&request.path).cloned();
        state.resource.requests.push(request);
        (document, state.resource.metadata_delay)
    };
    tokio::time::sleep(delay).await;
    match document {
        Some(document) => respond(200, "application/json", document.to_string()),
        None => respond(404, "text/plain", "not found".into()),
    }
}

/// The AHP endpoint: a request bearing an issued token is answered (an intercept with no
/// effect, a notification with 202), any other is challenged.
fn protected(state: &Mutex<State>, request: ResourceRequest) -> Response<Full<Bytes>> {
    let mut state = state.lock().unwrap();
    let bearer = request
        .authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "));
    let revoked = state.resource.revoked;
    let authorized = !state.resource.refuses_every_token
        && bearer.is_some_and(|token| state.issued[revoked..].iter().any(|t| t == token));
    let id = serde_json::from_slice::<Value>(&request.body)
        .ok()
        .and_then(|json| json.get("id").cloned());
    state.resource.requests.push(request);
    if !authorized {
        let mut response = Response::builder().status(401);
        if let Some(challenge) = &state.resource.challenge {
            response = response.header("www-authenticate", challenge.as_str());
        }
        return response
            .body(Full::new(Bytes::from_static(b"unauthorized")))
            .expect("valid response");
    }
    match id {
        Some(id) => {
            let reply = json!({"jsonrpc": "2.0", "id": id,
                "result": {"protocolVersion": "draft", "effects": []}});
            respond(200, "application/json", reply.to_string())
        }
        None => Response::builder()
            .status(202)
            .body(Full::new(Bytes::new()))
            .expect("valid response"),
    }
}

fn metadata(state: &Mutex<State>, path: &str) -> Response<Full<Bytes>> {
    let mut state = state.lock().unwrap();
    state.metadata_requests.push(path.to_string());
    if state.metadata_mode == MetadataMode::OpenIdOnly
        && path == "/.well-known/oauth-authorization-server"
    {
        return respond(404, "text/plain", "not found".into());
    }
    let issuer = match state.metadata_mode {
        MetadataMode::WrongIssuer => format!("{}/other", state.issuer),
        _ => state.issuer.clone(),
    };
    let method = match state.metadata_mode {
        MetadataMode::PostOnly => "client_secret_post",
        _ => "client_secret_basic",
    };
    let document = json!({
        "issuer": issuer,
        "token_endpoint": state.token_endpoint,
        "grant_types_supported": ["client_credentials"],
        "token_endpoint_auth_methods_supported": [method],
    });
    respond(200, "application/json", document.to_string())
}

async fn token(
    state: &Mutex<State>,
    request: &TokenRequest,
    mut mode: TokenMode,
) -> Response<Full<Bytes>> {
    while let TokenMode::Slow(pause, then) = mode {
        tokio::time::sleep(pause).await;
        mode = *then;
    }
    let same = matches!(mode, TokenMode::Same);
    match mode {
        TokenMode::Issue | TokenMode::Same => {}
        TokenMode::Status(status) => {
            return respond(
                status,
                "application/json",
                oauth_error("temporarily_unavailable"),
            )
        }
        TokenMode::Malformed => {
            return respond(200, "application/json", "{\"access_token\":".into())
        }
        TokenMode::Slow(..) => unreachable!("unwrapped above"),
    }
    let mut state = state.lock().unwrap();
    let authenticated = match state.metadata_mode {
        MetadataMode::PostOnly => {
            let field = |name: &str| request.form.get(name).map(String::as_str);
            request.authorization.is_none()
                && field("client_id") == Some(CLIENT_ID)
                && field("client_secret") == Some(state.client_secret.as_str())
        }
        _ => {
            request.authorization.as_deref()
                == Some(basic(CLIENT_ID, &state.client_secret).as_str())
        }
    };
    if !authenticated {
        return respond(401, "application/json", oauth_error("invalid_client"));
    }
    if request.form.get("grant_type").map(String::as_str) != Some("client_credentials") {
        return respond(
            400,
            "application/json",
            oauth_error("unsupported_grant_type"),
        );
    }
    let token = match state.issued.first() {
        Some(first) if same => first.clone(),
        _ => format!("tok-{}-{:08x}", state.issued.len() + 1, rand_u32()),
    };
    state.issued.push(token.clone());
    let mut body = json!({
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": state.expires_in,
    });
    if let Some(scope) = request.form.get("scope") {
        body["scope"] = Value::String(scope.clone());
    }
    respond(200, "application/json", body.to_string())
}

/// The `Authorization` value for HTTP Basic client authentication (RFC 6749 §2.3.1).
pub fn basic(client_id: &str, secret: &str) -> String {
    use base64::Engine as _;
    let encode = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", encode(client_id), encode(secret));
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

fn oauth_error(code: &str) -> String {
    json!({"error": code}).to_string()
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(Instant::now().elapsed().as_nanos());
    hasher.finish() as u32
}

fn respond(status: u16, content_type: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("valid response")
}
