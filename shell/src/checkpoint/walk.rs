//! The walk of a checkpoint's scan, on every core: the `ignore` walker (the rules `list_dir`
//! and `grep` walk by, [`crate::walk::builder`]) decides which entries are kept, and
//! each directory it enters is also read through a descriptor of its own, every entry
//! `lstat`ed by name relative to it (`fstatat`), so the kernel never resolves a whole path.
//! One pass yields both what is recorded and, by difference, the names the rules exclude.
//!
//! Invariants: the walker reads a directory and visits it before it hands that directory's
//! children to the workers, so a directory's own reading is done when its first child is
//! visited; which entries the walker kept is gathered per thread and joined when the walk
//! ends. `.git` is neither kept nor read. Nothing here writes.

use std::collections::{HashMap, HashSet};
use std::ffi::CStr;
use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;

use ignore::WalkState;
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, CWD};

use super::cache::Stat;
use super::manifest::Left;

/// What a walk found.
#[derive(Debug, Default)]
pub struct Walked {
    /// Every directory the walker entered (the root is `""`) with its entries in the order
    /// they were read; `None` when it could not be read.
    pub dirs: HashMap<String, Option<Vec<Entry>>>,
    /// The names the walker kept, by directory.
    pub kept: HashMap<String, HashSet<String>>,
    /// What the walker could not read, and kept names that are not UTF-8.
    pub left: Vec<Left>,
}

/// One entry of a directory, as read.
#[derive(Debug)]
pub struct Entry {
    pub name: String,
    /// The directory said it is a directory (its `d_type`).
    pub dir_type: bool,
    pub probe: Probe,
}

impl Entry {
    /// Whether it is a directory: by its `lstat`, or by its `d_type` when that failed.
    pub fn is_dir(&self) -> bool {
        match self.probe {
            Probe::Dir { .. } => true,
            Probe::Gone | Probe::Failed(_) => self.dir_type,
            _ => false,
        }
    }
}

/// What an entry is, by its `lstat` (not followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Gone before it could be read.
    Gone,
    /// Could not be read: why (`not read: …`).
    Failed(String),
    Dir {
        mode: u32,
    },
    /// A symbolic link: its target, or why it is not recorded.
    Link(Result<String, String>),
    File(Stat),
    /// A socket, pipe or device.
    Other,
}

/// Walk `project` with its ignore rules.
pub fn walk(project: &Path) -> Walked {
    let shared = Mutex::new(Walked::default());
    crate::walk::builder(project, true)
        .build_parallel()
        .run(|| {
            let mut local = Local {
                shared: &shared,
                found: Walked::default(),
            };
            Box::new(move |item| {
                local.visit(project, item);
                WalkState::Continue
            })
        });
    // A poisoned lock means a visitor panicked; what the others found is still whole.
    shared.into_inner().unwrap_or_else(|p| p.into_inner())
}

/// One worker's findings, added to the shared ones when the worker is dropped (before the
/// walk returns).
struct Local<'a> {
    shared: &'a Mutex<Walked>,
    found: Walked,
}

impl Local<'_> {
    fn visit(&mut self, project: &Path, item: Result<ignore::DirEntry, ignore::Error>) {
        let entry = match item {
            Ok(e) => e,
            Err(e) => {
                return self
                    .found
                    .left
                    .push(Left::new("", format!("not read: {e}")))
            }
        };
        let root = entry.depth() == 0;
        let rel = if root {
            ""
        } else {
            match rel_bytes(project, entry.path()) {
                Some(rel) => rel,
                None => {
                    return self.found.left.push(Left::new(
                        &entry.path().to_string_lossy(),
                        "its name is not UTF-8".into(),
                    ))
                }
            }
        };
        if !root {
            let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
            match self.found.kept.get_mut(dir) {
                Some(names) => names.insert(name.to_string()),
                None => self
                    .found
                    .kept
                    .entry(dir.to_string())
                    .or_default()
                    .insert(name.to_string()),
            };
        }
        if entry.file_type().is_some_and(|t| t.is_dir()) {
            self.found
                .dirs
                .insert(rel.to_string(), read_dir(entry.path(), root).ok());
        }
    }
}

impl Drop for Local<'_> {
    fn drop(&mut self) {
        let found = std::mem::take(&mut self.found);
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.dirs.extend(found.dirs);
        for (dir, names) in found.kept {
            match shared.kept.get_mut(&dir) {
                Some(all) => all.extend(names),
                None => {
                    shared.kept.insert(dir, names);
                }
            }
        }
        shared.left.extend(found.left);
    }
}

