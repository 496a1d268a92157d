//! OAuth 2.0 client credentials: discovery, token requests and a shared token cache.
//!
//! One [`OAuth`] serves every backend of an interceptor. Tokens are cached per (issuer,
//! resource, client, scopes) and reused until shortly before they expire, by the wall
//! clock as well as the monotonic one ([`Moment`]); past three quarters of their lifetime
//! a call still gets the cached token and starts a refresh in the background. Concurrent
//! callers share one acquisition (a [`Flight`]).
//!
//! Everything is fetched over verified TLS: the issuer's metadata (RFC 8414, then OpenID
//! Connect discovery, in the MCP 2025-11-25 order), whose `issuer` must equal the
//! configured one exactly, and the token endpoint it names, which must be `https` and must
//! support `client_credentials` explicitly. The client secret goes only to that endpoint.

use super::credentials::{from_reference, usable, AuthFailure, Kind};
use super::flight::Flight;
use super::http::{authorization, HttpBackend, HttpOptions, Outgoing};
use super::zone::Zone;
use crate::bindings::interceptor::{OauthFlow, OauthPlan};
use crate::types::Secret;
use base64::Engine as _;
use hyper::Method;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};
use tokio::time::{timeout_at, Instant};

/// The token endpoint's error codes (RFC 6749 §5.2, RFC 8707 §2): the only text of an
/// error answer the log is given.
const REGISTERED_ERRORS: [&str; 7] = [
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
    "invalid_target",
];

/// An error answer's `error` as the log is given it: a registered code, else `other`
/// (a server may echo what it was sent, the client secret included), or `none`.
fn error_code(answer: &Value) -> &str {
    match answer["error"].as_str() {
        Some(code) if REGISTERED_ERRORS.contains(&code) => code,
        Some(_) => "other",
        None => "none",
    }
}

/// How long discovered metadata is trusted before it is fetched again.
pub(super) const METADATA_TTL: Duration = Duration::from_secs(3600);
/// The lifetime assumed for a token whose response has no `expires_in`.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// The longest a token is kept, whatever its `expires_in` says.
const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// A token is treated as expired this much early (at most a tenth of its lifetime), so it
/// does not run out on its way to the backend.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);
/// After two acquisitions in a row failed, the next waits this long (doubling with each
/// further failure, up to [`LONGEST_PAUSE`]); calls meanwhile fail at once with the last
/// failure. Without it, a client secret rotated away had every hook call send it to the
/// token endpoint again (and fetch the metadata again): an identity provider's rate limit
/// or lockout at the pace of the agent's tool calls. The first failure is retried at the
/// next call: a blip costs one call, not a pause.
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// The connection pools kept at most: past it, those no call holds are let go. An
/// issuer whose metadata names another token URL at every read (a nonce in its query),
/// read again after each failure, would otherwise leave a pool behind each time.
const MAX_ENDPOINTS: usize = 32;

/// The OAuth client of one interceptor.
pub struct OAuth {
    http: HttpOptions,
    /// One connection pool per metadata or token URL and the innermost zone it may reach.
    endpoints: Mutex<HashMap<(String, Zone), Arc<HttpBackend>>>,
    metadata: Mutex<HashMap<String, Metadata>>,
    tokens: Mutex<HashMap<TokenKey, Slot>>,
    /// Set at shutdown: no acquisition starts after it.
    closed: AtomicBool,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth").finish_non_exhaustive()
    }
}

/// What a cached token is bound to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TokenKey {
    issuer: String,
    resource: String,
    client_id: String,
    /// Which secret gets the token: two bindings naming different ones share none (one
    /// whose secret does not resolve must fail, not borrow the other's token).
    client_secret_ref: Option<String>,
    /// Sorted and deduplicated.
    scopes: Vec<String>,
}

#[derive(Default)]
struct Slot {
    token: Option<Token>,
    /// Whether a token was ever issued for this key: a later failure is a refresh failure.
    issued_before: bool,
    flight: Option<Flight<Token>>,
    /// Acquisitions that failed in a row (a client secret that did not resolve, which
    /// asks nothing of the issuer, aside).
    failures: u32,
    /// Until when no acquisition starts, and the failure calls get meanwhile.
    paused: Option<(Instant, AuthFailure)>,
}

#[derive(Clone)]
struct Token {
    secret: Secret,
    refresh_at: Moment,
    expires_at: Moment,
}

/// A point in time on two clocks, which a cached token's refresh and expiry are kept by.
/// tokio's [`Instant`] is monotonic, and the monotonic clock stops while the machine
/// sleeps (CLOCK_MONOTONIC on Linux): after a laptop slept two hours, a token whose `exp`
/// or `expires_in` ran out meanwhile still looked fresh by it, and was sent (conformance
/// H13: an expired token is refused, no credential sent). The wall clock runs on through
/// sleep but may be set back; so a moment has come as soon as either clock says so.
#[derive(Clone, Copy)]
struct Moment {
    monotonic: Instant,
    wall: SystemTime,
}

impl Moment {
    fn now() -> Moment {
        Moment {
            monotonic: Instant::now(),
            wall: SystemTime::now(),
        }
    }

    /// Whether this moment has come at `now`, by either clock.
    fn reached(self, now: Moment) -> bool {
        now.monotonic >= self.monotonic || now.wall >= self.wall
    }

    /// The time left from `now` until this moment, by the clock that has less left.
    fn left(self, now: Moment) -> Duration {
        let wall = self.wall.duration_since(now.wall).unwrap_or_default();
        self.monotonic
            .saturating_duration_since(now.monotonic)
            .min(wall)
    }
}

