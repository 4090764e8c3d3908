//! What a checkpoint notes of the project's git repository, which it never records nor
//! restores: `HEAD` as written and the commit it resolves to, read from the files (no `git`
//! process). Undo compares them to say that `HEAD` moved during a turn and leaves `.git`
//! alone.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `HEAD` of the project's repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// `HEAD` as written: `ref: refs/heads/main`, or a commit id when detached.
    pub head: String,
    /// The commit it resolves to (`None`: an unborn branch, or a ref that could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl Head {
    /// `main at 1a2b3c4d5e6f`, or `detached at …`.
    pub fn describe(&self) -> String {
        let short = |c: &str| c.chars().take(12).collect::<String>();
        let at = self
            .commit
            .as_deref()
            .map(short)
            .unwrap_or_else(|| "no commit".into());
        match self.head.strip_prefix("ref: ") {
            Some(r) => format!("{} at {at}", r.strip_prefix("refs/heads/").unwrap_or(r)),
            None => format!("detached at {at}"),
        }
    }
}

/// The git directory of `project`: `.git`, or where a `.git` file (`gitdir: …`) points.
fn git_dir(project: &Path) -> Option<PathBuf> {
    let dot = project.join(".git");
    let meta = std::fs::symlink_metadata(&dot).ok()?;
    if meta.is_dir() {
        return Some(dot);
    }
    let text = std::fs::read_to_string(&dot).ok()?;
    let to = text.trim().strip_prefix("gitdir:")?.trim();
    let p = Path::new(to);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        project.join(p)
    })
}

/// The repository's `HEAD`, or `None` when the project has none (or it cannot be read).
pub fn head(project: &Path) -> Option<Head> {
    let dir = git_dir(project)?;
    let head = std::fs::read_to_string(dir.join("HEAD"))
        .ok()?
        .trim()
        .to_string();
    if head.is_empty() {
        return None;
    }
    let commit = match head.strip_prefix("ref: ") {
        Some(r) => resolve(&dir, r.trim()),
        None => Some(head.clone()),
    };
    Some(Head { head, commit })
}

/// The commit of `name` (`refs/heads/main`): its loose file, else `packed-refs`, in the git
/// directory or the common one it names (a worktree).
fn resolve(dir: &Path, name: &str) -> Option<String> {
    if name.contains("..") {
        return None;
    }
    let common = std::fs::read_to_string(dir.join("commondir"))
        .ok()
        .map(|c| dir.join(c.trim()));
    for d in std::iter::once(dir.to_path_buf()).chain(common) {
        if let Ok(text) = std::fs::read_to_string(d.join(name)) {
            let t = text.trim();
            if let Some(r) = t.strip_prefix("ref: ") {
                return resolve(dir, r.trim());
            }
            return Some(t.to_string());
        }
        if let Ok(packed) = std::fs::read_to_string(d.join("packed-refs")) {
            for line in packed.lines() {
                if let Some((id, r)) = line.split_once(' ') {
                    if r == name {
                        return Some(id.to_string());
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_loose_packed_detached_and_none() {
        let p = crate::scratch::path("git");
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join(".git/refs/heads")).unwrap();
        assert_eq!(head(&p), None);
        std::fs::write(p.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(
            head(&p),
            Some(Head {
                head: "ref: refs/heads/main".into(),
                commit: None
            })
        );
        std::fs::write(p.join(".git/packed-refs"), "# pack\nabc refs/heads/main\n").unwrap();
        assert_eq!(head(&p).unwrap().commit.as_deref(), Some("abc"));
        std::fs::write(p.join(".git/refs/heads/main"), "def\n").unwrap();
        let h = head(&p).unwrap();
        assert_eq!(h.commit.as_deref(), Some("def"));
        assert_eq!(h.describe(), "main at def");
        std::fs::write(p.join(".git/HEAD"), "0123456789abcdef\n").unwrap();
        assert_eq!(head(&p).unwrap().describe(), "detached at 0123456789ab");
        let _ = std::fs::remove_dir_all(&p);
    }
}
