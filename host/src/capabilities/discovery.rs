//! Answering a backend's 401 when its registration names no credential (digest §12,
//! conformance H11–H13). The first request goes without one; a 401 carrying a `Bearer`
//! challenge (or none) has the host read the backend's protected resource metadata
//! (RFC 9728: the challenge's `resource_metadata`, else the path-specific then the root
//! well-known location), check that it describes this very backend, choose an
//! authorization server it lists that the local trust policy ([`OAuthClient`]) holds a
//! client registration at, and get a token requested for the resource (RFC 8707) through
//! the OAuth client; the component then resends the same bytes once.
//!
//! That discovery is one task of its own (a "flight"), which every call challenged
//! meanwhile waits for, each until its own deadline: a call that gives up (deadline,
//! interruption) does not stop it for the others. Its binding is kept once a token came
//! with it, so later calls send the token at once, and its metadata is read again behind
//! the calls an hour later or after a 401 to its token. A flight that fails pauses
//! discovery for a while, so broken or hanging metadata costs no lookup per call.
//!
//! The backend chooses only among issuers the harness already trusts: the client secret
//! goes to nobody the backend names. Metadata is fetched over verified `https` only, on
//! the backend's own host from no further inside the network than the backend ([`Zone`]),
//! elsewhere only from the internet.

use super::credentials::{AuthFailure, Refusals};
use super::http::{HttpBackend, HttpOptions, Outgoing, Shown};
// A discovery (metadata and first token) is a flight; a re-reading runs as long as one
// may (`FLIGHT_BOUND`).
use super::flight::{Flight, Outcome, FLIGHT_BOUND};
// A learned binding's metadata is trusted as long as an issuer's.
use super::oauth::{lock, OAuth, METADATA_TTL as LEARNED_TTL};
use super::www_authenticate;
use super::zone::Zone;
use crate::bindings::interceptor::{OauthFlow, OauthPlan};
use crate::types::Secret;
use ahp_vocab::type_name;
use hyper::Method;
use serde::Deserialize;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::AbortHandle;
use tokio::time::{timeout_at, Instant};

