//! The TUI's state, pure: the core's wire events and the person's keys go in
//! ([`View::event`], [`View::key`] in [`super::keys`]); the screen model (finished blocks for
//! the scrollback, the live region) and the commands to send come out ([`View::take_finished`],
//! [`View::take_commands`]). No terminal, no clock: time is passed in as milliseconds.
//!
//! The view decides nothing the core decides: a command is sent as typed and the screen
//! changes when the core's event says so (the mode changes on the `approval_mode`
//! acknowledgement, a card closes on `approval_settled`).

use std::collections::BTreeMap;

use openmax_core::usage::{Prices, UsageTotals};
use openmax_core::wire::{Command, Event, Mode, StopReason, TranscriptMessage};

use super::blocks::{args_summary, Block, DiffView, Level, ToolCard};
use super::card::ApprovalCard;
use super::editor::Editor;

/// Within this many milliseconds a second Ctrl-C on an idle prompt quits.
pub const QUIT_WINDOW_MS: u64 = 2000;

/// A `retry` being waited out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryView {
    pub attempt: u32,
    pub max_attempts: u32,
    pub reason: String,
    /// When the retry was announced.
    pub since: u64,
}

/// The status line's facts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Status {
    pub model: String,
    pub mode: Option<Mode>,
    /// `budget`: used and context tokens.
    pub budget: Option<(u64, u64)>,
    /// The session's `usage` summed so far (this opening of it).
    pub totals: UsageTotals,
    /// The user config's `[provider]` prices, when set: the totals' cost is shown.
    pub prices: Option<Prices>,
}

impl Status {
    /// What the session's tokens cost so far, when prices are configured.
    pub fn cost(&self) -> Option<f64> {
        self.prices.map(|p| p.cost(&self.totals))
    }
}

/// A cost in US dollars as the status line and `/cost` show it: cents for a dollar or more,
/// four decimals below (a short turn costs fractions of a cent).
pub fn usd(cost: f64) -> String {
    if cost >= 1.0 {
        format!("${cost:.2}")
    } else {
        format!("${cost:.4}")
    }
}

/// A question the UI itself asks the person, outside the wire: whether to trust this folder,
/// or whether to approve a project source the session is about to need (the same store as
/// `openmax --trust` and `openmax --approve`).
#[derive(Debug, Clone, PartialEq)]
pub enum Question {
    Trust {
        project: String,
    },
    Source {
        /// Drawn as an `unapproved_source` card would be.
        card: ApprovalCard,
        /// The approval store's key and the full sha256 approving it records.
        key: String,
        sha256: String,
    },
}

/// Something the person asked for that the UI loop carries out, outside the wire.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// A question answered.
    Answer { question: Box<Question>, yes: bool },
    /// `/trust`.
    Trust,
    /// `/approve <file>`.
    Approve(String),
    /// `/model <name>`.
    Model(String),
    /// `/compact`.
    Compact,
    /// `/status`.
    Status,
    /// `/cost`.
    Cost,
}

/// Where the UI goes once this session has ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Continue in this session (picked with `/resume`).
    Resume(String),
    /// A fresh session (`/new`).
    New,
}

/// The `/resume` picker: this project's sessions, one highlighted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picker {
    /// (id, the line shown for it), the one used last first.
    pub items: Vec<(String, String)>,
    pub at: usize,
}

/// The view model.
#[derive(Debug, Clone)]
pub struct View {
    pub(super) finished: Vec<Block>,
    pub(super) commands: Vec<Command>,
    /// The reply streaming now (Markdown source).
    pub reply: String,
    /// Thinking streaming now.
    pub thinking: String,
    /// Tool calls started and not ended.
    pub tools: BTreeMap<String, ToolCard>,
    /// Approval cards not yet settled, oldest first.
    pub approvals: Vec<ApprovalCard>,
    pub retry: Option<RetryView>,
    pub editor: Editor,
    pub status: Status,
    /// A turn is in flight (from the submitted prompt to its `done`).
    pub running: Option<u64>,
    /// When an idle Ctrl-C armed quitting.
    pub(super) ctrl_c_at: Option<u64>,
    /// A `quit` was sent.
    pub quitting: bool,
    /// A short hint under the prompt (e.g. "press Ctrl-C again to quit").
    pub hint: Option<String>,
    /// `/resume` asked for the list of sessions (the UI loop reads it and opens the picker).
    pub wants_sessions: bool,
    /// The `/resume` picker, while open.
    pub picker: Option<Picker>,
    /// Where to go once this session has ended (`/resume`, `/new`).
    pub next: Option<Next>,
    /// Questions asked by the UI, oldest first: y/n answer the first.
    pub questions: Vec<Question>,
    pub(super) requests: Vec<Request>,
    /// The highlighted entry of the `/` menu.
    pub menu_at: usize,
    /// Modes Shift-Tab asked for whose acknowledgement has not come back yet, oldest first.
    pub(super) modes_asked: Vec<Mode>,
    /// The `/undo` card waiting for `y` or `n`.
    pub undo: Option<super::undo::UndoCard>,
    /// `/undo` requests for the UI thread, in order.
    pub(super) undo_asks: Vec<super::undo::UndoAsk>,
    /// The session's running `task` calls, for their live lines (counted by the shell as it
    /// reads each child's events).
    pub tasks: crate::tasks::progress::Board,
}

