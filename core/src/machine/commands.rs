//! Client commands: parsing a raw line, admitting a `user` turn, `cancel` in every state,
//! `approval_mode`, `reload`, `quit`, and the answers to their effects.
//!
//! Invariants: every `user` is answered by exactly one `done`, except one sent while a turn is
//! in flight (a `protocol_error` alone); commands after `quit` (or end of input) are ignored;
//! the mode changes only after `ModeSaved`.

use crate::conversation::{Block, Image, Message, Role};
use crate::record::Record;
use crate::wire::{ApprovalOutcome, Command, Event, Mode, StopReason};

use super::phase::{AfterPersist, Phase};
use super::turn::Turn;
use super::{Core, Effect, FramingFault, Freeze, HookEvent};

/// The start of the note that tells the model the approval mode changed.
pub const MODE_NOTE: &str = "approval mode is now ";

impl Core {
    pub(super) fn on_line(&mut self, raw: &str) {
        let cmd = match Command::parse_line(raw) {
            Ok(None) => return,
            Ok(Some(c)) => c,
            Err(e) => {
                if !self.lifecycle.quitting() {
                    self.protocol_error(e.to_string());
                }
                return;
            }
        };
        if self.lifecycle.quitting() {
            return;
        }
        match cmd {
            Command::User { text } => self.on_user(text, Vec::new()),
            Command::Approve {
                approval_id,
                approved,
            } => self.on_approve(&approval_id, approved),
            Command::ApprovalMode { mode } => self.on_approval_mode(&mode),
            Command::Reload => self.on_reload(),
            Command::Cancel => self.on_cancel(),
            Command::Quit => self.on_quit(),
        }
    }

    /// A line the shell could not frame (ignored once quitting, like any command).
    pub(super) fn on_framing(&mut self, fault: FramingFault) {
        if self.lifecycle.quitting() {
            return;
        }
        self.protocol_error(match fault {
            FramingFault::TooLong { len } => {
                format!("line longer than 8 MiB ({len} bytes) skipped")
            }
            FramingFault::NotUtf8 => "line is not valid UTF-8; skipped".to_string(),
        });
    }

    pub(super) fn on_user(&mut self, text: String, images: Vec<Image>) {
        if self.busy() {
            return self.protocol_error(
                "a turn is already in flight; wait for its done before sending the next user \
                 command (or send cancel)",
            );
        }
        if text.trim().is_empty() {
            return self.refuse_user("user text is empty");
        }
        if !self.config.trusted {
            return self.refuse_user(
                "this project is not trusted: run `openmax --trust` in the project, then try \
                 again",
            );
        }
        self.turn = Turn::default();
        self.turns += 1;
        self.turn.number = self.turns;
        self.turn.prompt = super::checkpoint::prompt_line(&text);
        let fields = super::hooks::prompt_fields(&text, &images);
        self.fire_observe(HookEvent::UserPromptSubmit, None, fields);
        self.start_prompt_hooks(text, images);
    }

    /// A `user` that starts no turn: `protocol_error`, then `done refused`.
    fn refuse_user(&mut self, message: &str) {
        self.protocol_error(message);
        self.ev(Event::Done {
            stop_reason: StopReason::Refused,
        });
        self.after_done();
    }

    /// The prompt passed its hooks: into the conversation (after pending notes), persisted,
    /// and the first request goes out.
    pub(super) fn admit_prompt(&mut self, text: String, images: Vec<Image>) {
        let mut content: Vec<Block> = std::mem::take(&mut self.pending_notes)
            .iter()
            .map(|n| Block::note(n))
            .collect();
        content.push(Block::text(text));
        content.extend(images.into_iter().map(Block::Image));
        self.turn.start = self.conversation.len();
        let record = self.push_message(Message {
            role: Role::User,
            content,
        });
        self.persist_background(vec![record]);
        self.start_request();
    }

