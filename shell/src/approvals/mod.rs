//! A human's approvals of what a project would run: `openmax --approve PATH` ([`approve`]: an
//! external tool's, a hook's or an MCP server's exact bytes, recorded per project) and the list
//! of what still waits for one ([`pending`]: the terminal UI asks about each at start-up).
//! Above the rooms whose definitions it reads (extensions, hooks, MCP servers, config).

pub mod approve;
pub mod pending;
