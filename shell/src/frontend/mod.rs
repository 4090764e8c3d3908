//! The frontends, side by side: where the core's events go and where its commands come from.
//! Every frontend consumes the same wire events (through [`crate::run::Sink`]) and sends the
//! same commands (through [`crate::run::InputTx`]), so a guarantee proved for the core holds in
//! each by construction; none decides policy, and none imports another's session start-up:
//! [`crate::start`] opens every session, [`crate::app`] picks the frontend.
//!
//! - `--stdio`: [`framing`] (stdin bytes to core inputs) and [`jsonl`] (the event writer).
//! - `-p`: [`print`] (the text renderer: reply on stdout, notices on stderr) and [`print_run`]
//!   (the sink: the output format, the [`tally`] of the run, the `--output-schema` retry
//!   ([`output_schema`]) and the `json` result ([`print_result`])).
//! - [`tui`]: the terminal UI (ratatui + crossterm), a human at a terminal.
//! - [`acp`]: the Agent Client Protocol adapter, for editors (Zed and others).

pub mod acp;
pub mod framing;
pub mod jsonl;
pub mod output_schema;
pub mod print;
pub mod print_result;
pub mod print_run;
pub mod tally;
pub mod tui;

pub use jsonl::JsonlSink;
pub use print::PrintSink;
