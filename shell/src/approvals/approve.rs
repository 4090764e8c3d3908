//! `openmax --approve PATH`: a human records their approval of a project file's current bytes.
//!
//! PATH is an external tool's manifest (`.openmax/tools/<name>.json`, approved together with every
//! project file its command names: the same sha the `unapproved_source` gate shows) or any other
//! project file a hook runs (approved by its own bytes). The command prints what it approves
//! (path, sha, the env grant) before storing it, and refuses when started by an agent.

use std::io::Write;
use std::path::Path;

use crate::digest::sha256_hex;
use crate::extensions::manifest::{self, relative};
use crate::extensions::source::short;

/// What an approval covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// Project-relative path (the gate's `source_path`).
    pub source_path: String,
    /// Full hex sha256 over the covered bytes.
    pub sha256: String,
    /// The env allowlist the approval grants (external tools only).
    pub env: Vec<String>,
    /// The files the sha covers.
    pub files: Vec<String>,
}

/// Work out what approving `path` means, from the bytes on disk now.
pub fn inspect(
    project: &Path,
    path: &Path,
    is_builtin: &dyn Fn(&str) -> bool,
) -> Result<Approval, String> {
    // A relative PATH is taken from the working directory, or else from the project root (the
    // form an `unapproved_source` request shows), so it works from any subdirectory.
    let full = if path.is_absolute() {
        path.to_path_buf()
    } else {
        let here = std::env::current_dir()
            .map_err(|e| e.to_string())?
            .join(path);
        if here.exists() {
            here
        } else {
            project.join(path)
        }
    };
    let real = full
        .canonicalize()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !real.starts_with(project) {
        return Err(format!(
            "{} is outside the project {}",
            real.display(),
            project.display()
        ));
    }
    if !real.is_file() {
        return Err(format!("{} is not a file", real.display()));
    }
    let rel = relative(project, &real);
    if rel.starts_with(manifest::TOOLS_DIR) && rel.ends_with(".json") {
        let tool = manifest::load_one(project, &real, is_builtin)?;
        return Ok(Approval {
            source_path: tool.manifest_path,
            sha256: tool.sha256,
            env: tool.env,
            files: tool.source_files,
        });
    }
    let bytes = std::fs::read(&real).map_err(|e| format!("{rel}: {e}"))?;
    Ok(Approval {
        source_path: rel.clone(),
        sha256: sha256_hex(&bytes),
        env: Vec::new(),
        files: vec![rel],
    })
}

/// Run the command: print what is approved, then store it with `store(source_path, sha256)`.
/// Returns the exit code.
pub fn run<W: Write>(
    project: &Path,
    path: &Path,
    agent_spawned: bool,
    is_builtin: &dyn Fn(&str) -> bool,
    store: &dyn Fn(&str, &str) -> std::io::Result<()>,
    mut out: W,
    mut err: impl Write,
) -> i32 {
    if agent_spawned {
        let _ = writeln!(
            err,
            "openmax: --approve refused: this openmax was started by an agent (OPENMAX_AGENT_SESSION is set); a human must run it"
        );
        return 1;
    }
    let mut all = match inspect(project, path, is_builtin) {
        Ok(a) => vec![a],
        Err(e) => {
            let _ = writeln!(err, "openmax: cannot approve: {e}");
            return 1;
        }
    };
    // A file defining MCP servers also approves each server it defines (each by its own sha).
    let defined = mcp_servers_in(project, &all[0].source_path);
    if all[0].source_path == crate::mcp::config::MCP_JSON {
        all.clear();
    }
    all.extend(defined);
    for a in &all {
        let code = approve_one(a, store, &mut out, &mut err);
        if code != 0 {
            return code;
        }
    }
    0
}

/// The approvals of the MCP servers `rel` (`.mcp.json` or `.openmax/config.toml`) defines. A
/// definition that cannot be read is said on stderr and not approved.
fn mcp_servers_in(project: &Path, rel: &str) -> Vec<Approval> {
    let keys = crate::sandbox::scrub::names();
    let (defs, problems) =
        crate::mcp::load::defined_in(project, rel, &crate::mcp::config::Lookup::process(&keys));
    for p in problems {
        eprintln!("openmax: not approved: {p}");
    }
    defs.iter()
        .filter_map(|d| {
            let sha = crate::mcp::gate::source_sha256(d, project).ok()?;
            let mut files = vec![format!("{}#{} (MCP server {})", d.file, d.name, d.name)];
            files.extend(crate::mcp::gate::argv_files(d, project));
            Some(Approval {
                source_path: d.file.clone(),
                sha256: sha,
                env: d.env_grant(),
                files,
            })
        })
        .collect()
}

