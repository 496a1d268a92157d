//! The HTTP client every request to a registry, or to the token service it names, goes
//! through. It follows redirects itself, so that a credential goes to the origin it
//! belongs to and nowhere else.
//!
//! Why not reqwest's redirects: reqwest 0.13 follows them through tower-http's
//! `FollowRedirect`, which rebuilds every hop from the first request's headers, and
//! reqwest's policy removes `Authorization` only when the next URL's origin differs from
//! the one just left. Registry → CDN drops it; CDN → the same CDN puts it back. A CDN or
//! object store that answers with one redirect to itself would collect the registry's
//! password or token. Registries do send blob GETs to such hosts, so those redirects must
//! still be followed, only without the credential.
//!
//! Here reqwest follows none ([`reqwest::redirect::Policy::none`]) and [`Client::send`]
//! follows them hop by hop: at most [`MAX_REDIRECTS`]; each `Location` taken relative to
//! the URL that answered and held to the rule the first URL is held to
//! ([`super::secure`]); the credential sent while the request is on the credential's
//! origin, and never again once it has left it. A request that must not leave its origin
//! at all (a push: its body, and the credential it needs, are for the registry alone) is
//! refused a redirect off it instead.

use super::{describe, network, secure, Failed};
use base64::Engine as _;
use bytes::Bytes;
use reqwest::header::{
    HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_ENCODING, CONTENT_LENGTH,
    CONTENT_TYPE, LOCATION, TRANSFER_ENCODING,
};
use reqwest::{Method, Response, StatusCode, Url};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;
use url::Origin;

/// The most redirects one request follows.
pub(super) const MAX_REDIRECTS: usize = 10;

/// How long a registry may take to accept a connection, and then to send the next bytes
/// of an answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// A credential: the value of an `Authorization` field, and the one origin it is sent to.
pub(super) struct Credential {
    origin: Origin,
    authorization: HeaderValue,
}

impl Credential {
    /// `user` and `password` as HTTP Basic, for `origin`.
    pub fn basic(origin: Origin, user: &str, password: &str) -> Credential {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let mut authorization = HeaderValue::try_from(format!("Basic {encoded}"))
            .expect("base64 is always a valid header value");
        authorization.set_sensitive(true);
        Credential {
            origin,
            authorization,
        }
    }

    /// `token` as a `Bearer` token, for `origin`; `None` if it cannot be sent in a header.
    pub fn bearer(origin: Origin, token: &str) -> Option<Credential> {
        let mut authorization = HeaderValue::try_from(format!("Bearer {token}")).ok()?;
        authorization.set_sensitive(true);
        Some(Credential {
            origin,
            authorization,
        })
    }
}

/// What a redirect off the origin a request started on does.
#[derive(Clone, Copy)]
pub(super) enum OffOrigin {
    /// Followed, without the credential from there on: a read, which registries send to
    /// a CDN or an object store.
    Follow,
    /// Refused, and nothing sent there: a push.
    Refuse,
}

/// A request as each of its hops is sent, the credential apart. What a redirect changes
/// (the URL; the method and body on a 301, 302 or 303) is changed by [`Client::send`]
/// alone. A clone is the same request, to send again (its body is shared, not copied).
#[derive(Clone)]
pub(super) struct Outgoing {
    method: Method,
    url: Url,
    headers: HeaderMap,
    body: Option<Bytes>,
}

impl Outgoing {
    pub fn new(method: Method, url: Url) -> Outgoing {
        Outgoing {
            method,
            url,
            headers: HeaderMap::new(),
            body: None,
        }
    }

    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Outgoing {
        self.headers.insert(name, value);
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Outgoing {
        self.body = Some(body.into());
        self
    }
}

/// A registry's client: plain http only to loopback hosts when the registry itself is
/// `local`, https otherwise, on every hop.
pub(super) struct Client {
    http: reqwest::Client,
    local: bool,
}

impl Client {
    /// The client for a registry, `local` if it is on loopback.
    ///
    /// `localhost` is taken for loopback from its name ([`super::is_loopback`]), and gets
    /// plain http and the credentials on that ground; so it is pinned here to 127.0.0.1
    /// and ::1 rather than resolved, which could lead elsewhere (a container without a
    /// hosts entry asks DNS). Port 0 keeps the URL's port, or the scheme's.
    pub fn new(local: bool) -> Result<Client, String> {
        let loopback = [
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
        ];
        let mut http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .user_agent(concat!("ahp/", env!("CARGO_PKG_VERSION")))
            .resolve_to_addrs("localhost", &loopback)
            // Followed by `send`, which knows where the credential may go.
            .redirect(reqwest::redirect::Policy::none());
        if local {
            // A proxy from the environment would take the plain http (credentials
            // included) off the machine.
            http = http.no_proxy();
        }
        let http = http
            .build()
            .map_err(|e| format!("set up the registry client: {}", describe(e)))?;
        Ok(Client { http, local })
    }

    /// The answer to `request`, its redirects followed as `off_origin` says and the
    /// module docs describe; `credential` goes only on the hops that are on its origin
    /// before the first that is not. The error names no URL (the caller names the
    /// registry or the token service); a redirect these rules refuse is a lasting one.
    pub async fn send(
        &self,
        request: Outgoing,
        credential: Option<Credential>,
        off_origin: OffOrigin,
    ) -> Result<Response, Failed> {
        let Outgoing {
            mut method,
            mut url,
            mut headers,
            mut body,
        } = request;
        let start = url.origin();
        let mut credential = credential;
        let mut redirects = 0;
        loop {
            // Once off the credential's origin, it is dropped for good: a host it must not
            // reach could otherwise redirect back to the registry to a URL of its choice.
            credential = credential.filter(|credential| credential.origin == url.origin());
            let mut hop = self
                .http
                .request(method.clone(), url.clone())
                .headers(headers.clone());
            if let Some(credential) = &credential {
                hop = hop.header(AUTHORIZATION, credential.authorization.clone());
            }
            if let Some(body) = &body {
                hop = hop.body(body.clone());
            }
            let response = hop.send().await.map_err(network)?;
            // As tower-http's FollowRedirect (which reqwest's own redirects go through).
            let payload = match response.status() {
                StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND => method != Method::POST,
                StatusCode::SEE_OTHER => false,
                StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT => true,
                _ => return Ok(response),
            };
            let Some(location) = response.headers().get(LOCATION) else {
                return Ok(response);
            };
            let next = location
                .to_str()
                .ok()
                .and_then(|location| url.join(location).ok())
                .ok_or_else(|| Failed::lasting("a redirect to a location that is not a URL"))?;
            if redirects == MAX_REDIRECTS {
                return Err(Failed::lasting(format!(
                    "more than {MAX_REDIRECTS} redirects"
                )));
            }
            redirects += 1;
            if !secure(&next, self.local) {
                return Err(Failed::lasting("a redirect to plain http: refused"));
            }
            if let OffOrigin::Refuse = off_origin {
                if next.origin() != start {
                    return Err(Failed::lasting(format!(
                        "a redirect to another origin, {}: refused, nothing sent there",
                        next.origin().ascii_serialization()
                    )));
                }
            }
            if !payload {
                // A GET without the body (a HEAD stays a HEAD).
                if method != Method::HEAD {
                    method = Method::GET;
                }
                body = None;
                for name in [
                    CONTENT_TYPE,
                    CONTENT_LENGTH,
                    CONTENT_ENCODING,
                    TRANSFER_ENCODING,
                ] {
                    headers.remove(name);
                }
            }
            url = next;
        }
    }
}
