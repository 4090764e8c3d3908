//! MCP server definitions: what a server is ([`ServerDef`]) and where definitions come from,
//! in order: `[mcp_servers.<name>]` of the user config, then of the project config (Codex's
//! shape, read by [`super::codex`]), then the project's `.mcp.json` (Claude Code's shape, read
//! by [`super::claude`]). A Codex `config.toml` block or a Claude Code `.mcp.json` works
//! unchanged.
//!
//! Invariants:
//! - Each entry is checked on its own: a bad one is a problem line per fault (every unknown key
//!   of it at once) naming the file, the line, the server and the key, and every other server
//!   still loads.
//! - A server defined by the project (its `.openmax/config.toml` or `.mcp.json`) is external
//!   code: [`ServerDef::origin`] says so and the gate in [`super::gate`] applies. Its
//!   definition may not name a provider key's variable anywhere ([`Lookup::check`]): such a
//!   definition is refused, never expanded.
//! - A project cannot redefine a server of the user's config (the user's stands); within the
//!   project, `.openmax/config.toml` wins over `.mcp.json`, and the loser is reported.
//! - A server's environment is only what its definition names: [`ServerDef::env`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::template;
use crate::config::keys::Lines;
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
    /// Forwarded from openmax's own environment variable of this name (a credential grant);
    /// left unset when openmax's is.
    Forward(String),
    /// Written in the definition.
    Literal(String),
    /// Written with `${VAR}` / `${VAR:-default}` ([`super::template`]), expanded when the
    /// server starts.
    Template(String),
}

/// How openmax talks to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio { command: String, args: Vec<String> },
    /// Streamable HTTP. Header values are templates (`${VAR}` forwards a variable).
    Http {
        url: String,
        bearer_token_env: Option<String>,
        headers: Vec<(String, String)>,
        /// Header → the variable whose value it carries (Codex's `env_http_headers`); a header
        /// whose variable is unset or empty is not sent.
        env_headers: Vec<(String, String)>,
    },
    /// The older HTTP+SSE transport (Claude Code's `"type": "sse"`): a GET event stream that
    /// names the URL messages are POSTed to ([`super::sse`]).
    Sse {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// Which of a server's tools are offered: Codex's `enabled_tools` (an allow-list) then
/// `disabled_tools` (a deny-list applied after it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    pub enabled: Option<Vec<String>>,
    pub disabled: Vec<String>,
}

impl ToolFilter {
    /// Whether the server's tool `tool` is offered.
    pub fn allows(&self, tool: &str) -> bool {
        self.enabled
            .as_ref()
            .is_none_or(|e| e.iter().any(|t| t == tool))
            && !self.disabled.iter().any(|t| t == tool)
    }
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
    /// `enabled = false`: listed, never started.
    pub enabled: bool,
    /// Which of its tools are offered.
    pub tools: ToolFilter,
    /// The directory a stdio server runs in (absolute); `None`: the project root.
    pub cwd: Option<PathBuf>,
    /// Variables whose values were written into the command, arguments or URL when the
    /// definition was read (`.mcp.json`'s `${VAR}`): part of the env grant.
    pub expanded: Vec<String>,
}

impl ServerDef {
    /// A definition with the defaults for everything but its transport and where it is from.
    pub fn new(
        name: &str,
        transport: Transport,
        origin: Origin,
        file: &str,
        definition: String,
    ) -> ServerDef {
        ServerDef {
            name: name.to_string(),
            transport,
            env: BTreeMap::new(),
            startup_timeout_ms: (DEFAULT_STARTUP_TIMEOUT_S * 1000.0) as u64,
            tool_timeout_ms: (DEFAULT_TOOL_TIMEOUT_S * 1000.0) as u64,
            origin,
            file: file.to_string(),
            definition,
            enabled: true,
            tools: ToolFilter::default(),
            cwd: None,
            expanded: Vec::new(),
        }
    }

    /// The variables of openmax's environment this server receives (the credential grant an
    /// approval card shows), sorted, each once.
    pub fn env_grant(&self) -> Vec<String> {
        let mut out: Vec<String> = self.expanded.clone();
        for v in self.env.values() {
            match v {
                EnvValue::Forward(n) => out.push(n.clone()),
                EnvValue::Template(t) => out.extend(template::vars(t)),
                EnvValue::Literal(_) => {}
            }
        }
        match &self.transport {
            Transport::Http {
                bearer_token_env,
                headers,
                env_headers,
                ..
            } => {
                out.extend(bearer_token_env.iter().cloned());
                for (_, v) in headers {
                    out.extend(template::vars(v));
                }
                out.extend(env_headers.iter().map(|(_, var)| var.clone()));
            }
            Transport::Sse { headers, .. } => {
                for (_, v) in headers {
                    out.extend(template::vars(v));
                }
            }
            Transport::Stdio { .. } => {}
        }
        out.sort();
        out.dedup();
        out
    }

