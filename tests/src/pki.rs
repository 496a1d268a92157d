//! A test certificate authority made at test time, and a TLS acceptor for loopback
//! servers that present a certificate it signed (for `localhost` and `127.0.0.1`, and
//! other addresses of this machine when a test asks).

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use std::sync::Arc;
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::danger::ClientCertVerifier;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// A fresh CA and a server certificate it signed.
pub struct Pki {
    /// The CA certificate, PEM: what a client is told to trust.
    pub ca_pem: String,
    ca_cert: CertificateDer<'static>,
    server_cert: CertificateDer<'static>,
    server_key: PrivateKeyDer<'static>,
}

impl Pki {
    /// Generates the CA and a certificate for `localhost` and `127.0.0.1`.
    pub fn generate() -> Pki {
        Pki::generate_for(&[])
    }

    /// Generates the CA and a certificate for `localhost`, `127.0.0.1` and `more`.
    pub fn generate_for(more: &[std::net::IpAddr]) -> Pki {
        let ca_key = KeyPair::generate().expect("generate CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // rcgen names every certificate "rcgen self signed cert" unless told otherwise:
        // a server certificate whose issuer is its own subject is self-signed to OpenSSL
        // (Node), which then trusts it through no CA.
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "ahp-interceptor test CA");
        let ca = ca_params.self_signed(&ca_key).expect("self-sign CA");
        let key = KeyPair::generate().expect("generate server key");
        let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        names.extend(more.iter().map(ToString::to_string));
        let cert = CertificateParams::new(names)
            .expect("server params")
            .signed_by(&key, &ca, &ca_key)
            .expect("sign server certificate");
        Pki {
            ca_pem: ca.pem(),
            ca_cert: ca.der().clone(),
            server_cert: cert.der().clone(),
            server_key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        }
    }

    /// Writes the CA certificate to a temporary file, for `Options::trust_roots`.
    pub fn trust_roots_file(&self) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), &self.ca_pem).expect("write trust roots");
        file
    }

    /// An https front for the plain TCP server at `to` (a fault backend): a loopback
    /// listener presenting the server certificate that relays each connection's
    /// decrypted bytes to `to` and back. Returns its port; it serves until the runtime
    /// ends.
    pub async fn tls_front(&self, to: std::net::SocketAddr) -> u16 {
        let acceptor = self.acceptor();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the front");
        let port = listener.local_addr().expect("the front's address").port();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let Ok(mut plain) = tokio::net::TcpStream::connect(to).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        port
    }

    /// A TLS acceptor presenting the server certificate.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.acceptor_verifying(None)
    }

    /// A TLS acceptor presenting the server certificate and requiring a client
    /// certificate signed by the CA (as a service mesh's sidecar may).
    pub fn acceptor_requiring_a_client_certificate(&self) -> TlsAcceptor {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_cert.clone()).expect("the CA is a root");
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .expect("client verifier");
        self.acceptor_verifying(Some(verifier))
    }

    fn acceptor_verifying(&self, clients: Option<Arc<dyn ClientCertVerifier>>) -> TlsAcceptor {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("protocol versions");
        let builder = match clients {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(vec![self.server_cert.clone()], self.server_key.clone_key())
            .expect("server certificate");
        TlsAcceptor::from(Arc::new(config))
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(tokio_rustls::rustls::crypto::ring::default_provider())
}
