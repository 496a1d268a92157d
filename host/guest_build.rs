//! Nested cargo builds from a build script: a workspace crate as a WebAssembly component,
//! or another crate's binary. Shared by `host/build.rs` (the real component) and
//! `tests/build.rs` (test-only components, the Rust SDK peer), and by the test that
//! proves two clean builds give the same bytes (`tests/tests/reproducible_build.rs`).
//!
//! A nested cargo needs care: its own target dir (the outer build holds the lock on its
//! own), none of the outer build's flags or wrappers (`RUSTFLAGS`, `RUSTC_WRAPPER` and
//! `CARGO_ENCODED_RUSTFLAGS` are meant for the host), and failures forwarded as warnings
//! plus an error.
//!
//! The component is built reproducibly: the core module for `wasm32-unknown-unknown`
//! (see `componentize.rs` for why not `wasm32-wasip2`) with the checkout's and cargo
//! home's paths remapped to fixed names, so panic locations carry no absolute path, then
//! componentized with metadata that holds no timestamp.

use crate::componentize::{componentize, Metadata};
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-unknown-unknown";

/// Builds `package` (a crate of `workspace`) with the `guest` profile into `target_dir`
/// and returns it as a component carrying its manifest's metadata and `revision`.
pub fn build_component(
    workspace: &Path,
    package: &str,
    target_dir: &Path,
    revision: &str,
) -> Vec<u8> {
    ensure_target();
    let mut cmd = nested_cargo(workspace);
    cmd.args([
        "build",
        "--package",
        package,
        "--lib",
        "--profile",
        "guest",
        "--target",
        TARGET,
    ])
    .arg("--target-dir")
    .arg(target_dir)
    .env("CARGO_ENCODED_RUSTFLAGS", remap_flags(workspace));
    run(cmd, &format!("building {package} for {TARGET}"));
    let file = format!("{}.wasm", package.replace('-', "_"));
    let module_path = target_dir.join(TARGET).join("guest").join(file);
    let module = std::fs::read(&module_path)
        .unwrap_or_else(|e| panic!("read {}: {e}", module_path.display()));
    let metadata = manifest_metadata(workspace, package, revision);
    componentize(&module, &metadata)
        .unwrap_or_else(|e| panic!("componentize {}: {e}", module_path.display()))
}

/// `--remap-path-prefix` for the checkout and for cargo's home (registry sources), as
/// `CARGO_ENCODED_RUSTFLAGS`: the module then names no directory of this machine.
fn remap_flags(workspace: &Path) -> String {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
    let mut flags = vec![format!(
        "--remap-path-prefix={}=/ahp-interceptor",
        workspace.display()
    )];
    if let Some(home) = cargo_home {
        flags.push(format!("--remap-path-prefix={}=/cargo", home.display()));
    }
    flags.join("\x1f")
}

/// The source revision to embed: `git rev-parse HEAD` of the checkout, else the
/// `AHP_REVISION` environment variable (a build from a source archive), else `unknown`.
pub fn revision(workspace: &Path) -> String {
    let from_git = Command::new("git")
        .arg("-C")
        .arg(workspace)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|r| !r.is_empty());
    from_git
        .or_else(|| std::env::var("AHP_REVISION").ok().filter(|r| !r.is_empty()))
        .unwrap_or_else(|| "unknown".into())
}

