//! Keys and pastes into the view: editing, history, submitting, slash commands, approvals,
//! cancel, mode cycling and quitting. Every effect on the session is a wire command queued on
//! the view ([`View::take_commands`]); nothing here decides policy.
//!
//! | key | does |
//! | --- | --- |
//! | Enter | submit the prompt (or a slash command); during a turn a prompt stays in the editor |
//! | Ctrl-J, Alt-Enter, Shift-Enter | insert a newline |
//! | Up / Down | walk this project's earlier prompts |
//! | y / n | answer the UI's first question (trust, a project source), else the oldest pending approval card |
//! | Esc | cancel the running turn |
//! | Ctrl-C | cancel the running turn; on an idle prompt, twice within 2 s quits |
//! | Ctrl-D | quit, on an empty prompt |
//! | Shift-Tab | cycle the mode auto → ask → readonly (saved like `approval_mode`) |
//! | Ctrl-U | clear the prompt |
//! | in the `/resume` picker: Up / Down, Enter, Esc | move, resume the session, close |
//! | in the `/` menu: Up / Down, Tab, Enter, Esc | move, complete, run, clear the prompt |
//!
//! In a prompt, `@path/to/image.png` attaches the image and `@server:uri` the text of an MCP
//! resource; pasting (or dropping) the path of an image file inserts it as `@path`;
//! `/mcp__<server>__<prompt> [arg=value…]` sends an MCP prompt (see [`super::attach`]).

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use openmax_core::wire::{Command, Mode};

use super::blocks::{Block, Level};
use super::card::ApprovalCard;
use super::view::{Next, Question, Request, View, QUIT_WINDOW_MS};

/// The mode after `mode` in the Shift-Tab cycle.
pub fn next_mode(mode: Mode) -> Mode {
    match mode {
        Mode::Auto => Mode::Ask,
        Mode::Ask => Mode::Readonly,
        Mode::Readonly => Mode::Auto,
    }
}

impl View {
    /// A bracketed paste: inserted as typed text, newlines kept, never submitted; the path of
    /// an image file (a dropped file) is inserted as an `@path` attachment.
    pub fn paste(&mut self, text: &str) {
        match super::attach::pasted_image(text) {
            Some(path) => self.editor.insert(&format!("@{path} ")),
            None => self.editor.insert(text),
        }
    }

    /// A prompt that could not be sent (an attachment failed): say why; the turn never began.
    pub fn prompt_failed(&mut self, why: &str) {
        self.running = None;
        self.notice(Level::Error, &format!("not sent: {why}"));
    }

    /// One key at time `now` (ms).
    pub fn key(&mut self, now: u64, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        if !(ctrl && key.code == KeyCode::Char('c')) {
            self.ctrl_c_at = None;
            self.hint = None;
        }
        if self.picker.is_some() {
            self.pick_key(key.code);
            return;
        }
        let menu = !self.menu().is_empty();
        match key.code {
            KeyCode::Up if menu => return self.menu_move(-1),
            KeyCode::Down if menu => return self.menu_move(1),
            KeyCode::Tab if menu && !shift => return self.menu_complete(),
            KeyCode::Esc if menu && self.running.is_none() => {
                self.editor.clear();
                self.menu_at = 0;
                return;
            }
            KeyCode::Enter if menu && !(alt || shift) && self.menu_enter() => return,
            _ => {}
        }
        match key.code {
            KeyCode::Char('c') if ctrl => self.ctrl_c(now),
            KeyCode::Char('d') if ctrl => {
                if self.editor.is_empty() {
                    self.quit();
                } else {
                    self.editor.delete();
                }
            }
            KeyCode::Char('j') if ctrl => self.editor.insert("\n"),
            KeyCode::Char('u') if ctrl => self.editor.clear(),
            KeyCode::Char('a') if ctrl => self.editor.home(),
            KeyCode::Char('e') if ctrl => self.editor.end(),
            KeyCode::Enter if alt || shift => self.editor.insert("\n"),
            KeyCode::Enter => self.submit(now),
            KeyCode::Esc if self.running.is_some() => self.send(Command::Cancel),
            KeyCode::BackTab => self.cycle_mode(),
            KeyCode::Tab if shift => self.cycle_mode(),
            KeyCode::Char(c) if !ctrl && self.answering() && matches!(c, 'y' | 'Y' | 'n' | 'N') => {
                self.answer(c == 'y' || c == 'Y');
            }
            KeyCode::Char(c)
                if !ctrl && self.answering_undo() && matches!(c, 'y' | 'Y' | 'n' | 'N') =>
            {
                self.answer_undo(c == 'y' || c == 'Y');
            }
            KeyCode::Char(c) if !ctrl => {
                let mut b = [0u8; 4];
                self.editor.insert(c.encode_utf8(&mut b));
                self.menu_at = 0;
            }
            KeyCode::Backspace => {
                self.editor.backspace();
                self.menu_at = 0;
            }
            KeyCode::Delete => self.editor.delete(),
            KeyCode::Left => self.editor.left(),
            KeyCode::Right => self.editor.right(),
            KeyCode::Home => self.editor.home(),
            KeyCode::End => self.editor.end(),
            KeyCode::Up => self.editor.up(),
            KeyCode::Down => self.editor.down(),
            _ => {}
        }
    }

    /// Shift-Tab: the mode after the last one asked for (a press before the previous press's
    /// acknowledgement came back counts from what that press asked, so none is lost).
    fn cycle_mode(&mut self) {
        let from = self
            .modes_asked
            .last()
            .copied()
            .or(self.status.mode)
            .unwrap_or(Mode::Ask);
        let next = next_mode(from);
        self.modes_asked.push(next);
        self.send(Command::ApprovalMode {
            mode: next.as_str().to_string(),
        });
    }

