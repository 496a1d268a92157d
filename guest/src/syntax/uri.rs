//! URIs: the strict RFC 3986 `URI` grammar for an event's `source` (defined in
//! `ahp-vocab`, which the host's `--source` is checked with too), and the narrower
//! `^https?://` shapes a registration asks of a backend, issuer or upload URL.

pub(crate) use ahp_vocab::{has_userinfo, is_absolute_uri};

/// The schema's `^https?://` with a non-empty host, and no whitespace or control
/// characters: a registration's `transport.url` (or, with `https_only`, an OAuth
/// `issuer`), and an event's MCP server URL. Not a full RFC 3986 check: it asks what
/// dispatch depends on (a scheme to speak and a host to reach) and leaves the rest of
/// the URL to the HTTP client that connects to it. The scheme is matched as written, in
/// lowercase, as the schema's pattern does. A registration's URLs are also asked
/// [`has_a_reachable_port`] and [`unreadable_part`].
pub(crate) fn is_http_url(url: &str, https_only: bool) -> bool {
    host_and_port(url, https_only).is_some_and(|(host, _)| !host.is_empty())
        && !url.chars().any(|ch| ch.is_whitespace() || ch.is_control())
}

/// Whether an http(s) URL names no port or one a client can reach ([`is_port`]); a URL
/// of another shape is [`is_http_url`]'s to refuse.
pub(crate) fn has_a_reachable_port(url: &str) -> bool {
    host_and_port(url, false).is_none_or(|(_, port)| is_port(port))
}

/// The host of an http(s) URL (brackets of an IPv6 literal left out) and what follows it
/// in the authority (`:PORT`, or nothing).
fn host_and_port(url: &str, https_only: bool) -> Option<(&str, &str)> {
    let rest = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
        (Some(rest), _) => rest,
        (None, Some(rest)) if !https_only => rest,
        _ => return None,
    };
    let host_port = authority(rest).rsplit('@').next().unwrap_or_default();
    Some(match host_port.strip_prefix('[') {
        Some(v6) => v6.split_once(']').unwrap_or_default(),
        None => host_port.split_at(host_port.find(':').unwrap_or(host_port.len())),
    })
}

/// The origin of an http(s) URL (RFC 6454: scheme, host and port, compared without
/// case, the scheme's default port left out), as `scheme://host[:port]`; `None` for any
/// other URI.
pub(crate) fn origin(url: &str) -> Option<String> {
    let scheme = ["https", "http"].into_iter().find(|s| {
        url.get(..s.len() + 3)
            .is_some_and(|p| p.eq_ignore_ascii_case(&format!("{s}://")))
    })?;
    // The scheme in lowercase, as `host_and_port` reads it.
    let lowered = format!("{scheme}{}", &url[scheme.len()..]);
    let (host, port) = host_and_port(&lowered, false)?;
    let default = if scheme == "https" { ":443" } else { ":80" };
    let port = if port == default { "" } else { port };
    let host = host.to_ascii_lowercase();
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    Some(format!("{scheme}://{host}{port}"))
}

/// What may follow a URL's host: nothing, or `:` and a port from 1 to 65535 in decimal.
/// Anything else is no port an HTTP client can reach: one it cannot read would be
/// replaced by the scheme's default, and the event sent to another service than the one
/// registered.
fn is_port(after_host: &str) -> bool {
    match after_host.strip_prefix(':') {
        None => after_host.is_empty(),
        Some(port) => {
            port.len() <= 5
                && port.bytes().all(|b| b.is_ascii_digit())
                && port.parse::<u32>().is_ok_and(|n| (1..=65535).contains(&n))
        }
    }
}

/// A part of a URL the host's HTTP client refuses to read as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unreadable {
    /// Longer than [`MAX_URL_BYTES`].
    Length,
    /// The authority (user info, host and port).
    Authority,
    Path,
    Query,
}

/// The longest URI the host's HTTP client reads (`http::Uri`: `u16::MAX - 1`).
pub(crate) const MAX_URL_BYTES: usize = u16::MAX as usize - 1;

