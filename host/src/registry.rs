//! An OCI registry's authentication (the distribution API's `/v2/` probe and token
//! exchange), the reads of a pull (manifest and blob) and the writes of a push, over this
//! crate's own HTTP client, so that every answer is read to a bound: a manifest or a token
//! no further than 64 KiB, a blob no further than the size its manifest states. oci-client
//! reads whole bodies before anything can look at their size, so a registry (or the token
//! service it names) could fill memory with one answer; and its push sends the credentials
//! to whatever upload location a registry names, on any host, over plain http too.
//!
//! Authentication as registries do it (the Docker token protocol, which OCI registries
//! share): the `/v2/` answer's `WWW-Authenticate` says `Bearer realm=… service=…` (a token
//! for `repository:NAME:pull`, or `pull,push`, from that service, with the basic
//! credentials if there are any), `Basic` (the credentials go to the registry itself) or
//! nothing (anonymous). A registry that reads anonymously may answer `/v2/` with no
//! challenge and ask later instead, on a push or, for a token even anonymous pulls need,
//! on the manifest: a 401 with a challenge from the registry's own origin is answered the
//! same way, once per request (a `Basic` one only with credentials to give).
//! Plain http only for a loopback registry, and then only to loopback hosts, with no proxy
//! in between: a remote registry's redirects and token service are https. `localhost`
//! counts as loopback by its name, so it is never resolved: [`client`] connects it to
//! 127.0.0.1 or ::1. A push's upload
//! locations must be on the registry's own origin, since they get the credentials.
//!
//! Credentials go to their own origin only, redirects or not: the registry's to the
//! registry's origin, the basic credentials for a token to the token service's. A read
//! follows a redirect to another origin (a CDN) without them, from there on; a push
//! refuses one. [`client`] follows the redirects and says why reqwest does not.

mod client;

