//! Keys and pastes into the view: editing, history, submitting, slash commands, approvals,
//! cancel, mode cycling and quitting. Every effect on the session is a wire command queued on
//! the view ([`View::take_commands`]); nothing here decides policy.
//!
//! | key | does |
//! | --- | --- |
//! | Enter | submit the prompt (or a slash command); during a turn a prompt stays in the editor |
//! | Ctrl-J, Alt-Enter, Shift-Enter | insert a newline |
//! | Up / Down | walk this project's earlier prompts |
//! | y / n | answer the oldest pending approval card |
//! | Esc | cancel the running turn |
//! | Ctrl-C | cancel the running turn; on an idle prompt, twice within 2 s quits |
//! | Ctrl-D | quit, on an empty prompt |
//! | Shift-Tab | cycle the mode auto → ask → readonly (saved like `approval_mode`) |
//! | Ctrl-U | clear the prompt |

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use openmax_core::wire::{Command, Mode};

use super::blocks::{Block, Level};
use super::view::{View, QUIT_WINDOW_MS};

/// The `/help` text.
pub const HELP: &str = "keys: Enter send · Ctrl-J or Alt-Enter newline · Up/Down history · \
y/n answer an approval · Esc cancel the turn · Ctrl-C cancel, twice on an idle prompt quit · \
Ctrl-D quit on an empty prompt · Shift-Tab cycle the mode auto → ask → readonly · Ctrl-U clear\n\
commands: /mode <auto|ask|readonly> · /reload · /undo [N|list] [--force] · /help · /quit";

/// The mode after `mode` in the Shift-Tab cycle.
pub fn next_mode(mode: Mode) -> Mode {
    match mode {
        Mode::Auto => Mode::Ask,
        Mode::Ask => Mode::Readonly,
        Mode::Readonly => Mode::Auto,
    }
}

impl View {
    /// A bracketed paste: inserted as typed text, newlines kept, never submitted.
    pub fn paste(&mut self, text: &str) {
        self.editor.insert(text);
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
            KeyCode::BackTab => {
                let next = next_mode(self.status.mode.unwrap_or(Mode::Ask));
                self.send(Command::ApprovalMode {
                    mode: next.as_str().to_string(),
                });
            }
            KeyCode::Tab if shift => {
                let next = next_mode(self.status.mode.unwrap_or(Mode::Ask));
                self.send(Command::ApprovalMode {
                    mode: next.as_str().to_string(),
                });
            }
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
            }
            KeyCode::Backspace => self.editor.backspace(),
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

    /// Whether y/n go to an approval card: one is pending and unanswered and the prompt is
    /// empty (so a typed word starting with y is not taken for an answer).
    fn answering(&self) -> bool {
        self.editor.is_empty() && self.approvals.iter().any(|c| c.answered.is_none())
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
        if self.running.is_some() && !pending.is_empty() && !pending.starts_with('/') {
            // The core refuses a `user` while a turn is in flight: keep the text for later.
            self.hint =
                Some("a turn is running: Esc cancels it; Enter sends this once it ends".into());
            return;
        }
        let text = self.editor.submit();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return;
        }
        if let Some(cmd) = trimmed.strip_prefix('/') {
            self.slash(cmd);
            return;
        }
        self.finished.push(Block::User(text.clone()));
        self.running = Some(now);
        self.send(Command::User { text });
    }

    fn slash(&mut self, cmd: &str) {
        let mut words = cmd.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("mode"), Some(mode), None) => self.send(Command::ApprovalMode {
                mode: mode.to_string(),
            }),
            (Some("mode"), None, None) => {
                let now = self.status.mode.map(Mode::as_str).unwrap_or("unknown");
                self.notice(
                    Level::Info,
                    &format!("mode: {now} (change it with /mode <auto|ask|readonly> or Shift-Tab)"),
                );
            }
            (Some("reload"), None, None) => self.send(Command::Reload),
            (Some("undo"), ..) => self.slash_undo(cmd),
            (Some("help"), None, None) => self.notice(Level::Info, HELP),
            (Some("quit"), None, None) => self.quit(),
            _ => self.notice(
                Level::Error,
                &format!("unknown command /{cmd}: try /mode <auto|ask|readonly>, /reload, /undo, /help or /quit"),
            ),
        }
    }

    fn slash_undo(&mut self, cmd: &str) {
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
