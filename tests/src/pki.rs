//! A test certificate authority made at test time, and a TLS acceptor for loopback
//! servers that present a certificate it signed (for `localhost` and `127.0.0.1`, and
//! other addresses of this machine when a test asks; or one a trusting client must still
//! refuse: for another name, or expired).

use rcgen::{
    date_time_ymd, BasicConstraints, Certificate, CertificateParams, DnType, IsCa, KeyPair,
};
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
    ca: Certificate,
    /// Kept to sign the certificates a test asks for after the server's.
    ca_key: KeyPair,
    server: Leaf,
}

/// The names every server certificate is for unless a test asks otherwise: those a
/// loopback backend is called by.
const SERVER_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// A certificate the CA signed, and its private key.
struct Leaf {
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
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
        let mut names: Vec<String> = SERVER_NAMES.map(String::from).into();
        names.extend(more.iter().map(ToString::to_string));
        let server = signed(&ca, &ca_key, server_params(names));
        Pki {
            ca_pem: ca.pem(),
            ca,
            ca_key,
            server,
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
        acceptor_presenting(&self.server, None)
    }

    /// A TLS acceptor presenting, instead of the server certificate, one the CA signed for
    /// `names` alone: a client asking for any other name must refuse it, trusted CA or not.
    pub fn acceptor_for_only(&self, names: &[&str]) -> TlsAcceptor {
        let names = names.iter().map(ToString::to_string).collect();
        let leaf = signed(&self.ca, &self.ca_key, server_params(names));
        acceptor_presenting(&leaf, None)
    }

    /// A TLS acceptor presenting, instead of the server certificate, one the CA signed for
    /// `localhost` and `127.0.0.1` that was valid through 2020 only: expired, and so
    /// refused by a client that trusts the CA.
    pub fn acceptor_with_an_expired_certificate(&self) -> TlsAcceptor {
        let mut params = server_params(SERVER_NAMES.map(String::from).into());
        params.not_before = date_time_ymd(2020, 1, 1);
        params.not_after = date_time_ymd(2021, 1, 1);
        let leaf = signed(&self.ca, &self.ca_key, params);
        acceptor_presenting(&leaf, None)
    }

    /// A TLS acceptor presenting the server certificate and requiring a client
    /// certificate signed by the CA (as a service mesh's sidecar may).
    pub fn acceptor_requiring_a_client_certificate(&self) -> TlsAcceptor {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.der().clone()).expect("the CA is a root");
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .expect("client verifier");
        acceptor_presenting(&self.server, Some(verifier))
    }
}

/// The parameters of a server certificate for `names` (DNS names or IP addresses).
fn server_params(names: Vec<String>) -> CertificateParams {
    CertificateParams::new(names).expect("server params")
}

/// A certificate from `params` for a fresh key, signed by `ca`.
fn signed(ca: &Certificate, ca_key: &KeyPair, params: CertificateParams) -> Leaf {
    let key = KeyPair::generate().expect("generate server key");
    let cert = params
        .signed_by(&key, ca, ca_key)
        .expect("sign server certificate");
    Leaf {
        cert: cert.der().clone(),
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    }
}

/// A TLS acceptor presenting `leaf`, and verifying client certificates with `clients`
/// (none asked for without).
fn acceptor_presenting(leaf: &Leaf, clients: Option<Arc<dyn ClientCertVerifier>>) -> TlsAcceptor {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions");
    let builder = match clients {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let config = builder
        .with_single_cert(vec![leaf.cert.clone()], leaf.key.clone_key())
        .expect("server certificate");
    TlsAcceptor::from(Arc::new(config))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(tokio_rustls::rustls::crypto::ring::default_provider())
}
