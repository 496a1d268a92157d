//! Keeps the on-disk caches (the compiled component's, the OCI blob store's) from growing
//! without bound.
//!
//! A cache entry's name is a hash of everything it depends on, so an entry that nothing
//! asks for any more (an older component, wasmtime release or engine configuration) is
//! never hit again, yet nothing would remove it. So when an entry is stored (a miss: rare,
//! and just when an older entry may have gone stale), [`prune`] removes the entries not
//! used for [`MAX_AGE`], and the temporary files older than [`MAX_TEMP_AGE`], which a
//! process killed between creating one and renaming it into place left behind. A hit
//! marks its entry as in use ([`keep_fresh`]: its modification time is set to now, at most
//! once per [`REFRESH_AFTER`]), so an entry any program of this user still loads is kept,
//! however many there are: pruning by age, not by count or size, never evicts one in use.
//!
//! All of it is best effort: a failure is logged at debug level and otherwise ignored,
//! never an error of the caller and never a wrong load (a pruned entry is a miss, and
//! compiles or downloads again). Only what is the cache's own is removed: a regular file
//! owned by this user whose name is an entry's or one of [`temp_file_in`]'s. The
//! directory is listed, never descended into, and nothing in it is followed: a symbolic
//! link, a directory or another user's file is left as it is, whatever its name.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, SystemTime};

const HOUR: Duration = Duration::from_secs(60 * 60);

/// How long an entry is kept after it was last stored or used.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// How long a temporary file is kept: a store takes seconds, so one this old was left
/// behind by a process that did not finish it.
pub(crate) const MAX_TEMP_AGE: Duration = HOUR;

/// How stale an entry's modification time may be before a hit refreshes it: a hit then
/// writes at most once a day.
pub(crate) const REFRESH_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// A temporary file's name: this prefix and [`TEMP_RANDOM`] random ASCII letters and
/// digits. Not tempfile's default `.tmp`: a cache directory set to one shared with other
/// programs (`AHP_CACHE_DIR=~/.cache`) must not have their temporary files pruned.
const TEMP_PREFIX: &str = ".ahp-tmp";
const TEMP_RANDOM: usize = 6;

/// A new private (0600) temporary file in `dir`, named so that [`prune`] knows it for
/// the cache's own.
pub(crate) fn temp_file_in(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .rand_bytes(TEMP_RANDOM)
        .tempfile_in(dir)
}

/// 64 lowercase hex digits: how both caches name their entries (a sha256).
pub(crate) fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Removes from `dir` the entries (the files whose name `is_entry` accepts) last modified
/// more than [`MAX_AGE`] ago and the temporary files more than [`MAX_TEMP_AGE`] ago; never
/// `keep`, the entry just stored.
pub(crate) fn prune(dir: &Path, keep: &Path, is_entry: impl Fn(&str) -> bool) {
    prune_at(dir, keep, &is_entry, SystemTime::now());
}

/// [`prune`] as if it were `now`.
fn prune_at(dir: &Path, keep: &Path, is_entry: &dyn Fn(&str) -> bool, now: SystemTime) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::debug!(path = %dir.display(), error = %e, "cache: not pruned");
            return;
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let max_age = match name.to_str() {
            Some(name) if is_entry(name) => MAX_AGE,
            Some(name) if is_temp(name) => MAX_TEMP_AGE,
            _ => continue,
        };
        let path = entry.path();
        if path == keep {
            continue;
        }
        // Of the entry itself: a symbolic link is not followed.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let stale = meta
            .modified()
            .ok()
            // A time in the future is no age: kept.
            .and_then(|modified| now.duration_since(modified).ok())
            .is_some_and(|age| age > max_age);
        if !stale || !meta.is_file() || !is_mine(&meta) {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => tracing::debug!(path = %path.display(), "cache: pruned"),
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "cache: could not prune")
            }
        }
    }
}

/// Marks the entry open as `file`, just read, as in use: its modification time is set to
/// now if it is more than [`REFRESH_AFTER`] old. On unix this needs no write access, only
/// ownership, which the caches check before they read.
pub(crate) fn keep_fresh(file: &File) {
    let now = SystemTime::now();
    let Ok(modified) = file.metadata().and_then(|meta| meta.modified()) else {
        return;
    };
    if now
        .duration_since(modified)
        .is_ok_and(|age| age > REFRESH_AFTER)
    {
        if let Err(e) = file.set_modified(now) {
            tracing::debug!(error = %e, "cache: could not mark an entry as in use");
        }
    }
}

fn is_temp(name: &str) -> bool {
    name.strip_prefix(TEMP_PREFIX).is_some_and(|random| {
        random.len() == TEMP_RANDOM && random.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

#[cfg(unix)]
fn is_mine(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    // SAFETY: geteuid takes no arguments, cannot fail and touches no memory of ours.
    meta.uid() == unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn is_mine(_meta: &std::fs::Metadata) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Even when every file in the directory is old enough to go, the one just stored
    /// stays: here "now" is two months after it was written.
    #[test]
    fn the_entry_just_stored_is_never_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let keep = dir.path().join("a".repeat(64));
        let other = dir.path().join("b".repeat(64));
        std::fs::write(&keep, b"just stored").unwrap();
        std::fs::write(&other, b"stored with it").unwrap();
        let later = SystemTime::now() + 2 * MAX_AGE;
        prune_at(dir.path(), &keep, &is_sha256_hex, later);
        assert!(keep.is_file());
        assert!(!other.exists());
    }

    #[test]
    fn only_exact_entry_and_temporary_names_are_the_caches_own() {
        assert!(is_temp(".ahp-tmpAb12Cd"));
        for name in [
            ".ahp-tmp",
            ".ahp-tmpAb12C",
            ".ahp-tmpAb12Cde",
            ".ahp-tmpAb-2Cd",
            "ahp-tmpAb12Cd",
            ".ahp-tmpAb12Cd.cwasm",
            // tempfile's own default name, which other programs' files have.
            ".tmpAb12Cd",
        ] {
            assert!(!is_temp(name), "{name}");
        }
        assert!(is_sha256_hex(&"0a".repeat(32)));
        for name in [
            "0a".repeat(31),
            "0A".repeat(32),
            format!("{}.", "0a".repeat(32)),
        ] {
            assert!(!is_sha256_hex(&name), "{name}");
        }
    }
}
