//! The pairing checker: what only the client's commands and openmax's events together show.
//!
//! A simulator or a test records the interleaved sequence as it happened ([`Step`]): a command
//! line written to stdin, an event line read from stdout, and the end of input. The checker
//! models what openmax must answer to each command, in recorded order:
//!
//! - "Every user command is answered by exactly one done": each admitted `user` waits for one
//!   `done`; a `done` with no admitted `user` waiting is a violation. A turn is *in flight* from
//!   its `user` until its `done`.
//! - "The one case with no done is a user sent while a turn is already in flight: it is refused
//!   with a protocol_error alone": such a `user` expects a `protocol_error` and waits for no
//!   `done`.
//! - "Empty text ... yields protocol_error followed by done with stop_reason refused": a `user`
//!   with empty text (`""`) expects a `protocol_error` and a `done` that must be `refused`.
//!   (Whitespace-only text may be admitted or refused; both are accepted. A project that is not
//!   trusted refuses every `user` the same way, which the checker also accepts.)
//! - "An approve naming an id that was never issued or has already settled is answered with a
//!   protocol_error": an `approve` whose id is not pending (or was already answered) expects one.
//!   An `approve` of a pending id must settle it `approved`/`declined` as it said (or
//!   `cancelled`/`timed_out` if that won the race).
//! - A `cancel` with no turn in flight is answered by a `protocol_error` (openmax's choice: the
//!   contract only says cancel cancels the running turn; a client should learn its picture of the
//!   session was wrong).
//! - "Unknown cmd values are protocol errors": any command line that does not parse expects a
//!   `protocol_error`; blank lines expect nothing.
//! - `approval_mode` is "answered by an approval_mode line, or a protocol_error"; the
//!   acknowledgement must name the mode asked for. `reload` is "answered by refrozen, or
//!   protocol_error while a turn is in flight".
//! - "after quit or EOF, pending and later approvals are declined": after `quit` or
//!   [`Step::EndOfInput`] every approval still unanswered settles `declined`, and must settle.
//!
//! Expected `protocol_error`s are matched in order; a `protocol_error` no command explains is
//! accepted (a save failure or an untrusted project produce them too). Every event line is also
//! fed to a [`StreamValidator`], whose violations are reported with their step.

use std::collections::{BTreeMap, VecDeque};

use super::line::{check_line, Parsed};
use super::{StreamValidator, Violation, Where};
use crate::wire::command::{Command, Mode};
use crate::wire::event::{ApprovalOutcome, Event};
use crate::wire::StopReason;

/// One recorded step of a session, as a simulator or test saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A line the client wrote to stdin (no newline).
    Command(String),
    /// A line openmax wrote to stdout (no newline).
    Event(String),
    /// The client closed stdin (behaves like `quit`).
    EndOfInput,
}

/// Checks a recorded command/event sequence. Feed steps in order, then call
/// [`PairingChecker::finish`].
#[derive(Debug, Default)]
pub struct PairingChecker {
    stream: StreamValidator,
    step: usize,
    /// Admitted `user` commands waiting for their `done`: (step, must be refused).
    users: VecDeque<(usize, bool)>,
    /// Answers owed to commands, oldest first.
    expects: Vec<Expect>,
    /// Issued approvals not yet settled.
    approvals: BTreeMap<String, Approval>,
    /// `quit` or end of input has been seen.
    draining: bool,
    out: Vec<Violation>,
}

