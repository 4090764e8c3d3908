//! The turn state machine: one way in ([`Core::handle`]), one way out ([`Core::poll`]), and
//! [`Core::poll_timeout`] for timers. Pure: no clock, no I/O, no randomness but the seed.
//!
//! # Drain contract
//!
//! 1. Call [`Core::handle`] with the current time and one [`Input`].
//! 2. Call [`Core::poll`] until it returns `None`. Each [`Output`] is either a wire
//!    [`crate::wire::Event`] to write (in order) or an [`Effect`] to carry out; an effect's
//!    answer comes back later as another `Input` (a `Persist` as `Persisted`/`PersistFailed`, a
//!    `SendRequest` as `Provider` items or `RequestFailed`, …).
//! 3. Ask [`Core::poll_timeout`]. When it returns `Some((deadline, reason))`, call
//!    `handle(now, Input::Timeout)` once `now >= deadline` (if another input comes first,
//!    handle it and ask again). Every deadline is strictly later than the `now` of the `handle`
//!    that set it, and a `Timeout` at or after it consumes it, so a driver that jumps a virtual
//!    clock to each deadline always moves forward and can never busy-loop.
//! 4. Client input (`Line`, `Framing`, `EndOfInput`) that arrives while the answer to an
//!    earlier `approval_mode`, `reload` or `approve` of external code is still in flight
//!    (`SaveMode`, `Refreeze`, `ApproveSource`) is held and handled, in order, right after
//!    that answer: commands are answered in arrival order.
//! 5. After [`Effect::Exit`] the session is over: [`Core::exit_code`] is `Some` and every
//!    further input is ignored.
//!
//! Invariants: a single mutation (`handle`) is followed by a full drain; `&mut self` only, no
//! interior mutability, no channels; BTree collections and a seeded PRNG only, so the same
//! inputs give the same outputs byte for byte. Bad input becomes a `protocol_error` or
//! `error` event; no input can make the core panic. Inputs that name a request attempt, tool
//! call, approval, hook run or persistence ticket that is no longer current are ignored.
//!
//! # Decisions the contract leaves open
//!
//! - Two state machines, each fact in one place: the session's `lifecycle::Lifecycle`
//!   (starting, open, draining with its deadline, closed with its exit code) and the turn's
//!   `phase::Phase` (idle, blocking hooks, streaming, backoff, persisting a record the client
//!   waits on, planning, approving, waiting on the round's runs). A drain lets the in-flight
//!   turn keep running, so the two are independent. The command gate (`gate::Gate`: held
//!   client input, in-flight mode saves and refreezes, a snapshot deferred to the turn's end)
//!   is the third piece of state that decides what an input does.
//! - Tool calls of one reply are started one at a time, in order; the runs of consecutive
//!   `task` calls overlap (up to `[tasks] max_parallel`, `tasks.rs`), each run ends with one
//!   `tool_end` in the order the results come, and a cancel cancels every run out and ends the
//!   turn once all of them ended. Every other call runs alone.
//! - A running `task` call's child asks this session for approvals ([`Input::TaskApproval`]):
//!   `forward.rs` turns each into an `approval_request` of this session (or answers it by the
//!   mode's rule) and settles it exactly once, beside whatever the phase awaits; the answer
//!   goes down as [`Effect::AnswerTask`].
//! - Timers: one [`TimerReason`] at a time, owned by the phase (`StreamIdle` is armed when an
//!   attempt goes out and reset by every provider item; `RetryBackoff`; `ApprovalTimeout`).
//!   Expiry comes back as [`Input::Timeout`].
//! - Blocking `user_prompt_submit` hooks run before the prompt enters the conversation, so a
//!   `blocked` prompt is never shown to the model nor recorded as a message.
//! - A final reply (no tool calls) always gets a `message_done`, even with empty text; a reply
//!   that only calls tools gets one when it had text.
//! - A `cancel` mid-reply after some `token`s keeps the partial text (persisted, then
//!   `message_done`) before `done cancelled`, so every token run ends with `message_done`.
//! - A `RequestFailed` (or any failure) after reply text is never retried.
//! - Tool results and harness notes are appended as they happen; the request body is shaped
//!   once, here, by [`crate::conversation::ModelRequest::shaped`] (roles merged, every call
//!   paired with one result, results first), so the body the core counts and sends is the body
//!   every provider adapter translates, message for message.
//! - The context budget (`context`, with the estimator and pruning in [`crate::compaction`]):
//!   `budget` after every completed model request is the scaled estimate of what the
//!   conversation would send next; before each request, `schemas_over_budget` may be advised
//!   (once per session) and a compaction forced when the scaled estimate crosses the trigger.
//!   A compaction that changed something is written as `Record::Compaction` and awaited
//!   (`Phase::Persisting`) before its `compacted` receipt, the `compacted` hooks and the
//!   request, whose scaled estimate is exactly the receipt's `tokens_after`. A provider
//!   context-length refusal before any reply text forces one compaction and one re-send of
//!   the same request as its next attempt (no `retry` line); a second refusal ends the turn
//!   `error`. `max_agent_tokens` refuses at admission once the turn's requests spent the cap
//!   (reported usage, or the estimate when none was reported).
//! - Persistence the client waits on (`message_done`, `tool_end`, `turn_refused`, a
//!   compaction point) is awaited in `Phase::Persisting`; other records (prompt, mode change,
//!   refreeze, turn end) are written in the background, and a background write that fails
//!   during a turn fails that turn (`persist`).
//!
//! ```
//! use openmax_core::machine::{Core, CoreConfig, Effect, Freeze, Input, Output};
//! use openmax_core::provider::ProviderItem;
//! use openmax_core::wire::Event;
//! use openmax_core::Millis;
//!
//! let freeze = Freeze {
//!     system: "You are terse.".into(),
//!     tools: vec![],
//!     skills: vec![],
//!     hooks: vec![],
//!     changes: vec![],
//!     notes: vec![],
//!     trusted: None,
//! };
//! let mut core = Core::new(CoreConfig::new("s1", freeze));
//! let mut events = Vec::new();
//! let mut effects = Vec::new();
//! let mut drain = |core: &mut Core, events: &mut Vec<Event>, effects: &mut Vec<Effect>| {
//!     while let Some(out) = core.poll() {
//!         match out {
//!             Output::Event(e) => events.push(e),
//!             Output::Effect(e) => effects.push(e),
//!         }
//!     }
//! };
//!
//! core.handle(Millis(0), Input::Line(r#"{"cmd":"user","text":"hi"}"#.into()));
//! drain(&mut core, &mut events, &mut effects);
//! // The prompt is persisted and the first attempt goes out.
//! let Some(Effect::SendRequest { request, attempt, .. }) = effects.last().cloned() else {
//!     panic!("expected a request")
//! };
//! for item in [
//!     ProviderItem::Opened,
//!     ProviderItem::TextDelta { text: "hello".into() },
//!     ProviderItem::Completed { finish_reason: "stop".into() },
//! ] {
//!     core.handle(Millis(5), Input::Provider { request, attempt, item });
//!     drain(&mut core, &mut events, &mut effects);
//! }
//! // The reply is persisted before message_done goes out.
//! let Some(Effect::Persist { ticket, .. }) = effects.last().cloned() else { panic!() };
//! core.handle(Millis(6), Input::Persisted { ticket });
//! drain(&mut core, &mut events, &mut effects);
//! let types: Vec<&str> = events.iter().map(|e| e.type_name()).collect();
//! assert_eq!(types, ["token", "message_done", "budget", "done"]);
//!
//! core.handle(Millis(7), Input::EndOfInput);
//! drain(&mut core, &mut events, &mut effects);
//! assert_eq!(effects.last(), Some(&Effect::Exit { code: 0 }));
//! assert_eq!(core.exit_code(), Some(0));
//! ```

