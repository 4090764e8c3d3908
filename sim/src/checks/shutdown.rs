//! Shutdown: after `quit` or end of input the in-flight turn drains, nothing new starts, and
//! the session exits with the contract's code.

use openmax_core::machine::{Effect, Output};
use openmax_core::wire::StopReason;

use super::segment::Turns;
use crate::scenario::Scenario;
use crate::trace::Run;

/// After `quit` or end of input (or a non-interactive session's first `done`): the in-flight
/// turn drains to its `done`, no new turn starts, then the `Exit` effect is the last output,
/// with code 1 exactly when the last turn ended `error`; a non-interactive session's code is
/// its turn's one-shot code (0 normal, 1 missing or incomplete reply, 4 a limit or a hook),
/// or 1 when its command was refused.
pub fn quit_drains(_sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let mut v = Vec::new();
    let Some(q) = turns.quit_at else {
        if let Some(code) = run.exit_code {
            v.push(format!("exit {code} with no quit or end of input"));
        }
        return v;
    };
    let Some(code) = run.exit_code else {
        v.push(format!(
            "quit/EOF at input #{q} but the session never exited"
        ));
        return v;
    };
    for turn in &turns.turns {
        if turn.start > q {
            v.push(format!(
                "a turn was admitted at input #{} after quit/EOF at input #{q}",
                turn.start
            ));
        }
        if turn.done.is_none() {
            v.push(format!(
                "exited with the turn admitted at input #{} never done",
                turn.start
            ));
        }
    }
    if let Some(last) = run.trace.last() {
        if !matches!(
            last.outputs.last(),
            Some(Output::Effect(Effect::Exit { .. }))
        ) {
            v.push("the Exit effect is not the session's last output".into());
        }
    }
    // "1 when the last turn ended with stop_reason error": a refused user starts no turn.
    let last_stop = turns
        .turns
        .iter()
        .filter_map(|t| t.done.as_ref())
        .next_back()
        .map(|(_, s)| s);
    let want = match (run.non_interactive, last_stop) {
        (true, Some(stop)) => stop.print_exit_code(),
        (true, None) => 1,
        (false, Some(StopReason::Error)) => 1,
        (false, Some(_) | None) => 0,
    };
    if code != want {
        v.push(format!(
            "exit code {code}, expected {want} (last turn ended {:?})",
            last_stop.map(StopReason::as_str)
        ));
    }
    v
}
