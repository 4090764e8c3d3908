//! The turn guarantees as named checks over one [`Run`]: each returns the violations it found
//! (empty when the guarantee holds). The quickcheck properties, the golden-scenario test and
//! `openmax-sim run`/`explore` all use these same functions.
//!
//! Checks read the run's trace: every input fed, with the outputs drained right after it, so an
//! event is attributed to the input that caused it. [`Turns`] segments the trace into admitted
//! turns (from the admitting `user` to its `done`), refused users and users refused in flight.
//!
//! One file per family of guarantees: [`wire`] (validator and pairing), [`done`] (one `done`
//! per `user`, no turn left running after it), [`endings`] (the ending shapes), [`retries`],
//! [`approvals`], [`tool_hooks`] (blocking `tool_start` hooks), [`tasks`] (task calls side
//! by side), [`forwarded`] (a subagent's approvals carried up), [`checkpoints`] (undo's checkpoint before a turn's first write), [`kept`]
//! (what the conversation keeps), [`acks`] (receipts after their
//! persistence ack), [`limits`] (token cap, refusals, tool rounds), [`shutdown`],
//! [`liveness`] and [`expect`] (a scenario's own assertions); [`segment`] holds the trace
//! segmentation they share. This file lists them all and runs them.
//!
//! Invariant: a check never panics on any run; a malformed run is a violation, not a crash.

mod acks;
mod approvals;
mod checkpoints;
mod done;
mod endings;
mod expect;
mod forwarded;
mod kept;
mod limits;
mod liveness;
mod retries;
mod segment;
mod shutdown;
mod tasks;
mod tool_hooks;
mod wire;

pub use acks::receipts_follow_their_persist_ack;
pub use approvals::{
    approved_only_by_its_approve, every_approval_settles_once,
    unsandboxed_only_after_a_human_approved_it,
};
pub use checkpoints::checkpoint_before_first_write;
pub use done::{
    done_is_the_turns_last_line, exactly_one_done_per_admitted_user,
    no_done_for_user_refused_in_flight, no_turn_in_flight_after_done,
};
pub use endings::{no_dispatch_from_truncated_stream, three_ending_shapes};
pub use expect::scenario_expectations;
pub use forwarded::forwarded_approvals_settle_once_and_a_cancel_settles_them;
pub use kept::{only_message_done_text_is_kept, voided_thinking_never_kept};
pub(crate) use limits::blocking;
pub use limits::{token_cap_refuses_at_admission, tool_rounds_bounded, turn_end_refusals_bounded};
pub use liveness::{liveness_after_faults, machine_goes_quiet};
pub use retries::{
    retries_bounded_and_never_after_reply_text, retry_after_up_to_a_minute_waits,
    three_unreachable_gives_up,
};
pub use segment::{live_inputs, Turn, Turns};
pub use shutdown::quit_drains;
pub use tasks::concurrent_calls_end_once_and_cancel_ends_them_all;
pub use tool_hooks::no_call_runs_unless_its_blocking_hooks_passed;
pub use wire::stream_is_valid;

use crate::scenario::Scenario;
use crate::trace::Run;

/// One broken guarantee.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The property's name.
    pub property: &'static str,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.property, self.message)
    }
}

/// A named guarantee check.
pub type Check = fn(&Scenario, &Run) -> Vec<String>;

/// Every named guarantee, family by family. `stream_is_valid` (validator and pairing
/// checker) is first.
pub const PROPERTIES: &[(&str, Check)] = &[
    ("stream_is_valid", stream_is_valid),
    (
        "exactly_one_done_per_admitted_user",
        exactly_one_done_per_admitted_user,
    ),
    ("done_is_the_turns_last_line", done_is_the_turns_last_line),
    (
        "no_done_for_user_refused_in_flight",
        no_done_for_user_refused_in_flight,
    ),
    ("three_ending_shapes", three_ending_shapes),
    (
        "no_dispatch_from_truncated_stream",
        no_dispatch_from_truncated_stream,
    ),
    (
        "retries_bounded_and_never_after_reply_text",
        retries_bounded_and_never_after_reply_text,
    ),
    ("three_unreachable_gives_up", three_unreachable_gives_up),
    ("every_approval_settles_once", every_approval_settles_once),
    ("approved_only_by_its_approve", approved_only_by_its_approve),
    (
        "unsandboxed_only_after_a_human_approved_it",
        unsandboxed_only_after_a_human_approved_it,
    ),
    (
        "no_call_runs_unless_its_blocking_hooks_passed",
        no_call_runs_unless_its_blocking_hooks_passed,
    ),
    (
        "concurrent_calls_end_once_and_cancel_ends_them_all",
        concurrent_calls_end_once_and_cancel_ends_them_all,
    ),
    (
        "forwarded_approvals_settle_once_and_a_cancel_settles_them",
        forwarded_approvals_settle_once_and_a_cancel_settles_them,
    ),
    (
        "only_message_done_text_is_kept",
        only_message_done_text_is_kept,
    ),
    ("voided_thinking_never_kept", voided_thinking_never_kept),
    (
        "receipts_follow_their_persist_ack",
        receipts_follow_their_persist_ack,
    ),
    (
        "token_cap_refuses_at_admission",
        token_cap_refuses_at_admission,
    ),
    (
        "retry_after_up_to_a_minute_waits",
        retry_after_up_to_a_minute_waits,
    ),
    ("turn_end_refusals_bounded", turn_end_refusals_bounded),
    ("tool_rounds_bounded", tool_rounds_bounded),
    ("no_turn_in_flight_after_done", no_turn_in_flight_after_done),
    ("quit_drains", quit_drains),
    (
        "checkpoint_before_first_write",
        checkpoint_before_first_write,
    ),
    ("machine_goes_quiet", machine_goes_quiet),
    ("scenario_expectations", scenario_expectations),
];

/// Run every check; all violations, each tagged with its property.
pub fn check_all(sc: &Scenario, run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    for (name, check) in PROPERTIES {
        for message in check(sc, run) {
            out.push(Violation {
                property: name,
                message,
            });
        }
    }
    out
}

/// Run one named check.
pub fn check_named(name: &str, sc: &Scenario, run: &Run) -> Vec<String> {
    PROPERTIES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| c(sc, run))
        .unwrap_or_else(|| vec![format!("no property named {name}")])
}
