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
//!    earlier `approval_mode` or `reload` is still in flight (`SaveMode`, `Refreeze`) is held
//!    and handled, in order, right after that answer: commands are answered in arrival order.
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
//! - The turn's states are `turn::Phase` (idle, prompt hooks, streaming, backoff, the
//!   persistence waits, planning, approving, running a tool, turn_end hooks, closed); draining
//!   after `quit` is a flag, not a state, because the in-flight turn keeps running.
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
//! - Tool results and harness notes are appended as they happen; request bodies merge
//!   consecutive messages of one role and put tool results first in a user message.
//! - The context budget (`context`, with the estimator and pruning in [`crate::compaction`]):
//!   `budget` after every completed model request is the scaled estimate of what the
//!   conversation would send next; before each request, `schemas_over_budget` may be advised
//!   (once per session) and a compaction forced when the scaled estimate crosses the trigger.
//!   A compaction that changed something is written as `Record::Compaction` and awaited
//!   (`PersistCompaction`) before its `compacted` receipt, the `compacted` hooks and the
//!   request, whose scaled estimate is exactly the receipt's `tokens_after`. A provider
//!   context-length refusal before any reply text forces one compaction and one re-send of
//!   the same request as its next attempt (no `retry` line); a second refusal ends the turn
//!   `error`. `max_agent_tokens` refuses at admission once the turn's requests spent the cap
//!   (reported usage, or the estimate when none was reported).
//! - Persistence the client waits on (`message_done`, `tool_end`, `turn_refused`, a
//!   compaction point) is awaited in its own phase; other records (prompt, mode change, refreeze, turn end) are written in the
//!   background, and a background write that fails during a turn fails that turn.
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
mod commands;
mod context;
mod hooks;
mod interface;
pub mod retry;
mod stream;
#[cfg(test)]
mod tests;
mod tools;
mod turn;

pub use interface::*;

use std::collections::{BTreeMap, VecDeque};

use crate::conversation::{Block, Message, Role};
use crate::record::Record;
use crate::time::Millis;
use crate::wire::{Event, Mode, StopReason};

use crate::compaction::Scale;
use retry::SplitMix64;
use turn::{Phase, Turn};

/// The core state machine. See the module docs for the drain contract.
#[derive(Debug)]
pub struct Core {
    config: CoreConfig,
    /// The latest `now` seen (time never goes backwards inside the core).
    now: Millis,
    outputs: VecDeque<Output>,
    phase: Phase,
    turn: Turn,
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
    /// Observe-only hook runs in flight: run id → (hook, event).
    observe_runs: BTreeMap<u64, (String, HookEvent)>,
    /// Modes whose `SaveMode` is in flight, oldest first.
    mode_saves: VecDeque<Mode>,
    /// A `Refreeze` is in flight.
    refreezing: bool,
    /// Client input (command lines, end of input) held while a `SaveMode` or `Refreeze` is in
    /// flight, so commands are answered in the order they arrived.
    held: VecDeque<(Input, bool)>,
    /// While a held input is handled: whether a turn was in flight when it arrived (a `user`
    /// or `reload` that arrived during a turn is answered as in flight, as the client saw it).
    arrived_in_turn: bool,
    /// A snapshot that arrived during a turn; applied right after that turn's `done`
    /// (`refrozen` only appears between turns).
    deferred_freeze: Option<Box<Freeze>>,
    /// `quit` or end of input arrived: finish the turn, decline approvals, then exit.
    draining: bool,
    /// When the turn in flight at end of input is cancelled (set by `quit` / end of input).
    drain_deadline: Option<Millis>,
    /// Startup outputs (freeze notes, session_start hooks) were emitted.
    started: bool,
    /// The stop reason of the last admitted turn.
    last_stop: Option<StopReason>,
    exit_code: Option<i32>,
    /// The budget scale learned from the last request.
    scale: Option<Scale>,
    /// `schemas_over_budget` was emitted (at most once per session).
    schemas_advised: bool,
}

impl Core {
    /// A new core. Nothing is emitted until the first `handle`.
    pub fn new(config: CoreConfig) -> Core {
        Core {
            rng: SplitMix64::new(config.seed),
            conversation: config.history.clone(),
            config,
            now: Millis::ZERO,
            outputs: VecDeque::new(),
            phase: Phase::Idle,
            turn: Turn::default(),
            pending_notes: Vec::new(),
            next_request: 1,
            next_ticket: 1,
            next_hook_run: 1,
            next_approval: 1,
            next_call: 1,
            approvals: BTreeMap::new(),
            observe_runs: BTreeMap::new(),
            mode_saves: VecDeque::new(),
            refreezing: false,
            deferred_freeze: None,
            held: VecDeque::new(),
            arrived_in_turn: false,
            draining: false,
            drain_deadline: None,
            started: false,
            last_stop: None,
            exit_code: None,
            scale: None,
            schemas_advised: false,
        }
    }

