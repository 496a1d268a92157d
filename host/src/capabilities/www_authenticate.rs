//! The `WWW-Authenticate` grammar (RFC 9110 §11.6.1): the challenges a server sends with
//! a 401, each a scheme with parameters. A backend's `Bearer` challenge points at its
//! protected resource metadata (discovery); an OCI registry's names its token service.

/// The parameters of the first challenge of `scheme` (matched without case) in `header`,
/// in order, each name lowercased and each value unquoted: `None` if no challenge has
/// that scheme. A second challenge of the scheme is not mixed in.
#[cfg(any(feature = "cli", test))]
pub(crate) fn params(header: &str, scheme: &str) -> Option<Vec<(String, String)>> {
    challenges(header, scheme).into_iter().next()
}

/// The parameters of each challenge of `scheme` in `header`, in order, as [`params`]
/// reads them.
pub(crate) fn challenges(header: &str, scheme: &str) -> Vec<Vec<(String, String)>> {
    let mut challenges: Vec<Vec<(String, String)>> = Vec::new();
    let mut in_scheme = false;
    for item in split_outside_quotes(header) {
        let item = item.trim();
        // RFC 9110 §5.6.1: empty list elements count for nothing.
        if item.is_empty() {
            continue;
        }
        // `name = value` (spaces allowed around `=`) continues a challenge; any other
        // item starts one: `scheme [param | token68]`.
        let first_end = item
            .find(|c: char| c == '=' || c.is_ascii_whitespace())
            .unwrap_or(item.len());
        let (first, after) = item.split_at(first_end);
        let (starts, rest) = match after.trim_start().starts_with('=') {
            true => (None, item),
            false => (Some(first), after.trim()),
        };
        if let Some(starts) = starts {
            in_scheme = starts.eq_ignore_ascii_case(scheme);
            if in_scheme {
                challenges.push(Vec::new());
            }
        }
        if let (true, Some(params)) = (in_scheme, challenges.last_mut()) {
            if let Some((name, value)) = rest.split_once('=') {
                params.push((name.trim().to_ascii_lowercase(), unquote(value.trim())));
            }
        }
    }
    challenges
}

/// Every `WWW-Authenticate` field of `headers`, joined with commas into one list (RFC
/// 9110 §5.3), each with a quoted string it leaves open [`closed`]; bytes that are not
/// UTF-8 (a realm in Latin-1, say) become U+FFFD rather than hiding the field. `None` if
/// there is no such field. A front end may put its own field first.
pub(crate) fn joined(headers: &hyper::HeaderMap) -> Option<String> {
    let fields: Vec<_> = headers
        .get_all(hyper::header::WWW_AUTHENTICATE)
        .iter()
        .map(|v| closed(&String::from_utf8_lossy(v.as_bytes())).into_owned())
        .collect();
    (!fields.is_empty()).then(|| fields.join(", "))
}

/// One header field, a quoted string it leaves open closed at its end: fields are joined
/// into one list (RFC 9110 §5.3), and an open quote in one (`Basic realm="x`) would
/// otherwise swallow the challenges of the next.
fn closed(field: &str) -> std::borrow::Cow<'_, str> {
    let mut quoting = Quoting::default();
    field.chars().for_each(|c| {
        quoting.take(c);
    });
    match quoting {
        Quoting { quoted: false, .. } => field.into(),
        Quoting { escaped: false, .. } => format!("{field}\"").into(),
        // The first quote is the escaped character; the second closes.
        Quoting { escaped: true, .. } => format!("{field}\"\"").into(),
    }
}

/// `text` split at commas that are not inside a quoted string.
fn split_outside_quotes(text: &str) -> Vec<&str> {
    let (mut parts, mut start, mut quoting) = (Vec::new(), 0, Quoting::default());
    for (i, c) in text.char_indices() {
        if quoting.take(c) && c == ',' {
            parts.push(&text[start..i]);
            start = i + 1;
        }
    }
    parts.push(&text[start..]);
    parts
}

/// Where a field's text stands as it is read: inside a quoted string or not (RFC 9110
/// §5.6.4), and just after a backslash inside one.
#[derive(Default)]
struct Quoting {
    quoted: bool,
    escaped: bool,
}

impl Quoting {
    /// Reads `c`; whether it stood outside any quoted string.
    fn take(&mut self, c: char) -> bool {
        let outside = !self.quoted;
        match c {
            _ if self.escaped => self.escaped = false,
            '\\' if self.quoted => self.escaped = true,
            '"' => self.quoted = !self.quoted,
            _ => {}
        }
        outside
    }
}

/// A parameter value: a quoted string without its quotes and escapes, or a token as is.
fn unquote(value: &str) -> String {
    let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return value.to_string();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        out.push(if c == '\\' {
            chars.next().unwrap_or('\\')
        } else {
            c
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schemes_parameters_are_read_across_challenges() {
        let header = r#"Basic realm="a, b", Bearer realm="https://auth.example/token",service = "r.example" , scope="repository:x:pull""#;
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            params(header, "bearer"),
            Some(pairs(&[
                ("realm", "https://auth.example/token"),
                ("service", "r.example"),
                ("scope", "repository:x:pull"),
            ]))
        );
        assert_eq!(params(header, "BASIC"), Some(pairs(&[("realm", "a, b")])));
        assert_eq!(params(header, "negotiate"), None);
        assert_eq!(params("Basic", "basic"), Some(Vec::new()));
        let twice = r#"Bearer resource_metadata="https://a/1", Negotiate, Bearer resource_metadata="https://b/2""#;
        assert_eq!(
            params(twice, "bearer"),
            Some(pairs(&[("resource_metadata", "https://a/1")]))
        );
    }

    /// A field that leaves a quoted string open ends it there: the next field's
    /// challenges are read as their own.
    #[test]
    fn an_open_quote_ends_with_its_field() {
        let joined = [
            r#"Basic realm="x"#,
            r#"Bearer resource_metadata="https://r/m""#,
            r#"Digest realm="y\"#,
        ]
        .map(closed)
        .join(", ");
        assert_eq!(
            params(&joined, "bearer"),
            Some(vec![(
                "resource_metadata".to_string(),
                "https://r/m".to_string()
            )])
        );
        assert_eq!(
            params(&joined, "digest"),
            Some(vec![("realm".to_string(), "y\"".to_string())])
        );
        assert_eq!(closed(r#"Basic realm="a\"b""#), r#"Basic realm="a\"b""#);
    }
}
