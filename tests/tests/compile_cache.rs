//! The compiled-component cache across `ahp` processes: a second process loads what the
//! first stored (and does not rewrite it); `ahp precompile` and `ahp hook install` store
//! what later processes load; a damaged, foreign or misplaced cache file and an unusable
//! cache directory fall back to compiling and still give the real decision.
//!
//! Every process gets its own `AHP_CACHE_DIR` (a temporary directory), set in the child's
//! environment only. The backend denies with a distinctive reason, so a correct decision
//! proves the real component ran: a wrongly loaded component could not produce it.

use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{ahp_binary, event, one_json_line, registration, runaway_component, Http};
use serde_json::json;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

const REASON: &str = "cache test: the real component asked the backend";

/// What the cache module logs (`AHP_LOG=ahp_host::compile_cache=debug`).
const HIT: &str = "compiled component: cache hit";
const MISS: &str = "compiled component: cache miss";
const REJECTED: &str = "compiled component: cache file unusable";
const STORED: &str = "compiled component: stored";
const NOT_PRIVATE: &str = "cache directory not private; compiling uncached";

/// A denying backend and the registration and event files pointing at it.
struct Setup {
    backend: FaultBackend,
    files: tempfile::TempDir,
}

impl Setup {
    async fn new() -> Setup {
        let backend = FaultBackend::start(vec![Behaviour::Deny(REASON.into())]).await;
        let files = tempfile::tempdir().expect("a temporary directory");
        let registration_json = registration(&[Http::new("dev.ahp.cache", backend.url())]);
        std::fs::write(files.path().join("registration.json"), registration_json)
            .expect("write the registration");
        std::fs::write(files.path().join("event.json"), event("evt_cache"))
            .expect("write the event");
        Setup { backend, files }
    }

    /// One `ahp intercept` with the cache in `cache`; asserts the backend's denial (exit 2,
    /// backend-deny, its reason) and returns the cache module's log lines.
    async fn intercept(&self, cache: &Path, case: &str) -> String {
        let before = self.backend.requests().len();
        let output = tokio::process::Command::new(ahp_binary())
            .arg("intercept")
            .arg("--registration")
            .arg(self.files.path().join("registration.json"))
            .arg("--event")
            .arg(self.files.path().join("event.json"))
            .env("AHP_CACHE_DIR", cache)
            .env("AHP_LOG", "ahp_host::compile_cache=debug")
            .kill_on_drop(true)
            .output()
            .await
            .expect("run ahp intercept");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(2), "{case}: {stdout}\n{stderr}");
        let record = one_json_line(&stdout);
        assert_eq!(
            (&record["decision"], &record["decidedBy"], &record["reason"]),
            (&json!("deny"), &json!("backend-deny"), &json!(REASON)),
            "{case}: {record}"
        );
        assert_eq!(
            self.backend.requests().len(),
            before + 1,
            "{case}: the backend was asked once"
        );
        stderr
    }
}

/// `ahp precompile [--component PATH]` into `cache`: exit 0, the cache file's path on the
/// first line (the file exists), what happened on the second.
async fn precompile(cache: &Path, component: Option<&Path>) -> (PathBuf, String) {
    let mut command = tokio::process::Command::new(ahp_binary());
    command.arg("precompile").env("AHP_CACHE_DIR", cache);
    if let Some(path) = component {
        command.arg("--component").arg(path);
    }
    let output = command.output().await.expect("run ahp precompile");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut lines = stdout.lines();
    let path = PathBuf::from(lines.next().expect("the path line"));
    assert!(path.starts_with(cache), "{stdout}");
    assert!(path.is_file(), "{stdout}");
    (path, lines.next().expect("the summary line").to_owned())
}

/// Edits `file` in place.
fn rewrite(file: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(file).expect("read the cache file");
    edit(&mut bytes);
    std::fs::write(file, bytes).expect("write the cache file");
}

