//! The durable audit log: one settlement record per line (JSONL), appended and synced to
//! disk before the hook call completes (`intercept` returns, or `HookCall::complete`
//! after `settle`, once the owned observers ran), so a crash after the call cannot lose
//! it. Two exceptions while the append and its sync wait (another process holds the
//! file's lock, or the disk is slow: a sync on a loaded or network file system): a call
//! with a budget is not held past it (and a short grace), nor an interrupted call or one
//! of an interceptor shutting down past a short grace; the record is written once the
//! wait ends, if its interceptor is not dropped for more than 2 s before (`audit_queue`),
//! so a crash meanwhile loses it. And
//! an append that fails (a full disk, the file size limit, a log gone whose path cannot
//! be opened again) loses its record, logged as an error, the part written taken back
//! off: the decision stands. A log moved away (rotated) is reopened at its path before
//! the next record.
//!
//! Records can hold what a backend changed (a tool's input, a returned value): the file
//! is created readable by its owner only, never opened through a symbolic link (as its
//! last component), and must be a regular file with no other name (a hard link another
//! user left in a shared directory would have records appended to its target), this
//! user's or its group's one of this user's groups (a file a stranger planted at the path
//! is not written to). An existing file's mode is left as it is: a log a group shares on
//! purpose stays shared; one everybody can read or write is accepted, but reported
//! ([`AuditLog::warning`]) for the caller to show where its user looks (the default log
//! filter shows errors only).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// An append-only JSONL file of settlement records.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    opened: Mutex<Opened>,
    /// What is wrong with the file as opened that is no reason to refuse it.
    warning: Option<String>,
}

/// The file at the log's path when it was last opened.
#[derive(Debug)]
struct Opened {
    file: File,
    /// Whether the file could be opened for reading too, to look for a fragment a
    /// killed writer left (a write-only log is appended to without that look).
    readable: bool,
}

impl AuditLog {
    /// Opens (creating if needed, mode 0600) `path` for appending. A symbolic link, a FIFO
    /// or anything but a regular file there is refused, as is one with another name or
    /// one neither this user's nor its group's one of this user's groups. A relative
    /// `path` is taken from the working directory now, once: the log is reopened at its
    /// path after a rotation, and an embedder that changes directory later would
    /// otherwise have its records go on in another file.
    pub fn open(path: &Path) -> std::io::Result<AuditLog> {
        let path = std::path::absolute(path)?;
        let opened = Opened::at(&path)?;
        Ok(AuditLog {
            path,
            warning: exposure(&opened.file),
            opened: Mutex::new(opened),
        })
    }

    /// What is wrong with the file as opened, though it is accepted: a mode that lets
    /// everybody read it or write it. For the caller to show its user.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// Where the log is, an absolute path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as a line and syncs it. Other processes appending to the same
    /// file wait on its lock, and a write cut short (a full disk, a file-size limit) is
    /// cut back off, so no line is ever torn or glued to a fragment. Past a file-size
    /// limit the kernel first raises SIGXFSZ, whose default action ends the process: the
    /// `ahp` command handles it, and a process embedding this under such a limit must too.
    pub fn append(&self, record: &ahp_vocab::Record) -> std::io::Result<()> {
        self.append_chosen(|| record)
    }

