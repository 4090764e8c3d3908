//! MCP server definitions: `[mcp_servers.<name>]` in the user and the project config (the shape
//! Codex uses) and a project's `.mcp.json` (Claude Code's `mcpServers`).
//!
//! Invariants:
//! - Each entry is checked on its own: a bad one is one problem line naming the file, the server
//!   and the key, and every other server still loads.
//! - A server defined by the project (its `.openmax/config.toml` or `.mcp.json`) is external
//!   code: [`ServerDef::origin`] says so and the gate in [`super::gate`] applies.
//! - A project cannot redefine a server of the user's config (the user's stands); within the
//!   project, `.openmax/config.toml` wins over `.mcp.json`, and the loser is reported.
//! - A server's environment is only what its definition names: [`ServerDef::env`].

use std::collections::BTreeMap;
use std::path::Path;

use crate::hooks::Origin;

/// The project file Claude Code reads server definitions from.
pub const MCP_JSON: &str = ".mcp.json";
/// Defaults and bounds of the two timeouts, in seconds.
pub const DEFAULT_STARTUP_TIMEOUT_S: f64 = 10.0;
pub const DEFAULT_TOOL_TIMEOUT_S: f64 = 120.0;
pub const MAX_TIMEOUT_S: f64 = 3600.0;

/// How a variable of the server's environment gets its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvValue {
    /// Forwarded from openmax's own environment variable of this name (a credential grant).
    Forward(String),
    /// Written in the definition.
    Literal(String),
}

/// How openmax talks to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio { command: String, args: Vec<String> },
    /// Streamable HTTP. Header values may hold `${VAR}` (forwarded variables).
    Http {
        url: String,
        bearer_token_env: Option<String>,
        headers: Vec<(String, String)>,
    },
}

/// One configured MCP server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerDef {
    pub name: String,
    pub transport: Transport,
    /// The process environment beyond PATH, HOME and LANG (stdio), by variable name.
    pub env: BTreeMap<String, EnvValue>,
    pub startup_timeout_ms: u64,
    pub tool_timeout_ms: u64,
    pub origin: Origin,
    /// The defining file: absolute for the user config, project-relative for the project's.
    pub file: String,
    /// The definition as JSON (key order as written for `.mcp.json`, sorted for TOML): the bytes
    /// the approval of a project server covers, with the project files its argv names.
    pub definition: String,
}