    pub(super) fn on_cancel(&mut self) {
        if self.turn.ending.is_some() {
            // Already ending (a cancel waiting on a tool or a persistence ack): nothing more.
            return;
        }
        // Every run out is cancelled; the turn ends once each of them ended.
        self.cancel_runs();
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => self.protocol_error("cancel: no turn is running"),
            Phase::Hooks { .. } if !self.turn.runs.is_empty() => {
                // The next call's blocking hooks are left (its answer is ignored; the call
                // never started); the runs before it are waited for.
                self.turn.ending = Some(StopReason::Cancelled);
                self.phase = Phase::RunningTools;
            }
            Phase::Hooks { .. } | Phase::Backoff { .. } => self.end_turn(StopReason::Cancelled),
            Phase::Streaming(a) => {
                self.eff(Effect::CancelRequest { request: a.request });
                if a.text.is_empty() {
                    self.end_turn(StopReason::Cancelled);
                } else {
                    // A token run always ends with message_done: the partial is kept.
                    self.turn.ending = Some(StopReason::Cancelled);
                    self.end_with_partial(a.text, None, StopReason::Cancelled);
                }
            }
            p @ Phase::Persisting {
                then: AfterPersist::Partial { .. },
                ..
            } => {
                // The turn already ends `truncated` once the partial text is on disk.
                self.phase = p;
            }
            p @ Phase::Persisting {
                then:
                    AfterPersist::Reply(_)
                    | AfterPersist::Result { .. }
                    | AfterPersist::Refusal { .. }
                    | AfterPersist::Compaction { .. },
                ..
            } => {
                self.phase = p;
                self.turn.ending = Some(StopReason::Cancelled);
            }
            Phase::Planning { call } => {
                self.turn.ending = Some(StopReason::Cancelled);
                self.finish_call(
                    call,
                    false,
                    format!("cancelled: {} before this call ran", self.cancel_cause()),
                    None,
                );
            }
            Phase::Approving {
                call, approval_id, ..
            } => {
                self.turn.ending = Some(StopReason::Cancelled);
                self.settle(&approval_id, ApprovalOutcome::Cancelled);
                self.finish_call(
                    call,
                    false,
                    format!(
                        "cancelled: {} while this call awaited approval",
                        self.cancel_cause()
                    ),
                    None,
                );
            }
            Phase::RunningTools => {
                self.turn.ending = Some(StopReason::Cancelled);
                self.phase = Phase::RunningTools;
            }
        }
    }

    fn on_approval_mode(&mut self, mode: &str) {
        if self.config.agent_spawned {
            return self.protocol_error(
                "approval_mode: an agent-spawned openmax cannot change the approval mode",
            );
        }
        let Some(m) = Mode::parse(mode) else {
            return self.protocol_error(format!(
                "approval_mode: unknown mode {mode:?}; legal values: {}",
                Mode::ALL.join(", ")
            ));
        };
        if !self.config.trusted {
            return self.protocol_error(
                "approval_mode: this project is not trusted: run `openmax --trust` in the \
                 project first",
            );
        }
        self.gate.mode_saves.push_back(m);
        self.eff(Effect::SaveMode { mode: m });
    }

    pub(super) fn on_mode_saved(&mut self, mode: Mode) {
        let Some(pos) = self.gate.mode_saves.iter().position(|m| *m == mode) else {
            return;
        };
        self.gate.mode_saves.remove(pos);
        self.config.mode = mode;
        self.ev(Event::ApprovalMode { mode });
        // Only the mode in force when the next turn starts matters to the model: one note.
        self.pending_notes.retain(|n| !n.starts_with(MODE_NOTE));
        self.note(format!("{MODE_NOTE}{}", mode.as_str()));
        self.persist_background(vec![Record::ModeChanged { mode }]);
    }

    pub(super) fn on_mode_save_failed(&mut self, mode: Mode, message: String) {
        let Some(pos) = self.gate.mode_saves.iter().position(|m| *m == mode) else {
            return;
        };
        self.gate.mode_saves.remove(pos);
        self.protocol_error(format!(
            "approval_mode: could not save mode {}: {message}; the mode is unchanged ({})",
            mode.as_str(),
            self.config.mode.as_str()
        ));
    }

    fn on_reload(&mut self) {
        if self.busy() {
            return self.protocol_error("reload: a turn is in flight; send reload after its done");
        }
        if self.gate.refreezing {
            return self.protocol_error("reload: a reload is already in progress");
        }
        self.gate.refreezing = true;
        self.eff(Effect::Refreeze);
    }

    pub(super) fn on_frozen(&mut self, snapshot: Freeze) {
        if !self.gate.refreezing {
            return;
        }
        self.gate.refreezing = false;
        if self.in_turn() {
            self.gate.deferred_freeze = Some(Box::new(snapshot));
        } else {
            self.apply_freeze(snapshot);
        }
    }

    /// Replace the freeze: `refrozen`, the receipt as a harness note, the record.
    pub(super) fn apply_freeze(&mut self, snapshot: Freeze) {
        let tools: Vec<String> = snapshot.tools.iter().map(|t| t.name.clone()).collect();
        self.ev(Event::Refrozen {
            tools: tools.clone(),
            skills: snapshot.skills.clone(),
            changes: snapshot.changes.clone(),
        });
        self.note(receipt_text(&snapshot, &tools));
        for n in snapshot.notes.clone() {
            self.note(n);
        }
        self.persist_background(vec![Record::Refrozen {
            system: snapshot.system.clone(),
            tools: snapshot.tools.clone(),
        }]);
        if let Some(trusted) = snapshot.trusted {
            self.config.trusted = trusted;
        }
        self.config.freeze = snapshot;
    }
}

/// The refreeze receipt as the model reads it.
fn receipt_text(snapshot: &Freeze, tools: &[String]) -> String {
    let mut s = String::from("tools, skills and prompt were re-read");
    if snapshot.changes.is_empty() {
        s.push_str("; nothing changed");
    } else {
        s.push_str("; changes:");
        for c in &snapshot.changes {
            let who = if c.by == "agent" {
                "by this session's agent"
            } else {
                "from outside this session"
            };
            s.push_str(&format!(
                " {} {} {} ({}, {who});",
                c.kind, c.name, c.change, c.path
            ));
        }
        s.pop();
    }
    s.push_str(&format!(
        ". Tools now: {}.",
        if tools.is_empty() {
            "none".to_string()
        } else {
            tools.join(", ")
        }
    ));
    s
}