use crate::capabilities::www_authenticate;
use client::{Client, Credential, OffOrigin, Outgoing};
use oci_client::secrets::RegistryAuth;
use oci_client::Reference;
use reqwest::header::{HeaderValue, ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use reqwest::{Method, Response, StatusCode, Url};
use std::net::IpAddr;
use std::sync::Mutex;

/// The largest manifest a pull reads.
pub(crate) const MAX_MANIFEST_BYTES: u64 = 64 << 10;

/// The largest token-service answer read (a token and a few fields).
const MAX_TOKEN_ANSWER_BYTES: u64 = 64 << 10;

/// The manifest media types a pull asks for, the wasm artifact's (an OCI image
/// manifest) first.
const MANIFEST_TYPES: &str = "application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json, \
    application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json";

/// What a registry is asked for: the scope of the token that answers a `Bearer` challenge.
#[derive(Clone, Copy)]
pub(crate) enum Access {
    Pull,
    Push,
}

/// One repository of one registry, authenticated.
pub(crate) struct Registry {
    http: Client,
    /// `SCHEME://HOST[:PORT]/v2/REPOSITORY`.
    repository: Url,
    /// What every request sends: nothing, the basic credentials, or a token. Settled by
    /// [`Registry::open`], and again by [`Registry::send`] when a request's own challenge
    /// asks for more.
    credential: Mutex<RegistryAuth>,
    /// The basic credentials configured for this registry, kept to answer a challenge
    /// that comes after `/v2/` (a registry that reads anonymously asks on a push). A
    /// `Bearer` challenge is answered without them too: a token may be given to anyone.
    basic: Option<(String, String)>,
    /// `repository:NAME:ACTIONS`: what a token is asked for.
    scope: String,
    /// Whether the registry is on loopback (where its token service may be plain http).
    local: bool,
}

/// Why the registry gave nothing. Made lasting or transient (`Failed::lasting`,
/// `Failed::transient`), never from a bare message: which one it is decides whether `ahp
/// hook install` refuses a component or installs hooks that wait for the registry.
#[derive(Debug, PartialEq, Eq)]
pub struct Failed {
    /// What went wrong, for the user.
    pub message: String,
    /// Asking again later would get the same answer: the credentials refused (401 or
    /// 403, from the registry or its token service), an answer larger than its bound,
    /// one this client's rules refuse (a token service or a redirect over plain http, a
    /// challenge or a token answer it cannot use, too many redirects), or a certificate
    /// that does not verify. Otherwise the registry may answer later (not reached, not
    /// answering, an error status).
    pub lasting: bool,
    /// A 401 from where the credential, or none, was sent (the registry or its token
    /// service): it wants credentials other than those sent, which a caller that withheld
    /// some may want to say.
    pub unauthorized: bool,
}

impl Failed {
    /// `message`, for a failure asking again would repeat.
    pub(crate) fn lasting(message: impl Into<String>) -> Failed {
        Failed {
            message: message.into(),
            lasting: true,
            unauthorized: false,
        }
    }

    /// `message`, for a failure that may not happen again: the registry, or the network
    /// to it, may answer later.
    fn transient(message: impl Into<String>) -> Failed {
        Failed {
            message: message.into(),
            lasting: false,
            unauthorized: false,
        }
    }

    /// `what: message`, of the same kind: the step that failed named.
    pub(crate) fn context(self, what: impl std::fmt::Display) -> Failed {
        Failed {
            message: format!("{what}: {}", self.message),
            ..self
        }
    }

    /// `message`, for an answer of `status` that is not the one wanted, from where the
    /// credential (or none) was sent if `sent_there`, else from where a redirect led,
    /// which was sent none (a storage URL that expired, a CDN's block).
    fn answered(message: String, status: StatusCode, sent_there: bool) -> Failed {
        // The credentials, refused where they were sent: asking again gets the same answer.
        let refused = matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
        Failed {
            message,
            lasting: refused && sent_there,
            unauthorized: status == StatusCode::UNAUTHORIZED && sent_there,
        }
    }
}

impl From<Failed> for String {
    fn from(failed: Failed) -> String {
        failed.message
    }
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Registry {
    /// Asks `reference`'s registry how to authenticate and does so with `auth`, for
    /// `access`.
    pub async fn open(
        reference: &Reference,
        auth: &RegistryAuth,
        access: Access,
    ) -> Result<Registry, Failed> {
        install_tls_provider();
        let registry = reference.resolve_registry();
        let local = is_loopback(registry);
        let http = Client::new(local).map_err(Failed::lasting)?;
        let scheme = if local { "http" } else { "https" };
        let address = |url: String| {
            Url::parse(&url).map_err(|e| Failed::lasting(format!("the registry's address: {e}")))
        };
        let base = address(format!("{scheme}://{registry}/v2/"))?;
        let repository = address(format!("{base}{}", reference.repository()))?;
        let probe = http
            .send(
                Outgoing::new(Method::GET, base.clone()),
                None,
                OffOrigin::Follow,
            )
            .await
            .map_err(|e| e.context("reach the registry"))?;
        // A challenge from where the probe was redirected is not the registry's: its
        // token service, of that host's choosing, would be sent the credentials.
        let challenge = if probe.url().origin() == base.origin() {
            www_authenticate::joined(probe.headers())
        } else {
            None
        };
        drop(probe);
        let basic = match auth {
            RegistryAuth::Basic(user, password) => Some((user.clone(), password.clone())),
            _ => None,
        };
        let actions = match access {
            Access::Pull => "pull",
            Access::Push => "pull,push",
        };
        let scope = format!("repository:{}:{actions}", reference.repository());
        let credential = match (auth, challenge) {
            (RegistryAuth::Bearer(_), _) => auth.clone(),
            (_, Some(challenge)) => {
                let basic = basic.as_ref().map(|(u, p)| (u.as_str(), p.as_str()));
                answer_challenge(&http, &challenge, &scope, basic, local).await?
            }
            (_, None) => RegistryAuth::Anonymous,
        };
        Ok(Registry {
            http,
            repository,
            credential: Mutex::new(credential),
            basic,
            scope,
            local,
        })
    }

    /// The manifest `name` (a tag or a digest) names, at most [`MAX_MANIFEST_BYTES`] of
    /// it. Any kind is accepted, so a registry answers with what it has (an index, a Docker
    /// manifest) for the caller to refuse by name rather than with a bare 404.
    pub async fn manifest(&self, name: &str) -> Result<Vec<u8>, Failed> {
        let request = self
            .request(Method::GET, &format!("manifests/{name}"))?
            .header(ACCEPT, HeaderValue::from_static(MANIFEST_TYPES));
        let answer = self.send(request, OffOrigin::Follow).await?;
        read(
            answer,
            MAX_MANIFEST_BYTES,
            "the registry",
            &self.repository.origin(),
        )
        .await
    }

    /// The blob `digest` names, which its manifest says is `size` bytes: no more is read.
    pub async fn blob(&self, digest: &str, size: u64) -> Result<Vec<u8>, Failed> {
        let request = self.request(Method::GET, &format!("blobs/{digest}"))?;
        let answer = self.send(request, OffOrigin::Follow).await?;
        read(answer, size, "the registry", &self.repository.origin()).await
    }

    /// Uploads `blob`, which `digest` names, unless the registry holds it already: in one
    /// piece, to the upload location the registry names once it is found on the
    /// registry's own origin (anywhere else would get the credentials). Whether it is
    /// held is asked as a read is: a registry keeping its blobs in cloud storage redirects
    /// the question there, and a HEAD sends nothing, nor, off the origin, the credential.
    pub async fn push_blob(&self, digest: &str, blob: bytes::Bytes) -> Result<(), Failed> {
        let held = self.request(Method::HEAD, &format!("blobs/{digest}"))?;
        let held = self.send(held, OffOrigin::Follow).await?;
        match held.status() {
            StatusCode::OK => return Ok(()),
            StatusCode::NOT_FOUND => {}
            status => {
                let sent_there = held.url().origin() == self.repository.origin();
                let message = format!("the registry answered {status}");
                return Err(Failed::answered(message, status, sent_there));
            }
        }
        // An empty POST, its length stated: some registries want it.
        let start = self
            .request(Method::POST, "blobs/uploads/")?
            .header(CONTENT_LENGTH, HeaderValue::from(0));
        let started = self.expect(start, StatusCode::ACCEPTED).await?;
        let location = started
            .headers()
            .get(LOCATION)
            .ok_or_else(|| Failed::lasting("the registry's upload answer names no location"))?
            .to_str()
            .map_err(|_| Failed::lasting("the registry's upload location is not text"))?;
        let mut url =
            upload_location(&self.repository, started.url(), location).map_err(Failed::lasting)?;
        url.query_pairs_mut().append_pair("digest", digest);
        let upload = Outgoing::new(Method::PUT, url)
            .header(
                CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            )
            .body(blob);
        self.expect(upload, StatusCode::CREATED).await.map(drop)
    }

    /// Stores `manifest`, of `media_type`, under `tag`.
    pub async fn push_manifest(
        &self,
        tag: &str,
        media_type: &'static str,
        manifest: Vec<u8>,
    ) -> Result<(), Failed> {
        let put = self
            .request(Method::PUT, &format!("manifests/{tag}"))?
            .header(CONTENT_TYPE, HeaderValue::from_static(media_type))
            .body(manifest);
        self.expect(put, StatusCode::CREATED).await.map(drop)
    }

    /// A request for `path`, relative to the repository (`manifests/…`, `blobs/…`).
    fn request(&self, method: Method, path: &str) -> Result<Outgoing, Failed> {
        let url = Url::parse(&format!("{}/{path}", self.repository))
            .map_err(|e| Failed::lasting(format!("the registry's address: {e}")))?;
        Ok(Outgoing::new(method, url))
    }

    /// The registry's answer to `request`, whatever its status, sent with the credential
    /// (on the registry's origin only), redirects followed as `off_origin` says.
    ///
    /// `/v2/` may not tell: a registry that reads anonymously answers it 200 and asks for
    /// credentials on a push, and one may want a token, anonymous or not, for every
    /// manifest and blob. So when the registry's own origin answers 401 with a challenge,
    /// the challenge is answered (as [`Registry::open`] answers one: a token from the
    /// `Bearer` service, asked with the credentials if any; the credentials for `Basic`,
    /// if any) and the same request sent once more; the answer is kept for the requests
    /// after it. Nothing is sent that was not asked for.
    async fn send(&self, request: Outgoing, off_origin: OffOrigin) -> Result<Response, Failed> {
        let sent = self.credential();
        let response = self.send_with(request.clone(), &sent, off_origin).await?;
        let Some(challenge) = self.challenge(&response) else {
            return Ok(response);
        };
        let basic = self.basic.as_ref().map(|(u, p)| (u.as_str(), p.as_str()));
        let answer = answer_challenge(&self.http, &challenge, &self.scope, basic, self.local)
            .await
            .map_err(|e| e.context("answer the registry's challenge"))?;
        // Sent already, or nothing to send (a `Basic` challenge, no credentials): the 401
        // stands.
        if answer == sent || answer == RegistryAuth::Anonymous {
            return Ok(response);
        }
        drop(response);
        *self.credential.lock().unwrap_or_else(|e| e.into_inner()) = answer.clone();
        self.send_with(request, &answer, off_origin).await
    }

    /// What [`Registry::send`] sends now.
    fn credential(&self) -> RegistryAuth {
        self.credential
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The challenge of `response` (every `WWW-Authenticate` field, joined) if it is a 401
    /// from the registry's own origin: one from where a redirect led names a token
    /// service of that host's choosing.
    fn challenge(&self, response: &Response) -> Option<String> {
        if response.status() != StatusCode::UNAUTHORIZED
            || response.url().origin() != self.repository.origin()
        {
            return None;
        }
        www_authenticate::joined(response.headers())
    }

    /// [`Registry::send`] with `credential`, once.
    async fn send_with(
        &self,
        request: Outgoing,
        credential: &RegistryAuth,
        off_origin: OffOrigin,
    ) -> Result<Response, Failed> {
        let origin = self.repository.origin();
        let credential = match credential {
            RegistryAuth::Anonymous => None,
            RegistryAuth::Basic(user, password) => Some(Credential::basic(origin, user, password)),
            RegistryAuth::Bearer(token) => {
                Some(Credential::bearer(origin, token).ok_or_else(|| {
                    Failed::lasting("the registry's token cannot be sent in a header")
                })?)
            }
        };
        self.http
            .send(request, credential, off_origin)
            .await
            .map_err(|e| e.context("the registry"))
    }

    /// The registry's answer to a push's `request`, its body unread, if it is `status`;
    /// a redirect off the registry's origin is refused.
    async fn expect(&self, request: Outgoing, status: StatusCode) -> Result<Response, Failed> {
        let response = self.send(request, OffOrigin::Refuse).await?;
        if response.status() != status {
            let answered = response.status();
            let sent_there = response.url().origin() == self.repository.origin();
            return Err(Failed::answered(
                refusal(response).await,
                answered,
                sent_there,
            ));
        }
        Ok(response)
    }
}

/// The most of a refusal's body read, and the most of what it says that is shown.
const MAX_ERROR_BODY_BYTES: usize = 16 << 10;
const MAX_SUMMARY_CHARS: usize = 200;

/// "the registry answered STATUS", and what it said if its body is an OCI error: its
/// codes (DENIED, NAME_UNKNOWN, SIZE_INVALID…) are what a user acts on, the status alone
/// rarely. The body is read to a bound, and whatever goes wrong reading it shows nothing.
async fn refusal(mut response: Response) -> String {
    let status = response.status();
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    match error_summary(&body) {
        Some(summary) => format!("the registry answered {status}: {summary}"),
        None => format!("the registry answered {status}"),
    }
}

/// The `code: message` of each entry of an OCI error body (`{"errors":[{"code",
/// "message", "detail"}]}`), `; `-separated, in printable ASCII (anything else, a control
/// character included, shown as `?`: it goes to a terminal) and cut to
/// [`MAX_SUMMARY_CHARS`]; `None` if the body is not one or says nothing.
fn error_summary(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Body {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        code: Option<String>,
        message: Option<String>,
    }
    let body: Body = serde_json::from_slice(body).ok()?;
    let entries: Vec<String> = body
        .errors
        .into_iter()
        .filter_map(|entry| match (entry.code, entry.message) {
            (Some(code), Some(message)) => Some(format!("{code}: {message}")),
            (Some(said), None) | (None, Some(said)) => Some(said),
            (None, None) => None,
        })
        .collect();
    let text = entries.join("; ");
    if text.is_empty() {
        return None;
    }
    let printable = |c: char| match c {
        ' ' => c,
        c if c.is_ascii_graphic() => c,
        _ => '?',
    };
    let mut summary: String = text.chars().map(printable).collect();
    if summary.len() > MAX_SUMMARY_CHARS {
        summary.truncate(MAX_SUMMARY_CHARS - 3);
        summary.push_str("...");
    }
    Some(summary)
}

/// What answers `challenge` (every `WWW-Authenticate` field of an answer, joined): a
/// token for `scope` from the service a `Bearer` challenge names (asked with the `basic`
/// credentials if any), the `basic` credentials for a `Basic` challenge, or nothing.
async fn answer_challenge(
    http: &Client,
    challenge: &str,
    scope: &str,
    basic: Option<(&str, &str)>,
    local: bool,
) -> Result<RegistryAuth, Failed> {
    let scheme = |name| www_authenticate::params(challenge, name);
    if let Some(params) = scheme("bearer") {
        Ok(RegistryAuth::Bearer(
            token(http, &params, scope, basic, local).await?,
        ))
    } else if let (Some(_), Some((user, password))) = (scheme("basic"), basic) {
        Ok(RegistryAuth::Basic(user.into(), password.into()))
    } else {
        Ok(RegistryAuth::Anonymous)
    }
}

/// A token for `scope` from the token service a `Bearer` challenge's `params` name
/// (`realm`, and `service` if given), asked with the `basic` credentials if any.
async fn token(
    http: &Client,
    params: &[(String, String)],
    scope: &str,
    basic: Option<(&str, &str)>,
    local: bool,
) -> Result<String, Failed> {
    let param = |name: &str| {
        params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    // Each refusal below is this client's rule applied to the registry's answer: asking
    // again gets the same answer, so each is lasting.
    let realm = param("realm")
        .ok_or_else(|| Failed::lasting("the registry's Bearer challenge names no realm"))?;
    let mut url = Url::parse(realm)
        .map_err(|_| Failed::lasting("the registry's token service (realm) is not a URL"))?;
    if !secure(&url, local) {
        return Err(Failed::lasting(
            "the registry's token service (realm) is plain http: refused",
        ));
    }
    url.query_pairs_mut().append_pair("scope", scope);
    if let Some(service) = param("service") {
        url.query_pairs_mut().append_pair("service", service);
    }
    // The realm's origin, and no other, gets the basic credentials.
    let realm = url.origin();
    let credential = basic.map(|(user, password)| Credential::basic(realm.clone(), user, password));
    let answer = http
        .send(
            Outgoing::new(Method::GET, url),
            credential,
            OffOrigin::Follow,
        )
        .await
        .map_err(|e| e.context("the token service"))?;
    let answer = read(answer, MAX_TOKEN_ANSWER_BYTES, "the token service", &realm).await?;
    #[derive(serde::Deserialize)]
    struct Answer {
        token: Option<String>,
        access_token: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(&answer)
        .map_err(|_| Failed::lasting("the token service's answer is not a token response"))?;
    let given = |token: Option<String>| token.filter(|token| !token.is_empty());
    let token = given(answer.token)
        .or(given(answer.access_token))
        .ok_or_else(|| Failed::lasting("the token service's answer holds no token"))?;
    // Checked once here, with a clear error: every request would fail on it later.
    if HeaderValue::try_from(format!("Bearer {token}")).is_err() {
        return Err(Failed::lasting(
            "the token service's token cannot be sent in a header",
        ));
    }
    Ok(token)
}

/// Where a blob goes: the `location` the registry named in its answer from `answered`
/// (relative to it, or whole), which must be on the registry's own origin, the origin of
/// `repository` (scheme, host and port), or nothing is sent there.
fn upload_location(repository: &Url, answered: &Url, location: &str) -> Result<Url, String> {
    // Only its origin is named: a location elsewhere may carry a signature granting
    // writes to object storage.
    let url = answered
        .join(location)
        .map_err(|_| "the registry's upload location is not a URL".to_string())?;
    if url.origin() != repository.origin() {
        return Err(format!(
            "the registry's upload location, on {}, is not on the registry's origin {}: \
             refused, nothing sent there",
            url.origin().ascii_serialization(),
            repository.origin().ascii_serialization()
        ));
    }
    Ok(url)
}

/// The body of `who`'s `response`, if it is `200 OK`, refused once it is larger than
/// `max` bytes (at once if its declared length is).
async fn read(
    mut response: Response,
    max: u64,
    who: &str,
    asked: &url::Origin,
) -> Result<Vec<u8>, Failed> {
    let status = response.status();
    if status != StatusCode::OK {
        let answered = format!("{who} answered {status}");
        let sent_there = response.url().origin() == *asked;
        return Err(Failed::answered(answered, status, sent_there));
    }
    // Larger than its manifest says (or than any answer of its kind may be): the bytes
    // the digest names are what they are, asking again gets the same.
    let too_large = || Failed::lasting(format!("{who}'s answer is larger than {max} bytes"));
    let declared = response.content_length();
    if declared.is_some_and(|length| length > max) {
        return Err(too_large());
    }
    // Room for what is declared (no more than the bound), so the buffer does not double.
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0) as usize);
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| network(e).context(who))?
    {
        if (bytes.len() + chunk.len()) as u64 > max {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// What a request that got no answer (`error`) says: transient (not reached, reset, timed
/// out), but lasting if the registry's certificate does not verify, which it will not do
/// either when asked again.
fn network(error: reqwest::Error) -> Failed {
    match refused_certificate(&error) {
        true => Failed::lasting(describe(error)),
        false => Failed::transient(describe(error)),
    }
}

/// Whether rustls refused the peer's certificate somewhere in `error`'s causes (expired,
/// for another name, of an unknown issuer…).
fn refused_certificate(error: &reqwest::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        if let Some(rustls::Error::InvalidCertificate(_)) = error.downcast_ref() {
            return true;
        }
        // An io::Error's `source` is the source of the error it wraps, skipping that
        // error: rustls's comes wrapped in two.
        cause = match error
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            Some(wrapped) => Some(wrapped),
            None => error.source(),
        };
    }
    false
}

/// `error` with its causes, without its URL (which the caller names already).
fn describe(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// https, or plain http to a loopback host when the registry itself is `local` (a remote
/// registry's pointer to a local port would reach whatever listens there, in clear).
fn secure(url: &Url, local: bool) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => local && url.host_str().is_some_and(is_loopback),
        _ => false,
    }
}

/// True for `localhost`, `127.0.0.0/8` and `::1`, with or without a port and brackets.
pub(crate) fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => registry.split(':').next().unwrap_or_default(),
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// reqwest is built without a TLS provider of its own: use ring, like the rest of the
/// host. An embedder's earlier choice stands (install_default then fails, harmlessly).
pub(crate) fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A scriptable loopback "registry" for the tests of this module and of `oci`.
#[cfg(test)]
pub(crate) mod fake {
    use std::net::SocketAddr;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// An HTTP/1.1 answer with `headers` (each ending in CRLF) and `body`; the connection
    /// closes after it.
    pub fn answer(status: &str, headers: &str, body: &[u8]) -> Vec<u8> {
        let head = format!(
            "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        [head.as_bytes(), body].concat()
    }

    /// A loopback "registry" that reads each request (one per connection) and sends what
    /// `respond` makes of its head, its body and the registry's own address.
    pub async fn answering_with_body(
        respond: impl Fn(&str, Vec<u8>, SocketAddr) -> Vec<u8> + Send + Sync + 'static,
    ) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let respond = Arc::new(respond);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let respond = Arc::clone(&respond);
                tokio::spawn(async move {
                    let mut bytes = Vec::new();
                    let head_end = |b: &[u8]| b.windows(4).position(|w| w == b"\r\n\r\n");
                    if !read_until(&mut stream, &mut bytes, |b| head_end(b).is_some()).await {
                        return;
                    }
                    let end = head_end(&bytes).unwrap_or_default() + 4;
                    let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
                    let length: usize = head
                        .to_ascii_lowercase()
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if !read_until(&mut stream, &mut bytes, |b| b.len() >= end + length).await {
                        return;
                    }
                    let body = bytes[end..end + length].to_vec();
                    let _ = stream.write_all(&respond(&head, body, addr)).await;
                });
            }
        });
        addr
    }

    /// Reads `stream` onto `bytes` until `done` holds; false if the stream ends first.
    async fn read_until(
        stream: &mut tokio::net::TcpStream,
        bytes: &mut Vec<u8>,
        done: impl Fn(&[u8]) -> bool,
    ) -> bool {
        let mut buffer = [0; 65536];
        while !done(bytes) {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => bytes.extend_from_slice(&buffer[..n]),
            }
        }
        true
    }

    /// [`answering_with_body`] for a `respond` that needs the head alone.
    pub async fn answering(
        respond: impl Fn(&str, SocketAddr) -> Vec<u8> + Send + Sync + 'static,
    ) -> SocketAddr {
        answering_with_body(move |head, _, addr| respond(head, addr)).await
    }
}

