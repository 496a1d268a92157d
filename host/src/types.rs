//! Host-side state behind the WIT resources. This module depends on nothing else of the
//! host, so the generated bindings can name its types (`with:`) without a cycle.

use std::fmt;

/// A secret value. `Debug` prints a redaction, and there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the one place that must send it: the Authorization header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// The host side of the WIT `credential` resource: whose it is, and the token. The
/// component holds only a handle to it.
#[derive(Debug)]
pub struct Credential {
    /// The backend it was acquired for, the only one it is ever sent to.
    pub backend: String,
    /// The token.
    pub bearer: Secret,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_a_secret() {
        let credential = Credential {
            backend: "com.example.a".into(),
            bearer: Secret::new("tok-visible-if-leaked"),
        };
        let printed = format!("{credential:?} {:?}", credential.bearer);
        assert!(!printed.contains("tok-visible-if-leaked"), "{printed}");
        assert!(printed.contains("redacted"));
    }
}
