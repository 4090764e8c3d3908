//! openmax-shell: the `openmax` binary's library. A thin tokio shell around the pure
//! [`openmax_core`] machine: it frames stdin, writes events to stdout, and performs the core's
//! effects (model requests over hyper + rustls, tools, hooks, the session store, config).
//!
//! It must never decide policy (retries, approvals, turn endings): the core decides, the shell
//! carries out. It must never write user state into the project (the project is agent-writable).

pub use openmax_core as core;

pub mod app;
pub mod checkpoint;
pub mod config;
pub mod exit;
mod extensions;
pub mod frontend;
pub mod hooks;
pub mod human;
pub mod images;
pub mod mcp;
pub mod oneshot;
#[cfg(feature = "panic-trigger")]
pub mod panic_trigger;
pub mod provider;
mod run;
pub mod sandbox;
pub mod session;
pub mod start;
pub mod tasks;
pub mod tools;
pub mod utc;