mod approval;
mod checkpoint;
mod commands;
mod context;
mod ending;
mod forward;
mod gate;
mod hooks;
mod interface;
mod lifecycle;
mod persist;
mod phase;
mod retry;
mod stream;
mod tasks;
#[cfg(test)]
mod tests;
mod tool_hooks;
mod tools;
mod turn;

pub use commands::MODE_NOTE;
pub use interface::*;
pub use tasks::TaskLimits;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::compaction::Scale;
use crate::conversation::{Block, Message, Role};
use crate::record::Record;
use crate::time::Millis;
use crate::wire::{Event, Mode, StopReason};

use crate::rng::SplitMix64;
use gate::Gate;
use lifecycle::Lifecycle;
use phase::Phase;
use turn::Turn;

/// The core state machine. See the module docs for the drain contract.
#[derive(Debug)]
pub struct Core {
    config: CoreConfig,
    /// The latest `now` seen (time never goes backwards inside the core).
    now: Millis,
    outputs: VecDeque<Output>,
    /// Where the session is: starting, open, draining, closed.
    lifecycle: Lifecycle,
    /// Where the turn is.
    phase: Phase,
    /// What the running turn accumulated.
    turn: Turn,
    /// Client input held behind an effect's answer, and the answers it waits on.
    gate: Gate,
    /// What the model sees (from the last compaction point on), as appended.
    conversation: Vec<Message>,
    /// Harness notes not yet in the model's transcript (inserted before the next prompt).
    pending_notes: Vec<String>,
    rng: SplitMix64,
    next_request: u64,
    next_ticket: u64,
    next_hook_run: u64,
    next_approval: u64,
    next_call: u64,
    /// Every approval id issued, and whether it has settled.
    approvals: BTreeMap<String, bool>,
    /// The [`crate::tool::ToolPlan::confirm`] keys a human approved in this session (a
    /// `web_fetch` host): later calls with the same key are not asked about again.
    confirmed: BTreeSet<String>,
    /// Observe-only hook runs in flight: run id → (hook, event).
    observe_runs: BTreeMap<u64, (String, HookEvent)>,
    /// The stop reason of the last admitted turn (the exit code follows it).
    last_stop: Option<StopReason>,
    /// The budget scale learned from the last request.
    scale: Option<Scale>,
    /// `schemas_over_budget` was emitted (at most once per session).
    schemas_advised: bool,
    /// Turns admitted in the session (across `--continue`): the running turn's number.
    turns: u64,
}

