//! Distribution through a real OCI registry (issue 13), Debian's `docker-registry` on
//! loopback: `ahp component push` stores the component as a CNCF wasm artifact, and
//! `--component oci://…` pulls it, verified by digest, and from the cache afterwards. A
//! wrong digest, a tampered registry or a corrupted cache is refused before anything runs.

use ahp_host::EMBEDDED_COMPONENT;
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::pki::Pki;
use ahp_tests::registry::Registry;
use ahp_tests::support::{
    ahp_binary, ahp_command, event, one_json_line, registration, runaway_component, Http,
};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

const REPOSITORY: &str = "ahp/interceptor";
const TAG: &str = "0.1.0";

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// `ahp component push HOST/ahp/interceptor:0.1.0` of the embedded component; its JSON.
fn push(registry: &Registry) -> Value {
    let output = ahp_command()
        .args(["component", "push"])
        .arg(format!("{}/{REPOSITORY}:{TAG}", registry.host()))
        .output()
        .expect("run ahp component push");
    assert_success(&output, "ahp component push");
    one_json_line(&String::from_utf8_lossy(&output.stdout))
}

/// A registry holding the pushed embedded component, the push's JSON, and a case.
async fn pushed() -> (Registry, Value, Case) {
    let registry = Registry::start();
    let pushed = push(&registry);
    (registry, pushed, Case::new().await)
}

/// The pinned `oci://…@sha256:…` reference a push printed.
fn pinned(pushed: &Value) -> String {
    pushed["reference"].as_str().expect("reference").to_string()
}

fn assert_success(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A denying backend, and `ahp intercept` with `--component SOURCE` against it.
struct Case {
    backend: FaultBackend,
    dir: tempfile::TempDir,
    /// The component cache of this case (`AHP_CACHE_DIR`).
    cache: tempfile::TempDir,
}

impl Case {
    async fn new() -> Case {
        let backend = FaultBackend::start(vec![Behaviour::Deny("pulled and ran".into())]).await;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let reg =
            registration(&[Http::new("com.example.policy", backend.url()).policy("fail-closed")]);
        std::fs::write(dir.path().join("registration.json"), reg).expect("write registration");
        std::fs::write(dir.path().join("event.json"), event("evt_oci")).expect("write event");
        let cache = tempfile::tempdir().expect("a cache directory");
        Case {
            backend,
            dir,
            cache,
        }
    }

    /// Runs `ahp intercept --component SOURCE` with this case's component cache.
    async fn intercept(&self, source: &str) -> Output {
        self.intercept_command(source)
            .output()
            .await
            .expect("run ahp intercept")
    }

    /// `ahp hook install claude-code` of this case's registration with `--component
    /// SOURCE`, the component cache at `cache`.
    fn install_command(&self, source: &str, cache: &Path) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(ahp_binary());
        command
            .args(["hook", "install", "claude-code", "--registration"])
            .arg(self.dir.path().join("registration.json"))
            .args(["--component", source])
            .env("AHP_CACHE_DIR", cache)
            .env_remove("AHP_LOG")
            .kill_on_drop(true);
        command
    }

    /// The `ahp intercept --component SOURCE` of [`Case::intercept`], to adjust.
    fn intercept_command(&self, source: &str) -> tokio::process::Command {
        let mut command = self.embedded_intercept_command();
        command.arg("--component").arg(source);
        command
    }

    /// [`Case::intercept_command`] of the embedded component: compiled, nothing pulled.
    fn embedded_intercept_command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(ahp_binary());
        command
            .arg("intercept")
            .arg("--registration")
            .arg(self.dir.path().join("registration.json"))
            .arg("--event")
            .arg(self.dir.path().join("event.json"))
            .env("AHP_CACHE_DIR", self.cache.path())
            .kill_on_drop(true);
        command
    }

    /// Where the cache keeps the embedded component (named by its sha256).
    fn cached_component(&self) -> std::path::PathBuf {
        self.cached(&sha256(EMBEDDED_COMPONENT))
    }

    /// Where the cache keeps the blob with `digest`.
    fn cached(&self, digest: &str) -> std::path::PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.cache.path().join("oci/blobs/sha256").join(hex)
    }

    /// The call ran the pulled component: the backend's denial came back (exit 2).
    fn assert_ran(&self, output: &Output, calls: usize) {
        assert_eq!(
            output.status.code(),
            Some(2),
            "stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let record = one_json_line(&String::from_utf8_lossy(&output.stdout));
        assert_eq!(record["decidedBy"], json!("backend-deny"), "{record}");
        assert_eq!(record["reason"], json!("pulled and ran"), "{record}");
        assert_eq!(
            self.backend.requests_with_method("hooks/intercept").len(),
            calls
        );
    }

    /// Refused with exit 1 and `expected` in the error; no hook call was made.
    fn assert_refused(&self, output: &Output, expected: &str) {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
        assert!(
            stderr.contains(expected),
            "{expected:?} in stderr: {stderr}"
        );
        assert!(output.stdout.is_empty(), "no settlement printed");
        assert!(
            self.backend.requests().is_empty(),
            "nothing ran, nothing was sent"
        );
    }
}

