//! `openmax mcp list`: every configured MCP server, its transport, where it is defined, its
//! state (started, failed with why, awaiting approval) and its tools. Servers are started
//! exactly as a session would start them (project servers only when approved, or in `auto`),
//! then stopped. Exit 1 when any server failed.

use std::io::Write;

use super::{McpSet, State};

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
        };
        let _ = writeln!(
            out,
            "{} ({}, {}): {state}",
            s.def.name,
            s.def.transport_name(),
            s.def.file
        );
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