/// The one cache file in `cache`.
fn only_file(cache: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(cache)
        .expect("the cache directory exists")
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    assert_eq!(files.len(), 1, "one cache file: {files:?}");
    files[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_loads_what_the_first_stored() {
    let setup = Setup::new().await;
    let parent = tempfile::tempdir().expect("a temporary directory");
    // Missing: ahp creates it.
    let cache = parent.path().join("cache");

    let first = setup.intercept(&cache, "first").await;
    assert!(first.contains(MISS) && first.contains(STORED), "{first}");
    let file = only_file(&cache);
    let meta = std::fs::metadata(&file).expect("the cache file");
    assert_eq!(meta.mode() & 0o777, 0o600, "private file");
    let dir_mode = std::fs::metadata(&cache)
        .expect("the cache directory")
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700, "private directory");

    // Let a rewrite show in the modification time even on a coarse-grained filesystem.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = setup.intercept(&cache, "second").await;
    assert!(second.contains(HIT), "{second}");
    assert!(!second.contains(STORED), "{second}");
    let again = std::fs::metadata(&file).expect("the cache file");
    assert_eq!(
        (again.ino(), again.mtime(), again.mtime_nsec()),
        (meta.ino(), meta.mtime(), meta.mtime_nsec()),
        "not rewritten"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precompile_warms_the_cache_for_intercept() {
    let setup = Setup::new().await;
    let cache = tempfile::tempdir().expect("a cache directory");
    let (path, summary) = precompile(cache.path(), None).await;
    assert!(summary.starts_with("compiled and stored in "), "{summary}");
    assert_eq!(only_file(cache.path()), path);

    let log = setup.intercept(cache.path(), "after precompile").await;
    assert!(log.contains(HIT), "{log}");
    let (again, summary) = precompile(cache.path(), None).await;
    assert_eq!(again, path);
    assert!(
        summary.starts_with("already cached: loaded in "),
        "{summary}"
    );
}

/// `ahp hook install claude-code` of the setup's registration, `--component` if given,
/// with the cache in `cache`: exit 0 and the snippet (JSON) on stdout, whatever happened
/// to the cache; returns stderr.
fn hook_install(setup: &Setup, component: Option<&Path>, cache: &Path) -> String {
    let output = hook_install_output(setup, component, cache);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let snippet: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {output:?}"));
    assert!(snippet["hooks"].is_object(), "{snippet}");
    stderr
}

/// `ahp hook install claude-code` of the setup's registration, however it ended.
fn hook_install_output(
    setup: &Setup,
    component: Option<&Path>,
    cache: &Path,
) -> std::process::Output {
    let mut command = std::process::Command::new(ahp_binary());
    command
        .args(["hook", "install", "claude-code", "--registration"])
        .arg(setup.files.path().join("registration.json"))
        .env("AHP_CACHE_DIR", cache)
        .env_remove("AHP_LOG");
    if let Some(path) = component {
        command.arg("--component").arg(path);
    }
    command.output().expect("run ahp hook install")
}

/// `ahp hook install` compiles the component it installs (the embedded one, or the one
/// `--component` names) into the cache, as `ahp precompile` does: the first hook call
/// then loads it instead of compiling it inside its budget, which under a budget shorter
/// than a cold compile would end every call before the compile could be stored. Best
/// effort: a cache that cannot be written is a warning, and the snippet is printed all
/// the same. A component that does not compile is an error (every installed call would
/// be denied), and no snippet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_install_warms_the_cache_for_the_component_it_installs() {
    let setup = Setup::new().await;
    let runaway = setup.files.path().join("runaway.wasm");
    std::fs::write(&runaway, runaway_component()).expect("write the runaway component");
    for component in [None, Some(runaway.as_path())] {
        let cache = tempfile::tempdir().expect("a cache directory");
        let stderr = hook_install(&setup, component, cache.path());
        assert!(!stderr.contains("warning"), "{component:?}: {stderr}");
        let file = only_file(cache.path());
        let (path, summary) = precompile(cache.path(), component).await;
        assert_eq!(path, file, "{component:?}");
        assert!(
            summary.starts_with("already cached: loaded in "),
            "{component:?}: {summary}"
        );
    }

    let broken = setup.files.path().join("broken.wasm");
    std::fs::write(&broken, b"\0asm").expect("write a component that does not compile");
    let cache = tempfile::tempdir().expect("a cache directory");
    let output = hook_install_output(&setup, Some(&broken), cache.path());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty(), "{output:?}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    let not_a_dir = setup.files.path().join("not-a-directory");
    std::fs::write(&not_a_dir, b"").expect("write a file");
    let stderr = hook_install(&setup, None, &not_a_dir);
    assert!(stderr.contains("warning: "), "{stderr}");
}

/// Damages the cache file of the embedded component in a fresh cache directory.
type Damage = fn(file: &Path, other_component_file: &Path);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_foreign_or_misplaced_file_falls_back_to_compiling() {
    let setup = Setup::new().await;
    let files = tempfile::tempdir().expect("a temporary directory");
    let runaway = files.path().join("runaway.wasm");
    std::fs::write(&runaway, runaway_component()).expect("write the runaway component");
    let other_cache = files.path().join("other");
    let (other_file, _) = precompile(&other_cache, Some(&runaway)).await;

    let cases: [(&str, Damage); 6] = [
        ("truncated", |file, _| {
            rewrite(file, |b| b.truncate(b.len() / 2))
        }),
        ("random bytes", |file, _| {
            rewrite(file, |b| {
                // A fixed xorshift stream: the same "random" file every run.
                let mut x = 0x9e37_79b9_7f4a_7c15u64;
                for byte in b.iter_mut() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *byte = x as u8;
                }
            })
        }),
        ("another component's file under this key", |file, other| {
            std::fs::copy(other, file).expect("copy the other cache file");
        }),
        ("header names another key", |file, _| {
            rewrite(file, |b| b[8] ^= 1)
        }),
        ("one flipped bit in the code", |file, _| {
            rewrite(file, |b| {
                let middle = b.len() / 2;
                b[middle] ^= 0x10;
            })
        }),
        ("wasmtime's own file without our header", |file, _| {
            rewrite(file, |b| {
                b.drain(..72);
            })
        }),
    ];
    for (case, damage) in cases {
        let cache = files.path().join(case.replace(' ', "-"));
        let (file, _) = precompile(&cache, None).await;
        damage(&file, &other_file);
        let log = setup.intercept(&cache, case).await;
        assert!(log.contains(REJECTED), "{case}: {log}");
        assert!(log.contains(STORED), "{case}: replaced: {log}");
        let log = setup.intercept(&cache, case).await;
        assert!(log.contains(HIT), "{case}: the replacement is used: {log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_others_could_have_written_is_not_loaded() {
    let setup = Setup::new().await;
    let cache = tempfile::tempdir().expect("a cache directory");
    let (file, _) = precompile(cache.path(), None).await;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666))
        .expect("chmod the cache file");
    let log = setup.intercept(cache.path(), "world-writable").await;
    assert!(log.contains(REJECTED), "{log}");
    assert!(log.contains(STORED), "{log}");
    let meta = std::fs::metadata(&file).expect("the replacement");
    assert_eq!(meta.mode() & 0o777, 0o600, "replaced by a private file");
}

/// Plants, at the second path, something that leads to the first.
type Plant = fn(&Path, &Path);

/// A symbolic link, a second hard link or a FIFO at the cache file's name is neither
/// followed, loaded nor waited on: the process compiles, and replaces it with its own file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_or_fifo_at_the_cache_files_name_is_not_loaded() {
    let setup = Setup::new().await;
    let elsewhere = tempfile::tempdir().expect("a cache directory");
    let (original, _) = precompile(elsewhere.path(), None).await;
    let name = original.file_name().expect("a file name").to_owned();
    let plants: [(&str, Plant); 3] = [
        ("symlink", |original, at| {
            std::os::unix::fs::symlink(original, at).expect("symlink")
        }),
        ("hard link", |original, at| {
            std::fs::hard_link(original, at).expect("hard link")
        }),
        ("fifo", |_, at| ahp_tests::support::make_fifo(at)),
    ];
    for (case, plant) in plants {
        let cache = tempfile::tempdir().expect("a cache directory");
        let at = cache.path().join(&name);
        plant(&original, &at);
        let log =
            tokio::time::timeout(Duration::from_secs(60), setup.intercept(cache.path(), case))
                .await
                .unwrap_or_else(|_| panic!("{case}: the process waited on the cache file"));
        assert!(log.contains(REJECTED), "{case}: {log}");
        assert!(log.contains(STORED), "{case}: {log}");
        let meta = std::fs::symlink_metadata(&at).expect("the replacement");
        assert!(meta.is_file() && meta.nlink() == 1, "{case}: not replaced");
    }
}

