//! openmax-core: pure, side-effect-free. The turn state machine, the wire types of
//! `openmax-stdio/6`, and the stream validator that is the contract's executable form.
//!
//! This crate must never touch a clock, a file, a socket, a process, an environment variable or a
//! random source, and never depends on anything async. Time comes in as [`time::Millis`] with
//! every mutating call; ids and jitter come from a seed given at construction. Bad input becomes
//! an event (`protocol_error`, `error`); a panic means a broken invariant.

#![warn(missing_docs, unreachable_pub)]

pub mod compaction;
pub mod conversation;
pub mod machine;
pub mod permissions;
pub mod provider;
pub mod record;
pub mod time;
pub mod tool;
pub mod validate;
pub mod wire;

pub use machine::{Core, CoreConfig, Effect, Input, Output, TimerReason};
pub use time::Millis;
