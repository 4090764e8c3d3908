//! What a project asks a human to approve before it can run: every project-defined MCP server,
//! external tool and hook whose exact bytes no human approved, described as an
//! `unapproved_source` card describes a source (the path to approve, its sha, the command line,
//! the environment names it would receive), with the key and full sha256 that approving it
//! stores: what `openmax --approve` stores for the same bytes. The terminal UI asks about each
//! at start-up (and after `/trust`); nothing here writes.

use std::path::Path;

use crate::hooks::Origin;
use crate::mcp::config::Transport;

use crate::extensions::manifest;

/// One project source waiting for a human's approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// `MCP server`, `external tool` or `hook`.
    pub kind: &'static str,
    pub name: String,
    /// What runs, on one line: the argv, or an MCP server's URL.
    pub command: String,
    /// The files the sha covers.
    pub covers: Vec<String>,
    /// The project file `openmax --approve` takes for it (the card's source path).
    pub source_path: String,
    /// The key the approval is stored under (the source path, or a hook's own key).
    pub key: String,
    /// The full hex sha256 over the bytes approved.
    pub sha256: String,
    /// The variables of openmax's environment it would receive: a credential grant.
    pub env: Vec<String>,
}

/// The project's sources no human approved, MCP servers first, then external tools, then
/// hooks. `approved(key, sha256)` asks the project's approval store. Only files that parse
/// are looked at: a broken one is reported where it is loaded, as ever.
pub fn list(
    home: &Path,
    project: &Path,
    approved: &dyn Fn(&str, &str) -> bool,
    is_builtin: &dyn Fn(&str) -> bool,
) -> Vec<Pending> {
    let mut out = Vec::new();
    let layers = crate::config::load_layers(home, project).ok();
    let tables = layers.as_ref().map(|l| l.mcp.clone()).unwrap_or_default();
    let keys = crate::sandbox::scrub::names();
    let lookup = crate::mcp::config::Lookup::process(&keys);
    let (defs, _) = crate::mcp::load::load(&tables, project, &lookup);
    for d in defs.iter().filter(|d| d.origin == Origin::Project) {
        let Ok(sha) = crate::mcp::gate::source_sha256(d, project) else {
            continue;
        };
        if approved(&d.file, &sha) {
            continue;
        }
        let command = match &d.transport {
            Transport::Stdio { command, args } => argv_line(std::iter::once(command).chain(args)),
            Transport::Http { url, .. } => url.clone(),
            Transport::Sse { url, .. } => format!("{url} (HTTP+SSE)"),
        };
        let mut covers = vec![format!("{}#{}", d.file, d.name)];
        covers.extend(crate::mcp::gate::argv_files(d, project));
        out.push(Pending {
            kind: "MCP server",
            name: d.name.clone(),
            command,
            covers,
            source_path: d.file.clone(),
            key: d.file.clone(),
            sha256: sha,
            env: d.env_grant(),
        });
    }
    let (tools, _) = manifest::load_all(project, is_builtin);
    for t in tools {
        let Ok(sha) = t.current_sha256(project) else {
            continue;
        };
        if approved(&t.manifest_path, &sha) {
            continue;
        }
        out.push(Pending {
            kind: "external tool",
            name: t.name.clone(),
            command: argv_line(t.command.iter()),
            covers: t.source_files.clone(),
            source_path: t.manifest_path.clone(),
            key: t.manifest_path.clone(),
            sha256: sha,
            env: t.env.clone(),
        });
    }
    let hooks = layers.map(|l| l.hooks).unwrap_or_default();
    for h in crate::hooks::freeze(&hooks, project, approved) {
        let (Some((key, sha)), Some(source)) = (&h.approval, &h.source) else {
            continue;
        };
        if source.approved || source.unreadable.is_some() {
            continue;
        }
        let mut covers = vec![format!(
            "its definition in {}",
            crate::hooks::PROJECT_CONFIG
        )];
        covers.extend(h.files.keys().cloned());
        out.push(Pending {
            kind: "hook",
            name: h.name.clone(),
            command: format!(
                "{} (on {}{}, {})",
                argv_line(h.config.command.iter()),
                h.config.event.as_str(),
                h.config
                    .matcher
                    .as_ref()
                    .map(|m| format!(" matching {m:?}"))
                    .unwrap_or_default(),
                if h.config.blocking {
                    "blocking"
                } else {
                    "observing"
                }
            ),
            covers,
            source_path: source.approve_path.clone(),
            key: key.clone(),
            sha256: sha.clone(),
            env: Vec::new(),
        });
    }
    out
}

/// An argv as one line, each word quoted when it would not read back as one word.
fn argv_line<'a>(argv: impl Iterator<Item = &'a String>) -> String {
    argv.map(|w| {
        let plain = !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
        if plain {
            w.clone()
        } else {
            format!("'{}'", w.replace('\'', r"'\''"))
        }
    })
    .collect::<Vec<_>>()
    .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_argv_reads_back_word_for_word() {
        let argv: Vec<String> = ["sh", "-c", "echo 'hi' $X", "", "a.py"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            argv_line(argv.iter()),
            r#"sh -c 'echo '\''hi'\'' $X' '' a.py"#
        );
    }
}
