//! A project's `.mcp.json`, in the shape Claude Code documents, so an existing file works
//! unchanged: `{"mcpServers": {"<name>": {"type": "stdio"|"http"|"sse", "command", "args",
//! "env", "url", "headers"}}}`, with `${VAR}` and `${VAR:-default}` expanded in `command`,
//! `args`, `env`, `url` and `headers` ([`super::template`]).
//!
//! Invariants:
//! - As in Claude Code, a `${VAR}` that is not set and has no default makes its server
//!   unusable: a problem line naming it, the server not started.
//! - Every server of the file is the project's ([`Origin::Project`]): no `${…}` may name the
//!   provider key's variable ([`Lookup::check`]), checked before anything is expanded.
//! - `command`, `args` and `url` are expanded when the file is read (at each freeze); `env`
//!   and `headers` keep their templates and are expanded when the server starts, so no value
//!   is stored in the definition.
//! - Problem lines carry the line of the key; JSON gives no positions, so it is found by
//!   looking for the server's key, then the key after it, in the text ([`line_of`]).

use std::collections::BTreeMap;

use super::config::{check_name, check_url, EnvValue, Lookup, ServerDef, Transport, MCP_JSON};
use super::template::{self, valid_env_name};
use crate::hooks::Origin;

/// The keys of one server.
pub const KEYS: [&str; 6] = ["type", "command", "args", "env", "url", "headers"];