#[cfg(test)]
mod tests {
    use super::fake::{answer, answering};
    use super::*;

    fn reference(addr: std::net::SocketAddr) -> Reference {
        format!("{addr}/ahp/interceptor:0.1").parse().unwrap()
    }

    async fn manifest_of(
        addr: std::net::SocketAddr,
        auth: &RegistryAuth,
    ) -> Result<Vec<u8>, String> {
        Ok(Registry::open(&reference(addr), auth, Access::Pull)
            .await?
            .manifest("0.1")
            .await?)
    }

    /// Basic credentials go to a registry that challenges `Basic`, and to no other.
    #[tokio::test]
    async fn basic_credentials_go_where_the_registry_asks_for_them() {
        let basic = RegistryAuth::Basic("reader".into(), "s3cret".into());
        // base64("reader:s3cret")
        let credentials = "authorization: Basic cmVhZGVyOnMzY3JldA==";
        let addr = answering(move |request, _| match request {
            r if r.starts_with("GET /v2/ ") => answer(
                "401 Unauthorized",
                "WWW-Authenticate: Basic realm=\"r\"\r\n",
                b"",
            ),
            r if r.contains(credentials) => answer("200 OK", "", b"{}"),
            _ => answer("401 Unauthorized", "", b""),
        })
        .await;
        assert_eq!(manifest_of(addr, &basic).await.unwrap(), b"{}");
        let error = manifest_of(addr, &RegistryAuth::Anonymous)
            .await
            .unwrap_err();
        assert_eq!(error, "the registry answered 401 Unauthorized");
        // A registry that asks for nothing gets nothing, credentials or not.
        let addr = answering(|request, _| match request {
            r if r.to_ascii_lowercase().contains("authorization:") => {
                answer("400 Bad Request", "", b"")
            }
            r if r.starts_with("GET /v2/ahp/interceptor/manifests/0.1 ") => {
                answer("200 OK", "", b"{}")
            }
            r if r.starts_with("GET /v2/ ") => answer("200 OK", "", b"{}"),
            _ => answer("404 Not Found", "", b""),
        })
        .await;
        assert_eq!(manifest_of(addr, &basic).await.unwrap(), b"{}");
        assert_eq!(
            manifest_of(addr, &RegistryAuth::Anonymous).await.unwrap(),
            b"{}"
        );
    }