#[test]
fn push_stores_a_cncf_wasm_artifact_carrying_the_components_metadata() {
    let registry = Registry::start();
    let pushed = push(&registry);
    let component_digest = sha256(EMBEDDED_COMPONENT);
    assert_eq!(pushed["componentDigest"], json!(component_digest));
    let manifest_digest = pushed["manifestDigest"]
        .as_str()
        .expect("a manifest digest");
    assert_eq!(
        pushed["reference"],
        json!(format!(
            "oci://{}/{REPOSITORY}:{TAG}@{manifest_digest}",
            registry.host()
        ))
    );

    let manifest: Value =
        serde_json::from_slice(&registry.blob(manifest_digest)).expect("the manifest is JSON");
    assert_eq!(
        manifest["mediaType"],
        json!("application/vnd.oci.image.manifest.v1+json")
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        json!("application/vnd.wasm.config.v0+json")
    );
    assert_eq!(
        manifest["layers"],
        json!([{"mediaType": "application/wasm", "digest": component_digest,
                "size": EMBEDDED_COMPONENT.len()}])
    );
    let annotations = &manifest["annotations"];
    assert_eq!(
        annotations["org.opencontainers.image.title"],
        json!("ahp-interceptor")
    );
    assert_eq!(
        annotations["org.opencontainers.image.version"],
        json!(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        annotations["org.opencontainers.image.licenses"],
        json!("Apache-2.0")
    );
    assert_eq!(
        annotations["org.opencontainers.image.source"],
        json!(env!("CARGO_PKG_REPOSITORY"))
    );
    assert_eq!(
        annotations["org.opencontainers.image.url"],
        json!(env!("CARGO_PKG_HOMEPAGE"))
    );
    for key in ["description", "revision"] {
        let value = &annotations[format!("org.opencontainers.image.{key}")];
        assert!(
            value.as_str().is_some_and(|v| !v.is_empty()),
            "{key}: {manifest}"
        );
    }

    let config_digest = manifest["config"]["digest"]
        .as_str()
        .expect("a config digest");
    let config: Value =
        serde_json::from_slice(&registry.blob(config_digest)).expect("the config is JSON");
    assert_eq!(config["architecture"], json!("wasm"));
    assert_eq!(config["os"], json!("wasip2"));
    assert_eq!(config["layerDigests"], json!([component_digest]));
    assert_eq!(
        config["component"]["exports"],
        json!(["ahp:interceptor/interceptor@0.1.3"])
    );
    let imports = config["component"]["imports"].as_array().expect("imports");
    assert!(
        imports.contains(&json!("ahp:interceptor/delivery@0.1.3")),
        "{config}"
    );
    assert!(
        imports
            .iter()
            .all(|i| !i.as_str().unwrap_or_default().starts_with("wasi:cli")),
        "no wasi:cli import: {config}"
    );
    assert_eq!(
        registry.blob(&component_digest),
        EMBEDDED_COMPONENT,
        "the layer is the component"
    );

    let again = push(&registry);
    assert_eq!(
        again["manifestDigest"], pushed["manifestDigest"],
        "pushing the same component again gives the same manifest"
    );
}

/// A push logged at the most verbose level asked for writes its lines, and never the
/// registry password it was given, plain or as its Basic header, to a registry that
/// requires it (so the push succeeding shows it was sent). oci-client, whose debug lines
/// printed tokens, no longer makes requests: the registry client is this crate's.
#[test]
fn a_push_logged_at_trace_level_writes_no_credential() {
    const PASSWORD: &str = "pw-9f1c2e7a5b3d";
    /// bcrypt of PASSWORD at the lowest cost (Python's `crypt`, METHOD_BLOWFISH, 16
    /// rounds), checked at every request: the registry's htpasswd.
    const BCRYPT: &str = "$2b$04$DhGJO4AVyHQqzQ.p9gGtp.2h9tlL5wzq.ZyaJgTqWNd26YOTzo0CW";
    /// base64("pusher:pw-9f1c2e7a5b3d"), as the Authorization header carries it.
    const BASIC: &str = "cHVzaGVyOnB3LTlmMWMyZTdhNWIzZA==";
    let registry = Registry::requiring("pusher", BCRYPT);
    let output = ahp_command()
        .args(["component", "push"])
        .arg(format!("{}/{REPOSITORY}:{TAG}", registry.host()))
        .env("AHP_LOG", "trace")
        .env("AHP_REGISTRY_HOST", registry.host())
        .env("AHP_REGISTRY_USERNAME", "pusher")
        .env("AHP_REGISTRY_PASSWORD", PASSWORD)
        .output()
        .expect("run ahp component push");
    assert_success(&output, "ahp component push");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(" TRACE "),
        "trace lines are written: {stderr}"
    );
    assert!(!stderr.contains(PASSWORD), "{stderr}");
    assert!(!stderr.contains(BASIC), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_reference_is_pulled_verified_run_and_then_served_from_the_cache() {
    let (registry, pushed, case) = pushed().await;
    case.assert_ran(&case.intercept(&pinned(&pushed)).await, 1);
    assert_eq!(
        std::fs::read(case.cached_component()).expect("cached"),
        EMBEDDED_COMPONENT
    );
    drop(registry);
    case.assert_ran(&case.intercept(&pinned(&pushed)).await, 2);
}

/// A proxy in the environment is used neither to push to nor to pull from a loopback
/// registry: its plain http, and any credentials, stay on the machine (here the proxy is
/// a closed port).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_registry_is_reached_past_the_environments_proxy() {
    let registry = Registry::start();
    let mut push = ahp_command();
    push.args(["component", "push"])
        .arg(format!("{}/{REPOSITORY}:{TAG}", registry.host()));
    past_a_dead_proxy(&mut push);
    let output = push.output().expect("run ahp component push");
    assert_success(&output, "ahp component push behind a proxy");
    let pushed = one_json_line(&String::from_utf8_lossy(&output.stdout));
    let case = Case::new().await;
    let mut pull = case.intercept_command(&pinned(&pushed));
    past_a_dead_proxy(pull.as_std_mut());
    let output = pull.output().await.expect("run ahp intercept");
    case.assert_ran(&output, 1);
}

/// Every proxy variable at a closed port, and no exceptions.
fn past_a_dead_proxy(command: &mut std::process::Command) {
    for proxy in ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
        command.env(proxy, "http://127.0.0.1:9");
    }
    command.env_remove("NO_PROXY").env_remove("no_proxy");
}

