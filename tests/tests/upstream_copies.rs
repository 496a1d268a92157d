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

/// The carried fixtures no test reads, each with its reason.
const UNTESTED: &[(&str, &str)] = &[
    (
        "fixtures/draft/http/capabilities-request.valid.json",
        "capability discovery (digest §11) is served by the harness, not by this component",
    ),
    (
        "fixtures/draft/http/capabilities-response.valid.json",
        "capability discovery (digest §11) is served by the harness, not by this component",
    ),
    (
        "fixtures/draft/http/continue-no-instruction.invalid.json",
        "stale: `instruction` became optional, and its `.valid` sibling holds the same effects",
    ),
];

/// Whether `text` names the file `name` in a string: after a `"` or a `/`, before a
/// `"` (so `deny-response.valid.json` is not found in `deny-response.valid.jsonl`, nor
/// in a comment).
fn names(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        matches!(before, Some('"' | '/')) && after == Some('"')
    })
}

/// Each carried fixture is read by a test, by its name or (the registration fixtures)
/// with its whole directory, or is listed in [`UNTESTED`] with a reason; no listed one is
/// read after all.
#[test]
fn every_fixture_is_tested_or_its_reason_given() {
    let repository = root().join("../..");
    let mut sources = BTreeSet::new();
    for dir in [
        "guest/src",
        "guest/tests",
        "host/src",
        "tests/src",
        "tests/tests",
    ] {
        files(&repository, &repository.join(dir), &mut sources);
    }
    // This file names the untested ones; it reads none.
    let text: String = sources
        .iter()
        .filter(|path| path.ends_with(".rs") && !file!().ends_with(path.as_str()))
        .map(|path| std::fs::read_to_string(repository.join(path)).expect("a source file"))
        .collect();
    let whole_directory = "/upstream/fixtures/draft/registration";
    assert!(text.contains(whole_directory));
    let manifest = std::fs::read_to_string(root().join("MANIFEST.tsv")).expect("MANIFEST.tsv");
    let mut unread = Vec::new();
    for path in manifest
        .lines()
        .skip(1)
        .filter_map(|l| l.split('\t').next())
    {
        let Some(fixture) = path.strip_prefix("fixtures/draft/") else {
            continue;
        };
        let name = fixture.rsplit('/').next().expect("a file name");
        let read = names(&text, name) || fixture.starts_with("registration/");
        let listed = UNTESTED.iter().any(|(untested, _)| *untested == path);
        assert!(
            !(read && listed),
            "{path} is read by a test but listed as untested"
        );
        if !read && !listed {
            unread.push(path.to_owned());
        }
    }
    assert!(unread.is_empty(), "fixtures no test reads: {unread:#?}");
}
