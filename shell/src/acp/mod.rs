//! `openmax --acp`: the Agent Client Protocol frontend (ACP protocol version 1, JSON-RPC 2.0,
//! one message per line on stdio). A frontend of the same runtime and core as `--stdio`: it
//! turns ACP requests into the core's commands and the core's events into ACP notifications
//! and responses, and decides no policy.
//!
//! - [`rpc`]: JSON-RPC envelopes and the error codes.
//! - [`prompt`]: an ACP prompt as the text of a `user` command.
//! - [`translate`]: a session's core events as ACP updates, permission requests and answers.
//! - [`toolcall`]: how a tool call looks in ACP (kind, title, locations, diff blocks).

pub mod prompt;
pub mod rpc;
pub mod toolcall;
pub mod translate;
