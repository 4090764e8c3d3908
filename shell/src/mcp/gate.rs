//! The source identity of a project-defined MCP server: what a human approves before it runs.
//!
//! The sha256 is framed like an external tool's (see [`crate::extensions::source`]): first the
//! definition, named `<defining file>#<server>`, whose bytes are the server's entry as compact
//! JSON (`.mcp.json`: the entry re-serialized in its key order; TOML: the table with sorted
//! keys), then every project file its argv (command and args) names, in argv order, each once.
//! A change to the definition or to a script it runs asks again; another server's entry in the
//! same file does not.

use std::path::Path;

use super::config::{ServerDef, Transport};
use crate::extensions::manifest::project_file;
use crate::extensions::source::framed_sha256;

/// The project files the server's argv names.
pub fn argv_files(def: &ServerDef, project: &Path) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Transport::Stdio { command, args } = &def.transport {
        for arg in std::iter::once(command).chain(args) {
            if let Some(f) = project_file(project, arg) {
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        }
    }
    out
}

/// The full hex sha256 over the definition and the files its argv names, read now.
pub fn source_sha256(def: &ServerDef, project: &Path) -> Result<String, String> {
    let mut items = vec![(
        format!("{}#{}", def.file, def.name),
        def.definition.clone().into_bytes(),
    )];
    for rel in argv_files(def, project) {
        let bytes =
            std::fs::read(project.join(&rel)).map_err(|e| format!("cannot read {rel}: {e}"))?;
        items.push((rel, bytes));
    }
    Ok(framed_sha256(&items))
}