/// A second pull of a pinned reference reads the manifest and the component from the
/// cache and writes neither again (each pull used to replace and sync the manifest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_served_from_the_cache_does_not_rewrite_it() {
    let (_registry, pushed, case) = pushed().await;
    case.assert_ran(&case.intercept(&pinned(&pushed)).await, 1);
    let files = [
        case.cached(pushed["manifestDigest"].as_str().expect("digest")),
        case.cached_component(),
    ];
    let stat = |file: &std::path::PathBuf| {
        let meta = std::fs::metadata(file).expect("cached");
        (meta.ino(), meta.mtime(), meta.mtime_nsec())
    };
    let before: Vec<_> = files.iter().map(stat).collect();
    // Let a rewrite show in the modification time even on a coarse-grained filesystem.
    tokio::time::sleep(Duration::from_millis(20)).await;
    case.assert_ran(&case.intercept(&pinned(&pushed)).await, 2);
    let after: Vec<_> = files.iter().map(stat).collect();
    assert_eq!(after, before, "not rewritten");
}

/// A cache that cannot be written costs only the caching: the verified pull still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_cache_still_runs_the_pulled_component() {
    let (_registry, pushed, case) = pushed().await;
    // A file where the cache's `oci` directory would go: unwritable even for root.
    std::fs::write(case.cache.path().join("oci"), b"not a directory").expect("write a file");
    case.assert_ran(&case.intercept(&pinned(&pushed)).await, 1);
    assert!(!case.cached_component().exists());
}

