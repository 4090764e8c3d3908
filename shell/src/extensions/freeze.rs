//! The freeze: what the model sees for a session (system prompt, tool schemas, skills), read once
//! with the sha256 of every file behind it, and the receipt of a refreeze (`reload`): what
//! changed, in which file, and who changed it.
//!
//! Attribution: a changed or added file is `agent` when its current bytes are exactly what this
//! session's own `write_file`/`edit_file` last wrote there (the runtime records those writes),
//! else `outside`. A removed file is always `outside` (the built-in tools cannot delete).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use openmax_core::conversation::ToolSchema;
use openmax_core::machine::Freeze;
use openmax_core::tool::TASK_TOOL;
use openmax_core::wire::event::FreezeChange;

use super::agents::{self, Agent};
use super::environment::Environment;
use super::instructions;
use super::manifest::{self, ExternalTool};
use super::skills::{self, Skill};
use crate::digest::sha256_hex;

/// What a freeze reads.
pub struct FreezeInputs<'a> {
    pub project: &'a Path,
    /// `$OPENMAX_HOME` (for its AGENTS.md).
    pub home: &'a Path,
    /// The working directory (instruction files are read from the root down to it).
    pub cwd: &'a Path,
    /// The prompt's environment section: project, working directory, OS, today's date (the
    /// caller reads the clock, so a freeze is a function of its inputs and the files).
    pub environment: &'a Environment,
    pub builtin_prompt: &'a str,
    pub builtin_tools: Vec<ToolSchema>,
    pub is_builtin: &'a dyn Fn(&str) -> bool,
}

/// One file behind the freeze.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `tool`, `skill` or `prompt`.
    pub kind: &'static str,
    pub name: String,
    pub sha256: String,
}

/// Every file behind a freeze, by path (project-relative, or absolute for files outside it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub files: BTreeMap<String, Entry>,
}

/// A freeze and what the shell needs to run it.
#[derive(Debug, Clone)]
pub struct Frozen {
    /// What the core is given.
    pub freeze: Freeze,
    pub snapshot: Snapshot,
    pub external: Vec<ExternalTool>,
    pub skills: Vec<Skill>,
    /// Named agents (the `task` tool's `agent` argument).
    pub agents: Vec<Agent>,
    /// Broken manifests and skills, for stderr (also in `freeze.notes` for the model).
    pub problems: Vec<String>,
}

/// Read everything now.
pub fn freeze(inputs: &FreezeInputs<'_>) -> Frozen {
    let project = inputs.project;
    let mut snapshot = Snapshot::default();
    let mut system = inputs.builtin_prompt.trim_end().to_string();

    system.push_str("\n\n");
    system.push_str(&inputs.environment.section());
    for file in instructions::files(inputs.home, project, inputs.cwd) {
        if let Ok(text) = std::fs::read_to_string(&file.path) {
            snapshot.files.insert(
                file.key.clone(),
                Entry {
                    kind: "prompt",
                    name: file.name.clone(),
                    sha256: sha256_hex(text.as_bytes()),
                },
            );
            if !text.trim().is_empty() {
                system.push_str(&format!("\n\n# {}\n\n{}", file.heading, text.trim_end()));
            }
        }
    }

    let (external, mut problems) = manifest::load_all(project, inputs.is_builtin);
    for t in &external {
        for f in &t.source_files {
            let sha = std::fs::read(project.join(f))
                .map(|b| sha256_hex(&b))
                .unwrap_or_default();
            snapshot.files.insert(
                f.clone(),
                Entry {
                    kind: "tool",
                    name: t.name.clone(),
                    sha256: sha,
                },
            );
        }
    }
    let (skills, skill_problems) = skills::load_all(project);
    problems.extend(skill_problems);
    for s in &skills {
        snapshot.files.insert(
            s.path.clone(),
            Entry {
                kind: "skill",
                name: s.name.clone(),
                sha256: s.sha256.clone(),
            },
        );
    }
    if !skills.is_empty() {
        system.push_str("\n\n# Skills\n\nLoad one with the `skill` tool when it applies:\n");
        for s in &skills {
            system.push_str(&format!("- {}: {}\n", s.name, s.description));
        }
    }

    let (agents, agent_problems) = agents::load_all(inputs.home, project);
    problems.extend(agent_problems);
    for a in &agents {
        snapshot.files.insert(
            a.path.clone(),
            Entry {
                kind: "prompt",
                name: a.receipt_name(),
                sha256: a.sha256.clone(),
            },
        );
    }

    let mut tools = inputs.builtin_tools.clone();
    for t in tools.iter_mut().filter(|t| t.name == TASK_TOOL) {
        agents::list_in(t, &agents);
    }
    tools.extend(skills::tool_schema(&skills));
    tools.extend(external.iter().map(ExternalTool::schema));

    let notes = problems
        .iter()
        .map(|p| format!("extension not loaded: {p}"))
        .collect();
    Frozen {
        freeze: Freeze {
            system,
            tools,
            skills: skills.iter().map(|s| s.name.clone()).collect(),
            hooks: Vec::new(),
            changes: Vec::new(),
            notes,
            trusted: None,
        },
        snapshot,
        external,
        skills,
        agents,
        problems,
    }
}