impl std::ops::Add<Duration> for Moment {
    type Output = Moment;

    fn add(self, later: Duration) -> Moment {
        Moment {
            monotonic: self.monotonic + later,
            wall: self.wall + later,
        }
    }
}

#[derive(Clone)]
struct Metadata {
    token_endpoint: String,
    client_auth: ClientAuth,
    fetched_at: Instant,
    /// Where the issuer lies (the zone of the address its metadata came from): the
    /// token endpoint it names may lie no further inside ([`Zone`]).
    issuer_zone: Zone,
}

/// How the client authenticates at the token endpoint (RFC 6749 §2.3.1).
#[derive(Clone, Copy)]
enum ClientAuth {
    Basic,
    Post,
}

/// Why one acquisition failed; logged (never with a secret), then classified.
enum Problem {
    SecretUnresolved,
    Failed(String),
}

impl OAuth {
    pub fn new(http: HttpOptions) -> OAuth {
        OAuth {
            http,
            endpoints: Mutex::default(),
            metadata: Mutex::default(),
            tokens: Mutex::default(),
            closed: AtomicBool::new(false),
        }
    }

    /// A bearer token for `plan`, by `deadline`: the cached one, or this caller's share
    /// of an acquisition.
    pub async fn token(
        self: &Arc<Self>,
        plan: &OauthPlan,
        deadline: Instant,
    ) -> Result<Secret, AuthFailure> {
        if plan.flow != OauthFlow::ClientCredentials {
            // Interactive flows need a user agent, which a hook call does not have.
            return Err(AuthFailure::Unsupported);
        }
        let key = TokenKey::of(plan);
        let outcome = {
            let mut tokens = lock(&self.tokens);
            // Under the lock `close` takes after setting `closed`: either this sees it, or
            // the flight started below is one `close` aborts. Checked before the lock, a
            // shutdown in between would leave a flight sending the client secret after it.
            if self.closed.load(Ordering::Acquire) {
                return Err(AuthFailure::AcquisitionFailed);
            }
            let slot = tokens.entry(key.clone()).or_default();
            let now = Moment::now();
            // One expired by either clock (asleep meanwhile) is acquired anew.
            if let Some(token) = slot.token.clone().filter(|t| !t.expires_at.reached(now)) {
                let idle = slot.flight.as_ref().is_none_or(Flight::is_finished);
                if token.refresh_at.reached(now) && idle {
                    slot.flight = Some(self.start_flight(key, plan, true));
                }
                return Ok(token.secret);
            }
            // A flight whose task ended without clearing itself (it cannot, short of a
            // bug) must not block every later caller.
            if slot.flight.as_ref().is_some_and(Flight::is_finished) {
                slot.flight = None;
            }
            if let Some((until, failure)) = slot.paused {
                if now.monotonic < until && slot.flight.is_none() {
                    return Err(failure);
                }
            }
            let renewing = slot.issued_before;
            slot.flight
                .get_or_insert_with(|| self.start_flight(key, plan, renewing))
                .outcome()
        };
        outcome.wait(deadline).await.map(|token| token.secret)
    }

    /// The backend answered 401 to `token`: forget it (unless a newer one replaced it), so
    /// the next call acquires a fresh one. Whether it was the cached token, and so dropped:
    /// a 401 to one replaced since is stale (digest §12).
    pub fn reject(&self, plan: &OauthPlan, token: &Secret) -> bool {
        let mut tokens = lock(&self.tokens);
        let Some(slot) = tokens.get_mut(&TokenKey::of(plan)) else {
            return false;
        };
        let cached = slot.token.as_ref().is_some_and(|t| &t.secret == token);
        if cached {
            slot.token = None;
        }
        cached
    }

