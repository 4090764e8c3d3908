//! One `[mcp_servers.<name>]` table of a `config.toml`, in the shape Codex documents, so a
//! block copied from `~/.codex/config.toml` works unchanged: `command`, `args`, `env`,
//! `env_vars`, `cwd`, `url`, `bearer_token_env_var`, `http_headers`, `env_http_headers`,
//! `startup_timeout_sec`, `tool_timeout_sec`, `enabled`, `enabled_tools`, `disabled_tools`.
//! openmax's own spellings of four of them (`env_allow`, `bearer_token_env`,
//! `startup_timeout_s`, `tool_timeout_s`) are accepted too ([`KEYS`]); one entry may not use
//! both spellings of one key.
//!
//! Invariant: every fault names the file, the line, the server and the key; every unknown key
//! of an entry is reported at once, with the keys accepted.

use std::collections::BTreeMap;
use std::path::Path;

use super::config::{
    check_name, check_url, timeout_ms, EnvValue, Lookup, ServerDef, ToolFilter, Transport,
    DEFAULT_STARTUP_TIMEOUT_S, DEFAULT_TOOL_TIMEOUT_S,
};
use super::template::{self, valid_env_name};
use crate::config::keys::Lines;
use crate::hooks::Origin;

/// Every key an entry accepts: openmax's name, and Codex's where it differs.
pub const KEYS: [(&str, Option<&str>); 14] = [
    ("command", None),
    ("args", None),
    ("env", None),
    ("env_allow", Some("env_vars")),
    ("cwd", None),
    ("url", None),
    ("bearer_token_env", Some("bearer_token_env_var")),
    ("http_headers", None),
    ("env_http_headers", None),
    ("startup_timeout_s", Some("startup_timeout_sec")),
    ("tool_timeout_s", Some("tool_timeout_sec")),
    ("enabled", None),
    ("enabled_tools", None),
    ("disabled_tools", None),
];

/// Where an entry is.
pub struct Entry<'a> {
    /// The file as shown (absolute for the user's, project-relative for the project's).
    pub file: &'a str,
    pub origin: Origin,
    pub name: &'a str,
    pub lines: &'a Lines,
    pub project: &'a Path,
}

impl Entry<'_> {
    fn at(&self, key: &str, what: &str) -> String {
        let line = self
            .lines
            .get(&["mcp_servers", self.name, key])
            .or_else(|| self.lines.get(&["mcp_servers", self.name]));
        let place = match line {
            Some(l) => format!("{}:{l}", self.file),
            None => self.file.to_string(),
        };
        format!("{place}: [mcp_servers.{}] {key}: {what}", self.name)
    }

    /// A fault of the whole entry.
    fn whole(&self, what: &str) -> String {
        match self.lines.get(&["mcp_servers", self.name]) {
            Some(l) => format!("{}:{l}: [mcp_servers.{}]: {what}", self.file, self.name),
            None => format!("{}: [mcp_servers.{}]: {what}", self.file, self.name),
        }
    }
}

