//! Skills: `.openmax/skills/<name>/SKILL.md`, listed to the model by name and description and
//! loaded on demand with the `skill` tool.
//!
//! A SKILL.md opens with front matter:
//! ```text
//! ---
//! name: release
//! description: How to cut a release of this project
//! ---
//! (the body the `skill` tool returns)
//! ```
//! Skills are read once per freeze; the `skill` tool returns the frozen body, so what the model
//! loads is what the freeze receipt accounted for.

use std::path::Path;

use openmax_core::conversation::ToolSchema;

use super::manifest::relative;
use crate::digest::sha256_hex;

/// Where skills live, relative to the project.
pub const SKILLS_DIR: &str = ".openmax/skills";
/// The built-in tool that loads a skill's body.
pub const SKILL_TOOL: &str = "skill";

/// One frozen skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub body: String,
    /// Project-relative path of the SKILL.md.
    pub path: String,
    pub sha256: String,
}

/// Load every skill (sorted by name) and one problem line per broken SKILL.md.
pub fn load_all(project: &Path) -> (Vec<Skill>, Vec<String>) {
    let dir = project.join(SKILLS_DIR);
    let mut skills: Vec<Skill> = Vec::new();
    let mut problems = Vec::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (skills, problems),
        Err(e) => {
            problems.push(format!("{SKILLS_DIR}: cannot list skills: {e}"));
            return (skills, problems);
        }
    };
    let mut dirs: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        let file = d.join("SKILL.md");
        let rel = relative(project, &file);
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                problems.push(format!("{rel}: cannot read: {e}"));
                continue;
            }
        };
        match parse(&text) {
            Ok((name, description, body)) => {
                if skills.iter().any(|s| s.name == name) {
                    problems.push(format!("{rel}: duplicate skill name {name:?}"));
                    continue;
                }
                skills.push(Skill {
                    name,
                    description,
                    body,
                    sha256: sha256_hex(text.as_bytes()),
                    path: rel,
                });
            }
            Err(e) => problems.push(format!("{rel}: {e}")),
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    (skills, problems)
}

/// Split front matter (`name`, `description`) from the body.
pub fn parse(text: &str) -> Result<(String, String, String), String> {
    let (fields, body) = front_matter(text)?;
    let field = |k: &str| fields.iter().find(|(f, _)| f == k).map(|(_, v)| v.clone());
    let name = field("name")
        .filter(|n| !n.is_empty())
        .ok_or("front matter has no name")?;
    let description = field("description")
        .filter(|d| !d.is_empty())
        .ok_or("front matter has no description")?;
    Ok((name, description, body))
}

/// Split a Markdown file's front matter (`key: value` lines between `---` lines, quotes around
/// a value dropped, `#` comments and blank lines skipped) from its body; skills and named
/// agents share it.
pub fn front_matter(text: &str) -> Result<(Vec<(String, String)>, String), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or("missing front matter: the file must start with a '---' line")?;
    let end = rest
        .find("\n---")
        .ok_or("front matter is not closed by a '---' line")?;
    let (head, tail) = rest.split_at(end);
    let body = tail
        .trim_start_matches("\n---")
        .trim_start_matches(['\r', '\n'])
        .to_string();
    let mut fields = Vec::new();
    for line in head.lines() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let (k, v) = line
            .split_once(':')
            .ok_or_else(|| format!("front matter line {line:?} is not 'key: value'"))?;
        let v = v.trim().trim_matches('"').trim_matches('\'').to_string();
        fields.push((k.trim().to_string(), v));
    }
    Ok((fields, body))
}

/// The `skill` tool's schema, listing the frozen skills; `None` when there are none.
pub fn tool_schema(skills: &[Skill]) -> Option<ToolSchema> {
    if skills.is_empty() {
        return None;
    }
    let mut description =
        String::from("Load a project skill's instructions by name. Available skills:\n");
    for s in skills {
        description.push_str(&format!("- {}: {}\n", s.name, s.description));
    }
    let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    Some(ToolSchema {
        name: SKILL_TOOL.to_string(),
        description,
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"name": {"type": "string", "enum": names, "description": "The skill to load"}},
            "required": ["name"],
            "additionalProperties": false
        }),
    })
}