#[derive(Debug, Clone)]
struct Expect {
    step: usize,
    kind: ExpectKind,
    what: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ExpectKind {
    /// Only a `protocol_error` answers it.
    ProtocolError,
    /// An `approval_mode` acknowledgement naming this mode, or a `protocol_error`.
    ModeAck(Mode),
    /// A `refrozen`, or a `protocol_error`.
    Refrozen,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Approval {
    /// Issued, not answered by the client.
    Open,
    /// The client answered `approved`.
    Answered(bool),
}

impl PairingChecker {
    /// A checker before the first step.
    pub fn new() -> PairingChecker {
        PairingChecker::default()
    }

    /// Check a whole recorded sequence: every violation, in order, end-of-sequence ones last.
    pub fn check(steps: &[Step]) -> Vec<Violation> {
        let mut c = PairingChecker::new();
        for s in steps {
            c.step(s);
        }
        c.finish()
    }

    /// Apply one step.
    pub fn step(&mut self, step: &Step) {
        self.step += 1;
        match step {
            Step::Command(line) => self.on_command(line),
            Step::Event(line) => self.on_event(line),
            Step::EndOfInput => self.draining = true,
        }
    }

    /// The end-of-sequence rules; returns every violation found.
    pub fn finish(mut self) -> Vec<Violation> {
        let mut end = Vec::new();
        for v in self.stream.finish() {
            end.push(format!("event stream: {}", v.message));
        }
        for (step, _) in &self.users {
            end.push(format!(
                "the user command at step {step} was never answered by done"
            ));
        }
        for e in &self.expects {
            let owed = match e.kind {
                ExpectKind::ProtocolError => "a protocol_error",
                ExpectKind::ModeAck(_) => "an approval_mode acknowledgement or a protocol_error",
                ExpectKind::Refrozen => "a refrozen or a protocol_error",
            };
            end.push(format!(
                "the command at step {} ({}) got no answer; it is owed {owed}",
                e.step, e.what
            ));
        }
        if self.draining {
            for (id, a) in &self.approvals {
                if *a == Approval::Open {
                    end.push(format!(
                        "approval {id:?} was pending at quit/end of input and never settled declined"
                    ));
                }
            }
        }
        self.out.extend(end.into_iter().map(|message| Violation {
            at: Where::End,
            message,
        }));
        self.out
    }

    fn flag(&mut self, message: String) {
        self.out.push(Violation {
            at: Where::Step(self.step),
            message,
        });
    }

    fn expect(&mut self, kind: ExpectKind, what: String) {
        self.expects.push(Expect {
            step: self.step,
            kind,
            what,
        });
    }

    fn on_command(&mut self, line: &str) {
        if self.draining {
            // After quit openmax drains and exits; nothing later is answered.
            return;
        }
        let in_flight = !self.users.is_empty();
        let cmd = match Command::parse_line(line) {
            Ok(None) => return, // "blank lines are skipped"
            Ok(Some(cmd)) => cmd,
            Err(e) => {
                self.expect(ExpectKind::ProtocolError, format!("bad command: {e}"));
                return;
            }
        };
        match cmd {
            Command::User { text } => {
                if in_flight {
                    self.expect(
                        ExpectKind::ProtocolError,
                        "user while a turn is in flight".into(),
                    );
                } else if text.is_empty() {
                    self.expect(ExpectKind::ProtocolError, "user with empty text".into());
                    self.users.push_back((self.step, true));
                } else {
                    self.users.push_back((self.step, false));
                }
            }
            Command::Approve {
                approval_id,
                approved,
            } => match self.approvals.get(&approval_id).copied() {
                Some(Approval::Open) => {
                    self.approvals
                        .insert(approval_id, Approval::Answered(approved));
                }
                Some(Approval::Answered(_)) => self.expect(
                    ExpectKind::ProtocolError,
                    format!("approve of {approval_id:?}, already answered"),
                ),
                None => self.expect(
                    ExpectKind::ProtocolError,
                    format!("approve of {approval_id:?}, never issued or already settled"),
                ),
            },
            Command::ApprovalMode { mode } => match Mode::parse(&mode) {
                Some(m) => self.expect(ExpectKind::ModeAck(m), format!("approval_mode {mode}")),
                None => self.expect(
                    ExpectKind::ProtocolError,
                    format!("approval_mode with illegal mode {mode:?}"),
                ),
            },
            Command::Reload => {
                if in_flight {
                    self.expect(
                        ExpectKind::ProtocolError,
                        "reload while a turn is in flight".into(),
                    );
                } else {
                    self.expect(ExpectKind::Refrozen, "reload".into());
                }
            }
            Command::Cancel => {
                if !in_flight {
                    // The machine answers a cancel with no turn running with a protocol_error.
                    self.expect(
                        ExpectKind::ProtocolError,
                        "cancel with no turn running".into(),
                    );
                }
            }
            Command::Quit => self.draining = true,
        }
    }

    /// Take the oldest expectation `accepts` admits.
    fn answer(&mut self, accepts: impl Fn(&ExpectKind) -> bool) -> Option<Expect> {
        let i = self.expects.iter().position(|e| accepts(&e.kind))?;
        Some(self.expects.remove(i))
    }

    fn on_event(&mut self, line: &str) {
        for v in self.stream.feed(line.as_bytes()).violations {
            self.flag(format!("event {v}"));
        }
        let Ok(Parsed::Event { event, .. }) = check_line(line) else {
            return;
        };
        match event {
            Event::Done { stop_reason } => match self.users.pop_front() {
                None => self.flag(
                    "done answers no admitted user command (a user sent while a turn is in flight gets no done)"
                        .into(),
                ),
                Some((step, true)) if stop_reason != StopReason::Refused => self.flag(format!(
                    "the user command at step {step} had empty text, so its done must be refused, found {:?}",
                    stop_reason.as_str()
                )),
                Some(_) => {}
            },
            Event::ProtocolError { .. } => {
                let _ = self.answer(|_| true);
            }
            Event::ApprovalMode { mode } => {
                match self.answer(|k| matches!(k, ExpectKind::ModeAck(_))) {
                    Some(Expect {
                        kind: ExpectKind::ModeAck(asked),
                        step,
                        ..
                    }) if asked != mode => self.flag(format!(
                        "approval_mode acknowledges {:?}, but the command at step {step} asked for {:?}",
                        mode.as_str(),
                        asked.as_str()
                    )),
                    Some(_) => {}
                    None => self.flag(
                        "approval_mode acknowledgement with no approval_mode command awaiting an answer"
                            .into(),
                    ),
                }
            }
            Event::Refrozen { .. } => {
                if self
                    .answer(|k| matches!(k, ExpectKind::Refrozen))
                    .is_none()
                {
                    self.flag("refrozen with no reload command awaiting an answer".into());
                }
            }
            Event::ApprovalRequest { approval_id, .. } => {
                self.approvals.insert(approval_id, Approval::Open);
            }
            Event::ApprovalSettled {
                approval_id,
                outcome,
            } => match self.approvals.remove(&approval_id) {
                Some(Approval::Open) if self.draining && outcome != ApprovalOutcome::Declined => {
                    self.flag(format!(
                        "approval {approval_id:?} settled {outcome:?} after quit/end of input; pending approvals are declined"
                    ))
                }
                Some(Approval::Answered(approved)) => {
                    let said = if approved {
                        ApprovalOutcome::Approved
                    } else {
                        ApprovalOutcome::Declined
                    };
                    let raced = matches!(
                        outcome,
                        ApprovalOutcome::Cancelled | ApprovalOutcome::TimedOut
                    );
                    if outcome != said && !raced {
                        self.flag(format!(
                            "approval {approval_id:?} settled {outcome:?}, but the client's approve said approved: {approved}"
                        ));
                    }
                }
                Some(Approval::Open) | None => {}
            },
            Event::Token { .. }
            | Event::Thinking { .. }
            | Event::MessageDone { .. }
            | Event::Budget { .. }
            | Event::Usage { .. }
            | Event::ToolStart { .. }
            | Event::ToolEnd { .. }
            | Event::HarnessNote { .. }
            | Event::Retry { .. }
            | Event::Diff { .. }
            | Event::SchemasOverBudget { .. }
            | Event::Compacted { .. }
            | Event::HookFailed { .. }
            | Event::TurnRefused { .. }
            | Event::Error { .. } => {}
        }
    }
}