impl ServerDef {
    /// The variables of openmax's environment this server receives (the credential grant an
    /// approval card shows), sorted, each once.
    pub fn env_grant(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .env
            .values()
            .filter_map(|v| match v {
                EnvValue::Forward(n) => Some(n.clone()),
                EnvValue::Literal(_) => None,
            })
            .collect();
        if let Transport::Http {
            bearer_token_env,
            headers,
            ..
        } = &self.transport
        {
            out.extend(bearer_token_env.iter().cloned());
            for (_, v) in headers {
                out.extend(template_vars(v));
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// `stdio` or `http`.
    pub fn transport_name(&self) -> &'static str {
        match self.transport {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

/// Every configured server: the `[mcp_servers]` tables of the config files (user first, as in
/// [`crate::config::Layers::mcp`]), then the project's `.mcp.json`. Returns the valid ones and
/// one problem line per bad entry.
pub fn load(
    tables: &[(std::path::PathBuf, Origin, toml::Table)],
    project: &Path,
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
    for (path, origin, table) in tables {
        let file = match origin {
            Origin::User => path.display().to_string(),
            Origin::Project => crate::extensions::manifest::relative(project, path),
        };
        for (name, value) in table {
            match parse_toml_entry(&file, *origin, name, value) {
                Ok(def) => add(def, &mut defs, &mut problems),
                Err(e) => problems.push(e),
            }
        }
    }
    match std::fs::read(project.join(MCP_JSON)) {
        Ok(bytes) => {
            let (found, bad) = parse_mcp_json(&bytes);
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

/// One `[mcp_servers.<name>]` table.
pub fn parse_toml_entry(
    file: &str,
    origin: Origin,
    name: &str,
    value: &toml::Value,
) -> Result<ServerDef, String> {
    let at = |key: &str, what: &str| format!("{file}: [mcp_servers.{name}] {key}: {what}");
    check_name(name).map_err(|e| format!("{file}: [mcp_servers.{name}]: {e}"))?;
    let Some(t) = value.as_table() else {
        return Err(format!(
            "{file}: mcp_servers.{name} must be a table ([mcp_servers.{name}])"
        ));
    };
    const KEYS: [&str; 9] = [
        "command",
        "args",
        "env",
        "env_allow",
        "startup_timeout_s",
        "tool_timeout_s",
        "url",
        "bearer_token_env",
        "http_headers",
    ];
    if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(at(
            k,
            &format!("unknown key (the keys are {})", KEYS.join(", ")),
        ));
    }
    let string = |key: &str| -> Result<Option<String>, String> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(at(key, "must be a string")),
        }
    };
    let strings = |key: &str| -> Result<Vec<String>, String> {
        match t.get(key) {
            None => Ok(Vec::new()),
            Some(toml::Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| at(key, "must be an array of strings"))
                })
                .collect(),
            Some(_) => Err(at(key, "must be an array of strings")),
        }
    };
    let string_map = |key: &str| -> Result<Vec<(String, String)>, String> {
        match t.get(key) {
            None => Ok(Vec::new()),
            Some(toml::Value::Table(m)) => m
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|s| (k.clone(), s.to_string()))
                        .ok_or_else(|| at(key, "values must be strings"))
                })
                .collect(),
            Some(_) => Err(at(key, "must be a table of strings")),
        }
    };
    let seconds = |key: &str, default: f64| -> Result<u64, String> {
        let s = match t.get(key) {
            None => default,
            Some(toml::Value::Integer(i)) => *i as f64,
            Some(toml::Value::Float(f)) => *f,
            Some(_) => return Err(at(key, "must be a number of seconds")),
        };
        timeout_ms(s).map_err(|e| at(key, &e))
    };
    let command = string("command")?;
    let url = string("url")?;
    let transport = match (command, url) {
        (Some(_), Some(_)) => return Err(at("url", "set either command (stdio) or url (http)")),
        (None, None) => return Err(at("command", "missing: set command (stdio) or url (http)")),
        (Some(command), None) => {
            if command.is_empty() {
                return Err(at("command", "is empty"));
            }
            for k in ["bearer_token_env", "http_headers"] {
                if t.contains_key(k) {
                    return Err(at(k, "only applies to a url (http) server"));
                }
            }
            Transport::Stdio {
                command,
                args: strings("args")?,
            }
        }
        (None, Some(url)) => {
            check_url(&url).map_err(|e| at("url", &e))?;
            for k in ["args", "env", "env_allow"] {
                if t.contains_key(k) {
                    return Err(at(k, "only applies to a command (stdio) server"));
                }
            }
            let bearer = string("bearer_token_env")?;
            if let Some(b) = &bearer {
                if !valid_env_name(b) {
                    return Err(at("bearer_token_env", "is not a variable name"));
                }
            }
            Transport::Http {
                url,
                bearer_token_env: bearer,
                headers: string_map("http_headers")?,
            }
        }
    };
    let mut env = BTreeMap::new();
    for n in strings("env_allow")? {
        if !valid_env_name(&n) {
            return Err(at("env_allow", &format!("{n:?} is not a variable name")));
        }
        env.insert(n.clone(), EnvValue::Forward(n));
    }
    for (k, v) in string_map("env")? {
        if !valid_env_name(&k) {
            return Err(at("env", &format!("{k:?} is not a variable name")));
        }
        env.insert(k, env_value(&v));
    }
    let definition = serde_json::to_string(&toml_to_json(value)).unwrap_or_default();
    Ok(ServerDef {
        name: name.to_string(),
        transport,
        env,
        startup_timeout_ms: seconds("startup_timeout_s", DEFAULT_STARTUP_TIMEOUT_S)?,
        tool_timeout_ms: seconds("tool_timeout_s", DEFAULT_TOOL_TIMEOUT_S)?,
        origin,
        file: file.to_string(),
        definition,
    })
}

/// A project's `.mcp.json`: `{"mcpServers": {"<name>": {"command", "args", "env"} or
/// {"type": "http", "url", "headers"}}}`. An env or header value `${VAR}` forwards VAR.
pub fn parse_mcp_json(bytes: &[u8]) -> (Vec<ServerDef>, Vec<String>) {
    let file = MCP_JSON;
    let root: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return (Vec::new(), vec![format!("{file}: invalid JSON: {e}")]),
    };
    let Some(servers) = root.get("mcpServers") else {
        return (
            Vec::new(),
            vec![format!("{file}: no \"mcpServers\" object")],
        );
    };
    let Some(servers) = servers.as_object() else {
        return (
            Vec::new(),
            vec![format!("{file}: \"mcpServers\" must be an object")],
        );
    };
    let mut defs = Vec::new();
    let mut problems = Vec::new();
    for (name, entry) in servers {
        match parse_json_entry(name, entry) {
            Ok(d) => defs.push(d),
            Err(e) => problems.push(e),
        }
    }
    (defs, problems)
}

