//! TLS for `https` backends: rustls with the platform's trust roots, plus an optional
//! PEM file of extra roots (e.g. a private CA). Certificates are always verified.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use std::path::Path;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use wasmtime::error::Context as _;

/// A client configuration trusting the platform roots and `extra_roots`, if given.
pub fn client_config(extra_roots: Option<&Path>) -> wasmtime::Result<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    if let Some(path) = extra_roots {
        for cert in CertificateDer::pem_file_iter(path)
            .with_context(|| format!("read trust roots {}", path.display()))?
        {
            roots
                .add(cert.context("parse a trust root")?)
                .context("add a trust root")?;
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