    /// The session id every event line carries.
    pub fn session_id(&self) -> &str {
        &self.config.session_id
    }

    /// The exit code once [`Effect::Exit`] was emitted: 1 when the last turn ended with stop
    /// reason `error`, else 0.
    pub fn exit_code(&self) -> Option<i32> {
        self.exit_code
    }

    /// The current approval mode.
    pub fn mode(&self) -> Mode {
        self.config.mode
    }

    /// Whether a turn is running (a `user` now would be refused as in flight).
    pub fn in_turn(&self) -> bool {
        match self.phase {
            Phase::Idle | Phase::Closed => false,
            Phase::PromptHooks { .. }
            | Phase::Streaming(_)
            | Phase::Backoff { .. }
            | Phase::PersistReply { .. }
            | Phase::PersistPartial { .. }
            | Phase::Planning { .. }
            | Phase::Approving { .. }
            | Phase::RunningTool { .. }
            | Phase::PersistResult { .. }
            | Phase::TurnEndHooks { .. }
            | Phase::PersistRefusal { .. }
            | Phase::PersistCompaction { .. } => true,
        }
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
        if self.exit_code.is_some() {
            return;
        }
        self.start();
        let client = matches!(
            input,
            Input::Line(_) | Input::Framing(_) | Input::EndOfInput
        );
        if client && self.awaiting_answer() {
            // As the client sees it, a turn is in flight when one runs now or when a `user`
            // it sent earlier, held ahead of this input, will start one.
            let user_ahead = self.held.iter().any(|(i, busy)| {
                !busy
                    && matches!(i, Input::Line(l)
                        if matches!(crate::wire::Command::parse_line(l), Ok(Some(crate::wire::Command::User { .. }))))
            });
            let busy = self.in_turn() || user_ahead;
            self.held.push_back((input, busy));
            return;
        }
        self.dispatch(input);
        while !self.awaiting_answer() && self.exit_code.is_none() {
            let Some((next, in_turn)) = self.held.pop_front() else {
                break;
            };
            self.arrived_in_turn = in_turn;
            self.dispatch(next);
            self.arrived_in_turn = false;
        }
    }

    /// A turn is in flight now, or was when the command being handled arrived.
    fn busy(&self) -> bool {
        self.in_turn() || self.arrived_in_turn
    }

    /// A command's answer depends on an effect still in flight (`SaveMode`, `Refreeze`): later
    /// client input waits, so every command is answered in arrival order.
    fn awaiting_answer(&self) -> bool {
        !self.mode_saves.is_empty() || self.refreezing
    }

    fn dispatch(&mut self, input: Input) {
        match input {
            Input::Line(raw) => self.on_line(&raw),
            Input::Framing(_) if self.draining => {}
            Input::Framing(fault) => self.protocol_error(match fault {
                FramingFault::TooLong { len } => {
                    format!("line longer than 8 MiB ({len} bytes) skipped")
                }
                FramingFault::NotUtf8 => "line is not valid UTF-8; skipped".to_string(),
            }),
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
            Input::HookDone { hook_run, outcome } => self.on_hook_done(hook_run, outcome),
            Input::Persisted { ticket } => self.on_persisted(ticket),
            Input::PersistFailed { ticket, message } => self.on_persist_failed(ticket, message),
            Input::ModeSaved { mode } => self.on_mode_saved(mode),
            Input::ModeSaveFailed { mode, message } => self.on_mode_save_failed(mode, message),
            Input::Frozen { snapshot } => self.on_frozen(*snapshot),
            Input::Notice { text } => {
                if !matches!(self.phase, Phase::Closed) {
                    self.note(text);
                }
            }
            Input::Crashed { message } => self.on_crashed(message),
            Input::Timeout => self.on_timeout(),
        }
    }

