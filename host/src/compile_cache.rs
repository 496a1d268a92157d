//! The compiled component, cached on disk across processes.
//!
//! A command-hook harness starts one `ahp` process per tool call, and compiling the
//! component with Cranelift costs each of them some 200 ms. The first process stores the
//! compiled code; later ones load it in a few milliseconds.
//!
//! One file per key, `<key>.cwasm`, where the key is the sha256 of the component's bytes,
//! of [`Engine::precompile_compatibility_hash`] (the compiler's target and flags, the
//! engine's tunables and wasm features, and the Engine's module version, if it has one)
//! and of this wasmtime release's version, whatever the Engine's
//! [`ModuleVersionStrategy`]: so another component, engine configuration or wasmtime
//! release never finds this file, even for an Engine that skips wasmtime's own version
//! check (`None`, or a `Custom` string two releases share). Its content is `MAGIC`, the
//! key again, the sha256 of the serialized code, then the code as
//! [`Component::serialize`] wrote it.
//!
//! Every problem with the cache — no usable directory, a missing, truncated, corrupt or
//! foreign file, a full disk — falls back to compiling (and replacing the file when
//! possible), logged at debug level: never an error, never a wrong load.
//!
//! The directory does not grow without bound: a miss prunes the entries unused for 30
//! days and the temporary files a killed process left behind, and a hit marks its entry
//! as in use (`cache_prune`).

use sha2::{Digest, Sha256};
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;
use wasmtime::{Engine, ModuleVersionStrategy};

/// First bytes of a cache file; a new layout or key derivation gets a new magic.
const MAGIC: &[u8; 8] = b"ahp-cc2\n";

/// Bytes before the serialized code: magic, key, sha256 of the code.
const HEADER_LEN: usize = MAGIC.len() + 32 + 32;

/// Where a component came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Loaded from a verified cache file.
    Cache,
    /// Compiled, and the cache file written.
    Stored,
    /// Compiled; nothing could be cached (the reason was logged at debug level).
    Uncached,
}

/// A loaded component and how it was obtained.
pub struct Loaded {
    /// The component, ready to link.
    pub component: Component,
    /// Where it came from.
    pub source: Source,
    /// Its cache file (`None` without a usable cache directory).
    pub path: Option<PathBuf>,
}

/// The component for `component_bytes`, from the cache in [`cache_dir`] when it holds a
/// verified copy, else compiled (and stored there).
pub fn load(engine: &Engine, component_bytes: &[u8]) -> wasmtime::Result<Component> {
    let loaded = match cache_dir() {
        Some(dir) => load_in(engine, component_bytes, &dir)?,
        None => {
            tracing::debug!("no cache directory (AHP_CACHE_DIR, XDG_CACHE_HOME, HOME); compiling");
            Loaded {
                component: Component::new(engine, component_bytes)?,
                source: Source::Uncached,
                path: None,
            }
        }
    };
    LAST.with(|last| *last.borrow_mut() = Some((loaded.source, loaded.path.clone())));
    Ok(loaded.component)
}

