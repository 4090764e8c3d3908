//! `openmax mcp list`: every configured MCP server, how its definition was read (command or
//! URL as written, working directory, timeouts, tool filters), its transport, where it is
//! defined, its state (started, failed with why, awaiting approval, disabled) and its tools.
//! Servers are started exactly as a session would start them (project servers only when
//! approved, or in `auto`), then stopped. Exit 1 when any server failed.
//!
//! Invariant: the command, arguments and URL are shown as written in the file (before any
//! `${VAR}` expansion), so no variable's value is printed.

use std::io::Write;

use super::config::ServerDef;
use super::{McpSet, State};

/// How a definition was read, one line each: what it runs or where it connects (as written),
/// its working directory, its timeouts and its tool filters.
pub fn how_read(def: &ServerDef) -> Vec<String> {
    let written: serde_json::Value = serde_json::from_str(&def.definition).unwrap_or_default();
    let text = |k: &str| written.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let mut out = Vec::new();
    if let Some(cmd) = text("command") {
        let args: Vec<String> = written
            .get("args")
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        out.push(format!("command: {cmd:?} args: {args:?}"));
    }
    if let Some(url) = text("url") {
        out.push(format!("url: {url}"));
    }
    if let Some(cwd) = &def.cwd {
        out.push(format!("cwd: {}", cwd.display()));
    }
    out.push(format!(
        "timeouts: startup {} ms, tool {} ms",
        def.startup_timeout_ms, def.tool_timeout_ms
    ));
    if let Some(e) = &def.tools.enabled {
        out.push(format!("enabled_tools: {e:?}"));
    }
    if !def.tools.disabled.is_empty() {
        out.push(format!("disabled_tools: {:?}", def.tools.disabled));
    }
    out
}

/// Print `set` to `out`; the exit code.
pub fn print(set: &McpSet, mut out: impl Write) -> i32 {
    let mut code = 0;
    if set.servers.is_empty() {
        let _ = writeln!(out, "no MCP servers configured");
    }
    for s in &set.servers {
        let state = match &s.state {
            State::Started => format!("started, {} tools", s.tools.len()),
            State::Failed(why) => {
                code = 1;
                format!("failed: {why}")
            }
            State::AwaitingApproval => format!(
                "awaiting approval (not started): openmax --approve {}",
                s.def.file
            ),
            State::Disabled => "disabled (enabled = false; not started)".to_string(),
        };
        let _ = writeln!(
            out,
            "{} ({}, {}): {state}",
            s.def.name,
            s.def.transport_name(),
            s.def.file
        );
        for line in how_read(&s.def) {
            let _ = writeln!(out, "  {line}");
        }
        let grant = s.def.env_grant();
        if !grant.is_empty() {
            let _ = writeln!(out, "  env grant: {}", grant.join(", "));
        }
        for t in &s.tools {
            let ro = if t.read_only { " (read-only)" } else { "" };
            let _ = writeln!(out, "  {}{ro}", t.name);
        }
    }
    // Definition problems (not server failures) are listed too, and fail the command.
    for p in set
        .problems
        .iter()
        .filter(|p| !p.starts_with("MCP server "))
    {
        code = 1;
        let _ = writeln!(out, "problem: {p}");
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::Origin;
    use crate::mcp::config::{ToolFilter, Transport};

    fn def(definition: &str) -> ServerDef {
        let stdio = Transport::Stdio {
            command: "srv".into(),
            args: Vec::new(),
        };
        ServerDef::new(
            "s",
            stdio,
            Origin::User,
            "/u/config.toml",
            definition.into(),
        )
    }

    /// A bad definition is printed as a problem and fails the command; a server's own failure
    /// is shown on its line (its state), not again as a problem.
    #[test]
    fn definition_problems_are_printed_and_fail_the_command() {
        let run = |problems: &[&str]| {
            let set = McpSet {
                servers: Vec::new(),
                problems: problems.iter().map(|p| p.to_string()).collect(),
                ctx: None,
            };
            let mut out = Vec::new();
            let code = print(&set, &mut out);
            (code, String::from_utf8(out).unwrap())
        };
        let (code, out) = run(&[
            "mcp.json: server \"x\" has no command",
            "MCP server y failed to start: boom",
        ]);
        assert_eq!(code, 1);
        assert!(
            out.contains("problem: mcp.json: server \"x\" has no command\n"),
            "{out}"
        );
        assert!(!out.contains("boom"), "{out}");
        let (code, out) = run(&["MCP server y failed to start: boom"]);
        assert_eq!((code, out.as_str()), (0, "no MCP servers configured\n"));
    }

    #[test]
    fn how_read_shows_each_part_of_the_definition_as_written_and_nothing_unset() {
        let bare = def(r#"{"command":"srv"}"#);
        let timeouts = format!(
            "timeouts: startup {} ms, tool {} ms",
            bare.startup_timeout_ms, bare.tool_timeout_ms
        );
        assert_eq!(
            how_read(&bare),
            vec![r#"command: "srv" args: []"#.to_string(), timeouts.clone()]
        );
        let mut full =
            def(r#"{"command":"srv","args":["-v","${TOKEN}"],"url":"http://h/${TOKEN}"}"#);
        full.cwd = Some("/p/sub".into());
        full.tools = ToolFilter {
            enabled: Some(vec!["a".into()]),
            disabled: vec!["b".into()],
        };
        assert_eq!(
            how_read(&full),
            vec![
                r#"command: "srv" args: ["-v", "${TOKEN}"]"#.to_string(),
                "url: http://h/${TOKEN}".to_string(),
                "cwd: /p/sub".to_string(),
                timeouts,
                r#"enabled_tools: ["a"]"#.to_string(),
                r#"disabled_tools: ["b"]"#.to_string(),
            ]
        );
    }
}