    /// Aborts every acquisition in flight, starts none after (a discovery finishing
    /// late must not send the client secret), and closes the idle connections to
    /// metadata and token endpoints (shutdown); their waiters fail. Flights go first, and
    /// no endpoint opens after (`endpoint` reads `closed` under the same lock): a flight
    /// between the two could otherwise open a pool this never closes.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for slot in lock(&self.tokens).values_mut() {
            if let Some(flight) = slot.flight.take() {
                flight.abort();
            }
        }
        for endpoint in lock(&self.endpoints).values() {
            endpoint.close_idle();
        }
    }

    /// Starts the one shared acquisition for `key`. It stores its token in the cache and
    /// clears itself before publishing the outcome.
    fn start_flight(
        self: &Arc<Self>,
        key: TokenKey,
        plan: &OauthPlan,
        renewing: bool,
    ) -> Flight<Token> {
        let oauth = Arc::clone(self);
        let plan = plan.clone();
        Flight::start(|bound| async move {
            let fetched = timeout_at(bound, oauth.acquire(&plan, bound))
                .await
                .unwrap_or_else(|_| Err(Problem::Failed("timed out".into())))
                .and_then(|token| match token.expires_at.reached(Moment::now()) {
                    false => Ok(token),
                    // Its `exp` or `expires_in` ran out on the way (a slow token
                    // endpoint, an `exp` under a second away): sent, it would be refused.
                    true => Err(Problem::Failed(
                        "the token expired before it could be used".into(),
                    )),
                });
            let result = fetched.map_err(|problem| {
                let why = match &problem {
                    Problem::SecretUnresolved => "clientSecretRef did not resolve",
                    Problem::Failed(why) => why.as_str(),
                };
                tracing::warn!(issuer = %plan.issuer, client = %plan.client_id, %why, "OAuth token acquisition failed");
                match (problem, renewing) {
                    (Problem::SecretUnresolved, _) => AuthFailure::Unresolved,
                    (_, true) => AuthFailure::RefreshFailed,
                    (_, false) => AuthFailure::AcquisitionFailed,
                }
            });
            let mut tokens = lock(&oauth.tokens);
            if let Some(slot) = tokens.get_mut(&key) {
                slot.flight = None;
                slot.note(&result);
                match (&result, &mut slot.token) {
                    (Ok(token), slot_token) => {
                        *slot_token = Some(token.clone());
                        slot.issued_before = true;
                    }
                    // A failed background refresh: keep the valid token, and try again
                    // halfway to its expiry rather than on the very next call.
                    (Err(_), Some(current)) => {
                        let now = Moment::now();
                        current.refresh_at = now + current.expires_at.left(now) / 2;
                    }
                    (Err(_), None) => {}
                }
            }
            drop(tokens);
            result
        })
    }

    /// The client secret, discovery (cached) and one token request, by `deadline`. The
    /// secret comes first: one that does not resolve asks nothing of the issuer. A failed
    /// token request forgets the metadata, so the next acquisition discovers again (the
    /// server may have moved its token endpoint).
    async fn acquire(&self, plan: &OauthPlan, deadline: Instant) -> Result<Token, Problem> {
        let secret = match &plan.client_secret_ref {
            Some(reference) => from_reference(reference, Kind::ClientSecret)
                .await
                .map_err(|_| Problem::SecretUnresolved)?,
            None => return Err(Problem::SecretUnresolved),
        };
        let metadata = self.metadata(&plan.issuer, deadline).await?;
        let token = self.request_token(plan, &metadata, &secret, deadline).await;
        if matches!(token, Err(Problem::Failed(_))) {
            lock(&self.metadata).remove(&plan.issuer);
        }
        token
    }

    /// One client credentials token request to the discovered endpoint.
    async fn request_token(
        &self,
        plan: &OauthPlan,
        metadata: &Metadata,
        secret: &Secret,
        deadline: Instant,
    ) -> Result<Token, Problem> {
        let scopes = TokenKey::of(plan).scopes;
        let (body, header) = token_request(plan, &scopes, secret, metadata.client_auth)?;
        let requested_at = Moment::now();
        let reply = self
            .endpoint(&metadata.token_endpoint, metadata.issuer_zone)?
            .send(
                Outgoing {
                    method: Method::POST,
                    content_type: Some("application/x-www-form-urlencoded"),
                    authorization: header,
                    body: body.as_bytes(),
                },
                deadline,
            )
            .await
            .map_err(|e| Problem::Failed(format!("token endpoint: {e:?}")))?
            .reply;
        let json: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
        if reply.status != Some(200) {
            return Err(Problem::Failed(format!(
                "token endpoint answered HTTP {} (error: {})",
                reply.status.unwrap_or(0),
                error_code(&json)
            )));
        }
        token_from(&json, &scopes, plan, requested_at).map_err(|why| Problem::Failed(why.into()))
    }

    /// The issuer's validated metadata, from the cache or discovered now.
    async fn metadata(&self, issuer: &str, deadline: Instant) -> Result<Metadata, Problem> {
        if let Some(known) = lock(&self.metadata).get(issuer) {
            if known.fetched_at.elapsed() < METADATA_TTL {
                return Ok(known.clone());
            }
        }
        let mut tried = Vec::new();
        let urls = discovery_urls(issuer).map_err(|why| Problem::Failed(why.into()))?;
        for url in urls {
            // The issuer's own host, which the registration named: anywhere.
            let received = self
                .endpoint(&url, Zone::Loopback)?
                .send(
                    Outgoing {
                        method: Method::GET,
                        content_type: None,
                        authorization: None,
                        body: b"",
                    },
                    deadline,
                )
                .await
                .map_err(|e| Problem::Failed(format!("discovery at {url}: {e:?}")))?;
            let (reply, peer) = (received.reply, received.peer);
            if reply.status != Some(200) {
                tried.push(format!("{url}: HTTP {}", reply.status.unwrap_or(0)));
                continue;
            }
            // Where the party that named the token endpoint lies: the address that
            // answered, not a second lookup of its name, which could say otherwise.
            let metadata = validate_metadata(&reply.body, issuer, Zone::of(peer))
                .map_err(|why| Problem::Failed(format!("metadata at {url}: {why}")))?;
            lock(&self.metadata).insert(issuer.to_string(), metadata.clone());
            return Ok(metadata);
        }
        Err(Problem::Failed(format!(
            "no authorization server metadata ({})",
            tried.join("; ")
        )))
    }

    /// The connection pool for one `https` URL whose connections may reach no further
    /// inside than `innermost`.
    fn endpoint(&self, url: &str, innermost: Zone) -> Result<Arc<HttpBackend>, Problem> {
        let mut endpoints = lock(&self.endpoints);
        // Under the lock `close` takes after setting `closed`: either this sees it, or
        // `close` sees the pool this opens.
        if self.closed.load(Ordering::Acquire) {
            return Err(Problem::Failed("the OAuth client is closed".into()));
        }
        let key = (url.to_string(), innermost);
        if let Some(endpoint) = endpoints.get(&key) {
            return Ok(Arc::clone(endpoint));
        }
        let mut options = self.http.clone();
        // Never plain http for anything that carries client credentials or tokens.
        options.allow_insecure_http = false;
        options.innermost = innermost;
        let endpoint = Arc::new(
            HttpBackend::new(url, options)
                .map_err(|why| Problem::Failed(format!("{url}: {why}")))?,
        );
        if endpoints.len() >= MAX_ENDPOINTS {
            endpoints.retain(|_, pool| Arc::strong_count(pool) > 1);
        }
        endpoints.insert(key, Arc::clone(&endpoint));
        Ok(endpoint)
    }
}