thread_local! {
    /// The outcome of this thread's latest [`load`], for [`observed`].
    static LAST: std::cell::RefCell<Option<(Source, Option<PathBuf>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` and returns what the [`load`] it made on this thread did, if it made one:
/// how `ahp precompile` learns the file path without its own engine configuration.
#[cfg(feature = "cli")]
pub(crate) fn observed<T>(f: impl FnOnce() -> T) -> (T, Option<(Source, Option<PathBuf>)>) {
    LAST.with(|last| last.borrow_mut().take());
    let value = f();
    (value, LAST.with(|last| last.borrow_mut().take()))
}

/// [`load`] with the cache in `dir` (created, mode 0700, if missing), whatever the
/// environment says.
pub fn load_in(engine: &Engine, component_bytes: &[u8], dir: &Path) -> wasmtime::Result<Loaded> {
    let key = key(engine, component_bytes);
    let path = dir.join(format!("{}.cwasm", hex(&key)));
    let exists = match private_real_dir(dir) {
        Ok(exists) => exists,
        Err(e) => {
            // Another user could plant or swap files there: neither read nor write it.
            tracing::debug!(path = %dir.display(), error = %e,
                "compiled component: cache directory not private; compiling uncached");
            return Ok(Loaded {
                component: Component::new(engine, component_bytes)?,
                source: Source::Uncached,
                path: None,
            });
        }
    };
    // A directory that is not there holds nothing, and the way to it was not checked:
    // nothing is read through it (a link planted at its name meanwhile would be).
    let read = match exists {
        true => read_verified(&path, &key),
        false => Err(std::io::ErrorKind::NotFound.into()),
    };
    match read {
        // SAFETY: `code` is exactly what `Component::serialize` wrote into this file:
        // `read_verified` read it in one go from one open file owned by this user and
        // writable by nobody else, checked that its header names this component and
        // engine (the key), and that the code's sha256 matches the one stored beside it.
        // A truncated, corrupt, foreign or misplaced file fails one of those checks, and
        // wasmtime checks its own header (version, target, configuration) as well. The
        // bytes are in memory, so nothing can change them between the check and the load.
        Ok(code) => match unsafe { Component::deserialize(engine, &code) } {
            Ok(component) => {
                tracing::debug!(path = %path.display(), "compiled component: cache hit");
                return Ok(Loaded {
                    component,
                    source: Source::Cache,
                    path: Some(path),
                });
            }
            Err(e) => tracing::debug!(path = %path.display(), error = %e,
                "compiled component: cache file rejected by wasmtime; compiling"),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::debug!(path = %path.display(), "compiled component: cache miss; compiling");
        }
        Err(e) => tracing::debug!(path = %path.display(), error = %e,
            "compiled component: cache file unusable; compiling"),
    }
    let component = Component::new(engine, component_bytes)?;
    let source = match component
        .serialize()
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|code| store(dir, &path, &key, &code))
    {
        Ok(()) => {
            tracing::debug!(path = %path.display(), "compiled component: stored");
            Source::Stored
        }
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e,
                "compiled component: could not store; continuing uncached");
            Source::Uncached
        }
    };
    // Stored or not (a full disk may be why not), what can no longer be hit goes: only
    // from a directory that is this user's own, not through a link at its name.
    if private_real_dir(dir).unwrap_or(false) {
        crate::cache_prune::prune(dir, &path, is_entry);
    }
    Ok(Loaded {
        component,
        source,
        path: Some(path),
    })
}

/// A cache file's name: `<key in hex>.cwasm`.
fn is_entry(name: &str) -> bool {
    name.strip_suffix(".cwasm")
        .is_some_and(crate::cache_prune::is_sha256_hex)
}

/// `$AHP_CACHE_DIR`, else `$XDG_CACHE_HOME/ahp-interceptor`, else
/// `$HOME/.cache/ahp-interceptor`; relative or empty values are ignored (XDG says so for
/// its variable, and a cache relative to wherever the harness runs would scatter files).
pub fn cache_dir() -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    absolute("AHP_CACHE_DIR")
        .or_else(|| absolute("XDG_CACHE_HOME").map(|dir| dir.join("ahp-interceptor")))
        .or_else(|| absolute("HOME").map(|dir| dir.join(".cache").join("ahp-interceptor")))
}

/// sha256 of the component's bytes, the engine's compatibility hash and this wasmtime
/// release's version.
fn key(engine: &Engine, component_bytes: &[u8]) -> [u8; 32] {
    key_for(
        engine,
        component_bytes,
        &ModuleVersionStrategy::WasmtimeVersion,
    )
}

/// [`key`] as if this were the wasmtime release `version` names: hashing
/// `ModuleVersionStrategy::WasmtimeVersion` hashes the wasmtime crate's own package
/// version (as `Custom` with that string would).
fn key_for(engine: &Engine, component_bytes: &[u8], version: &ModuleVersionStrategy) -> [u8; 32] {
    let mut hasher = Sha256Hasher(Sha256::new());
    hasher.0.update(Sha256::digest(component_bytes));
    engine.precompile_compatibility_hash().hash(&mut hasher);
    version.hash(&mut hasher);
    hasher.0.finalize().into()
}

/// Feeds [`Hash`] output into sha256: a stable digest where `DefaultHasher`'s is only 64
/// bits and unspecified across Rust releases.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Unused: the digest is read with `finalize`.
    fn finish(&self) -> u64 {
        0
    }
}

/// The serialized code in `path`, if the file is ours and intact for `key`. Opened
/// without following a symbolic link and without waiting on a FIFO; then it must be a
/// regular file with no other name. A file read so is marked as in use, for pruning.
fn read_verified(path: &Path, key: &[u8; 32]) -> std::io::Result<Vec<u8>> {
    let invalid = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_owned());
    let mut file = open_private(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    if bytes.len() < HEADER_LEN || !bytes.starts_with(MAGIC) {
        return Err(invalid("not an ahp cache file"));
    }
    let (header, code) = bytes.split_at(HEADER_LEN);
    let (stored_key, stored_digest) = header[MAGIC.len()..].split_at(32);
    if stored_key != key {
        return Err(invalid("cached for another component or engine"));
    }
    if stored_digest != Sha256::digest(code).as_slice() {
        return Err(invalid("checksum mismatch (truncated or corrupt)"));
    }
    crate::cache_prune::keep_fresh(&file);
    Ok(code.to_vec())
}

/// `path` opened for reading if only this user can have written it: not through a
/// symbolic link, without waiting on a FIFO, then [`trusted`]. Also how the OCI
/// component cache reads its blobs.
pub(crate) fn open_private(path: &Path) -> std::io::Result<File> {
    let file = open_no_follow(path)?;
    trusted(&file)?;
    Ok(file)
}

#[cfg(unix)]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

/// Only this user can have written the open file (checked on the handle, not the path):
/// a regular file, owned by this user, writable by nobody else, with no second name
/// (a hard link another user made to it would let them pick what is loaded).
#[cfg(unix)]
fn trusted(file: &File) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "cache entry is not a regular file with one name",
        ));
    }
    owned_privately(&meta, "cache file")
}

#[cfg(not(unix))]
fn trusted(_file: &File) -> std::io::Result<()> {
    Ok(())
}

/// What [`trusted_way`] names as the end of the way it checks for a cache.
#[cfg(unix)]
const CACHE_DIRECTORY: &str = "the cache directory";

/// Whether `dir` exists; if it does, it must be a directory itself (not a symbolic
/// link to one), this user's and writable by nobody else, and no other user may be able
/// to change the way to it ([`trusted_way`]): where a cache reads, writes and prunes (the
/// compiled components', the pulled components').
#[cfg(unix)]
pub(crate) fn private_real_dir(dir: &Path) -> std::io::Result<bool> {
    // Looked at without a trailing `/` or `/.`: with one, the lookup follows a link at
    // the last name (`AHP_CACHE_DIR=/home/me/link/` is the link's target), and the link
    // would pass for a real directory.
    let dir: PathBuf = dir.components().collect();
    match std::fs::symlink_metadata(&dir) {
        Ok(meta) if meta.is_dir() => {
            owned_privately(&meta, "cache directory")?;
            trusted_way(&dir, CACHE_DIRECTORY)?;
            Ok(true)
        }
        Ok(_) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} is not a directory (a symbolic link?)", dir.display()),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
pub(crate) fn private_real_dir(dir: &Path) -> std::io::Result<bool> {
    Ok(dir.is_dir())
}

/// Whether a cache could be kept in `dir`: [`private_real_dir`] if it exists, else the
/// way to its nearest existing ancestor ([`trusted_way`]), which it would be made under.
/// The error names the directory at fault. What [`create_private_dir`] checks before it
/// makes anything, and `ahp precompile` before it compiles.
#[cfg(unix)]
pub(crate) fn usable_dir(dir: &Path) -> std::io::Result<()> {
    if private_real_dir(dir)? {
        return Ok(());
    }
    let absolute = std::path::absolute(dir)?;
    match absolute.ancestors().skip(1).find(|a| a.exists()) {
        Some(ancestor) => trusted_way(ancestor, CACHE_DIRECTORY),
        None => Ok(()),
    }
}

#[cfg(not(unix))]
pub(crate) fn usable_dir(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Checks that only this user or root can change where `path` leads, resolving it one
/// name at a time as the kernel does: every directory on the way (and `path` itself) is
/// this user's or root's and writable by nobody else (group write by the user's own
/// private group is the user's), or a sticky directory (like `/tmp`, where others cannot
/// move or replace what is not theirs), and every symbolic link on the way is this
/// user's or root's. Otherwise another user could point a name on the way
/// (`/srv/team/cache`, a link in a group-writable directory) at a directory of this
/// user's holding files they chose, such as a cloned repository, and every check of the
/// file itself would pass. As nobody else can change these names, the way stays what
/// was checked. The error names what is at fault, on the way to `to`.
#[cfg(unix)]
pub(crate) fn trusted_way(path: &Path, to: &str) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    /// As Linux's MAXSYMLINKS: a loop of links ends here.
    const MAX_LINKS: usize = 40;
    let untrusted = |what: &Path, why: &str| {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} {why}, on the way to {to}", what.display()),
        )
    };
    let me = effective_uid();
    let trusted_owner = |meta: &std::fs::Metadata| meta.uid() == me || meta.uid() == 0;
    let mut pending = Vec::new();
    push_names(&mut pending, &std::path::absolute(path)?);
    let mut at = PathBuf::from("/");
    let mut links = 0;
    loop {
        let meta = std::fs::symlink_metadata(&at)?;
        if !trusted_owner(&meta) {
            return Err(untrusted(&at, "is owned by another user"));
        }
        let by_others = writable_by_another(&meta);
        let sticky_dir = meta.is_dir() && meta.mode() & 0o1000 != 0;
        if by_others && !sticky_dir {
            return Err(untrusted(
                &at,
                "is writable by group or others (not sticky)",
            ));
        }
        let Some(name) = pending.pop() else {
            return Ok(());
        };
        if name == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&name);
        let meta = std::fs::symlink_metadata(&next)?;
        if !meta.file_type().is_symlink() {
            at = next;
            continue;
        }
        if !trusted_owner(&meta) {
            return Err(untrusted(&next, "is a symbolic link owned by another user"));
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(untrusted(&next, "is one symbolic link too many"));
        }
        let target = std::fs::read_link(&next)?;
        if target.is_absolute() {
            at = PathBuf::from("/");
        }
        push_names(&mut pending, &target);
    }
}

/// Whether `gid` is this user's own private group, whose write permission is this user's
/// alone: the user's primary group, named as the user, listing no members (the group
/// Debian's and Fedora's `useradd` makes per user, with the umask 002 that goes with it,
/// under which every file and directory is group-writable). Not known (no such entry, a
/// lookup that fails): not private. Never root's: group 0 is the primary group of system
/// accounts too (`sync`, `halt` on Fedora). Another account given this user's group as its
/// primary one is not looked for (the accounts are not listed).
#[cfg(unix)]
pub(crate) fn own_private_group(gid: u32) -> bool {
    use std::ffi::CStr;
    if effective_uid() == 0 {
        return false;
    }
    const BUFFER: usize = 16 * 1024;
    let mut user_buffer = vec![0u8; BUFFER];
    // SAFETY: all-zero `passwd` and `group` are valid values to be filled in (plain C
    // structs of integers and pointers); each lookup writes only into its struct and
    // its buffer, of the length given, and its result pointer is either null or the
    // struct's, whose strings point into the buffer, alive until the end of this
    // function; `gr_mem` is a null-terminated list in that buffer.
    unsafe {
        let mut user: libc::passwd = std::mem::zeroed();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let status = libc::getpwuid_r(
            effective_uid(),
            &mut user,
            user_buffer.as_mut_ptr().cast(),
            user_buffer.len(),
            &mut found,
        );
        if status != 0 || found.is_null() || user.pw_gid != gid {
            return false;
        }
        let mut group_buffer = vec![0u8; BUFFER];
        let mut group: libc::group = std::mem::zeroed();
        let mut found: *mut libc::group = std::ptr::null_mut();
        let status = libc::getgrgid_r(
            gid,
            &mut group,
            group_buffer.as_mut_ptr().cast(),
            group_buffer.len(),
            &mut found,
        );
        if status != 0 || found.is_null() {
            return false;
        }
        let no_members = group.gr_mem.is_null() || (*group.gr_mem).is_null();
        no_members && CStr::from_ptr(group.gr_name) == CStr::from_ptr(user.pw_name)
    }
}

/// This process's effective user: who a cache entry and the way to it must belong to.
#[cfg(unix)]
fn effective_uid() -> u32 {
    // SAFETY: geteuid takes no arguments, cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

/// Pushes the names of `path` (`..` included, `.` and the root left out) onto `pending`
/// so that its first name is popped first.
#[cfg(unix)]
fn push_names(pending: &mut Vec<std::ffi::OsString>, path: &Path) {
    use std::path::Component;
    let names: Vec<_> = path
        .components()
        .filter_map(|part| match part {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    pending.extend(names.into_iter().rev());
}

/// Whether a user other than this one can write what `meta` describes, by its mode:
/// anyone, or a group that is not the user's own private one ([`own_private_group`]).
#[cfg(unix)]
fn writable_by_another(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    meta.mode() & 0o002 != 0 || (meta.mode() & 0o020 != 0 && !own_private_group(meta.gid()))
}

/// Owned by this user and writable by no other ([`writable_by_another`]): the cache
/// directory under umask 002, group-writable by the user's private group, is the user's.
#[cfg(unix)]
fn owned_privately(meta: &std::fs::Metadata, what: &str) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let me = effective_uid();
    let why = if meta.uid() != me {
        format!("is owned by another user (uid {}, not {me})", meta.uid())
    } else if writable_by_another(meta) {
        format!(
            "is writable by group or others (mode {:04o})",
            meta.mode() & 0o7777
        )
    } else {
        return Ok(());
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!("{what} {why}"),
    ))
}

/// Writes the cache file atomically: a private temporary file in `dir`, renamed over
/// `path`, so a reader sees the old file or the whole new one. Not synced: a crash may
/// leave a torn file, which the checksum rejects and the next process replaces.
fn store(dir: &Path, path: &Path, key: &[u8; 32], code: &[u8]) -> std::io::Result<()> {
    create_private_dir(dir)?;
    // Checked again, now that it exists: a link planted at its name during the compile
    // (in a parent others can write to) would have the file written into its target.
    if !private_real_dir(dir)? {
        return Err(std::io::ErrorKind::NotFound.into());
    }
    // Created with mode 0600.
    let mut file = crate::cache_prune::temp_file_in(dir)?;
    file.write_all(MAGIC)?;
    file.write_all(key)?;
    file.write_all(&Sha256::digest(code))?;
    file.write_all(code)?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Creates `dir` and any missing parents with mode 0700, whatever the umask: a directory
/// others can write to is one [`load_in`] refuses. Also where the OCI component cache
/// makes its directories.
///
/// Only once the way to it is checked ([`usable_dir`]): made first, a directory would
/// be refused too late, and stay. Under a home of another user's (root run with a
/// user's `HOME`), a `.cache` of root's, mode 0700, would lock that user out of their
/// own cache.
#[cfg(unix)]
pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    usable_dir(dir)?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    /// The smallest component: its header alone.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00";

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);
    const HOUR: Duration = Duration::from_secs(60 * 60);

    /// A file `name` in `dir` last modified `age` ago.
    fn plant(dir: &Path, name: &str, age: Duration) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, b"old bytes").unwrap();
        set_age(&path, age);
        path
    }

    fn set_age(path: &Path, age: Duration) {
        let file = File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
    }

    fn modified(path: &Path) -> SystemTime {
        std::fs::metadata(path).unwrap().modified().unwrap()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A cache directory that is a symbolic link (planted at its name) is neither written
    /// into nor pruned through: the component still loads, compiled, and the link's
    /// target keeps its files. Named with a trailing `/` or `/.` too, with which a lookup
    /// follows the link.
    #[cfg(unix)]
    #[test]
    fn a_linked_cache_directory_is_neither_written_nor_pruned() {
        let parent = tempfile::tempdir().unwrap();
        let target = tempfile::tempdir().unwrap();
        let old = format!("{}.cwasm", "ab".repeat(32));
        plant(target.path(), &old, 60 * DAY);
        let linked = parent.path().join("ahp-interceptor");
        std::os::unix::fs::symlink(target.path(), &linked).unwrap();
        let engine = Engine::default();
        let slash = PathBuf::from(format!("{}/", linked.display()));
        for dir in [linked.clone(), slash, linked.join(".")] {
            let loaded = load_in(&engine, EMPTY_COMPONENT, &dir).unwrap();
            assert_eq!(loaded.source, Source::Uncached, "{}", dir.display());
            assert_eq!(
                names(target.path()),
                std::slice::from_ref(&old),
                "{}",
                dir.display()
            );
        }
    }

    /// This user's own private group is the primary group named as the user, listing no
    /// members, as `id` and `getent` tell it (never root's); a group that does not exist
    /// is nobody's.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_private_group_is_the_users_own_by_name_with_no_members() {
        let run = |program: &str, args: &[&str]| {
            let output = std::process::Command::new(program)
                .args(args)
                .output()
                .unwrap();
            String::from_utf8(output.stdout)
                .unwrap()
                .trim_end()
                .to_string()
        };
        let (user, primary) = (run("id", &["-un"]), run("id", &["-g"]));
        let line = run("getent", &["group", &primary]);
        let fields: Vec<&str> = line.split(':').collect();
        let private =
            user != "root" && fields.first() == Some(&user.as_str()) && fields.get(3) == Some(&"");
        let gid: u32 = primary.parse().unwrap();
        assert_eq!(own_private_group(gid), private, "{user} {line}");
        assert!(!own_private_group(4_000_000_000));
    }

    /// The cache directory itself group-writable, as `mkdir` makes it under umask 002: the
    /// user's where its group is the user's own private one (a hit once stored), another
    /// user's otherwise (root's group is never private): compiled, nothing stored there.
    /// Run as root (CI), only the refusal is seen: the hit is proven by a run as a user
    /// with a private group (`runuser -u USER -- <this test binary> a_cache_directory`).
    #[cfg(unix)]
    #[test]
    fn a_cache_directory_writable_by_the_users_private_group_is_the_users() {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        let engine = Engine::default();
        let holder = tempfile::tempdir().unwrap();
        let cache = holder.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o775)).unwrap();
        let private = own_private_group(std::fs::metadata(&cache).unwrap().gid());
        let first = load_in(&engine, EMPTY_COMPONENT, &cache).unwrap();
        let second = load_in(&engine, EMPTY_COMPONENT, &cache).unwrap();
        match private {
            true => assert_eq!(
                (first.source, second.source),
                (Source::Stored, Source::Cache)
            ),
            false => {
                assert_eq!(
                    (first.source, second.source),
                    (Source::Uncached, Source::Uncached)
                );
                assert!(names(&cache).is_empty(), "nothing stored there");
            }
        }
    }

    /// An entry is loaded only where nobody else can change the way to it. Here a valid
    /// entry (stored by this very engine) is reached through a directory others can
    /// write to (where another user could have planted the link or swapped the directory
    /// for one of this user's holding files they chose): compiled, never read. The same
    /// entry reached through a link of this user's, in directories only it can change,
    /// or under a sticky directory others can write to (like `/tmp`), is a hit.
    #[cfg(unix)]
    #[test]
    fn an_entry_is_read_only_where_nobody_else_can_change_the_way_to_it() {
        use std::os::unix::fs::PermissionsExt as _;
        let engine = Engine::default();
        let holder = tempfile::tempdir().unwrap();
        let cache = holder.path().join("cache");
        assert_eq!(
            load_in(&engine, EMPTY_COMPONENT, &cache).unwrap().source,
            Source::Stored
        );
        let chmod = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        let ways = tempfile::tempdir().unwrap();
        let (shared, sticky) = (ways.path().join("shared"), ways.path().join("sticky"));
        std::fs::create_dir(&shared).unwrap();
        std::fs::create_dir(&sticky).unwrap();
        std::os::unix::fs::symlink(holder.path(), shared.join("link")).unwrap();
        std::os::unix::fs::symlink(holder.path(), ways.path().join("own-link")).unwrap();
        std::os::unix::fs::symlink(holder.path(), sticky.join("link")).unwrap();
        // Group write is another user's only where the group is not this user's own:
        // given to `nogroup` where this user may (root), else as it is.
        let _ = std::os::unix::fs::chown(&shared, None, Some(65_534));
        let group = std::os::unix::fs::MetadataExt::gid(&std::fs::metadata(&shared).unwrap());
        let by_group = match own_private_group(group) {
            true => Source::Cache,
            false => Source::Uncached,
        };
        for (mode, dir, source) in [
            (0o775, shared.join("link/cache"), by_group),
            (0o757, shared.join("link/cache"), Source::Uncached),
            (0o755, shared.join("link/cache"), Source::Cache),
            (0o755, ways.path().join("own-link/cache"), Source::Cache),
            (0o755, shared.join("../own-link/cache"), Source::Cache),
            (0o1777, sticky.join("link/cache"), Source::Cache),
        ] {
            chmod(
                if dir.starts_with(&sticky) {
                    &sticky
                } else {
                    &shared
                },
                mode,
            );
            let loaded = load_in(&engine, EMPTY_COMPONENT, &dir).unwrap();
            assert_eq!(
                loaded.source,
                source,
                "{} under mode {mode:o}",
                dir.display()
            );
        }
        // A link another user owns, in a sticky directory others may write: theirs to
        // point anywhere (at a directory of this user's holding a file they chose), so
        // it is not followed. Only root can give a link away; the group, not everyone,
        // may write, where the kernel's own `protected_symlinks` does not look.
        let foreign = sticky.join("foreign");
        std::os::unix::fs::symlink(holder.path(), &foreign).unwrap();
        if std::os::unix::fs::lchown(&foreign, Some(65_534), None).is_ok() {
            std::os::unix::fs::chown(&sticky, None, Some(65_534)).unwrap();
            chmod(&sticky, 0o1775);
            let loaded = load_in(&engine, EMPTY_COMPONENT, &foreign.join("cache")).unwrap();
            assert_eq!(loaded.source, Source::Uncached, "through another's link");
        }
        chmod(&shared, 0o757);
        let under_shared = shared.join("cache");
        std::fs::create_dir(&under_shared).unwrap();
        chmod(&under_shared, 0o700);
        let loaded = load_in(&engine, EMPTY_COMPONENT, &under_shared).unwrap();
        assert_eq!(loaded.source, Source::Uncached);
        assert!(names(&under_shared).is_empty(), "nothing stored there");
    }

    /// An entry another user owns is not this user's to load, however it came into the
    /// directory: compiled and stored again over it. Nor is another user's stale entry
    /// this user's to prune. (Only root can give a file away: elsewhere, nothing to see.)
    #[cfg(unix)]
    #[test]
    fn another_users_entry_is_neither_loaded_nor_pruned() {
        use std::os::unix::fs::MetadataExt as _;
        let engine = Engine::default();
        let dir = tempfile::tempdir().unwrap();
        let entry = load_in(&engine, EMPTY_COMPONENT, dir.path())
            .unwrap()
            .path
            .unwrap();
        if std::os::unix::fs::chown(&entry, Some(65_534), None).is_err() {
            return;
        }
        let stale = plant(dir.path(), &format!("{}.cwasm", "a".repeat(64)), 60 * DAY);
        std::os::unix::fs::chown(&stale, Some(65_534), None).unwrap();
        let loaded = load_in(&engine, EMPTY_COMPONENT, dir.path()).unwrap();
        assert_eq!(
            loaded.source,
            Source::Stored,
            "another user's entry was loaded"
        );
        let me = std::fs::metadata(dir.path()).unwrap().uid();
        assert_eq!(
            std::fs::metadata(&entry).unwrap().uid(),
            me,
            "stored over it"
        );
        assert!(stale.exists(), "another user's stale entry was pruned");
    }

    /// A miss (which stores) removes what can no longer be hit or was left behind: an
    /// entry unused for 60 days and a temporary file two hours old. It keeps the entry it
    /// stored, a recent entry, a temporary file another process may still be writing, and
    /// everything that is not the cache's own: another name, a directory, and a symbolic
    /// link named like an old entry (not followed: its target, outside, stays too).
    #[cfg(unix)]
    #[test]
    fn a_miss_prunes_stale_entries_and_orphaned_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let stale = format!("{}.cwasm", "a".repeat(64));
        let recent = format!("{}.cwasm", "b".repeat(64));
        let link = format!("{}.cwasm", "c".repeat(64));
        let named_like_one = format!("{}.cwasm", "d".repeat(64));
        plant(dir.path(), &stale, 60 * DAY);
        plant(dir.path(), ".ahp-tmpAb12Cd", 2 * HOUR);
        plant(dir.path(), &recent, 2 * DAY);
        plant(dir.path(), ".ahp-tmpEf34Gh", Duration::from_secs(60));
        plant(dir.path(), "notes.txt", 60 * DAY);
        plant(dir.path(), &format!("{stale}.bak"), 60 * DAY);
        std::fs::create_dir(dir.path().join(&named_like_one)).unwrap();
        let target = plant(outside.path(), "target.cwasm", 60 * DAY);
        std::os::unix::fs::symlink(&target, dir.path().join(&link)).unwrap();

        let engine = Engine::default();
        let loaded = load_in(&engine, EMPTY_COMPONENT, dir.path()).unwrap();
        assert_eq!(loaded.source, Source::Stored);
        let stored = loaded.path.unwrap();
        let stored = stored.file_name().unwrap().to_string_lossy().into_owned();

        let mut expected = vec![
            ".ahp-tmpEf34Gh".to_string(),
            format!("{stale}.bak"),
            recent,
            link,
            named_like_one,
            "notes.txt".to_string(),
            stored,
        ];
        expected.sort();
        assert_eq!(names(dir.path()), expected);
        assert!(target.is_file(), "the link's target is left alone");
    }

    /// The key names the wasmtime release even when the Engine's own compatibility hash
    /// leaves it out (`ModuleVersionStrategy::None`, or one `Custom` string shared by two
    /// releases): another release's machine code is never loaded under this one's key.
    #[test]
    fn the_key_differs_between_wasmtime_releases_whatever_the_engines_version_strategy() {
        let strategies = [
            ModuleVersionStrategy::None,
            ModuleVersionStrategy::Custom("our-artifacts-v1".into()),
            ModuleVersionStrategy::WasmtimeVersion,
        ];
        for strategy in strategies {
            let mut config = wasmtime::Config::new();
            config.module_version(strategy).unwrap();
            let engine = Engine::new(&config).unwrap();
            let release = |version: &str| {
                let version = ModuleVersionStrategy::Custom(version.into());
                key_for(&engine, EMPTY_COMPONENT, &version)
            };
            assert_ne!(release("48.0.8"), release("49.0.0"));
            // And `key` names this release, to its patch: wasmtime's own check of
            // precompiled bytes compares only the major version, so the key is what keeps
            // 48.0.7's machine code from loading under 48.0.8.
            let locked = release(locked_wasmtime());
            assert_eq!(key(&engine, EMPTY_COMPONENT), locked);
        }
    }

    /// The wasmtime release Cargo.lock pins, checked to name its patch (`48.0.8`).
    fn locked_wasmtime() -> &'static str {
        let lock = include_str!("../../Cargo.lock");
        let version = lock
            .split("\n[[package]]\n")
            .find_map(|entry| entry.strip_prefix("name = \"wasmtime\"\nversion = \""))
            .and_then(|rest| rest.split('"').next())
            .expect("Cargo.lock pins wasmtime");
        assert_eq!(version.split('.').count(), 3, "{version}");
        version
    }

    /// A hit on an entry last modified over a day ago marks it as in use (its modification
    /// time is now), so pruning keeps it; a fresher one is not written to.
    #[test]
    fn a_hit_keeps_its_entry_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::default();
        let stored = load_in(&engine, EMPTY_COMPONENT, dir.path()).unwrap();
        let path = stored.path.unwrap();

        set_age(&path, 2 * DAY);
        let before = SystemTime::now() - Duration::from_secs(60);
        let hit = load_in(&engine, EMPTY_COMPONENT, dir.path()).unwrap();
        assert_eq!(hit.source, Source::Cache);
        assert!(modified(&path) > before, "refreshed");

        set_age(&path, HOUR);
        let an_hour_ago = modified(&path);
        let hit = load_in(&engine, EMPTY_COMPONENT, dir.path()).unwrap();
        assert_eq!(hit.source, Source::Cache);
        assert_eq!(modified(&path), an_hour_ago, "not written to");
    }
}