/// With no cache directory at all (no `AHP_CACHE_DIR`, `XDG_CACHE_HOME` or `HOME`, as under
/// `env -i` or some service managers) the pull still runs, verified by digest, only
/// uncached, as the compiled component is then compiled uncached: both say so in the
/// debug log, and nothing is written where the command runs either.
#[tokio::test]
async fn a_pull_without_a_cache_directory_runs_uncached() {
    let (_registry, pushed, case) = pushed().await;
    let working = tempfile::tempdir().expect("a working directory");
    for run in 1..=2 {
        let mut command = case.intercept_command(&pinned(&pushed));
        for name in ["AHP_CACHE_DIR", "XDG_CACHE_HOME", "HOME"] {
            command.env_remove(name);
        }
        command
            .current_dir(working.path())
            .env("AHP_LOG", "ahp_host=debug");
        let output = command.output().await.expect("run ahp intercept");
        case.assert_ran(&output, run);
        let log = String::from_utf8_lossy(&output.stderr);
        for uncached in [
            "no cache directory (AHP_CACHE_DIR, XDG_CACHE_HOME, HOME); pulling uncached",
            "no cache directory (AHP_CACHE_DIR, XDG_CACHE_HOME, HOME); compiling",
        ] {
            assert!(log.contains(uncached), "run {run}, {uncached:?}: {log}");
        }
    }
    let written: Vec<_> = std::fs::read_dir(working.path())
        .expect("the working directory")
        .collect();
    assert!(written.is_empty(), "nothing written: {written:?}");
}

/// The directories a pull creates are private (0700) under a umask of 002 too: the
/// compiled component's cache refuses a directory others can write to, so a shared one
/// would leave every later process compiling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_directories_a_pull_creates_are_private_whatever_the_umask() {
    let (_registry, pushed, case) = pushed().await;
    let cache = case.cache.path().join("made-by-the-pull");
    let mut command = case.intercept_command(&pinned(&pushed));
    command.env("AHP_CACHE_DIR", &cache);
    // SAFETY: umask is async-signal-safe, the only call between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::umask(0o002);
            Ok(())
        });
    }
    case.assert_ran(&command.output().await.expect("run ahp intercept"), 1);
    let mut dir = cache.clone();
    for below in ["", "oci", "blobs", "sha256"] {
        dir.push(below);
        let mode = std::fs::metadata(&dir).expect("created").mode() & 0o777;
        assert_eq!(format!("{mode:o}"), "700", "{}", dir.display());
    }
    let compiled = std::fs::read_dir(&cache)
        .expect("the cache directory")
        .filter_map(|entry| entry.ok())
        .any(|entry| entry.path().extension().is_some_and(|ext| ext == "cwasm"));
    assert!(
        compiled,
        "the compiled component's cache used the directory"
    );
}