impl Core {
    /// A new core. Nothing is emitted until the first `handle`.
    pub fn new(config: CoreConfig) -> Core {
        Core {
            rng: SplitMix64::new(config.seed),
            turns: config.turns_before,
            conversation: config.history.clone(),
            config,
            now: Millis::ZERO,
            outputs: VecDeque::new(),
            lifecycle: Lifecycle::Starting,
            phase: Phase::Idle,
            turn: Turn::default(),
            gate: Gate::default(),
            pending_notes: Vec::new(),
            next_request: 1,
            next_ticket: 1,
            next_hook_run: 1,
            next_approval: 1,
            next_call: 1,
            approvals: BTreeMap::new(),
            confirmed: BTreeSet::new(),
            observe_runs: BTreeMap::new(),
            last_stop: None,
            scale: None,
            schemas_advised: false,
        }
    }

    /// The session id every event line carries.
    pub fn session_id(&self) -> &str {
        &self.config.session_id
    }

    /// The exit code once [`Effect::Exit`] was emitted: 1 when the last admitted turn ended
    /// `error`, else 0; a non-interactive session exits with its turn's
    /// [`crate::wire::StopReason::print_exit_code`] (1 when its command was refused).
    pub fn exit_code(&self) -> Option<i32> {
        self.lifecycle.exit_code()
    }

    /// The current approval mode.
    pub fn mode(&self) -> Mode {
        self.config.mode
    }

    /// Whether a turn is running (a `user` now would be refused as in flight).
    pub fn in_turn(&self) -> bool {
        self.phase.in_turn()
    }

    /// The conversation the model sees, as appended so far.
    pub fn conversation(&self) -> &[Message] {
        &self.conversation
    }

    /// Feed one input at time `now`. Drain [`Core::poll`] afterwards.
    pub fn handle(&mut self, now: Millis, input: Input) {
        if now > self.now {
            self.now = now;
        }
        match self.lifecycle {
            Lifecycle::Closed { .. } => return,
            Lifecycle::Starting => self.start(),
            Lifecycle::Open | Lifecycle::Draining { .. } => {}
        }
        if input.is_client() && self.gate.awaiting_answer() {
            return self.hold(input);
        }
        self.dispatch(input);
        self.release_held();
    }

