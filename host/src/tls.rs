//! TLS for `https` backends: rustls with the platform's trust roots, plus an optional
//! PEM file of extra roots (e.g. a private CA). Certificates are always verified.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use std::path::Path;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

/// A client configuration trusting the platform roots and `extra_roots`, if given
/// ([`crate::Options::trust_roots`], named in its errors).
pub fn client_config(extra_roots: Option<&Path>) -> wasmtime::Result<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    if let Some(path) = extra_roots {
        for cert in read_trust_roots(path).map_err(|e| wasmtime::format_err!("trust_roots {e}"))? {
            roots.add(cert).map_err(|e| {
                wasmtime::format_err!("trust_roots {}: not a trust anchor: {e}", path.display())
            })?;
        }
    }
    let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The largest trust roots file read: a system's whole bundle is a few hundred KiB.
const MAX_TRUST_ROOTS_BYTES: u64 = 4 << 20;

/// The certificates of the PEM file `path` (a regular file, no larger than
/// [`MAX_TRUST_ROOTS_BYTES`]: [`crate::regular_file`]); an error starting with the path (the caller
/// puts its option's name before it) if it cannot be read or parsed, or holds none. A file
/// with no certificate — DER, a private key, an empty file — is refused here: accepted, it
/// would add no root, and every https call to the private CA would fail its handshake.
pub(crate) fn read_trust_roots(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let what = path.display();
    let pem = crate::regular_file::read(path, MAX_TRUST_ROOTS_BYTES)
        .map_err(|e| format!("{what}: {e}"))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{what}: {e}"))?;
    match certs.is_empty() {
        true => Err(format!("{what}: no PEM certificate found")),
        false => Ok(certs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a misplaced file holds instead of a PEM certificate: nothing, DER bytes, a
    /// private key. Each is refused by the option's name and the file's path.
    #[test]
    fn trust_roots_without_a_pem_certificate_are_refused_by_name() {
        let key =
            "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n";
        for content in [
            &b""[..],
            &[0x30, 0x82, 0x01, 0x0a, 0x02][..],
            key.as_bytes(),
        ] {
            let file = tempfile::NamedTempFile::new().expect("a temporary file");
            std::fs::write(file.path(), content).expect("write the file");
            let error = match client_config(Some(file.path())) {
                Ok(_) => panic!("accepted {content:?}"),
                Err(e) => e.to_string(),
            };
            assert_eq!(
                error,
                format!(
                    "trust_roots {}: no PEM certificate found",
                    file.path().display()
                )
            );
        }
    }
}