impl View {
    /// A view for a session on `model` in `mode`, with this project's earlier prompts.
    pub fn new(model: &str, mode: Mode, prompts: Vec<String>) -> View {
        View {
            finished: Vec::new(),
            commands: Vec::new(),
            reply: String::new(),
            thinking: String::new(),
            tools: BTreeMap::new(),
            approvals: Vec::new(),
            retry: None,
            editor: Editor::new(prompts),
            status: Status {
                model: model.to_string(),
                mode: Some(mode),
                ..Status::default()
            },
            running: None,
            ctrl_c_at: None,
            quitting: false,
            hint: None,
            wants_sessions: false,
            picker: None,
            next: None,
            questions: Vec::new(),
            requests: Vec::new(),
            menu_at: 0,
            modes_asked: Vec::new(),
            undo: None,
            tasks: Default::default(),
            undo_asks: Vec::new(),
        }
    }

    /// Questions and other requests for the UI loop, in the order they were made.
    pub fn take_requests(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.requests)
    }

    /// Ask `questions` after any already pending.
    pub fn ask(&mut self, questions: Vec<Question>) {
        self.questions.extend(questions);
    }

    /// Open the `/resume` picker over `items` (id, line), or say there is nothing to pick.
    pub fn open_picker(&mut self, items: Vec<(String, String)>) {
        self.wants_sessions = false;
        if items.is_empty() {
            self.notice(Level::Info, "no other session of this project to resume");
            return;
        }
        self.picker = Some(Picker { items, at: 0 });
    }

    /// `/undo` requests since the last call, for the UI thread.
    pub fn take_undo_asks(&mut self) -> Vec<super::undo::UndoAsk> {
        std::mem::take(&mut self.undo_asks)
    }

    /// The undo the person asked for, planned: its card (or why there is none).
    pub fn undo_planned(&mut self, card: Result<super::undo::UndoCard, String>) {
        match card {
            Ok(c) => self.undo = Some(c),
            Err(e) => self.notice(Level::Warn, &format!("undo: {e}")),
        }
    }

    /// The undo ran (its report) or failed; the card goes.
    pub fn undo_done(&mut self, report: Result<String, String>) {
        self.undo = None;
        match report {
            Ok(r) => self.notice(Level::Info, r.trim_end()),
            Err(e) => self.notice(Level::Error, &format!("undo: {e}")),
        }
    }

    /// Lines the UI thread has for the person (the `/undo list`).
    pub fn info(&mut self, text: &str) {
        self.notice(Level::Info, text.trim_end());
    }

    /// The history of a continued session (the `transcript` line's messages).
    pub fn transcript(&mut self, messages: &[TranscriptMessage], truncated: bool) {
        if truncated {
            self.notice(
                Level::Info,
                "… earlier messages of this session are not shown",
            );
        }
        for m in messages {
            let block = if m.role == "user" {
                Block::User(m.content.clone())
            } else {
                Block::Reply(m.content.clone())
            };
            self.finished.push(block);
        }
        self.notice(
            Level::Info,
            &format!("continued a session of {} messages", messages.len()),
        );
    }

    /// The history of a resumed session as it happened (from its record): prompts, replies, a
    /// line per tool call, and turns that ended early.
    pub fn replay(&mut self, items: &[crate::session::replay::Past], older: bool) {
        use crate::session::replay::Past;
        if older {
            self.notice(Level::Info, "… earlier parts of this session are not shown");
        }
        let mut prompts = 0;
        for item in items {
            match item {
                Past::User(text) => {
                    prompts += 1;
                    self.finished.push(Block::User(text.clone()));
                }
                Past::Reply(text) => self.finished.push(Block::Reply(text.clone())),
                Past::Tool {
                    name,
                    args,
                    ok,
                    counts,
                } => self.finished.push(Block::ToolLine {
                    name: name.clone(),
                    summary: args_summary(args, 80),
                    ok: *ok,
                    counts: *counts,
                }),
                Past::Ended(reason) if reason == "cancelled" => {
                    self.notice(Level::Warn, "cancelled")
                }
                Past::Ended(reason) => self.notice(Level::Warn, &format!("turn ended: {reason}")),
            }
        }
        self.notice(
            Level::Info,
            &format!(
                "resumed a session of {prompts} prompt{}",
                if prompts == 1 { "" } else { "s" }
            ),
        );
    }

    /// Blocks finished since the last call, for the scrollback, in order.
    pub fn take_finished(&mut self) -> Vec<Block> {
        std::mem::take(&mut self.finished)
    }

    /// Commands to send to the core since the last call, in order.
    pub fn take_commands(&mut self) -> Vec<Command> {
        std::mem::take(&mut self.commands)
    }

    /// A line openmax (or a library, or a child) wrote to stderr while the UI holds the
    /// terminal: shown as it is, as a notice line.
    pub fn stderr_line(&mut self, line: &str) {
        self.notice(Level::Warn, line);
    }

    /// A termination signal (`name`, e.g. `SIGTERM`): stop as a person would, cancelling a
    /// running turn and quitting; the core ends the session. Once quitting, nothing more.
    pub fn signal(&mut self, name: &str) {
        if self.quitting {
            return;
        }
        self.notice(
            Level::Warn,
            &format!("{name}: stopping (a second signal exits at once)"),
        );
        if self.running.is_some() {
            self.send(Command::Cancel);
        }
        self.quit();
    }

    pub(super) fn notice(&mut self, level: Level, text: &str) {
        self.finished.push(Block::Notice(level, text.to_string()));
    }

    pub(super) fn send(&mut self, cmd: Command) {
        self.commands.push(cmd);
    }

    /// Collapse thinking to its first line once the reply (or anything else) follows it.
    fn close_thinking(&mut self) {
        if !self.thinking.trim().is_empty() {
            let t = std::mem::take(&mut self.thinking);
            let mut first = t.trim().lines().next().unwrap_or("").to_string();
            if t.trim().lines().count() > 1 {
                first.push_str(" …");
            }
            self.finished.push(Block::Thinking(first));
        }
        self.thinking.clear();
    }

    fn close_reply(&mut self) {
        if !self.reply.trim().is_empty() {
            let r = std::mem::take(&mut self.reply);
            self.finished.push(Block::Reply(r));
        }
        self.reply.clear();
    }

    /// One core event at time `now` (ms).
    pub fn event(&mut self, now: u64, ev: Event) {
        if !matches!(
            ev,
            Event::Budget { .. } | Event::Usage { .. } | Event::Retry { .. }
        ) {
            self.retry = None;
        }
        match ev {
            Event::Token { text } => {
                self.close_thinking();
                self.reply.push_str(&text);
            }
            Event::Thinking { text } => self.thinking.push_str(&text),
            Event::MessageDone { text } => {
                self.close_thinking();
                // The message's full text is authoritative over the streamed pieces.
                self.reply = text;
                self.close_reply();
            }
            Event::Budget {
                used_tokens,
                context_tokens,
            } => self.status.budget = Some((used_tokens, context_tokens)),
            Event::Usage {
                prompt_tokens,
                completion_tokens,
                cached_tokens,
            } => {
                self.status
                    .totals
                    .add(prompt_tokens, completion_tokens, cached_tokens);
            }
            Event::ToolStart {
                call_id,
                name,
                args,
            } => {
                self.close_thinking();
                self.close_reply();
                let summary = args_summary(&args, 200);
                self.tools.insert(
                    call_id.clone(),
                    ToolCard {
                        call_id,
                        name,
                        summary,
                        ok: None,
                        output: String::new(),
                        diffs: Vec::new(),
                    },
                );
            }
            Event::ToolEnd {
                call_id,
                ok,
                output,
            } => {
                let mut card = self.tools.remove(&call_id).unwrap_or(ToolCard {
                    call_id: call_id.clone(),
                    name: "tool".into(),
                    summary: String::new(),
                    ok: None,
                    output: String::new(),
                    diffs: Vec::new(),
                });
                card.ok = Some(ok);
                card.output = output;
                self.finished.push(Block::Tool(card));
            }
            Event::Diff {
                call_id,
                path,
                diff,
                added,
                removed,
            } => {
                let d = DiffView {
                    path,
                    diff,
                    added,
                    removed,
                };
                match self.tools.get_mut(&call_id) {
                    Some(card) => card.diffs.push(d),
                    None => self.finished.push(Block::Diff(d)),
                }
            }
            // A mode change is said once, by its acknowledgement's line.
            Event::HarnessNote { call_id, text }
                if call_id.is_empty() && text.starts_with(openmax_core::machine::MODE_NOTE) => {}
            Event::HarnessNote { text, .. } => self.notice(Level::Info, &format!("note: {text}")),
            Event::Retry {
                attempt,
                max_attempts,
                reason,
            } => {
                // Thinking of the failed attempt is void; the reply starts over.
                self.thinking.clear();
                self.retry = Some(RetryView {
                    attempt,
                    max_attempts,
                    reason: reason.clone(),
                    since: now,
                });
                self.notice(
                    Level::Warn,
                    &format!("retrying (attempt {attempt}/{max_attempts}): {reason}"),
                );
            }
            Event::ApprovalRequest {
                approval_id,
                name,
                summary,
                detail,
                reason,
                source_path,
                source_sha,
                env,
            } => {
                self.close_thinking();
                self.close_reply();
                self.approvals.push(ApprovalCard {
                    approval_id,
                    name,
                    summary,
                    detail,
                    reason,
                    source_path,
                    source_sha,
                    env,
                    answered: None,
                    outcome: None,
                });
            }
            Event::ApprovalSettled {
                approval_id,
                outcome,
            } => {
                if let Some(i) = self.approvals.iter().position(|c| c.approval_id == approval_id) {
                    let mut card = self.approvals.remove(i);
                    card.outcome = Some(outcome);
                    self.finished.push(Block::Approval(card));
                }
            }
            Event::Refrozen {
                tools,
                skills,
                changes,
            } => {
                let mut text = format!(
                    "reloaded: {} tool{}, {} skill{}",
                    tools.len(),
                    if tools.len() == 1 { "" } else { "s" },
                    skills.len(),
                    if skills.len() == 1 { "" } else { "s" }
                );
                for c in &changes {
                    text.push_str(&format!(
                        "; {} {} {} ({}, by {})",
                        c.kind, c.name, c.change, c.path, c.by
                    ));
                }
                self.notice(Level::Info, &text);
            }
            Event::SchemasOverBudget {
                schema_tokens,
                budget_tokens,
            } => self.notice(
                Level::Warn,
                &format!(
                    "warning: tool schemas take {schema_tokens} of {budget_tokens} usable tokens"
                ),
            ),
            Event::Compacted {
                tokens_before,
                tokens_after,
                compacted_messages,
            } => self.notice(
                Level::Info,
                &format!(
                    "compacted {compacted_messages} messages: {tokens_before} → {tokens_after} tokens"
                ),
            ),
            Event::HookFailed {
                hook,
                event,
                detail,
            } => self.notice(
                Level::Warn,
                &format!("hook {hook} ({event}) failed: {detail}"),
            ),
            Event::TurnRefused { hook, reason, .. } => {
                // The hook's reason goes back to the model as a user message: show it as one.
                self.close_reply();
                self.finished.push(Block::User(reason));
                self.notice(Level::Info, &format!("(sent by hook {hook}, which refused the reply)"));
            }
            Event::Done { stop_reason } => {
                self.close_thinking();
                self.close_reply();
                self.running = None;
                // Cards of this turn that never ended (the turn was cut short) are closed.
                for (_, mut card) in std::mem::take(&mut self.tools) {
                    card.ok = Some(false);
                    self.finished.push(Block::Tool(card));
                }
                match &stop_reason {
                    StopReason::Provider(r) if matches!(r.as_str(), "end_turn" | "tool_use" | "stop") => {}
                    StopReason::Cancelled => self.notice(Level::Warn, "cancelled"),
                    other => self.notice(Level::Warn, &format!("turn ended: {other}")),
                }
            }
            Event::Error { message } => self.notice(Level::Error, &format!("error: {message}")),
            Event::ProtocolError { message } => {
                self.notice(Level::Error, &format!("refused: {message}"))
            }
            Event::ApprovalMode { mode } => {
                self.status.mode = Some(mode);
                if let Some(at) = self.modes_asked.iter().position(|m| *m == mode) {
                    self.modes_asked.drain(..=at);
                }
                self.notice(Level::Info, &format!("mode: {}", mode.as_str()));
            }
        }
    }
}
