//! A real OCI registry on loopback for the distribution tests: Debian's `docker-registry`
//! (CNCF Distribution 2.8), with filesystem storage in a temporary directory.
//!
//! The storage is plain files named by digest, so a test can read what a push stored
//! (the manifest exactly as the registry serves it) and tamper with it behind the
//! registry's back, as a compromised registry or mirror would.
//!
//! If the binary is missing the test fails and says how to install it: a distribution
//! test that silently passes without a registry would prove nothing.
//!
//! Its port is one the kernel gave out for a moment (bound to port 0, then let go), so
//! another process, a parallel test's registry above all, may bind it first. Then
//! `docker-registry` exits ("address already in use") and is started again on another
//! port; and it is ready only once `/v2/` answers with a header only this registry sends,
//! not whenever something on the port answers.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BINARY: &str = "docker-registry";

/// How many ports a registry is started on before giving up.
const ATTEMPTS: usize = 5;

/// The header every answer of a registry carries, its value the registry's own.
const IDENTITY_HEADER: &str = "X-Ahp-Test-Registry";

/// A running registry; dropping it kills and reaps the process.
pub struct Registry {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry on a free loopback port and waits until it answers `GET /v2/`.
    pub fn start() -> Registry {
        Registry::start_with(None, free_loopback_port)
    }

    /// As [`Registry::start`], a registry that answers only `user` with the password
    /// whose bcrypt hash is `bcrypt` (HTTP Basic): anything else is challenged.
    pub fn requiring(user: &str, bcrypt: &str) -> Registry {
        Registry::start_with(Some((user, bcrypt)), free_loopback_port)
    }

    /// A registry (requiring `basic` if given) on the first address `port` gives that it
    /// can bind, of [`ATTEMPTS`].
    fn start_with(basic: Option<(&str, &str)>, mut port: impl FnMut() -> SocketAddr) -> Registry {
        let dir = tempfile::tempdir().expect("a temporary directory for the registry");
        // The temporary directory's name: no other registry has it.
        let identity = dir
            .path()
            .file_name()
            .expect("a named directory")
            .to_string_lossy()
            .into_owned();
        let mut exits = Vec::new();
        for _ in 0..ATTEMPTS {
            let addr = port();
            let mut child = spawn(&dir, addr, &identity, basic);
            match wait_until_ready(&mut child, addr, &identity, &dir) {
                Ok(()) => return Registry { child, addr, dir },
                Err(exited) => exits.push(exited),
            }
        }
        panic!(
            "docker-registry did not start in {ATTEMPTS} attempts: {}",
            exits.join("; ")
        );
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
}

/// `docker-registry` serving on `addr` from `dir`, every answer carrying `identity` in
/// [`IDENTITY_HEADER`], requiring `basic` if given; its log in `dir`'s `registry.log`.
fn spawn(
    dir: &tempfile::TempDir,
    addr: SocketAddr,
    identity: &str,
    basic: Option<(&str, &str)>,
) -> Child {
    let config = dir.path().join("config.yml");
    let mut text = format!(
        "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n\
         storage:\n  filesystem:\n    rootdirectory: {}\n\
         http:\n  addr: {addr}\n  secret: ahp-tests-not-a-secret\n\
         \x20 headers:\n    {IDENTITY_HEADER}: [\"{identity}\"]\n",
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
    Command::new(BINARY)
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
        })
}

/// Waits until the registry `child` answers `GET /v2/` at `addr` as itself (`identity`).
/// `Err`: how it exited before (its port taken, most likely), to start it again on
/// another. Panics if it neither answers nor exits within 15 s.
fn wait_until_ready(
    child: &mut Child,
    addr: SocketAddr,
    identity: &str,
    dir: &tempfile::TempDir,
) -> Result<(), String> {
    let log = || std::fs::read_to_string(dir.path().join("registry.log")).unwrap_or_default();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(15) {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("on {addr}, exited ({status}): {}", log()));
        }
        if answers_v2(addr, identity) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("docker-registry did not answer within 15 s: {}", log());
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True once `GET /v2/` returns 200 (the distribution API's "I am a registry"), or 401
/// from one that requires credentials, from the registry `identity` names.
fn answers_v2(addr: SocketAddr, identity: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let request = format!("GET /v2/ HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    let mut answer = String::new();
    let ours = format!("\r\n{IDENTITY_HEADER}: {identity}\r\n").to_ascii_lowercase();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_string(&mut answer).is_ok()
        && (answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.0 401"))
        && answer.to_ascii_lowercase().contains(&ours)
}

fn free_loopback_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("local address")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port something else answers `/v2/` on (here 200 to everything, as another
    /// registry would) is not taken for the registry's: it exits, unable to bind, and
    /// starts on the next port.
    #[test]
    fn a_registry_whose_port_is_taken_starts_on_another() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let taken_addr = taken.local_addr().expect("local address");
        std::thread::spawn(move || {
            for mut stream in taken.incoming().flatten() {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
                let _ = stream.read(&mut [0; 1024]);
                let _ = stream.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}");
            }
        });
        let mut ports = [taken_addr].into_iter();
        let mut registry =
            Registry::start_with(None, || ports.next().unwrap_or_else(free_loopback_port));
        assert_ne!(registry.addr, taken_addr);
        assert!(
            registry.child.try_wait().expect("its state").is_none(),
            "running"
        );
    }
}
