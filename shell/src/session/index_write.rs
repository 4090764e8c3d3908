//! Writing the session index: read-modify-write under `sessions/.index.lock`, a missing or
//! corrupt index rebuilt from the records first ([`super::rebuild`]). Apart from
//! [`super::index`] (the file's format and its readers), which the rebuild reads too.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;

use super::index::{index_path, read_index, Index, IndexError};
use super::state::write_json_atomic;

/// Read-modify-write the index under `sessions/.index.lock`. A missing or corrupt index is
/// rebuilt from the session records first (see [`super::rebuild`]; a corrupt file is kept
/// aside, never overwritten). `own` is the session the caller writes for: a missing index
/// with no other record than that one is simply a new project's first index, and says nothing.
pub fn update_index(sessions_dir: &Path, own: &str, f: impl FnOnce(&mut Index)) -> io::Result<()> {
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(sessions_dir.join(".index.lock"))?;
    lock.lock()?;
    let mut index = match read_index(sessions_dir) {
        Ok(i) => i,
        Err(IndexError::Missing) => {
            let (found, notices) = super::rebuild::scan_records(sessions_dir)?;
            if found.sessions.iter().any(|e| e.id != own) {
                super::rebuild::announce(
                    sessions_dir,
                    "the session index was missing",
                    &found,
                    &notices,
                    "",
                );
            }
            found
        }
        Err(IndexError::Corrupt(m)) => super::rebuild::rebuild(sessions_dir, &m, true)?,
        Err(IndexError::Io(m)) => return Err(io::Error::other(m)),
    };
    f(&mut index);
    let result = write_json_atomic(&index_path(sessions_dir), &index);
    drop(lock); // releases the OS lock after the rename is durable
    result
}
