//! A real OCI registry on loopback for the distribution tests: Debian's `docker-registry`
//! (CNCF Distribution 2.8), with filesystem storage in a temporary directory.
//!
//! The storage is plain files named by digest, so a test can read what a push stored
//! (the manifest exactly as the registry serves it) and tamper with it behind the
//! registry's back, as a compromised registry or mirror would.
//!
//! If the binary is missing the test fails and says how to install it: a distribution
//! test that silently passes without a registry would prove nothing.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BINARY: &str = "docker-registry";

/// A running registry; dropping it kills and reaps the process.
pub struct Registry {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry on a free loopback port and waits until it answers `GET /v2/`.
    pub fn start() -> Registry {
        Registry::start_with(None)
    }

    /// As [`Registry::start`], a registry that answers only `user` with the password
    /// whose bcrypt hash is `bcrypt` (HTTP Basic): anything else is challenged.
    pub fn requiring(user: &str, bcrypt: &str) -> Registry {
        Registry::start_with(Some((user, bcrypt)))
    }

    fn start_with(basic: Option<(&str, &str)>) -> Registry {
        let dir = tempfile::tempdir().expect("a temporary directory for the registry");
        let addr = free_loopback_port();
        let config = dir.path().join("config.yml");
        let mut text = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: {addr}\n  secret: ahp-tests-not-a-secret\n",
            dir.path().join("storage").display()
        );
        if let Some((user, bcrypt)) = basic {
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("{user}:{bcrypt}\n")).expect("write htpasswd");
            text.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: ahp-tests\n    path: {}\n",
                htpasswd.display()
            ));
        }
        std::fs::write(&config, text).expect("write the registry config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("registry log");
        let child = Command::new(BINARY)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("registry log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run `{BINARY}` ({e}); the distribution tests need a real OCI \
                     registry: `apt-get install -y docker-registry` (the README's test \
                     command does)"
                )
            });
        let mut registry = Registry { child, addr, dir };
        registry.wait_until_ready();
        registry
    }

    /// `127.0.0.1:PORT`, the registry part of a reference.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Where the registry keeps the blob (manifest, config or layer) with `digest`.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// The blob with `digest` exactly as the registry stores it.
    pub fn blob(&self, digest: &str) -> Vec<u8> {
        let path = self.blob_path(digest);
        std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }

    fn wait_until_ready(&mut self) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(15) {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("docker-registry exited ({status}): {}", self.log());
            }
            if answers_v2(self.addr) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("docker-registry did not answer within 15 s: {}", self.log());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True once `GET /v2/` returns 200 (the distribution API's "I am a registry"), or 401
/// from one that requires credentials.
fn answers_v2(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let request = format!("GET /v2/ HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    let mut answer = String::new();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_string(&mut answer).is_ok()
        && (answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.0 401"))
}

fn free_loopback_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("local address")
}