    /// The next output, or `None` when drained.
    pub fn poll(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When the core next needs `handle(now, Input::Timeout)`, and why. `None`: no timer.
    pub fn poll_timeout(&self) -> Option<(Millis, TimerReason)> {
        let phase = self.phase.timer();
        match self.lifecycle {
            Lifecycle::Draining { deadline: Some(d) } => match phase {
                Some((p, _)) if p < d => phase,
                Some(_) | None => Some((d, TimerReason::ShutdownDrain)),
            },
            Lifecycle::Starting | Lifecycle::Open | Lifecycle::Draining { deadline: None } => phase,
            Lifecycle::Closed { .. } => None,
        }
    }

    fn dispatch(&mut self, input: Input) {
        match input {
            Input::Line(raw) => self.on_line(&raw),
            Input::Prompt { text, images } => {
                if !self.lifecycle.quitting() {
                    self.on_user(text, images)
                }
            }
            Input::Framing(fault) => self.on_framing(fault),
            Input::EndOfInput => self.on_quit(),
            Input::Provider {
                request,
                attempt,
                item,
            } => self.on_provider(request, attempt, item),
            Input::RequestFailed {
                request,
                attempt,
                failure,
            } => self.on_request_failed(request, attempt, failure),
            Input::ToolPlanned { call_id, plan } => self.on_tool_planned(&call_id, plan),
            Input::ToolDone { call_id, outcome } => self.on_tool_done(&call_id, outcome),
            Input::TaskApproval { call_id, request } => self.on_task_approval(&call_id, *request),
            Input::TaskApprovalSettled {
                call_id,
                approval_id,
                outcome,
            } => self.on_task_approval_settled(&call_id, &approval_id, outcome),
            Input::HookDone { hook_run, outcome } => self.on_hook_done(hook_run, outcome),
            Input::Persisted { ticket } => self.on_persisted(ticket),
            Input::PersistFailed { ticket, message } => self.on_persist_failed(ticket, message),
            Input::ModeSaved { mode } => self.on_mode_saved(mode),
            Input::ModeSaveFailed { mode, message } => self.on_mode_save_failed(mode, message),
            Input::SourceApproved { approval_id } => self.on_source_recorded(&approval_id, None),
            Input::SourceApprovalFailed {
                approval_id,
                message,
            } => self.on_source_recorded(&approval_id, Some(message)),
            Input::Frozen { snapshot } => self.on_frozen(*snapshot),
            Input::Notice { text } => self.note(text),
            Input::Compact => self.on_compact(),
            Input::Checkpointed {
                turn,
                moment,
                id,
                note,
            } => self.on_checkpointed(turn, moment, id, note),
            Input::Crashed { message } => self.on_crashed(message),
            Input::Timeout => self.on_timeout(),
        }
    }

    /// Every due timer fires: the shutdown drain's deadline first, then the phase's own.
    fn on_timeout(&mut self) {
        let now = self.now;
        if self.drain_deadline_passed(now) && self.in_turn() {
            return self.cancel_turn();
        }
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Backoff {
                request,
                attempt,
                deadline,
            } if deadline <= now => self.send_attempt(request, attempt),
            Phase::Streaming(a) if a.idle_deadline.is_some_and(|d| d <= now) => {
                self.eff(Effect::CancelRequest { request: a.request });
                let secs = self.config.retry.stream_idle_timeout_ms / 1000;
                self.stream_ended(*a, format!("the stream was silent for {secs} s"), true);
            }
            Phase::Approving {
                call,
                approval_id,
                deadline: Some(d),
                recording: false,
                ..
            } if d <= now => {
                self.settle(&approval_id, crate::wire::ApprovalOutcome::TimedOut);
                self.finish_call(
                    call,
                    false,
                    "the approval request timed out; the call was not run".to_string(),
                    None,
                );
            }
            // Not due yet, or no timer of its own.
            other @ (Phase::Idle
            | Phase::Hooks { .. }
            | Phase::Streaming(_)
            | Phase::Backoff { .. }
            | Phase::Persisting { .. }
            | Phase::Planning { .. }
            | Phase::Approving { .. }
            | Phase::RunningTools) => self.phase = other,
        }
    }

    // ----- shared helpers -------------------------------------------------------------------

    fn ev(&mut self, e: Event) {
        self.outputs.push_back(Output::Event(e));
    }

    fn eff(&mut self, e: Effect) {
        self.outputs.push_back(Output::Effect(e));
    }

    fn protocol_error(&mut self, message: impl Into<String>) {
        self.ev(Event::ProtocolError {
            message: message.into(),
        });
    }

    /// A deadline `ms` from now, strictly later than now.
    fn deadline(&self, ms: u64) -> Millis {
        self.now.plus(ms.max(1))
    }

    /// Append a message to the conversation and return the record persisting it.
    fn push_message(&mut self, message: Message) -> Record {
        self.conversation.push(message.clone());
        Record::Message { message }
    }

    /// A harness note with no call: emitted now, inserted into the model's transcript before
    /// the next prompt.
    fn note(&mut self, text: String) {
        self.ev(Event::HarnessNote {
            call_id: String::new(),
            text: text.clone(),
        });
        self.pending_notes.push(text);
    }

    /// Move pending notes into the conversation (one user message) and return its record.
    fn flush_notes(&mut self) -> Option<Record> {
        if self.pending_notes.is_empty() {
            return None;
        }
        let content = std::mem::take(&mut self.pending_notes)
            .iter()
            .map(|n| Block::note(n))
            .collect();
        Some(self.push_message(Message {
            role: Role::User,
            content,
        }))
    }
}