/// `openmax --approve PATH` whole: [`run`] for PATH (a tool with the files it runs, or each MCP
/// server a file defines), then every project hook whose command names PATH (every project
/// hook, when PATH is the project config), each printed before it is stored. The caller has
/// made sure a human runs it. Returns the exit code.
pub fn approve_path(
    home: &Path,
    state: &crate::session::ProjectState,
    path: &Path,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let code = run(
        state.project(),
        path,
        false,
        &crate::extensions::is_reserved,
        &|p, sha| state.approve_source(p, sha),
        &mut *out,
        &mut *err,
    );
    if code != 0 {
        return code;
    }
    approve_hooks(home, state, path, out, err)
}

/// Approve, as now defined, every project hook whose command names `path` (or every project
/// hook, when `path` is the project config), printing each definition.
fn approve_hooks(
    home: &Path,
    state: &crate::session::ProjectState,
    path: &Path,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let project = state.project();
    let Ok(rel) = inspect(project, path, &crate::extensions::is_reserved).map(|a| a.source_path)
    else {
        return 0;
    };
    let layers = match crate::config::load_layers(home, project) {
        Ok(l) => l,
        Err(e) => {
            let _ = writeln!(err, "openmax: project hooks not approved: {e}");
            return 1;
        }
    };
    let frozen = crate::hooks::freeze(&layers.hooks, project, &|_, _| false);
    for h in crate::hooks::naming(&frozen, &rel) {
        let Some((key, sha)) = &h.approval else {
            continue;
        };
        let matcher = match &h.config.matcher {
            Some(m) => format!(", match {m:?}"),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "approving project hook {} (sha {}): event {}, command {:?}, blocking {}, timeout {} ms{matcher}",
            h.name,
            short(sha),
            h.config.event.as_str(),
            h.config.command,
            h.config.blocking,
            h.config.timeout_ms()
        );
        let files: Vec<&str> = h.files.keys().map(String::as_str).collect();
        let _ = writeln!(
            out,
            "  covers: its definition in .openmax/config.toml, {}",
            files.join(", ")
        );
        if let Err(e) = state.approve_source(key, sha) {
            let _ = writeln!(
                err,
                "openmax: cannot save the approval of hook {}: {e}",
                h.name
            );
            return 1;
        }
    }
    0
}

fn approve_one<W: Write>(
    a: &Approval,
    store: &dyn Fn(&str, &str) -> std::io::Result<()>,
    mut out: W,
    mut err: impl Write,
) -> i32 {
    let _ = writeln!(
        out,
        "approving {} (sha {})",
        a.source_path,
        short(&a.sha256)
    );
    let _ = writeln!(out, "  covers: {}", a.files.join(", "));
    if a.env.is_empty() {
        let _ = writeln!(out, "  env grant: none");
    } else {
        let _ = writeln!(out, "  env grant: {}", a.env.join(", "));
    }
    match store(&a.source_path, &a.sha256) {
        Ok(()) => {
            let _ = writeln!(
                out,
                "approved: these exact bytes may run; any change asks again"
            );
            0
        }
        Err(e) => {
            let _ = writeln!(err, "openmax: cannot save the approval: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn approves_manifest_with_its_script_and_refuses_agents() {
        let p = crate::scratch::path("approve");
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join(".openmax/tools")).unwrap();
        let p = p.canonicalize().unwrap();
        std::fs::write(p.join(".openmax/tools/t.json"), r#"{"name":"t","description":"T","parameters":{"type":"object"},"command":["sh","t.sh"],"env":["TOKEN"]}"#).unwrap();
        std::fs::write(p.join("t.sh"), "echo\n").unwrap();
        let stored = RefCell::new(Vec::new());
        let store = |path: &str, sha: &str| {
            stored
                .borrow_mut()
                .push((path.to_string(), sha.to_string()));
            Ok(())
        };
        let mut out = Vec::new();
        let code = run(
            &p,
            &p.join(".openmax/tools/t.json"),
            false,
            &|_| false,
            &store,
            &mut out,
            std::io::sink(),
        );
        assert_eq!(code, 0);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("env grant: TOKEN") && text.contains("t.sh"),
            "{text}"
        );
        let tool = manifest::load_one(&p, &p.join(".openmax/tools/t.json"), &|_| false).unwrap();
        assert_eq!(
            stored.borrow()[0],
            (".openmax/tools/t.json".to_string(), tool.sha256)
        );
        let mut err = Vec::new();
        assert_eq!(
            run(
                &p,
                &p.join("t.sh"),
                true,
                &|_| false,
                &store,
                std::io::sink(),
                &mut err
            ),
            1
        );
        assert!(String::from_utf8(err)
            .unwrap()
            .contains("started by an agent"));
        assert_eq!(stored.borrow().len(), 1);
        assert!(inspect(&p, Path::new("/etc/hostname"), &|_| false).is_err());
        std::fs::remove_dir_all(&p).unwrap();
    }
}
