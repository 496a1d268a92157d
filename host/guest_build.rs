//! Builds a workspace crate as a `wasm32-wasip2` component from a build script. Shared by
//! `host/build.rs` (the real component) and `tests/build.rs` (test-only components).
//!
//! A nested cargo needs care (BUILD-NOTES.md trap 10): its own target dir, none of the
//! outer build's flags or wrappers, and failures forwarded as warnings plus an error.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

/// Builds `package` with the `guest` profile and returns the path of its component.
pub fn build_component(workspace: &Path, package: &str) -> PathBuf {
    ensure_target();
    let target_dir = workspace.join("target").join("guest-build");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args([
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
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd.output().expect("run cargo for a guest component");
    if !output.status.success() {
        for line in String::from_utf8_lossy(&output.stderr).lines() {
            println!("cargo:warning={line}");
        }
        panic!("building {package} for {TARGET} failed (see warnings above)");
    }
    let file = format!("{}.wasm", package.replace('-', "_"));
    target_dir.join(TARGET).join("guest").join(file)
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
