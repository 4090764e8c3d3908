//! The directory walker shared by `list_dir`, `glob` and `grep`, and the glob filter of `glob`
//! and `grep`.
//!
//! Invariants: walks use the `ignore` crate the way ripgrep does — `.gitignore` (also outside a
//! git repository: `require_git(false)`), `.ignore`, `.git/info/exclude`, the global git
//! excludes, ignore files of parent directories — and skip hidden entries unless asked;
//! `.git` directories are never entered; symlinks are not followed (so a walk never leaves the
//! project). A glob without `/` matches the file name at any depth (like `rg -g`); a glob with
//! `/` matches the path relative to the walk's base. [`Opener`] opens a walked file relative to
//! its directory (kept open while consecutive entries share it), so the kernel resolves one path
//! component per file instead of every component of its absolute path; the file opened is the
//! one its path names either way.

use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;

/// A walker over `base` with the project's ignore rules.
pub fn builder(base: &Path, hidden: bool) -> WalkBuilder {
    let mut b = WalkBuilder::new(base);
    b.hidden(!hidden)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.depth() == 0 || e.file_name() != ".git");
    b
}

/// A compiled glob filter.
#[derive(Debug)]
pub struct GlobFilter {
    matcher: GlobMatcher,
    name_only: bool,
    /// Whether the pattern names hidden entries explicitly (then hidden files are walked).
    pub wants_hidden: bool,
}

impl GlobFilter {
    /// Compile `pattern`; the error is the failed call's message.
    pub fn new(tool: &str, pattern: &str) -> Result<Self, String> {
        let trimmed = pattern.strip_prefix("./").unwrap_or(pattern);
        if trimmed.is_empty() {
            return Err(format!("{tool}: the glob pattern is empty"));
        }
        if trimmed.split('/').any(|c| c == "..") || trimmed.starts_with('/') {
            return Err(format!(
                "{tool}: glob pattern {pattern:?} must be relative and without `..` \
                 (use the `path` argument to choose the directory)"
            ));
        }
        let glob = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("{tool}: invalid glob pattern {pattern:?}: {}", e.kind()))?;
        let wants_hidden = trimmed.starts_with('.') || trimmed.contains("/.");
        Ok(GlobFilter {
            matcher: glob.compile_matcher(),
            name_only: !trimmed.contains('/'),
            wants_hidden,
        })
    }

    /// Whether the file at `rel` (relative to the walk's base) matches.
    pub fn is_match(&self, rel: &Path) -> bool {
        if self.name_only {
            rel.file_name().is_some_and(|n| self.matcher.is_match(n))
        } else {
            self.matcher.is_match(rel)
        }
    }
}

/// A per-thread batch of results that flushes into a shared sink when full and when dropped
/// (each parallel visitor owns one, and visitors are dropped before the walk returns).
pub struct Batch<'a, T> {
    sink: &'a Mutex<Vec<T>>,
    local: Vec<T>,
}

impl<'a, T> Batch<'a, T> {
    /// An empty batch over `sink`.
    pub fn new(sink: &'a Mutex<Vec<T>>) -> Self {
        Batch {
            sink,
            local: Vec::new(),
        }
    }

    /// Add one result.
    pub fn push(&mut self, item: T) {
        self.local.push(item);
        if self.local.len() >= 256 {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.local.is_empty() {
            return;
        }
        // A poisoned sink means another visitor panicked; keep what can be kept.
        let mut sink = self.sink.lock().unwrap_or_else(|p| p.into_inner());
        sink.append(&mut self.local);
    }
}

impl<T> Drop for Batch<'_, T> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Opens files for reading (`O_NONBLOCK`, so a file swapped for a FIFO after the walk cannot
/// hold the reader; no effect on regular files), through a cached descriptor of the last
/// directory a file was opened in. One per walking thread: the parallel walk hands a thread all
/// the entries of a directory in a row.
#[derive(Default)]
pub struct Opener {
    dir: Option<(PathBuf, File)>,
    /// The file name, NUL-terminated (reused).
    name: Vec<u8>,
}

impl Opener {
    /// Open `path` for reading.
    pub fn open(&mut self, path: &Path) -> io::Result<File> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return open_nonblocking(path);
        };
        if self.dir.as_ref().is_none_or(|(p, _)| p != parent) {
            self.dir = None;
            let dir = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                .open(parent)?;
            self.dir = Some((parent.to_path_buf(), dir));
        }
        let Some((_, dir)) = &self.dir else {
            return open_nonblocking(path);
        };
        self.name.clear();
        self.name.extend_from_slice(name.as_bytes());
        self.name.push(0);
        let name =
            CStr::from_bytes_with_nul(&self.name).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: `dir` is an open directory descriptor and `name` a NUL-terminated string,
        // both alive for the call; a non-negative result is a new descriptor that we own.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened above and is owned by nothing else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }
}

/// Open `path` for reading with `O_NONBLOCK` (see [`Opener`]).
pub fn open_nonblocking(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_semantics() {
        let g = GlobFilter::new("glob", "*.rs").unwrap();
        assert!(g.is_match(Path::new("a/b/c.rs")));
        assert!(!g.is_match(Path::new("a/b/c.rsx")));
        let g = GlobFilter::new("glob", "src/*.rs").unwrap();
        assert!(g.is_match(Path::new("src/a.rs")));
        assert!(!g.is_match(Path::new("src/x/a.rs")));
        let g = GlobFilter::new("glob", "./**/*.{rs,toml}").unwrap();
        assert!(g.is_match(Path::new("Cargo.toml")));
        assert!(g.is_match(Path::new("x/y/z.rs")));
        assert!(GlobFilter::new("glob", ".github/**").unwrap().wants_hidden);
        assert!(GlobFilter::new("glob", "../*").is_err());
        assert!(GlobFilter::new("glob", "a[")
            .unwrap_err()
            .contains("invalid glob"));
    }

    #[test]
    fn opener_opens_files_across_directories_and_reports_missing_ones() {
        use std::io::Read;
        let dir = std::env::temp_dir().join(format!("openmax-opener-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a")).expect("temp dir is writable");
        std::fs::create_dir_all(dir.join("b")).expect("temp dir is writable");
        for (p, text) in [("a/x", "ax"), ("a/y", "ay"), ("b/x", "bx"), ("top", "t")] {
            std::fs::write(dir.join(p), text).expect("write");
        }
        let mut opener = Opener::default();
        for (p, text) in [
            ("a/x", "ax"),
            ("a/y", "ay"),
            ("b/x", "bx"),
            ("a/x", "ax"),
            ("top", "t"),
        ] {
            let mut got = String::new();
            opener
                .open(&dir.join(p))
                .expect("opens")
                .read_to_string(&mut got)
                .expect("reads");
            assert_eq!(got, text, "{p}");
        }
        let err = opener.open(&dir.join("a/missing")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(opener.open(&dir.join("gone/x")).is_err());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