/// Run as root with `HOME` a user's home that has no `.cache` yet (a root shell or
/// service keeping a user's environment), neither the compile nor the pull makes its
/// cache there: made first and refused after, a `.cache` of root's, mode 0700, would stay
/// and lock the user out of their own. Both still run, uncached. Only root can give a
/// directory to another user: under any other user the test says so and passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cache_is_made_under_a_home_of_another_users() {
    // SAFETY: geteuid takes no arguments, cannot fail and touches no memory of ours.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: not root, so no home of another user's can be made here");
        return;
    }
    let (_registry, pushed, case) = pushed().await;
    let home = tempfile::tempdir().expect("a home directory");
    std::os::unix::fs::chown(home.path(), Some(1000), Some(1000)).expect("chown the home");
    let compiled = case.embedded_intercept_command();
    let pulled = case.intercept_command(&pinned(&pushed));
    for (run, mut command) in [(1, compiled), (2, pulled)] {
        command
            .env_remove("AHP_CACHE_DIR")
            .env_remove("XDG_CACHE_HOME")
            .env("HOME", home.path())
            .env("AHP_LOG", "ahp_host=debug");
        let output = command.output().await.expect("run ahp intercept");
        case.assert_ran(&output, run);
        let log = String::from_utf8_lossy(&output.stderr);
        let refused = format!(
            "{} is owned by another user, on the way to the cache directory",
            home.path().display()
        );
        assert!(log.contains(&refused), "run {run}: {log}");
        let made: Vec<_> = std::fs::read_dir(home.path())
            .expect("the home directory")
            .collect();
        assert!(made.is_empty(), "run {run}: made in the home: {made:?}");
    }
}

/// A FIFO or a symbolic link where a cached blob should be is a miss: the FIFO is not
/// waited on (the registry serves the component instead), the link is not read through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_or_a_symbolic_link_in_place_of_a_cached_blob_is_a_miss() {
    let (registry, pushed, case) = pushed().await;
    case.assert_ran(&case.intercept(&pinned(&pushed)).await, 1);
    let blob = case.cached_component();
    std::fs::remove_file(&blob).expect("remove the cached component");
    ahp_tests::support::make_fifo(&blob);
    let output = tokio::time::timeout(Duration::from_secs(60), case.intercept(&pinned(&pushed)))
        .await
        .expect("the pull waited on a FIFO in the cache");
    case.assert_ran(&output, 2);
    let replaced = std::fs::symlink_metadata(&blob).expect("the cached component");
    assert!(
        replaced.is_file(),
        "the FIFO replaced by the pulled component"
    );

    // A link to the right bytes is not followed either: with the registry gone, nothing runs.
    let elsewhere = case.dir.path().join("component.wasm");
    std::fs::rename(&blob, &elsewhere).expect("move the cached component");
    std::os::unix::fs::symlink(&elsewhere, &blob).expect("symlink");
    drop(registry);
    let output = case.intercept(&pinned(&pushed)).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("pull the component"), "{stderr}");
    assert_eq!(
        case.backend.requests().len(),
        2,
        "the link's target never ran"
    );
}