    /// Whether y/n answer something: a question of the UI's, or a pending and unanswered
    /// approval card, and the prompt is empty (so a typed word starting with y is not taken
    /// for an answer).
    fn answering(&self) -> bool {
        self.editor.is_empty()
            && (!self.questions.is_empty() || self.approvals.iter().any(|c| c.answered.is_none()))
    }

    /// Whether y/n go to the undo card: it waits and the prompt is empty.
    fn answering_undo(&self) -> bool {
        self.editor.is_empty() && self.undo.as_ref().is_some_and(|c| !c.answered)
    }

    fn answer_undo(&mut self, yes: bool) {
        if yes && self.running.is_some() {
            self.undo = None;
            return self.notice(
                Level::Warn,
                "undo: not done, a turn started meanwhile; /undo again once it ends",
            );
        }
        let Some(card) = &mut self.undo else { return };
        if yes {
            card.answered = true;
            let ask = super::undo::UndoAsk::Apply {
                turn: card.turn,
                force: card.force,
            };
            self.undo_asks.push(ask);
        } else {
            self.undo = None;
            self.notice(Level::Info, "undo: not done; nothing changed");
        }
    }

    fn answer(&mut self, approved: bool) {
        if !self.questions.is_empty() {
            let question = self.questions.remove(0);
            match &question {
                Question::Trust { project } => self.notice(
                    Level::Info,
                    &if approved {
                        format!("trusting {project}…")
                    } else {
                        format!(
                            "{project} is not trusted: prompts are refused and nothing runs \
                             (/trust trusts it)"
                        )
                    },
                ),
                Question::Source { card, .. } => {
                    let card = ApprovalCard {
                        outcome: Some(if approved {
                            openmax_core::wire::ApprovalOutcome::Approved
                        } else {
                            openmax_core::wire::ApprovalOutcome::Declined
                        }),
                        ..card.clone()
                    };
                    self.finished.push(Block::Approval(card));
                }
            }
            self.requests.push(Request::Answer {
                question: Box::new(question),
                yes: approved,
            });
            return;
        }
        if let Some(card) = self.approvals.iter_mut().find(|c| c.answered.is_none()) {
            card.answered = Some(approved);
            let cmd = Command::Approve {
                approval_id: card.approval_id.clone(),
                approved,
            };
            self.send(cmd);
        }
    }

    fn ctrl_c(&mut self, now: u64) {
        if self.running.is_some() {
            self.send(Command::Cancel);
            return;
        }
        match self.ctrl_c_at {
            Some(at) if now.saturating_sub(at) <= QUIT_WINDOW_MS => self.quit(),
            _ => {
                self.editor.clear();
                self.ctrl_c_at = Some(now);
                self.hint = Some("press Ctrl-C again to quit".into());
            }
        }
    }

    pub(super) fn quit(&mut self) {
        if !self.quitting {
            self.quitting = true;
            self.send(Command::Quit);
        }
    }

    fn submit(&mut self, now: u64) {
        let pending = self.editor.text().trim();
        // An MCP prompt command (`/mcp__<server>__<prompt>`) is a prompt, not a UI command.
        let command = pending.starts_with('/') && !pending.starts_with("/mcp__");
        if self.running.is_some() && !pending.is_empty() && !command {
            // The core refuses a `user` while a turn is in flight: keep the text for later.
            self.hint =
                Some("a turn is running: Esc cancels it; Enter sends this once it ends".into());
            return;
        }
        if !self.questions.is_empty() && !pending.is_empty() && !command {
            self.hint = Some("answer the question above first: y or n".into());
            return;
        }
        let text = self.editor.submit();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return;
        }
        #[cfg(feature = "panic-trigger")]
        crate::panic_trigger::check("ui", trimmed);
        if let Some(cmd) = trimmed
            .strip_prefix('/')
            .filter(|c| !c.starts_with("mcp__"))
        {
            self.slash(cmd);
            return;
        }
        self.finished.push(Block::User(text.clone()));
        self.running = Some(now);
        self.send(Command::User { text });
    }

    /// A key while the `/resume` picker is open.
    fn pick_key(&mut self, code: KeyCode) {
        let Some(p) = &mut self.picker else { return };
        match code {
            KeyCode::Up => p.at = p.at.saturating_sub(1),
            KeyCode::Down => p.at = (p.at + 1).min(p.items.len().saturating_sub(1)),
            KeyCode::Esc => self.picker = None,
            KeyCode::Enter => {
                let id = p.items.get(p.at).map(|(id, _)| id.clone());
                self.picker = None;
                if let Some(id) = id {
                    self.notice(Level::Info, &format!("resuming session {id}…"));
                    self.next = Some(Next::Resume(id));
                    self.quit();
                }
            }
            _ => {}
        }
    }

    pub(super) fn slash_undo(&mut self, cmd: &str) {
        let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
        let ask = match super::undo::parse(&args) {
            Ok(a) => a,
            Err(e) => return self.notice(Level::Error, &e),
        };
        if ask != super::undo::UndoAsk::List {
            if self.running.is_some() {
                return self.notice(
                    Level::Warn,
                    "undo: a turn is running; /undo once it ends (Esc cancels it)",
                );
            }
            if self.undo.is_some() {
                return self.notice(Level::Warn, "undo: answer the undo card first (y or n)");
            }
        }
        self.undo_asks.push(ask);
    }
}
