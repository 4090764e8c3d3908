//! The entries of the project that nothing the agent runs may change although they lie in the
//! writable project: code the human's own tools run later. By default that is git's
//! configuration, hooks and info directory (`core.fsmonitor`, `core.hooksPath`, a
//! `pre-commit` hook all run at the human's next `git status` or `git commit`, outside any
//! sandbox) and its `commondir` (which, once it exists, makes git read its configuration and
//! hooks from the directory it names). The sandbox's view holds them read-only for agent
//! processes (`super::helper::view`), a file entry that does not exist when a command starts is
//! removed as soon as the command makes it (`super::helper::guard`, [`absent`]), and
//! `write_file` / `edit_file` refuse them ([`refuses`]).
//!
//! Invariants:
//! - Entries are paths relative to the project root; one ending in `/` names a directory.
//!   Entries under `.git/` apply to the project's git directory and to every git directory git
//!   keeps inside it (`.git/modules/**` for submodules, `.git/worktrees/*`).
//! - A `.git` that is a file (the pointer of a worktree or a submodule) is held itself:
//!   rewriting it would point the human's git at a directory the agent wrote.
//! - A `.git` directory is pinned (made a mount point of its own), so it can be neither renamed
//!   nor removed and replaced by one the agent wrote.
//! - [`ensure`] creates the directory entries that are missing in an existing git directory
//!   (git creates them itself on `init`): what does not exist could be created by the agent.
//! - An entry reached through a symlink among its directories is held where it really lies,
//!   which is where the human's tools reach it; one that lies outside the project is not the
//!   project's entry (the view shows it as it shows the rest of the host). A symlink at an
//!   entry's own name is not held (the view's mounts never follow one; docs/security.md says
//!   what that leaves), and the file tools still refuse the entry's name.
//! - The list comes from the user config only (`[sandbox] protected`); [`DEFAULT`] otherwise.

use std::path::{Component, Path, PathBuf};

/// What is held when the user config does not say: git's configuration (both files it reads
/// from a repository, and `commondir`, which redirects it), its hooks, and its info directory
/// (`attributes`, `exclude`).
pub const DEFAULT: [&str; 5] = [
    ".git/config",
    ".git/config.worktree",
    ".git/commondir",
    ".git/hooks/",
    ".git/info/",
];

/// The entries [`DEFAULT`] names, as owned strings.
pub fn default_entries() -> Vec<String> {
    DEFAULT.iter().map(|s| s.to_string()).collect()
}

/// Check one `[sandbox] protected` entry: relative, without `..`, not empty.
pub fn check_entry(entry: &str) -> Result<(), String> {
    let p = Path::new(entry.trim_end_matches('/'));
    if entry.trim_end_matches('/').is_empty()
        || p.is_absolute()
        || p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "[sandbox] protected: {entry:?} must be a path relative to the project root, \
             without \"..\""
        ));
    }
    Ok(())
}

/// What the sandbox holds in `project` right now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// Directories made mount points of their own (writable), so they cannot be renamed or
    /// replaced: the project's `.git` directory.
    pub pinned: Vec<PathBuf>,
    /// Files and directories held read-only, each existing now.
    pub read_only: Vec<PathBuf>,
}

/// The git directories `entries` under `.git/` apply to: `<project>/.git` when it is a
/// directory, and the git directories of submodules and worktrees inside it.
fn git_dirs(project: &Path) -> Vec<PathBuf> {
    let top = project.join(".git");
    if !top.is_dir() || top.is_symlink() {
        return Vec::new();
    }
    let mut dirs = vec![top.clone()];
    if let Ok(rd) = std::fs::read_dir(top.join("worktrees")) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(e.path());
            }
        }
    }
    // Submodules nest: modules/<name>/modules/<name>/… (bounded, as git's own nesting is).
    let mut stack = vec![(top.join("modules"), 0u32)];
    while let Some((dir, depth)) = stack.pop() {
        if depth > 8 {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let p = e.path();
            if p.join("HEAD").is_file() {
                dirs.push(p.clone());
                stack.push((p.join("modules"), depth + 1));
            } else {
                // A submodule named with a slash: modules/a/b.
                stack.push((p, depth + 1));
            }
        }
    }
    dirs
}