    /// A `Bearer` challenge: a token for the repository and the access (pull, or pull and
    /// push) from the service it names (asked with the basic credentials, if any), sent
    /// with every request.
    #[tokio::test]
    async fn a_bearer_challenge_gets_a_token_for_the_access_from_its_service() {
        let addr = answering(|request, addr| match request {
            r if r.starts_with("GET /v2/ ") => {
                let challenge = format!(
                    "WWW-Authenticate: Bearer realm=\"http://{addr}/token\",service=\"reg\"\r\n"
                );
                answer("401 Unauthorized", &challenge, b"")
            }
            r if r.starts_with(
                "GET /token?scope=repository%3Aahp%2Finterceptor%3Apull&service=reg ",
            ) && r.contains("authorization: Basic cmVhZGVyOnMzY3JldA==") =>
            {
                answer("200 OK", "", br#"{"token":"t0k","expires_in":300}"#)
            }
            r if r.starts_with(
                "GET /token?scope=repository%3Aahp%2Finterceptor%3Apull%2Cpush&service=reg ",
            ) && r.contains("authorization: Basic cmVhZGVyOnMzY3JldA==") =>
            {
                answer("200 OK", "", br#"{"token":"push-t0k"}"#)
            }
            r if r.starts_with("GET /token?") => answer("401 Unauthorized", "", b"no"),
            r if r.contains("authorization: Bearer t0k") => answer("200 OK", "", b"{}"),
            _ => answer("401 Unauthorized", "", b""),
        })
        .await;
        let basic = RegistryAuth::Basic("reader".into(), "s3cret".into());
        assert_eq!(manifest_of(addr, &basic).await.unwrap(), b"{}");
        // For a push, a token for pushing.
        let pushing = Registry::open(&reference(addr), &basic, Access::Push).await;
        assert_eq!(
            pushing.unwrap().credential(),
            RegistryAuth::Bearer("push-t0k".into())
        );
        // Without credentials the service refuses, in its own words that are not repeated.
        let error = manifest_of(addr, &RegistryAuth::Anonymous)
            .await
            .unwrap_err();
        assert_eq!(error, "the token service answered 401 Unauthorized");
    }

    /// A registry that answers `/v2/` without a challenge and wants a token for its
    /// manifests, anonymous pulls included (a public repository): the manifest's `Bearer`
    /// challenge is answered with a token asked for without credentials, once per
    /// request, and the token goes with the requests after it. A `Basic` challenge with no
    /// credentials to give leaves the 401 standing.
    #[tokio::test]
    async fn a_bearer_challenge_after_v2_is_answered_for_an_anonymous_pull() {
        use std::sync::{Arc, Mutex};
        let tokens = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = Arc::clone(&tokens);
        let addr = answering(move |request, addr| match request {
            r if r.starts_with("GET /v2/ ") => answer("200 OK", "", b"{}"),
            r if r.starts_with("GET /token?") => {
                log.lock().unwrap().push(r.to_ascii_lowercase());
                answer("200 OK", "", br#"{"token":"t0k"}"#)
            }
            r if r.contains("authorization: Bearer t0k") && r.contains("/manifests/0.1 ") => {
                answer("200 OK", "", b"{}")
            }
            r if r.contains("/manifests/basic ") => answer(
                "401 Unauthorized",
                "WWW-Authenticate: Basic realm=\"r\"\r\n",
                b"",
            ),
            _ => {
                let challenge = format!(
                    "WWW-Authenticate: Bearer realm=\"http://{addr}/token\",service=\"reg\",\
                     scope=\"repository:ahp/interceptor:pull\"\r\n"
                );
                answer("401 Unauthorized", &challenge, b"")
            }
        })
        .await;
        let registry = Registry::open(&reference(addr), &RegistryAuth::Anonymous, Access::Pull)
            .await
            .unwrap();
        assert_eq!(registry.manifest("0.1").await.unwrap(), b"{}");
        assert_eq!(registry.credential(), RegistryAuth::Bearer("t0k".into()));
        // Refused even with the token: asked once more, not again and again.
        let error = String::from(registry.manifest("other").await.unwrap_err());
        assert_eq!(error, "the registry answered 401 Unauthorized");
        let error = String::from(registry.manifest("basic").await.unwrap_err());
        assert_eq!(error, "the registry answered 401 Unauthorized");
        let tokens = tokens.lock().unwrap();
        let asked = "get /token?scope=repository%3aahp%2finterceptor%3apull&service=reg ";
        assert_eq!(tokens.len(), 2, "{tokens:?}");
        assert!(
            tokens.iter().all(|head| head.starts_with(asked)),
            "{tokens:?}"
        );
        assert!(
            !tokens.iter().any(|head| head.contains("authorization:")),
            "{tokens:?}"
        );
    }

    /// A challenge from another origin, where the registry's `/v2/` redirected, is not
    /// the registry's: its token service is asked nothing, and the credentials go nowhere.
    #[tokio::test]
    async fn a_challenge_from_where_the_registry_redirected_is_not_answered() {
        use std::sync::{Arc, Mutex};
        let asked = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = Arc::clone(&asked);
        let elsewhere = answering(move |request, addr| {
            let line = request.lines().next().unwrap_or_default().to_string();
            log.lock().unwrap().push(line);
            match request {
                r if r.starts_with("GET /token?") => answer("200 OK", "", br#"{"token":"t0k"}"#),
                _ => {
                    let realm =
                        format!("WWW-Authenticate: Bearer realm=\"http://{addr}/token\"\r\n");
                    answer("401 Unauthorized", &realm, b"")
                }
            }
        })
        .await;
        let registry = answering(move |request, _| match request {
            r if r.starts_with("GET /v2/ ") => answer(
                "307 Temporary Redirect",
                &format!("Location: http://{elsewhere}/v2/\r\n"),
                b"",
            ),
            _ => answer("404 Not Found", "", b""),
        })
        .await;
        let basic = RegistryAuth::Basic("reader".into(), "s3cret".into());
        let opened = Registry::open(&reference(registry), &basic, Access::Pull).await;
        assert_eq!(opened.unwrap().credential(), RegistryAuth::Anonymous);
        assert_eq!(*asked.lock().unwrap(), ["GET /v2/ HTTP/1.1"]);
    }

    /// The token service is held to what the registry is: no plain http off loopback, a
    /// bounded answer that must hold a token.
    #[tokio::test]
    async fn a_token_service_is_bounded_and_never_plain_http_off_loopback() {
        let challenged = |realm: String, token_answer: Vec<u8>| {
            answering(move |request, addr| match request {
                r if r.starts_with("GET /v2/ ") => {
                    let realm = realm.replace("ADDR", &addr.to_string());
                    let challenge = format!("WWW-Authenticate: Bearer realm=\"{realm}\"\r\n");
                    answer("401 Unauthorized", &challenge, b"")
                }
                r if r.starts_with("GET /token?") => token_answer.clone(),
                _ => answer("401 Unauthorized", "", b""),
            })
        };
        let cases = [
            (
                "http://192.0.2.1/token".to_string(),
                Vec::new(),
                "the registry's token service (realm) is plain http: refused",
            ),
            (
                "http://ADDR/token".to_string(),
                answer("200 OK", "", &vec![b' '; 70_000]),
                "the token service's answer is larger than 65536 bytes",
            ),
            (
                "http://ADDR/token".to_string(),
                answer("200 OK", "", br#"{"token":""}"#),
                "the token service's answer holds no token",
            ),
            (
                "http://ADDR/token".to_string(),
                answer("200 OK", "", br#"{"token":"a\u0001b"}"#),
                "the token service's token cannot be sent in a header",
            ),
            (
                "http://ADDR/token".to_string(),
                answer("200 OK", "", b"<html>"),
                "the token service's answer is not a token response",
            ),
            (
                "not a url".to_string(),
                Vec::new(),
                "the registry's token service (realm) is not a URL",
            ),
        ];
        for (realm, token_answer, expected) in cases {
            let addr = challenged(realm.clone(), token_answer).await;
            let error = manifest_of(addr, &RegistryAuth::Anonymous).await.err();
            assert_eq!(error.as_deref(), Some(expected), "{realm}");
        }
    }

    /// An answer is read to its bound and no further, its length declared or not; a
    /// status other than 200 is refused.
    #[tokio::test]
    async fn an_answer_is_read_to_its_bound_and_only_a_200_counts() {
        let bound = MAX_MANIFEST_BYTES as usize;
        let chunked = |body: Vec<u8>| {
            let mut bytes =
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                    .to_vec();
            bytes.extend(format!("{:x}\r\n", body.len()).as_bytes());
            bytes.extend(body);
            bytes.extend(b"\r\n0\r\n\r\n");
            bytes
        };
        let cases = [
            (answer("200 OK", "", &vec![b' '; bound]), Ok(bound)),
            (answer("200 OK", "", &vec![b' '; bound + 1]), Err("larger")),
            (chunked(vec![b' '; bound]), Ok(bound)),
            (chunked(vec![b' '; bound + 1]), Err("larger")),
            (answer("204 No Content", "", b""), Err("answered 204")),
            (
                answer("206 Partial Content", "", b"{}"),
                Err("answered 206"),
            ),
        ];
        for (i, (manifest_answer, expected)) in cases.into_iter().enumerate() {
            let addr = answering(move |request, _| match request {
                r if r.starts_with("GET /v2/ ") => answer("200 OK", "", b"{}"),
                _ => manifest_answer.clone(),
            })
            .await;
            let got = manifest_of(addr, &RegistryAuth::Anonymous).await;
            match expected {
                Ok(length) => assert_eq!(got.map(|m| m.len()), Ok(length), "case {i}"),
                Err(part) => assert!(
                    got.as_ref().is_err_and(|e| e.contains(part)),
                    "case {i}: {got:?}"
                ),
            }
        }
    }

    /// A `localhost` registry is reached at 127.0.0.1 and its reference's port through
    /// the client's pin of `localhost`. This shows the pin keeps the port and IPv4; it
    /// cannot show the pin is there, since `localhost` resolves to loopback here anyway.
    #[tokio::test]
    async fn a_localhost_registry_is_reached_at_its_own_port() {
        let addr = answering(|request, _| match request {
            r if r.starts_with("GET /v2/ ") => answer("200 OK", "", b"{}"),
            r if r.starts_with("GET /v2/ahp/interceptor/manifests/0.1 ") => {
                answer("200 OK", "", b"{}")
            }
            _ => answer("404 Not Found", "", b""),
        })
        .await;
        let named = format!("localhost:{}/ahp/interceptor:0.1", addr.port());
        let registry = Registry::open(
            &named.parse().unwrap(),
            &RegistryAuth::Anonymous,
            Access::Pull,
        )
        .await
        .unwrap();
        assert_eq!(registry.manifest("0.1").await.unwrap(), b"{}");
    }

    #[test]
    fn only_loopback_registries_are_loopback() {
        for registry in [
            "127.0.0.1:5000",
            "localhost:5000",
            "[::1]:5000",
            "127.1.2.3",
            "LOCALHOST",
        ] {
            assert!(is_loopback(registry), "{registry}");
        }
        for registry in [
            "ghcr.io",
            "10.0.0.1:5000",
            "localhost.example.com",
            "[::2]:5000",
            "127.0.0.1.nip.io",
        ] {
            assert!(!is_loopback(registry), "{registry}");
        }
    }

    /// What registries in the wild do: `access_token` alone, a realm with a query of its
    /// own, the `Bearer` challenge in a second `WWW-Authenticate` field, after a front
    /// end's, whose quote left open ends with its field.
    #[tokio::test]
    async fn a_token_is_got_the_ways_registries_offer_it() {
        let addr = answering(|request, addr| match request {
            r if r.starts_with("GET /v2/ ") => {
                let challenges = format!(
                    "WWW-Authenticate: Basic realm=\"front\r\n\
                     WWW-Authenticate: Bearer realm=\"http://{addr}/token?tenant=t1\"\r\n"
                );
                answer("401 Unauthorized", &challenges, b"")
            }
            r if r.starts_with(
                "GET /token?tenant=t1&scope=repository%3Aahp%2Finterceptor%3Apull ",
            ) =>
            {
                answer("200 OK", "", br#"{"token":"","access_token":"t0k"}"#)
            }
            r if r.contains("authorization: Bearer t0k") => answer("200 OK", "", b"{}"),
            _ => answer("401 Unauthorized", "", b""),
        })
        .await;
        assert_eq!(
            manifest_of(addr, &RegistryAuth::Anonymous).await.unwrap(),
            b"{}"
        );
    }

    /// A redirect is followed only where the registry may be reached, and the credentials
    /// stay with the registry: not to another host (a second port counts as one).
    #[tokio::test]
    async fn a_redirect_never_takes_credentials_along_nor_goes_to_plain_http() {
        let elsewhere =
            answering(
                |request, _| match request.to_ascii_lowercase().contains("authorization:") {
                    true => answer("400 Bad Request", "", b""),
                    false => answer("200 OK", "", b"{\"elsewhere\":1}"),
                },
            )
            .await;
        let addr = answering(move |request, _| match request {
            r if r.starts_with("GET /v2/ ") => answer(
                "401 Unauthorized",
                "WWW-Authenticate: Basic realm=\"r\"\r\n",
                b"",
            ),
            r if r.starts_with("GET /v2/ahp/interceptor/manifests/0.1 ") => {
                let to = format!("Location: http://{elsewhere}/blob\r\n");
                answer("307 Temporary Redirect", &to, b"")
            }
            r if r.starts_with("GET /v2/ahp/interceptor/manifests/far ") => answer(
                "307 Temporary Redirect",
                "Location: http://192.0.2.1/blob\r\n",
                b"",
            ),
            _ => answer("404 Not Found", "", b""),
        })
        .await;
        let basic = RegistryAuth::Basic("reader".into(), "s3cret".into());
        let registry = Registry::open(&reference(addr), &basic, Access::Pull)
            .await
            .unwrap();
        assert_eq!(registry.credential(), basic, "the registry asked for them");
        assert_eq!(
            registry.manifest("0.1").await.unwrap(),
            b"{\"elsewhere\":1}"
        );
        let error = String::from(registry.manifest("far").await.unwrap_err());
        assert!(error.contains("a redirect to plain http"), "{error}");
    }

    /// The request heads a loopback "CDN" received, lowercased, in order.
    type Heads = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

    /// A loopback "CDN" (another origin: another port) that redirects `/a` to `/b` on
    /// itself and answers `/b` with `body`, recording every request head.
    async fn cdn(body: &'static [u8]) -> (std::net::SocketAddr, Heads) {
        let heads = Heads::default();
        let log = std::sync::Arc::clone(&heads);
        let addr = answering(move |request, addr| {
            log.lock().unwrap().push(request.to_ascii_lowercase());
            match request {
                r if r.starts_with("GET /a ") => {
                    let to = format!("Location: http://{addr}/b\r\n");
                    answer("307 Temporary Redirect", &to, b"")
                }
                r if r.starts_with("GET /b ") => answer("200 OK", "", body),
                _ => answer("404 Not Found", "", b""),
            }
        })
        .await;
        (addr, heads)
    }

    /// Asserts that `heads` (another origin's log) holds exactly the request `lines`, in
    /// lower case, and that none of them carried an `Authorization` field.
    fn assert_asked_without_credential(heads: &Heads, lines: &[&str], case: &str) {
        let heads = heads.lock().unwrap();
        let asked: Vec<&str> = heads
            .iter()
            .map(|head| head.lines().next().unwrap_or_default())
            .collect();
        assert_eq!(asked, lines, "{case}");
        assert!(
            !heads.iter().any(|head| head.contains("authorization:")),
            "{case}: a credential went off its origin: {heads:?}"
        );
    }

    /// A blob GET the registry redirects to a CDN, which redirects it again on its own
    /// origin: every hop off the registry goes without the credential (the basic password,
    /// or the token), and the pull still gets its bytes.
    #[tokio::test]
    async fn credentials_never_reach_a_second_hop_off_the_registry() {
        const BLOB: &[u8] = b"component bytes";
        let digest = crate::component_cache::sha256_digest(BLOB);
        let basic = RegistryAuth::Basic("reader".into(), "s3cret".into());
        for bearer in [false, true] {
            let (cdn, heads) = cdn(BLOB).await;
            let addr = answering(move |request, addr| match request {
                r if r.starts_with("GET /v2/ ") => {
                    let challenge = match bearer {
                        true => {
                            format!("WWW-Authenticate: Bearer realm=\"http://{addr}/token\"\r\n")
                        }
                        false => "WWW-Authenticate: Basic realm=\"r\"\r\n".to_string(),
                    };
                    answer("401 Unauthorized", &challenge, b"")
                }
                r if r.starts_with("GET /token?") => answer("200 OK", "", br#"{"token":"t0k"}"#),
                r if r.starts_with("GET /v2/ahp/interceptor/blobs/sha256:")
                    && r.to_ascii_lowercase().contains("authorization:") =>
                {
                    let to = format!("Location: http://{cdn}/a\r\n");
                    answer("307 Temporary Redirect", &to, b"")
                }
                _ => answer("401 Unauthorized", "", b""),
            })
            .await;
            let registry = Registry::open(&reference(addr), &basic, Access::Pull)
                .await
                .unwrap();
            let bytes = registry.blob(&digest, BLOB.len() as u64).await;
            assert_eq!(bytes.as_deref(), Ok(BLOB), "bearer: {bearer}");
            let hops = ["get /a http/1.1", "get /b http/1.1"];
            assert_asked_without_credential(&heads, &hops, &format!("bearer: {bearer}"));
        }
    }

    /// A hop that has left the registry leaves its credential behind for good: a host
    /// that redirects back to the registry does not get a URL of its choice fetched with
    /// the credential.
    #[tokio::test]
    async fn a_credential_left_behind_is_not_taken_up_again() {
        let registry_addr = std::sync::Arc::new(std::sync::OnceLock::new());
        let back = std::sync::Arc::clone(&registry_addr);
        let elsewhere = answering(move |_, _| {
            let registry: &std::net::SocketAddr = back.get().unwrap();
            let to = format!("Location: http://{registry}/v2/ahp/interceptor/back\r\n");
            answer("307 Temporary Redirect", &to, b"")
        })
        .await;
        let addr = answering(move |request, _| match request {
            r if r.starts_with("GET /v2/ ") => answer(
                "401 Unauthorized",
                "WWW-Authenticate: Basic realm=\"r\"\r\n",
                b"",
            ),
            r if r.to_ascii_lowercase().contains("authorization:")
                && r.starts_with("GET /v2/ahp/interceptor/manifests/0.1 ") =>
            {
                let to = format!("Location: http://{elsewhere}/a\r\n");
                answer("307 Temporary Redirect", &to, b"")
            }
            r if r.to_ascii_lowercase().contains("authorization:") => {
                answer("400 Bad Request", "", b"")
            }
            r if r.starts_with("GET /v2/ahp/interceptor/back ") => answer("200 OK", "", b"{}"),
            _ => answer("404 Not Found", "", b""),
        })
        .await;
        registry_addr.set(addr).unwrap();
        let basic = RegistryAuth::Basic("reader".into(), "s3cret".into());
        assert_eq!(manifest_of(addr, &basic).await, Ok(b"{}".to_vec()));
    }

    /// The token service's basic credentials are for the realm's origin alone: a realm
    /// that redirects to a CDN, which redirects again on its own origin, gets its token
    /// asked for without them on both hops.
    #[tokio::test]
    async fn the_token_services_credentials_never_reach_a_second_hop_off_its_origin() {
        let (cdn, heads) = cdn(br#"{"token":"t0k"}"#).await;
        let realm = answering(move |request, _| match request {
            r if r.starts_with("GET /token?")
                && r.contains("authorization: Basic cmVhZGVyOnMzY3JldA==") =>
            {
                let to = format!("Location: http://{cdn}/a\r\n");
                answer("307 Temporary Redirect", &to, b"")
            }
            _ => answer("401 Unauthorized", "", b""),
        })
        .await;
        let addr = answering(move |request, _| match request {
            r if r.starts_with("GET /v2/ ") => {
                let challenge =
                    format!("WWW-Authenticate: Bearer realm=\"http://{realm}/token\"\r\n");
                answer("401 Unauthorized", &challenge, b"")
            }
            r if r.contains("authorization: Bearer t0k") => answer("200 OK", "", b"{}"),
            _ => answer("401 Unauthorized", "", b""),
        })
        .await;
        let basic = RegistryAuth::Basic("reader".into(), "s3cret".into());
        assert_eq!(manifest_of(addr, &basic).await.unwrap(), b"{}");
        let hops = ["get /a http/1.1", "get /b http/1.1"];
        assert_asked_without_credential(&heads, &hops, "the token service's");
    }

    /// A push is for the registry alone: a redirect of one of its requests to another
    /// origin is refused, and nothing (neither the blob nor the token) is sent there.
    #[tokio::test]
    async fn a_push_refuses_a_redirect_off_the_registry() {
        let (cdn, heads) = cdn(b"").await;
        let addr = answering(move |request, _| match request {
            r if r.starts_with("GET /v2/ ") => answer("200 OK", "", b"{}"),
            r if r.starts_with("HEAD /v2/ahp/interceptor/blobs/") => {
                answer("404 Not Found", "", b"")
            }
            r if r.starts_with("POST /v2/ahp/interceptor/blobs/uploads/ ") => answer(
                "202 Accepted",
                "Location: /v2/ahp/interceptor/blobs/uploads/u\r\n",
                b"",
            ),
            _ => {
                let to = format!("Location: http://{cdn}/a\r\n");
                answer("307 Temporary Redirect", &to, b"")
            }
        })
        .await;
        let registry = Registry::open(
            &reference(addr),
            &RegistryAuth::Bearer("t0k".into()),
            Access::Push,
        )
        .await
        .unwrap();
        let blob = bytes::Bytes::from_static(b"component bytes");
        let digest = crate::component_cache::sha256_digest(&blob);
        let error = registry.push_blob(&digest, blob).await.unwrap_err();
        assert!(error.message.contains("another origin"), "{error}");
        let error = registry
            .push_manifest("0.1", "application/json", b"{}".to_vec())
            .await
            .unwrap_err();
        assert!(error.message.contains("another origin"), "{error}");
        assert_asked_without_credential(&heads, &[], "requests to the other origin");
    }

    /// A registry that keeps its blobs in cloud storage answers the push's "held
    /// already?" HEAD with a redirect to the storage: followed (a HEAD sends nothing), with
    /// no credential, and a blob found there is not uploaded again.
    #[tokio::test]
    async fn a_held_blob_redirected_to_storage_is_not_uploaded_again() {
        let heads = Heads::default();
        let log = std::sync::Arc::clone(&heads);
        let storage = answering(move |request, _| {
            log.lock().unwrap().push(request.to_ascii_lowercase());
            answer("200 OK", "", b"")
        })
        .await;
        let uploads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&uploads);
        let addr = answering(move |request, _| match request {
            r if r.starts_with("GET /v2/ ") => answer("200 OK", "", b"{}"),
            r if r.starts_with("HEAD /v2/ahp/interceptor/blobs/") => {
                let to = format!("Location: http://{storage}/held\r\n");
                answer("307 Temporary Redirect", &to, b"")
            }
            _ => {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                answer("500 Internal Server Error", "", b"")
            }
        })
        .await;
        let registry = Registry::open(
            &reference(addr),
            &RegistryAuth::Bearer("t0k".into()),
            Access::Push,
        )
        .await
        .unwrap();
        let blob = bytes::Bytes::from_static(b"component bytes");
        let digest = crate::component_cache::sha256_digest(&blob);
        assert_eq!(registry.push_blob(&digest, blob).await, Ok(()));
        assert_eq!(
            uploads.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "uploaded again"
        );
        assert_asked_without_credential(&heads, &["head /held http/1.1"], "the storage");
    }

    /// Every hop is held to the rules of the first: plain http only to loopback (here
    /// after a hop off the registry), at most 10 redirects.
    #[tokio::test]
    async fn every_redirect_hop_is_held_to_the_same_rules() {
        let far = answering(|_, _| {
            answer(
                "307 Temporary Redirect",
                "Location: http://192.0.2.1/x\r\n",
                b"",
            )
        })
        .await;
        // `/N` redirects to `/N-1`, `/0` answers.
        let chain = answering(|request, addr| {
            let n: u32 = request
                .strip_prefix("GET /")
                .and_then(|r| r.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            match n {
                0 => answer("200 OK", "", b"{}"),
                n => {
                    let to = format!("Location: http://{addr}/{}\r\n", n - 1);
                    answer("307 Temporary Redirect", &to, b"")
                }
            }
        })
        .await;
        let addr = answering(move |request, _| match request {
            r if r.starts_with("GET /v2/ ") => answer("200 OK", "", b"{}"),
            r if r.starts_with("GET /v2/ahp/interceptor/manifests/far ") => answer(
                "307 Temporary Redirect",
                &format!("Location: http://{far}/\r\n"),
                b"",
            ),
            r => {
                // `manifests/N`: N redirects in all.
                let n: u32 = r
                    .strip_prefix("GET /v2/ahp/interceptor/manifests/")
                    .and_then(|r| r.split(' ').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let to = format!("Location: http://{chain}/{}\r\n", n.saturating_sub(1));
                answer("307 Temporary Redirect", &to, b"")
            }
        })
        .await;
        let registry = Registry::open(&reference(addr), &RegistryAuth::Anonymous, Access::Pull)
            .await
            .unwrap();
        let error = String::from(registry.manifest("far").await.unwrap_err());
        assert!(error.contains("a redirect to plain http"), "{error}");
        assert_eq!(registry.manifest("10").await.unwrap(), b"{}");
        let error = String::from(registry.manifest("11").await.unwrap_err());
        assert!(error.contains("more than 10 redirects"), "{error}");
    }

    /// An upload location is taken relative to where the registry answered, and only on
    /// the registry's origin: another scheme, host or port is refused, naming it.
    #[test]
    fn an_upload_location_must_be_on_the_registrys_origin() {
        let repository = Url::parse("https://r.example/v2/ahp/interceptor").unwrap();
        let answered = Url::parse("https://r.example/v2/ahp/interceptor/blobs/uploads/").unwrap();
        let taken = |location| upload_location(&repository, &answered, location);
        for (location, url) in [
            (
                "/v2/ahp/interceptor/blobs/uploads/u?_state=s",
                "https://r.example/v2/ahp/interceptor/blobs/uploads/u?_state=s",
            ),
            ("u", "https://r.example/v2/ahp/interceptor/blobs/uploads/u"),
            ("https://R.example:443/up", "https://r.example/up"),
        ] {
            assert_eq!(
                taken(location).map(String::from),
                Ok(url.to_string()),
                "{location}"
            );
        }
        for location in [
            "http://r.example/up",
            "https://r.example:8443/up",
            "https://other.example/up",
            "//other.example/up",
            "data:,x",
        ] {
            let error = taken(location).unwrap_err();
            let origin = Url::parse("https://r.example/").unwrap().join(location);
            let origin = origin.unwrap().origin().ascii_serialization();
            assert!(error.contains(&format!("on {origin},")), "{error}");
        }
        // Only the origin of a location elsewhere is named: its query may be a signature
        // granting writes to object storage.
        let error = taken("https://bucket.example/up?X-Amz-Signature=s3cr3t").unwrap_err();
        assert!(!error.contains("s3cr3t"), "{error}");
    }

    /// What a registry says of a refusal is shown as `code: message`, in printable ASCII,
    /// at most 200 characters; a body that is not an OCI error shows nothing.
    #[test]
    fn a_registrys_error_body_is_summed_up_bounded_and_printable() {
        let body = br#"{"errors":[{"code":"DENIED","message":"denied","detail":{}},
            {"code":"UNAUTHORIZED"}]}"#;
        assert_eq!(
            error_summary(body).as_deref(),
            Some("DENIED: denied; UNAUTHORIZED")
        );
        let long = format!(
            r#"{{"errors":[{{"code":"X","message":"\u001b[2Jé{}"}}]}}"#,
            "m".repeat(500)
        );
        let summary = error_summary(long.as_bytes()).unwrap();
        assert!(summary.starts_with("X: ?[2J?mm"), "{summary}");
        assert!(summary.len() <= 200, "{summary}");
        assert!(summary.bytes().all(|b| b == b' ' || b.is_ascii_graphic()));
        for other in [&b"<html>"[..], b"{}", br#"{"errors":[]}"#] {
            assert_eq!(error_summary(other), None);
        }
    }

    #[test]
    fn only_https_or_a_local_registrys_loopback_http_is_secure() {
        for url in [
            "https://r.example/x",
            "http://127.0.0.1:5000/x",
            "http://[::1]/x",
            "http://localhost/x",
        ] {
            assert!(secure(&Url::parse(url).unwrap(), true), "{url}");
        }
        // A remote registry's pointer to a local port: https only.
        assert!(secure(&Url::parse("https://127.0.0.1/x").unwrap(), false));
        assert!(!secure(
            &Url::parse("http://127.0.0.1:5000/x").unwrap(),
            false
        ));
        for url in [
            "http://r.example/x",
            "http://10.0.0.1/x",
            "ftp://127.0.0.1/x",
            "http://localhost.example/x",
        ] {
            assert!(!secure(&Url::parse(url).unwrap(), true), "{url}");
        }
    }
}
