//! When the project is checkpointed for undo: the turn's first effect that may write the
//! project (a tool call that writes, in a sandbox that can, or a hook's process) is preceded by
//! one `Checkpoint` `Before` effect, and a turn that had one gets a `Checkpoint` `After` as it
//! ends. A turn with no such effect records nothing.
//!
//! Invariants:
//! - At most one `Before` and one `After` per turn, each naming the turn's number; the `Before`
//!   is emitted immediately ahead of the effect that needed it, so a driver that performs
//!   effects in order never starts that effect's process before the checkpoint.
//! - The answer (`Checkpointed`) holds nothing up: a `Before`'s id is persisted as a
//!   `checkpoint` record in the background, and a note (no checkpoint, or a partial one) is a
//!   `harness_note` with no call. An answer may come after its turn ended; it is handled the
//!   same way, and ignored once the session is closed.

use crate::record::Record;
use crate::tool::{RunSandbox, ToolPlan};

use super::{CheckpointMoment, Core, Effect};

/// The longest prompt line a checkpoint carries, in characters.
pub(super) const PROMPT_CHARS: usize = 200;

/// The first line of a prompt, cut to [`PROMPT_CHARS`] characters.
pub(super) fn prompt_line(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or("");
    let mut out: String = line.chars().take(PROMPT_CHARS).collect();
    if line.chars().count() > PROMPT_CHARS {
        out.push('…');
    }
    out
}

/// Whether running a call with this plan may write the project: a mutating call, or external
/// code (its process, or its server, may write whatever its declared intent).
pub(super) fn plan_writes(plan: &ToolPlan) -> bool {
    plan.mutating || plan.source.is_some()
}

impl Core {
    /// A call that writes is about to run in `sandbox`: checkpoint first unless the sandbox is
    /// read-only (the project cannot change there).
    pub(super) fn before_call(&mut self, writes: bool, sandbox: RunSandbox) {
        match sandbox {
            RunSandbox::ReadOnly => {}
            RunSandbox::Session | RunSandbox::Unsandboxed => {
                if writes {
                    self.before_write();
                }
            }
        }
    }

    /// An effect that may write the project is about to go out in the running turn: the
    /// turn's `Before` checkpoint first, once.
    pub(super) fn before_write(&mut self) {
        if !self.config.checkpoints || self.turn.number == 0 || self.turn.checkpointed {
            return;
        }
        self.turn.checkpointed = true;
        self.eff(Effect::Checkpoint {
            turn: self.turn.number,
            moment: CheckpointMoment::Before,
            prompt: self.turn.prompt.clone(),
        });
    }

    /// The running turn is ending: its `After` checkpoint, when it took a `Before`.
    pub(super) fn after_turn(&mut self) {
        if self.turn.checkpointed {
            self.eff(Effect::Checkpoint {
                turn: self.turn.number,
                moment: CheckpointMoment::After,
                prompt: self.turn.prompt.clone(),
            });
        }
    }

    /// The answer to a `Checkpoint`.
    pub(super) fn on_checkpointed(
        &mut self,
        turn: u64,
        moment: CheckpointMoment,
        id: Option<String>,
        note: Option<String>,
    ) {
        if let (CheckpointMoment::Before, Some(id)) = (moment, id) {
            self.persist_background(vec![Record::Checkpoint { turn, moment, id }]);
        }
        if let Some(text) = note {
            self.note(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_lines_are_the_first_line_cut_to_length() {
        assert_eq!(prompt_line("  fix the bug\nand more"), "fix the bug");
        assert_eq!(prompt_line(""), "");
        let long = "x".repeat(PROMPT_CHARS + 5);
        let cut = prompt_line(&long);
        assert_eq!(cut.chars().count(), PROMPT_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
