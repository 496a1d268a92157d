//! Builds the test-only hostile component (`tests/runaway-guest`) and tells the tests
//! where it is, through `RUNAWAY_COMPONENT`.

#[path = "../host/guest_build.rs"]
mod guest_build;

use std::path::PathBuf;

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf();
    for watched in ["tests/runaway-guest", "wit", "host/guest_build.rs"] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    let wasm = guest_build::build_component(&workspace, "ahp-runaway-guest");
    println!("cargo:rustc-env=RUNAWAY_COMPONENT={}", wasm.display());
}
