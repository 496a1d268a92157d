//! Reproducible component (issue 13): two clean builds of the same sources in different
//! directories, each with its own empty target directory, give the same bytes, and the
//! same bytes as the component embedded in `ahp`.
//!
//! The build is the one `host/build.rs` runs (the same code, included here): the guest
//! for `wasm32-unknown-unknown` with paths remapped, then componentized with metadata. It
//! takes a few minutes, most of it compiling the guest's dependencies twice from nothing.

#[path = "../../host/componentize.rs"]
#[allow(dead_code)]
mod componentize;
#[path = "../../host/guest_build.rs"]
#[allow(dead_code)]
mod guest_build;

use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// The workspace's sources as the working tree has them (tracked and new files, not
/// ignored ones such as target directories), copied to `to`.
fn copy_sources(workspace: &Path, to: &Path) -> PathBuf {
    let listed = std::process::Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(workspace)
        .output()
        .expect("run git ls-files (the test copies the checkout's files)");
    assert!(listed.status.success(), "git ls-files failed");
    for name in listed.stdout.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name);
        let (from, dest) = (workspace.join(&*name), to.join(&*name));
        if !from.is_file() {
            continue; // deleted in the working tree
        }
        std::fs::create_dir_all(dest.parent().expect("a parent")).expect("create a directory");
        std::fs::copy(&from, &dest).unwrap_or_else(|e| panic!("copy {name}: {e}"));
    }
    to.to_path_buf()
}

#[test]
fn two_clean_builds_in_different_directories_give_the_same_component() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    // Both copies are outside any git checkout: they get the revision the embedded
    // component got, as a source archive's build would (AHP_REVISION).
    let revision = guest_build::revision(workspace);
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let builds: Vec<Vec<u8>> = ["a/ahp-interceptor", "second/clean/build/of/ahp"]
        .into_iter()
        .map(|place| {
            let sources = copy_sources(workspace, &scratch.path().join(place));
            guest_build::build_component(
                &sources,
                "ahp-interceptor",
                &sources.join("target"),
                &revision,
            )
        })
        .collect();
    let [first, second] = [sha256(&builds[0]), sha256(&builds[1])];
    eprintln!("clean build 1: {first} ({} bytes)", builds[0].len());
    eprintln!("clean build 2: {second} ({} bytes)", builds[1].len());
    assert_eq!(first, second, "two clean builds differ");
    assert_eq!(
        first,
        sha256(ahp_host::EMBEDDED_COMPONENT),
        "the embedded component differs from a clean build of the same sources"
    );
}