/// `path` relative to `project` when it is UTF-8, by bytes: the walker's paths are the
/// project's path joined with names, and taking them apart by components costs more than the
/// rest of a visit.
fn rel_bytes<'a>(project: &Path, path: &'a Path) -> Option<&'a str> {
    use std::os::unix::ffi::OsStrExt;
    let base = project.as_os_str().as_bytes();
    let rest = path.as_os_str().as_bytes().strip_prefix(base)?;
    let rest = if base.ends_with(b"/") {
        rest
    } else {
        rest.strip_prefix(b"/")?
    };
    std::str::from_utf8(rest).ok().filter(|r| !r.is_empty())
}

/// Read the directory at `path` and `lstat` each entry relative to it (`.git` and names that
/// are not UTF-8 are passed over). `root`: the project itself, which may be reached through a
/// link; below it nothing is followed.
fn read_dir(path: &Path, root: bool) -> io::Result<Vec<Entry>> {
    let mut flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    if !root {
        flags |= OFlags::NOFOLLOW;
    }
    let fd = rustix::fs::openat(CWD, path, flags, Mode::empty())?;
    let mut dir = Dir::read_from(&fd)?;
    let mut out = Vec::new();
    while let Some(e) = dir.read() {
        let e = e?;
        let raw = e.file_name();
        let Ok(name) = raw.to_str() else {
            continue;
        };
        if matches!(name, "." | ".." | ".git") {
            continue;
        }
        out.push(Entry {
            name: name.to_string(),
            dir_type: e.file_type() == FileType::Directory,
            probe: probe_at(&fd, raw),
        });
    }
    Ok(out)
}

/// What the entry `name` of the directory `fd` is.
fn probe_at<Fd: AsFd>(fd: Fd, name: &CStr) -> Probe {
    let st = match rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Probe::Gone,
        Err(e) => return Probe::Failed(format!("not read: {}", io::Error::from(e))),
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => Probe::Dir {
            mode: Stat::of_raw(&st).mode,
        },
        FileType::Symlink => Probe::Link(match rustix::fs::readlinkat(&fd, name, Vec::new()) {
            Ok(t) => t
                .into_string()
                .map_err(|_| "its link target is not UTF-8".to_string()),
            Err(e) => Err(format!("not read: {}", io::Error::from(e))),
        }),
        FileType::RegularFile => Probe::File(Stat::of_raw(&st)),
        _ => Probe::Other,
    }
}

/// What the entry at `path` is (by its whole path: for the few entries not read with their
/// directory).
pub fn probe_path(path: &Path) -> Probe {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Probe::Gone,
        Err(e) => return Probe::Failed(format!("not read: {e}")),
    };
    let ft = meta.file_type();
    if ft.is_dir() {
        Probe::Dir {
            mode: meta.mode() & 0o7777,
        }
    } else if ft.is_symlink() {
        Probe::Link(match fs::read_link(path) {
            Ok(t) => t
                .into_os_string()
                .into_string()
                .map_err(|_| "its link target is not UTF-8".to_string()),
            Err(e) => Err(format!("not read: {e}")),
        })
    } else if ft.is_file() {
        Probe::File(Stat::of(&meta))
    } else {
        Probe::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_read_by_descriptor_matches_its_paths() {
        let dir = crate::scratch::path("cpwalk");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::write(dir.join("f"), "x").unwrap();
        std::os::unix::fs::symlink("f", dir.join("l")).unwrap();
        fs::create_dir(dir.join(".git")).unwrap();
        let mut entries = read_dir(&dir, true).unwrap();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["f", "l", "sub"]);
        for e in &entries {
            assert_eq!(e.probe, probe_path(&dir.join(&e.name)), "{}", e.name);
        }
        assert_eq!(entries[1].probe, Probe::Link(Ok("f".into())));
        assert!(entries[2].is_dir() && !entries[0].is_dir());
        assert_eq!(probe_path(&dir.join("nope")), Probe::Gone);
        fn rel<'a>(p: &str, q: &'a str) -> Option<&'a str> {
            rel_bytes(Path::new(p), Path::new(q))
        }
        assert_eq!(rel("/a/b", "/a/b/c/d"), Some("c/d"));
        assert_eq!(rel("/", "/etc"), Some("etc"));
        assert_eq!(rel("/a/b", "/a/bc"), None);
        assert_eq!(rel("/a/b", "/a/b"), None);
        let _ = fs::remove_dir_all(&dir);
    }
}