/// The part of a `scheme://` URL the host's HTTP client (the `http` crate's `Uri`, which
/// hyper sends with) refuses as written, if any; `None` for a URL it reads, or one of
/// another shape, which is [`is_http_url`]'s to refuse. The host parses a backend's URL
/// only when it sets the backend up, where a refusal names no field: a registration asks
/// this of every URL it names, so that the URL is refused at its pointer instead. What
/// `http` refuses (`src/uri/`, 1.x): in the authority, anything but ASCII letters,
/// digits, `-._~!$&'()*+,;=`, and `: @ [ ]` where they fit (one port colon, one
/// bracketed literal of at most eight colons, nothing empty after an `@`), and a `%`
/// outside user info or an IP literal; in the path, spaces, controls, `<`, `>` and
/// `` ` ``; in the query, spaces, controls, `"`, `<` and `>`; and more than
/// [`MAX_URL_BYTES`]. Non-ASCII is refused in every part: `http` 1.5 takes it raw in a
/// path or query, but 1.x releases before hyperium/http#715 refuse it there, and a URI
/// percent-encodes it (RFC 3986 §2.1) anyway. The fragment, cut off unsent, is left be.
pub(crate) fn unreadable_part(url: &str) -> Option<Unreadable> {
    let (_, rest) = url.split_once("://")?;
    let (before_fragment, _) = rest.split_once('#').unwrap_or((rest, ""));
    let (before_query, query) = before_fragment
        .split_once('?')
        .unwrap_or((before_fragment, ""));
    let authority = authority(before_query);
    let path = &before_query[authority.len()..];
    let graphic_but = |text: &str, refused: &[u8]| {
        text.bytes()
            .all(|b| b.is_ascii_graphic() && !refused.contains(&b))
    };
    if url.len() > MAX_URL_BYTES {
        Some(Unreadable::Length)
    } else if !is_readable_authority(authority) {
        Some(Unreadable::Authority)
    } else if !graphic_but(path, b"<>`") {
        Some(Unreadable::Path)
    } else if !graphic_but(query, b"\"<>") {
        Some(Unreadable::Query)
    } else {
        None
    }
}

/// Whether `http`'s `Uri` reads this authority (`validate_authority_bytes`): RFC 3986's
/// unreserved and sub-delimiter characters; `[` and `]` once each, in that order, with
/// no `%` before the `[`; a `%` only where an `@` or `]` follows; at most eight colons
/// before a `]` or `@`, and at most one after the last; and not ending in `@`.
fn is_readable_authority(authority: &str) -> bool {
    let (mut opened, mut closed, mut percent, mut colons) = (false, false, false, 0);
    for b in authority.bytes() {
        match b {
            b'%' => percent = true,
            b'[' if percent || opened => return false,
            b'[' => opened = true,
            b']' if !opened || closed => return false,
            b']' | b'@' => {
                closed |= b == b']';
                (percent, colons) = (false, 0);
            }
            b':' if colons == 8 => return false,
            b':' => colons += 1,
            b if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b) => {}
            _ => return false,
        }
    }
    opened == closed && !percent && colons <= 1 && !authority.ends_with('@')
}

/// The plain-http exception of an upload `endpoint` (content-upload.schema.json): `http://`,
/// then `localhost`, `127.` and three more groups of 1–3 digits, or `[::1]`, an optional
/// `:port` of digits, then the end or one of `/ ? #`. Loopback only, for local tests:
/// anything else must be https.
pub(crate) fn is_loopback_http_url(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = authority(rest);
    let (host, port) = match authority.strip_prefix("[::1]") {
        Some(port) => ("[::1]", port),
        None => authority.split_at(authority.find(':').unwrap_or(authority.len())),
    };
    let digits = |s: &str, most: usize| {
        (1..=most).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
    };
    let loopback_v4 = host.strip_prefix("127.").is_some_and(|groups| {
        groups.split('.').count() == 3 && groups.split('.').all(|g| digits(g, 3))
    });
    (host == "localhost" || host == "[::1]" || loopback_v4)
        && is_port(port)
        && !url.chars().any(|ch| ch.is_whitespace() || ch.is_control())
}

