//! Persistence: the `Persist` effect and its answers.
//!
//! A record the client waits on (a reply before `message_done`, a tool result before
//! `tool_end`, a honored refusal before `turn_refused`, a compaction point before `compacted`)
//! is awaited in [`Phase::Persisting`], or, for the result of a call that ran, by its run
//! (`Turn::runs`); what follows it goes out in the drain of its ack. Other
//! records (the prompt, a mode change, a refreeze, a turn's end) are written in the
//! background: a failure of one written during a turn fails that turn at its next safe point.

use crate::record::Record;
use crate::wire::StopReason;

use super::phase::{AfterPersist, Phase};
use super::{Core, Effect};

impl Core {
    /// Emit a `Persist` effect and return its ticket.
    pub(super) fn persist(&mut self, records: Vec<Record>) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.eff(Effect::Persist { ticket, records });
        ticket
    }

    /// Persist records the client waits on, and wait for the ack; `then` follows it.
    pub(super) fn persist_then(&mut self, records: Vec<Record>, then: AfterPersist) {
        let ticket = self.persist(records);
        self.phase = Phase::Persisting { ticket, then };
    }

    /// Persist records no event waits on; a failure of one written during the running turn
    /// fails that turn.
    pub(super) fn persist_background(&mut self, records: Vec<Record>) {
        let ticket = self.persist(records);
        // Outside a turn the set is cleared at the next admission, so an idle-time ticket
        // never fails a later turn.
        self.turn.background.insert(ticket);
    }

    pub(super) fn on_persisted(&mut self, ticket: u64) {
        if self.compaction_written(ticket, None) || self.on_run_persisted(ticket) {
            return;
        }
        let Some(then) = self.phase.take_persisted(ticket) else {
            self.turn.background.remove(&ticket);
            return;
        };
        match then {
            AfterPersist::Reply(reply) => self.after_reply(*reply),
            AfterPersist::Partial {
                text,
                message,
                stop,
            } => self.finish_partial(text, message, stop),
            AfterPersist::Result {
                call,
                ok,
                output,
                note,
            } => self.after_result(call, ok, output, note),
            AfterPersist::Refusal { hook, reason } => self.after_refusal(hook, reason),
            AfterPersist::Compaction { receipt, next } => self.after_compaction(receipt, next),
        }
    }

    pub(super) fn on_persist_failed(&mut self, ticket: u64, message: String) {
        if self.compaction_written(ticket, Some(&message)) {
            return;
        }
        let error = format!("the session record could not be written: {message}");
        if self.is_run_ticket(ticket) {
            // A run's result: the abort ends it with the rest of the turn.
            return self.abort_turn(error);
        }
        let Some(then) = self.phase.take_persisted(ticket) else {
            if self.turn.background.remove(&ticket) && self.in_turn() {
                self.fail_turn_at_safe_point(error);
            }
            return;
        };
        match then {
            AfterPersist::Refusal { .. } => {
                // The refusal never reached disk: drop it from the transcript too.
                self.conversation.pop();
                self.end_turn(StopReason::Unverified);
            }
            then @ (AfterPersist::Reply(_)
            | AfterPersist::Partial { .. }
            | AfterPersist::Result { .. }
            | AfterPersist::Compaction { .. }) => {
                // Back in place, so the abort ends what the record belonged to.
                self.phase = Phase::Persisting { ticket, then };
                self.abort_turn(error);
            }
        }
    }
}
