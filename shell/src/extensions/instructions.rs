//! The instruction files the system prompt carries, in order: the user's
//! `$OPENMAX_HOME/AGENTS.md`, then one file per directory from the project root down to the
//! working directory (root first): its `AGENTS.md`, or its `CLAUDE.md` where that directory has
//! no `AGENTS.md` (so a project set up for Claude Code needs no change).
//!
//! Invariants: only directories between the project root and the working directory are
//! looked at (nothing above the root, no siblings); at most one file per directory; the
//! order is the order the model reads them, general before specific.

use std::path::{Path, PathBuf};

/// The file names read in each directory, the first present wins.
pub const NAMES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// One instruction file to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstructionFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its key in the freeze snapshot: project-relative, or absolute for the user's file.
    pub key: String,
    /// Its name in a refreeze receipt (`project AGENTS.md`, `CLAUDE.md in src`).
    pub name: String,
    /// The heading it gets in the prompt.
    pub heading: String,
}

/// The instruction files that exist now, in prompt order. `cwd` is the working directory; one
/// outside `project` counts as the project root.
pub fn files(home: &Path, project: &Path, cwd: &Path) -> Vec<InstructionFile> {
    let mut out = Vec::new();
    let user = home.join("AGENTS.md");
    if user.is_file() {
        out.push(InstructionFile {
            key: user.to_string_lossy().into_owned(),
            path: user,
            name: "user AGENTS.md".into(),
            heading: format!("User instructions ({})", crate::session::shown("AGENTS.md")),
        });
    }
    let rel = cwd.strip_prefix(project).unwrap_or(Path::new(""));
    let mut dir = project.to_path_buf();
    let mut levels = vec![(dir.clone(), String::new())];
    for part in rel.components() {
        dir.push(part);
        levels.push((
            dir.clone(),
            dir.strip_prefix(project)
                .map(|r| r.display().to_string())
                .unwrap_or_default(),
        ));
    }
    for (dir, rel_dir) in levels {
        let Some(file) = NAMES.iter().find(|n| dir.join(n).is_file()) else {
            continue;
        };
        let key = if rel_dir.is_empty() {
            file.to_string()
        } else {
            format!("{rel_dir}/{file}")
        };
        let (name, heading) = if rel_dir.is_empty() {
            (
                format!("project {file}"),
                format!("Project instructions ({file})"),
            )
        } else {
            (
                format!("{file} in {rel_dir}"),
                format!("Instructions for {rel_dir} ({key})"),
            )
        };
        out.push(InstructionFile {
            path: dir.join(file),
            key,
            name,
            heading,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_to_working_dir_agents_before_claude() {
        let root = crate::scratch::path("instr");
        let _ = std::fs::remove_dir_all(&root);
        let home = root.join("home");
        let p = root.join("p");
        for d in ["home", "p/a/b/c", "p/x"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "home/AGENTS.md",
            "p/CLAUDE.md",
            "p/a/AGENTS.md",
            "p/a/CLAUDE.md",
            "p/a/b/CLAUDE.md",
            "p/x/AGENTS.md",
        ] {
            std::fs::write(root.join(f), f).unwrap();
        }
        let keys: Vec<String> = files(&home, &p, &p.join("a/b/c"))
            .into_iter()
            .map(|f| f.key)
            .collect();
        assert_eq!(
            keys,
            vec![
                home.join("AGENTS.md").to_string_lossy().into_owned(),
                "CLAUDE.md".to_string(),
                "a/AGENTS.md".to_string(),
                "a/b/CLAUDE.md".to_string(),
            ]
        );
        let at_root = files(&home, &p, &p);
        assert_eq!(at_root.len(), 2);
        assert_eq!(at_root[1].heading, "Project instructions (CLAUDE.md)");
        let outside = files(&home, &p, Path::new("/elsewhere"));
        assert_eq!(outside.len(), 2);
        let deep = files(&home, &p, &p.join("a"));
        assert_eq!(deep[2].heading, "Instructions for a (a/AGENTS.md)");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