/// A cache directory others can write to is neither read nor written: they could plant
/// or swap files in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_directory_others_can_write_is_not_used() {
    let setup = Setup::new().await;
    let cache = tempfile::tempdir().expect("a cache directory");
    let (file, _) = precompile(cache.path(), None).await;
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod the cache directory");
    let stored = std::fs::read(&file).expect("the cache file");
    let log = setup.intercept(cache.path(), "shared directory").await;
    assert!(log.contains(NOT_PRIVATE), "{log}");
    assert!(!log.contains(HIT) && !log.contains(STORED), "{log}");
    assert_eq!(std::fs::read(&file).expect("the cache file"), stored);
}

/// `ahp precompile` names the directory it refuses and says why, rather than that there
/// is none: the cache directory, or the one on its way at fault when it is not made yet.
#[test]
fn precompile_names_a_cache_directory_others_can_write_and_why() {
    let cache = tempfile::tempdir().expect("a cache directory");
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod the cache directory");
    let output = std::process::Command::new(ahp_binary())
        .arg("precompile")
        .env("AHP_CACHE_DIR", cache.path())
        .output()
        .expect("run ahp precompile");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let expected = format!(
        "error: {}: cache directory is writable by group or others (mode 0777)",
        cache.path().display()
    );
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert_eq!(
        std::fs::read_dir(cache.path())
            .expect("the directory")
            .count(),
        0
    );
    // Not made yet, under a directory others can write to: that directory is named, and
    // nothing is made.
    let missing = cache.path().join("ahp-interceptor");
    let output = std::process::Command::new(ahp_binary())
        .arg("precompile")
        .env("AHP_CACHE_DIR", &missing)
        .output()
        .expect("run ahp precompile");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let named = format!("{} is writable by group or others", cache.path().display());
    assert!(stderr.contains(&named), "{stderr}");
    assert!(!missing.exists(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_cache_directory_compiles_without_caching() {
    let setup = Setup::new().await;
    let files = tempfile::tempdir().expect("a temporary directory");
    // A regular file where the directory should be: unusable even for root.
    let not_a_dir = files.path().join("not-a-directory");
    std::fs::write(&not_a_dir, b"").expect("write a file");
    for cache in [not_a_dir.clone(), not_a_dir.join("below")] {
        let case = cache.display().to_string();
        // Refused as it is looked at (not a directory), never stored.
        let log = setup.intercept(&cache, &case).await;
        assert!(log.contains(NOT_PRIVATE), "{case}: {log}");
        assert!(!log.contains(STORED), "{case}: {log}");
        let log = setup.intercept(&cache, &case).await;
        assert!(!log.contains(HIT), "{case}: {log}");
    }
    let output = std::process::Command::new(ahp_binary())
        .arg("precompile")
        .env("AHP_CACHE_DIR", &not_a_dir)
        .output()
        .expect("run ahp precompile");
    assert_eq!(output.status.code(), Some(1), "nothing could be cached");
}

/// In process, with the directory passed explicitly: the engine configuration is part of
/// the key, so two engines never share a file, and each reloads its own.
#[test]
fn engines_with_other_configurations_get_their_own_files() {
    use ahp_host::compile_cache::{load_in, Source};
    let cache = tempfile::tempdir().expect("a cache directory");
    let plain = wasmtime::Engine::default();
    let epochs =
        wasmtime::Engine::new(wasmtime::Config::new().epoch_interruption(true)).expect("an engine");
    let load = |engine: &wasmtime::Engine| {
        let loaded =
            load_in(engine, ahp_host::EMBEDDED_COMPONENT, cache.path()).expect("a component");
        (loaded.source, loaded.path.expect("a cache path"))
    };
    let (source, plain_file) = load(&plain);
    assert_eq!(source, Source::Stored);
    let (source, epochs_file) = load(&epochs);
    assert_eq!(source, Source::Stored);
    assert_ne!(plain_file, epochs_file);
    assert_eq!(load(&plain), (Source::Cache, plain_file));
    assert_eq!(load(&epochs), (Source::Cache, epochs_file));
}