/// Each entry's paths in `project`, whether they exist or not: `.git/…` entries once per git
/// directory (the project's own `.git` even when it does not exist yet), others once. Each is
/// where it really lies ([`real`]); one that lies outside the project is not the project's.
fn candidates(project: &Path, entries: &[String], existing_git_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let own = project.join(".git");
    let mut out = Vec::new();
    for entry in entries {
        let rel = entry.trim_end_matches('/');
        match rel.strip_prefix(".git/") {
            Some(inner) => {
                out.push(own.join(inner));
                for d in existing_git_dirs.iter().filter(|d| **d != own) {
                    out.push(d.join(inner));
                }
            }
            None => out.push(project.join(rel)),
        }
    }
    let root = project.canonicalize().ok();
    out.into_iter()
        .filter_map(|p| real(project, root.as_deref(), &p))
        .collect()
}

/// `path` (in `project`) with every symlink among the directories it passes through followed,
/// its last component as it is: where the human's tools reach the entry, so the view holds
/// that (its mounts never follow a symlink) and the file tools, which resolve what they
/// write, refuse it. `None` when it lies outside the project (`root`, the project resolved; as
/// written when it cannot be). The part that does not exist is kept as written.
fn real(project: &Path, root: Option<&Path>, path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?;
    let mut dir = path.parent()?;
    let mut missing = Vec::new();
    let mut out = loop {
        if let Ok(d) = dir.canonicalize() {
            break d;
        }
        missing.push(dir.file_name()?);
        dir = dir.parent()?;
    };
    out.extend(missing.iter().rev());
    out.push(name);
    let Some(root) = root else {
        return Some(path.to_path_buf());
    };
    Some(project.join(out.strip_prefix(root).ok()?))
}

/// Create the directory entries (those ending in `/`) missing in the project's existing git
/// directories, so that the agent cannot create them. Files are not created.
pub fn ensure(project: &Path, entries: &[String]) {
    let dirs = git_dirs(project);
    if dirs.is_empty() {
        return;
    }
    for entry in entries.iter().filter(|e| e.ends_with('/')) {
        let Some(inner) = entry.trim_end_matches('/').strip_prefix(".git/") else {
            continue;
        };
        // A worktree's own directory has no hooks or info of its own (git reads the common
        // directory's), so nothing is created there.
        let worktree =
            |d: &&PathBuf| d.parent().and_then(Path::file_name) == Some("worktrees".as_ref());
        for d in dirs.iter().filter(|d| !worktree(d)) {
            let p = d.join(inner);
            if std::fs::symlink_metadata(&p).is_err() {
                let _ = std::fs::create_dir(&p);
            }
        }
    }
}

/// What the sandbox's view holds in `project` for `entries`, from what exists now.
pub fn held(project: &Path, entries: &[String]) -> Held {
    let mut held = Held::default();
    let top = project.join(".git");
    if let Ok(meta) = std::fs::symlink_metadata(&top) {
        if meta.is_file() {
            held.read_only.push(top.clone());
        } else if meta.is_dir() {
            held.pinned.push(top.clone());
        }
    }
    let dirs = git_dirs(project);
    for p in candidates(project, entries, &dirs) {
        // Only what exists can be held; a symlink is not followed out of the project.
        match std::fs::symlink_metadata(&p) {
            Ok(m) if !m.file_type().is_symlink() => held.read_only.push(p),
            _ => {}
        }
    }
    held.read_only.sort();
    held.read_only.dedup();
    held
}