fn parse_json_entry(name: &str, entry: &serde_json::Value) -> Result<ServerDef, String> {
    let file = MCP_JSON;
    let at = |key: &str, what: &str| format!("{file}: mcpServers.{name}.{key}: {what}");
    check_name(name).map_err(|e| format!("{file}: mcpServers.{name}: {e}"))?;
    let Some(o) = entry.as_object() else {
        return Err(format!("{file}: mcpServers.{name} must be an object"));
    };
    const KEYS: [&str; 6] = ["type", "command", "args", "env", "url", "headers"];
    if let Some(k) = o.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(at(
            k,
            &format!("unknown key (the keys are {})", KEYS.join(", ")),
        ));
    }
    let string = |key: &str| -> Result<Option<String>, String> {
        match o.get(key) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(at(key, "must be a string")),
        }
    };
    let string_map = |key: &str| -> Result<Vec<(String, String)>, String> {
        match o.get(key) {
            None => Ok(Vec::new()),
            Some(serde_json::Value::Object(m)) => m
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|s| (k.clone(), s.to_string()))
                        .ok_or_else(|| at(key, "values must be strings"))
                })
                .collect(),
            Some(_) => Err(at(key, "must be an object of strings")),
        }
    };
    let kind = string("type")?;
    let http = match kind.as_deref() {
        None => o.contains_key("url") && !o.contains_key("command"),
        Some("stdio") => false,
        Some("http") | Some("streamable-http") => true,
        Some(other) => {
            return Err(at(
                "type",
                &format!("{other:?} is not supported (use \"stdio\" or \"http\")"),
            ))
        }
    };
    let mut env = BTreeMap::new();
    let transport = if http {
        let url = string("url")?.ok_or_else(|| at("url", "missing"))?;
        check_url(&url).map_err(|e| at("url", &e))?;
        for k in ["command", "args", "env"] {
            if o.contains_key(k) {
                return Err(at(k, "only applies to a stdio server"));
            }
        }
        Transport::Http {
            url,
            bearer_token_env: None,
            headers: string_map("headers")?,
        }
    } else {
        let command = string("command")?.ok_or_else(|| at("command", "missing"))?;
        if command.is_empty() {
            return Err(at("command", "is empty"));
        }
        if o.contains_key("headers") || o.contains_key("url") {
            return Err(at("url", "only applies to an http server"));
        }
        let args = match o.get("args") {
            None => Vec::new(),
            Some(serde_json::Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| at("args", "must be an array of strings"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(at("args", "must be an array of strings")),
        };
        for (k, v) in string_map("env")? {
            if !valid_env_name(&k) {
                return Err(at("env", &format!("{k:?} is not a variable name")));
            }
            env.insert(k, env_value(&v));
        }
        Transport::Stdio { command, args }
    };
    Ok(ServerDef {
        name: name.to_string(),
        transport,
        env,
        startup_timeout_ms: timeout_ms(DEFAULT_STARTUP_TIMEOUT_S).unwrap_or(10_000),
        tool_timeout_ms: timeout_ms(DEFAULT_TOOL_TIMEOUT_S).unwrap_or(120_000),
        origin: Origin::Project,
        file: file.to_string(),
        definition: serde_json::to_string(entry).unwrap_or_default(),
    })
}

/// `${VAR}` alone forwards VAR; anything else is a literal.
fn env_value(v: &str) -> EnvValue {
    match v.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
        Some(n) if valid_env_name(n) => EnvValue::Forward(n.to_string()),
        _ => EnvValue::Literal(v.to_string()),
    }
}

/// The variables a `${VAR}` template names.
pub fn template_vars(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        let after = &rest[i + 2..];
        match after.find('}') {
            Some(j) if valid_env_name(&after[..j]) => {
                out.push(after[..j].to_string());
                rest = &after[j + 1..];
            }
            _ => break,
        }
    }
    out
}

/// Expand `${VAR}` with `get`; an unset variable becomes empty.
pub fn expand(s: &str, get: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = s.to_string();
    for v in template_vars(s) {
        out = out.replace(&format!("${{{v}}}"), &get(&v).unwrap_or_default());
    }
    out
}

fn timeout_ms(s: f64) -> Result<u64, String> {
    if !s.is_finite() || s <= 0.0 || s > MAX_TIMEOUT_S {
        return Err(format!(
            "must be more than 0 and at most {MAX_TIMEOUT_S} seconds"
        ));
    }
    Ok(((s * 1000.0).round() as u64).max(1))
}

/// A server name is part of every tool name (`mcp__<server>__<tool>`): letters, digits, `_` and
/// `-`, no `__`, at most 32 characters.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && !name.contains("__")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err("invalid server name: use 1-32 letters, digits, '_' or '-' (no \"__\")".into())
    }
}

