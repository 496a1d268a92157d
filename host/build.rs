//! Builds the guest crate as a WebAssembly component and encodes the WIT package, both
//! into OUT_DIR, so the `ahp` binary and the library embed them and work alone.

#[path = "componentize.rs"]
mod componentize;
#[path = "guest_build.rs"]
mod guest_build;

use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("host/ lives in the workspace")
        .to_path_buf();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    // The root manifest holds the `guest` profile and the metadata, the lock file the
    // guest's dependencies.
    for watched in [
        "Cargo.toml",
        "Cargo.lock",
        "guest/src",
        "guest/Cargo.toml",
        // The word lists and record types the guest shares with the host.
        "guest/vocab",
        "wit",
        "host/guest_build.rs",
        "host/componentize.rs",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    guest_build::watch_revision(&workspace);
    println!("cargo:rerun-if-env-changed=AHP_COMPONENT");
    let component = match std::env::var("AHP_COMPONENT") {
        // A prebuilt component (e.g. from a release pipeline) instead of building here:
        // said at every build, so that a stray export cannot swap the policy core of
        // every binary built in that shell unnoticed, and it must be a component.
        // Absolute, and watched: a relative path would be read from `host/`, and a file
        // replaced at the same path would otherwise leave the old bytes embedded.
        Ok(path) => {
            assert!(
                Path::new(&path).is_absolute(),
                "AHP_COMPONENT={path} must be an absolute path"
            );
            println!("cargo:rerun-if-changed={path}");
            println!("cargo:warning=embedding the component AHP_COMPONENT={path}, not building it");
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
            let is_component = bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[6..8] == [1, 0];
            assert!(
                is_component,
                "AHP_COMPONENT={path} is not a WebAssembly component"
            );
            bytes
        }
        Err(_) => guest_build::build_component(
            &workspace,
            "ahp-interceptor",
            &guest_build::outer_target_dir().join("guest-build"),
            &guest_build::revision(&workspace),
        ),
    };
    write(&out_dir.join("ahp_interceptor.wasm"), &component);
    let wit =
        componentize::encode_wit_package(&workspace.join("wit")).unwrap_or_else(|e| panic!("{e}"));
    write(&out_dir.join("ahp_interceptor.wit.wasm"), &wit);
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}
