//! Turn and `done`: every `user` is answered by exactly one `done` (or, in flight, a
//! `protocol_error` alone), and nothing of a turn follows its `done`.

use openmax_core::machine::{Input, Output};
use openmax_core::wire::Event;

use super::segment::{waiting_on_client, Turns};
use crate::scenario::Scenario;
use crate::trace::{FedInput, Run};

/// Every admitted `user` gets exactly one `done`; every refused `user` exactly one.
pub fn exactly_one_done_per_admitted_user(_sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let mut v = Vec::new();
    for turn in &turns.turns {
        if turn.done.is_none() && !(waiting_on_client(run, &turns) && run.went_quiet) {
            v.push(format!(
                "the user admitted at input #{} never got a done",
                turn.start
            ));
        }
    }
    for &i in &turns.refused {
        let dones = run.trace[i]
            .outputs
            .iter()
            .filter(|o| matches!(o, Output::Event(Event::Done { .. })))
            .count();
        if dones != 1 {
            v.push(format!(
                "the refused user at input #{i} got {dones} done lines"
            ));
        }
        // Session-start lines (freeze notes, a hook that is not loaded) may come first.
        let first = run.trace[i].outputs.iter().find_map(|o| match o {
            Output::Event(Event::HookFailed { .. }) => None,
            Output::Event(Event::HarnessNote { call_id, .. }) if call_id.is_empty() => None,
            Output::Event(e) => Some(e),
            Output::Effect(_) => None,
        });
        if !matches!(first, Some(Event::ProtocolError { .. })) {
            v.push(format!(
                "the refused user at input #{i} did not get a protocol_error before its done"
            ));
        }
    }
    for (i, e) in &turns.outside {
        if let Event::Done { stop_reason } = e {
            if !turns.refused.contains(i) {
                v.push(format!(
                    "a done ({stop_reason}) at input #{i} answers no admitted or refused user"
                ));
            }
        }
    }
    // A user whose text is empty, or any user in an untrusted project, is refused.
    v
}

/// Nothing of a turn comes after its `done`: between turns only session-level lines appear.
pub fn done_is_the_turns_last_line(_sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let mut v = Vec::new();
    // A compaction the person asked for (`Input::Compact`) is answered between turns by one
    // `compacted` (or a `protocol_error`), never by more than were asked for.
    let asked_before = |i: usize| {
        run.trace[..=i]
            .iter()
            .filter(|f| matches!(f.input, FedInput::Core(Input::Compact)))
            .count()
    };
    let mut receipts = 0;
    for (i, e) in &turns.outside {
        let ok = match e {
            Event::ProtocolError { .. }
            | Event::ApprovalMode { .. }
            | Event::Refrozen { .. }
            | Event::HookFailed { .. } => true,
            Event::Compacted { .. } => {
                receipts += 1;
                receipts <= asked_before(*i)
            }
            // A session-level note (refreeze receipt, mode notice) rides no tool result.
            Event::HarnessNote { call_id, .. } => call_id.is_empty(),
            Event::Done { .. } => turns.refused.contains(i),
            _ => false,
        };
        if !ok {
            v.push(format!(
                "a {} line at input #{i} is outside any turn (after the last done)",
                e.type_name()
            ));
        }
    }
    v
}

/// A `user` sent while a turn is in flight gets a `protocol_error` alone.
pub fn no_done_for_user_refused_in_flight(_sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let mut v = Vec::new();
    for &i in &turns.in_flight {
        let events: Vec<&str> = run.trace[i]
            .outputs
            .iter()
            .filter_map(|o| match o {
                Output::Event(e) => Some(e.type_name()),
                Output::Effect(_) => None,
            })
            .collect();
        if events != ["protocol_error"] {
            v.push(format!(
                "a user sent while a turn was in flight (input #{i}) got {events:?}, not a protocol_error alone"
            ));
        }
    }
    v
}

/// After every `done` the core reports no turn in flight (the driver asks it after each
/// drain), so a `user` sent right after `done` is admitted.
pub fn no_turn_in_flight_after_done(_sc: &Scenario, run: &Run) -> Vec<String> {
    run.in_turn_after_done
        .iter()
        .map(|i| format!("after the done at input #{i} the core still reports a turn in flight"))
        .collect()
}
