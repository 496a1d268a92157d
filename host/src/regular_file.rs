//! Reading a file the process was pointed at (trust roots, OAuth clients, a component):
//! a regular file only, and no further than a bound. A FIFO nobody writes would wait for
//! ever, past any budget, and a huge or endless file (`/dev/zero`) would fill memory —
//! under `ahp hook`, a crash before the watchdog answers, which the harness reads as no
//! objection.

use std::io::Read as _;
use std::path::Path;

/// The bytes of the regular file at `path`, at most `limit` of them; else why not, to
/// follow the caller's name for the file.
pub(crate) fn read(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // Opening a FIFO without a writer would block; non-blocking, it opens, and is
        // refused below as no regular file.
        open.custom_flags(libc::O_NONBLOCK);
    }
    let file = open.open(path).map_err(|e| e.to_string())?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!("larger than {}", size(limit)));
    }
    Ok(bytes)
}

/// `limit` in the largest binary unit that divides it.
fn size(limit: u64) -> String {
    match limit {
        l if l >= 1 << 20 && l % (1 << 20) == 0 => format!("{} MiB", l >> 20),
        l if l >= 1 << 10 && l % (1 << 10) == 0 => format!("{} KiB", l >> 10),
        l => format!("{l} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_within_the_bound_is_read() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("f");
        std::fs::write(&file, [7u8; 1024]).expect("write");
        assert_eq!(read(&file, 1024).map(|b| b.len()), Ok(1024));
        assert_eq!(read(&file, 1023), Err("larger than 1023 bytes".to_string()));
        assert_eq!(
            read(Path::new("/dev/zero"), 1 << 20),
            Err("not a regular file".into())
        );
        assert_eq!(read(dir.path(), 10), Err("not a regular file".into()));
        #[cfg(unix)]
        {
            let fifo = dir.path().join("fifo");
            let name = std::ffi::CString::new(fifo.to_str().expect("UTF-8")).expect("no NUL");
            // SAFETY: `name` is a valid NUL-terminated path that outlives the call.
            assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
            assert_eq!(read(&fifo, 10), Err("not a regular file".into()));
        }
        assert!(read(&dir.path().join("missing"), 10).is_err_and(|e| e.contains("No such file")));
        assert_eq!(size(4 << 20), "4 MiB");
        assert_eq!(size(64 << 10), "64 KiB");
    }
}
