//! Loading every configured MCP server: the `[mcp_servers]` tables of the config files (each
//! entry in Codex's format, [`super::codex`]), then the project's `.mcp.json` (Claude Code's,
//! [`super::claude`]), into [`ServerDef`]s with one problem line per fault.

use std::path::Path;

use super::config::{Lookup, McpSource, ServerDef, MCP_JSON};
use super::{claude, codex};
use crate::config::keys::Lines;
use crate::hooks::Origin;

/// Every configured server: the `[mcp_servers]` tables of the config files (user first, as in
/// [`crate::config::Layers::mcp`]), then the project's `.mcp.json`. Returns the valid ones and
/// one problem line per fault.
pub fn load(
    sources: &[McpSource],
    project: &Path,
    lookup: &Lookup,
) -> (Vec<ServerDef>, Vec<String>) {
    let mut defs: Vec<ServerDef> = Vec::new();
    let mut problems = Vec::new();
    let add = |def: ServerDef, defs: &mut Vec<ServerDef>, problems: &mut Vec<String>| match defs
        .iter()
        .find(|d| d.name == def.name)
    {
        Some(old) => problems.push(format!(
            "{}: mcp server {:?} is already defined in {}; this definition is ignored",
            def.file, def.name, old.file
        )),
        None => defs.push(def),
    };
    for src in sources {
        let file = match src.origin {
            Origin::User => src.path.display().to_string(),
            Origin::Project => crate::extensions::manifest::relative(project, &src.path),
        };
        for (name, value) in &src.table {
            let entry = codex::Entry {
                file: &file,
                origin: src.origin,
                name,
                lines: &src.lines,
                project,
            };
            match codex::parse(&entry, value, lookup) {
                Ok(def) => add(def, &mut defs, &mut problems),
                Err(e) => problems.extend(e),
            }
        }
    }
    match std::fs::read(project.join(MCP_JSON)) {
        Ok(bytes) => {
            let (found, bad) = claude::parse(&bytes, lookup);
            problems.extend(bad);
            for def in found {
                add(def, &mut defs, &mut problems);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => problems.push(format!("{MCP_JSON}: cannot read: {e}")),
    }
    (defs, problems)
}

/// The servers the project file `rel` (`.mcp.json` or `.openmax/config.toml`) defines, for
/// `openmax --approve`, with a problem line for each it cannot read.
pub fn defined_in(project: &Path, rel: &str, lookup: &Lookup) -> (Vec<ServerDef>, Vec<String>) {
    if rel == MCP_JSON {
        return match std::fs::read(project.join(rel)) {
            Ok(b) => claude::parse(&b, lookup),
            Err(e) => (Vec::new(), vec![format!("{rel}: cannot read: {e}")]),
        };
    }
    if rel != ".openmax/config.toml" {
        return (Vec::new(), Vec::new());
    }
    let Ok(text) = std::fs::read_to_string(project.join(rel)) else {
        return (Vec::new(), Vec::new());
    };
    let Some(table) = toml::from_str::<toml::Table>(&text)
        .ok()
        .and_then(|t| t.get("mcp_servers").and_then(|v| v.as_table()).cloned())
    else {
        return (Vec::new(), Vec::new());
    };
    let lines = Lines::of(&text);
    let mut defs = Vec::new();
    let mut problems = Vec::new();
    for (name, value) in &table {
        let entry = codex::Entry {
            file: rel,
            origin: Origin::Project,
            name,
            lines: &lines,
            project,
        };
        match codex::parse(&entry, value, lookup) {
            Ok(d) => defs.push(d),
            Err(e) => problems.extend(e),
        }
    }
    (defs, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_a_project_file_defines_are_those_approve_covers() {
        let p = crate::scratch::path("defined");
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join(".openmax")).unwrap();
        let none = |_: &str| None;
        let lookup = Lookup {
            get: &none,
            provider_keys: &[],
        };
        let names = |rel: &str| {
            let (defs, problems) = defined_in(&p, rel, &lookup);
            (
                defs.iter().map(|d| d.name.clone()).collect::<Vec<_>>(),
                problems,
            )
        };
        // A missing .mcp.json is said; a missing or serverless config is nothing.
        let (defs, problems) = names(MCP_JSON);
        assert!(defs.is_empty());
        assert!(
            problems[0].starts_with(".mcp.json: cannot read"),
            "{problems:?}"
        );
        assert_eq!(names(".openmax/config.toml"), (vec![], vec![]));
        std::fs::write(
            p.join(MCP_JSON),
            r#"{"mcpServers": {"a": {"command": "srv"}, "b": {"url": "http://127.0.0.1:1/mcp"}}}"#,
        )
        .unwrap();
        std::fs::write(
            p.join(".openmax/config.toml"),
            "[mcp_servers.c]\ncommand = \"srv\"\n",
        )
        .unwrap();
        assert_eq!(names(MCP_JSON), (vec!["a".into(), "b".into()], vec![]));
        assert_eq!(names(".openmax/config.toml"), (vec!["c".into()], vec![]));
        // Any other file defines no server.
        assert_eq!(names("tools/x.sh"), (vec![], vec![]));
        std::fs::remove_dir_all(&p).unwrap();
    }
}