    /// A log moved away (rotated) or removed since it was opened: appending to the open
    /// file would go on into a renamed file, or into one with no name left, lost. What is
    /// at the path now is opened instead. False when it cannot be, and the moved file is
    /// kept (looking again would only say so again).
    fn reopen_if_moved(&self, opened: &mut Opened) -> std::io::Result<bool> {
        if opened.is_at(&self.path) {
            return Ok(true);
        }
        match Opened::at(&self.path) {
            Ok(fresh) => {
                // Past the open: the log is the one place left to say it.
                if let Some(warning) = exposure(&fresh.file) {
                    tracing::error!(path = %self.path.display(), "the audit log, opened again: {warning}");
                }
                *opened = fresh;
                Ok(true)
            }
            // What is at the path now cannot be written to: a log renamed away keeps the
            // record, one removed would lose it.
            Err(e) if opened.has_a_name() => {
                tracing::warn!(path = %self.path.display(), "the audit log was moved away, and its path cannot be opened again ({e}): appending to the moved file");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// [`AuditLog::append`] of the record `choose` gives once the file is locked: a
    /// writer that waited for other processes decides with what is known by then.
    pub fn append_chosen<'r>(
        &self,
        choose: impl FnOnce() -> &'r ahp_vocab::Record,
    ) -> std::io::Result<()> {
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        // Looked at again once locked: a rotator that takes turns on the lock (`flock
        // audit.jsonl mv ...`) moves the log while this writer waits, and the record
        // would go after the moved file's end, read and compressed by then. A few turns:
        // a log moved at every one is appended to where it went.
        for turn in 0..3 {
            let at_its_path = self.reopen_if_moved(&mut opened)?;
            opened.file.lock()?;
            if turn == 2 || !at_its_path || opened.is_at(&self.path) {
                break;
            }
            let _ = opened.file.unlock();
        }
        let Opened { file, readable } = &mut *opened;
        let append = || {
            let mut line = line_of(choose())?;
            let end = file.metadata()?.len();
            // A writer killed mid-line (a harness's timeout) left a fragment: this record
            // starts a line of its own rather than being glued to it.
            if *readable && end > 0 && !ends_a_line(file, end)? {
                line.insert(0, b'\n');
            }
            let appended = file.write_all(&line).and_then(|()| file.sync_data());
            if appended.is_err() {
                let _ = file.set_len(end);
            }
            appended
        };
        let appended = append();
        // Whatever failed, other writers are not left waiting.
        let _ = file.unlock();
        appended
    }
}

impl Opened {
    /// The log file at `path`, created if missing. The new file's name is made durable:
    /// where the directory cannot be opened to sync it (write-only), that is only
    /// warned about, as the record itself is synced.
    fn at(path: &Path) -> std::io::Result<Opened> {
        let (file, readable, created) = open_or_create(path)?;
        if !file.metadata()?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        ours(&file)?;
        lockable(&file)?;
        // `path` is absolute ([`AuditLog::open`]), so a file has a parent.
        if let (true, Some(parent)) = (created, path.parent()) {
            if let Err(e) = File::open(parent).and_then(|dir| dir.sync_all()) {
                tracing::warn!(directory = %parent.display(), "the new audit log's name may not be durable: its directory could not be synced ({e})");
            }
        }
        Ok(Opened { file, readable })
    }

    /// Whether the open file is still the one at `path`.
    #[cfg(unix)]
    fn is_at(&self, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        match (self.file.metadata(), std::fs::symlink_metadata(path)) {
            (Ok(open), Ok(named)) => (open.dev(), open.ino()) == (named.dev(), named.ino()),
            _ => false,
        }
    }

    #[cfg(not(unix))]
    fn is_at(&self, _path: &Path) -> bool {
        true
    }

    /// Whether the open file still has a name somewhere (moved, not removed).
    #[cfg(unix)]
    fn has_a_name(&self) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        self.file.metadata().is_ok_and(|m| m.nlink() > 0)
    }

    #[cfg(not(unix))]
    fn has_a_name(&self) -> bool {
        true
    }
}

/// Refuses a file whose lock fails (a file system without locks, NFS without its lock
/// service): every record would then fail to append after its call was decided, so the
/// file is refused when opened, before anything is decided. Held by another writer is
/// fine: it is the lock that works.
fn lockable(file: &File) -> std::io::Result<()> {
    match file.try_lock() {
        Ok(()) => file.unlock(),
        Err(std::fs::TryLockError::WouldBlock) => Ok(()),
        Err(std::fs::TryLockError::Error(e)) => Err(std::io::Error::new(
            e.kind(),
            format!("it cannot be locked for appending: {e}"),
        )),
    }
}

/// `path` opened to append, to read as well where this user may, and whether it was
/// created here (decided by the open itself, not by a look before it). A file moved away
/// between the two opens (a rotation) is created after all.
fn open_or_create(path: &Path) -> std::io::Result<(File, bool, bool)> {
    let mut tries = 3;
    loop {
        tries -= 1;
        match open_append(path, true, true) {
            Ok(file) => return Ok((file, true, true)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let existing = match open_append(path, true, false) {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                open_append(path, false, false).map(|file| (file, false, false))
            }
            opened => opened.map(|file| (file, true, false)),
        };
        match existing {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries > 0 => continue,
            existing => return existing,
        }
    }
}

/// `record` as one JSONL line ([`ahp_vocab::Record::to_line`], one line for any reader).
fn line_of(record: &ahp_vocab::Record) -> serde_json::Result<Vec<u8>> {
    let mut line = record.to_line()?.into_bytes();
    line.push(b'\n');
    Ok(line)
}

/// Whether the file of `len` bytes ends with a newline.
#[cfg(unix)]
fn ends_a_line(file: &File, len: u64) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt as _;
    let mut last = [0u8];
    file.read_exact_at(&mut last, len - 1)?;
    Ok(last[0] == b'\n')
}

#[cfg(not(unix))]
fn ends_a_line(_file: &File, _len: u64) -> std::io::Result<bool> {
    Ok(true)
}

/// The open log file has no other name, and is this user's or its group is one of this
/// user's groups.
#[cfg(unix)]
fn ours(file: &File) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = file.metadata()?;
    let refused = |why: String| {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            why,
        ))
    };
    if meta.nlink() != 1 {
        return refused(format!("it has {} names (hard links)", meta.nlink()));
    }
    // SAFETY: geteuid takes no arguments, cannot fail and touches no memory of ours.
    if meta.uid() != unsafe { libc::geteuid() } && !in_my_groups(meta.gid()) {
        return refused(format!(
            "owned by another user (uid {}) and a group not this user's (gid {})",
            meta.uid(),
            meta.gid()
        ));
    }
    Ok(())
}

