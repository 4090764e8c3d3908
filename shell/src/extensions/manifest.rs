//! External tool manifests: `.openmax/tools/<name>.json`.
//!
//! ```json
//! {"name": "lint", "description": "Run the linter", "parameters": {"type": "object", …},
//!  "command": ["python3", "tools/lint.py"], "mutating": false, "env": ["LINT_TOKEN"],
//!  "timeout_s": 60}
//! ```
//! `name` must equal the file stem and not shadow a built-in tool; `parameters` is the JSON
//! Schema of the arguments object; `command` is an argv (no shell); `env` is the allowlist of
//! variables the tool receives beside PATH, HOME and LANG (the credential grant an approval card
//! shows); `timeout_s` defaults to 60. Unknown fields are errors, so a typo never silently drops
//! a setting.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::source;

/// Where manifests live, relative to the project.
pub const TOOLS_DIR: &str = ".openmax/tools";
/// Default and largest per-call timeout.
pub const DEFAULT_TIMEOUT_S: u64 = 60;
pub const MAX_TIMEOUT_S: u64 = 3600;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    name: String,
    description: String,
    parameters: serde_json::Value,
    command: Vec<String>,
    #[serde(default)]
    mutating: bool,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    timeout_s: Option<u64>,
}

/// A validated external tool as frozen.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalTool {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
    pub command: Vec<String>,
    pub mutating: bool,
    pub env: Vec<String>,
    pub timeout_ms: u64,
    /// Project-relative path of the manifest (the `source_path` on the wire).
    pub manifest_path: String,
    /// Manifest first, then every project file the argv names: what the sha covers.
    pub source_files: Vec<String>,
    /// Full hex sha256 over `source_files` when frozen.
    pub sha256: String,
}