    /// The next output, or `None` when drained.
    pub fn poll(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When the core next needs `handle(now, Input::Timeout)`, and why. `None`: no timer.
    pub fn poll_timeout(&self) -> Option<(Millis, TimerReason)> {
        let phase = self.phase_timeout();
        match (self.drain_deadline, phase) {
            (Some(d), Some((p, _))) if d <= p => Some((d, TimerReason::ShutdownDrain)),
            (Some(d), None) => Some((d, TimerReason::ShutdownDrain)),
            _ => phase,
        }
    }

    /// The current phase's own timer.
    fn phase_timeout(&self) -> Option<(Millis, TimerReason)> {
        match &self.phase {
            Phase::Streaming(a) => a.idle_deadline.map(|d| (d, TimerReason::StreamIdle)),
            Phase::Backoff { deadline, .. } => Some((*deadline, TimerReason::RetryBackoff)),
            Phase::Approving { deadline, .. } => {
                deadline.map(|d| (d, TimerReason::ApprovalTimeout))
            }
            Phase::Idle
            | Phase::Closed
            | Phase::PromptHooks { .. }
            | Phase::PersistReply { .. }
            | Phase::PersistPartial { .. }
            | Phase::Planning { .. }
            | Phase::RunningTool { .. }
            | Phase::PersistResult { .. }
            | Phase::TurnEndHooks { .. }
            | Phase::PersistRefusal { .. }
            | Phase::PersistCompaction { .. } => None,
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

    /// Emit a `Persist` effect and return its ticket.
    fn persist(&mut self, records: Vec<Record>) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.eff(Effect::Persist { ticket, records });
        ticket
    }

    /// Persist records no event waits on; a failure of one written during the running turn
    /// fails that turn.
    fn persist_background(&mut self, records: Vec<Record>) {
        let ticket = self.persist(records);
        // Outside a turn the set is cleared at the next admission, so an idle-time ticket
        // never fails a later turn.
        self.turn.background.insert(ticket);
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
            .into_iter()
            .map(|n| Block::text(format!("[openmax note] {n}")))
            .collect();
        Some(self.push_message(Message {
            role: Role::User,
            content,
        }))
    }

    /// Emitted once, before the first input is handled: freeze notes and session_start hooks.
    fn start(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        for n in self.config.freeze.notes.clone() {
            self.note(n);
        }
        self.fire_observe(HookEvent::SessionStart, serde_json::json!({}));
    }

    /// End the running turn: fill unresolved tool results, record the end, leave the running
    /// state, then emit `done` (and exit when draining).
    fn end_turn(&mut self, stop_reason: StopReason) {
        if let Some(message) = self.turn.failure.take() {
            self.ev(Event::Error { message });
        }
        let mut records = Vec::new();
        if let Some(r) = self.resolve_round(&format!("not run: the turn ended ({stop_reason})")) {
            records.push(r);
        }
        records.push(Record::TurnEnd {
            stop_reason: stop_reason.clone(),
        });
        self.phase = Phase::Idle;
        self.turn = Turn::default();
        // Fire-and-forget: nothing waits on this ticket once the turn is over.
        self.persist(records);
        self.last_stop = Some(stop_reason.clone());
        self.ev(Event::Done { stop_reason });
        if let Some(snapshot) = self.deferred_freeze.take() {
            self.apply_freeze(*snapshot);
        }
        if self.draining {
            self.exit();
        }
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

    fn on_crashed(&mut self, message: String) {
        self.fail_turn_at_safe_point(format!("the turn crashed: {message}"));
    }

    /// Fail the running turn with `message` (a crash, or a background record that could not be
    /// written). While a record of the turn is being persisted, the turn ends after that ack
    /// (see [`Turn::failure`]), so what the record keeps is still announced; otherwise at once.
    fn fail_turn_at_safe_point(&mut self, message: String) {
        match &self.phase {
            Phase::PersistReply { .. }
            | Phase::PersistPartial { .. }
            | Phase::PersistResult { .. }
            | Phase::PersistRefusal { .. }
            | Phase::PersistCompaction { .. } => {
                self.turn.ending = Some(StopReason::Error);
                self.turn.failure.get_or_insert(message);
            }
            Phase::Idle | Phase::Closed => {}
            Phase::PromptHooks { .. }
            | Phase::Streaming(_)
            | Phase::Backoff { .. }
            | Phase::Planning { .. }
            | Phase::Approving { .. }
            | Phase::RunningTool { .. }
            | Phase::TurnEndHooks { .. } => self.abort_turn(message),
        }
    }

    /// Fail the running turn: cancel what is in flight, end an open `tool_start` and settle an
    /// open approval, then `error` and `done error`.
    fn abort_turn(&mut self, message: String) {
        // This error is the one reported; a crash's deferred one is dropped with it.
        self.turn.failure = None;
        let failed = format!("the turn failed: {message}");
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => return,
            Phase::Closed => {
                self.phase = Phase::Closed;
                return;
            }
            Phase::Streaming(a) => self.eff(Effect::CancelRequest { request: a.request }),
            Phase::Planning { call } | Phase::PersistResult { call, .. } => {
                self.force_tool_end(call, &failed)
            }
            Phase::Approving {
                call, approval_id, ..
            } => {
                self.settle(&approval_id, crate::wire::ApprovalOutcome::Cancelled);
                self.force_tool_end(call, &failed);
            }
            Phase::RunningTool { call, .. } => {
                let call_id = self.call_id(call);
                self.eff(Effect::CancelTool { call_id });
                self.force_tool_end(call, &failed);
            }
            Phase::PersistReply { .. } | Phase::PersistPartial { .. } => {
                // The reply gets no message_done: it is not kept, so it leaves the transcript
                // (the next request must not carry it).
                self.conversation.pop();
            }
            Phase::PromptHooks { .. }
            | Phase::Backoff { .. }
            | Phase::TurnEndHooks { .. }
            | Phase::PersistRefusal { .. }
            | Phase::PersistCompaction { .. } => {}
        }
        self.ev(Event::Error { message });
        self.end_turn(StopReason::Error);
    }

    fn exit(&mut self) {
        let code = if self.last_stop == Some(StopReason::Error) {
            1
        } else {
            0
        };
        self.phase = Phase::Closed;
        self.drain_deadline = None;
        self.exit_code = Some(code);
        self.eff(Effect::Exit { code });
    }

    fn on_persisted(&mut self, ticket: u64) {
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::PersistReply { ticket: t, reply } if t == ticket => self.after_reply(*reply),
            Phase::PersistPartial {
                ticket: t,
                text,
                message,
                stop,
            } if t == ticket => self.finish_partial(text, message, stop),
            Phase::PersistResult {
                call,
                ticket: t,
                ok,
                output,
                note,
            } if t == ticket => self.after_result(call, ok, output, note),
            Phase::PersistRefusal {
                ticket: t,
                hook,
                reason,
            } if t == ticket => self.after_refusal(hook, reason),
            Phase::PersistCompaction {
                ticket: t,
                receipt,
                next,
            } if t == ticket => self.after_compaction(receipt, next),
            other @ (Phase::Idle
            | Phase::Closed
            | Phase::PromptHooks { .. }
            | Phase::Streaming(_)
            | Phase::Backoff { .. }
            | Phase::PersistReply { .. }
            | Phase::PersistPartial { .. }
            | Phase::Planning { .. }
            | Phase::Approving { .. }
            | Phase::RunningTool { .. }
            | Phase::PersistResult { .. }
            | Phase::TurnEndHooks { .. }
            | Phase::PersistRefusal { .. }
            | Phase::PersistCompaction { .. }) => {
                self.phase = other;
                self.turn.background.remove(&ticket);
            }
        }
    }

    fn on_persist_failed(&mut self, ticket: u64, message: String) {
        let error = format!("the session record could not be written: {message}");
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::PersistRefusal { ticket: t, .. } if t == ticket => {
                // The refusal never reached disk: drop it from the transcript too.
                self.conversation.pop();
                self.end_turn(StopReason::Unverified);
            }
            other @ (Phase::PersistReply { ticket: t, .. }
            | Phase::PersistPartial { ticket: t, .. })
                if t == ticket =>
            {
                self.phase = other;
                self.abort_turn(error);
            }
            other @ (Phase::PersistResult { ticket: t, .. }
            | Phase::PersistCompaction { ticket: t, .. })
                if t == ticket =>
            {
                self.phase = other;
                self.abort_turn(error);
            }
            other @ (Phase::Idle
            | Phase::Closed
            | Phase::PromptHooks { .. }
            | Phase::Streaming(_)
            | Phase::Backoff { .. }
            | Phase::PersistReply { .. }
            | Phase::PersistPartial { .. }
            | Phase::Planning { .. }
            | Phase::Approving { .. }
            | Phase::RunningTool { .. }
            | Phase::PersistResult { .. }
            | Phase::TurnEndHooks { .. }
            | Phase::PersistRefusal { .. }
            | Phase::PersistCompaction { .. }) => {
                self.phase = other;
                if self.turn.background.remove(&ticket) && self.in_turn() {
                    self.fail_turn_at_safe_point(error);
                }
            }
        }
    }

    fn on_timeout(&mut self) {
        let now = self.now;
        if self.drain_deadline.is_some_and(|d| d <= now) {
            self.drain_deadline = None;
            if self.in_turn() {
                return self.cancel_turn();
            }
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
            other @ (Phase::Idle
            | Phase::Closed
            | Phase::PromptHooks { .. }
            | Phase::Streaming(_)
            | Phase::Backoff { .. }
            | Phase::PersistReply { .. }
            | Phase::PersistPartial { .. }
            | Phase::Planning { .. }
            | Phase::Approving { .. }
            | Phase::RunningTool { .. }
            | Phase::PersistResult { .. }
            | Phase::TurnEndHooks { .. }
            | Phase::PersistRefusal { .. }
            | Phase::PersistCompaction { .. }) => self.phase = other,
        }
    }
}
