//! [`Phase`]: where the turn is, and what each state carries.
//!
//! Invariants:
//! - `Phase::Idle` ⇔ no turn is running; `done` is emitted only after the phase left every
//!   running state, so a `user` handled right after `done` is admitted.
//! - The phase awaits at most one thing at a time: one request attempt, one tool plan, one
//!   approval (and its record), one blocking hook run or one persistence ticket. Beside it,
//!   the round's runs (`Turn::runs`: calls whose `RunTool` went out) are awaited each on its
//!   own, and each run's result under its own ticket, so runs of `task` calls can overlap the
//!   next call's start (`tasks.rs`). Inputs naming anything else (a stale attempt, another
//!   call id, an old ticket) are ignored.
//! - Deadlines live in the phase that owns them, so leaving a phase cancels its timer.
//!
//! The transitions are in the modules that handle each input; each is one match arm over this
//! enum. Where every state must decide ([`Phase::in_turn`], [`Phase::timer`], aborting a turn)
//! the match is exhaustive; elsewhere the accessors below name the one state an input can
//! concern, so an input that concerns no current state changes nothing.

use std::collections::VecDeque;

use crate::compaction::Receipt;
use crate::provider::RequestId;
use crate::time::Millis;
use crate::tool::{RunSandbox, SourceGate};
use crate::wire::StopReason;

use super::interface::{HookEvent, HookSpec, TimerReason};
use super::turn::{Attempt, Reply};

/// Where the turn is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Phase {
    /// No turn is running.
    Idle,
    /// Blocking hooks run one at a time: `user_prompt_submit` before the prompt is admitted,
    /// `tool_start` before a tool call is started, or `turn_end` after a reply with no tool
    /// calls.
    Hooks {
        stage: HookStage,
        current: HookRun,
        rest: VecDeque<HookSpec>,
    },
    /// One attempt of a model request is out: requesting, then streaming.
    Streaming(Box<Attempt>),
    /// Waiting out the backoff before `attempt` of `request` goes out.
    Backoff {
        request: RequestId,
        attempt: u32,
        deadline: Millis,
    },
    /// A record the client waits on is being persisted; `then` goes out after the ack.
    Persisting { ticket: u64, then: AfterPersist },
    /// The shell is inspecting call `call` of the round.
    Planning { call: usize },
    /// Call `call` waits for a human. `recording`: the human approved external code and the
    /// approval of its bytes is being written; `approval_settled` follows the answer.
    Approving {
        call: usize,
        approval_id: String,
        deadline: Option<Millis>,
        source: Option<SourceGate>,
        /// The sandbox the call runs in if approved.
        sandbox: RunSandbox,
        recording: bool,
        /// The plan's [`crate::tool::ToolPlan::confirm`] key, remembered once approved.
        confirm: Option<String>,
    },
    /// No call is being started: the round waits for its runs (`Turn::runs`) to end, before
    /// it starts its next call, asks the model again or ends the turn.
    RunningTools,
}

/// Which blocking hooks a [`Phase::Hooks`] runs, and what follows them.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum HookStage {
    /// `user_prompt_submit`: the prompt (and its images) is admitted once every hook passed.
    Prompt {
        prompt: String,
        images: Vec<crate::conversation::Image>,
    },
    /// `tool_start`: call `call` of the round starts, with `args` (the model's, or as the
    /// hooks so far rewrote them), once every hook matching it passed or rewrote it.
    ToolStart {
        call: usize,
        args: serde_json::Map<String, serde_json::Value>,
        /// The hooks that rewrote the arguments, in order.
        rewritten_by: Vec<String>,
    },
    /// `turn_end`: the turn ends with the reply's finish reason once every hook passed.
    TurnEnd { finish_reason: String },
}

/// What goes out once a [`Phase::Persisting`] record is on disk.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum AfterPersist {
    /// A completed reply: `message_done`, `usage`, `budget`, then tools or the turn's end.
    Reply(Box<Reply>),
    /// A cut-off reply's partial text: `message_done`, the `error` (when there is one) and
    /// `done` with `stop` (truncated, or a cancel mid-reply).
    Partial {
        text: String,
        message: Option<String>,
        stop: StopReason,
    },
    /// Call `call`'s result: `tool_end` (and the note riding it).
    Result {
        call: usize,
        ok: bool,
        output: String,
        note: Option<String>,
    },
    /// A honored `turn_end` refusal: `turn_refused`, then the model is asked again.
    Refusal { hook: String, reason: String },
    /// A forced compaction's record (the whole compacted conversation): the `compacted`
    /// receipt, the `compacted` hooks and then the request (`next`), so a resume restarts from
    /// the compaction point the request was built on.
    Compaction {
        receipt: Receipt,
        next: AfterCompaction,
    },
}

