//! The stream validator: the contract `openmax-stdio/6` in executable form.
//!
//! - [`line`](mod@line): the shape of one stdout line on its own (JSON object, known `type`, fields and
//!   their JSON types from [`crate::wire::event::EVENT_FIELDS`], enumerations, session id
//!   presence, one-line value rules such as `source_sha`).
//! - [`stream`]: [`StreamValidator`], the rules across lines (handshake, session id, turns,
//!   token runs, tool calls, approvals, retries, refusals), each next to its contract sentence.
//! - [`pairing`]: [`PairingChecker`], what only commands and events together show (every
//!   admitted `user` answered by one `done`, protocol errors for bad commands, approvals
//!   declined on quit).
//! - [`schema`]: the JSON Schema (draft 2020-12) of every command and stdout line, generated
//!   from the same tables, and a checker for the subset it uses.
//!
//! Invariants: pure (no I/O); the validator's memory is bounded whatever it is fed; every
//! violation is a sentence in plain words naming the rule, never a panic.

pub mod line;
pub mod pairing;
pub mod schema;
pub mod stream;

pub use pairing::{PairingChecker, Step};
pub use stream::StreamValidator;

/// Where a violation was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Where {
    /// A stdout line (1-based).
    Line(u64),
    /// A step of a recorded command/event sequence (1-based), for the pairing checker.
    Step(usize),
    /// The end of the stream or sequence.
    End,
}

/// One broken rule, in plain words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where in the stream.
    pub at: Where,
    /// What rule was broken.
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at {
            Where::Line(n) => write!(f, "line {n}: {}", self.message),
            Where::Step(n) => write!(f, "step {n}: {}", self.message),
            Where::End => write!(f, "end of stream: {}", self.message),
        }
    }
}

/// The verdict on one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineReport {
    /// The line's number (1-based).
    pub line: u64,
    /// Empty when the line holds.
    pub violations: Vec<Violation>,
}

impl LineReport {
    /// Whether the line holds.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Validate a whole stream held in memory (tests, the sim): every line's violations, then the
/// end-of-stream ones. Empty when the stream holds.
pub fn check_stream<'a, I>(lines: I) -> Vec<Violation>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut v = StreamValidator::new();
    let mut out = Vec::new();
    for line in lines {
        out.extend(v.feed(line.as_bytes()).violations);
    }
    out.extend(v.finish());
    out
}
