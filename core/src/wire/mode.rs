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
}
