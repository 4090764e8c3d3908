//! The wire itself: every stdout line passes the core's stream validator and the pairing
//! checker (the rules live in `openmax_core::validate`; see [`crate::oracle`]).

use crate::scenario::Scenario;
use crate::trace::Run;

/// Every stdout line passes the stream validator, and commands with events pass the pairing
/// checker.
pub fn stream_is_valid(_sc: &Scenario, run: &Run) -> Vec<String> {
    crate::oracle::validate(run)
}