/// `ahp precompile --component oci://…` pulls like every command that takes
/// `--component`, and a later `ahp intercept` of the same reference finds both the
/// component and its compiled code in the cache, with the registry gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precompile_pulls_an_oci_component_and_warms_both_caches() {
    let (registry, pushed, case) = pushed().await;
    let output = tokio::process::Command::new(ahp_binary())
        .args(["precompile", "--component", &pinned(&pushed)])
        .env("AHP_CACHE_DIR", case.cache.path())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run ahp precompile");
    assert_success(&output, "ahp precompile");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    let compiled = std::path::PathBuf::from(lines.next().expect("the path line"));
    assert!(
        compiled.starts_with(case.cache.path()) && compiled.is_file(),
        "{stdout}"
    );
    let summary = lines.next().expect("the summary line");
    assert!(summary.starts_with("compiled and stored in "), "{stdout}");
    assert_eq!(
        std::fs::read(case.cached_component()).expect("cached"),
        EMBEDDED_COMPONENT
    );

    drop(registry);
    let mut intercept = case.intercept_command(&pinned(&pushed));
    intercept.env("AHP_LOG", "ahp_host::compile_cache=debug");
    let output = intercept.output().await.expect("run ahp intercept");
    case.assert_ran(&output, 1);
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("compiled component: cache hit"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_is_pulled_from_the_registry_and_run() {
    let (registry, _, case) = pushed().await;
    let tagged = format!("oci://{}/{REPOSITORY}:{TAG}", registry.host());
    case.assert_ran(&case.intercept(&tagged).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_digest_is_refused_and_nothing_runs() {
    let (registry, _, case) = pushed().await;
    let other = sha256(b"some other manifest");
    let wrong = format!("oci://{}/{REPOSITORY}@{other}", registry.host());
    case.assert_refused(&case.intercept(&wrong).await, "pull the manifest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_swapped_in_the_registrys_storage_is_refused() {
    let (registry, pushed, case) = pushed().await;
    // A real, valid component, but not the one the manifest names.
    let layer = registry.blob_path(&sha256(EMBEDDED_COMPONENT));
    std::fs::write(layer, runaway_component()).expect("tamper with the stored layer");
    case.assert_refused(
        &case.intercept(&pinned(&pushed)).await,
        "digest mismatch for the component of",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_altered_in_the_registrys_storage_is_refused() {
    let (registry, pushed, case) = pushed().await;
    let manifest = registry.blob_path(pushed["manifestDigest"].as_str().expect("digest"));
    let altered = String::from_utf8(std::fs::read(&manifest).expect("manifest"))
        .expect("UTF-8 manifest")
        .replace("Apache-2.0", "Apache-2.1");
    std::fs::write(&manifest, altered).expect("tamper with the stored manifest");
    case.assert_refused(
        &case.intercept(&pinned(&pushed)).await,
        "the registry's manifest is sha256:",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_cache_entry_is_never_run() {
    let (registry, pushed, case) = pushed().await;
    case.assert_ran(&case.intercept(&pinned(&pushed)).await, 1);
    std::fs::write(case.cached_component(), runaway_component())
        .expect("corrupt the cached component");
    // The corrupt entry is a miss; with the registry gone there is nothing else to run.
    drop(registry);
    let output = case.intercept(&pinned(&pushed)).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("pull the component"), "{stderr}");
    let calls = case.backend.requests().len();
    assert_eq!(calls, 1, "only the first, verified call ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_reference_is_a_usage_error() {
    let case = Case::new().await;
    for (source, expected) in [
        ("oci://interceptor", "name the registry"),
        (
            "oci://127.0.0.1:1/ahp/interceptor@sha256:abc",
            "invalid OCI reference",
        ),
        (
            "oci://127.0.0.1:1/ahp/interceptor@md5:abc",
            "invalid OCI reference",
        ),
        ("oci://127.0.0.1:1/ahp/Interceptor", "invalid OCI reference"),
    ] {
        let output = case.intercept(source).await;
        case.assert_refused(&output, expected);
        case.assert_refused(&output, "--component: ");
    }
}

/// `ahp hook install` of a pulled component: a host option its hooks could not be set up
/// with (`--allow-insecure-http` naming no backend) is refused like any other, the
/// component pulled fine; only a component the registry cannot give now (here gone, with
/// nothing cached) leaves the registration unchecked, a warning, as it may load later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_install_of_a_pulled_component_is_unchecked_only_while_it_cannot_be_had() {
    let (registry, pushed, case) = pushed().await;
    let install = |cache: &Path, extra: &[&str]| {
        let mut command = case.install_command(&pinned(&pushed), cache);
        command.args(extra);
        command
    };
    let typo = ["--allow-insecure-http", "dev.typo"];
    let output = install(case.cache.path(), &typo)
        .output()
        .await
        .expect("run");
    assert_install_refused(&output, "dev.typo");

    drop(registry);
    let empty = tempfile::tempdir().expect("a cache directory");
    let output = install(empty.path(), &[]).output().await.expect("run");
    assert_unchecked(&output, &pinned(&pushed));

    // The clients' secret files are known without the component: an audit log there is
    // refused all the same.
    let secret = case.dir.path().join("client-secret");
    std::fs::write(&secret, "client-secret-7e41").expect("write the secret");
    let clients = case.dir.path().join("clients.json");
    let client = serde_json::json!([{"issuer": "https://as.example", "clientId": "c",
        "clientSecretRef": format!("file:{}", secret.display())}]);
    std::fs::write(&clients, client.to_string()).expect("write the clients");
    let (clients, secret) = (clients.display().to_string(), secret.display().to_string());
    let extra = ["--oauth-clients", &clients, "--audit", &secret];
    let output = install(empty.path(), &extra).output().await.expect("run");
    assert_install_refused(
        &output,
        &format!("--audit {secret}: the file --oauth-clients'"),
    );
    assert_eq!(std::fs::read(&secret).expect("read"), b"client-secret-7e41");
}

/// `ahp hook install` of a component pulled from a registry that never answers: one pull,
/// one connection, ended by one pull's deadline (60 s), not one per step of the install
/// (pinning the tag, checking the registration, compiling ahead: four pulls, 240 s). The
/// hooks keep the tag, the registration unchecked, said once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_install_pulls_once_within_one_deadline_from_a_registry_that_never_answers() {
    let case = Case::new().await;
    let registry = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let tagged = format!("oci://{}/{REPOSITORY}:{TAG}", registry.addr());
    let started = std::time::Instant::now();
    let output = case
        .install_command(&tagged, case.cache.path())
        .output()
        .await
        .expect("run");
    let took = started.elapsed();
    assert_unchecked(&output, &tagged);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("each hook call resolves its tag anew")
    );
    assert_eq!(registry.connections(), 1, "one pull");
    assert!(
        took < Duration::from_secs(100),
        "one deadline, took {took:?}"
    );
    let snippet = String::from_utf8_lossy(&output.stdout);
    assert!(
        snippet.contains(&format!("--component {tagged} ")),
        "{snippet}"
    );
}

/// An `ahp hook install` refused, naming `named`: exit 1, and no snippet.
fn assert_install_refused(output: &Output, named: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(named), "{named:?} in {stderr}");
    assert!(output.stdout.is_empty(), "no snippet");
}

/// An `ahp hook install` of `source` that its registry could not give: exit 0, a snippet,
/// and one warning that says the registration was not checked nor the component compiled
/// ahead.
fn assert_unchecked(output: &Output, source: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    let said = format!("warning: --component {source} could not be pulled now (");
    assert!(warnings[0].starts_with(&said), "{stderr}");
    assert!(
        warnings[0].contains(
            "the registration was not checked against what claude-code can intercept, nor \
             the component compiled ahead, nor the budget sized to its deadlines (10 s \
             unless --budget-ms says)"
        ),
        "{stderr}"
    );
    let snippet: Value = serde_json::from_slice(&output.stdout).expect("the snippet");
    assert!(snippet["hooks"].is_object(), "{snippet}");
}

/// `ahp hook install` of a component from a registry whose answers this client's rules
/// refuse — a token service (realm) over plain http, a redirect to a server whose
/// certificate does not verify — is refused, no snippet printed: the same answers come
/// again, so the hooks would deny every call. Neither is a registry that is down now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_install_of_a_component_behind_answers_the_client_refuses_is_refused() {
    let case = Case::new().await;
    // Presents a certificate of a CA made for this test, which nothing trusts.
    let untrusted = Pki::generate().tls_front(case.backend.addr()).await;
    for (answer, expected) in [
        (
            "401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"http://example.com/token\""
                .to_string(),
            "the registry's token service (realm) is plain http: refused",
        ),
        (
            format!("307 Temporary Redirect\r\nLocation: https://127.0.0.1:{untrusted}/v2/"),
            "invalid peer certificate",
        ),
    ] {
        let answer = format!("HTTP/1.1 {answer}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        let registry =
            FaultBackend::start(vec![Behaviour::RawThenClose(answer.into_bytes())]).await;
        let source = format!("oci://{}/{REPOSITORY}:{TAG}", registry.addr());
        let output = case
            .install_command(&source, case.cache.path())
            .output()
            .await
            .expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{expected}: {stderr}");
        assert!(stderr.contains(expected), "{expected}: {stderr}");
        assert!(!stderr.contains("not checked"), "{expected}: {stderr}");
        assert!(output.stdout.is_empty(), "{expected}: no snippet");
    }
}

/// `ahp hook install` of a tagged component pins it to the manifest the tag names at
/// install: the hooks run the component install checked the registration against, not
/// whatever is pushed to the tag later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_install_pins_a_tag_to_the_manifest_it_names() {
    let (registry, pushed, case) = pushed().await;
    let tagged = format!("oci://{}/{REPOSITORY}:{TAG}", registry.host());
    let output = case
        .install_command(&tagged, case.cache.path())
        .output()
        .await
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let pushed = pinned(&pushed);
    let (_, digest) = pushed.rsplit_once('@').expect("a pinned reference");
    let expected = format!("{tagged}@{digest}");
    let snippet = String::from_utf8_lossy(&output.stdout);
    assert!(
        snippet.contains(&format!("--component {expected} ")),
        "{snippet}"
    );
    assert!(
        stderr.contains(&format!("pinned to {expected}")),
        "{stderr}"
    );
}

/// `ahp hook install` of a component the registry gives but that fails a check (here a
/// layer swapped in the registry's storage: a digest mismatch) is refused, no snippet
/// printed: its hooks could never load it, and would deny every call. Only a registry
/// that cannot give it now leaves the registration unchecked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_install_of_a_component_that_fails_its_digest_is_refused() {
    let (registry, pushed, case) = pushed().await;
    let layer = registry.blob_path(&sha256(EMBEDDED_COMPONENT));
    std::fs::write(layer, runaway_component()).expect("tamper with the stored layer");
    let output = case
        .install_command(&pinned(&pushed), case.cache.path())
        .output()
        .await
        .expect("run");
    assert_install_refused(&output, "digest mismatch for the component of");
}

/// `hook install` checks its other options before it pulls: a bad one behind a registry
/// that takes connections and never answers is refused at once, the registry not asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_install_refuses_a_bad_option_before_it_pulls() {
    let case = Case::new().await;
    let silent = FaultBackend::start(vec![Behaviour::Blackhole]).await;
    let source = format!("oci://{}/ahp/interceptor:1", silent.addr());
    let started = std::time::Instant::now();
    let output = case
        .install_command(&source, case.cache.path())
        .args(["--interceptable", "tool.before"])
        .output()
        .await
        .expect("run ahp hook install");
    assert_install_refused(&output, "--interceptable does not apply");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(silent.connections(), 0, "the registry was asked");
}