/// The form body and client authentication header of a client credentials request,
/// bound to the resource (RFC 8707) and asking for exactly the configured scopes.
fn token_request(
    plan: &OauthPlan,
    scopes: &[String],
    secret: &Secret,
    client_auth: ClientAuth,
) -> Result<(String, Option<hyper::header::HeaderValue>), Problem> {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "client_credentials");
    form.append_pair("resource", &plan.resource);
    if !scopes.is_empty() {
        form.append_pair("scope", &scopes.join(" "));
    }
    let header = match client_auth {
        ClientAuth::Basic => {
            let pair = format!(
                "{}:{}",
                url_encode(&plan.client_id),
                url_encode(secret.expose())
            );
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
            let value = authorization(&format!("Basic {encoded}"))
                .map_err(|_| Problem::Failed("client credentials are not a valid header".into()))?;
            Some(value)
        }
        ClientAuth::Post => {
            form.append_pair("client_id", &plan.client_id);
            form.append_pair("client_secret", secret.expose());
            None
        }
    };
    Ok((form.finish(), header))
}

impl Slot {
    /// Counts an acquisition's `result` towards the pause after failures in a row.
    fn note(&mut self, result: &Result<Token, AuthFailure>) {
        match result {
            Ok(_) | Err(AuthFailure::Unresolved) => {
                self.failures = 0;
                self.paused = None;
            }
            Err(failure) => {
                self.failures = self.failures.saturating_add(1);
                self.paused =
                    pause_after(self.failures).map(|pause| (Instant::now() + pause, *failure));
            }
        }
    }
}

/// How long no acquisition starts after `failures` in a row ([`FIRST_PAUSE`]).
pub(super) fn pause_after(failures: u32) -> Option<Duration> {
    let doublings = failures.checked_sub(2)?;
    Some(
        FIRST_PAUSE
            .saturating_mul(1 << doublings.min(5))
            .min(LONGEST_PAUSE),
    )
}

impl TokenKey {
    fn of(plan: &OauthPlan) -> TokenKey {
        let mut scopes = plan.scopes.clone();
        scopes.sort();
        scopes.dedup();
        TokenKey {
            issuer: plan.issuer.clone(),
            resource: plan.resource.clone(),
            client_id: plan.client_id.clone(),
            client_secret_ref: plan.client_secret_ref.clone(),
            scopes,
        }
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn url_encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// Where an issuer's metadata may be, in the order MCP 2025-11-25 tries them: RFC 8414
/// (path inserted after the host), then OpenID Connect (inserted, then appended).
fn discovery_urls(issuer: &str) -> Result<Vec<String>, &'static str> {
    let uri: hyper::Uri = issuer.parse().map_err(|_| "issuer is not a URL")?;
    if uri.scheme_str() != Some("https") {
        return Err("issuer is not https");
    }
    if uri.query().is_some() {
        return Err("issuer has a query");
    }
    let authority = uri.authority().ok_or("issuer has no host")?;
    let origin = format!("https://{authority}");
    let path = uri.path().trim_end_matches('/');
    Ok(if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    })
}

/// Checks discovered metadata against the configured issuer and this client's needs.
fn validate_metadata(
    body: &[u8],
    issuer: &str,
    issuer_zone: Zone,
) -> Result<Metadata, &'static str> {
    let json: Value = serde_json::from_slice(body).map_err(|_| "not JSON")?;
    if json["issuer"].as_str() != Some(issuer) {
        return Err("`issuer` differs from the configured issuer");
    }
    let token_endpoint = json["token_endpoint"]
        .as_str()
        .ok_or("`token_endpoint` is missing")?;
    if !token_endpoint.starts_with("https://") {
        return Err("`token_endpoint` is not https");
    }
    let grants = json["grant_types_supported"].as_array();
    if !grants.is_some_and(|g| g.iter().any(|g| g == "client_credentials")) {
        return Err("`grant_types_supported` does not list client_credentials");
    }
    let client_auth = match json["token_endpoint_auth_methods_supported"].as_array() {
        // RFC 8414's default.
        None => ClientAuth::Basic,
        Some(methods) if methods.iter().any(|m| m == "client_secret_basic") => ClientAuth::Basic,
        Some(methods) if methods.iter().any(|m| m == "client_secret_post") => ClientAuth::Post,
        Some(_) => return Err("no client_secret_basic or client_secret_post support"),
    };
    Ok(Metadata {
        token_endpoint: token_endpoint.to_string(),
        client_auth,
        fetched_at: Instant::now(),
        issuer_zone,
    })
}

