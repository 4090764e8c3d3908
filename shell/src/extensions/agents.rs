//! Named agents: `.openmax/agents/<name>.md` in the project and `$OPENMAX_HOME/agents/<name>.md`
//! for the user, each a subagent the `task` tool can start by name (`"agent": "<name>"`).
//!
//! ```text
//! ---
//! description: Reviews a diff for bugs; read-only
//! tools: read_file, grep, glob        # optional: the only tools it may use
//! model: claude-haiku-4-5             # optional: the model its session asks
//! max_iterations: 8                   # optional: at most this many tool rounds per turn
//! ---
//! You are a careful reviewer. … (its instructions, added to the child's system prompt)
//! ```
//!
//! Invariants:
//! - An agent only narrows: its tools are a subset of what the child's own freeze offers (a
//!   name it lists that the child lacks gives it nothing), its `max_iterations` is the lower of
//!   its own and the config's, and its model is one of the same provider, reached with the
//!   same key. Nothing in an agent file widens a permission, a sandbox or a limit.
//! - Agents are frozen with the other extensions: the parent's freeze reads them once (the
//!   `task` tool's description lists them), every file's sha256 is in the snapshot (a change
//!   is a `prompt` change named `agent <name>` in `refrozen`), and a child is given the frozen
//!   definition, never a re-read of the file.
//! - The project directory is untrusted input: a file over [`MAX_AGENT_BYTES`], not UTF-8, not
//!   a regular file, or with broken front matter is a problem line naming the file (a note for
//!   the model, a line on stderr) and the other agents still load. A project agent of the same
//!   name as a user agent stands in for it (as in Claude Code).

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::manifest::relative;
use super::skills::front_matter;
use crate::digest::sha256_hex;

/// Where project agents live, relative to the project (and user agents, under the home).
pub const AGENTS_DIR: &str = ".openmax/agents";
/// Where user agents live, relative to `$OPENMAX_HOME`.
pub const USER_AGENTS_DIR: &str = "agents";
/// The largest agent file read.
pub const MAX_AGENT_BYTES: u64 = 256 * 1024;

/// One frozen agent definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agent {
    /// The file's stem.
    pub name: String,
    pub description: String,
    /// The body: instructions added to the child's system prompt.
    pub prompt: String,
    /// The only tools it may use (`None`: every tool its session has).
    pub tools: Option<BTreeSet<String>>,
    /// The model its session asks (`None`: the parent's).
    pub model: Option<String>,
    /// Its ceiling on tool rounds per turn (`None`: the config's).
    pub max_iterations: Option<u32>,
    /// The file: project-relative, or absolute for a user agent (its snapshot key).
    pub path: String,
    pub sha256: String,
}

impl Agent {
    /// The name in a refreeze receipt.
    pub fn receipt_name(&self) -> String {
        format!("agent {}", self.name)
    }
}

/// Every agent (sorted by name; project agents over user agents of the same name) and one
/// problem line per file that did not load.
pub fn load_all(home: &Path, project: &Path) -> (Vec<Agent>, Vec<String>) {
    let mut problems = Vec::new();
    let mut agents = load_dir(&home.join(USER_AGENTS_DIR), None, &mut problems);
    for a in load_dir(&project.join(AGENTS_DIR), Some(project), &mut problems) {
        agents.retain(|u| u.name != a.name);
        agents.push(a);
    }
    agents.sort_by(|a, b| a.name.cmp(&b.name));
    (agents, problems)
}

/// The agents of one directory; `project` when it is the project's (paths relative to it).
fn load_dir(dir: &Path, project: Option<&Path>, problems: &mut Vec<String>) -> Vec<Agent> {
    let mut out = Vec::new();
    let shown = |p: &Path| match project {
        Some(root) => relative(root, p),
        None => p.to_string_lossy().into_owned(),
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            problems.push(format!("{}: cannot list agents: {e}", shown(dir)));
            return out;
        }
    };
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    for file in files {
        let rel = shown(&file);
        match read_one(&file) {
            Ok(text) => match parse(&file, &text) {
                Ok(mut a) => {
                    a.sha256 = sha256_hex(text.as_bytes());
                    a.path = rel;
                    out.push(a);
                }
                Err(e) => problems.push(format!("{rel}: {e}")),
            },
            Err(e) => problems.push(format!("{rel}: {e}")),
        }
    }
    out
}

