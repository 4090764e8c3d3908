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
