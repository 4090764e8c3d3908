//! The frontends: where the core's events go and where its commands come from. Every frontend
//! consumes the same wire [`Event`]s and sends the same commands, so a guarantee proved for the
//! core holds in each by construction; none decides policy.
//!
//! - [`framing`]: stdin bytes to core inputs (the `--stdio` command reader).
//! - [`jsonl`]: the `--stdio` event writer.
//! - [`print`]: the `-p` text renderer (reply on stdout, notices on stderr).
//! - [`print_run`]: the `-p` sink: the output format, the [`tally`] of the run, the
//!   `--output-schema` retry ([`output_schema`]) and the `json` result ([`print_result`]).

pub mod framing;
pub mod jsonl;
pub mod output_schema;
pub mod print;
pub mod print_result;
pub mod print_run;
pub mod tally;

pub use jsonl::JsonlSink;
pub use print::PrintSink;

use openmax_core::wire::Event;

/// A consumer of the core's events.
pub trait Sink {
    /// One event, in emission order.
    fn event(&mut self, event: Event);
    /// The core went quiet (or [`Sink::buffered_bytes`] grew large): make everything written
    /// so far visible.
    fn flush(&mut self);
    /// Bytes of events written but not yet flushed.
    fn buffered_bytes(&self) -> usize {
        0
    }
    /// Whether the client is gone: a write failed because it closed its end (EPIPE). The
    /// runtime then ends input as at EOF: the turn drains, approvals are declined, it exits.
    fn client_gone(&self) -> bool {
        false
    }
}