/// The file entries (not ending in `/`) of the project's existing git directories that do not
/// exist now: what a command may not create.
pub fn absent(project: &Path, entries: &[String]) -> Vec<PathBuf> {
    let dirs = git_dirs(project);
    if dirs.is_empty() {
        return Vec::new();
    }
    let files: Vec<String> = entries
        .iter()
        .filter(|e| !e.ends_with('/'))
        .cloned()
        .collect();
    let mut out: Vec<PathBuf> = candidates(project, &files, &dirs)
        .into_iter()
        .filter(|p| p.parent().is_some_and(Path::is_dir))
        .filter(|p| std::fs::symlink_metadata(p).is_err())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether a file tool must refuse to write `path` (absolute, resolved inside `project`): the
/// project's `.git` itself, or a path at or beneath an entry (existing or not).
pub fn refuses(project: &Path, entries: &[String], path: &Path) -> bool {
    if path == project.join(".git") {
        return true;
    }
    let dirs = git_dirs(project);
    candidates(project, entries, &dirs)
        .iter()
        .any(|c| path.starts_with(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = crate::scratch::path(&format!("protect-{name}"));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn git_config_hooks_and_info_are_held_in_every_git_directory() {
        let p = scratch("held");
        std::fs::create_dir_all(p.join(".git/hooks")).unwrap();
        std::fs::write(p.join(".git/config"), "").unwrap();
        std::fs::create_dir_all(p.join(".git/modules/sub/hooks")).unwrap();
        std::fs::write(p.join(".git/modules/sub/HEAD"), "ref: x\n").unwrap();
        std::fs::write(p.join(".git/modules/sub/config"), "").unwrap();
        let entries = default_entries();
        ensure(&p, &entries);
        assert!(p.join(".git/info").is_dir(), "the missing info/ is created");
        assert!(
            !p.join(".git/config.worktree").exists(),
            "files are not created"
        );
        let h = held(&p, &entries);
        assert_eq!(h.pinned, vec![p.join(".git")]);
        assert_eq!(
            h.read_only,
            vec![
                p.join(".git/config"),
                p.join(".git/hooks"),
                p.join(".git/info"),
                p.join(".git/modules/sub/config"),
                p.join(".git/modules/sub/hooks"),
                p.join(".git/modules/sub/info"),
            ]
        );
        // What does not exist yet may not be created: the redirection and the second config.
        assert_eq!(
            absent(&p, &entries),
            vec![
                p.join(".git/commondir"),
                p.join(".git/config.worktree"),
                p.join(".git/modules/sub/commondir"),
                p.join(".git/modules/sub/config.worktree"),
            ]
        );
        assert!(refuses(&p, &entries, &p.join(".git/commondir")));
        assert!(refuses(&p, &entries, &p.join(".git/hooks/pre-commit")));
        assert!(refuses(&p, &entries, &p.join(".git/config")));
        assert!(refuses(&p, &entries, &p.join(".git/modules/sub/config")));
        assert!(refuses(&p, &entries, &p.join(".git")));
        assert!(!refuses(&p, &entries, &p.join(".git/HEAD")));
        assert!(!refuses(&p, &entries, &p.join("src/main.rs")));
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn an_entry_through_a_symlinked_directory_is_held_and_refused_where_it_really_lies() {
        let p = scratch("through");
        std::fs::create_dir_all(p.join("real")).unwrap();
        std::fs::write(p.join("real/x.toml"), "").unwrap();
        std::os::unix::fs::symlink("real", p.join("conf")).unwrap();
        let away = scratch("through-away");
        std::fs::write(away.join("y.toml"), "").unwrap();
        std::os::unix::fs::symlink(&away, p.join("away")).unwrap();
        let entries: Vec<String> = ["conf/x.toml", "conf/new/z.toml", "away/y.toml"]
            .map(String::from)
            .to_vec();
        assert_eq!(held(&p, &entries).read_only, vec![p.join("real/x.toml")]);
        // The file tools pass the path they resolved.
        assert!(refuses(&p, &entries, &p.join("real/x.toml")));
        assert!(refuses(&p, &entries, &p.join("real/new/z.toml")));
        assert!(!refuses(&p, &entries, &p.join("real/other.toml")));
        assert!(!refuses(&p, &entries, &away.join("y.toml")));
        // A project named through a symlink: its entries are named as it is.
        let named = scratch("through-named").join("p");
        std::os::unix::fs::symlink(&p, &named).unwrap();
        assert_eq!(
            held(&named, &entries).read_only,
            vec![named.join("real/x.toml")]
        );
        for d in [&p, &away, &named.parent().unwrap().to_path_buf()] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn a_symlink_at_an_entrys_own_name_is_not_held_and_is_still_refused_to_the_file_tools() {
        let p = scratch("link-at");
        let away = scratch("link-at-away");
        std::fs::create_dir_all(p.join(".git/info")).unwrap();
        std::fs::write(p.join("cfg"), "").unwrap();
        std::os::unix::fs::symlink("../cfg", p.join(".git/config")).unwrap();
        std::os::unix::fs::symlink(&away, p.join(".git/hooks")).unwrap();
        let entries = default_entries();
        // The view's mounts never follow a symlink: only the real directory is held.
        assert_eq!(held(&p, &entries).read_only, vec![p.join(".git/info")]);
        assert!(refuses(&p, &entries, &p.join(".git/config")));
        assert!(refuses(&p, &entries, &p.join(".git/hooks/pre-commit")));
        std::fs::remove_dir_all(&p).unwrap();
        std::fs::remove_dir_all(&away).unwrap();
    }

    #[test]
    fn a_git_file_is_held_and_a_missing_repository_is_still_refused_to_the_file_tools() {
        let p = scratch("gitfile");
        std::fs::write(p.join(".git"), "gitdir: /elsewhere\n").unwrap();
        let h = held(&p, &default_entries());
        assert_eq!(h.read_only, vec![p.join(".git")]);
        assert!(h.pinned.is_empty());
        let q = scratch("norepo");
        assert_eq!(held(&q, &default_entries()), Held::default());
        assert!(refuses(&q, &default_entries(), &q.join(".git/hooks/x")));
        assert!(refuses(&q, &default_entries(), &q.join(".git")));
        std::fs::remove_dir_all(&p).unwrap();
        std::fs::remove_dir_all(&q).unwrap();
    }

    #[test]
    fn worktrees_and_nested_submodules_are_git_directories_to_a_bounded_depth() {
        let p = scratch("nested");
        std::fs::create_dir_all(p.join(".git/worktrees/wt")).unwrap();
        // A submodule named with a slash (modules/lib/core), and a chain nested 12 deep.
        std::fs::create_dir_all(p.join(".git/modules/lib/core")).unwrap();
        std::fs::write(p.join(".git/modules/lib/core/HEAD"), "ref: x\n").unwrap();
        let mut chain = p.join(".git");
        let mut expected = vec![p.join(".git"), p.join(".git/worktrees/wt")];
        for i in 0..12 {
            chain = chain.join("modules").join(format!("m{i}"));
            std::fs::create_dir_all(&chain).unwrap();
            std::fs::write(chain.join("HEAD"), "ref: x\n").unwrap();
            // The walk reads nine levels of modules/ (git's own nesting is bounded too).
            if i <= 8 {
                expected.push(chain.clone());
            }
        }
        expected.push(p.join(".git/modules/lib/core"));
        // A name with slashes (modules/s0/s1/…) spends a level per directory as well: a
        // git directory beside each of them is found down to the same bound.
        let mut named = p.join(".git/modules/s0");
        for i in 0..12 {
            let git = named.join("g");
            std::fs::create_dir_all(&git).unwrap();
            std::fs::write(git.join("HEAD"), "ref: x\n").unwrap();
            if i <= 7 {
                expected.push(git);
            }
            named = named.join(format!("s{}", i + 1));
        }
        let mut got = git_dirs(&p);
        got.sort();
        expected.sort();
        assert_eq!(got, expected);
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn entries_must_be_relative() {
        for bad in ["/etc/passwd", "../x", "a/../../b", "", "/"] {
            assert!(check_entry(bad).is_err(), "{bad:?}");
        }
        for good in [".git/config", ".envrc", "scripts/", "./Makefile"] {
            assert!(check_entry(good).is_ok(), "{good:?}");
        }
        let p = scratch("custom");
        std::fs::write(p.join(".envrc"), "").unwrap();
        let h = held(&p, &[".envrc".to_string(), "missing".to_string()]);
        assert_eq!(h.read_only, vec![p.join(".envrc")]);
        std::fs::remove_dir_all(&p).unwrap();
    }
}
