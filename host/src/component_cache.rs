//! A content-addressed store for pulled components and their manifests.
//!
//! Every file is named by the sha256 of its bytes (`blobs/sha256/HEX`, as in an OCI image
//! layout) and checked against its name on every read, so a corrupted or tampered entry
//! is a miss, never a component that runs. Writes go to a temporary file in the same
//! directory and are renamed into place, so a reader never sees half a file and two
//! processes pulling the same digest cannot interleave.
//!
//! Where: under the compiled component's cache directory
//! ([`crate::compile_cache::cache_dir`]: `$AHP_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/ahp-interceptor`, else `~/.cache/ahp-interceptor`; relative or empty
//! values are ignored), in `oci/blobs/sha256`; every directory it creates is private
//! (0700), made only where nobody else can change the way to it (checked before anything
//! is made, [`crate::compile_cache::create_private_dir`]), and one it finds must be
//! private too: the root this user's (not a link) and writable by nobody else, as the
//! compiled component's cache requires of its own, and `oci`, `blobs` and `sha256` real
//! directories of the same kind, never symbolic links. Otherwise the pull runs
//! uncached: storing, and pruning above all, would act on whatever another user's link
//! names (a content store's blobs are named as these are). Without a cache directory
//! there is no cache, and a pull runs uncached.
//!
//! Storing a blob prunes the blobs unused for 30 days and the temporary files a killed
//! process left behind; reading one marks it as in use ([`crate::cache_prune`]).

use sha2::{Digest as _, Sha256};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

/// `sha256:` followed by 64 lowercase hex digits: the only digests this cache accepts.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// The hex part of a well-formed `sha256:` digest.
pub fn sha256_hex(digest: &str) -> Option<&str> {
    digest
        .strip_prefix("sha256:")
        .filter(|hex| crate::cache_prune::is_sha256_hex(hex))
}

/// A cache rooted at one directory.
pub struct ComponentCache {
    root: PathBuf,
    blobs: PathBuf,
}

impl ComponentCache {
    /// The cache of this user, beside the compiled component's; `None` without a cache
    /// directory (no `AHP_CACHE_DIR`, `XDG_CACHE_HOME` or `HOME`), and a pull then runs
    /// uncached, as the compiled component is then compiled uncached.
    pub fn for_user() -> Option<ComponentCache> {
        let root = crate::compile_cache::cache_dir();
        if root.is_none() {
            tracing::debug!(
                "no cache directory (AHP_CACHE_DIR, XDG_CACHE_HOME, HOME); pulling uncached"
            );
        }
        root.map(|root| ComponentCache::at(&root))
    }

    /// A cache under `root`.
    pub fn at(root: &Path) -> ComponentCache {
        ComponentCache {
            root: root.to_path_buf(),
            blobs: root.join("oci").join("blobs").join("sha256"),
        }
    }

