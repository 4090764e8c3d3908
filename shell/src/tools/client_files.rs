//! Text files a client holds (an editor's buffers, ACP's `fs` capability): when the session has
//! one, `read_file`, `write_file` and `edit_file` read the text of existing files and write
//! through it, so the model sees and edits what the user sees, saved or not.
//!
//! Invariants:
//! - The tools resolve and confine every path before the client is asked; the client only ever
//!   sees absolute paths inside the project.
//! - The client is asked about existing regular files only: a missing path is missing (a new
//!   file), a directory or special file is refused, as without a client.
//! - A capability the client does not offer falls back to the disk ([`ClientFiles::read`] and
//!   [`ClientFiles::write`] return `None`).
//! - Approval, the hooks and the sandbox are decided as without a client: this changes where
//!   bytes come from and go to, not whether a call may run.

use std::path::Path;
use std::sync::Arc;

/// A client's text files. Called from blocking threads; each call may wait on the client.
pub trait ClientFiles: Send + Sync {
    /// The text of `abs` as the client holds it; `None` when the client does not read files.
    fn read(&self, abs: &Path) -> Option<Result<String, String>>;
    /// Replace the text of `abs` through the client; `None` when the client does not write.
    fn write(&self, abs: &Path, text: &str) -> Option<Result<(), String>>;
}

/// The session's client files, if any (compared by identity).
#[derive(Clone, Default)]
pub struct ClientFilesRef(pub Option<Arc<dyn ClientFiles>>);

impl ClientFilesRef {
    /// The client's text of `abs`, or `None` to read the disk.
    pub fn read(&self, abs: &Path) -> Option<Result<String, String>> {
        self.0.as_ref().and_then(|c| c.read(abs))
    }

    /// Write through the client, or `None` to write the disk.
    pub fn write(&self, abs: &Path, text: &str) -> Option<Result<(), String>> {
        self.0.as_ref().and_then(|c| c.write(abs, text))
    }
}

impl std::fmt::Debug for ClientFilesRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ClientFiles(client)"
        } else {
            "ClientFiles(disk)"
        })
    }
}

impl PartialEq for ClientFilesRef {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for ClientFilesRef {}
