//! [`StopReason`]: why a turn ended, the `done` line's `stop_reason`.
//!
//! The contract names eight reasons; any other non-empty value is the provider's own finish
//! reason (`stop`, `end_turn`, `length`, …) passed through verbatim, a normal end. On the wire
//! and in session records a reason is a plain JSON string, so the type changes no byte.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StopReason {
    /// The reply was cut off (no completion signal, or past a client limit); an `error`
    /// precedes it.
    Truncated,
    /// The turn hit the tool-round ceiling (`max_iterations`).
    MaxIterations,
    /// The per-turn token cap refused the next request.
    BudgetExhausted,
    /// A blocking `turn_end` hook refused more times than honored, or its refusal could not be
    /// saved.
    Unverified,
    /// A `user_prompt_submit` hook refused the prompt.
    Blocked,
    /// `cancel` or shutdown stopped the turn.
    Cancelled,
    /// The turn failed; an `error` precedes it.
    Error,
    /// The command started no turn; a `protocol_error` directly precedes it.
    Refused,
    /// The provider's finish reason, verbatim (a normal end).
    Provider(String),
}

impl StopReason {
    /// Every reason the contract names, in the contract's order.
    pub const NAMED: [StopReason; 8] = [
        StopReason::Truncated,
        StopReason::MaxIterations,
        StopReason::BudgetExhausted,
        StopReason::Unverified,
        StopReason::Blocked,
        StopReason::Cancelled,
        StopReason::Error,
        StopReason::Refused,
    ];

    /// The wire spelling.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::Truncated => "truncated",
            StopReason::MaxIterations => "max_iterations",
            StopReason::BudgetExhausted => "budget_exhausted",
            StopReason::Unverified => "unverified",
            StopReason::Blocked => "blocked",
            StopReason::Cancelled => "cancelled",
            StopReason::Error => "error",
            StopReason::Refused => "refused",
            StopReason::Provider(s) => s,
        }
    }

    /// Read a wire spelling: a named reason, or else a provider's reason.
    pub fn parse(s: &str) -> StopReason {
        StopReason::NAMED
            .into_iter()
            .find(|r| r.as_str() == s)
            .unwrap_or_else(|| StopReason::Provider(s.to_string()))
    }

    /// The exit code of a `-p` run whose turn ended so: 0 for a normal end; 1 when the reply is
    /// missing or incomplete (`error`, `truncated`, `refused`, `blocked`, `cancelled`); 4 when
    /// a limit or a hook stopped the turn (`max_iterations`, `budget_exhausted`,
    /// `unverified`).
    pub fn print_exit_code(&self) -> i32 {
        match self {
            StopReason::Error
            | StopReason::Truncated
            | StopReason::Refused
            | StopReason::Blocked
            | StopReason::Cancelled => 1,
            StopReason::MaxIterations | StopReason::BudgetExhausted | StopReason::Unverified => 4,
            StopReason::Provider(_) => 0,
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for StopReason {
    fn from(s: &str) -> StopReason {
        StopReason::parse(s)
    }
}

impl Serialize for StopReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<StopReason, D::Error> {
        let s = String::deserialize(d)?;
        Ok(StopReason::parse(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_reasons_round_trip_and_others_pass_through() {
        for r in StopReason::NAMED {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert_eq!(serde_json::from_str::<StopReason>(&json).unwrap(), r);
        }
        let r: StopReason = serde_json::from_str("\"end_turn\"").unwrap();
        assert_eq!(r, StopReason::Provider("end_turn".into()));
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"end_turn\"");
        // An escaped string is read as its text.
        let r: StopReason = serde_json::from_str(r#""can\u0063elled""#).unwrap();
        assert_eq!(r, StopReason::Cancelled);
    }

    #[test]
    fn print_exit_codes() {
        assert_eq!(StopReason::parse("end_turn").print_exit_code(), 0);
        assert_eq!(StopReason::parse("length").print_exit_code(), 0);
        assert_eq!(StopReason::Error.print_exit_code(), 1);
        assert_eq!(StopReason::Unverified.print_exit_code(), 4);
        assert_eq!(StopReason::BudgetExhausted.print_exit_code(), 4);
    }
}
