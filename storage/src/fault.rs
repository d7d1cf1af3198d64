//! Storage faults: what made a write fail, told apart so that clients get the SQLSTATE Postgres
//! would give (53100 for a full disk) and a message saying what to do.
//!
//! fjall reports a failed fsync, and any failure of its background work (flushes, compactions,
//! journal rotation), only as a poisoned database, without the cause. The cause is then found by
//! looking at the filesystem: its free space, and a small probe write in the store's folder.

use std::io::Write;
use std::path::{Path, PathBuf};

use rustix::io::Errno;

/// The kind of a storage fault, as Postgres classifies a file access error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// ENOSPC, EDQUOT (Postgres: 53100 disk_full).
    DiskFull,
    /// EACCES, EPERM, EROFS (Postgres: 42501 insufficient_privilege).
    Permission,
    /// EMFILE, ENFILE (Postgres: 53000 insufficient_resources).
    TooManyFiles,
    /// ENOMEM (Postgres: 53200 out_of_memory).
    OutOfMemory,
    /// EIO and any other I/O error (Postgres: 58030 io_error).
    Io,
}

impl FaultKind {
    /// The kind of an I/O error, by its errno.
    pub fn of(error: &std::io::Error) -> Self {
        match Errno::from_io_error(error) {
            Some(Errno::NOSPC | Errno::DQUOT) => Self::DiskFull,
            Some(Errno::ACCESS | Errno::PERM | Errno::ROFS) => Self::Permission,
            Some(Errno::MFILE | Errno::NFILE) => Self::TooManyFiles,
            Some(Errno::NOMEM) => Self::OutOfMemory,
            _ => Self::Io,
        }
    }

    /// What the operator can do about it.
    fn hint(self) -> &'static str {
        match self {
            Self::DiskFull => "free space on that filesystem: writes resume by themselves",
            Self::Permission => {
                "give the server's user write access to the data directory again: writes resume \
                 by themselves"
            }
            Self::TooManyFiles => {
                "raise the open-file limit (ulimit -n) or close connections: writes resume by \
                 themselves"
            }
            Self::OutOfMemory => "the machine is out of memory",
            Self::Io => "check the disk and the server log; writes are retried at the next epoch",
        }
    }
}

/// A write the store could not make durable. Nothing of the epoch it belonged to was
/// committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFault {
    pub kind: FaultKind,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The operating system's words for it.
    pub detail: String,
}

impl std::fmt::Display for StoreFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "could not write to the store in \"{}\": {} ({})",
            self.data_dir.display(),
            self.detail,
            self.kind.hint()
        )
    }
}

impl std::error::Error for StoreFault {}

impl StoreFault {
    pub fn from_io(data_dir: &Path, error: &std::io::Error) -> Self {
        Self {
            kind: FaultKind::of(error),
            data_dir: data_dir.to_path_buf(),
            detail: error.to_string(),
        }
    }

    /// The fault behind a failed fjall write: its I/O error when it names one, else what the
    /// filesystem under `store_dir` shows.
    pub(crate) fn diagnose(data_dir: &Path, store_dir: &Path, error: &fjall::Error) -> Self {
        match io_error(error) {
            Some(io) => Self::from_io(data_dir, io),
            None => Self::probe(data_dir, store_dir).unwrap_or_else(|| Self {
                kind: FaultKind::Io,
                data_dir: data_dir.to_path_buf(),
                detail: format!("the store stopped accepting writes ({error})"),
            }),
        }
    }

    /// Looks for a cause on the filesystem: no free space, too few file descriptors left to
    /// reopen the store, or a probe write that fails. `None` when the filesystem takes writes
    /// again.
    pub(crate) fn probe(data_dir: &Path, store_dir: &Path) -> Option<Self> {
        if let Some((free, limit)) = free_descriptors() {
            if free < FILE_HEADROOM {
                return Some(Self {
                    kind: FaultKind::TooManyFiles,
                    data_dir: data_dir.to_path_buf(),
                    detail: format!(
                        "Too many open files ({free} of the limit of {limit} are free)"
                    ),
                });
            }
        }
        if let Ok(stats) = rustix::fs::statvfs(store_dir) {
            if stats.f_bavail == 0 {
                return Some(Self {
                    kind: FaultKind::DiskFull,
                    data_dir: data_dir.to_path_buf(),
                    detail: "No space left on device".into(),
                });
            }
        }
        probe_write(store_dir)
            .err()
            .map(|error| Self::from_io(data_dir, &error))
    }
}

/// File descriptors a reopen of the store needs at once (its journal, lock, and a few table
/// files per keyspace), with room to spare.
const FILE_HEADROOM: u64 = 64;

/// Free file descriptors and the limit (`RLIMIT_NOFILE`), where the system tells.
fn free_descriptors() -> Option<(u64, u64)> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current?;
    let open = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    Some((limit.saturating_sub(open), limit))
}

/// Creates, writes, syncs and removes a small file in `dir`: what the store's next file needs.
fn probe_write(dir: &Path) -> std::io::Result<()> {
    let path = dir.join(".eddy-write-probe");
    let result = (|| {
        let mut file = std::fs::File::create(&path)?;
        file.write_all(&[0; 64 << 10])?;
        file.sync_all()
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// The I/O error inside a fjall error, if it carries one.
fn io_error(error: &fjall::Error) -> Option<&std::io::Error> {
    match error {
        fjall::Error::Io(io) => Some(io),
        fjall::Error::Storage(fjall::LsmError::Io(io)) => Some(io),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified_as_postgres_does() {
        let kind =
            |errno: Errno| FaultKind::of(&std::io::Error::from_raw_os_error(errno.raw_os_error()));
        assert_eq!(kind(Errno::NOSPC), FaultKind::DiskFull);
        assert_eq!(kind(Errno::ACCESS), FaultKind::Permission);
        assert_eq!(kind(Errno::MFILE), FaultKind::TooManyFiles);
        assert_eq!(kind(Errno::IO), FaultKind::Io);
    }

    #[test]
    fn a_fault_names_the_data_directory_and_what_to_do() {
        let fault = StoreFault::from_io(
            Path::new("/data/eddy"),
            &std::io::Error::from_raw_os_error(Errno::NOSPC.raw_os_error()),
        );
        let text = fault.to_string();
        assert!(text.contains("\"/data/eddy\""), "{text}");
        assert!(text.contains("free space"), "{text}");
    }

    #[test]
    fn a_writable_folder_shows_no_fault() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(StoreFault::probe(dir.path(), dir.path()), None);
    }
}
