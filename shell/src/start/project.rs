//! Finding the project: the nearest ancestor of the working directory (itself included) that
//! holds `.git` or `.openmax`, else the directory itself, with symlinks resolved.
//!
//! Invariant: the returned path is absolute and canonical (no symlinks, no `..`), so the same
//! project always maps to the same state directory under `$OPENMAX_HOME`.

use std::io;
use std::path::{Path, PathBuf};

/// The project for `start` (the `--project` value or the working directory).
pub fn discover(start: &Path) -> io::Result<PathBuf> {
    let start = std::fs::canonicalize(start).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("project directory {}: {e}", start.display()),
        )
    })?;
    if !start.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("project {} is not a directory", start.display()),
        ));
    }
    let mut dir: &Path = &start;
    loop {
        if dir.join(".git").exists() || dir.join(".openmax").exists() {
            return Ok(dir.to_path_buf());
        }
        match dir.parent() {
            Some(parent) => dir = parent,
            None => return Ok(start),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_marker_wins_and_fallback_is_the_dir() {
        let base = crate::scratch::path("project");
        let deep = base.join("repo/a/b");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(base.join("repo/.git")).unwrap();
        let base = std::fs::canonicalize(&base).unwrap();
        assert_eq!(discover(&deep).unwrap(), base.join("repo"));
        std::fs::create_dir_all(base.join("repo/a/.openmax")).unwrap();
        assert_eq!(discover(&deep).unwrap(), base.join("repo/a"));
        #[cfg(unix)]
        {
            let link = base.join("link");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(base.join("repo/a/b"), &link).unwrap();
            assert_eq!(discover(&link).unwrap(), base.join("repo/a"));
        }
        std::fs::remove_dir_all(&base).unwrap();
    }
}
