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
//! values are ignored), in `oci/blobs/sha256`; every directory it creates is private (0700),
//! as the compiled component's cache requires of its own.

use sha2::{Digest as _, Sha256};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

/// `sha256:` followed by 64 lowercase hex digits: the only digests this cache accepts.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// The hex part of a well-formed `sha256:` digest.
pub fn sha256_hex(digest: &str) -> Option<&str> {
    digest.strip_prefix("sha256:").filter(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// A cache rooted at one directory.
pub struct ComponentCache {
    blobs: PathBuf,
}

impl ComponentCache {
    /// The cache of this user, beside the compiled component's.
    pub fn for_user() -> Result<ComponentCache, String> {
        let root = crate::compile_cache::cache_dir()
            .ok_or("no cache directory for this user: set AHP_CACHE_DIR to an absolute path")?;
        Ok(ComponentCache::at(&root))
    }

    /// A cache under `root`.
    pub fn at(root: &Path) -> ComponentCache {
        ComponentCache {
            blobs: root.join("oci").join("blobs").join("sha256"),
        }
    }

    /// The bytes stored under `digest`, if present, intact and at most `max_bytes` long.
    /// Read like the compiled component's cache files
    /// ([`crate::compile_cache::open_private`]): a symbolic link, a FIFO, a file with a
    /// second name or one others could have written is a miss, never followed or waited
    /// on, and reading stops past `max_bytes`.
    pub fn get(&self, digest: &str, max_bytes: u64) -> Option<Vec<u8>> {
        let path = self.blobs.join(sha256_hex(digest)?);
        let mut bytes = Vec::new();
        let read = crate::compile_cache::open_private(&path).and_then(|file| {
            file.take(max_bytes.saturating_add(1))
                .read_to_end(&mut bytes)
        });
        match read {
            Ok(_) if bytes.len() as u64 > max_bytes => {
                tracing::warn!(digest, max_bytes, "cached blob is too large; ignoring it");
                return None;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(digest, error = %e, "cached blob unusable; ignoring it");
                return None;
            }
        }
        if sha256_digest(&bytes) == digest {
            Some(bytes)
        } else {
            tracing::warn!(digest, "cached blob does not match its digest; ignoring it");
            None
        }
    }

    /// Stores `bytes` under their own digest, atomically; returns that digest.
    pub fn put(&self, bytes: &[u8]) -> Result<String, String> {
        let digest = sha256_digest(bytes);
        let hex = sha256_hex(&digest).expect("sha256_digest is well formed");
        let failed =
            |e: std::io::Error| format!("write the component cache {}: {e}", self.blobs.display());
        crate::compile_cache::create_private_dir(&self.blobs).map_err(failed)?;
        let mut file = tempfile::NamedTempFile::new_in(&self.blobs).map_err(failed)?;
        file.write_all(bytes).map_err(failed)?;
        file.as_file().sync_all().map_err(failed)?;
        file.persist(self.blobs.join(hex))
            .map_err(|e| failed(e.error))?;
        Ok(digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn malformed_digests_are_never_paths() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::at(dir.path());
        for digest in ["sha256:../../etc/passwd", "sha512:00", "sha256:ABC", ""] {
            assert_eq!(cache.get(digest, 1024), None, "{digest}");
        }
    }
}