/// The authority at the start of `rest`, the text after a URL's `//` (RFC 3986 §3.2:
/// it ends at the first `/`, `?` or `#`, or with the text).
fn authority(rest: &str) -> &str {
    rest.split(['/', '?', '#']).next().unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod examples {
    pub(crate) const ABSOLUTE_URIS: &[&str] = &[
        "urn:uuid:0d6c4b9e-6f1e-4a39-9a3c-2f4f5b8e7d10",
        "https://harness.example/runtime/42",
        "https://user:pw@harness.example:8443/a%2Fb?q=1&r=/x#frag",
        "http://[::1]:8080/",
        "file:///var/run/harness",
        "urn:test:harness",
        // Boundaries: an empty hier-part, an empty port, lowercase hex, an escape in the
        // host, `?` and `/` inside query and fragment, a scheme using `+ - .`.
        "a:",
        "https://harness.example:/",
        "https://harness.example/%2f%c3%a9",
        "https://h%41rness.example/",
        "https://harness.example/?a?b/c#d?e/f",
        "git+ssh.v-2://harness.example/repo",
        "mailto:ops@harness.example",
    ];

    pub(crate) const NOT_ABSOLUTE_URIS: &[&str] = &[
        "",
        "harness/runtime/42",
        "1http://harness.example/",
        "https://harness.example/%zz",
        "https://harness.example/%4",
        "https://harness.example/a b",
        "https://harness.example/\u{7f}",
        "https://harness.example/caf\u{e9}",
        "https://harness.example:80x/",
        "https://[::1/",
        "urn:a#b#c",
        // Boundaries: a lone `%` at the end, a half-hex escape, no scheme, a scheme with
        // a space, an empty or trailing-junk IP literal, a space in userinfo or query.
        "https://harness.example/%",
        "https://harness.example/%4g",
        ":harness",
        "ht tp://harness.example/",
        "http://[]/",
        "http://[::1]x/",
        "https://us er@harness.example/",
        "https://harness.example/?q=a b",
    ];
}

#[cfg(test)]
mod tests {
    use super::examples::{ABSOLUTE_URIS, NOT_ABSOLUTE_URIS};
    use super::*;
    use crate::syntax::assert_shape;

    #[test]
    fn absolute_uris_follow_rfc_3986_strictly() {
        assert_shape(is_absolute_uri, ABSOLUTE_URIS, NOT_ABSOLUTE_URIS);
    }

    #[test]
    fn http_urls_need_a_lowercase_http_scheme_and_a_host() {
        let good = [
            "http://[::1]:8080/h?q",
            "https://policy.example.com/hooks",
            "https://u:p@policy.example.com",
            "http://localhost:9/",
            "https://policy.example.com#frag",
        ];
        let bad = [
            "ftp://x.example",
            "https://",
            "https:// x.example",
            "/hooks",
            "https://:80/",
            "https://u@/",
            "https://[]/",
            "HTTPS://policy.example.com/",
            "https://policy.example.com/\n",
            "https://policy.example.com/\u{0}",
            "http://[::1/p",
        ];
        assert_shape(|url| is_http_url(url, false), &good, &bad);
    }

    /// A port no client can read would be read as none, the scheme's default: another
    /// service than the one registered.
    #[test]
    fn a_registered_url_names_a_reachable_port_or_none() {
        let good = [
            "http://127.0.0.1:65535/p",
            "https://[::1]:1/p",
            "https://policy.example.com/p:8",
            "https://policy.example.com",
        ];
        let bad = [
            "http://127.0.0.1:99999/p",
            "http://127.0.0.1:65536/p",
            "http://127.0.0.1:0/p",
            "http://127.0.0.1:abc/p",
            "http://127.0.0.1:-1/p",
            "http://127.0.0.1:/p",
            "http://[::1]x/p",
        ];
        assert_shape(has_a_reachable_port, &good, &bad);
        // The shape alone (an event's MCP server URL) leaves the port be.
        assert!(is_http_url("https://mcp.example:/x", false));
    }

    #[test]
    fn plain_http_uploads_reach_loopback_only() {
        let good = [
            "http://localhost",
            "http://localhost:8080/up",
            "http://127.0.0.1/up?x#y",
            "http://127.255.0.12:9",
            "http://[::1]:9/up",
            "http://[::1]",
            "http://localhost?q",
        ];
        let bad = [
            "https://localhost/",
            "http://upload.example/up",
            "http://localhost.example/",
            "http://127.0.0.1.example/",
            "http://localhost@upload.example/",
            "http://127.0.0/",
            "http://127.0.0.1234/",
            "http://localhost:/",
            "http://localhost:8x/",
            "http://[::2]/",
            "HTTP://localhost/",
            "http://localhost/ up",
        ];
        assert_shape(is_loopback_http_url, &good, &bad);
    }

    /// The URLs a review found the host refusing at setup with no pointer, each refused by
    /// its part: a non-ASCII host, a backtick or `<` in the path, a `"` in the query.
    #[test]
    fn a_character_the_hosts_http_client_refuses_is_named_by_its_part() {
        for (url, part) in [
            ("https://p\u{f6}licy.example.com/h", Unreadable::Authority),
            ("https://p.example.com/a`b", Unreadable::Path),
            ("https://p.example.com/<x>", Unreadable::Path),
            ("https://p.example.com/?q={\"a\":1}", Unreadable::Query),
            ("https://h%41.example.com/", Unreadable::Authority),
            ("https://p.example.com/caf\u{e9}", Unreadable::Path),
            ("https://p.example.com/?q=caf\u{e9}", Unreadable::Query),
        ] {
            assert_eq!(unreadable_part(url), Some(part), "{url}");
        }
        for url in [
            "https://p.example.com/{\"a\":1}|x^y\\z",
            "https://p.example.com/p?q={a}|`^\\",
            "https://[fe80::1%25eth0]:8443/p",
            "https://p.example.com/#<fragment> \u{e9}",
            "not a URL",
        ] {
            assert_eq!(unreadable_part(url), None, "{url}");
        }
    }

    /// [`unreadable_part`] refuses exactly what `http::Uri` refuses, character by
    /// character in each part (a non-ASCII one in a path or query aside: refused here,
    /// read by `http` 1.5 but not by earlier 1.x releases), in the structures of an
    /// authority that has none of them, and past the longest URL.
    #[test]
    fn unreadable_part_agrees_with_the_http_crate() {
        let ascii = (0u8..0x80).map(char::from);
        let beyond = ['\u{80}', '\u{e9}', '\u{2028}', '\u{1f600}'];
        for ch in ascii.chain(beyond) {
            for url in [
                format!("https://a{ch}b.example/p"),
                format!("https://h.example/a{ch}b"),
                format!("https://h.example/p?a{ch}b"),
            ] {
                let http = url.parse::<http::Uri>().is_ok();
                let ours = unreadable_part(&url).is_none();
                assert_eq!(
                    ours,
                    http && ch.is_ascii(),
                    "{url:?}: http reads it: {http}"
                );
            }
        }
        for authority in [
            "[::1]:8080",
            "[1:2:3:4:5:6:7::]",
            "[1:2:3:4:5:6:7:8:9]",
            "[1:2:3:4:5:6:7:8:9:a]",
            "[::::::::::]",
            "[::1",
            "::1]",
            "[[::1]]",
            "[::1]]",
            "h%41.example",
            "[fe80::1%25eth0]",
            "%5B::1]",
            "u%40@h.example",
            "u@",
            "u:p@h:1",
            "h:1:2",
            "u:p:q@h",
            "h@",
            "a@b@c",
        ] {
            let url = format!("https://{authority}/p");
            let (ours, http) = (
                unreadable_part(&url).is_none(),
                url.parse::<http::Uri>().is_ok(),
            );
            assert_eq!(ours, http, "{url}");
        }
        for length in [MAX_URL_BYTES, MAX_URL_BYTES + 1] {
            let url = format!("https://h.example/{}", "a".repeat(length - 18));
            let http = url.parse::<http::Uri>().is_ok();
            let refused = (!http).then_some(Unreadable::Length);
            assert_eq!((unreadable_part(&url), url.len()), (refused, length));
        }
    }

    #[test]
    fn https_only_refuses_plain_http() {
        let https = |url: &str| is_http_url(url, true);
        assert_shape(
            https,
            &["https://id.example.com"],
            &["http://id.example.com", "http://id"],
        );
    }
}