/// A successful token response (RFC 6749 §5.1), checked, for `plan`'s resource.
fn token_from(
    json: &Value,
    requested: &[String],
    plan: &OauthPlan,
    requested_at: Moment,
) -> Result<Token, &'static str> {
    let secret = json["access_token"]
        .as_str()
        .and_then(usable)
        .ok_or("`access_token` is missing or not a header-safe string")?;
    let expires_in = readable_claims(secret.expose())
        .map(|claims| fits(&claims, plan, unix_now()))
        .transpose()?
        .flatten();
    if !json["token_type"]
        .as_str()
        .is_some_and(|t| t.eq_ignore_ascii_case("bearer"))
    {
        return Err("`token_type` is not Bearer");
    }
    let lifetime = match &json["expires_in"] {
        Value::Null => DEFAULT_LIFETIME,
        v => {
            // RFC 6749 §5.1 says a number of seconds; some issuers write it as a string
            // ("3599") or with a fraction (3600.0).
            let seconds = match v {
                Value::String(text) => text.trim().parse::<f64>().ok(),
                v => v.as_f64(),
            };
            let seconds = seconds
                .filter(|s| s.is_finite() && *s >= 1.0)
                .ok_or("`expires_in` is not a number of seconds from 1")?;
            Duration::from_secs_f64(seconds.floor().min(MAX_LIFETIME.as_secs_f64()))
        }
    };
    let lifetime = expires_in.map_or(lifetime, |left| lifetime.min(left));
    let granted = match &json["scope"] {
        Value::Null => None,
        Value::String(granted) => Some(granted),
        // An array or a number would pass the least-privilege check unread.
        _ => return Err("`scope` is not a string"),
    };
    if let Some(granted) = granted {
        // Least privilege: a token wider than what was asked for is not used.
        if !requested.is_empty()
            && granted
                .split(' ')
                .any(|s| !s.is_empty() && !requested.iter().any(|r| r == s))
        {
            return Err("granted `scope` exceeds the requested scopes");
        }
    }
    Ok(Token {
        secret,
        refresh_at: requested_at + lifetime * 3 / 4,
        expires_at: requested_at + (lifetime - EXPIRY_MARGIN.min(lifetime / 10)),
    })
}

/// The claims of a token that is a JWT (RFC 9068: three base64url parts, the middle a
/// JSON object); `None` for an opaque token, whose audience and expiry only its resource
/// server can know. Its signature is not checked: the token came from the trusted issuer
/// over TLS, and the host only asks whether that issuer meant it for this resource.
fn readable_claims(token: &str) -> Option<serde_json::Map<String, Value>> {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(claims)) => Some(claims),
        _ => None,
    }
}

/// Whether a readable token's claims let it go to `plan`'s resource at `now` (seconds
/// since the Unix epoch): its `aud` must name the resource (digest §12: the audience is
/// validated; conformance H13: a mismatched audience or an expired token is refused, and
/// no credential is sent; RFC 9068 §2.2 requires the claim: a JWT without one could be
/// replayed to any resource, such as another backend's, by the backend it was sent to),
/// and its `exp`, where it has one, be later. Its `iss` is not compared: the token came
/// from the issuer's own endpoint, and some issuers name themselves otherwise in their
/// tokens (Entra ID's v1 tokens). `Some` of the time left until `exp`.
fn fits(
    claims: &serde_json::Map<String, Value>,
    plan: &OauthPlan,
    now: f64,
) -> Result<Option<Duration>, &'static str> {
    let same = |claimed: &Value, expected: &str| {
        claimed
            .as_str()
            .is_some_and(|c| c.trim_end_matches('/') == expected.trim_end_matches('/'))
    };
    let named = match claims.get("aud") {
        None => false,
        Some(Value::Array(auds)) => auds.iter().any(|aud| same(aud, &plan.resource)),
        Some(aud) => same(aud, &plan.resource),
    };
    if !named {
        return Err("the token's `aud` does not name the resource it is for");
    }
    match claims.get("exp") {
        None => Ok(None),
        Some(exp) => match exp.as_f64() {
            // From `now` with its fraction: a whole second dropped would keep a token up
            // to a second past its `exp`.
            Some(exp) if exp > now => Ok(Some(
                Duration::try_from_secs_f64(exp - now).unwrap_or(Duration::MAX),
            )),
            Some(_) => Err("the token's `exp` has passed"),
            None => Err("the token's `exp` is not a number"),
        },
    }
}

