//! The `mcpServers` of `session/new` and `session/load` as MCP server definitions, the same
//! [`ServerDef`]s the config's `[mcp_servers]` tables give, started by the same MCP client.
//!
//! Invariants:
//! - The client is the user's editor: its servers are the user's ([`Origin::User`]), started
//!   without an approval, like the user config's, and named "the ACP client" wherever a
//!   definition's file is shown.
//! - Every value is taken as written: a stdio entry's `env` values and an http entry's header
//!   values are literals (a `${VAR}` never forwards one of openmax's own variables, so a client
//!   cannot route the provider key to a server).
//! - A bad entry (empty, invalid or repeated name, empty command, a URL that is not http(s), an
//!   invalid variable name, a header holding `${`, the SSE transport openmax does not advertise)
//!   refuses the whole request with -32602 naming the entry; nothing is started.

use std::collections::BTreeMap;

use agent_client_protocol_schema::v1::McpServer;

use super::rpc::{self, RpcError};
use crate::hooks::Origin;
use crate::mcp::config::{check_name, check_url, EnvValue, ServerDef, Transport};
use crate::mcp::template::valid_env_name;

/// What a client server's definition file is called in notes and `mcp list`.
pub const CLIENT_FILE: &str = "the ACP client";

fn invalid(name: &str, why: impl std::fmt::Display) -> RpcError {
    RpcError::new(
        rpc::INVALID_PARAMS,
        format!("invalid params: mcpServers entry {name:?}: {why}"),
    )
}

/// The definitions of `servers`, in the given order.
pub fn defs(servers: &[McpServer]) -> Result<Vec<ServerDef>, RpcError> {
    let mut names = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for s in servers {
        let (name, transport, env) = match s {
            McpServer::Stdio(s) => {
                let command = s.command.to_string_lossy().into_owned();
                if command.is_empty() {
                    return Err(invalid(&s.name, "command is empty"));
                }
                let mut env = BTreeMap::new();
                for v in &s.env {
                    if !valid_env_name(&v.name) {
                        return Err(invalid(
                            &s.name,
                            format!("env {:?} is not a variable name", v.name),
                        ));
                    }
                    env.insert(v.name.clone(), EnvValue::Literal(v.value.clone()));
                }
                let t = Transport::Stdio {
                    command,
                    args: s.args.clone(),
                };
                (&s.name, t, env)
            }
            McpServer::Http(s) => {
                check_url(&s.url).map_err(|e| invalid(&s.name, e))?;
                let mut headers = Vec::new();
                for h in &s.headers {
                    if h.name.is_empty() || h.value.contains("${") {
                        return Err(invalid(
                            &s.name,
                            format!(
                                "header {:?}: names must be non-empty and values literal (no \"${{\")",
                                h.name
                            ),
                        ));
                    }
                    headers.push((h.name.clone(), h.value.clone()));
                }
                let t = Transport::Http {
                    url: s.url.clone(),
                    bearer_token_env: None,
                    headers,
                    env_headers: Vec::new(),
                };
                (&s.name, t, BTreeMap::new())
            }
            McpServer::Sse(s) => {
                return Err(invalid(
                    &s.name,
                    "the SSE transport is not supported (openmax advertises mcpCapabilities.http, \
                     not sse); use an http or stdio server",
                ))
            }
            _ => {
                return Err(RpcError::new(
                    rpc::INVALID_PARAMS,
                    "invalid params: an mcpServers entry of an unknown transport",
                ))
            }
        };
        check_name(name).map_err(|e| invalid(name, e))?;
        if !names.insert(name.clone()) {
            return Err(invalid(name, "the name is given twice"));
        }
        let mut def = ServerDef::new(
            name,
            transport,
            Origin::User,
            CLIENT_FILE,
            serde_json::to_string(s).unwrap_or_default(),
        );
        def.env = env;
        out.push(def);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<Vec<ServerDef>, String> {
        let servers: Vec<McpServer> = serde_json::from_value(v).expect("ACP shape");
        defs(&servers).map_err(|e| e.message)
    }

    #[test]
    fn stdio_and_http_entries_become_user_servers_with_literal_values() {
        let d = parse(json!([
            {"name": "everything", "command": "/usr/bin/node", "args": ["x.js", "stdio"],
             "env": [{"name": "TOKEN", "value": "${OPENAI_API_KEY}"}]},
            {"type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer abc"}]}
        ]))
        .unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(
            d[0].transport,
            Transport::Stdio {
                command: "/usr/bin/node".into(),
                args: vec!["x.js".into(), "stdio".into()]
            }
        );
        assert_eq!(
            d[0].env.get("TOKEN"),
            Some(&EnvValue::Literal("${OPENAI_API_KEY}".into())),
            "an env value is a literal, never a forward"
        );
        assert!(d[0].env_grant().is_empty());
        assert_eq!(d[0].origin, Origin::User);
        assert_eq!(d[0].file, CLIENT_FILE);
        assert_eq!(d[1].transport_name(), "http");
        assert!(d[1].env_grant().is_empty());
    }

    #[test]
    fn bad_entries_are_refused_naming_the_entry() {
        let cases = [
            (
                json!([{"name": "", "command": "x", "args": [], "env": []}]),
                "invalid server name",
            ),
            (
                json!([{"name": "a__b", "command": "x", "args": [], "env": []}]),
                "invalid server name",
            ),
            (
                json!([{"name": "a", "command": "", "args": [], "env": []}]),
                "command is empty",
            ),
            (
                json!([{"name": "a", "command": "x", "args": [], "env": []},
                       {"name": "a", "command": "y", "args": [], "env": []}]),
                "given twice",
            ),
            (
                json!([{"name": "a", "command": "x", "args": [], "env": [{"name": "1X", "value": ""}]}]),
                "not a variable name",
            ),
            (
                json!([{"type": "http", "name": "a", "url": "file:///etc", "headers": []}]),
                "not an http",
            ),
            (
                json!([{"type": "http", "name": "a", "url": "http://h", "headers": [{"name": "X", "value": "${HOME}"}]}]),
                "literal",
            ),
            (
                json!([{"type": "sse", "name": "a", "url": "http://h", "headers": []}]),
                "SSE",
            ),
        ];
        for (v, want) in cases {
            let e = parse(v.clone()).unwrap_err();
            assert!(e.starts_with("invalid params: mcpServers entry"), "{e}");
            assert!(e.contains(want), "{v}: {e}");
        }
    }
}
