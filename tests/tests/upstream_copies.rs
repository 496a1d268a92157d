//! The upstream test data in `tests/upstream` is a byte-exact copy: every file the
//! manifest names is there with the sha256 it names, and nothing else is.

use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/upstream"))
}

/// Files under `dir`, as paths relative to `root`.
fn files(root: &Path, dir: &Path, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            files(root, &path, found);
        } else {
            let relative = path.strip_prefix(root).expect("below the root");
            found.insert(relative.to_string_lossy().into_owned());
        }
    }
}

#[test]
fn upstream_copies_are_byte_exact() {
    let root = root();
    let manifest = std::fs::read_to_string(root.join("MANIFEST.tsv")).expect("MANIFEST.tsv");
    let mut listed = BTreeSet::new();
    for line in manifest.lines().skip(1) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [path, commit, sha256] = fields[..] else {
            panic!("manifest line has not three fields: {line:?}");
        };
        assert_eq!(commit.len(), 40, "{path}: upstream commit {commit:?}");
        let bytes = std::fs::read(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        let actual: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(actual, sha256, "{path} differs from the upstream copy");
        listed.insert(path.to_string());
    }
    let mut present = BTreeSet::new();
    files(&root, &root, &mut present);
    for own in ["MANIFEST.tsv", "LICENSE", "NOTICE"] {
        assert!(present.remove(own), "{own} is missing");
    }
    assert_eq!(present, listed, "files present vs files in MANIFEST.tsv");
    assert!(listed.len() > 50, "only {} upstream files", listed.len());
}
