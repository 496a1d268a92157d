//! Builds the guest crate as a WebAssembly component and puts it in OUT_DIR, so the
//! `ahp` binary and the library embed the component bytes and work alone.
//!
//! A nested cargo needs care (BUILD-NOTES.md trap 10): its own target dir, none of the
//! outer build's flags or wrappers, and failures forwarded as warnings plus an error.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir.parent().expect("host/ lives in the workspace").to_path_buf();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for watched in ["guest/src", "guest/Cargo.toml", "wit", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", workspace.join(watched).display());
    }
    println!("cargo:rerun-if-env-changed=AHP_COMPONENT");

    let wasm = match std::env::var("AHP_COMPONENT") {
        // A prebuilt component (e.g. from a release pipeline) instead of building here.
        Ok(path) => PathBuf::from(path),
        Err(_) => build_guest(&workspace),
    };
    let dest = out_dir.join("ahp_interceptor.wasm");
    std::fs::copy(&wasm, &dest).unwrap_or_else(|e| panic!("copy {} to {}: {e}", wasm.display(), dest.display()));
}

fn build_guest(workspace: &Path) -> PathBuf {
    ensure_target();
    let target_dir = workspace.join("target").join("guest-build");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args(["build", "--package", "ahp-interceptor", "--lib", "--profile", "guest", "--target", TARGET])
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
    let output = cmd.output().expect("run cargo for the guest component");
    if !output.status.success() {
        for line in String::from_utf8_lossy(&output.stderr).lines() {
            println!("cargo:warning={line}");
        }
        panic!("building the guest component for {TARGET} failed (see warnings above)");
    }
    target_dir.join(TARGET).join("guest").join("ahp_interceptor.wasm")
}

/// Installs the wasm32-wasip2 standard library when rustup is present and it is missing,
/// so a fresh machine needs no manual step.
fn ensure_target() {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == TARGET))
        .unwrap_or(true);
    if !installed {
        let status = Command::new("rustup").args(["target", "add", TARGET]).status();
        if !matches!(status, Ok(s) if s.success()) {
            println!("cargo:warning=could not install the {TARGET} target; run `rustup target add {TARGET}`");
        }
    }
}