pub fn check_url(url: &str) -> Result<(), String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(format!("{url:?} is not an http:// or https:// URL"))
    }
}

/// A POSIX-style variable name: a letter or `_`, then letters, digits or `_`.
pub fn valid_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn toml_to_json(v: &toml::Value) -> serde_json::Value {
    match v {
        toml::Value::String(s) => s.clone().into(),
        toml::Value::Integer(i) => (*i).into(),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
        toml::Value::Boolean(b) => (*b).into(),
        toml::Value::Datetime(d) => d.to_string().into(),
        toml::Value::Array(a) => a.iter().map(toml_to_json).collect(),
        toml::Value::Table(t) => t
            .iter()
            .map(|(k, v)| (k.clone(), toml_to_json(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        toml::from_str::<toml::Table>(text).unwrap()["mcp_servers"]
            .as_table()
            .unwrap()
            .clone()
    }

    #[test]
    fn toml_entries_each_checked_alone() {
        let t = table(
            r#"
[mcp_servers.everything]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything"]
env_allow = ["GITHUB_TOKEN"]
startup_timeout_s = 5
tool_timeout_s = 0.5

[mcp_servers.remote]
url = "https://example.invalid/mcp"
bearer_token_env = "REMOTE_TOKEN"

[mcp_servers.typo]
command = "x"
tool_timeout = 3

[mcp_servers.both]
command = "x"
url = "http://a"

[mcp_servers."bad__name"]
command = "x"
"#,
        );
        let path = std::path::PathBuf::from("/home/u/.openmax/config.toml");
        let (defs, problems) = load(&[(path, Origin::User, t)], Path::new("/nonexistent"));
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, vec!["everything", "remote"], "{problems:?}");
        assert_eq!(defs[0].tool_timeout_ms, 500);
        assert_eq!(defs[0].startup_timeout_ms, 5000);
        assert_eq!(defs[0].env_grant(), vec!["GITHUB_TOKEN".to_string()]);
        assert_eq!(defs[1].env_grant(), vec!["REMOTE_TOKEN".to_string()]);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems
            .iter()
            .any(|p| p.contains("/home/u/.openmax/config.toml")
                && p.contains("[mcp_servers.typo] tool_timeout")
                && p.contains("unknown key")));
        assert!(problems
            .iter()
            .any(|p| p.contains("[mcp_servers.both] url")));
        assert!(problems.iter().any(|p| p.contains("invalid server name")));
    }

    #[test]
    fn mcp_json_in_claude_code_format() {
        let (defs, problems) = parse_mcp_json(
            br#"{"mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "srv", "."], "env": {"TOKEN": "${MY_TOKEN}", "MODE": "ro"}},
                "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}},
                "bad": {"command": 3},
                "odd": {"type": "sse", "url": "http://x"}
            }}"#,
        );
        assert_eq!(defs.len(), 2, "{problems:?}");
        assert_eq!(defs[0].env_grant(), vec!["MY_TOKEN".to_string()]);
        assert_eq!(
            defs[0].env.get("MODE"),
            Some(&EnvValue::Literal("ro".into()))
        );
        assert_eq!(defs[0].origin, Origin::Project);
        assert_eq!(
            defs[0].definition,
            r#"{"command":"npx","args":["-y","srv","."],"env":{"TOKEN":"${MY_TOKEN}","MODE":"ro"}}"#
        );
        assert_eq!(defs[1].env_grant(), vec!["WEB_TOKEN".to_string()]);
        assert!(problems
            .iter()
            .any(|p| p.contains("mcpServers.bad.command") && p.contains("string")));
        assert!(problems.iter().any(|p| p.contains("mcpServers.odd.type")));
        let (none, p) = parse_mcp_json(b"{not json");
        assert!(none.is_empty() && p[0].contains(".mcp.json: invalid JSON"));
        assert_eq!(
            expand("Bearer ${T}", &|k| (k == "T").then(|| "x".to_string())),
            "Bearer x"
        );
    }

    #[test]
    fn project_cannot_redefine_a_user_server() {
        let user = table("[mcp_servers.a]\ncommand = \"user-a\"\n");
        let proj = table("[mcp_servers.a]\ncommand = \"project-a\"\n");
        let (defs, problems) = load(
            &[
                ("/h/config.toml".into(), Origin::User, user),
                ("/p/.openmax/config.toml".into(), Origin::Project, proj),
            ],
            Path::new("/p"),
        );
        assert_eq!(defs.len(), 1);
        assert_eq!(defs[0].origin, Origin::User);
        assert!(problems[0].contains(".openmax/config.toml") && problems[0].contains("already"));
    }
}