impl ExternalTool {
    /// The tool's schema as the model sees it.
    pub fn schema(&self) -> openmax_core::conversation::ToolSchema {
        openmax_core::conversation::ToolSchema {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }

    /// The sha over the source files as they are now (they may have changed since the freeze).
    pub fn current_sha256(&self, project: &Path) -> Result<String, String> {
        source::source_sha256(project, &self.source_files)
    }
}

/// Load every manifest in the project. Returns the valid tools (sorted by name) and one
/// problem line per broken manifest (naming the file), so the others still load.
pub fn load_all(
    project: &Path,
    is_builtin: &dyn Fn(&str) -> bool,
) -> (Vec<ExternalTool>, Vec<String>) {
    let dir = project.join(TOOLS_DIR);
    let mut tools = Vec::new();
    let mut problems = Vec::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (tools, problems),
        Err(e) => {
            problems.push(format!("{TOOLS_DIR}: cannot list external tools: {e}"));
            return (tools, problems);
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    // A tool's name is its file's stem (`load_one` refuses any other), so no two are alike.
    for path in paths {
        match load_one(project, &path, is_builtin) {
            Ok(tool) => tools.push(tool),
            Err(e) => problems.push(e),
        }
    }
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    (tools, problems)
}

/// Load and validate one manifest; the error names the file and what is wrong.
pub fn load_one(
    project: &Path,
    path: &Path,
    is_builtin: &dyn Fn(&str) -> bool,
) -> Result<ExternalTool, String> {
    let rel = relative(project, path);
    let bytes = std::fs::read(path).map_err(|e| format!("{rel}: cannot read: {e}"))?;
    let m: ManifestFile =
        serde_json::from_slice(&bytes).map_err(|e| format!("{rel}: invalid manifest: {e}"))?;
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if !valid_name(&m.name) {
        return Err(format!(
            "{rel}: invalid name {:?}: use 1-64 letters, digits, '_' or '-'",
            m.name
        ));
    }
    if m.name != stem {
        return Err(format!(
            "{rel}: name {:?} must equal the file name {:?}",
            m.name, stem
        ));
    }
    if is_builtin(&m.name) {
        return Err(format!("{rel}: name {:?} is a built-in tool", m.name));
    }
    if m.description.trim().is_empty() {
        return Err(format!("{rel}: description is empty"));
    }
    match m.parameters.get("type") {
        Some(serde_json::Value::String(t)) if t == "object" && m.parameters.is_object() => {}
        _ => {
            return Err(format!(
                "{rel}: parameters must be a JSON Schema object with \"type\": \"object\""
            ))
        }
    }
    if m.command.is_empty() || m.command[0].is_empty() {
        return Err(format!("{rel}: command must be a non-empty argv array"));
    }
    if let Some(bad) = m
        .env
        .iter()
        .find(|v| !crate::mcp::template::valid_env_name(v))
    {
        return Err(format!("{rel}: env entry {bad:?} is not a variable name"));
    }
    let timeout_s = m.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
    if timeout_s == 0 || timeout_s > MAX_TIMEOUT_S {
        return Err(format!(
            "{rel}: timeout_s must be between 1 and {MAX_TIMEOUT_S}"
        ));
    }
    let mut source_files = vec![rel.clone()];
    for arg in &m.command {
        if let Some(file) = project_file(project, arg) {
            if !source_files.contains(&file) {
                source_files.push(file);
            }
        }
    }
    let sha256 =
        source::source_sha256(project, &source_files).map_err(|e| format!("{rel}: {e}"))?;
    Ok(ExternalTool {
        name: m.name,
        description: m.description,
        parameters: m.parameters,
        command: m.command,
        mutating: m.mutating,
        env: m.env,
        timeout_ms: timeout_s * 1000,
        manifest_path: rel,
        source_files,
        sha256,
    })
}

/// The project-relative path of a regular file inside the project that `arg` names, if any:
/// the word itself, or what follows its first `=` (an option's value, `--require=./x.js`, or
/// an assignment's, `CONFIG=ci.toml`). Symlinks are resolved, so a link out of the project is
/// not a project file. A word that looks like an option still counts when it is a file:
/// hashing one file too many only asks more.
pub(crate) fn project_file(project: &Path, arg: &str) -> Option<String> {
    file_inside(project, arg).or_else(|| {
        let (_, value) = arg.split_once('=')?;
        file_inside(project, value)
    })
}

fn file_inside(project: &Path, arg: &str) -> Option<String> {
    if arg.is_empty() {
        return None;
    }
    let candidate = if Path::new(arg).is_absolute() {
        PathBuf::from(arg)
    } else {
        project.join(arg)
    };
    let real = candidate.canonicalize().ok()?;
    if !real.is_file() {
        return None;
    }
    let rel = real.strip_prefix(project).ok()?;
    Some(rel.to_string_lossy().into_owned())
}

/// `path` relative to the project when inside it, else as given.
pub fn relative(project: &Path, path: &Path) -> String {
    path.strip_prefix(project)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(tag: &str) -> PathBuf {
        let dir = crate::scratch::path(&format!("manifest-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(TOOLS_DIR)).unwrap();
        dir.canonicalize().unwrap()
    }

    fn write(p: &Path, rel: &str, s: &str) {
        std::fs::create_dir_all(p.join(rel).parent().unwrap()).unwrap();
        std::fs::write(p.join(rel), s).unwrap();
    }

    const GOOD: &str = r#"{"name":"lint","description":"Lint","parameters":{"type":"object"},"command":["sh","tools/lint.sh"],"env":["LINT_TOKEN"]}"#;

    #[test]
    fn parameters_must_be_an_object_schema() {
        let p = project("params");
        write(&p, "tools/lint.sh", "echo hi\n");
        for (i, params) in [
            r#"{"type":"string"}"#,
            r#"{"properties":{}}"#,
            r#"{"type":["object"]}"#,
        ]
        .iter()
        .enumerate()
        {
            write(
                &p,
                &format!(".openmax/tools/t{i}.json"),
                &GOOD
                    .replace(r#"{"type":"object"}"#, params)
                    .replace(r#""name":"lint""#, &format!(r#""name":"t{i}""#)),
            );
        }
        let (tools, problems) = load_all(&p, &|_| false);
        assert!(tools.is_empty(), "{tools:?}");
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems
                .iter()
                .all(|m| m.contains("parameters must be a JSON Schema object")),
            "{problems:?}"
        );
    }

    #[test]
    fn no_tools_directory_is_no_problem_and_an_unlistable_one_is() {
        let p = crate::scratch::path("manifest-dir");
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join(".openmax")).unwrap();
        let none = |_: &str| false;
        let (tools, problems) = load_all(&p, &none);
        assert!(tools.is_empty() && problems.is_empty(), "{problems:?}");
        std::fs::write(p.join(TOOLS_DIR), "not a directory").unwrap();
        let (tools, problems) = load_all(&p, &none);
        assert!(tools.is_empty());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with(&format!("{TOOLS_DIR}: cannot list external tools")),
            "{}",
            problems[0]
        );
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn loads_good_and_reports_broken_ones() {
        let p = project("mix");
        write(&p, ".openmax/tools/lint.json", GOOD);
        write(&p, "tools/lint.sh", "echo hi\n");
        write(&p, ".openmax/tools/bad.json", "{not json");
        write(
            &p,
            ".openmax/tools/other.json",
            r#"{"name":"nope","description":"x","parameters":{"type":"object"},"command":["x"]}"#,
        );
        write(
            &p,
            ".openmax/tools/read_file.json",
            r#"{"name":"read_file","description":"x","parameters":{"type":"object"},"command":["x"]}"#,
        );
        write(
            &p,
            ".openmax/tools/typo.json",
            r#"{"name":"typo","description":"x","parameters":{"type":"object"},"command":["x"],"mutatin":true}"#,
        );
        // Two more good ones; `lint-2.json` sorts before `lint.json`, its name after `lint`.
        for name in ["fmt", "lint-2"] {
            write(
                &p,
                &format!(".openmax/tools/{name}.json"),
                &GOOD.replace(r#""name":"lint""#, &format!(r#""name":"{name}""#)),
            );
        }
        let (tools, problems) = load_all(&p, &|n| n == "read_file");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["fmt", "lint", "lint-2"],
            "in name order: {problems:?}"
        );
        let t = &tools[1];
        assert_eq!(
            t.source_files,
            vec![
                ".openmax/tools/lint.json".to_string(),
                "tools/lint.sh".to_string()
            ]
        );
        assert_eq!(t.timeout_ms, 60_000);
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems
            .iter()
            .any(|e| e.contains("bad.json") && e.contains("invalid manifest")));
        assert!(problems
            .iter()
            .any(|e| e.contains("other.json") && e.contains("must equal")));
        assert!(problems
            .iter()
            .any(|e| e.contains("read_file.json") && e.contains("built-in")));
        assert!(problems
            .iter()
            .any(|e| e.contains("typo.json") && e.contains("mutatin")));
        // Editing the script changes the sha.
        let before = t.sha256.clone();
        write(&p, "tools/lint.sh", "echo changed\n");
        assert_ne!(t.current_sha256(&p).unwrap(), before);
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn timeout_is_between_one_second_and_the_maximum_both_included() {
        let p = project("timeout");
        write(&p, "tools/lint.sh", "echo hi\n");
        for (secs, want) in [
            (0, None),
            (1, Some(1_000)),
            (MAX_TIMEOUT_S, Some(MAX_TIMEOUT_S * 1000)),
            (MAX_TIMEOUT_S + 1, None),
        ] {
            let manifest = GOOD.replace(r#""env""#, &format!(r#""timeout_s":{secs},"env""#));
            write(&p, ".openmax/tools/lint.json", &manifest);
            let (tools, problems) = load_all(&p, &|_| false);
            match want {
                Some(ms) => {
                    assert!(problems.is_empty(), "{secs}: {problems:?}");
                    assert_eq!(tools[0].timeout_ms, ms, "{secs}");
                }
                None => {
                    assert!(tools.is_empty(), "{secs}: {tools:?}");
                    assert_eq!(
                        problems,
                        vec![format!(
                            ".openmax/tools/lint.json: timeout_s must be between 1 and {MAX_TIMEOUT_S}"
                        )],
                        "{secs}"
                    );
                }
            }
        }
        std::fs::remove_dir_all(&p).unwrap();
    }
}
