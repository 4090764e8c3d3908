//! Putting paths back on disk as a checkpoint recorded them: removals deepest first, then
//! directories, files and links shallowest first, then directory modes deepest first (so a
//! read-only directory is filled before it is made read-only). A file or link is written to a
//! temp name in its directory and renamed over the path, so a crash leaves the old one or the
//! new one; permission bits are set before the rename. Nothing outside the project is touched:
//! every step's parent is checked to be a real directory inside it (no symlink on the way).

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::store::{temp_name, Store};
use super::tree::Node;

/// One path the undo changes: from what it is now to what it becomes (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub path: String,
    pub now: Option<Node>,
    pub to: Option<Node>,
}

impl Step {
    /// `restored`, `recreated` or `removed`.
    pub fn verb(&self) -> &'static str {
        match (&self.now, &self.to) {
            (_, None) => "removed",
            (None, Some(_)) => "recreated",
            (Some(_), Some(_)) => "restored",
        }
    }
}

/// Apply `steps` under `root`; returns the paths that failed, with the error.
pub fn apply(root: &Path, store: &Store, steps: &[Step]) -> Vec<(String, String)> {
    let mut failed = Vec::new();
    // 1. What goes, or changes between directory and non-directory: deepest first.
    let mut order: Vec<&Step> = steps.iter().collect();
    order.sort_by(|a, b| b.path.cmp(&a.path));
    for s in &order {
        let swap = match (&s.now, &s.to) {
            (Some(n), Some(t)) => n.is_dir() != t.is_dir(),
            (Some(_), None) => true,
            _ => false,
        };
        if swap {
            if let Err(e) = remove(root, &s.path) {
                failed.push((s.path.clone(), e.to_string()));
            }
        }
    }
    // 2. What comes back: shallowest first.
    order.reverse();
    for s in &order {
        let Some(to) = &s.to else { continue };
        if failed.iter().any(|(p, _)| p == &s.path) {
            continue;
        }
        if let Err(e) = put(root, store, &s.path, to) {
            failed.push((s.path.clone(), e.to_string()));
        }
    }
    // 3. Directory modes: deepest first.
    order.reverse();
    for s in &order {
        if let Some(Node::Dir { mode }) = &s.to {
            let path = root.join(&s.path);
            if let Err(e) = fs::set_permissions(&path, fs::Permissions::from_mode(*mode)) {
                failed.push((s.path.clone(), e.to_string()));
            }
        }
    }
    failed
}

/// The parent directory of `rel` under `root`, checked to be a real directory reached without
/// a symbolic link (so a link planted on the way cannot send a write outside).
fn parent_dir(root: &Path, rel: &str) -> io::Result<std::path::PathBuf> {
    let mut at = root.to_path_buf();
    let parent = super::tree::parent(rel);
    if !parent.is_empty() {
        for part in parent.split('/') {
            at.push(part);
            let m = fs::symlink_metadata(&at)?;
            if !m.is_dir() {
                return Err(io::Error::other(format!(
                    "{} is not a directory",
                    at.strip_prefix(root).unwrap_or(&at).display()
                )));
            }
        }
    }
    Ok(at)
}

fn remove(root: &Path, rel: &str) -> io::Result<()> {
    let path = parent_dir(root, rel)?.join(name_of(rel));
    let meta = match fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta.is_dir() {
        match fs::remove_dir(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => Err(io::Error::other(
                "the directory holds files no checkpoint recorded, so it stays",
            )),
            Err(e) => Err(e),
        }
    } else {
        fs::remove_file(&path)
    }
}

fn name_of(rel: &str) -> &str {
    rel.rsplit('/').next().unwrap_or(rel)
}

fn put(root: &Path, store: &Store, rel: &str, to: &Node) -> io::Result<()> {
    let dir = parent_dir(root, rel)?;
    let path = dir.join(name_of(rel));
    match to {
        Node::Dir { .. } => match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => {
                fs::remove_file(&path)?;
                fs::create_dir(&path)
            }
            Err(_) => fs::create_dir(&path),
        },
        Node::File { hash, mode, .. } => {
            let bytes = store.get(hash)?;
            let tmp = temp_name(&dir);
            let r = (|| {
                fs::write(&tmp, &bytes)?;
                fs::set_permissions(&tmp, fs::Permissions::from_mode(*mode))?;
                fs::rename(&tmp, &path)
            })();
            if r.is_err() {
                let _ = fs::remove_file(&tmp);
            }
            r
        }
        Node::Link { target } => {
            let tmp = temp_name(&dir);
            let r = std::os::unix::fs::symlink(target, &tmp).and_then(|()| fs::rename(&tmp, &path));
            if r.is_err() {
                let _ = fs::remove_file(&tmp);
            }
            r
        }
        Node::Ignored { .. } => Err(io::Error::other(
            "excluded by the ignore rules: its contents were not recorded",
        )),
    }
}
