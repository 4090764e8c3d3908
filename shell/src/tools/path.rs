//! Path confinement: every path argument of a built-in tool is resolved against the project
//! and must stay inside it.
//!
//! Invariants:
//! - A `..` component in the argument is refused outright (even when it would land inside).
//! - Symlinks are followed component by component (like `realpath -m`: the missing tail of a
//!   path is appended as is), so a symlink — even a dangling one — that points outside the
//!   project is an escape. At most [`MAX_SYMLINK_HOPS`] links are followed.
//! - [`Resolved::abs`] is the fully resolved absolute path and is what tools operate on;
//!   it always `starts_with` the canonical project root.
//! - Nothing here reads file contents; only metadata and link targets.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// How many symlinks one resolution follows before giving up (Linux's own limit).
pub const MAX_SYMLINK_HOPS: usize = 40;

/// A path argument resolved inside the project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Fully resolved absolute path (symlinks followed); inside the project.
    pub abs: PathBuf,
    /// The argument as the model wrote it, made project-relative (`.` for the root), with `/`.
    pub rel: String,
    /// [`Resolved::abs`] relative to the project (differs from `rel` when a symlink was
    /// followed).
    pub resolved_rel: String,
}

impl Resolved {
    /// The permission-rule targets: the written path, and the resolved one when it differs.
    pub fn targets(&self) -> Vec<String> {
        let mut out = vec![self.rel.clone()];
        if self.resolved_rel != self.rel {
            out.push(self.resolved_rel.clone());
        }
        out
    }
}

/// Resolve `arg` against `project` (which must be canonical). Errors are the failed call's
/// message, e.g. `path escapes the project: ../x`.
pub fn resolve(project: &Path, arg: &str) -> Result<Resolved, String> {
    if arg.contains('\0') {
        return Err(format!("invalid path (contains a NUL byte): {arg:?}"));
    }
    let written = Path::new(arg);
    if written
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(format!(
            "path escapes the project: {arg} (`..` components are not allowed; \
             use a path inside the project, relative to its root)"
        ));
    }
    let joined = if written.is_absolute() {
        written.to_path_buf()
    } else {
        project.join(written)
    };
    let lexical_rel = lexical(&joined).strip_prefix(project).ok().map(rel_string);
    let abs = resolve_lenient(&joined)
        .map_err(|e| format!("cannot resolve path {arg}: {}", io_reason(&e)))?;
    let resolved_rel = match abs.strip_prefix(project) {
        Ok(rel) => rel_string(rel),
        Err(_) if lexical_rel.is_none() => {
            return Err(format!(
                "path escapes the project: {arg} (absolute paths must be inside the project {})",
                project.display()
            ))
        }
        Err(_) => {
            return Err(format!(
            "path escapes the project: {arg} (a symlink resolves it to {}, outside the project)",
            abs.display()
        ))
        }
    };
    // An absolute path spelled through a symlinked prefix of the project: show it resolved.
    let lexical_rel = lexical_rel.unwrap_or_else(|| resolved_rel.clone());
    Ok(Resolved {
        abs,
        rel: lexical_rel,
        resolved_rel,
    })
}

/// Make `abs` (a path found by a walk under the project) project-relative for display.
pub fn display_rel(project: &Path, abs: &Path) -> String {
    match abs.strip_prefix(project) {
        Ok(rel) => rel_string(rel),
        Err(_) => abs.display().to_string(),
    }
}

/// A short reason for an I/O error, without the "(os error N)" noise.
pub fn io_reason(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "not found".to_string(),
        io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        io::ErrorKind::IsADirectory => "is a directory".to_string(),
        io::ErrorKind::NotADirectory => "a parent is not a directory".to_string(),
        _ => {
            let s = e.to_string();
            match s.find(" (os error") {
                Some(i) => s[..i].to_string(),
                None => s,
            }
        }
    }
}

fn rel_string(rel: &Path) -> String {
    let s = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/");
    if s.is_empty() {
        ".".to_string()
    } else {
        s
    }
}

