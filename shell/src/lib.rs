//! openmax-shell: the `openmax` binary's library. A thin tokio shell around the pure
//! [`openmax_core`] machine: it frames stdin, writes events to stdout, and performs the core's
//! effects (model requests over hyper + rustls, tools, hooks, the session store, config).
//!
//! It must never decide policy (retries, approvals, turn endings): the core decides, the shell
//! carries out. It must never write user state into the project (the project is agent-writable).
//!
//! # The house
//!
//! Each top-level module is a room; a room imports only rooms on its floor or below, and no file
//! reaches itself through its `use`s (`tests/import_graph.rs` checks it and prints the floors).
//!
//! - Top: [`app`], the dispatcher. From parsed flags to an exit code: a one-shot action, or a
//!   session opened and handed to its frontend. Nothing imports it.
//! - The frontends, side by side in [`frontend`]: `--stdio` (`framing`, `jsonl`), `-p`
//!   (`print`, `print_run`), the terminal UI (`tui`), ACP (`acp`). Each translates between its
//!   protocol and the runtime's events and commands, and decides nothing.
//! - [`start`]: opening a session for any frontend (project, config, trust and mode, the session
//!   to resume or copy, MCP servers, freeze, session file, backend, core); a frontend passes
//!   what it asks for in as data.
//! - The runtime loop, [`run`]: feeds the core its inputs, drains its events into a
//!   [`run::Sink`] (the one output every frontend implements) and carries out its effects
//!   through the backend. Commands come back on [`run::InputTx`].
//! - The effects the backend performs: [`provider`] (the model APIs), [`tools`] (the built-in
//!   tools), [`tasks`] (subagents), [`extensions`] (external tools, skills, the prompt, the
//!   freeze), [`hooks`], [`mcp`], [`session`] (the store), [`checkpoint`] (undo), [`images`],
//!   [`sandbox`] (every process started for the agent), [`config`] (the layered settings).
//! - Ground floor: [`exit`] (every exit code), [`human`] (whether a human runs this command),
//!   [`utc`] (dates), [`text`] (one-line summaries), [`oneshot`] (`--check`, `--spec`), and
//!   the test-only `panic_trigger` and `scratch` (where unit tests keep their files).

pub use openmax_core as core;

pub mod app;
pub mod approvals;
pub mod checkpoint;
pub mod config;
pub mod digest;
pub mod exit;
pub mod extensions;
pub mod frontend;
pub mod hooks;
pub mod human;
pub mod images;
pub mod mcp;
pub mod oneshot;
#[cfg(feature = "panic-trigger")]
pub mod panic_trigger;
pub mod provider;
pub mod run;
pub mod sandbox;
#[cfg(test)]
mod scratch;
pub mod session;
pub mod start;
pub mod tasks;
pub mod text;
pub mod tools;
pub mod utc;
pub mod walk;
