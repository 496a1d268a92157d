//! Builds the guest crate as a WebAssembly component and puts it in OUT_DIR, so the
//! `ahp` binary and the library embed the component bytes and work alone.

#[path = "guest_build.rs"]
mod guest_build;

use std::path::PathBuf;

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("host/ lives in the workspace")
        .to_path_buf();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    // The root manifest holds the `guest` profile, and the lock file its dependencies.
    for watched in [
        "Cargo.toml",
        "Cargo.lock",
        "guest/src",
        "guest/Cargo.toml",
        "wit",
        "host/guest_build.rs",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    println!("cargo:rerun-if-env-changed=AHP_COMPONENT");
    let wasm = match std::env::var("AHP_COMPONENT") {
        // A prebuilt component (e.g. from a release pipeline) instead of building here.
        Ok(path) => PathBuf::from(path),
        Err(_) => guest_build::build_component(&workspace, "ahp-interceptor"),
    };
    let dest = out_dir.join("ahp_interceptor.wasm");
    std::fs::copy(&wasm, &dest)
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", wasm.display(), dest.display()));
}
