//! `"isolation": "worktree"`: a child that works in a git worktree of its own, on a new branch,
//! so that its edits land only there.
//!
//! - Where: `<git common dir>/openmax-worktrees/<slug>-<hex>`, on the branch
//!   `openmax/<slug>-<hex>` made from the project's `HEAD`. Inside the repository's own git
//!   directory, because the child's sandbox makes its project (the worktree) writable and
//!   nothing else: a worktree inside `$OPENMAX_HOME` is refused by the sandbox (the home is never
//!   writable), one inside the project's tree would be seen by the parent's file tools and its
//!   checkpoints, and git keeps its own worktree records in the same directory.
//! - The child's project is the worktree (the same subdirectory of it when the parent's
//!   project is a subdirectory of the repository); it is trusted, and in the saved mode of the
//!   parent's project, because openmax (not the agent) made it from a trusted project.
//! - Git inside the child's sandbox reads (`status`, `diff`, `log`): the worktree's records and
//!   objects lie in the main git directory, which the sandbox shows read-only. It cannot commit
//!   (that writes the main object store and refs, which would also let it move any branch), so
//!   the parent commits what the child left, once its call ends, as one commit on the branch
//!   (`openmax task: <description>`), with the human's git hooks off (they would run on the
//!   agent's content outside any sandbox).
//! - A worktree with no changes (nothing left uncommitted, the branch still at its base) is
//!   removed with its branch; one with changes stays for the human, and the result names the
//!   branch, the path and `git diff --stat` against the base.
//! - Not a git repository, or a repository with no commit yet: a clear tool error, nothing is
//!   started.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A worktree made for one call.
#[derive(Debug, Clone)]
pub struct Worktree {
    /// The repository's main working tree (where `git worktree` is run).
    pub repo: PathBuf,
    /// The worktree's root.
    pub path: PathBuf,
    /// The child's project: `path` plus the parent project's place in the repository.
    pub project: PathBuf,
    pub branch: String,
    /// The commit it started from.
    pub base: String,
}

/// Run git in `dir`; its trimmed stdout, or an error with its stderr.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| format!("could not run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
    } else {
        Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A branch-safe slug of the description (at most 40 characters).
fn slug(description: &str) -> String {
    let mut s = String::new();
    for c in description.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') && !s.is_empty() {
            s.push('-');
        }
        if s.len() >= 40 {
            break;
        }
    }
    let s = s.trim_end_matches('-').to_string();
    if s.is_empty() {
        "task".into()
    } else {
        s
    }
}

/// Six hex digits that differ between calls of one process and between processes.
fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mix = nanos ^ (u64::from(std::process::id()) << 20) ^ N.fetch_add(1, Ordering::Relaxed);
    let h = crate::digest::sha256_hex(&mix.to_le_bytes());
    h[..6].to_string()
}

/// Make the worktree for a call described as `description` in `project`.
pub fn create(project: &Path, description: &str) -> Result<Worktree, String> {
    let not_repo = |e: String| {
        format!(
            "task: isolation \"worktree\" needs a git repository, and {} is not in one ({e})",
            project.display()
        )
    };
    let repo = PathBuf::from(git(project, &["rev-parse", "--show-toplevel"]).map_err(not_repo)?);
    let prefix = git(project, &["rev-parse", "--show-prefix"]).unwrap_or_default();
    let base = git(project, &["rev-parse", "--verify", "HEAD^{commit}"]).map_err(|_| {
        format!(
            "task: isolation \"worktree\" needs a commit to branch from, and the repository at \
             {} has none yet",
            repo.display()
        )
    })?;
    let common = git(
        project,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .map_err(not_repo)?;
    let name = format!("{}-{}", slug(description), unique());
    let branch = format!("openmax/{name}");
    let path = PathBuf::from(common).join("openmax-worktrees").join(&name);
    let path_s = path.to_string_lossy().into_owned();
    git(
        &repo,
        &["worktree", "add", "--quiet", "-b", &branch, &path_s, &base],
    )
    .map_err(|e| format!("task: could not make a worktree: {e}"))?;
    let project = path.join(prefix.trim_end_matches('/'));
    Ok(Worktree {
        repo,
        path,
        project,
        branch,
        base,
    })
}

impl Worktree {
    /// End of the call: commit what the child left on the branch, then the lines of the
    /// result (branch, path, diff stat; or that it was removed).
    pub fn finish(&self, description: &str) -> String {
        match self.settle(description) {
            Ok(lines) => lines,
            Err(e) => format!(
                "worktree: branch {} at {} (could not settle it: {e})",
                self.branch,
                self.path.display()
            ),
        }
    }

    fn settle(&self, description: &str) -> Result<String, String> {
        let dirty = !git(
            &self.path,
            &["status", "--porcelain", "--untracked-files=all"],
        )?
        .is_empty();
        if dirty {
            git(&self.path, &["add", "--all"])?;
            let mut args: Vec<String> = vec!["-c".into(), "core.hooksPath=/dev/null".into()];
            if git(&self.path, &["config", "user.email"]).is_err() {
                args.extend(
                    [
                        "-c",
                        "user.name=openmax",
                        "-c",
                        "user.email=openmax@localhost",
                    ]
                    .map(String::from),
                );
            }
            args.extend(
                [
                    "commit",
                    "--quiet",
                    "--no-verify",
                    "-m",
                    &format!("openmax task: {description}"),
                ]
                .map(String::from),
            );
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            git(&self.path, &args)?;
        }
        let head = git(&self.path, &["rev-parse", "HEAD"])?;
        if head == self.base {
            let path = self.path.to_string_lossy().into_owned();
            git(&self.repo, &["worktree", "remove", "--force", &path])?;
            git(&self.repo, &["branch", "-D", &self.branch])?;
            return Ok(format!(
                "worktree: no changes; the worktree and its branch {} were removed",
                self.branch
            ));
        }
        let stat = git(&self.repo, &["diff", "--stat", &self.base, &head])?;
        Ok(format!(
            "worktree: branch {} at {}{}\n{stat}",
            self.branch,
            self.path.display(),
            if dirty {
                " (openmax committed the subagent's changes on it)"
            } else {
                ""
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_branch_safe() {
        assert_eq!(
            slug("Fix the parser: tabs & spaces!"),
            "fix-the-parser-tabs-spaces"
        );
        assert_eq!(slug("???"), "task");
        assert!(slug(&"x".repeat(99)).len() <= 40);
        assert_ne!(unique(), unique());
    }
}
