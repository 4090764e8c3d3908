//! How a turn ends: normally ([`Core::end_turn`]), failed at once ([`Core::abort_turn`]), or
//! failed at the next safe point (a crash or a failed background record while a record of the
//! turn is being persisted).
//!
//! Invariants: every ending goes through `end_turn`, which fills the round's unresolved tool
//! results, records the end, leaves the running state and only then emits `done`; no turn
//! ends while a run of its round is out (a cancel or a failure at a safe point waits for
//! them); an aborted turn cancels what is in flight (every run out), ends every open
//! `tool_start` and settles an open approval before its `error` and `done error`.

use crate::conversation::{Block, Message, Role};
use crate::record::Record;
use crate::wire::{ApprovalOutcome, Event, StopReason};

use super::phase::{AfterPersist, Phase};
use super::turn::{RunState, Turn};
use super::{Core, Effect};

impl Core {
    /// End the running turn: fill unresolved tool results, record the end, leave the running
    /// state, then emit `done` (and exit when draining).
    pub(super) fn end_turn(&mut self, stop_reason: StopReason) {
        // Every run ended before this (their forwarded approvals with them); none is left
        // open past the turn's `done` even if one were.
        self.settle_forwarded(None, ApprovalOutcome::Cancelled, false);
        if let Some(message) = self.turn.failure.take() {
            self.ev(Event::Error { message });
        }
        let mut records = Vec::new();
        if let Some(r) = self.resolve_round(&format!("not run: the turn ended ({stop_reason})")) {
            records.push(r);
        }
        records.push(Record::TurnEnd {
            stop_reason: stop_reason.clone(),
            turn: Some(self.turn.number),
        });
        self.after_turn();
        self.phase = Phase::Idle;
        self.turn = Turn::default();
        // Fire-and-forget: nothing waits on this ticket once the turn is over.
        self.persist(records);
        self.last_stop = Some(stop_reason.clone());
        self.ev(Event::Done { stop_reason });
        if let Some(snapshot) = self.gate.deferred_freeze.take() {
            self.apply_freeze(*snapshot);
        }
        self.after_done();
    }

    /// Give every unresolved call of the round a failed result, in one user message.
    fn resolve_round(&mut self, output: &str) -> Option<Record> {
        let mut content = Vec::new();
        for c in &mut self.turn.round {
            if !c.resolved {
                c.resolved = true;
                content.push(Block::ToolResult {
                    id: c.id.clone(),
                    ok: false,
                    output: output.to_string(),
                });
            }
        }
        if content.is_empty() {
            None
        } else {
            Some(self.push_message(Message {
                role: Role::User,
                content,
            }))
        }
    }

    /// `error` then `done error` (nothing is in flight: the attempt is over).
    pub(super) fn fail_turn(&mut self, message: String) {
        self.ev(Event::Error { message });
        self.end_turn(StopReason::Error);
    }

    pub(super) fn on_crashed(&mut self, message: String) {
        self.fail_turn_at_safe_point(format!("the turn crashed: {message}"));
    }

    /// Fail the running turn with `message` (a crash, or a background record that could not be
    /// written). While a record of the turn is being persisted, the turn ends after that ack
    /// (see [`Turn::failure`]), so what the record keeps is still announced; otherwise at once.
    pub(super) fn fail_turn_at_safe_point(&mut self, message: String) {
        match &self.phase {
            Phase::Persisting { .. } => self.fail_after_acks(message),
            Phase::RunningTools if self.run_persisting() => self.fail_after_acks(message),
            Phase::Idle => {}
            Phase::Hooks { .. }
            | Phase::Streaming(_)
            | Phase::Backoff { .. }
            | Phase::Planning { .. }
            | Phase::Approving { .. }
            | Phase::RunningTools => self.abort_turn(message),
        }
    }

    /// End the turn `error` with `message` once the records being persisted are on disk (their
    /// events still go out); the runs still running are cancelled meanwhile.
    fn fail_after_acks(&mut self, message: String) {
        self.turn.ending = Some(StopReason::Error);
        self.turn.failure.get_or_insert(message);
        self.cancel_runs();
    }

    /// Fail the running turn: cancel what is in flight, end an open `tool_start` and settle an
    /// open approval, then `error` and `done error`.
    pub(super) fn abort_turn(&mut self, message: String) {
        // This error is the one reported; a crash's deferred one is dropped with it.
        self.turn.failure = None;
        let failed = format!("the turn failed: {message}");
        if !self.phase.in_turn() {
            return;
        }
        self.settle_forwarded(None, ApprovalOutcome::Cancelled, false);
        // The runs out come first in the round: each is cancelled (unless it was) and ends.
        for (call, run) in std::mem::take(&mut self.turn.runs) {
            if let RunState::Running { cancelling: false } = run.state {
                let call_id = self.call_id(call);
                self.eff(Effect::CancelTool { call_id });
            }
            self.force_tool_end(call, &failed);
        }
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => return,
            Phase::Streaming(a) => self.eff(Effect::CancelRequest { request: a.request }),
            Phase::Planning { call }
            | Phase::Persisting {
                then: AfterPersist::Result { call, .. },
                ..
            } => self.force_tool_end(call, &failed),
            Phase::Approving {
                call, approval_id, ..
            } => {
                self.settle(&approval_id, ApprovalOutcome::Cancelled);
                self.force_tool_end(call, &failed);
            }
            Phase::Persisting {
                then: AfterPersist::Reply(_) | AfterPersist::Partial { .. },
                ..
            } => {
                // The reply gets no message_done: it is not kept, so it leaves the transcript
                // (the next request must not carry it).
                self.conversation.pop();
            }
            Phase::Hooks { .. }
            | Phase::Backoff { .. }
            | Phase::RunningTools
            | Phase::Persisting {
                then: AfterPersist::Refusal { .. } | AfterPersist::Compaction { .. },
                ..
            } => {}
        }
        self.ev(Event::Error { message });
        self.end_turn(StopReason::Error);
    }
}