/// Run the `skill` tool against the frozen skills: the body, or an error naming the choices.
pub fn load(skills: &[Skill], args: &serde_json::Value) -> Result<String, String> {
    let name = args
        .get("name")
        .and_then(|v| v.as_str())
        .ok_or("missing string argument \"name\"")?;
    match skills.iter().find(|s| s.name == name) {
        Some(s) => Ok(s.body.clone()),
        None => {
            let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
            Err(format!(
                "no skill named {name:?}; available: {}",
                names.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter() {
        let (n, d, b) =
            parse("---\nname: rel\ndescription: \"Cut a release\"\n---\nStep 1\n").unwrap();
        assert_eq!(
            (n.as_str(), d.as_str(), b.as_str()),
            ("rel", "Cut a release", "Step 1\n")
        );
        assert!(parse("no front matter")
            .unwrap_err()
            .contains("missing front matter"));
        assert!(parse("---\nname: x\n---\n")
            .unwrap_err()
            .contains("description"));
        assert!(parse("---\nname: x\ndescription: y\n")
            .unwrap_err()
            .contains("not closed"));
    }

    #[test]
    fn load_all_reads_each_skill_once_and_says_what_did_not_load() {
        let p = crate::scratch::path("skills");
        let _ = std::fs::remove_dir_all(&p);
        assert_eq!(
            load_all(&p),
            (vec![], vec![]),
            "no skills directory, no problem"
        );
        let dir = p.join(SKILLS_DIR);
        let skill = |d: &str, text: &str| {
            std::fs::create_dir_all(dir.join(d)).unwrap();
            std::fs::write(dir.join(d).join("SKILL.md"), text).unwrap();
        };
        skill(
            "b-release",
            "---\nname: release\ndescription: Cut it\n---\nSteps\n",
        );
        skill(
            "a-review",
            "---\nname: review\ndescription: Look\n---\nRead\n",
        );
        // The same name again (in a later directory): said, the first one kept.
        skill(
            "c-again",
            "---\nname: release\ndescription: Other\n---\nX\n",
        );
        skill("d-broken", "no front matter");
        // A SKILL.md that cannot be read as a file is said; a directory without one is not.
        std::fs::create_dir_all(dir.join("f-unreadable/SKILL.md")).unwrap();
        std::fs::create_dir_all(dir.join("e-empty")).unwrap();
        std::fs::write(dir.join("stray.md"), "not in a directory").unwrap();
        let (skills, problems) = load_all(&p);
        let got: Vec<(&str, &str, &str)> = skills
            .iter()
            .map(|s| (s.name.as_str(), s.description.as_str(), s.path.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("release", "Cut it", ".openmax/skills/b-release/SKILL.md"),
                ("review", "Look", ".openmax/skills/a-review/SKILL.md"),
            ]
        );
        assert_eq!(
            problems,
            [
                ".openmax/skills/c-again/SKILL.md: duplicate skill name \"release\"",
                ".openmax/skills/d-broken/SKILL.md: missing front matter: the file must start with a '---' line",
                ".openmax/skills/f-unreadable/SKILL.md: cannot read: Is a directory (os error 21)",
            ]
        );
        let _ = std::fs::remove_dir_all(&p);
    }

    #[test]
    fn tool_loads_frozen_body() {
        let s = Skill {
            name: "a".into(),
            description: "d".into(),
            body: "B".into(),
            path: "p".into(),
            sha256: String::new(),
        };
        let skills = [s];
        assert_eq!(
            load(&skills, &serde_json::json!({"name":"a"})).unwrap(),
            "B"
        );
        assert!(load(&skills, &serde_json::json!({"name":"z"}))
            .unwrap_err()
            .contains("available: a"));
        assert!(tool_schema(&skills).unwrap().description.contains("- a: d"));
        assert!(tool_schema(&[]).is_none());
    }
}