/// Why the open log file's mode is a risk, if it is: records hold what backends changed
/// (a tool's input, a returned value), which everybody may then read, and are the
/// evidence of each decision, which anyone may then forge. Not refused: an existing
/// file's mode is its owner's choice.
#[cfg(unix)]
fn exposure(file: &File) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let mode = file.metadata().ok()?.mode() & 0o777;
    let risks: Vec<&str> = [
        (
            0o004,
            "everybody read what backends changed (a tool's input, a returned value)",
        ),
        (0o002, "anyone add or change records"),
    ]
    .into_iter()
    .filter(|(bit, _)| mode & bit != 0)
    .map(|(_, risk)| risk)
    .collect();
    (!risks.is_empty()).then(|| format!("its mode, {mode:o}, lets {}", risks.join(" and ")))
}

#[cfg(not(unix))]
fn exposure(_file: &File) -> Option<String> {
    None
}

/// Whether `gid` is this process's effective group or one of its supplementary groups.
#[cfg(unix)]
fn in_my_groups(gid: u32) -> bool {
    // SAFETY: getegid takes no arguments, cannot fail and touches no memory of ours.
    if unsafe { libc::getegid() } == gid {
        return true;
    }
    // SAFETY: with a size of 0, getgroups(2) only returns how many groups there are.
    let count = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    let Ok(len) = usize::try_from(count) else {
        return false;
    };
    let mut groups = vec![0; len];
    // SAFETY: `groups` holds `count` gid_t values, which getgroups fills at most.
    let filled = unsafe { libc::getgroups(count, groups.as_mut_ptr()) };
    usize::try_from(filled).is_ok_and(|n| groups[..n.min(len)].contains(&gid))
}

#[cfg(not(unix))]
fn ours(_file: &File) -> std::io::Result<()> {
    Ok(())
}