/// Drop `.` components (no `..` can be present: callers refuse them first).
fn lexical(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// `realpath -m`: follow every symlink along an absolute path; components that do not exist
/// are appended as they are.
fn resolve_lenient(path: &Path) -> io::Result<PathBuf> {
    let mut pending: VecDeque<OsString> = VecDeque::new();
    let mut out = PathBuf::from("/");
    push_components(&mut pending, path, &mut out, true);
    let mut hops = 0usize;
    let mut missing = false;
    while let Some(name) = pending.pop_front() {
        match name.to_str() {
            Some("/") => {
                out = PathBuf::from("/");
                continue;
            }
            Some("..") => {
                out.pop();
                continue;
            }
            Some(".") => continue,
            _ => {}
        }
        let next = out.join(&name);
        if missing {
            out = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(io::Error::other("too many levels of symbolic links"));
                }
                let target = std::fs::read_link(&next)?;
                // The link's target replaces this component: prepend its parts.
                let mut front = VecDeque::new();
                let mut root_reset = PathBuf::new();
                push_components(&mut front, &target, &mut root_reset, false);
                while let Some(c) = front.pop_back() {
                    pending.push_front(c);
                }
            }
            Ok(_) => out = next,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing = true;
                out = next;
            }
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                missing = true;
                out = next;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Queue the components of `p`; a root becomes a `/` marker (or resets `out` when
/// `initial`).
fn push_components(q: &mut VecDeque<OsString>, p: &Path, out: &mut PathBuf, initial: bool) {
    for c in p.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => {
                if initial {
                    *out = PathBuf::from("/");
                } else {
                    q.push_back(OsString::from("/"));
                }
            }
            Component::CurDir => {}
            Component::ParentDir => q.push_back(OsString::from("..")),
            Component::Normal(n) => q.push_back(n.to_os_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = crate::scratch::path(&format!("path-{name}"));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir is writable");
        d.canonicalize().expect("just created")
    }

    #[test]
    fn inside_paths_resolve() {
        let p = tmp("inside");
        std::fs::create_dir_all(p.join("src")).unwrap();
        let r = resolve(&p, "src/./a.rs").unwrap();
        assert_eq!(r.rel, "src/a.rs");
        assert_eq!(r.abs, p.join("src/a.rs"));
        let r = resolve(&p, p.join("src/b/c.rs").to_str().unwrap()).unwrap();
        assert_eq!(r.rel, "src/b/c.rs");
        assert_eq!(resolve(&p, ".").unwrap().rel, ".");
        assert_eq!(resolve(&p, "").unwrap().rel, ".");
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn escapes_are_refused() {
        let p = tmp("escape");
        let e = resolve(&p, "../x").unwrap_err();
        assert!(e.starts_with("path escapes the project: ../x"), "{e}");
        let e = resolve(&p, "src/../../x").unwrap_err();
        assert!(e.starts_with("path escapes the project"), "{e}");
        let e = resolve(&p, "/etc/passwd").unwrap_err();
        assert!(
            e.starts_with("path escapes the project: /etc/passwd"),
            "{e}"
        );
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn symlinks_are_followed() {
        let p = tmp("symlink");
        let outside = tmp("symlink-outside");
        std::os::unix::fs::symlink(&outside, p.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.join("nope/x"), p.join("dangling")).unwrap();
        std::fs::create_dir(p.join("real")).unwrap();
        std::os::unix::fs::symlink("real", p.join("inlink")).unwrap();
        std::os::unix::fs::symlink("loop", p.join("loop")).unwrap();
        let e = resolve(&p, "out/secret").unwrap_err();
        assert!(e.contains("a symlink resolves it to"), "{e}");
        let e = resolve(&p, "dangling").unwrap_err();
        assert!(e.starts_with("path escapes the project: dangling"), "{e}");
        let r = resolve(&p, "inlink/f.txt").unwrap();
        assert_eq!(r.rel, "inlink/f.txt");
        assert_eq!(r.resolved_rel, "real/f.txt");
        assert_eq!(r.targets(), vec!["inlink/f.txt", "real/f.txt"]);
        let e = resolve(&p, "loop/x").unwrap_err();
        assert!(e.contains("too many levels"), "{e}");
        std::fs::remove_dir_all(&p).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }
}
