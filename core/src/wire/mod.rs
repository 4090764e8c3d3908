//! The wire: every line of `openmax-stdio/6` as a typed Rust value.
//!
//! - [`command`]: what a client writes on stdin (`{"cmd": …}` lines).
//! - [`event`]: what openmax writes on stdout, and [`event::Line`], the serialized form that puts
//!   `session_id` first, then `type`, then the fields in the contract's order.
//! - [`mode`]: the approval mode; [`field`]: the field tables' types (shared by commands and
//!   events, so neither module imports the other).
//! - [`stop`]: [`StopReason`], why a turn ended.
//! - [`handshake`]: the `hello` and `transcript` lines (not events, but they carry a session id).
//!
//! Invariant: serialization of these types is the only place the wire's shape is written down
//! in code; the validator and the JSON Schema of `--spec stdio --json` derive from the same
//! field tables in [`event::EVENT_FIELDS`] so the three cannot drift.

pub mod command;
pub mod event;
pub mod field;
pub mod handshake;
pub mod mode;
pub mod stop;

pub use command::{Command, CommandError};
pub use event::{ApprovalOutcome, ApprovalReason, Event, Line};
pub use field::{FieldSpec, FieldType};
pub use handshake::{Hello, Transcript, TranscriptMessage};
pub use mode::Mode;
pub use stop::StopReason;

/// The readable protocol id carried by `hello.proto`.
pub const PROTO: &str = "openmax-stdio/6";
/// The integer protocol version carried by `hello.protocol_version`.
pub const PROTOCOL_VERSION: u32 = 6;
/// The largest stdin line the reader accepts (8 MiB), newline excluded.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