/// `path` opened to append, and to read as well if `read`; if `create`, a new file
/// (mode 0600) or an `AlreadyExists` error, else an existing file.
#[cfg(unix)]
fn open_append(path: &Path, read: bool, create: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    OpenOptions::new()
        .create_new(create)
        .read(read)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_append(path: &Path, read: bool, create: bool) -> std::io::Result<File> {
    OpenOptions::new()
        .create_new(create)
        .read(read)
        .append(true)
        .open(path)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    /// A host's `shutdown` denial of a `tool.before` call.
    fn shutdown_record() -> ahp_vocab::Record {
        let event = r#"{"id":"evt_1","type":"tool.before"}"#;
        ahp_vocab::Record::host_denial(
            ahp_vocab::EventRef::read(event),
            ahp_vocab::DecidedBy::Shutdown,
            1,
        )
    }

    /// A backend's reason with Unicode line breaks and C1 controls stays on one line,
    /// and reads back as the same text.
    #[test]
    fn a_record_is_one_line_for_any_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let mut record = shutdown_record();
        let reason = "a\u{2028}{\"decision\":\"allow\"}\u{2029}b\u{85}c\u{7f}d\u{9f}é\u{a0}";
        record.reason = Some(reason.into());
        log.append(&record).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let breaks = ['\u{2028}', '\u{2029}', '\u{85}', '\u{7f}', '\u{9f}', '\n'];
        let body = text.strip_suffix('\n').expect("one line");
        assert!(!body.contains(breaks), "{text:?}");
        assert!(text.contains('é') && text.contains('\u{a0}'), "{text:?}");
        let read: ahp_vocab::Record = serde_json::from_str(body).unwrap();
        assert_eq!(read.reason.as_deref(), Some(reason));
        // What `ahp intercept` prints, and the record's Display, is that line.
        assert_eq!(record.to_string(), body);
        let printed = crate::Settlement::of(record).to_json();
        assert_eq!(printed, body);
    }

    #[test]
    fn a_new_log_is_its_owners_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        AuditLog::open(&path).expect("a new log");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    /// A relative path is made absolute at open, from the working directory then: the
    /// records of an embedder that changes directory later stay in one file. (The test
    /// names a temporary file by a path relative to the working directory, which it
    /// does not change: tests share the process.)
    #[test]
    fn a_relative_path_is_made_absolute_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = std::env::current_dir().unwrap();
        let up = "../".repeat(cwd.components().count() - 1);
        let relative = Path::new(&up).join(dir.path().strip_prefix("/").unwrap());
        let relative = relative.join("audit.jsonl");
        let log = AuditLog::open(&relative).unwrap();
        assert_eq!(log.path(), cwd.join(&relative));
        log.append(&shutdown_record()).unwrap();
        let written = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
        assert_eq!(written.lines().count(), 1, "{written}");
    }

    /// An existing log everybody can read or write is opened, and said to be such; one
    /// a group shares is not.
    #[test]
    fn a_log_everybody_can_read_or_write_is_opened_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, "").unwrap();
        for (mode, warning) in [
            (0o660, None),
            (0o644, Some("its mode, 644, lets everybody read what backends changed (a tool's input, a returned value)")),
            (0o622, Some("its mode, 622, lets anyone add or change records")),
            (0o666, Some("its mode, 666, lets everybody read what backends changed (a tool's input, a returned value) and anyone add or change records")),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let log = AuditLog::open(&path).expect("opened");
            assert_eq!(log.warning(), warning, "{mode:o}");
        }
    }

    /// A log rotated while this writer waits for its lock (the rotator holding it, as
    /// `flock audit.jsonl mv ...` does): once the lock is free the record goes to the
    /// file at the path, not after the end of the one moved away (compressed by then).
    #[test]
    fn a_log_rotated_while_its_lock_is_waited_for_gets_the_record_at_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let rotated = dir.path().join("audit.jsonl.1");
        let log = AuditLog::open(&path).unwrap();
        log.append(&shutdown_record()).unwrap();
        let rotator = File::open(&path).unwrap();
        rotator.lock().unwrap();
        let writer = std::thread::spawn(move || log.append(&shutdown_record()));
        waits_for_its_lock(&path);
        std::fs::rename(&path, &rotated).unwrap();
        rotator.unlock().unwrap();
        writer.join().unwrap().expect("appended");
        let lines = |path: &Path| std::fs::read_to_string(path).unwrap().lines().count();
        assert_eq!((lines(&rotated), lines(&path)), (1, 1));
    }

    /// Returns once some process waits for the lock of the file at `path`: the kernel
    /// lists each waiter in `/proc/locks`, its inode at the end of the device field.
    fn waits_for_its_lock(path: &Path) {
        use std::os::unix::fs::MetadataExt as _;
        let inode = format!(":{} ", std::fs::metadata(path).unwrap().ino());
        let waiting = || {
            let locks = std::fs::read_to_string("/proc/locks").unwrap();
            locks
                .lines()
                .any(|l| l.contains(" -> ") && l.contains(&inode))
        };
        let given_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !waiting() {
            assert!(
                std::time::Instant::now() < given_up,
                "nobody waits for the lock"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// A log another writer holds locked opens: its lock works, and is waited for when
    /// appending, not refused (only a lock that fails is).
    #[test]
    fn a_log_locked_by_another_writer_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, "").unwrap();
        let held = File::open(&path).unwrap();
        held.lock().unwrap();
        AuditLog::open(&path).expect("opened while locked elsewhere");
        held.unlock().unwrap();
        AuditLog::open(&path).expect("opened once free");
    }

    /// An existing log keeps its mode (a group may share it on purpose); one with
    /// another name (a hard link to someone's file) is refused, untouched.
    #[test]
    fn an_existing_log_with_another_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared.jsonl");
        std::fs::write(&shared, "").unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o660)).unwrap();
        AuditLog::open(&shared).expect("a group's log");
        let mode = std::fs::metadata(&shared).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o660, "{mode:o}");
        let victim = dir.path().join("victim.conf");
        std::fs::write(&victim, "keep").unwrap();
        let linked = dir.path().join("linked.jsonl");
        std::fs::hard_link(&victim, &linked).unwrap();
        let error = AuditLog::open(&linked).unwrap_err();
        assert!(error.to_string().contains("2 names"), "{error}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        // SAFETY: geteuid touches no memory of ours.
        if unsafe { libc::geteuid() } == 0 {
            // As root the test can give a file away: a stranger's, in a group not ours,
            // is refused; one in our group is a group's log.
            let theirs = dir.path().join("theirs.jsonl");
            std::fs::write(&theirs, "").unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let error = AuditLog::open(&theirs).unwrap_err();
            assert!(error.to_string().contains("another user"), "{error}");
            std::os::unix::fs::chown(&theirs, Some(65534), Some(0)).unwrap();
            AuditLog::open(&theirs).expect("a log of our group");
        }
    }

    /// A line a killed writer left unfinished is not glued to the next record.
    #[test]
    fn a_record_after_a_fragment_starts_its_own_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, "{\"decision\":\"al").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let log = AuditLog::open(&path).unwrap();
        log.append(&shutdown_record()).unwrap();
        log.append(&shutdown_record()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text:?}");
        assert_eq!(lines[0], "{\"decision\":\"al");
        for line in &lines[1..] {
            serde_json::from_str::<ahp_vocab::Record>(line).expect("a whole record");
        }
    }

    /// A log rotated away (renamed, then removed) is followed to its path: the next
    /// record goes to a new file there, not into the moved file or a file with no name.
    #[test]
    fn a_rotated_log_is_reopened_at_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let rotated = dir.path().join("audit.jsonl.1");
        let log = AuditLog::open(&path).unwrap();
        log.append(&shutdown_record()).unwrap();
        std::fs::rename(&path, &rotated).unwrap();
        log.append(&shutdown_record()).unwrap();
        let lines = |p: &Path| std::fs::read_to_string(p).unwrap().lines().count();
        assert_eq!((lines(&rotated), lines(&path)), (1, 1));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        std::fs::remove_file(&path).unwrap();
        log.append(&shutdown_record()).unwrap();
        assert_eq!(lines(&path), 1);
        // Something at the path that is refused, with the open file moved: the record
        // goes on into the moved file rather than being lost.
        std::fs::rename(&path, &rotated).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &path).unwrap();
        log.append(&shutdown_record()).unwrap();
        assert_eq!(lines(&rotated), 2);
        assert!(!dir.path().join("elsewhere").exists());
    }

    #[test]
    fn a_link_a_fifo_or_a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "").unwrap();
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(AuditLog::open(&link).is_err(), "opened through a link");
        let fifo = dir.path().join("fifo.jsonl");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo touches no memory of ours.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert!(AuditLog::open(&fifo).is_err(), "opened a FIFO");
        assert!(AuditLog::open(dir.path()).is_err(), "opened a directory");
        assert_eq!(
            std::fs::read(&target).unwrap(),
            b"",
            "the link's target untouched"
        );
    }
}