/// Tells cargo to run the build script again when the checkout's commit changes (the
/// revision is part of the component's bytes) or `AHP_REVISION` does.
pub fn watch_revision(workspace: &Path) {
    println!("cargo:rerun-if-env-changed=AHP_REVISION");
    let git_path = |name: &str| {
        Command::new("git")
            .arg("-C")
            .arg(workspace)
            .args(["rev-parse", "--path-format=absolute", "--git-path", name])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
    };
    let head = git_path("HEAD");
    let branch = head
        .as_ref()
        .and_then(|h| std::fs::read_to_string(h).ok())
        .and_then(|h| h.strip_prefix("ref: ").map(|r| r.trim().to_string()));
    let mut watched = vec![head, git_path("packed-refs")];
    watched.extend(branch.map(|b| git_path(&b)));
    for path in watched.into_iter().flatten() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// Name, version, description, licence, repository and homepage of `package`, from its
/// manifest (`cargo metadata`), so the component says what the crate says.
fn manifest_metadata(workspace: &Path, package: &str, revision: &str) -> Metadata {
    let mut cmd = nested_cargo(workspace);
    cmd.args(["metadata", "--no-deps", "--format-version", "1"]);
    let output = cmd.output().expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let all: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let found = all["packages"]
        .as_array()
        .and_then(|packages| packages.iter().find(|p| p["name"] == package))
        .unwrap_or_else(|| panic!("package {package} is not in the workspace"));
    let field = |name: &str| {
        found[name]
            .as_str()
            .unwrap_or_else(|| panic!("{package}'s manifest has no `{name}`"))
            .to_string()
    };
    Metadata {
        name: field("name"),
        version: field("version"),
        description: field("description"),
        license: field("license"),
        source: field("repository"),
        homepage: field("homepage"),
        revision: revision.to_string(),
    }
}

/// The outer build's target directory, found from `OUT_DIR`
/// (`<target>[/<triple>]/<profile>/build/<package>-<hash>/out`), so nested builds follow
/// `CARGO_TARGET_DIR` / `--target-dir` and a shared or cached target directory keeps them.
pub fn outer_target_dir() -> PathBuf {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut dir = out_dir.as_path();
    // Up to `<target>`: the first ancestor holding a `CACHEDIR.TAG` (cargo writes one).
    while let Some(parent) = dir.parent() {
        if parent.join("CACHEDIR.TAG").exists() {
            return parent.to_path_buf();
        }
        dir = parent;
    }
    out_dir
        .ancestors()
        .nth(4)
        .expect("OUT_DIR is <target>/<profile>/build/<package>/out")
        .to_path_buf()
}

/// A cargo command in `dir` that inherits nothing of the outer build: none of its flags,
/// wrappers, target or jobserver, and none of the variables cargo sets for this build
/// script, which would leak into the nested build's scripts and fingerprints.
pub fn nested_cargo(dir: &Path) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(dir);
    const SET_FOR_BUILD_SCRIPTS: [&str; 5] = [
        "CARGO_PKG_",
        "CARGO_CFG_",
        "CARGO_FEATURE_",
        "CARGO_MANIFEST_",
        "DEP_",
    ];
    const OUTER_BUILD: [&str; 17] = [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "OUT_DIR",
        "TARGET",
        "HOST",
        "NUM_JOBS",
        "OPT_LEVEL",
        "DEBUG",
        "PROFILE",
        "RUSTC_LINKER",
    ];
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if SET_FOR_BUILD_SCRIPTS.iter().any(|p| name.starts_with(p))
            || OUTER_BUILD.contains(&name.as_ref())
        {
            cmd.env_remove(name.as_ref());
        }
    }
    cmd
}

/// Runs a nested build; on failure, forwards its stderr as warnings and fails the build.
pub fn run(mut cmd: Command, what: &str) {
    let output = cmd.output().expect("run a nested cargo");
    if !output.status.success() {
        for line in String::from_utf8_lossy(&output.stderr).lines() {
            println!("cargo:warning={line}");
        }
        panic!("{what} failed (see warnings above)");
    }
}

/// Installs the wasm32-unknown-unknown standard library when rustup is present and it is missing,
/// so a fresh machine needs no manual step.
fn ensure_target() {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == TARGET)
        })
        .unwrap_or(true);
    if !installed {
        let status = Command::new("rustup")
            .args(["target", "add", TARGET])
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            println!("cargo:warning=could not install the {TARGET} target; run `rustup target add {TARGET}`");
        }
    }
}