/// The accepted keys, both spellings, for messages.
fn accepted() -> String {
    KEYS.iter()
        .flat_map(|(k, codex)| std::iter::once(*k).chain(*codex))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parse one entry; every problem found when it cannot be used.
pub fn parse(e: &Entry, value: &toml::Value, lookup: &Lookup) -> Result<ServerDef, Vec<String>> {
    let name = e.name;
    check_name(name).map_err(|why| vec![e.whole(&why)])?;
    let Some(t) = value.as_table() else {
        return Err(vec![format!(
            "{}: mcp_servers.{name} must be a table ([mcp_servers.{name}])",
            e.file
        )]);
    };
    let unknown: Vec<String> = t
        .keys()
        .filter(|k| {
            !KEYS
                .iter()
                .any(|(ours, codex)| k.as_str() == *ours || Some(k.as_str()) == *codex)
        })
        .map(|k| e.at(k, &format!("unknown key (the keys are {})", accepted())))
        .collect();
    if !unknown.is_empty() {
        return Err(unknown);
    }
    parse_known(e, t, value, lookup).map_err(|p| vec![p])
}

fn parse_known(
    e: &Entry,
    t: &toml::Table,
    value: &toml::Value,
    lookup: &Lookup,
) -> Result<ServerDef, String> {
    // The spelling used for each key, refusing both at once.
    let mut spelled: BTreeMap<&str, &str> = BTreeMap::new();
    for (ours, codex) in KEYS {
        match (t.contains_key(ours), codex.filter(|c| t.contains_key(*c))) {
            (true, Some(c)) => {
                return Err(e.at(c, &format!("set either {ours} or {c} (the same key)")));
            }
            (_, Some(c)) => {
                spelled.insert(ours, c);
            }
            _ => {
                spelled.insert(ours, ours);
            }
        }
    }
    let key = |k: &str| spelled.get(k).copied().unwrap_or("?");
    let get = |k: &str| t.get(key(k));
    let string = |k: &str| -> Result<Option<String>, String> {
        match get(k) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(e.at(key(k), "must be a string")),
        }
    };
    let strings = |k: &str| -> Result<Option<Vec<String>>, String> {
        match get(k) {
            None => Ok(None),
            Some(toml::Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| e.at(key(k), "must be an array of strings"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(e.at(key(k), "must be an array of strings")),
        }
    };
    let string_map = |k: &str| -> Result<Vec<(String, String)>, String> {
        match get(k) {
            None => Ok(Vec::new()),
            Some(toml::Value::Table(m)) => m
                .iter()
                .map(|(mk, v)| {
                    v.as_str()
                        .map(|s| (mk.clone(), s.to_string()))
                        .ok_or_else(|| e.at(key(k), "values must be strings"))
                })
                .collect(),
            Some(_) => Err(e.at(key(k), "must be a table of strings")),
        }
    };
    let seconds = |k: &str, default: f64| -> Result<u64, String> {
        let s = match get(k) {
            None => default,
            Some(toml::Value::Integer(i)) => *i as f64,
            Some(toml::Value::Float(f)) => *f,
            Some(_) => return Err(e.at(key(k), "must be a number of seconds")),
        };
        timeout_ms(s).map_err(|why| e.at(key(k), &why))
    };
    let var_name = |k: &str, n: &str| -> Result<(), String> {
        if valid_env_name(n) {
            Ok(())
        } else {
            Err(e.at(key(k), &format!("{n:?} is not a variable name")))
        }
    };
    let only = |keys: &[&str], applies: &str| -> Result<(), String> {
        match keys.iter().find(|k| get(k).is_some()) {
            Some(k) => Err(e.at(key(k), &format!("only applies to {applies}"))),
            None => Ok(()),
        }
    };
    let transport = match (string("command")?, string("url")?) {
        (Some(_), Some(_)) => return Err(e.at("url", "set either command (stdio) or url (http)")),
        (None, None) => return Err(e.at("command", "missing: set command (stdio) or url (http)")),
        (Some(command), None) => {
            if command.is_empty() {
                return Err(e.at("command", "is empty"));
            }
            only(
                &["bearer_token_env", "http_headers", "env_http_headers"],
                "a url (http) server",
            )?;
            Transport::Stdio {
                command,
                args: strings("args")?.unwrap_or_default(),
            }
        }
        (None, Some(url)) => {
            check_url(&url).map_err(|why| e.at("url", &why))?;
            only(
                &["args", "env", "env_allow", "cwd"],
                "a command (stdio) server",
            )?;
            let bearer = string("bearer_token_env")?;
            if let Some(b) = &bearer {
                var_name("bearer_token_env", b)?;
            }
            let env_headers = string_map("env_http_headers")?;
            for (_, var) in &env_headers {
                var_name("env_http_headers", var)?;
            }
            Transport::Http {
                url,
                bearer_token_env: bearer,
                headers: string_map("http_headers")?,
                env_headers,
            }
        }
    };
    let mut env = BTreeMap::new();
    for n in strings("env_allow")?.unwrap_or_default() {
        var_name("env_allow", &n)?;
        env.insert(n.clone(), EnvValue::Forward(n));
    }
    for (k, v) in string_map("env")? {
        var_name("env", &k)?;
        let value = match template::whole_var(&v) {
            Some(n) => EnvValue::Forward(n.to_string()),
            None if !template::vars(&v).is_empty() => EnvValue::Template(v),
            None => EnvValue::Literal(v),
        };
        env.insert(k, value);
    }
    let enabled = match get("enabled") {
        None => true,
        Some(toml::Value::Boolean(b)) => *b,
        Some(_) => return Err(e.at("enabled", "must be true or false")),
    };
    let cwd = string("cwd")?.map(|c| e.project.join(c));
    let mut def = ServerDef::new(
        e.name,
        transport,
        e.origin,
        e.file,
        serde_json::to_string(&toml_to_json(value)).unwrap_or_default(),
    );
    def.env = env;
    def.startup_timeout_ms = seconds("startup_timeout_s", DEFAULT_STARTUP_TIMEOUT_S)?;
    def.tool_timeout_ms = seconds("tool_timeout_s", DEFAULT_TOOL_TIMEOUT_S)?;
    def.enabled = enabled;
    def.tools = ToolFilter {
        enabled: strings("enabled_tools")?,
        disabled: strings("disabled_tools")?.unwrap_or_default(),
    };
    def.cwd = cwd;
    lookup
        .check(e.origin, &def.env_grant())
        .map_err(|why| e.whole(&why))?;
    Ok(def)
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
    use crate::mcp::config::McpSource;
    use crate::mcp::load::load;

    fn env(k: &str) -> Option<String> {
        (k == "SET").then(|| "v".to_string())
    }

    fn run(origin: Origin, text: &str) -> (Vec<ServerDef>, Vec<String>) {
        let keys = vec!["ANTHROPIC_API_KEY".to_string()];
        let lookup = Lookup {
            get: &env,
            provider_keys: &keys,
        };
        let path = match origin {
            Origin::User => "/home/u/.openmax/config.toml",
            Origin::Project => "/p/.openmax/config.toml",
        };
        let src = McpSource {
            path: path.into(),
            origin,
            table: toml::from_str::<toml::Table>(text).unwrap()["mcp_servers"]
                .as_table()
                .unwrap()
                .clone(),
            lines: Lines::of(text),
        };
        load(&[src], Path::new("/p"), &lookup)
    }

    #[test]
    fn entries_each_checked_alone_every_unknown_key_with_its_line() {
        let (defs, problems) = run(
            Origin::User,
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
argz = []

[mcp_servers.both]
command = "x"
url = "http://a"

[mcp_servers.twice]
command = "x"
tool_timeout_s = 1
tool_timeout_sec = 2

[mcp_servers."bad__name"]
command = "x"
"#,
        );
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, vec!["everything", "remote"], "{problems:#?}");
        assert_eq!(defs[0].tool_timeout_ms, 500);
        assert_eq!(defs[0].startup_timeout_ms, 5000);
        assert_eq!(defs[0].env_grant(), vec!["GITHUB_TOKEN".to_string()]);
        assert_eq!(defs[1].env_grant(), vec!["REMOTE_TOKEN".to_string()]);
        assert_eq!(problems.len(), 5, "{problems:#?}");
        let has = |s: &str| problems.iter().any(|p| p.contains(s));
        assert!(has(
            "/home/u/.openmax/config.toml:15: [mcp_servers.typo] tool_timeout: unknown key"
        ));
        assert!(has(
            "/home/u/.openmax/config.toml:16: [mcp_servers.typo] argz: unknown key"
        ));
        assert!(has("tool_timeout_sec, enabled"), "{problems:#?}");
        assert!(has("[mcp_servers.both] url"));
        assert!(has(
            "[mcp_servers.twice] tool_timeout_sec: set either tool_timeout_s or"
        ));
        assert!(has("invalid server name"));
    }

    #[test]
    fn codex_spellings_filters_and_switches() {
        let (defs, problems) = run(
            Origin::User,
            r#"
[mcp_servers.docs]
command = "docs-server"
args = ["--port", "4000"]
env = { "API_KEY" = "value", "FWD" = "${SET}", "MIX" = "a-${SET:-d}" }
env_vars = ["API_KEY2"]
cwd = "tools"
startup_timeout_sec = 20
tool_timeout_sec = 30
enabled = false
enabled_tools = ["search", "summarize"]
disabled_tools = ["search"]

[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"
bearer_token_env_var = "ENV_VAR"
http_headers = { "HEADER_NAME" = "HEADER_VALUE" }
env_http_headers = { "X-Auth" = "AUTH_VAR" }
"#,
        );
        assert!(problems.is_empty(), "{problems:#?}");
        let d = &defs[0];
        assert_eq!(
            (d.startup_timeout_ms, d.tool_timeout_ms, d.enabled),
            (20_000, 30_000, false)
        );
        assert_eq!(d.cwd.as_deref(), Some(Path::new("/p/tools")));
        assert!(d.tools.allows("summarize") && !d.tools.allows("search") && !d.tools.allows("x"));
        assert_eq!(d.env["API_KEY"], EnvValue::Literal("value".into()));
        assert_eq!(d.env["FWD"], EnvValue::Forward("SET".into()));
        assert_eq!(d.env["MIX"], EnvValue::Template("a-${SET:-d}".into()));
        assert_eq!(d.env_grant(), vec!["API_KEY2", "SET"]);
        let Transport::Http { env_headers, .. } = &defs[1].transport else {
            panic!("{:?}", defs[1].transport)
        };
        assert_eq!(
            env_headers,
            &vec![("X-Auth".to_string(), "AUTH_VAR".to_string())]
        );
        assert_eq!(defs[1].env_grant(), vec!["AUTH_VAR", "ENV_VAR"]);
    }

    /// The examples of Codex's own documentation, as copied in `tests/fixtures`, read unchanged.
    #[test]
    fn the_codex_documentation_block_reads_unchanged() {
        let (defs, problems) = run(
            Origin::User,
            include_str!("../../../tests/fixtures/codex-config.toml"),
        );
        assert!(problems.is_empty(), "{problems:#?}");
        let by = |n: &str| defs.iter().find(|d| d.name == n).unwrap();
        let stdio = by("server_name");
        assert_eq!(
            stdio.transport,
            Transport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "mcp-server".into()]
            }
        );
        assert_eq!(stdio.env["API_KEY"], EnvValue::Literal("value".into()));
        assert_eq!(stdio.env["API_KEY2"], EnvValue::Forward("API_KEY2".into()));
        assert_eq!(
            stdio.cwd.as_deref(),
            Some(Path::new("/Users/<user>/code/my-server"))
        );
        assert_eq!(
            (
                stdio.startup_timeout_ms,
                stdio.tool_timeout_ms,
                stdio.enabled
            ),
            (20_000, 30_000, false)
        );
        assert_eq!(
            stdio.tools,
            ToolFilter {
                enabled: Some(vec!["search".into(), "summarize".into()]),
                disabled: vec!["search".into()],
            }
        );
        let http = by("figma");
        assert_eq!(
            http.transport,
            Transport::Http {
                url: "https://mcp.figma.com/mcp".into(),
                bearer_token_env: Some("ENV_VAR".into()),
                headers: vec![("HEADER_NAME".into(), "HEADER_VALUE".into())],
                env_headers: vec![("HEADER_NAME".into(), "ENV_VAR".into())],
            }
        );
        assert!(http.enabled);
        assert_eq!(http.env_grant(), vec!["ENV_VAR"]);
    }

    #[test]
    fn a_project_definition_never_names_the_provider_key() {
        for entry in [
            "env_vars = [\"ANTHROPIC_API_KEY\"]",
            "env = { K = \"${ANTHROPIC_API_KEY}\" }",
            "env = { K = \"Bearer ${ANTHROPIC_API_KEY:-x}\" }",
        ] {
            let text = format!("[mcp_servers.s]\ncommand = \"x\"\n{entry}\n");
            let (defs, problems) = run(Origin::Project, &text);
            assert!(defs.is_empty(), "{entry}");
            assert!(
                problems[0].contains("ANTHROPIC_API_KEY")
                    && problems[0].contains("provider key")
                    && problems[0].starts_with(".openmax/config.toml:"),
                "{problems:?}"
            );
            // The user's own server may be given it.
            assert_eq!(run(Origin::User, &text).0.len(), 1, "{entry}");
        }
    }
}