/// Every server of the file, and one problem line per fault.
pub fn parse(bytes: &[u8], lookup: &Lookup) -> (Vec<ServerDef>, Vec<String>) {
    let file = MCP_JSON;
    let text = String::from_utf8_lossy(bytes);
    let root: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            return (
                Vec::new(),
                vec![format!("{file}:{}: invalid JSON: {e}", e.line())],
            )
        }
    };
    // The file holds `mcpServers` only: any other key is reported, with its line.
    let mut problems: Vec<String> = root
        .as_object()
        .map(|o| {
            o.keys()
                .filter(|k| k.as_str() != "mcpServers")
                .map(|k| {
                    let line = key_line(&text, 0, k).map(|p| line_at(&text, p));
                    match line {
                        Some(l) => {
                            format!("{file}:{l}: {k}: unknown key (the file's key is mcpServers)")
                        }
                        None => format!("{file}: {k}: unknown key (the file's key is mcpServers)"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let Some(servers) = root.get("mcpServers") else {
        problems.push(format!("{file}: no \"mcpServers\" object"));
        return (Vec::new(), problems);
    };
    let Some(servers) = servers.as_object() else {
        problems.push(format!("{file}: \"mcpServers\" must be an object"));
        return (Vec::new(), problems);
    };
    let mut defs = Vec::new();
    for (name, entry) in servers {
        match parse_entry(&text, name, entry, lookup) {
            Ok(d) => defs.push(d),
            Err(e) => problems.extend(e),
        }
    }
    (defs, problems)
}

/// The line of `"<server>": … "<key>":` in the text (1-based), or of the server alone.
pub fn line_of(text: &str, server: &str, key: Option<&str>) -> Option<usize> {
    let servers = key_line(text, 0, "mcpServers")?;
    let mut pos = key_line(text, servers, server)?;
    if let Some(k) = key {
        pos = key_line(text, pos, k).unwrap_or(pos);
    }
    Some(line_at(text, pos))
}

/// Where `"<key>":` first appears in `text` from byte `from`.
fn key_line(text: &str, from: usize, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    let mut at = from;
    while let Some(i) = text[at..].find(&quoted) {
        let pos = at + i;
        if text[pos + quoted.len()..].trim_start().starts_with(':') {
            return Some(pos);
        }
        at = pos + quoted.len();
    }
    None
}

/// The 1-based line of byte `pos`.
fn line_at(text: &str, pos: usize) -> usize {
    text[..pos].matches('\n').count() + 1
}

fn parse_entry(
    text: &str,
    name: &str,
    entry: &serde_json::Value,
    lookup: &Lookup,
) -> Result<ServerDef, Vec<String>> {
    let at = |key: &str, what: &str| -> String {
        match line_of(text, name, Some(key)) {
            Some(l) => format!("{MCP_JSON}:{l}: mcpServers.{name}.{key}: {what}"),
            None => format!("{MCP_JSON}: mcpServers.{name}.{key}: {what}"),
        }
    };
    let whole = |what: &str| -> String {
        match line_of(text, name, None) {
            Some(l) => format!("{MCP_JSON}:{l}: mcpServers.{name}: {what}"),
            None => format!("{MCP_JSON}: mcpServers.{name}: {what}"),
        }
    };
    check_name(name).map_err(|e| vec![whole(&e)])?;
    let Some(o) = entry.as_object() else {
        return Err(vec![whole("must be an object")]);
    };
    let unknown: Vec<String> = o
        .keys()
        .filter(|k| !KEYS.contains(&k.as_str()))
        .map(|k| {
            at(
                k,
                &format!("unknown key (the keys are {})", KEYS.join(", ")),
            )
        })
        .collect();
    if !unknown.is_empty() {
        return Err(unknown);
    }
    let one = |e: String| vec![e];
    let string = |key: &str| -> Result<Option<String>, Vec<String>> {
        match o.get(key) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(one(at(key, "must be a string"))),
        }
    };
    let string_map = |key: &str| -> Result<Vec<(String, String)>, Vec<String>> {
        match o.get(key) {
            None => Ok(Vec::new()),
            Some(serde_json::Value::Object(m)) => m
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|s| (k.clone(), s.to_string()))
                        .ok_or_else(|| one(at(key, "values must be strings")))
                })
                .collect(),
            Some(_) => Err(one(at(key, "must be an object of strings"))),
        }
    };
    let args = match o.get("args") {
        None => Vec::new(),
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| one(at("args", "must be an array of strings")))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(one(at("args", "must be an array of strings"))),
    };
    let kind = string("type")?;
    let remote = match kind.as_deref() {
        None if o.contains_key("url") && !o.contains_key("command") => Some("http"),
        None | Some("stdio") => None,
        Some("http") | Some("streamable-http") => Some("http"),
        Some("sse") => Some("sse"),
        Some(other) => {
            return Err(one(at(
                "type",
                &format!("{other:?} is not supported (use \"stdio\", \"http\" or \"sse\")"),
            )))
        }
    };
    let command = string("command")?;
    let url = string("url")?;
    let env_map = string_map("env")?;
    let headers = string_map("headers")?;
    // Every variable the definition reads, refused before any is read when it names the
    // provider key.
    let mut names: Vec<String> = Vec::new();
    for s in command.iter().chain(&args).chain(&url) {
        names.extend(template::vars(s));
    }
    for (_, v) in env_map.iter().chain(&headers) {
        names.extend(template::vars(v));
    }
    lookup
        .check(Origin::Project, &names)
        .map_err(|e| one(whole(&e)))?;
    let get = |n: &str| lookup.var(Origin::Project, n);
    let expand = |key: &str, s: &str| -> Result<String, Vec<String>> {
        template::expand(s, &get, true).map_err(|var| {
            one(at(
                key,
                &format!(
                    "${{{var}}} is not set and has no default; set {var}, or write \
                     ${{{var}:-default}} (Claude Code refuses such a file too)"
                ),
            ))
        })
    };
    let mut expanded: Vec<String> = Vec::new();
    let mut env = BTreeMap::new();
    let transport = match remote {
        Some(kind) => {
            let url = url.ok_or_else(|| one(at("url", "missing")))?;
            for k in ["command", "args", "env"] {
                if o.contains_key(k) {
                    return Err(one(at(
                        k,
                        &format!("only applies to a stdio server, not {kind}"),
                    )));
                }
            }
            expanded.extend(template::vars(&url));
            let url = expand("url", &url)?;
            check_url(&url).map_err(|e| one(at("url", &e)))?;
            for (_, v) in &headers {
                expand("headers", v)?;
            }
            if kind == "sse" {
                Transport::Sse { url, headers }
            } else {
                Transport::Http {
                    url,
                    bearer_token_env: None,
                    headers,
                    env_headers: Vec::new(),
                }
            }
        }
        None => {
            let command = command.ok_or_else(|| one(at("command", "missing")))?;
            if o.contains_key("headers") || o.contains_key("url") {
                let k = if o.contains_key("url") {
                    "url"
                } else {
                    "headers"
                };
                return Err(one(at(k, "only applies to an http or sse server")));
            }
            for s in std::iter::once(&command).chain(&args) {
                expanded.extend(template::vars(s));
            }
            let command = expand("command", &command)?;
            if command.is_empty() {
                return Err(one(at("command", "is empty")));
            }
            let args = args
                .iter()
                .map(|a| expand("args", a))
                .collect::<Result<Vec<_>, _>>()?;
            for (k, v) in env_map {
                if !valid_env_name(&k) {
                    return Err(one(at("env", &format!("{k:?} is not a variable name"))));
                }
                expand("env", &v)?;
                let value = match template::whole_var(&v) {
                    Some(n) => EnvValue::Forward(n.to_string()),
                    None if !template::vars(&v).is_empty() => EnvValue::Template(v),
                    None => EnvValue::Literal(v),
                };
                env.insert(k, value);
            }
            Transport::Stdio { command, args }
        }
    };
    let mut def = ServerDef::new(
        name,
        transport,
        Origin::Project,
        MCP_JSON,
        serde_json::to_string(entry).unwrap_or_default(),
    );
    def.env = env;
    expanded.sort();
    expanded.dedup();
    def.expanded = expanded;
    Ok(def)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        match k {
            "MY_TOKEN" => Some("t".into()),
            "WEB_TOKEN" => Some("w".into()),
            "ANTHROPIC_API_KEY" => Some("sk-secret".into()),
            _ => None,
        }
    }

    fn run(json: &str) -> (Vec<ServerDef>, Vec<String>) {
        let keys = vec!["ANTHROPIC_API_KEY".to_string()];
        parse(
            json.as_bytes(),
            &Lookup {
                get: &env,
                provider_keys: &keys,
            },
        )
    }

    #[test]
    fn a_url_without_a_type_or_command_is_streamable_http() {
        let (defs, problems) = run(r#"{"mcpServers": {
    "web": {"url": "http://127.0.0.1:1/mcp"},
    "both": {"url": "http://127.0.0.1:1/mcp", "command": "srv"}
}}"#);
        assert_eq!(defs.len(), 1, "{problems:?}");
        assert!(
            matches!(&defs[0].transport, Transport::Http { url, .. } if url == "http://127.0.0.1:1/mcp"),
            "{:?}",
            defs[0].transport
        );
        // With a command too, it is a stdio server, as without a type, and the url is refused.
        assert_eq!(
            problems,
            [".mcp.json:3: mcpServers.both.url: only applies to an http or sse server"]
        );
    }

    /// An `env` value is forwarded when it is one variable, a template when it holds one
    /// among other text, and literal otherwise.
    #[test]
    fn an_env_value_is_forwarded_templated_or_literal() {
        let (defs, problems) = run(r#"{"mcpServers": {"s": {"command": "x",
    "env": {"ONE": "${MY_TOKEN}", "MIX": "a-${SET:-d}", "LIT": "plain"}}}}"#);
        assert!(problems.is_empty(), "{problems:#?}");
        let env = &defs[0].env;
        assert_eq!(env["ONE"], EnvValue::Forward("MY_TOKEN".into()));
        assert_eq!(env["MIX"], EnvValue::Template("a-${SET:-d}".into()));
        assert_eq!(env["LIT"], EnvValue::Literal("plain".into()));
    }

    #[test]
    fn claude_code_format() {
        let (defs, problems) = run(r#"{"mcpServers": {
    "fs": {"command": "npx", "args": ["-y", "srv", "."], "env": {"TOKEN": "${MY_TOKEN}", "MODE": "ro"}},
    "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}},
    "old": {"type": "sse", "url": "${API_BASE_URL:-https://api.example.com}/mcp"},
    "bad": {"command": 3},
    "odd": {"type": "websocket", "url": "http://x"},
    "typos": {"command": "x", "timeout": 3,
              "cwd": "."}
}}"#);
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, vec!["fs", "web", "old"], "{problems:#?}");
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
        assert_eq!(
            defs[2].transport,
            Transport::Sse {
                url: "https://api.example.com/mcp".into(),
                headers: vec![]
            }
        );
        assert_eq!(defs[2].env_grant(), vec!["API_BASE_URL".to_string()]);
        assert_eq!(defs[1].env_grant(), vec!["WEB_TOKEN".to_string()]);
        let has = |s: &str| problems.iter().any(|p| p.contains(s));
        assert!(
            has(".mcp.json:5: mcpServers.bad.command: must be a string"),
            "{problems:#?}"
        );
        assert!(has(".mcp.json:6: mcpServers.odd.type"), "{problems:#?}");
        assert!(
            has(".mcp.json:7: mcpServers.typos.timeout: unknown key"),
            "{problems:#?}"
        );
        assert!(
            has(".mcp.json:8: mcpServers.typos.cwd: unknown key"),
            "{problems:#?}"
        );
        assert_eq!(problems.len(), 4, "{problems:#?}");
        let (defs, p) = run("{\n \"mcpServers\": {},\n \"mcpServer\": {}\n}");
        assert!(defs.is_empty());
        assert_eq!(
            p,
            vec![".mcp.json:3: mcpServer: unknown key (the file's key is mcpServers)".to_string()]
        );
        let (none, p) = run("{not json");
        assert!(
            none.is_empty() && p[0].starts_with(".mcp.json:1: invalid JSON"),
            "{p:?}"
        );
    }

    /// The examples of Claude Code's own documentation, as copied in `tests/fixtures`.
    #[test]
    fn the_claude_code_documentation_examples_read_unchanged() {
        let fixture = include_str!("../../../tests/fixtures/claude-mcp.json");
        let vars = |k: &str| (k == "API_KEY").then(|| "k-123".to_string());
        let keys = vec!["ANTHROPIC_API_KEY".to_string()];
        let lookup = Lookup {
            get: &vars,
            provider_keys: &keys,
        };
        let (defs, problems) = parse(fixture.as_bytes(), &lookup);
        assert!(problems.is_empty(), "{problems:#?}");
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "shared-server",
                "api-server",
                "local-weather",
                "weather-api"
            ]
        );
        assert_eq!(
            defs[0].transport,
            Transport::Stdio {
                command: "/path/to/server".into(),
                args: vec![]
            }
        );
        assert_eq!(
            defs[1].transport,
            Transport::Sse {
                url: "https://api.example.com/mcp".into(),
                headers: vec![("Authorization".into(), "Bearer ${API_KEY}".into())]
            }
        );
        assert_eq!(defs[1].env_grant(), vec!["API_BASE_URL", "API_KEY"]);
        assert_eq!(
            defs[2].transport,
            Transport::Stdio {
                command: "/path/to/weather-cli".into(),
                args: vec!["--api-key".into(), "abc123".into()]
            }
        );
        assert_eq!(
            defs[2].env.get("CACHE_DIR"),
            Some(&EnvValue::Literal("/tmp".into()))
        );
        assert!(
            matches!(&defs[3].transport, Transport::Http { url, .. } if url == "https://api.weather.com/mcp")
        );
        assert!(defs.iter().all(|d| d.origin == Origin::Project));
        // Without API_KEY, the api-server is refused, as Claude Code refuses the file.
        let none = |_: &str| None;
        let (defs, problems) = parse(
            fixture.as_bytes(),
            &Lookup {
                get: &none,
                provider_keys: &keys,
            },
        );
        assert_eq!(defs.len(), 3);
        assert!(
            problems.len() == 1
                && problems[0].starts_with(".mcp.json:11: mcpServers.api-server.headers"),
            "{problems:#?}"
        );
    }

    #[test]
    fn an_unset_variable_without_default_is_refused_as_claude_code_does() {
        let (defs, problems) = run(
            r#"{"mcpServers": {"api-server": {"type": "http", "url": "https://x/mcp",
                "headers": {"Authorization": "Bearer ${API_KEY}"}}}}"#,
        );
        assert!(defs.is_empty());
        assert!(
            problems[0].contains("mcpServers.api-server.headers")
                && problems[0].contains("${API_KEY} is not set"),
            "{problems:?}"
        );
    }

    #[test]
    fn the_provider_key_is_never_expanded_into_a_project_server() {
        for json in [
            r#"{"mcpServers": {"s": {"command": "x", "env": {"K": "${ANTHROPIC_API_KEY}"}}}}"#,
            r#"{"mcpServers": {"s": {"command": "x", "args": ["--key=${ANTHROPIC_API_KEY:-none}"]}}}"#,
            r#"{"mcpServers": {"s": {"type": "http", "url": "http://x/${ANTHROPIC_API_KEY}"}}}"#,
            r#"{"mcpServers": {"s": {"type": "sse", "url": "http://x", "headers": {"A": "${ANTHROPIC_API_KEY}"}}}}"#,
        ] {
            let (defs, problems) = run(json);
            assert!(defs.is_empty(), "{json}");
            assert!(
                problems[0].contains("ANTHROPIC_API_KEY") && problems[0].contains("provider key"),
                "{problems:?}"
            );
            assert!(!problems[0].contains("sk-secret"));
        }
    }

    #[test]
    fn lines_are_found_in_the_text() {
        let text = "{\n \"mcpServers\": {\n  \"a\": {\n   \"env\": {\"command\": \"x\"},\n   \"command\": \"y\"\n  }\n }\n}";
        assert_eq!(line_of(text, "a", None), Some(3));
        assert_eq!(line_of(text, "a", Some("env")), Some(4));
        assert_eq!(line_of(text, "missing", None), None);
        // A key's name met first as a value is passed over: the key is where a `:` follows.
        let text = "{\n \"mcpServers\": {\n  \"b\": {\"url\": \"a\"},\n  \"a\": {\n   \"url\": \"http://x\"\n  }\n }\n}";
        assert_eq!(line_of(text, "a", None), Some(4));
        assert_eq!(line_of(text, "a", Some("url")), Some(5));
        assert_eq!(key_line("\"k\" \"k\" : 1", 0, "k"), Some(4));
    }
}
