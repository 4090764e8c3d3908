//! The session's lifecycle: [`Lifecycle`] and its transitions.
//!
//! ```text
//! Starting --first handle--> Open --quit / end of input--> Draining --turn over--> Closed
//! ```
//!
//! - `Starting`: built, nothing emitted. The first `handle` emits the start-up outputs (the
//!   freeze's notes, the `session_start` hooks) and opens the session.
//! - `Open`: commands are accepted.
//! - `Draining`: `quit` or end of input arrived. Later commands are ignored, pending and new
//!   approvals are declined, and the turn in flight may run until `deadline`
//!   (`limits.drain_timeout_ms` after the quit), when it is cancelled. The session closes at
//!   that turn's `done`, or at once when none runs.
//! - `Closed`: [`Effect::Exit`] was emitted with `code`; every input is ignored.
//!
//! A non-interactive session (`-p`) has one command: its `done` ends the input, as end of
//! input would, so the session exits right after it (a `cancel` can still reach the turn
//! until then). With `driver_ends_input` (`-p --output-schema`, which may ask once more) the
//! driver sends its follow-up or the end of input itself.
//!
//! Exit code: 1 when the last admitted turn ended `error`, else 0. A non-interactive session
//! exits with its turn's [`StopReason::print_exit_code`] (0 for a normal end, 1 for a missing
//! or incomplete reply, 4 when a limit or a hook stopped the turn), and 1 when its command was
//! refused before any turn ran.

use crate::time::Millis;
use crate::wire::{ApprovalOutcome, StopReason};

use super::phase::Phase;
use super::{Core, Effect, HookEvent, Input};

/// Where the session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lifecycle {
    /// Built; the first input opens it.
    Starting,
    /// Commands are accepted.
    Open,
    /// The in-flight turn finishes (cancelled at `deadline`, when set), then the session exits.
    Draining { deadline: Option<Millis> },
    /// `Exit` was emitted.
    Closed { code: i32 },
}

impl Lifecycle {
    /// `quit` or end of input arrived (the session drains or is closed).
    pub(super) fn quitting(self) -> bool {
        match self {
            Lifecycle::Starting | Lifecycle::Open => false,
            Lifecycle::Draining { .. } | Lifecycle::Closed { .. } => true,
        }
    }

    /// The exit code, once closed.
    pub(super) fn exit_code(self) -> Option<i32> {
        match self {
            Lifecycle::Closed { code } => Some(code),
            Lifecycle::Starting | Lifecycle::Open | Lifecycle::Draining { .. } => None,
        }
    }
}

impl Core {
    /// Open the session: the freeze's notes and the `session_start` hooks, before the first
    /// input is handled.
    pub(super) fn start(&mut self) {
        self.lifecycle = Lifecycle::Open;
        for n in self.config.freeze.notes.clone() {
            self.note(n);
        }
        self.fire_observe(HookEvent::SessionStart, None, serde_json::json!({}));
    }

    /// `quit` or end of input: decline a pending approval, let the turn in flight finish until
    /// the drain deadline (cancel it at once when that is 0), or exit now when none runs.
    pub(super) fn on_quit(&mut self) {
        if self.lifecycle.quitting() {
            return;
        }
        self.lifecycle = Lifecycle::Draining { deadline: None };
        // The children asking are answered as the contract says of pending approvals.
        self.settle_forwarded(None, ApprovalOutcome::Declined, true);
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => return self.exit(),
            Phase::Approving {
                call,
                approval_id,
                recording: false,
                ..
            } => {
                self.settle(&approval_id, ApprovalOutcome::Declined);
                self.finish_call(
                    call,
                    false,
                    "declined: the session is shutting down, so the call was not run".into(),
                    None,
                );
            }
            p @ (Phase::Hooks { .. }
            | Phase::Streaming(_)
            | Phase::Backoff { .. }
            | Phase::Persisting { .. }
            | Phase::Planning { .. }
            | Phase::Approving { .. }
            | Phase::RunningTools) => self.phase = p,
        }
        if self.in_turn() {
            match self.config.limits.drain_timeout_ms {
                0 => self.cancel_turn(),
                ms => {
                    self.lifecycle = Lifecycle::Draining {
                        deadline: Some(self.now.plus(ms)),
                    }
                }
            }
        }
    }

    /// Whether the drain deadline is due at `now`; it is consumed when it is.
    pub(super) fn drain_deadline_passed(&mut self, now: Millis) -> bool {
        match self.lifecycle {
            Lifecycle::Draining { deadline: Some(d) } if d <= now => {
                self.lifecycle = Lifecycle::Draining { deadline: None };
                true
            }
            Lifecycle::Starting
            | Lifecycle::Open
            | Lifecycle::Draining { .. }
            | Lifecycle::Closed { .. } => false,
        }
    }

    /// Cancel the turn in flight, as a `cancel` command would (the drain deadline passed).
    pub(super) fn cancel_turn(&mut self) {
        if self.in_turn() {
            self.turn.shutdown = true;
            self.on_cancel();
        }
    }

    /// Who ended the turn, as the results of the calls it cuts off say.
    pub(super) fn cancel_cause(&self) -> &'static str {
        if self.turn.shutdown {
            "the session shut down"
        } else {
            "the user cancelled the turn"
        }
    }

    /// A `done` is out: a draining session exits now, and a non-interactive one ends its
    /// input (it had its one command).
    pub(super) fn after_done(&mut self) {
        match self.lifecycle {
            Lifecycle::Draining { .. } => self.exit(),
            // Like end of input from the client: behind input already held, or an answer
            // still awaited.
            // The driver ends the input itself (a follow-up command may come first).
            Lifecycle::Open if self.config.driver_ends_input => {}
            Lifecycle::Open
                if self.config.non_interactive
                    && (self.gate.awaiting_answer() || !self.gate.held.is_empty()) =>
            {
                self.hold(Input::EndOfInput)
            }
            Lifecycle::Open if self.config.non_interactive => self.on_quit(),
            Lifecycle::Starting | Lifecycle::Open | Lifecycle::Closed { .. } => {}
        }
    }

    /// Close the session with its exit code (see the module docs).
    pub(super) fn exit(&mut self) {
        let code = if self.config.non_interactive {
            self.last_stop
                .as_ref()
                .map_or(1, StopReason::print_exit_code)
        } else {
            match self.last_stop {
                Some(StopReason::Error) => 1,
                Some(_) | None => 0,
            }
        };
        self.lifecycle = Lifecycle::Closed { code };
        self.eff(Effect::Exit { code });
    }
}
