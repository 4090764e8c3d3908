//! The approval mode of a trusted project: the one enum the `approval_mode` command, its
//! acknowledgement, the session record and every frontend share.

use serde::{Deserialize, Serialize};

/// An execution mode for a trusted project (`approval_mode` command and acknowledgement).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Gate nothing (deny rules and validation still apply).
    Auto,
    /// Gate every mutating call and every `ask` rule match (the default).
    Ask,
    /// Refuse mutating calls without asking.
    Readonly,
}

impl Mode {
    /// The legal wire values, in the contract's order.
    pub const ALL: [&'static str; 3] = ["auto", "ask", "readonly"];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Ask => "ask",
            Mode::Readonly => "readonly",
        }
    }

    /// Parse a wire spelling.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "auto" => Some(Mode::Auto),
            "ask" => Some(Mode::Ask),
            "readonly" => Some(Mode::Readonly),
            _ => None,
        }
    }

    /// How much this mode lets run without a human's answer: `readonly` (0) < `ask` (1) <
    /// `auto` (2).
    pub fn looseness(self) -> u8 {
        match self {
            Mode::Readonly => 0,
            Mode::Ask => 1,
            Mode::Auto => 2,
        }
    }

    /// The mode of one run that asked for `wanted` over the project's `saved` mode (`-p
    /// --mode`, never saved). An agent-spawned run may only choose an equal or stricter mode:
    /// an agent cannot give itself (or another agent) more than the human chose; the error
    /// says why.
    pub fn for_one_run(saved: Mode, wanted: Mode, agent_spawned: bool) -> Result<Mode, String> {
        if agent_spawned && wanted.looseness() > saved.looseness() {
            return Err(format!(
                "--mode {} would loosen this project's mode {}: a run started by an agent \
                 (OPENMAX_AGENT_SESSION is set) may only choose an equal or stricter mode \
                 (readonly < ask < auto); a human can change the project's mode in the \
                 terminal UI (Shift-Tab) or over --stdio (approval_mode)",
                wanted.as_str(),
                saved.as_str()
            ));
        }
        Ok(wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_may_only_tighten_the_saved_mode_for_one_run() {
        use Mode::*;
        for saved in [Auto, Ask, Readonly] {
            for wanted in [Auto, Ask, Readonly] {
                assert_eq!(Mode::for_one_run(saved, wanted, false), Ok(wanted));
                let agent = Mode::for_one_run(saved, wanted, true);
                if wanted.looseness() <= saved.looseness() {
                    assert_eq!(agent, Ok(wanted), "{saved:?} -> {wanted:?}");
                } else {
                    let e = agent.unwrap_err();
                    assert!(e.contains("OPENMAX_AGENT_SESSION"), "{e}");
                }
            }
        }
        assert!(Readonly.looseness() < Ask.looseness() && Ask.looseness() < Auto.looseness());
    }
}
