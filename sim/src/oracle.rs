//! The contract's oracles applied to a run: the core's pairing checker over the interleaved
//! stdin/stdout record (it feeds every stdout line, hello included, to the core's stream
//! validator as well).
//!
//! Invariant: this module only adapts a [`Run`] to the oracles' inputs; the rules live in
//! `openmax_core::validate`. Framing faults have no stdin line to record (the shell skipped
//! the bytes); the pairing checker accepts the `protocol_error` they get.

use openmax_core::validate::{PairingChecker, Step, Where};
use openmax_core::wire::Command;

use crate::trace::{RecordLine, Run};

/// Every violation the oracles report, in plain words.
///
/// A run that never got `quit` or end of input is a live session cut short: its end-of-stream
/// violations (an open turn, an unsettled approval) only say the client has not finished, so
/// they are dropped; the guarantee checks judge whether such a session was really stuck.
pub fn validate(run: &Run) -> Vec<String> {
    let steps = steps(run);
    let finished = steps.iter().any(|s| match s {
        Step::EndOfInput => true,
        Step::Command(l) => matches!(Command::parse_line(l), Ok(Some(Command::Quit))),
        Step::Event(_) => false,
    });
    PairingChecker::check(&steps)
        .into_iter()
        .filter(|v| finished || v.at != Where::End)
        .map(|v| v.to_string())
        .collect()
}

/// The run as the pairing checker's steps: stdin lines and stdout lines in the order they
/// happened (framing faults have no line to record).
pub fn steps(run: &Run) -> Vec<Step> {
    run.record()
        .into_iter()
        .filter_map(|r| match r {
            RecordLine::In(l) => Some(Step::Command(l)),
            RecordLine::InFault(_) => None,
            RecordLine::InEof => Some(Step::EndOfInput),
            RecordLine::Out(l) => Some(Step::Event(l)),
        })
        .collect()
}