    /// Whether the cache's directories all exist, each private (see the module
    /// documentation); `Ok(false)` if some do not yet (those that do are private): they
    /// are created private when a blob is stored, and until then there is nothing to
    /// read — nor a checked way to read it by.
    fn private(&self) -> std::io::Result<bool> {
        let oci = self.root.join("oci");
        let blobs = oci.join("blobs");
        for dir in [&self.root, &oci, &blobs, &self.blobs] {
            if !crate::compile_cache::private_real_dir(dir)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The bytes stored under `digest`, if present, intact and at most `max_bytes` long.
    /// Read like the compiled component's cache files
    /// ([`crate::compile_cache::open_private`]): a symbolic link, a FIFO, a file with a
    /// second name or one others could have written is a miss, never followed or waited
    /// on, and reading stops past `max_bytes`. A blob read so is marked as in use.
    pub fn get(&self, digest: &str, max_bytes: u64) -> Option<Vec<u8>> {
        let path = self.blobs.join(sha256_hex(digest)?);
        match self.private() {
            Ok(true) => {}
            // Nothing stored yet; a path not checked is not read through.
            Ok(false) => return None,
            Err(e) => {
                tracing::debug!(path = %self.root.display(), error = %e, "component cache not private; pulling uncached");
                return None;
            }
        }
        let mut bytes = Vec::new();
        let read = crate::compile_cache::open_private(&path).and_then(|file| {
            (&file)
                .take(max_bytes.saturating_add(1))
                .read_to_end(&mut bytes)?;
            Ok(file)
        });
        let file = match read {
            Ok(_) if bytes.len() as u64 > max_bytes => {
                tracing::warn!(digest, max_bytes, "cached blob is too large; ignoring it");
                return None;
            }
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(digest, error = %e, "cached blob unusable; ignoring it");
                return None;
            }
        };
        if sha256_digest(&bytes) == digest {
            crate::cache_prune::keep_fresh(&file);
            Some(bytes)
        } else {
            tracing::warn!(digest, "cached blob does not match its digest; ignoring it");
            None
        }
    }

    /// Stores `bytes` under their own digest, atomically; returns that digest. Then, stored
    /// or not (a full disk may be why not), prunes the blobs no longer used.
    pub fn put(&self, bytes: &[u8]) -> Result<String, String> {
        let digest = sha256_digest(bytes);
        let hex = sha256_hex(&digest).expect("sha256_digest is well formed");
        let path = self.blobs.join(hex);
        self.private().map_err(|e| {
            format!(
                "component cache {} not private, not used: {e}",
                self.root.display()
            )
        })?;
        let stored = self.write(&path, bytes);
        // Checked again: the directories the write made, and nothing swapped meanwhile.
        if self.private().unwrap_or(false) {
            crate::cache_prune::prune(&self.blobs, &path, crate::cache_prune::is_sha256_hex);
        }
        stored.map_err(|e| format!("write the component cache {}: {e}", self.blobs.display()))?;
        Ok(digest)
    }

    /// Writes `bytes` to `path` through a temporary file renamed into place, in the
    /// directories checked again once made: a link planted at one of their names after
    /// [`put`](Self::put)'s first look (when nothing was there) is not written through.
    fn write(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        crate::compile_cache::create_private_dir(&self.blobs)?;
        if !self.private()? {
            return Err(std::io::ErrorKind::NotFound.into());
        }
        let mut file = crate::cache_prune::temp_file_in(&self.blobs)?;
        file.write_all(bytes)?;
        file.as_file().sync_all()?;
        file.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link planted at the blobs' directory between `put`'s first look and the write
    /// (here before the write itself) is refused, and nothing is written through it.
    #[cfg(unix)]
    #[test]
    fn a_link_planted_at_the_blobs_directory_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::at(dir.path());
        let elsewhere = tempfile::tempdir().unwrap();
        crate::compile_cache::create_private_dir(cache.blobs.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), &cache.blobs).unwrap();
        let path = cache.blobs.join(sha256_hex(&sha256_digest(b"x")).unwrap());
        assert!(cache.write(&path, b"x").is_err());
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_stored_blob_reads_back_under_its_digest() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::at(dir.path());
        let digest = cache.put(b"component bytes").unwrap();
        assert_eq!(digest, sha256_digest(b"component bytes"));
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            cache.get(&digest, 15).as_deref(),
            Some(&b"component bytes"[..])
        );
    }

    #[test]
    fn a_tampered_entry_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::at(dir.path());
        let digest = cache.put(b"component bytes").unwrap();
        let file = cache.blobs.join(sha256_hex(&digest).unwrap());
        std::fs::write(&file, b"other bytes").unwrap();
        assert_eq!(cache.get(&digest, 1024), None);
    }

    /// A symbolic link is not followed, even to the right bytes: the cache directory may
    /// be one the compiled component's cache refused, and the link could lead anywhere.
    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_or_an_oversized_entry_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::at(dir.path());
        let digest = cache.put(b"component bytes").unwrap();
        assert_eq!(cache.get(&digest, 14), None, "one byte over the bound");
        let file = cache.blobs.join(sha256_hex(&digest).unwrap());
        let elsewhere = dir.path().join("elsewhere");
        std::fs::rename(&file, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
        assert_eq!(cache.get(&digest, 1024), None);
    }

    /// A cache whose directories are not private is not used at all: through `sha256`
    /// linked elsewhere, storing would prune that directory's old blobs (here another
    /// store's, named as ours are) and write there; in a root others can write to, any
    /// of its directories could be such a link. Reads miss as well.
    #[cfg(unix)]
    #[test]
    fn a_cache_whose_directories_are_not_private_is_not_used() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let other_store = dir.path().join("other-store");
        std::fs::create_dir(&other_store).unwrap();
        let theirs = other_store.join("a".repeat(64));
        std::fs::write(&theirs, b"another store's blob").unwrap();
        set_age(&theirs, 60 * DAY);
        let root = dir.path().join("cache");
        std::fs::create_dir_all(root.join("oci").join("blobs")).unwrap();
        std::os::unix::fs::symlink(&other_store, root.join("oci/blobs/sha256")).unwrap();
        let linked = ComponentCache::at(&root);
        assert!(linked.put(b"component bytes").is_err());
        assert!(theirs.exists(), "another store's blob was pruned");
        assert_eq!(std::fs::read_dir(&other_store).unwrap().count(), 1);
        let digest = sha256_digest(b"another store's blob");
        std::fs::rename(&theirs, other_store.join(sha256_hex(&digest).unwrap())).unwrap();
        assert_eq!(linked.get(&digest, 1024), None, "read through the link");

        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let shared = ComponentCache::at(&open);
        assert!(shared.put(b"component bytes").is_err());
        assert_eq!(
            std::fs::read_dir(&open).unwrap().count(),
            0,
            "nothing written"
        );
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o700)).unwrap();
        let digest = shared.put(b"component bytes").unwrap();
        assert!(shared.get(&digest, 1024).is_some(), "private again, used");
        // Its root a link (to a private directory of ours): not used either, also when
        // named with a trailing `/` or `/.` (with which a lookup follows the link).
        let root_link = dir.path().join("root-link");
        std::os::unix::fs::symlink(&open, &root_link).unwrap();
        let slash = PathBuf::from(format!("{}/", root_link.display()));
        for root in [root_link.clone(), slash, root_link.join(".")] {
            let through_link = ComponentCache::at(&root);
            let put = through_link.put(b"other bytes");
            assert!(put.is_err(), "{}: {put:?}", root.display());
            assert_eq!(through_link.get(&digest, 1024), None, "{}", root.display());
        }
    }

    const DAY: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);
    const HOUR: std::time::Duration = std::time::Duration::from_secs(60 * 60);

    /// Sets `path`'s modification time to `age` ago.
    fn set_age(path: &Path, age: std::time::Duration) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(std::time::SystemTime::now() - age)
            .unwrap();
    }

    /// Storing a blob removes the blobs unused for 60 days and the temporary files left
    /// two hours ago; it keeps a recent blob, a temporary file another process may still
    /// be writing, and anything not named as the store's own.
    #[test]
    fn a_put_prunes_stale_blobs_and_orphaned_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::at(dir.path());
        let old = cache.put(b"pulled two months ago").unwrap();
        let recent = cache.put(b"pulled yesterday").unwrap();
        let blob = |digest: &str| cache.blobs.join(sha256_hex(digest).unwrap());
        set_age(&blob(&old), 60 * DAY);
        set_age(&blob(&recent), DAY);
        for (name, age) in [
            (".ahp-tmpAb12Cd", 2 * HOUR),
            (".ahp-tmpEf34Gh", std::time::Duration::from_secs(60)),
            ("notes.txt", 60 * DAY),
        ] {
            std::fs::write(cache.blobs.join(name), b"bytes").unwrap();
            set_age(&cache.blobs.join(name), age);
        }

        let new = cache.put(b"pulled now").unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&cache.blobs)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut expected = vec![
            ".ahp-tmpEf34Gh".to_string(),
            "notes.txt".to_string(),
            sha256_hex(&recent).unwrap().to_string(),
            sha256_hex(&new).unwrap().to_string(),
        ];
        expected.sort();
        assert_eq!(names, expected);
    }

    /// Reading a blob last modified over a day ago marks it as in use, so pruning keeps
    /// it; a fresher one is not written to.
    #[test]
    fn a_read_keeps_its_blob_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::at(dir.path());
        let digest = cache.put(b"component bytes").unwrap();
        let file = cache.blobs.join(sha256_hex(&digest).unwrap());
        let modified = || std::fs::metadata(&file).unwrap().modified().unwrap();

        set_age(&file, 2 * DAY);
        let before = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        assert!(cache.get(&digest, 1024).is_some());
        assert!(modified() > before, "refreshed");

        set_age(&file, HOUR);
        let an_hour_ago = modified();
        assert!(cache.get(&digest, 1024).is_some());
        assert_eq!(modified(), an_hour_ago, "not written to");
    }

    /// Only a digest's 64 lowercase hex digits become a file name: `get` could not show
    /// this (a digest naming another file fails the bytes' check anyway), so the
    /// guard is asked directly.
    #[test]
    fn malformed_digests_are_never_paths() {
        let hex = "a".repeat(64);
        assert_eq!(sha256_hex(&format!("sha256:{hex}")), Some(hex.as_str()));
        for digest in [
            "sha256:../../etc/passwd".to_string(),
            format!("sha256:./{}", &hex[2..]),
            format!("sha256:{}", hex.to_uppercase()),
            format!("sha256:{}", &hex[1..]),
            format!("sha256:{hex}0"),
            format!("sha512:{hex}"),
            hex.clone(),
            String::new(),
        ] {
            assert_eq!(sha256_hex(&digest), None, "{digest}");
        }
    }
}
