//! The command gate: commands are answered in the order they arrived, even when a command's
//! answer waits on an effect.
//!
//! `approval_mode` is answered after `SaveMode`'s answer, `reload` after `Refreeze`'s, an
//! `approve` of external code after `ApproveSource`'s (the record of the approved bytes), and a
//! compaction the person asked for after its compaction point's `Persist` ack. While
//! any is in flight, client input (command lines, framing faults, end of input) is held
//! here and handled, in order, right after the answer. A held input remembers whether a turn
//! was in flight when it arrived (as the client saw it: one running, or a `user` held ahead of
//! it that will start one), so a `user` or `reload` sent during a turn is answered as in
//! flight even if the turn ended while it waited.
//!
//! A snapshot (`Frozen`) that arrives while a turn runs is kept here too and applied right
//! after that turn's `done`: `refrozen` only appears between turns.

use std::collections::VecDeque;

use crate::wire::{Command, Mode};

use super::{Core, Freeze, Input};

/// What the gate holds.
#[derive(Debug, Default)]
pub(super) struct Gate {
    /// Modes whose `SaveMode` is in flight, oldest first.
    pub mode_saves: VecDeque<Mode>,
    /// A `Refreeze` is in flight.
    pub refreezing: bool,
    /// An `ApproveSource` is in flight.
    pub recording: Option<SourceRecord>,
    /// The compaction point of an `Input::Compact` is being written.
    pub compacting: Option<Compacting>,
    /// Client input held meanwhile, oldest first.
    pub held: VecDeque<Held>,
    /// While a held input is handled: whether a turn was in flight when it arrived.
    pub arrived_in_turn: bool,
    /// A snapshot that arrived during a turn, applied after its `done`.
    pub deferred_freeze: Option<Box<Freeze>>,
}

/// An approval of external code's bytes being recorded.
#[derive(Debug)]
pub(super) struct SourceRecord {
    pub approval_id: String,
    pub source_path: String,
    pub source_sha: String,
}

/// A compaction the person asked for, waiting for its record's ack: the conversation becomes
/// `messages` and the receipt goes out only then.
#[derive(Debug)]
pub(super) struct Compacting {
    pub ticket: u64,
    pub messages: Vec<crate::conversation::Message>,
    pub receipt: crate::compaction::Receipt,
}

/// One held client input.
#[derive(Debug)]
pub(super) struct Held {
    input: Input,
    /// A turn was in flight, as the client saw it, when the input arrived.
    in_turn: bool,
}

impl Gate {
    /// A command's answer depends on an effect still in flight: client input waits.
    pub(super) fn awaiting_answer(&self) -> bool {
        !self.mode_saves.is_empty()
            || self.refreezing
            || self.recording.is_some()
            || self.compacting.is_some()
    }

    /// A `user` held while no turn was in flight: it will start one.
    fn user_ahead(&self) -> bool {
        self.held.iter().any(|h| {
            !h.in_turn
                && matches!(&h.input, Input::Line(l)
                    if matches!(Command::parse_line(l), Ok(Some(Command::User { .. }))))
        })
    }
}

impl Core {
    /// Hold client input until the answers the gate waits on are in.
    pub(super) fn hold(&mut self, input: Input) {
        let in_turn = self.in_turn() || self.gate.user_ahead();
        self.gate.held.push_back(Held { input, in_turn });
    }

    /// Handle held input, in order, while no answer is awaited and the session is not closed.
    pub(super) fn release_held(&mut self) {
        while !self.gate.awaiting_answer() && self.exit_code().is_none() {
            let Some(Held { input, in_turn }) = self.gate.held.pop_front() else {
                break;
            };
            self.gate.arrived_in_turn = in_turn;
            self.dispatch(input);
            self.gate.arrived_in_turn = false;
        }
    }

    /// A turn is in flight now, or was when the command being handled arrived.
    pub(super) fn busy(&self) -> bool {
        self.in_turn() || self.gate.arrived_in_turn
    }
}
