//! What a sandboxed command may not create in a git directory: a protected file entry that did
//! not exist when the command started (`.git/commondir`, which would make the human's git read
//! its configuration and hooks from wherever it points; `.git/config.worktree`). A bind mount
//! can hold an entry read-only only where it exists, so the helper, outside the sandbox, watches
//! those directories (inotify) and removes such an entry the moment it appears, and once more
//! when the command has ended. Each removal is said on stderr (the command's own output, which
//! the model reads).
//!
//! Invariant: the watches are set before the sandbox's first process is cloned and the watcher
//! runs before PROGRAM starts, so nothing PROGRAM creates is missed; a directory is opened once
//! (`O_NOFOLLOW`) and removals go through that descriptor, never through a path the sandbox
//! could redirect.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{AtFlags, Mode, OFlags, CWD};

/// One watched directory and the names it may not gain.
struct Dir {
    path: PathBuf,
    fd: OwnedFd,
    wd: i32,
    names: Vec<OsString>,
}

/// The watches of one sandboxed command.
pub struct Guard {
    inotify: OwnedFd,
    dirs: Vec<Dir>,
}

impl Guard {
    /// Watch the parents of `absent` (paths that do not exist now). `None` when there is
    /// nothing to watch, or the kernel gives no inotify (then only the final sweep runs).
    pub fn new(absent: &[PathBuf]) -> Option<Guard> {
        if absent.is_empty() {
            return None;
        }
        let inotify = inotify::init(CreateFlags::CLOEXEC).ok()?;
        let mut dirs: Vec<Dir> = Vec::new();
        for p in absent {
            let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
                continue;
            };
            if let Some(d) = dirs.iter_mut().find(|d| d.path == parent) {
                d.names.push(name.to_os_string());
                continue;
            }
            let Ok(fd) = rustix::fs::openat(
                CWD,
                parent,
                OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY,
                Mode::empty(),
            ) else {
                continue;
            };
            let Ok(wd) = inotify::add_watch(
                &inotify,
                format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd)),
                WatchFlags::CREATE | WatchFlags::MOVED_TO | WatchFlags::ONLYDIR,
            ) else {
                continue;
            };
            dirs.push(Dir {
                path: parent.to_path_buf(),
                fd,
                wd,
                names: vec![name.to_os_string()],
            });
        }
        Some(Guard { inotify, dirs })
    }

    /// Watch on a thread of its own until the process ends.
    pub fn spawn(self) -> std::sync::Arc<Guard> {
        let g = std::sync::Arc::new(self);
        let w = std::sync::Arc::clone(&g);
        let _ = std::thread::Builder::new()
            .name("git-guard".into())
            .stack_size(128 * 1024)
            .spawn(move || w.watch());
        g
    }

    fn watch(&self) {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.inotify, &mut buf);
        loop {
            let Ok(ev) = reader.next() else {
                // EINTR, or a read error: the final sweep still runs.
                if reader.is_buffer_empty() {
                    continue;
                }
                return;
            };
            if !ev
                .events()
                .intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO)
            {
                continue;
            }
            let (wd, name) = (ev.wd(), ev.file_name().map(|n| n.to_bytes().to_vec()));
            if let (Some(d), Some(name)) = (self.dirs.iter().find(|d| d.wd == wd), name) {
                if d.names.iter().any(|n| n.as_bytes() == name.as_slice()) {
                    remove(d, std::ffi::OsStr::from_bytes(&name));
                }
            }
        }
    }

    /// Remove whatever forbidden entry exists now (when the command has ended).
    pub fn sweep(&self) {
        for d in &self.dirs {
            for n in &d.names {
                remove(d, n);
            }
        }
    }
}

/// Remove `name` from `d` if it exists, and say so.
fn remove(d: &Dir, name: &std::ffi::OsStr) {
    let Ok(st) = rustix::fs::statat(&d.fd, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return;
    };
    let dir = rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
    let removed = if dir {
        remove_tree(&d.fd, name)
    } else {
        rustix::fs::unlinkat(&d.fd, name, AtFlags::empty()).is_ok()
    };
    let path = Path::new(&d.path).join(name);
    if removed {
        eprintln!(
            "openmax: removed {}: the command created it, and git would read configuration or \
             hooks from where it points (it is protected: [sandbox] protected)",
            path.display()
        );
    }
}

/// Remove the directory `name` in `parent` and what it holds, without following symlinks.
fn remove_tree(parent: &OwnedFd, name: &std::ffi::OsStr) -> bool {
    let Ok(fd) = rustix::fs::openat(
        parent,
        name,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY,
        Mode::empty(),
    ) else {
        return false;
    };
    let entries: Vec<OsString> = match rustix::fs::Dir::read_from(&fd) {
        Ok(dir) => dir
            .filter_map(Result::ok)
            .map(|e| std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_os_string())
            .filter(|n| n != "." && n != "..")
            .collect(),
        Err(_) => return false,
    };
    for e in &entries {
        let is_dir =
            rustix::fs::statat(&fd, e.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|s| {
                rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Directory
            });
        if is_dir {
            remove_tree(&fd, e);
        } else {
            let _ = rustix::fs::unlinkat(&fd, e.as_os_str(), AtFlags::empty());
        }
    }
    rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_is_removed_whole_without_following_its_symlinks() {
        let base = crate::scratch::path("guard");
        let _ = std::fs::remove_dir_all(&base);
        let outside = base.join("outside");
        let tree = base.join("git").join("commondir");
        std::fs::create_dir_all(tree.join("a/b")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        std::fs::write(tree.join("f"), "x").unwrap();
        std::fs::write(tree.join("a/b/g"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("a/link")).unwrap();
        let parent = rustix::fs::open(
            base.join("git"),
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        assert!(remove_tree(&parent, std::ffi::OsStr::new("commondir")));
        assert!(!tree.exists());
        assert!(
            outside.join("keep").exists(),
            "a symlink's target is not touched"
        );
        // A name that is not a directory is not one to remove as a tree.
        std::fs::write(base.join("git/file"), "x").unwrap();
        assert!(!remove_tree(&parent, std::ffi::OsStr::new("file")));
        // Nor is a symlink to a directory: what it points at is left whole.
        std::os::unix::fs::symlink(&outside, base.join("git/linked")).unwrap();
        assert!(!remove_tree(&parent, std::ffi::OsStr::new("linked")));
        assert!(outside.join("keep").exists(), "the link was followed");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
