//! Which Unix socket an agent process may connect to: one made inside its own sandbox, or one
//! the user config allows by path (`[sandbox] unix_sockets`). Every other listener (a terminal
//! multiplexer's, an ssh or gpg agent's, a bus, a container engine) belongs to a process
//! outside and is refused with `EACCES`; a file with no listener gets `ECONNREFUSED`, as the
//! kernel would say.
//!
//! "Made inside" is read from the kernel's socket table ([`super::diag`]): with the network
//! off the sandbox has a network namespace of its own, whose table lists only sockets made
//! inside; with the network on it shares the host's, and a listener is inside when a process
//! of the sandbox's pid namespace holds it (its `/proc/<pid>/fd`).

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Mutex;

use std::os::fd::OwnedFd;

use super::diag::{self, UnixSocket};

/// The answer to one `connect(2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Refused with this `errno`.
    Refuse(i32),
}

/// What the broker knows to decide.
#[derive(Debug)]
pub struct Judge {
    /// The socket table of the sandbox's own network namespace (network off).
    pub inside: Option<Mutex<OwnedFd>>,
    /// The socket table of the helper's (the host's) network namespace.
    pub host: Mutex<OwnedFd>,
    /// `[sandbox] unix_sockets`: paths as the helper sees them.
    pub allowed: Vec<PathBuf>,
    /// The sandbox's own `/proc`, seen through its first process's root.
    pub sandbox_proc: PathBuf,
}

fn dump(table: &Mutex<OwnedFd>) -> Vec<UnixSocket> {
    let t = table
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    diag::dump(&t).unwrap_or_default()
}

impl Judge {
    /// A socket file (its device and inode, as `fstat` gives them).
    pub fn file(&self, dev: u64, ino: u64) -> Verdict {
        let allowed = self
            .allowed
            .iter()
            .any(|p| std::fs::metadata(p).is_ok_and(|m| m.dev() == dev && m.ino() == ino));
        if allowed {
            return Verdict::Allow;
        }
        let bound = |s: &UnixSocket| s.file == Some((dev, ino as u32));
        self.decide(bound)
    }

    /// An abstract name (the bytes after the family, starting with `\0`).
    pub fn abstract_name(&self, name: &[u8]) -> Verdict {
        if self.inside.is_some() {
            // The sandbox's own network namespace holds only its own abstract names.
            return Verdict::Allow;
        }
        self.decide(|s: &UnixSocket| s.name.as_deref() == Some(name))
    }

    fn decide(&self, bound: impl Fn(&UnixSocket) -> bool) -> Verdict {
        if let Some(inside) = &self.inside {
            if dump(inside).iter().any(&bound) {
                return Verdict::Allow;
            }
            return if dump(&self.host).iter().any(&bound) {
                Verdict::Refuse(libc::EACCES)
            } else {
                Verdict::Refuse(libc::ECONNREFUSED)
            };
        }
        let candidates: Vec<u32> = dump(&self.host)
            .iter()
            .filter(|s| bound(s))
            .map(|s| s.inode)
            .collect();
        if candidates.is_empty() {
            return Verdict::Refuse(libc::ECONNREFUSED);
        }
        if self.held_inside(&candidates) {
            Verdict::Allow
        } else {
            Verdict::Refuse(libc::EACCES)
        }
    }

    /// Whether a process of the sandbox holds one of these sockets.
    fn held_inside(&self, inodes: &[u32]) -> bool {
        let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
        let Ok(procs) = std::fs::read_dir(&self.sandbox_proc) else {
            return false;
        };
        for p in procs.flatten() {
            if !p
                .file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
            {
                continue;
            }
            let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
                continue;
            };
            for fd in fds.flatten() {
                if let Ok(link) = std::fs::read_link(fd.path()) {
                    let link = link.to_string_lossy();
                    if wanted.iter().any(|w| *w == link) {
                        return true;
                    }
                }
            }
        }
        false
    }
}
