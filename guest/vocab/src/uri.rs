//! RFC 3986 `URI`, the shape of an event's `source`: the component checks every event's
//! against it, and the host checks the `source` it is told to stamp (`ahp hook
//! --source`) before any event is built, with the same grammar. Unit-tested with the
//! component's other syntax predicates (`guest/src/syntax/uri.rs`).

/// Whether a URL's authority carries user info (`user:password@host`): a credential
/// written into a registration or an event's `source`, which would also travel in
/// every `Host` header and log line. Only a URI with an authority (`scheme://`) has
/// any: the `@` of `mailto:ops@harness.example` is not user info. But a WHATWG URL
/// parser (a browser's, Node's) reads the authority of a special scheme's URL after
/// any run of `/` and `\` and ends it at either: `https:u:p@h/` and `https:/u:p@h/`,
/// URIs whose `@` RFC 3986 reads in a path, carry user info for it, and so here. Not
/// `file:`, whose host comes after exactly two slashes and never has user info there
/// (`file:///@scope/pkg` is a path).
pub fn has_userinfo(url: &str) -> bool {
    authority(url).is_some_and(|authority| authority.contains('@'))
}

/// A URL's authority as [`has_userinfo`] reads it: for a special scheme after any run of
/// `/` and `\\` and up to either, for another after `//` and up to the first `/`, `?` or
/// `#` (RFC 3986 §3.2); `None` where there is none.
pub(crate) fn authority(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once(':')?;
    match is_special(scheme) {
        true => rest
            .trim_start_matches(['/', '\\'])
            .split(['/', '\\', '?', '#'])
            .next(),
        false => rest
            .strip_prefix("//")
            .and_then(|rest| rest.split(['/', '?', '#']).next()),
    }
}

/// RFC 3986 §3 `URI`: `scheme ":" hier-part [ "?" query ] [ "#" fragment ]`, what the
/// schema's `"format": "uri"` asks. Absolute in that it has a scheme (never a relative
/// reference), but a fragment is allowed: §4.3's `absolute-URI` would refuse one.
/// Strict on purpose (fixture `source-malformed.invalid`): no spaces, controls, non-ASCII
/// or bad percent-escapes anywhere, because a backend deciding on `source` must see the
/// same string the harness vouched for, with no room for two readings.
pub fn is_absolute_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (hier, query) = rest.split_once('?').unwrap_or((rest, ""));
    let path = match hier.strip_prefix("//") {
        Some(after) => {
            let (authority, path) = after.split_once('/').unwrap_or((after, ""));
            if !is_authority(authority) {
                return false;
            }
            path
        }
        None => hier,
    };
    is_scheme(scheme)
        && is_encoded(path, |b| is_pchar(b) || b == b'/')
        && is_encoded(query, |b| is_pchar(b) || b == b'/' || b == b'?')
        && is_encoded(fragment, |b| is_pchar(b) || b == b'/' || b == b'?')
}

/// RFC 3986 §3.1 `scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`
fn is_scheme(scheme: &str) -> bool {
    let mut bytes = scheme.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
}

/// RFC 3986 §3.2 `authority = [ userinfo "@" ] host [ ":" port ]`; an IP literal is
/// checked for its character set only.
fn is_authority(authority: &str) -> bool {
    let (userinfo, host_port) = authority.split_once('@').unwrap_or(("", authority));
    let (host_ok, port) = match host_port.strip_prefix('[') {
        Some(literal) => {
            let Some((inside, after)) = literal.split_once(']') else {
                return false;
            };
            let inside_ok = !inside.is_empty()
                && inside
                    .bytes()
                    .all(|b| is_unreserved(b) || is_sub_delim(b) || b == b':');
            match after.strip_prefix(':') {
                Some(port) => (inside_ok, port),
                None => (inside_ok && after.is_empty(), ""),
            }
        }
        None => {
            let (host, port) = host_port.split_once(':').unwrap_or((host_port, ""));
            (
                is_encoded(host, |b| is_unreserved(b) || is_sub_delim(b)),
                port,
            )
        }
    };
    host_ok
        && port.bytes().all(|b| b.is_ascii_digit())
        && is_encoded(userinfo, |b| {
            is_unreserved(b) || is_sub_delim(b) || b == b':'
        })
}

/// Every byte is `allowed` or part of a well-formed RFC 3986 §2.1
/// `pct-encoded = "%" HEXDIG HEXDIG`.
fn is_encoded(text: &str, allowed: impl Fn(u8) -> bool) -> bool {
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        let ok = if b == b'%' {
            bytes.next().is_some_and(|h| h.is_ascii_hexdigit())
                && bytes.next().is_some_and(|h| h.is_ascii_hexdigit())
        } else {
            allowed(b)
        };
        if !ok {
            return false;
        }
    }
    true
}

/// RFC 3986 §2.3 `unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~"`
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~".contains(&b)
}

/// RFC 3986 §2.2 `sub-delims`
fn is_sub_delim(b: u8) -> bool {
    b"!$&'()*+,;=".contains(&b)
}

/// RFC 3986 §3.3 `pchar` minus `pct-encoded`, which [`is_encoded`] handles.
fn is_pchar(b: u8) -> bool {
    is_unreserved(b) || is_sub_delim(b) || b == b':' || b == b'@'
}

/// Whether `scheme` is one a WHATWG URL parser reads as special (its authority after any
/// run of `/` and `\`, ended by either: [`has_userinfo`]), but for `file:`, whose host
/// never has user info.
pub(crate) fn is_special(scheme: &str) -> bool {
    const SPECIAL: [&str; 5] = ["http", "https", "ws", "wss", "ftp"];
    SPECIAL.iter().any(|s| s.eq_ignore_ascii_case(scheme))
}
