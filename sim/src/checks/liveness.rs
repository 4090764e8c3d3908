//! Liveness: the machine goes quiet (no step cap, no timer that never moves), and after the
//! faults stop a fresh `user` completes normally.

use openmax_core::machine::TimerReason;
use openmax_core::wire::Event;

use super::segment::{user_text, Turns};
use crate::scenario::Scenario;
use crate::trace::{FedInput, Run};

/// The machine goes quiet: the driver hit neither its step cap nor a timer that fires without
/// moving; a run that got quit/EOF ends by exiting with no timer left armed.
pub fn machine_goes_quiet(_sc: &Scenario, run: &Run) -> Vec<String> {
    let mut v = run.violations.clone();
    let mut last: Option<(u64, TimerReason)> = None;
    let mut same_instant = 0u32;
    for fed in &run.trace {
        if let FedInput::Timer { deadline, reason } = fed.input {
            if last.is_some_and(|(t, _)| deadline.0 < t) {
                v.push(format!(
                    "timer {reason:?} at {} fired after a later one at {}",
                    deadline.0,
                    last.map_or(0, |l| l.0)
                ));
            }
            if last.is_some_and(|(t, _)| t == deadline.0) {
                same_instant += 1;
            } else {
                same_instant = 0;
            }
            if same_instant > 8 {
                v.push(format!("timers keep firing at {} (busy loop)", deadline.0));
                break;
            }
            last = Some((deadline.0, reason));
        } else {
            last = None;
        }
    }
    v
}

/// Liveness, for a [`crate::gen::LiveScenario`]: after the faults stop (`heal`) and the client
/// cancels, the next `user` is admitted and completes normally: the default reply's
/// `message_done`, then `done` with the provider's finish reason.
pub fn liveness_after_faults(sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let Some(last_user) = run
        .trace
        .iter()
        .rposition(|f| user_text(&f.input).as_deref() == Some(crate::gen::LIVENESS_PROMPT))
    else {
        return vec!["the final user was never fed".into()];
    };
    let Some(turn) = turns.turns.iter().find(|t| t.start == last_user) else {
        return vec![format!(
            "the user after the faults stopped (input #{last_user}) was not admitted"
        )];
    };
    let want = sc.config.flavor.default_finish(false);
    let mut v = Vec::new();
    match &turn.done {
        Some((_, stop)) if stop.as_str() == want => {}
        Some((_, stop)) => v.push(format!(
            "the user after the faults stopped ended {stop}, not {want}"
        )),
        None => v.push("the user after the faults stopped never got a done".into()),
    }
    if !turn
        .lines
        .iter()
        .any(|(_, e)| matches!(e, Event::MessageDone { text } if text == "ok"))
    {
        v.push("the user after the faults stopped got no message_done \"ok\"".into());
    }
    v
}
