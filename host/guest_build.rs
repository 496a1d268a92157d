//! Nested cargo builds from a build script: a workspace crate as a `wasm32-wasip2`
//! component, or another crate's binary. Shared by `host/build.rs` (the real component)
//! and `tests/build.rs` (test-only components, the Rust SDK peer).
//!
//! A nested cargo needs care (BUILD-NOTES.md trap 10): its own target dir, none of the
//! outer build's flags or wrappers, and failures forwarded as warnings plus an error.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

/// Builds `package` with the `guest` profile and returns the path of its component.
pub fn build_component(workspace: &Path, package: &str) -> PathBuf {
    ensure_target();
    let target_dir = outer_target_dir().join("guest-build");
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
    .arg(&target_dir);
    run(cmd, &format!("building {package} for {TARGET}"));
    let file = format!("{}.wasm", package.replace('-', "_"));
    target_dir.join(TARGET).join("guest").join(file)
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

/// Installs the wasm32-wasip2 standard library when rustup is present and it is missing,
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
