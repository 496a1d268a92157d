//! The durable audit log: one settlement record per line (JSONL), appended and synced to
//! disk before the hook call completes (`intercept` returns, or `HookCall::complete`
//! after `settle`, once the owned observers ran), so a crash after the call cannot lose
//! it. One exception: a call with a budget is not held past it (and a short grace) while
//! another process holds the file's lock; its record is written once the lock is free,
//! if its interceptor is not dropped for more than 2 s before (`audit_queue`).
//!
//! Records can hold what a backend changed (a tool's input, a returned value): the file
//! is created readable by its owner only, never opened through a symbolic link, and must
//! be a regular file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// An append-only JSONL file of settlement records.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<File>,
}

impl AuditLog {
    /// Opens (creating if needed, mode 0600) `path` for appending. A symbolic link, a FIFO
    /// or anything but a regular file there is refused.
    pub fn open(path: &Path) -> std::io::Result<AuditLog> {
        let created = !path.exists();
        let file = open_append(path)?;
        if !file.metadata()?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        if created {
            // The new file's name is durable only once its directory is.
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                File::open(parent)?.sync_all()?;
            }
        }
        Ok(AuditLog {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as a line and syncs it. Other processes appending to the same
    /// file wait on its lock, and a write cut short (a full disk, a file-size limit) is
    /// cut back off, so no line is ever torn or glued to a fragment.
    pub fn append(&self, record: &ahp_vocab::Record) -> std::io::Result<()> {
        self.append_chosen(|| record)
    }

    /// [`AuditLog::append`] of the record `choose` gives once the file is locked: a
    /// writer that waited for other processes decides with what is known by then.
    pub fn append_chosen<'r>(
        &self,
        choose: impl FnOnce() -> &'r ahp_vocab::Record,
    ) -> std::io::Result<()> {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.lock()?;
        let append = || {
            let mut line = serde_json::to_vec(choose())?;
            line.push(b'\n');
            let end = file.metadata()?.len();
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

#[cfg(unix)]
fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_new_log_is_its_owners_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        AuditLog::open(&path).expect("a new log");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
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
