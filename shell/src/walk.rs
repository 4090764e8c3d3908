//! The directory walker shared by `list_dir`, `glob`, `grep` and the checkpoint scan, and the
//! glob filter of `glob` and `grep`.
//!
//! Invariants: walks use the `ignore` crate the way ripgrep does — `.gitignore` (also outside a
//! git repository: `require_git(false)`), `.ignore`, `.git/info/exclude`, the global git
//! excludes, ignore files of parent directories — and skip hidden entries unless asked;
//! `.git` directories are never entered; symlinks are not followed (so a walk never leaves the
//! project). A glob without `/` matches the file name at any depth (like `rg -g`); a glob with
//! `/` matches the path relative to the walk's base.

use std::path::Path;
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
}