/// Seconds since the Unix epoch, with their fraction.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::credentials::{CredentialPurpose, Refusals, Source};
    use crate::interrupt::Interrupt;
    use serde_json::json;

    /// Only a registered error code reaches the log: a server echoing the client secret
    /// in `error` is `other`.
    #[test]
    fn only_a_registered_error_code_is_logged() {
        assert_eq!(
            error_code(&json!({"error": "invalid_client"})),
            "invalid_client"
        );
        assert_eq!(
            error_code(&json!({"error": "invalid_target"})),
            "invalid_target"
        );
        assert_eq!(error_code(&json!({"error": "S3cretValue123"})), "other");
        assert_eq!(error_code(&json!({"error": 7})), "none");
        assert_eq!(error_code(&Value::Null), "none");
    }

    #[test]
    fn discovery_follows_the_mcp_order() {
        assert_eq!(
            discovery_urls("https://id.example.com").unwrap(),
            [
                "https://id.example.com/.well-known/oauth-authorization-server",
                "https://id.example.com/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            discovery_urls("https://id.example.com:8443/tenant/a/").unwrap(),
            [
                "https://id.example.com:8443/.well-known/oauth-authorization-server/tenant/a",
                "https://id.example.com:8443/.well-known/openid-configuration/tenant/a",
                "https://id.example.com:8443/tenant/a/.well-known/openid-configuration"
            ]
        );
        assert!(discovery_urls("http://id.example.com").is_err());
        assert!(discovery_urls("https://id.example.com/?x=1").is_err());
    }

    fn metadata(extra: Value) -> Vec<u8> {
        let mut m = json!({
            "issuer": "https://id.example.com",
            "token_endpoint": "https://id.example.com/token",
            "grant_types_supported": ["client_credentials"],
        });
        for (k, v) in extra.as_object().unwrap() {
            m[k] = v.clone();
        }
        serde_json::to_vec(&m).unwrap()
    }

    #[test]
    fn metadata_must_match_the_issuer_exactly_and_support_the_grant() {
        let ok = validate_metadata(&metadata(json!({})), "https://id.example.com", Zone::Global);
        assert!(matches!(
            ok,
            Ok(Metadata {
                client_auth: ClientAuth::Basic,
                ..
            })
        ));
        for (extra, why) in [
            (
                json!({"issuer": "https://id.example.com/"}),
                "`issuer` differs",
            ),
            (
                json!({"issuer": "https://ID.example.com"}),
                "`issuer` differs",
            ),
            (
                json!({"token_endpoint": "http://id.example.com/token"}),
                "not https",
            ),
            (json!({"token_endpoint": null}), "missing"),
            (
                json!({"grant_types_supported": ["authorization_code"]}),
                "client_credentials",
            ),
            (json!({"grant_types_supported": null}), "client_credentials"),
            (
                json!({"token_endpoint_auth_methods_supported": ["private_key_jwt"]}),
                "no client_secret",
            ),
        ] {
            let got = validate_metadata(
                &metadata(extra.clone()),
                "https://id.example.com",
                Zone::Global,
            );
            assert!(matches!(got, Err(e) if e.contains(why)), "{extra}");
        }
        let post = validate_metadata(
            &metadata(json!({"token_endpoint_auth_methods_supported": ["client_secret_post"]})),
            "https://id.example.com",
            Zone::Global,
        );
        assert!(matches!(
            post,
            Ok(Metadata {
                client_auth: ClientAuth::Post,
                ..
            })
        ));
        assert!(validate_metadata(b"<html>", "https://id.example.com", Zone::Global).is_err());
    }

    /// A client-credentials plan for `resource` at the issuer `https://id.example.com`.
    fn plan_for(resource: &str) -> OauthPlan {
        OauthPlan {
            issuer: "https://id.example.com".into(),
            resource: resource.into(),
            client_id: "c".into(),
            flow: OauthFlow::ClientCredentials,
            scopes: Vec::new(),
            client_secret_ref: None,
        }
    }

    #[test]
    fn token_responses_are_checked() {
        let now = Moment::now();
        let scopes = ["hooks".to_string()];
        let token = token_from(
            &json!({"access_token": "t1", "token_type": "bearer", "expires_in": 100}),
            &scopes,
            &plan_for("r"),
            now,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(token.secret.expose(), "t1");
        assert_eq!(token.refresh_at.left(now), Duration::from_secs(75));
        assert_eq!(token.expires_at.left(now), Duration::from_secs(90));
        let wall = token.expires_at.wall.duration_since(now.wall);
        assert_eq!(wall.ok(), Some(Duration::from_secs(90)), "by both clocks");
        let unbounded = token_from(
            &json!({"access_token": "t", "token_type": "Bearer"}),
            &[],
            &plan_for("r"),
            now,
        );
        assert!(unbounded.is_ok_and(|t| t.expires_at.left(now) == Duration::from_secs(270)));
        let forever = json!({"access_token": "t", "token_type": "Bearer", "expires_in": u64::MAX});
        let capped =
            token_from(&forever, &[], &plan_for("r"), now).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(capped.expires_at.left(now), MAX_LIFETIME - EXPIRY_MARGIN);
        for written in [json!("3600"), json!(3600.0), json!(3600.9)] {
            let issued =
                json!({"access_token": "t", "token_type": "Bearer", "expires_in": written});
            let token =
                token_from(&issued, &[], &plan_for("r"), now).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                token.expires_at.left(now),
                Duration::from_secs(3570),
                "{written}"
            );
        }
        for bad in [
            json!({"token_type": "Bearer"}),
            json!({"access_token": "has space", "token_type": "Bearer"}),
            json!({"access_token": "t", "token_type": "DPoP"}),
            json!({"access_token": "t", "token_type": "Bearer", "expires_in": 0}),
            json!({"access_token": "t", "token_type": "Bearer", "expires_in": 0.5}),
            json!({"access_token": "t", "token_type": "Bearer", "expires_in": -60}),
            json!({"access_token": "t", "token_type": "Bearer", "expires_in": "soon"}),
            json!({"access_token": "t", "token_type": "Bearer", "expires_in": true}),
            json!({"access_token": "t", "token_type": "Bearer", "scope": "hooks admin"}),
            json!({"access_token": "t", "token_type": "Bearer", "scope": ["hooks", "admin"]}),
            json!({"access_token": "t", "token_type": "Bearer", "scope": ["hooks"]}),
            json!({"access_token": "t", "token_type": "Bearer", "scope": 1}),
            json!({"access_token": "t", "token_type": "Bearer", "scope": {"admin": true}}),
        ] {
            assert!(
                token_from(&bad, &scopes, &plan_for("r"), now).is_err(),
                "{bad}"
            );
        }
    }

    /// The time a readable token has left is counted from now to the fraction of a
    /// second: 0.1 s before its `exp` it has 0.1 s, not the second a whole `now` gives.
    #[test]
    fn a_tokens_time_left_counts_the_fraction_of_a_second() {
        let resource = "https://policy.example.com/ahp";
        let claims = |exp: f64| match json!({"aud": resource, "exp": exp}) {
            Value::Object(claims) => claims,
            _ => unreachable!(),
        };
        let left = fits(&claims(1_000.0), &plan_for(resource), 999.9);
        let left = left.expect("fits").expect("an exp");
        assert!(left <= Duration::from_millis(101), "{left:?}");
        assert!(left >= Duration::from_millis(99), "{left:?}");
        assert!(fits(&claims(1_000.0), &plan_for(resource), 1_000.0).is_err());
        let far = fits(&claims(1e300), &plan_for(resource), 1_000.0);
        assert_eq!(far, Ok(Some(Duration::MAX)));
        // And the clock it is given has the fraction.
        let fractional = (0..3).any(|_| {
            std::thread::sleep(Duration::from_millis(1));
            unix_now().fract() != 0.0
        });
        assert!(fractional, "unix_now() keeps the fraction of a second");
    }

    /// A JWT access token goes only to the resource its `aud` names (a JWT without one
    /// could go anywhere), whatever its `iss`, and only before its `exp`,
    /// which also bounds how long it is kept (conformance H13); an opaque one is taken as
    /// it comes.
    #[test]
    fn a_readable_token_must_be_for_this_resource_and_unexpired() {
        let now = Moment::now();
        let part =
            |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let jwt =
            |claims: &Value| format!("{}.{}.sig", part(&json!({"alg": "RS256"})), part(claims));
        let issued = |claims: &Value| json!({"access_token": jwt(claims), "token_type": "Bearer", "expires_in": 3600});
        let resource = "https://policy.example.com/ahp";
        let whole_now = unix_now() as u64;
        let (later, earlier) = (whole_now + 3600, whole_now - 10);
        for fit in [
            json!({"aud": resource, "exp": later}),
            json!({"aud": ["https://x.example.com", format!("{resource}/")], "exp": later}),
            json!({"aud": resource, "iss": "https://sts.example.net/tenant/"}),
        ] {
            let token = token_from(&issued(&fit), &[], &plan_for(resource), now);
            assert!(token.is_ok(), "{fit}");
        }
        for unfit in [
            json!({"aud": "https://other.example.com", "exp": later}),
            json!({"aud": ["https://other.example.com"]}),
            json!({"aud": resource, "exp": earlier}),
            json!({"aud": resource, "exp": "later"}),
            json!({"sub": "client"}),
        ] {
            assert!(
                token_from(&issued(&unfit), &[], &plan_for(resource), now).is_err(),
                "{unfit}"
            );
        }
        let exp = whole_now + 100;
        let soon = json!({"aud": resource, "exp": exp});
        let kept = token_from(&issued(&soon), &[], &plan_for(resource), now)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            kept.expires_at.left(now) <= Duration::from_secs(100),
            "kept past its exp"
        );
        let exp = SystemTime::UNIX_EPOCH + Duration::from_secs(exp);
        assert!(
            kept.expires_at.wall <= exp,
            "kept past its exp by the wall clock"
        );
    }

    #[tokio::test]
    async fn a_closed_client_starts_no_acquisition() {
        let config = crate::Options::default().backend_config();
        let http = config.expect("the default options").http;
        let oauth = Arc::new(OAuth::new(http));
        oauth.close();
        let plan = OauthPlan {
            issuer: "https://127.0.0.1:9".into(),
            resource: "r".into(),
            client_id: "c".into(),
            flow: OauthFlow::ClientCredentials,
            scopes: Vec::new(),
            client_secret_ref: Some("env:PATH".into()),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let refused = oauth.token(&plan, deadline).await.err();
        assert_eq!(refused, Some(AuthFailure::AcquisitionFailed));
        assert!(lock(&oauth.tokens).is_empty(), "no flight was started");
    }

    /// Once closed, no connection pool opens, not even for a flight that began before:
    /// the client secret goes nowhere after shutdown.
    #[tokio::test]
    async fn a_closed_client_opens_no_endpoint() {
        let config = crate::Options::default().backend_config();
        let oauth = OAuth::new(config.expect("the default options").http);
        let url = "https://127.0.0.1:9/token";
        assert!(oauth.endpoint(url, Zone::Loopback).is_ok());
        oauth.close();
        let other = "https://127.0.0.1:9/other";
        for url in [url, other] {
            assert!(oauth.endpoint(url, Zone::Loopback).is_err(), "{url}");
        }
        assert_eq!(lock(&oauth.endpoints).len(), 1);
    }

    /// A new token URL at every metadata read leaves no more than [`MAX_ENDPOINTS`] pools
    /// behind; a pool a call holds is kept.
    #[tokio::test]
    async fn connection_pools_are_bounded() {
        let config = crate::Options::default().backend_config();
        let oauth = OAuth::new(config.expect("the default options").http);
        let held = oauth.endpoint("https://127.0.0.1:9/held", Zone::Loopback);
        let held = held.ok().expect("a pool");
        for n in 0..3 * MAX_ENDPOINTS {
            let url = format!("https://127.0.0.1:9/token?nonce={n}");
            assert!(oauth.endpoint(&url, Zone::Loopback).is_ok());
            assert!(lock(&oauth.endpoints).len() <= MAX_ENDPOINTS, "{n}");
        }
        let again = oauth.endpoint("https://127.0.0.1:9/held", Zone::Loopback);
        let again = again.ok().expect("a pool");
        assert!(Arc::ptr_eq(&held, &again), "the held pool was kept");
    }

    /// A 401 to a token the cache has replaced since (a call that took the old one
    /// before a refresh) leaves the newer token in place and counts toward no pause
    /// (digest §12: a stale 401 does not invalidate a newer token); a 401 to the cached
    /// one drops it. A stale 401 and the current token's then pause nothing: the next
    /// call acquires (here failing at once, its client secret unresolved).
    #[tokio::test]
    async fn a_stale_401_keeps_the_newer_token_and_pauses_nothing() {
        let config = crate::Options::default().backend_config();
        let oauth = Arc::new(OAuth::new(config.expect("the default options").http));
        let plan = plan_for("https://policy.example.com");
        let now = Moment::now();
        let cached = |secret: &str| Token {
            secret: Secret::new(secret),
            refresh_at: now + Duration::from_secs(60),
            expires_at: now + Duration::from_secs(90),
        };
        let slot = Slot {
            token: Some(cached("t2")),
            ..Slot::default()
        };
        lock(&oauth.tokens).insert(TokenKey::of(&plan), slot);
        let held = |oauth: &OAuth| {
            lock(&oauth.tokens)[&TokenKey::of(&plan)]
                .token
                .as_ref()
                .map(|t| t.secret.expose().to_string())
        };
        let source = Source::OAuth(plan.clone(), Arc::clone(&oauth), Arc::default());
        source.reject("b", &Secret::new("t1"));
        assert_eq!(held(&oauth).as_deref(), Some("t2"));
        source.reject("b", &Secret::new("t2"));
        assert_eq!(held(&oauth), None);
        let deadline = Instant::now() + Duration::from_secs(5);
        let next = source
            .acquire(
                "b",
                CredentialPurpose::Intercept,
                deadline,
                &Interrupt::new(),
            )
            .await;
        assert_eq!(next.err(), Some(AuthFailure::Unresolved), "not paused");
    }

    /// A refusal counts once per acquisition: the 401s of other calls that held the same
    /// token count nothing, but the same token string issued again after its refusal (an
    /// issuer that hands out one still-valid token at every request) counts again, and
    /// its refusal pauses the backend.
    #[test]
    fn a_token_issued_again_after_its_refusal_counts_again() {
        let config = crate::Options::default().backend_config();
        let oauth = Arc::new(OAuth::new(config.expect("the default options").http));
        let plan = plan_for("https://policy.example.com");
        let refusals = Arc::new(Refusals::default());
        let source = Source::OAuth(plan.clone(), Arc::clone(&oauth), Arc::clone(&refusals));
        let now = Moment::now();
        let issue = || {
            let token = Token {
                secret: Secret::new("t-same"),
                refresh_at: now + Duration::from_secs(60),
                expires_at: now + Duration::from_secs(90),
            };
            let slot = Slot {
                token: Some(token),
                ..Slot::default()
            };
            lock(&oauth.tokens).insert(TokenKey::of(&plan), slot);
        };
        issue();
        for _ in 0..4 {
            source.reject("b", &Secret::new("t-same"));
        }
        assert!(!refusals.paused(), "one acquisition refused, however often");
        issue();
        source.reject("b", &Secret::new("t-same"));
        assert!(refusals.paused(), "issued again and refused again");
    }

    /// A token cached before the machine slept: the monotonic clock stopped meanwhile, so
    /// by it the token's expiry (or refresh point) is still ahead, while by the wall clock
    /// it has passed. An expired one is not handed out: a new acquisition starts (here one
    /// whose client secret does not resolve, so it fails at once, asking nobody). One past
    /// its refresh point by the wall clock alone is handed out with a refresh behind it.
    #[tokio::test]
    async fn a_token_that_ran_out_while_the_machine_slept_is_not_handed_out() {
        let config = crate::Options::default().backend_config();
        let oauth = Arc::new(OAuth::new(config.expect("the default options").http));
        let plan = plan_for("https://policy.example.com");
        let (hour, now) = (Duration::from_secs(3600), Moment::now());
        // An hour ahead by the monotonic clock, which stopped; `wall` by the wall clock.
        let slept = |wall: SystemTime| Moment {
            monotonic: now.monotonic + hour,
            wall,
        };
        let seed = |refresh_at: Moment, expires_at: Moment| {
            let token = Token {
                secret: Secret::new("t-before-sleep"),
                refresh_at,
                expires_at,
            };
            let slot = Slot {
                token: Some(token),
                issued_before: true,
                ..Slot::default()
            };
            lock(&oauth.tokens).insert(TokenKey::of(&plan), slot);
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        seed(slept(now.wall - hour), slept(now.wall - hour / 2));
        let expired = oauth.token(&plan, deadline).await;
        assert_eq!(
            expired.map(|t| t.expose().to_string()),
            Err(AuthFailure::Unresolved),
            "a new acquisition, not the expired token"
        );
        seed(slept(now.wall - hour / 2), slept(now.wall + hour));
        let due = oauth.token(&plan, deadline).await;
        assert_eq!(
            due.map(|t| t.expose().to_string()),
            Ok("t-before-sleep".into())
        );
        let refreshing = lock(&oauth.tokens)[&TokenKey::of(&plan)].flight.is_some();
        assert!(refreshing, "a refresh behind the call");
    }

    #[test]
    fn pauses_double_from_the_second_failure_to_a_bound() {
        let pauses: Vec<_> = (0..9).map(pause_after).collect();
        let s = |n| Some(Duration::from_secs(n));
        assert_eq!(
            pauses,
            [None, None, s(1), s(2), s(4), s(8), s(16), s(30), s(30)]
        );
        assert_eq!(pause_after(u32::MAX), s(30));
    }

    #[test]
    fn the_cache_key_ignores_scope_order() {
        let plan = |scopes: &[&str]| OauthPlan {
            issuer: "https://id".into(),
            resource: "r".into(),
            client_id: "c".into(),
            flow: OauthFlow::ClientCredentials,
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            client_secret_ref: None,
        };
        assert_eq!(
            TokenKey::of(&plan(&["a", "b"])),
            TokenKey::of(&plan(&["b", "a", "a"]))
        );
        assert_ne!(
            TokenKey::of(&plan(&["a"])),
            TokenKey::of(&plan(&["a", "b"]))
        );
    }
}