/// What goes out once a compaction point is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterCompaction {
    /// The turn's next request (a compaction forced by the estimate).
    NewRequest,
    /// The one re-send of a request the provider refused as too long for its window.
    Resend { request: RequestId, attempt: u32 },
}

/// A blocking hook run in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HookRun {
    pub run: u64,
    pub hook: String,
    pub event: HookEvent,
}

impl Phase {
    /// Whether a turn is running.
    pub(super) fn in_turn(&self) -> bool {
        match self {
            Phase::Idle => false,
            Phase::Hooks { .. }
            | Phase::Streaming(_)
            | Phase::Backoff { .. }
            | Phase::Persisting { .. }
            | Phase::Planning { .. }
            | Phase::Approving { .. }
            | Phase::RunningTools => true,
        }
    }

    /// The phase's own timer.
    pub(super) fn timer(&self) -> Option<(Millis, TimerReason)> {
        match self {
            Phase::Streaming(a) => a.idle_deadline.map(|d| (d, TimerReason::StreamIdle)),
            Phase::Backoff { deadline, .. } => Some((*deadline, TimerReason::RetryBackoff)),
            Phase::Approving {
                deadline,
                recording: false,
                ..
            } => deadline.map(|d| (d, TimerReason::ApprovalTimeout)),
            Phase::Approving {
                recording: true, ..
            }
            | Phase::Idle
            | Phase::Hooks { .. }
            | Phase::Persisting { .. }
            | Phase::Planning { .. }
            | Phase::RunningTools => None,
        }
    }

    /// The attempt, taken out (the phase becomes `Idle`), when it streams `(request, attempt)`.
    pub(super) fn take_attempt(
        &mut self,
        request: RequestId,
        attempt: u32,
    ) -> Option<Box<Attempt>> {
        match std::mem::replace(self, Phase::Idle) {
            Phase::Streaming(a) if a.request == request && a.attempt == attempt => Some(a),
            other => {
                *self = other;
                None
            }
        }
    }

    /// What follows the record, taken out (the phase becomes `Idle`), when it waits on
    /// `ticket`.
    pub(super) fn take_persisted(&mut self, ticket: u64) -> Option<AfterPersist> {
        match std::mem::replace(self, Phase::Idle) {
            Phase::Persisting { ticket: t, then } if t == ticket => Some(then),
            other => {
                *self = other;
                None
            }
        }
    }

    /// The stage, the run and the hooks left, taken out (the phase becomes `Idle`), when the
    /// blocking hook run `run` is the one awaited.
    pub(super) fn take_hooks(
        &mut self,
        run: u64,
    ) -> Option<(HookStage, HookRun, VecDeque<HookSpec>)> {
        match std::mem::replace(self, Phase::Idle) {
            Phase::Hooks {
                stage,
                current,
                rest,
            } if current.run == run => Some((stage, current, rest)),
            other => {
                *self = other;
                None
            }
        }
    }

    /// The pending approval's call and source, taken out (the phase becomes `Idle`), when it
    /// is `approval_id` and no record of it is being written.
    pub(super) fn take_pending_approval(
        &mut self,
        approval_id: &str,
    ) -> Option<(usize, Option<SourceGate>, RunSandbox, Option<String>)> {
        match std::mem::replace(self, Phase::Idle) {
            Phase::Approving {
                call,
                approval_id: id,
                source,
                sandbox,
                recording: false,
                confirm,
                ..
            } if id == approval_id => Some((call, source, sandbox, confirm)),
            other => {
                *self = other;
                None
            }
        }
    }

    /// The call whose approval record is being written, taken out (the phase becomes
    /// `Idle`), when it is `approval_id`'s.
    pub(super) fn take_recording(&mut self, approval_id: &str) -> Option<(usize, RunSandbox)> {
        match std::mem::replace(self, Phase::Idle) {
            Phase::Approving {
                call,
                approval_id: id,
                sandbox,
                recording: true,
                ..
            } if id == approval_id => Some((call, sandbox)),
            other => {
                *self = other;
                None
            }
        }
    }

    /// The call being planned.
    pub(super) fn planning(&self) -> Option<usize> {
        match self {
            Phase::Planning { call } => Some(*call),
            _ => None,
        }
    }
}
