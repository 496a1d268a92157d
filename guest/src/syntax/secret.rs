//! Names that hold a credential, and URLs that carry one in a parameter. A registration
//! never holds a literal credential (digest §6) and an event's MCP descriptor never
//! carries one (§3.3): both ask these, so that a name refused in one is refused in the
//! other, spelled the same way.

/// Names that would hold a credential in the clear, compared [`normalized`]
/// (`client_secret`, `Access-Token`, `API_KEY`). A registration names where a secret
/// lives (`tokenEnv`, `tokenRef`, `clientSecretRef`), never the secret itself; a longer
/// name (`tokenEnv`, `tokenEndpoint`) is another name.
pub(crate) const SECRET_NAMES: &str = "token bearertoken secret clientsecret password \
    accesstoken apikey privatekey refreshtoken idtoken authorization bearer cookie \
    credential credentials auth";

/// Whether `name` is one of [`SECRET_NAMES`], however it is spelled.
pub(crate) fn is_secret_name(name: &str) -> bool {
    let name = normalized(name);
    SECRET_NAMES.split_whitespace().any(|s| s == name)
}

/// `name` lowercased, `_` and `-` left out: how secret names are compared.
pub(crate) fn normalized(name: &str) -> String {
    name.chars()
        .filter(|ch| !matches!(ch, '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether a URL's query or fragment has a parameter with a value whose name says it is
/// a credential (`?access_token=…`, `#api-key=…`, `?X-Amz-Security-Token=…`): one
/// written into the URL, which travels in every request line, log and copy of it.
/// Parameters are split at `&` and at `;` (which some servers still read as one), and a
/// name is percent-decoded before it is compared (`access%5Ftoken`), against more names
/// than a member's ([`names_a_credential`]). Ordinary parameters (`?tenant=a`,
/// `?page_token=…`) and a fragment that is an anchor (`#auth`) are no secret.
pub(crate) fn has_a_secret_parameter(url: &str) -> bool {
    let (before_fragment, fragment) = url.split_once('#').unwrap_or((url, ""));
    let query = before_fragment
        .split_once('?')
        .map_or("", |(_, query)| query);
    [query, fragment]
        .into_iter()
        .flat_map(|part| part.split(['&', ';']))
        .filter_map(|parameter| parameter.split_once('='))
        .filter(|(_, value)| !value.is_empty())
        .any(|(name, _)| names_a_credential(&percent_decoded(name)))
}

/// Whether a parameter's `name` says its value is a credential: a secret name; one
/// ending in a word only credentials end in (`private_token`, `api_secret`,
/// `subscription-key`, `X-Amz-Signature`), but for the paging cursors named like tokens
/// (`page_token`); or one of the short names services use (Azure's `sig`, Google's
/// `key`). A name merely holding such a word (`max_tokens`, `signature_version`) is not.
fn names_a_credential(name: &str) -> bool {
    const ENDINGS: [&str; 10] = [
        "token",
        "secret",
        "password",
        "passwd",
        "apikey",
        "accesskey",
        "secretkey",
        "privatekey",
        "subscriptionkey",
        "signature",
    ];
    const CURSORS: [&str; 5] = [
        "pagetoken",
        "nexttoken",
        "continuationtoken",
        "synctoken",
        "resumptiontoken",
    ];
    const SHORT: [&str; 5] = ["key", "sig", "pwd", "xamzcredential", "xgoogcredential"];
    let name = normalized(name);
    if CURSORS.contains(&name.as_str()) {
        return false;
    }
    is_secret_name(&name)
        || SHORT.contains(&name.as_str())
        || ENDINGS.iter().any(|ending| name.ends_with(ending))
}

/// `text` with each `%XX` escape replaced by its byte; a malformed escape is kept as
/// written, and bytes that are no UTF-8 are replaced (no secret name has any).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 3)
            .filter(|hex| bytes[i] == b'%' && hex.iter().all(u8::is_ascii_hexdigit))
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::assert_shape;

    #[test]
    fn secret_names_are_compared_without_case_underscores_or_hyphens() {
        let secret = [
            "client_secret",
            "Access-Token",
            "API_KEY",
            "Authorization",
            "Cookie",
        ];
        let longer_or_other = ["tokenEnv", "clientSecretRef", "X-Tenant", "value", "author"];
        assert_shape(is_secret_name, &secret, &longer_or_other);
    }

    #[test]
    fn a_url_with_a_parameter_named_as_a_secret_carries_one() {
        let secret = [
            "https://policy.example.com/hook?access_token=abc123",
            "https://mcp.example/x?tenant=a&api_key=S",
            "https://mcp.example/x?API-KEY=S",
            "https://mcp.example/x?a=1;token=S",
            "https://mcp.example/x?access%5Ftoken=S",
            "https://mcp.example/x?%61uth=S",
            "https://mcp.example/cb#access_token=S&state=x",
            "https://mcp.example/x?auth_token=S",
            "https://mcp.example/x?oauth_token=S",
            "https://mcp.example/x?secret_key=S",
            "https://mcp.example/x?X-Amz-Security-Token=S&X-Amz-Signature=T",
            "https://mcp.example/x?key=S",
            "https://mcp.example/x?sig=S",
            "https://mcp.example/x?private_token=S",
            "https://mcp.example/x?x-api-key=S&api_secret=T",
            "https://mcp.example/x?subscription-key=S",
        ];
        let ordinary = [
            "https://mcp.example/x",
            "https://mcp.example/x?tenant=a&region=eu",
            "https://mcp.example/token/x?next=/token",
            "https://mcp.example/x?q=token&next=/token",
            "https://mcp.example/x?value=3",
            "https://mcp.example/x?%zz=1&%4",
            "https://mcp.example/x?%+4uth=1",
            "https://mcp.example/x#token-section",
            "https://mcp.example/x#auth",
            "https://mcp.example/x?client_secret",
            "https://mcp.example/x?token=",
            "https://mcp.example/x?author=a&keyword=b",
            "https://mcp.example/x?page_token=a&next_token=b&max_tokens=3",
            "https://mcp.example/x?tokenizer=a&signature_version=2&token_type=jwt",
        ];
        assert_shape(has_a_secret_parameter, &secret, &ordinary);
    }
}