/// The file's text: a regular file (a symlink is not followed), at most
/// [`MAX_AGENT_BYTES`], UTF-8.
fn read_one(file: &Path) -> Result<String, String> {
    let meta = std::fs::symlink_metadata(file).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file (agents must be plain files, not links)".into());
    }
    let f = std::fs::File::open(file).map_err(|e| format!("cannot read: {e}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_AGENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_AGENT_BYTES {
        return Err(format!(
            "larger than {} KiB; an agent file must be smaller",
            MAX_AGENT_BYTES / 1024
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// One agent from its file's text (name from the file's stem; `path` and `sha256` left empty).
pub fn parse(file: &Path, text: &str) -> Result<Agent, String> {
    let name = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_string();
    if !valid_name(&name) {
        return Err(format!(
            "{name:?} is not an agent name (letters, digits, '-' and '_', at most 64)"
        ));
    }
    let (fields, body) = front_matter(text)?;
    let mut agent = Agent {
        name,
        description: String::new(),
        prompt: body.trim_end().to_string(),
        tools: None,
        model: None,
        max_iterations: None,
        path: String::new(),
        sha256: String::new(),
    };
    for (k, v) in fields {
        match k.as_str() {
            "name" if v != agent.name => {
                return Err(format!(
                    "front matter names {v:?} but the file is {:?}.md (the file name is the \
                     agent's name)",
                    agent.name
                ))
            }
            "description" => agent.description = v,
            "tools" => agent.tools = Some(tool_list(&v)),
            "model" if !v.is_empty() => agent.model = Some(v),
            "max_iterations" => match v.parse::<u32>() {
                Ok(n) if n > 0 => agent.max_iterations = Some(n),
                _ => {
                    return Err(format!(
                        "max_iterations must be a whole number above 0, not {v:?}"
                    ))
                }
            },
            _ => {}
        }
    }
    if agent.description.is_empty() {
        return Err("front matter has no description".into());
    }
    Ok(agent)
}

/// `read_file, grep`, `[read_file, grep]` or `read_file grep`.
fn tool_list(v: &str) -> BTreeSet<String> {
    v.trim_start_matches('[')
        .trim_end_matches(']')
        .split([',', ' '])
        .map(|t| t.trim().trim_matches('"').trim_matches('\''))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The lines the `task` tool's description lists the agents with.
pub fn listing(agents: &[Agent]) -> String {
    let mut out = String::from("Named agents (pass one as `agent`):\n");
    for a in agents {
        out.push_str(&format!("- {}: {}", a.name, a.description));
        if let Some(t) = &a.tools {
            let t: Vec<&str> = t.iter().map(String::as_str).collect();
            out.push_str(&format!(" (tools: {})", t.join(", ")));
        }
        out.push('\n');
    }
    out
}

/// The `task` tool's schema with the agents listed in its description and their names as the
/// `agent` argument's choices (unchanged when there are none).
pub fn list_in(schema: &mut openmax_core::conversation::ToolSchema, agents: &[Agent]) {
    if agents.is_empty() {
        return;
    }
    schema.description.push_str("\n\n");
    schema.description.push_str(&listing(agents));
    let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
    if let Some(p) = schema.parameters.pointer_mut("/properties/agent") {
        p["enum"] = serde_json::json!(names);
    }
}

/// The agent named `name`, or the error that lists the known ones.
pub fn find<'a>(agents: &'a [Agent], name: &str) -> Result<&'a Agent, String> {
    agents.iter().find(|a| a.name == name).ok_or_else(|| {
        let known: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
        if known.is_empty() {
            format!(
                "task: no agent named {name:?}: no agents are defined (.openmax/agents/<name>.md \
                 or $OPENMAX_HOME/agents/<name>.md)"
            )
        } else {
            format!(
                "task: no agent named {name:?}; known agents: {}",
                known.join(", ")
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = crate::scratch::path(&format!("agents-{tag}"));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_task_tool_lists_the_agents_and_takes_only_their_names() {
        let mut schema = crate::tasks::schema();
        let before = schema.clone();
        list_in(&mut schema, &[]);
        assert_eq!(schema, before, "no agents: the schema as it was");
        let rev = parse(
            Path::new("rev.md"),
            "---\ndescription: Review\ntools: [read_file, grep]\n---\nBe careful.\n",
        )
        .unwrap();
        let doc = parse(Path::new("doc.md"), "---\ndescription: Docs\n---\n").unwrap();
        list_in(&mut schema, &[rev, doc]);
        assert_eq!(
            schema.description,
            format!(
                "{}\n\nNamed agents (pass one as `agent`):\n- rev: Review (tools: grep, \
                 read_file)\n- doc: Docs\n",
                before.description
            )
        );
        assert_eq!(
            schema.parameters["properties"]["agent"]["enum"],
            serde_json::json!(["rev", "doc"])
        );
    }

    #[test]
    fn front_matter_narrows() {
        let a = parse(
            Path::new("rev.md"),
            "---\ndescription: Review\ntools: [read_file, grep]\nmodel: small\nmax_iterations: 3\n---\nBe careful.\n",
        )
        .unwrap();
        assert_eq!(a.name, "rev");
        assert_eq!(a.prompt, "Be careful.");
        assert_eq!(
            a.tools.unwrap().into_iter().collect::<Vec<_>>(),
            ["grep", "read_file"]
        );
        assert_eq!(
            (a.model.as_deref(), a.max_iterations),
            (Some("small"), Some(3))
        );
        let plain = parse(Path::new("x.md"), "---\ndescription: d\n---\n").unwrap();
        assert!(plain.tools.is_none() && plain.max_iterations.is_none());
        for (text, err) in [
            ("no front matter", "missing front matter"),
            ("---\ntools: a\n---\n", "no description"),
            (
                "---\ndescription: d\nmax_iterations: 0\n---\n",
                "max_iterations",
            ),
            ("---\nname: other\ndescription: d\n---\n", "the file name"),
            ("---\ndescription: d\n", "not closed"),
        ] {
            let e = parse(Path::new("x.md"), text).unwrap_err();
            assert!(e.contains(err), "{text:?}: {e}");
        }
        assert!(parse(Path::new("a b.md"), "---\ndescription: d\n---\n")
            .unwrap_err()
            .contains("not an agent name"));
    }

    #[test]
    fn no_agents_directory_is_no_problem_and_an_unlistable_one_is() {
        let home = dir("none-home");
        let project = dir("none-proj");
        assert_eq!(load_all(&home, &project), (vec![], vec![]));
        // The project's agents "directory" is a file: said, naming it.
        std::fs::create_dir_all(project.join(".openmax")).unwrap();
        std::fs::write(project.join(AGENTS_DIR), "not a directory").unwrap();
        let (agents, problems) = load_all(&home, &project);
        assert!(agents.is_empty());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with(".openmax/agents: cannot list agents"),
            "{}",
            problems[0]
        );
        let _ = std::fs::remove_dir_all(&home);
        let _ = std::fs::remove_dir_all(&project);
    }

    #[test]
    fn a_file_of_exactly_the_cap_is_read_and_one_byte_more_is_not() {
        let d = dir("cap");
        let head = "---\ndescription: d\n---\n";
        let at_cap = format!(
            "{head}{}",
            "x".repeat(MAX_AGENT_BYTES as usize - head.len())
        );
        std::fs::write(d.join("cap.md"), &at_cap).unwrap();
        assert_eq!(read_one(&d.join("cap.md")).as_deref(), Ok(at_cap.as_str()));
        std::fs::write(d.join("over.md"), format!("{at_cap}x")).unwrap();
        let e = read_one(&d.join("over.md")).unwrap_err();
        assert!(e.contains("larger than 256 KiB"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn broken_files_are_problems_and_lose_nothing() {
        let home = dir("home");
        let project = dir("proj");
        let a = project.join(AGENTS_DIR);
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(home.join(USER_AGENTS_DIR)).unwrap();
        std::fs::write(a.join("good.md"), "---\ndescription: Good\n---\nhi\n").unwrap();
        std::fs::write(a.join("bad.md"), "no front matter").unwrap();
        std::fs::write(a.join("bin.md"), b"---\ndescription: \xff\n---\n").unwrap();
        let huge = format!(
            "---\ndescription: d\n---\n{}",
            "x".repeat(MAX_AGENT_BYTES as usize)
        );
        std::fs::write(a.join("huge.md"), huge).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", a.join("link.md")).unwrap();
        std::fs::write(a.join("notes.txt"), "ignored").unwrap();
        std::fs::write(
            home.join(USER_AGENTS_DIR).join("good.md"),
            "---\ndescription: the user's\n---\n",
        )
        .unwrap();
        std::fs::write(
            home.join(USER_AGENTS_DIR).join("mine.md"),
            "---\ndescription: Mine\n---\n",
        )
        .unwrap();
        let (agents, problems) = load_all(&home, &project);
        let names: Vec<(&str, &str)> = agents
            .iter()
            .map(|a| (a.name.as_str(), a.description.as_str()))
            .collect();
        assert_eq!(names, [("good", "Good"), ("mine", "Mine")]);
        assert_eq!(agents[0].path, ".openmax/agents/good.md");
        assert!(agents[1].path.starts_with('/'));
        let p = problems.join("\n");
        for want in [
            ".openmax/agents/bad.md: missing front matter",
            ".openmax/agents/bin.md: not UTF-8",
            ".openmax/agents/huge.md: larger than 256 KiB",
            ".openmax/agents/link.md: not a regular file",
        ] {
            assert!(p.contains(want), "{want} in {p}");
        }
        assert_eq!(problems.len(), 4, "{p}");
        assert!(find(&agents, "nope")
            .unwrap_err()
            .contains("known agents: good, mine"));
        assert!(listing(&agents).contains("- good: Good"));
        let _ = std::fs::remove_dir_all(&home);
        let _ = std::fs::remove_dir_all(&project);
    }
}