/// How long a failed discovery (or re-reading) waits before the next try.
const FAILED_PAUSE: Duration = Duration::from_secs(30);
/// Where RFC 9728 puts protected resource metadata.
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// A client registration the harness holds at an authorization server it trusts: the
/// local trust policy by which a backend without a credential in its registration may be
/// given a token after its 401 challenge. Nothing else is ever sent the client secret.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OAuthClient {
    /// The issuer identifier, exactly as the server's metadata and a resource's
    /// `authorization_servers` spell it (`https`).
    pub issuer: String,
    /// This harness's client id at that issuer.
    pub client_id: String,
    /// Where the client secret is: `file:` and an absolute path, or `env:NAME`; never the
    /// secret.
    pub client_secret_ref: String,
    /// Exactly the scopes asked for (a resource's `scopes_supported` is never taken as
    /// required); none asks for the server's default.
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl OAuthClient {
    /// A JSON array of clients (`[{"issuer", "clientId", "clientSecretRef", "scopes"}]`),
    /// checked; an error names the entry and the field, never a value given where another
    /// belongs (a secret pasted in place of its reference would be printed).
    pub fn list_from_json(text: &str) -> Result<Vec<OAuthClient>, String> {
        let document: Value =
            serde_json::from_str(text).map_err(|e| format!("is not JSON: {e}"))?;
        let Value::Array(entries) = document else {
            return Err(format!(
                "must be a JSON array, found {}",
                type_name(&document)
            ));
        };
        let clients = entries
            .into_iter()
            .enumerate()
            .map(|(i, entry)| {
                shape(&entry).map_err(|e| format!("[{i}]: {e}"))?;
                serde_json::from_value::<OAuthClient>(entry)
                    .map_err(|_| format!("[{i}]: is not a client entry"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        check_clients(&clients)?;
        Ok(clients)
    }

    fn check(&self) -> Result<(), String> {
        const ENV_NAME_RULE: &str =
            "`clientSecretRef`: an `env:` name must be letters, digits and `_`, not starting with a digit";
        let issuer: hyper::Uri = self
            .issuer
            .parse()
            .map_err(|_| "`issuer` is not a URL".to_string())?;
        if issuer.scheme_str() != Some("https") || issuer.host().is_none() {
            return Err("`issuer` must be an https URL".into());
        }
        if issuer.query().is_some() || self.issuer.contains('#') {
            return Err("`issuer` must have no query or fragment".into());
        }
        // As in a registration: it would be logged, and sent as the `Host` of metadata
        // requests. The value is not repeated.
        if crate::vocab::has_userinfo(&self.issuer) {
            return Err("`issuer` must not carry user info (user:password@)".into());
        }
        if self.client_id.is_empty() {
            return Err("`clientId` is empty".into());
        }
        match self.client_secret_ref.split_once(':') {
            // Read from wherever the process runs (a hook, from the harness's directory).
            Some(("file", path)) if std::path::Path::new(path).is_absolute() => {}
            Some(("file", _)) => {
                return Err("`clientSecretRef`: a `file:` path must be absolute".into())
            }
            Some(("env", name)) if crate::vocab::is_env_name(name) => {}
            // Not repeated: it may be the secret itself, pasted after `env:`.
            Some(("env", _)) => return Err(ENV_NAME_RULE.into()),
            _ => return Err("`clientSecretRef` must be `file:PATH` or `env:NAME`".into()),
        }
        // RFC 6749 §3.3: scope tokens are visible ASCII but `"` and `\`, no spaces.
        let scope_token = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
        };
        if let Some(bad) = self.scopes.iter().find(|s| !scope_token(s)) {
            return Err(format!("`scopes`: {bad:?} is not a scope token"));
        }
        Ok(())
    }
}

/// Whether `entry` has the members of an [`OAuthClient`], each of its type: the error
/// names the member and the type found, not the value, which serde's own would repeat.
fn shape(entry: &Value) -> Result<(), String> {
    let Value::Object(members) = entry else {
        return Err(format!("must be an object, found {}", type_name(entry)));
    };
    for (name, value) in members {
        let fits = match name.as_str() {
            "issuer" | "clientId" | "clientSecretRef" => value.is_string(),
            "scopes" => value
                .as_array()
                .is_some_and(|scopes| scopes.iter().all(Value::is_string)),
            _ => return Err(format!("unknown field `{name}`")),
        };
        if !fits {
            let wanted = if name == "scopes" {
                "an array of strings"
            } else {
                "a string"
            };
            return Err(format!(
                "`{name}` must be {wanted}, found {}",
                type_name(value)
            ));
        }
    }
    match ["issuer", "clientId", "clientSecretRef"]
        .into_iter()
        .find(|name| !members.contains_key(*name))
    {
        Some(missing) => Err(format!("`{missing}` is missing")),
        None => Ok(()),
    }
}

/// Every client checked, and at most one per issuer (which one would a resource get?).
pub(crate) fn check_clients(clients: &[OAuthClient]) -> Result<(), String> {
    for (i, client) in clients.iter().enumerate() {
        client.check().map_err(|e| format!("[{i}]: {e}"))?;
        if clients[..i].iter().any(|c| c.issuer == client.issuer) {
            return Err(format!("[{i}]: `issuer` {} is given twice", client.issuer));
        }
    }
    Ok(())
}

/// A credential source for one backend whose registration names none.
pub struct Discovery {
    /// The backend's URL: the resource its metadata must describe.
    resource: String,
    /// The backend's host: metadata elsewhere must be on the internet.
    host: String,
    clients: Arc<[OAuthClient]>,
    oauth: Arc<OAuth>,
    http: HttpOptions,
    state: Mutex<State>,
    tasks: Mutex<Tasks>,
    /// The backend's refusals of the learned binding's tokens: as an `oauth` binding's,
    /// a backend refusing each one pauses its acquisitions rather than costing two token
    /// requests (and a metadata read) per call.
    refusals: Refusals,
}

/// The tasks a [`Discovery`] runs on its own, which shutdown stops.
#[derive(Default)]
struct Tasks {
    closed: bool,
    /// The discovery after a challenge, and what it settled, for the calls that wait.
    flight: Option<Flight<OauthPlan>>,
    /// The re-reading of a learned binding's metadata.
    refresh: Option<AbortHandle>,
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery")
            // Its query may carry a secret (`?api_key=…`), as the backend's URL may.
            .field("resource", &format_args!("{}", Shown(&self.resource)))
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
enum State {
    /// Requests go without a credential: no challenge yet.
    Open,
    Challenged(Challenge),
    /// Discovery after a challenge failed: until `until`, requests go without a
    /// credential again and a challenge is not followed (its 401 fails the call), so a
    /// backend whose metadata is broken costs no lookup per call.
    Failed {
        until: Instant,
    },
    Learned(Learned),
}

/// A binding discovered from `challenge`.
#[derive(Clone)]
struct Learned {
    plan: OauthPlan,
    challenge: Challenge,
    /// When its metadata is read again.
    fresh_until: Instant,
    /// Counts the 401s to its token, so a re-reading started before the latest one does
    /// not overwrite what that one asked for.
    generation: u64,
    /// After a failed re-reading, none before this, whatever the backend says.
    quiet_until: Instant,
}

/// What a call does next, by the state.
enum Next {
    Bare,
    Use(OauthPlan),
    /// Use the binding now and read the metadata again behind the call.
    Refresh(Learned),
    Discover(Challenge),
}

/// A backend's `Bearer` challenge: where its metadata is, and where the backend lies.
#[derive(Clone)]
struct Challenge {
    metadata: Option<String>,
    zone: Zone,
}

impl Discovery {
    pub fn new(
        resource: &str,
        clients: Arc<[OAuthClient]>,
        oauth: Arc<OAuth>,
        http: &HttpOptions,
    ) -> Discovery {
        Discovery {
            resource: resource.to_string(),
            host: host_of(resource).unwrap_or_default(),
            clients,
            oauth,
            // `fetch` takes https only.
            http: http.clone(),
            state: Mutex::new(State::Open),
            tasks: Mutex::default(),
            refusals: Refusals::default(),
        }
    }

    /// The backend, reached at an address in `zone`, answered 401 with these
    /// `WWW-Authenticate` values (joined) to a request with a token from the learned
    /// binding (`with_token`) or with none. Only a `Bearer` challenge (or none at all,
    /// RFC 9728 §5) counts: to a bare request it opens discovery, unless a binding is
    /// learned already or a failed discovery pauses it; to a learned token it has the
    /// metadata read again (the resource may have moved to another server).
    pub fn challenged(&self, www_authenticate: Option<&str>, zone: Zone, with_token: bool) {
        let metadata = match www_authenticate.map(bearer_challenge) {
            None => None,
            Some(None) => return,
            Some(Some(metadata)) => metadata,
        };
        let challenge = Challenge { metadata, zone };
        let now = Instant::now();
        let mut state = lock(&self.state);
        match (&mut *state, with_token) {
            (State::Open | State::Challenged(_), false) => *state = State::Challenged(challenge),
            // A pause that ran out while the request was on its way is over: as open
            // (only a call's `next` would have said so, after this challenge was lost).
            (State::Failed { until }, false) if now >= *until => {
                *state = State::Challenged(challenge)
            }
            (State::Learned(learned), true) => {
                learned.challenge = challenge;
                learned.generation += 1;
                learned.fresh_until = learned.quiet_until.max(now);
            }
            _ => {}
        }
    }

    /// The token for this backend by `deadline`: `None` while requests go without one,
    /// else the learned binding's, discovering it first if there is none yet.
    pub async fn token(self: &Arc<Self>, deadline: Instant) -> Result<Option<Secret>, AuthFailure> {
        let plan = match self.next() {
            Next::Bare => return Ok(None),
            Next::Use(plan) => plan,
            Next::Refresh(learned) => self.refresh_behind(learned),
            Next::Discover(challenge) => self.join_flight(challenge)?.wait(deadline).await?,
        };
        // Paused, no token is asked for (a metadata re-read behind the call still runs:
        // the resource may have moved to another issuer).
        if self.refusals.paused() {
            return Err(AuthFailure::RefreshFailed);
        }
        self.oauth.token(&plan, deadline).await.map(Some)
    }

    fn next(&self) -> Next {
        let now = Instant::now();
        let mut state = lock(&self.state);
        match &*state {
            State::Open => Next::Bare,
            State::Failed { until } if now < *until => Next::Bare,
            State::Failed { .. } => {
                *state = State::Open;
                Next::Bare
            }
            State::Challenged(challenge) => Next::Discover(challenge.clone()),
            State::Learned(learned) if now < learned.fresh_until => Next::Use(learned.plan.clone()),
            State::Learned(learned) => Next::Refresh(learned.clone()),
        }
    }

    /// What the discovery flight after `challenge` settles (the binding, with a token in
    /// the OAuth client's cache, or why not), starting it unless one runs.
    fn join_flight(
        self: &Arc<Self>,
        challenge: Challenge,
    ) -> Result<Outcome<OauthPlan>, AuthFailure> {
        let mut tasks = lock(&self.tasks);
        if tasks.closed {
            return Err(AuthFailure::AcquisitionFailed);
        }
        if let Some(flight) = &tasks.flight {
            // Running, or ended after this call read the state: its outcome is this
            // call's too. Only a challenge after it ended starts another.
            let challenged = matches!(*lock(&self.state), State::Challenged(_));
            if !flight.is_finished() || !challenged {
                return Ok(flight.outcome());
            }
        }
        let discovery = Arc::clone(self);
        let flight = Flight::start(|bound| async move {
            let outcome = timeout_at(bound, discovery.settle(&challenge, bound))
                .await
                .unwrap_or_else(|_| Err(("timed out".into(), AuthFailure::AcquisitionFailed)));
            let now = Instant::now();
            let mut state = lock(&discovery.state);
            // Nothing but a challenge awaits this outcome (a flight is never replaced
            // while its state is anything else): never overwrite more.
            let challenged = matches!(*state, State::Challenged(_));
            let settled = match outcome {
                Ok(plan) => {
                    if challenged {
                        *state = State::Learned(Learned {
                            plan: plan.clone(),
                            challenge,
                            fresh_until: now + LEARNED_TTL,
                            generation: 0,
                            quiet_until: now,
                        });
                    }
                    Ok(plan)
                }
                Err((why, failure)) => {
                    tracing::warn!(resource = %Shown(&discovery.resource), %why, "no credential for the backend's challenge");
                    if challenged {
                        *state = State::Failed {
                            until: now + FAILED_PAUSE,
                        };
                    }
                    Err(failure)
                }
            };
            drop(state);
            settled
        });
        let outcome = flight.outcome();
        tasks.flight = Some(flight);
        Ok(outcome)
    }

    /// Discovers the binding after `challenge` and gets its first token (which the OAuth
    /// client caches for the calls), by `bound`: a binding without one is not kept. A failure says
    /// why, and how the calls waiting for it fail (a token's failure is theirs).
    async fn settle(
        &self,
        challenge: &Challenge,
        bound: Instant,
    ) -> Result<OauthPlan, (String, AuthFailure)> {
        let plan = self
            .discover(challenge, bound)
            .await
            .map_err(|why| (why, AuthFailure::AcquisitionFailed))?;
        if let Err(failure) = self.oauth.token(&plan, bound).await {
            return Err((format!("no token from {}", plan.issuer), failure));
        }
        Ok(plan)
    }

    /// Reads `learned`'s metadata again behind the calls, which go on using its plan
    /// (returned); if that fails, the binding is kept and not read again for a while.
    fn refresh_behind(self: &Arc<Self>, learned: Learned) -> OauthPlan {
        let plan = learned.plan.clone();
        let mut tasks = lock(&self.tasks);
        let running = tasks
            .refresh
            .as_ref()
            .is_some_and(|task| !task.is_finished());
        if tasks.closed || running {
            return plan;
        }
        let discovery = Arc::clone(self);
        let task = tokio::spawn(async move {
            let bound = Instant::now() + FLIGHT_BOUND;
            let discovered = discovery.discover(&learned.challenge, bound).await;
            let now = Instant::now();
            let mut state = lock(&discovery.state);
            // A 401 to the token since it began: that one's challenge is read next.
            let State::Learned(current) = &mut *state else {
                return;
            };
            if current.generation != learned.generation {
                return;
            }
            match discovered {
                Ok(fresh) => {
                    // Another issuer or resource: its tokens have not been refused.
                    if (&fresh.issuer, &fresh.resource)
                        != (&current.plan.issuer, &current.plan.resource)
                    {
                        discovery.refusals.accepted();
                    }
                    current.plan = fresh;
                    current.fresh_until = now + LEARNED_TTL;
                }
                Err(why) => {
                    tracing::warn!(resource = %Shown(&discovery.resource), %why, "reading the backend's metadata again failed; the learned binding stays");
                    current.quiet_until = now + FAILED_PAUSE;
                    current.fresh_until = current.quiet_until;
                }
            }
        });
        tasks.refresh = Some(task.abort_handle());
        plan
    }

    /// Stops the tasks this discovery runs and starts no more (shutdown); calls waiting
    /// for a flight fail.
    pub fn close(&self) {
        let mut tasks = lock(&self.tasks);
        tasks.closed = true;
        if let Some(flight) = tasks.flight.take() {
            flight.abort();
        }
        if let Some(refresh) = tasks.refresh.take() {
            refresh.abort();
        }
    }

    /// The backend answered 401 to `token`, the learned binding's: the OAuth client's
    /// cache drops it, and, if it still held it, it counts toward this backend's pause.
    pub fn reject(&self, token: &Secret) {
        if let State::Learned(learned) = &*lock(&self.state) {
            self.refusals.refused(&self.oauth, &learned.plan, token);
        }
    }

    /// The backend answered the learned binding's token with anything but 401.
    pub fn accepted(&self) {
        self.refusals.accepted();
    }

    /// The binding the backend's metadata and the trust policy give, by `deadline`.
    async fn discover(
        &self,
        challenge: &Challenge,
        deadline: Instant,
    ) -> Result<OauthPlan, String> {
        let mut tried = Vec::new();
        for location in self.locations(challenge)? {
            // Metadata on another host than the backend's must be on the internet: the
            // backend may not point this host at anything inside its network.
            let innermost = match host_of(&location.url).as_deref() == Some(self.host.as_str()) {
                true => challenge.zone,
                false => Zone::Global,
            };
            let reply = self.fetch(&location.url, innermost, deadline).await?;
            if reply.status != Some(200) {
                tried.push(format!(
                    "{}: HTTP {}",
                    Shown(&location.url),
                    reply.status.unwrap_or(0)
                ));
                // The backend's own pointer is authoritative: no guessing past it.
                if challenge.metadata.is_some() {
                    break;
                }
                continue;
            }
            let metadata = ResourceMetadata::read(&reply.body, &location.describes)
                .map_err(|why| format!("metadata at {}: {why}", Shown(&location.url)))?;
            // The local trust policy's order, not the resource's, decides.
            let client = self
                .clients
                .iter()
                .find(|c| metadata.authorization_servers.contains(&c.issuer))
                .ok_or_else(|| {
                    format!(
                        "metadata at {} lists no authorization server this host holds a client at",
                        Shown(&location.url)
                    )
                })?;
            return Ok(OauthPlan {
                issuer: client.issuer.clone(),
                resource: metadata.resource,
                client_id: client.client_id.clone(),
                flow: OauthFlow::ClientCredentials,
                scopes: client.scopes.clone(),
                client_secret_ref: Some(client.client_secret_ref.clone()),
            });
        }
        Err(format!(
            "no protected resource metadata ({})",
            tried.join("; ")
        ))
    }

    /// Where to look, in order, and which resource each location must describe.
    fn locations(&self, challenge: &Challenge) -> Result<Vec<Location>, String> {
        if let Some(url) = &challenge.metadata {
            // Advertised with this backend's 401: it must describe the URL requested.
            return Ok(vec![Location {
                url: url.clone(),
                describes: vec![self.resource.clone()],
            }]);
        }
        let uri: hyper::Uri = self
            .resource
            .parse()
            .map_err(|_| "the backend URL does not parse".to_string())?;
        let authority = uri.authority().ok_or("the backend URL has no host")?;
        let origin = format!("{}://{authority}", uri.scheme_str().unwrap_or("https"));
        // RFC 9728 §3.1: only a slash right after the host goes; the rest of the path,
        // a trailing slash included, follows the well-known suffix as it is.
        let path = match uri.path() {
            "/" => "",
            path => path,
        };
        let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
        let root = Location {
            url: format!("{origin}{WELL_KNOWN}"),
            // The root location describes the origin; it may name this URL itself.
            describes: vec![origin.clone(), self.resource.clone()],
        };
        Ok(match path.is_empty() && query.is_empty() {
            true => vec![root],
            false => vec![
                Location {
                    url: format!("{origin}{WELL_KNOWN}{path}{query}"),
                    describes: vec![self.resource.clone()],
                },
                root,
            ],
        })
    }

    /// GETs metadata at `url` (`https` only), over a connection to no address further
    /// inside than `innermost`, by `deadline`.
    async fn fetch(
        &self,
        url: &str,
        innermost: Zone,
        deadline: Instant,
    ) -> Result<crate::bindings::delivery::Reply, String> {
        if !url.starts_with("https://") {
            return Err(format!("metadata URL {} is not https", Shown(url)));
        }
        let mut http = self.http.clone();
        http.innermost = innermost;
        // A new connection each time: metadata is read once an hour at most, and a
        // backend naming a new URL with every challenge should leave no pool behind.
        let endpoint =
            HttpBackend::new(url, http).map_err(|why| format!("{}: {why}", Shown(url)))?;
        let get = Outgoing {
            method: Method::GET,
            content_type: None,
            authorization: None,
            body: b"",
        };
        let received = endpoint
            .send(get, deadline)
            .await
            .map_err(|e| format!("metadata at {}: {e:?}", Shown(url)))?;
        Ok(received.reply)
    }
}

struct Location {
    url: String,
    /// The resource identifiers the metadata found there may name (RFC 9728 §3.3), as
    /// [`same_resource`] compares them.
    describes: Vec<String>,
}

/// Whether two resource identifiers name the same resource: byte for byte, as RFC 9728
/// §3.3 asks, but for an empty path, which is `/` (RFC 3986 §6.2.3). A backend registered
/// as `https://policy.example.com` whose metadata says `https://policy.example.com/` (as
/// pydantic's `AnyHttpUrl` writes it, common in MCP servers) is itself; a path's
/// trailing slash, or a host's case, still differs.
fn same_resource(a: &str, b: &str) -> bool {
    rooted(a) == rooted(b)
}

/// `url` with an empty path written as `/`.
fn rooted(url: &str) -> std::borrow::Cow<'_, str> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.into();
    };
    let (authority, after) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    match after.starts_with('/') {
        true => url.into(),
        false => format!("{scheme}://{authority}/{after}").into(),
    }
}

/// Protected resource metadata (RFC 9728 §2), as far as this client uses it.
#[derive(Debug, PartialEq)]
struct ResourceMetadata {
    resource: String,
    authorization_servers: Vec<String>,
}

impl ResourceMetadata {
    /// Reads `body`, whose `resource` must be one of `describes` ([`same_resource`]).
    fn read(body: &[u8], describes: &[String]) -> Result<ResourceMetadata, &'static str> {
        let json: Value = serde_json::from_slice(body).map_err(|_| "not JSON")?;
        let resource = json["resource"]
            .as_str()
            .ok_or("`resource` is missing or not a string")?;
        if !describes.iter().any(|d| same_resource(d, resource)) {
            return Err("`resource` is not this backend");
        }
        let servers = json["authorization_servers"]
            .as_array()
            .ok_or("`authorization_servers` is missing or not an array")?
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or("`authorization_servers` holds a non-string")?;
        Ok(ResourceMetadata {
            resource: resource.to_string(),
            authorization_servers: servers,
        })
    }
}

/// The `Bearer` challenge in a `WWW-Authenticate` value: `None` if there is none, else its
/// `resource_metadata` parameter (RFC 9728 §5.1), if any.
fn bearer_challenge(header: &str) -> Option<Option<String>> {
    let bearers = www_authenticate::challenges(header, "bearer");
    // The first `Bearer` challenge that names its metadata: one may precede it without
    // (a realm alone), and a later one does not replace it.
    let metadata = bearers.iter().find_map(|params| {
        params
            .iter()
            .find(|(name, _)| name == "resource_metadata")
            .map(|(_, value)| value.clone())
    });
    (!bearers.is_empty()).then_some(metadata)
}

/// The host of `url`, lowercased, if it parses.
fn host_of(url: &str) -> Option<String> {
    let uri: hyper::Uri = url.parse().ok()?;
    Some(uri.host()?.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_challenge_and_its_metadata_are_found_among_others() {
        let cases = [
            (
                r#"Bearer resource_metadata="https://r.example/m""#,
                Some(Some("https://r.example/m")),
            ),
            (
                r#"Basic realm="a, b", Bearer realm="x", resource_metadata="https://r.example/\"q\"", scope="s""#,
                Some(Some(r#"https://r.example/"q""#)),
            ),
            ("bearer", Some(None)),
            (r#"Bearer realm="x", error="invalid_token""#, Some(None)),
            (r#"Basic realm="x", resource_metadata="https://evil""#, None),
            ("Negotiate abc==", None),
            ("", None),
            // Several fields, joined; spaces around `=`; a parameter named like a scheme.
            (
                r#"Negotiate, Bearer realm = "x" , resource_metadata = "https://r.example/m""#,
                Some(Some("https://r.example/m")),
            ),
            (r#"Basic bearer = "x", realm="y""#, None),
            ("Bearer,", Some(None)),
            ("Bearer abc==", Some(None)),
            (
                r#"Bearer realm="x", , resource_metadata="https://r.example/m""#,
                Some(Some("https://r.example/m")),
            ),
            // RFC 9110 §11.6.1's own example.
            (
                r#"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#,
                None,
            ),
            ("Basic realm=\"Z\u{fffd}rich\"", None),
            // Two Bearer challenges: the first that names its metadata, never a later one.
            (
                r#"Bearer realm="x", Bearer resource_metadata="https://r.example/m""#,
                Some(Some("https://r.example/m")),
            ),
            (
                r#"Bearer resource_metadata="https://r.example/1", Bearer resource_metadata="https://r.example/2""#,
                Some(Some("https://r.example/1")),
            ),
        ];
        for (header, expected) in cases {
            let got = bearer_challenge(header);
            assert_eq!(got.as_ref().map(|m| m.as_deref()), expected, "{header}");
        }
    }

    #[test]
    fn metadata_must_describe_this_backend_and_list_servers() {
        let describes = ["https://r.example/hooks".to_string()];
        let read = |v: Value| ResourceMetadata::read(v.to_string().as_bytes(), &describes);
        assert_eq!(
            read(serde_json::json!({"resource": "https://r.example/hooks",
                "authorization_servers": ["https://as.example"]})),
            Ok(ResourceMetadata {
                resource: "https://r.example/hooks".into(),
                authorization_servers: vec!["https://as.example".into()],
            })
        );
        for (bad, why) in [
            (
                serde_json::json!({"resource": "https://r.example/other", "authorization_servers": []}),
                "not this backend",
            ),
            (
                serde_json::json!({"resource": "https://r.example/hooks/", "authorization_servers": []}),
                "not this backend",
            ),
            (
                serde_json::json!({"authorization_servers": []}),
                "`resource`",
            ),
            (
                serde_json::json!({"resource": "https://r.example/hooks"}),
                "missing or not an array",
            ),
            (
                serde_json::json!({"resource": "https://r.example/hooks", "authorization_servers": [1]}),
                "non-string",
            ),
        ] {
            assert!(
                matches!(read(bad.clone()), Err(e) if e.contains(why)),
                "{bad}"
            );
        }
        assert_eq!(
            ResourceMetadata::read(b"<html>", &describes),
            Err("not JSON")
        );
    }

    /// An empty path is `/` (RFC 3986 §6.2.3), both ways, a query kept; nothing else is
    /// taken as the same resource.
    #[test]
    fn an_empty_path_and_a_slash_name_the_same_resource() {
        for (registered, named) in [
            ("https://r.example", "https://r.example/"),
            ("https://r.example:8443/", "https://r.example:8443"),
            ("https://r.example?tenant=a", "https://r.example/?tenant=a"),
            ("https://[::1]:8443", "https://[::1]:8443/"),
            ("https://r.example/hooks", "https://r.example/hooks"),
        ] {
            assert!(same_resource(registered, named), "{registered} {named}");
            assert!(same_resource(named, registered), "{named} {registered}");
        }
        for (registered, named) in [
            ("https://r.example/hooks", "https://r.example/hooks/"),
            ("https://r.example", "https://R.example/"),
            ("https://r.example", "https://r.example//"),
            ("https://r.example?tenant=a", "https://r.example/"),
            ("https://r.example", "http://r.example/"),
        ] {
            assert!(!same_resource(registered, named), "{registered} {named}");
        }
        let describes = ["https://r.example".to_string()];
        let named = serde_json::json!({"resource": "https://r.example/",
            "authorization_servers": ["https://as.example"]});
        let read = ResourceMetadata::read(named.to_string().as_bytes(), &describes);
        assert_eq!(read.map(|m| m.resource), Ok("https://r.example/".into()));
    }

    fn discovery(resource: &str) -> Discovery {
        let config = crate::Options::default().backend_config();
        let http = config.expect("the default options").http;
        Discovery::new(
            resource,
            Arc::from([]),
            Arc::new(OAuth::new(http.clone())),
            &http,
        )
    }

    #[test]
    fn well_known_locations_go_path_specific_then_root() {
        let challenge = bare_challenge();
        let urls = |resource: &str| -> Vec<(String, Vec<String>)> {
            discovery(resource)
                .locations(&challenge)
                .unwrap()
                .into_iter()
                .map(|l| (l.url, l.describes))
                .collect()
        };
        let got = urls("https://r.example:8443/v1/hooks/");
        assert_eq!(
            got.iter().map(|(u, _)| u.as_str()).collect::<Vec<_>>(),
            [
                "https://r.example:8443/.well-known/oauth-protected-resource/v1/hooks/",
                "https://r.example:8443/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(got[0].1, ["https://r.example:8443/v1/hooks/"]);
        assert!(got[1].1.contains(&"https://r.example:8443".to_string()));
        assert_eq!(
            urls("https://r.example")
                .into_iter()
                .map(|(u, _)| u)
                .collect::<Vec<_>>(),
            ["https://r.example/.well-known/oauth-protected-resource"]
        );
        let advertised = Challenge {
            metadata: Some("https://m.example/prm".into()),
            zone: Zone::Global,
        };
        let only = discovery("https://r.example/hooks")
            .locations(&advertised)
            .unwrap();
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].url, "https://m.example/prm");
        assert_eq!(only[0].describes, ["https://r.example/hooks"]);
    }

    #[test]
    fn a_challenge_opens_discovery_only_if_it_is_bearer() {
        let d = discovery("https://r.example/hooks");
        d.challenged(Some("Basic realm=\"x\""), Zone::Global, false);
        assert!(matches!(d.next(), Next::Bare));
        d.challenged(None, Zone::Private, false);
        assert!(
            matches!(d.next(), Next::Discover(c) if c.metadata.is_none() && c.zone == Zone::Private)
        );
        let pointer = Some("Bearer resource_metadata=\"https://m/\"");
        d.challenged(pointer, Zone::Global, false);
        assert!(
            matches!(d.next(), Next::Discover(c) if c.metadata.as_deref() == Some("https://m/"))
        );
    }

    /// A `Bearer` challenge without a metadata pointer, from a global backend.
    fn bare_challenge() -> Challenge {
        Challenge {
            metadata: None,
            zone: Zone::Global,
        }
    }

    /// The binding of [`plan`], learned from [`bare_challenge`].
    fn learned(fresh_until: Instant, quiet_until: Instant) -> Learned {
        Learned {
            plan: plan(),
            challenge: bare_challenge(),
            fresh_until,
            generation: 0,
            quiet_until,
        }
    }

    fn plan() -> OauthPlan {
        OauthPlan {
            issuer: "https://as.example".into(),
            resource: "https://r.example/hooks".into(),
            client_id: "c".into(),
            flow: OauthFlow::ClientCredentials,
            scopes: Vec::new(),
            client_secret_ref: Some("env:S".into()),
        }
    }

    #[test]
    fn a_failed_discovery_pauses_then_opens_and_a_learned_binding_is_refreshed_behind() {
        let d = discovery("https://r.example/hooks");
        // Paused: requests go bare and a challenge is not followed.
        *lock(&d.state) = State::Failed {
            until: Instant::now() + Duration::from_secs(30),
        };
        d.challenged(Some("Bearer"), Zone::Global, false);
        assert!(matches!(d.next(), Next::Bare));
        assert!(matches!(*lock(&d.state), State::Failed { .. }));
        // The pause over: open again, and the next challenge is followed.
        *lock(&d.state) = State::Failed {
            until: Instant::now(),
        };
        assert!(matches!(d.next(), Next::Bare));
        assert!(matches!(*lock(&d.state), State::Open));
        // A learned binding: a bare request's 401 changes nothing; a 401 to its token
        // has the metadata read again, behind calls that keep using the binding.
        let learned = |fresh_until, quiet_until| State::Learned(learned(fresh_until, quiet_until));
        let now = Instant::now();
        *lock(&d.state) = learned(now + LEARNED_TTL, now);
        d.challenged(Some("Bearer"), Zone::Global, false);
        assert!(matches!(d.next(), Next::Use(p) if p.issuer == plan().issuer));
        let pointer = Some("Bearer resource_metadata=\"https://m/\"");
        d.challenged(pointer, Zone::Global, true);
        assert!(matches!(d.next(), Next::Refresh(l)
            if l.plan.issuer == plan().issuer
                && l.challenge.metadata.as_deref() == Some("https://m/")
                && l.generation == 1));
        // Stale by age too.
        *lock(&d.state) = learned(Instant::now(), now);
        assert!(matches!(d.next(), Next::Refresh(..)));
        // After a failed re-reading, a 401 to the token waits out the quiet time.
        *lock(&d.state) = learned(now + LEARNED_TTL, now + Duration::from_secs(30));
        d.challenged(pointer, Zone::Global, true);
        assert!(matches!(d.next(), Next::Use(..)));
    }

    /// A discovery pause that ran out while a request sent bare during it was on its way:
    /// the challenge that answers it is followed, as after one read open.
    #[test]
    fn a_challenge_just_after_a_discovery_pause_is_followed() {
        let d = discovery("https://r.example/hooks");
        *lock(&d.state) = State::Failed {
            until: Instant::now(),
        };
        d.challenged(Some("Bearer"), Zone::Global, false);
        assert!(matches!(d.next(), Next::Discover(..)));
    }

    #[tokio::test]
    async fn a_flight_that_ended_serves_calls_that_read_the_state_before_it_did() {
        let d = Arc::new(discovery("https://r.example/hooks"));
        let challenge = bare_challenge();
        // A flight that ended with a binding, as a call that saw `Challenged` just before
        // finds it.
        let ended = Flight::start(|_| async { Ok(plan()) });
        let later = Instant::now() + Duration::from_secs(5);
        ended.outcome().wait(later).await.expect("it ended");
        lock(&d.tasks).flight = Some(ended);
        let now = Instant::now();
        *lock(&d.state) = State::Learned(learned(now + LEARNED_TTL, now));
        let joined = d.join_flight(challenge.clone()).expect("not closed");
        assert_eq!(joined.wait(now).await.map(|p| p.issuer), Ok(plan().issuer));
        // Challenged again after it ended: a new flight, not yet ended.
        *lock(&d.state) = State::Challenged(challenge.clone());
        let fresh = d.join_flight(challenge).expect("not closed");
        assert_eq!(
            fresh.wait(Instant::now()).await.err(),
            Some(AuthFailure::DeadlineExceeded)
        );
        d.close();
    }

    #[tokio::test]
    async fn after_close_nothing_starts() {
        let d = Arc::new(discovery("https://r.example/hooks"));
        let challenge = bare_challenge();
        d.close();
        *lock(&d.state) = State::Challenged(challenge.clone());
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            d.token(deadline).await.err(),
            Some(AuthFailure::AcquisitionFailed)
        );
        assert!(lock(&d.tasks).flight.is_none());
        let now = Instant::now();
        d.refresh_behind(learned(now, now));
        assert!(lock(&d.tasks).refresh.is_none());
    }

    #[tokio::test]
    async fn metadata_lies_no_further_inside_than_the_backend_and_elsewhere_is_global() {
        let d = discovery("https://127.0.0.1:9/hooks");
        let deadline = Instant::now() + Duration::from_secs(5);
        for (pointer, backend_zone, why) in [
            // A backend on a global address, its own host name resolving inward (H13):
            // refused before any connection.
            ("https://127.0.0.1:9/prm", Zone::Global, "NotPermitted"),
            // Another host, loopback here as a private address would be: refused.
            ("https://127.0.0.2:9/prm", Zone::Loopback, "NotPermitted"),
            ("http://127.0.0.1:9/prm", Zone::Loopback, "is not https"),
            // Its own host, no further inside: connected to (nothing listens on 9).
            (
                "https://127.0.0.1:9/prm",
                Zone::Loopback,
                "ConnectionRefused",
            ),
        ] {
            let challenge = Challenge {
                metadata: Some(pointer.into()),
                zone: backend_zone,
            };
            let refused = d.discover(&challenge, deadline).await;
            let shown = format!("{pointer} from {backend_zone:?}: {refused:?}");
            assert!(matches!(&refused, Err(e) if e.contains(why)), "{shown}");
        }
    }

    /// A backend's URL may carry a key in its query: what discovery reports (and logs)
    /// shows the URL without it, and so does a backend's `Debug`.
    #[tokio::test]
    async fn a_urls_query_is_never_shown() {
        let key = "key-0b6d1e9f";
        let resource = format!("https://127.0.0.1:9/hooks?api_key={key}");
        let challenge = Challenge {
            metadata: None,
            zone: Zone::Loopback,
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let refused = discovery(&resource).discover(&challenge, deadline).await;
        let shown = format!("{refused:?}");
        assert!(
            shown.contains("oauth-protected-resource/hooks?…"),
            "{shown}"
        );
        assert!(!shown.contains(key), "{shown}");
        let http = crate::Options::default().backend_config().unwrap().http;
        let backend = HttpBackend::new(&resource, http).unwrap();
        let shown = format!("{backend:?}");
        assert!(
            shown.contains("/hooks?…") && !shown.contains(key),
            "{shown}"
        );
    }

    #[test]
    fn clients_are_checked_by_entry_and_field() {
        let ok = r#"[{"issuer": "https://as.example", "clientId": "c",
                      "clientSecretRef": "env:S", "scopes": ["hooks.decide"]}]"#;
        assert_eq!(OAuthClient::list_from_json(ok).map(|c| c.len()), Ok(1));
        for (bad, why) in [
            (r#"{}"#, "JSON array"),
            (
                r#"[{"issuer": "https://as", "clientId": "c"}]"#,
                "[0]: `clientSecretRef` is missing",
            ),
            (
                r#"[{"issuer": "https://as", "clientId": "c", "clientSecretRef": "env:S", "extra": 1}]"#,
                "[0]: unknown field `extra`",
            ),
            (
                r#"[{"issuer": "http://as", "clientId": "c", "clientSecretRef": "env:S"}]"#,
                "[0]: `issuer` must be an https URL",
            ),
            (
                r#"[{"issuer": "https://as?x", "clientId": "c", "clientSecretRef": "env:S"}]"#,
                "no query",
            ),
            (
                r#"[{"issuer": "https://as", "clientId": "", "clientSecretRef": "env:S"}]"#,
                "`clientId` is empty",
            ),
            (
                r#"[{"issuer": "https://as", "clientId": "c", "clientSecretRef": "S"}]"#,
                "`clientSecretRef`",
            ),
            (
                r#"[{"issuer": "https://as", "clientId": "c", "clientSecretRef": "file:secret"}]"#,
                "`clientSecretRef`: a `file:` path must be absolute",
            ),
            (
                r#"[{"issuer": "https://as", "clientId": "c", "clientSecretRef": "env:"}]"#,
                "[0]: `clientSecretRef`: an `env:` name must be letters, digits and `_`, not starting with a digit",
            ),
            (
                r#"[{"issuer": "https://as", "clientId": "c", "clientSecretRef": "env:sk-918273645+/="}]"#,
                "`clientSecretRef`: an `env:` name must be",
            ),
            (
                r#"[{"issuer": "https://as", "clientId": "c", "clientSecretRef": "env:1X"}]"#,
                "`clientSecretRef`: an `env:` name must be",
            ),
            (
                r#"[{"issuer": "https://as", "clientId": "c", "clientSecretRef": "env:S", "scopes": ["a b"]}]"#,
                "`scopes`",
            ),
            (
                r#"[{"issuer": "https://as", "clientId": "c", "clientSecretRef": "env:S"},
                 {"issuer": "https://as", "clientId": "d", "clientSecretRef": "env:S"}]"#,
                "[1]: `issuer` https://as is given twice",
            ),
            // A value of the wrong type is named by its type, never repeated: it could be
            // the secret itself, pasted where its reference belongs.
            (
                r#"[{"issuer": "https://as", "clientId": "c", "clientSecretRef": 918273645}]"#,
                "[0]: `clientSecretRef` must be a string, found a number",
            ),
            (
                r#"[{"issuer": "https://as", "clientId": "c", "clientSecretRef": ["918273645"]}]"#,
                "[0]: `clientSecretRef` must be a string, found an array",
            ),
            (
                r#"[{"issuer": "https://as", "clientId": "c", "clientSecretRef": "env:S", "scopes": [918273645]}]"#,
                "[0]: `scopes` must be an array of strings",
            ),
            (r#"["918273645"]"#, "[0]: must be an object, found a string"),
            (r#""918273645""#, "must be a JSON array, found a string"),
        ] {
            let error = OAuthClient::list_from_json(bad).expect_err(bad);
            assert!(error.contains(why), "{bad}: {error}");
            assert!(!error.contains("918273645"), "{bad}: {error}");
        }
    }
}