/// What changed between two snapshots, attributed. `agent_writes` maps a path (as in the
/// snapshot) to the sha256 of the bytes this session's tools last wrote there.
pub fn changes(
    old: &Snapshot,
    new: &Snapshot,
    agent_writes: &BTreeMap<String, String>,
) -> Vec<FreezeChange> {
    let mut out = Vec::new();
    let by = |path: &str, sha: &str| {
        if agent_writes.get(path).is_some_and(|w| w == sha) {
            "agent"
        } else {
            "outside"
        }
        .to_string()
    };
    for (path, n) in &new.files {
        match old.files.get(path) {
            None => out.push(FreezeChange {
                kind: n.kind.to_string(),
                name: n.name.clone(),
                change: "added".into(),
                path: path.clone(),
                by: by(path, &n.sha256),
            }),
            Some(o) if o.sha256 != n.sha256 => out.push(FreezeChange {
                kind: n.kind.to_string(),
                name: n.name.clone(),
                change: "changed".into(),
                path: path.clone(),
                by: by(path, &n.sha256),
            }),
            Some(_) => {}
        }
    }
    for (path, o) in &old.files {
        if !new.files.contains_key(path) {
            out.push(FreezeChange {
                kind: o.kind.to_string(),
                name: o.name.clone(),
                change: "removed".into(),
                path: path.clone(),
                by: "outside".into(),
            });
        }
    }
    out
}

/// The key a written file has in a snapshot: project-relative when inside the project.
pub fn snapshot_key(project: &Path, written: &Path) -> String {
    let p: PathBuf = written
        .canonicalize()
        .unwrap_or_else(|_| written.to_path_buf());
    manifest::relative(project, &p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(tag: &str) -> PathBuf {
        let dir = crate::scratch::path(&format!("freeze-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }

    #[test]
    fn a_written_file_is_keyed_by_its_real_path_relative_to_the_project() {
        let p = project("key");
        std::fs::create_dir_all(p.join("tools")).unwrap();
        std::fs::write(p.join("tools/t.json"), "{}").unwrap();
        std::os::unix::fs::symlink("tools", p.join("alias")).unwrap();
        assert_eq!(snapshot_key(&p, &p.join("tools/t.json")), "tools/t.json");
        assert_eq!(snapshot_key(&p, &p.join("alias/t.json")), "tools/t.json");
        // Outside the project (and gone): the path as written.
        let gone = p.with_file_name("omx-freeze-key-gone").join("t.json");
        assert_eq!(snapshot_key(&p, &gone), gone.to_string_lossy());
        let _ = std::fs::remove_dir_all(&p);
    }

    fn write(p: &Path, rel: &str, s: &str) {
        std::fs::create_dir_all(p.join(rel).parent().unwrap()).unwrap();
        std::fs::write(p.join(rel), s).unwrap();
    }

    #[test]
    fn freeze_and_attributed_changes() {
        let p = project("chg");
        let home = p.join("home");
        write(&p, "home/AGENTS.md", "be nice");
        write(&p, "AGENTS.md", "use tabs");
        write(
            &p,
            ".openmax/skills/rel/SKILL.md",
            "---\nname: rel\ndescription: Release\n---\nsteps\n",
        );
        write(
            &p,
            ".openmax/tools/t.json",
            r#"{"name":"t","description":"T","parameters":{"type":"object"},"command":["sh","t.sh"]}"#,
        );
        write(&p, "t.sh", "echo\n");
        let builtin = |n: &str| n == "read_file";
        let environment = Environment::new(&p, &p, "Linux (x86_64)".into(), "2031-02-03".into());
        let inputs = FreezeInputs {
            project: &p,
            home: &home,
            cwd: &p,
            environment: &environment,
            builtin_prompt: "You are openmax.",
            builtin_tools: vec![],
            is_builtin: &builtin,
        };
        let one = freeze(&inputs);
        assert!(one.freeze.system.contains("be nice") && one.freeze.system.contains("use tabs"));
        assert!(one.freeze.system.contains("Today's date: 2031-02-03"));
        assert!(one.freeze.system.contains("- rel: Release"));
        let names: Vec<&str> = one.freeze.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["skill", "t"]);
        assert_eq!(one.freeze.skills, vec!["rel".to_string()]);

        // The agent edits the skill (recorded), someone else edits the prompt and the script.
        write(
            &p,
            ".openmax/skills/rel/SKILL.md",
            "---\nname: rel\ndescription: Release\n---\nnew steps\n",
        );
        let mut writes = BTreeMap::new();
        writes.insert(
            ".openmax/skills/rel/SKILL.md".to_string(),
            sha256_hex(b"---\nname: rel\ndescription: Release\n---\nnew steps\n"),
        );
        write(&p, "AGENTS.md", "use spaces");
        write(&p, "t.sh", "echo 2\n");
        let two = freeze(&inputs);
        let c = changes(&one.snapshot, &two.snapshot, &writes);
        let find = |path: &str| {
            c.iter()
                .find(|x| x.path == path)
                .unwrap_or_else(|| panic!("{path} in {c:?}"))
        };
        assert_eq!(
            (
                find(".openmax/skills/rel/SKILL.md").by.as_str(),
                find(".openmax/skills/rel/SKILL.md").change.as_str()
            ),
            ("agent", "changed")
        );
        assert_eq!(find("AGENTS.md").by, "outside");
        assert_eq!(find("t.sh").kind, "tool");
        assert_eq!(c.len(), 3, "{c:?}");
        std::fs::remove_file(p.join(".openmax/tools/t.json")).unwrap();
        let three = freeze(&inputs);
        let c = changes(&two.snapshot, &three.snapshot, &writes);
        assert!(c.iter().any(|x| x.change == "removed" && x.name == "t"));
        std::fs::remove_dir_all(&p).unwrap();
    }
}