    /// `stdio`, `http` or `sse`.
    pub fn transport_name(&self) -> &'static str {
        match self.transport {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
            Transport::Sse { .. } => "sse",
        }
    }
}

/// The `[mcp_servers]` table of one config file, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct McpSource {
    pub path: PathBuf,
    pub origin: Origin,
    pub table: toml::Table,
    /// The line of every key of the file, for problem lines.
    pub lines: Lines,
}

/// How definitions read variables: `get` looks one up in openmax's environment;
/// `provider_keys` are the variables that may hold the provider's key.
pub struct Lookup<'a> {
    pub get: &'a dyn Fn(&str) -> Option<String>,
    pub provider_keys: &'a [String],
}

impl Lookup<'_> {
    /// The lookup of the running process: its environment (the provider key included, for
    /// the user's own servers) and the key variables of [`crate::sandbox::scrub::names`].
    pub fn process(keys: &[String]) -> Lookup<'_> {
        Lookup {
            get: &crate::sandbox::scrub::var,
            provider_keys: keys,
        }
    }

    /// Refuse a project definition naming a provider key's variable (`names`: every variable
    /// it would read, anywhere in it). The user's own definitions may name one.
    pub fn check(&self, origin: Origin, names: &[String]) -> Result<(), String> {
        if origin == Origin::User {
            return Ok(());
        }
        match names.iter().find(|n| self.provider_keys.contains(n)) {
            Some(n) => Err(format!(
                "names {n}, the provider key's variable: a project's server never receives \
                 it; give the server a key of its own, or define it in {}",
                crate::session::shown("config.toml")
            )),
            None => Ok(()),
        }
    }

    /// A variable's value, never a provider key's for a project's definition.
    pub fn var(&self, origin: Origin, name: &str) -> Option<String> {
        if origin == Origin::Project && self.provider_keys.iter().any(|k| k == name) {
            return None;
        }
        (self.get)(name)
    }
}

/// A timeout in seconds as milliseconds: more than 0, at most [`MAX_TIMEOUT_S`].
pub fn timeout_ms(s: f64) -> Result<u64, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::load::load;
    use std::path::Path;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_timeout_is_more_than_0_and_at_most_an_hour() {
        // TOML can write nan and inf, so they are refused like any other nonsense.
        for bad in [
            0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            3600.5,
        ] {
            let e = timeout_ms(bad).unwrap_err();
            assert!(e.contains("more than 0 and at most 3600"), "{bad}: {e}");
        }
        assert_eq!(timeout_ms(3600.0), Ok(3_600_000));
        assert_eq!(timeout_ms(2.5), Ok(2500));
        assert_eq!(timeout_ms(0.0001), Ok(1), "rounded up to a millisecond");
    }

    fn source(path: &str, origin: Origin, text: &str) -> McpSource {
        McpSource {
            path: path.into(),
            origin,
            table: toml::from_str::<toml::Table>(text).unwrap()["mcp_servers"]
                .as_table()
                .unwrap()
                .clone(),
            lines: Lines::of(text),
        }
    }

    #[test]
    fn project_cannot_redefine_a_user_server() {
        let keys = Vec::new();
        let lookup = Lookup {
            get: &no_env,
            provider_keys: &keys,
        };
        let (defs, problems) = load(
            &[
                source(
                    "/h/config.toml",
                    Origin::User,
                    "[mcp_servers.a]\ncommand = \"user-a\"\n",
                ),
                source(
                    "/p/.openmax/config.toml",
                    Origin::Project,
                    "[mcp_servers.a]\ncommand = \"project-a\"\n",
                ),
            ],
            Path::new("/p"),
            &lookup,
        );
        assert_eq!(defs.len(), 1);
        assert_eq!(defs[0].origin, Origin::User);
        assert!(problems[0].contains(".openmax/config.toml") && problems[0].contains("already"));
    }

    #[test]
    fn filters_and_grants() {
        let f = ToolFilter {
            enabled: Some(vec!["a".into(), "b".into()]),
            disabled: vec!["b".into()],
        };
        assert!(f.allows("a") && !f.allows("b") && !f.allows("c"));
        assert!(ToolFilter::default().allows("anything"));
        let mut d = ServerDef::new(
            "s",
            Transport::Http {
                url: "http://x".into(),
                bearer_token_env: Some("T".into()),
                headers: vec![("X".into(), "${H:-d}".into())],
                env_headers: vec![("Y".into(), "E".into())],
            },
            Origin::User,
            "f",
            String::new(),
        );
        d.expanded = vec!["U".into()];
        assert_eq!(d.env_grant(), vec!["E", "H", "T", "U"]);
    }
}
