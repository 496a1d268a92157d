//! Builds what the tests run besides this crate, and tells them where it is:
//!
//! - `RUNAWAY_COMPONENT`: the test-only hostile component (`tests/runaway-guest`).
//! - `RUST_SDK_PEER`: the official Rust SDK backend (`tests/rust-sdk-peer`), a crate with
//!   its own workspace and lock file, so the SDK's serde_json features never reach this
//!   workspace's crates.

// Shared with host/build.rs, which also encodes the WIT package and watches the revision.
#[path = "../host/componentize.rs"]
#[allow(dead_code)]
mod componentize;
#[path = "../host/guest_build.rs"]
#[allow(dead_code)]
mod guest_build;

use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf();
    for watched in [
        "tests/runaway-guest",
        "wit",
        "host/guest_build.rs",
        "host/componentize.rs",
        "tests/rust-sdk-peer/Cargo.toml",
        "tests/rust-sdk-peer/Cargo.lock",
        "tests/rust-sdk-peer/src",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    let component = guest_build::build_component(
        &workspace,
        "ahp-runaway-guest",
        &guest_build::outer_target_dir().join("guest-build"),
        "unknown",
    );
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let wasm = out_dir.join("ahp_runaway_guest.wasm");
    std::fs::write(&wasm, component).unwrap_or_else(|e| panic!("write {}: {e}", wasm.display()));
    println!("cargo:rustc-env=RUNAWAY_COMPONENT={}", wasm.display());
    let peer = build_rust_sdk_peer(&manifest_dir.join("rust-sdk-peer"));
    println!("cargo:rustc-env=RUST_SDK_PEER={}", peer.display());
}

/// Builds the Rust SDK peer (dev profile, `--locked`) with a nested cargo and returns the
/// path of its binary.
///
/// Its target directory is `<outer target dir>/rust-sdk-peer`, so a shared or cached
/// target directory keeps the SDK's ~1 min build.
fn build_rust_sdk_peer(crate_dir: &Path) -> PathBuf {
    let target_dir = guest_build::outer_target_dir().join("rust-sdk-peer");
    let mut cmd = guest_build::nested_cargo(crate_dir);
    cmd.args([
        "build",
        "--locked",
        "--bin",
        "rust-sdk-peer",
        "--manifest-path",
    ])
    .arg(crate_dir.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(&target_dir);
    guest_build::run(cmd, "building tests/rust-sdk-peer");
    target_dir
        .join("debug")
        .join(format!("rust-sdk-peer{}", std::env::consts::EXE_SUFFIX))
}
