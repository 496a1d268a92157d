//! A secret file whose read never ends (a FIFO nobody writes) holds one blocking thread,
//! however many calls give up waiting for it, and a call made while it is in flight
//! shares its result. Before, every dispatch started a read of its own, each holding a
//! thread of the runtime's blocking pool for good: once the pool was full, every name
//! lookup and secret read on that runtime waited behind them.
//!
//! Its own test binary with a single test, so no other test starts threads while it
//! counts them.

use ahp_host::{Decision, Settlement};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{assert_failed, call, interceptor, make_fifo, registration, Http};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The threads of this process (Linux).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task is readable")
        .count()
}

/// One fail-open backend whose bearer token is read from `token`, asked for `timeout_ms`.
fn reading(url: String, token: &Path, timeout_ms: u64) -> String {
    registration(&[Http::new("com.example.authed", url)
        .policy("fail-open")
        .timeout_ms(timeout_ms)
        .token_ref(&format!("file:{}", token.display()))])
}

/// Opens the FIFO for writing and closes it when dropped, which ends every read still
/// blocked on it: the runtime's end waits for its blocking threads, so a failed
/// assertion must not leave one stuck there.
struct Release(PathBuf);

impl Drop for Release {
    fn drop(&mut self) {
        use std::os::unix::fs::OpenOptionsExt as _;
        // Non-blocking: with no reader left, there is nothing to release.
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.0);
    }
}

/// A call that gave up waiting for its credential, settled open.
fn gave_up(settled: &Settlement) {
    let failure = assert_failed(settled, "fail-open", "auth-failed", "a stuck read");
    assert_eq!(failure["phase"], json!("acquire-credential"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_secret_file_holds_one_thread_and_its_readers_share_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fifo = dir.path().join("token");
    make_fifo(&fifo);
    let _release = Release(fifo.clone());
    let backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let impatient = interceptor(&reading(backend.url(), &fifo, 50)).await;
    // The first call starts the read that sticks, and the runtime's own threads.
    gave_up(&call(&impatient, "evt_stuck_0").await);
    let before = threads();
    for i in 1..=20 {
        gave_up(&call(&impatient, &format!("evt_stuck_{i}")).await);
    }
    let after = threads();
    assert!(
        after <= before + 1,
        "20 calls that gave up on a stuck secret file left {} more threads",
        after - before
    );

    // A patient call joins the read still in flight, and is sent what it finally reads.
    let patient = interceptor(&reading(backend.url(), &fifo, 5_000)).await;
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            // Late enough for the patient call to have joined the read on a loaded
            // machine, well within its 5 s.
            std::thread::sleep(Duration::from_millis(1_500));
            std::fs::write(&fifo, "shared-token\n").expect("write the token to the FIFO");
        })
    };
    let settled = call(&patient, "evt_stuck_joined").await;
    writer.join().expect("the writer");
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    let sent = backend.requests();
    assert_eq!(sent.len(), 1, "only the patient call was sent");
    let authorization: Vec<_> = sent[0]
        .headers
        .iter()
        .filter(|(name, _)| name == "authorization")
        .map(|(_, value)| value.as_str())
        .collect();
    assert_eq!(authorization, ["Bearer shared-token"]);
}
