//! Single ownership of a session: an exclusive OS lock (`flock` via std's `File::try_lock`) on
//! `sessions/<id>.lock`, held for as long as the [`SessionLock`] lives.
//!
//! Invariants:
//! - The OS releases the lock when the owning process dies, however it dies, so a lock file
//!   left by a dead process is not an owner: the next `try_lock` succeeds.
//! - The lock file holds the owner's pid (written after the lock is taken) only to make the
//!   "owned by another process" message useful; ownership is the OS lock, never the pid.
//! - The descriptor is close-on-exec (std's default), so tools and hooks the owner spawns do
//!   not inherit the lock.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A held session lock.
#[derive(Debug)]
pub struct SessionLock {
    file: File,
    path: PathBuf,
}

/// Why the lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Another live process (or another writer in this process) holds it.
    Held {
        path: PathBuf,
        pid: Option<u32>,
    },
    Io(io::Error),
}

impl SessionLock {
    /// Take the exclusive lock on `path` without waiting.
    pub fn try_acquire(path: &Path) -> Result<SessionLock, LockError> {
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(LockError::Io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(LockError::Held {
                    path: path.to_path_buf(),
                    pid: read_pid(path),
                })
            }
            Err(fs::TryLockError::Error(e)) => return Err(LockError::Io(e)),
        }
        // Record our pid for the benefit of a would-be second owner's message. Not synced:
        // it is advisory, and the lock itself lives in the kernel.
        let pid = format!("{}\n", std::process::id());
        file.set_len(0).map_err(LockError::Io)?;
        file.seek(SeekFrom::Start(0)).map_err(LockError::Io)?;
        file.write_all(pid.as_bytes()).map_err(LockError::Io)?;
        Ok(SessionLock {
            file,
            path: path.to_path_buf(),
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Closing the descriptor releases the lock as well; unlocking first is explicit.
        let _ = self.file.unlock();
    }
}

impl LockError {
    /// One line for stderr naming the session and, when known, the owner's pid.
    pub fn describe(&self, session_id: &str) -> String {
        match self {
            LockError::Held { path, pid: Some(pid) } => format!(
                "session {session_id} is owned by another openmax process (pid {pid}); lock file {}",
                path.display()
            ),
            LockError::Held { path, pid: None } => format!(
                "session {session_id} is owned by another openmax process; lock file {}",
                path.display()
            ),
            LockError::Io(e) => format!("cannot lock session {session_id}: {e}"),
        }
    }
}

fn read_pid(path: &Path) -> Option<u32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}
