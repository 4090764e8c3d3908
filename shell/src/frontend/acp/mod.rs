//! `openmax --acp`: the Agent Client Protocol frontend (ACP protocol version 1, JSON-RPC 2.0,
//! one message per line on stdio). A frontend of the same runtime and core as `--stdio`: it
//! turns ACP requests into the core's commands and the core's events into ACP notifications
//! and responses, and decides no policy.
//!
//! - [`rpc`]: JSON-RPC envelopes and the error codes.
//! - [`files`]: the client's `fs` capability as the file tools' text files.
//! - [`mcp_servers`]: `mcpServers` as the MCP client's server definitions.
//! - [`open`]: opening a session off the connection loop.
//! - [`prompt`]: an ACP prompt as the text of a `user` command.
//! - [`translate`]: a session's core events as ACP updates, permission requests and answers.
//! - [`toolcall`]: how a tool call looks in ACP (kind, title, locations, diff blocks).
//! - [`session`]: one openmax session behind the connection, and its sink.
//! - [`undo`]: the `/undo` command.
//! - [`connection`]: the loop that dispatches requests and writes the answers.

pub mod connection;
pub mod files;
pub mod mcp_servers;
pub mod msg;
pub mod open;
pub mod prompt;
pub mod rpc;
pub mod session;
pub mod toolcall;
pub mod translate;
pub mod undo;

#[cfg(test)]
mod stop_tests;

use crate::start::Flags;

/// Serve ACP on stdio until stdin ends and every session has ended; returns the exit code.
pub fn run(flags: Flags) -> i32 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("openmax: could not start the runtime: {e}");
            return 1;
        }
    };
    let local = tokio::task::LocalSet::new();
    let code = local.block_on(&rt, connection::Connection::new(flags).serve());
    drop(local);
    rt.shutdown_background();
    crate::sandbox::reaper::sweep();
    code
}
