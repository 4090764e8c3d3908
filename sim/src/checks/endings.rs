//! How a turn ends: the three ending shapes (normal, stream error, truncated; a crash is an
//! error), and no tool call dispatched from a stream that never completed.

use openmax_core::machine::{Effect, Input};
use openmax_core::provider::ProviderItem;
use openmax_core::wire::Event;
use openmax_core::wire::StopReason;

use super::segment::{live_inputs, text_delivered, Turns};
use crate::scenario::Scenario;
use crate::trace::{FedInput, Run};

/// The three ending shapes: normal (`message_done` … `done`), stream error (`error`, `done`
/// with no `message_done` for the partial text), truncated (`message_done`, `error`, `done
/// truncated`); and a crash is `error` then `done error`.
pub fn three_ending_shapes(_sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let texted = text_delivered(run);
    let live = live_inputs(run);
    let mut v = Vec::new();
    for turn in &turns.turns {
        let types: Vec<&str> = turn.lines.iter().map(|(_, e)| e.type_name()).collect();
        // An error line is always the line before done (or before it, message_done).
        for (k, t) in types.iter().enumerate() {
            if *t == "error" && types.get(k + 1) != Some(&"done") {
                v.push(format!(
                    "turn at input #{}: an error line is not directly followed by done ({:?})",
                    turn.start,
                    &types[k..types.len().min(k + 3)]
                ));
            }
        }
        let Some((_, stop)) = &turn.done else {
            continue;
        };
        let n = types.len();
        let before = |k: usize| if n > k { types[n - 1 - k] } else { "" };
        match stop.as_str() {
            "truncated" if before(1) != "error" || before(2) != "message_done" => {
                v.push(format!(
                    "turn at input #{} ended truncated without message_done, error, done: {:?}",
                    turn.start,
                    &types[n.saturating_sub(3)..]
                ));
            }
            "error" if before(1) != "error" => {
                v.push(format!(
                    "turn at input #{} ended error without an error line before done",
                    turn.start
                ));
            }
            _ => {}
        }
        // A token run is closed by message_done unless the turn failed or was cancelled.
        let mut open_tokens = 0usize;
        for t in &types {
            match *t {
                "token" => open_tokens += 1,
                "message_done" => open_tokens = 0,
                _ => {}
            }
        }
        if open_tokens > 0 && !matches!(stop.as_str(), "error" | "cancelled") {
            v.push(format!(
                "turn at input #{} ended {stop} with {open_tokens} token lines never closed by message_done",
                turn.start
            ));
        }
        let normal = matches!(stop, StopReason::Provider(_));
        if normal && types.contains(&"error") {
            v.push(format!(
                "turn at input #{} ended normally ({stop}) but carried an error line",
                turn.start
            ));
        }
        // Script-linked: how the turn's stream endings must show on the wire.
        let end = turn.done.as_ref().map(|(i, _)| *i).unwrap_or(usize::MAX);
        for (i, fed) in run.trace.iter().enumerate() {
            if i < turn.start || i > end {
                continue;
            }
            let (request, attempt, ending) = match &fed.input {
                FedInput::Core(Input::Provider {
                    request,
                    attempt,
                    item:
                        item @ (ProviderItem::Failed { .. }
                        | ProviderItem::EndedWithoutCompletion { .. }),
                }) => (*request, *attempt, item),
                _ => continue,
            };
            if !live.contains(&i)
                || !turn.requests.contains(&request)
                || !texted.contains_key(&(request, attempt))
            {
                continue;
            }
            // Lines of this turn from this input on.
            let rest: Vec<&str> = turn
                .lines
                .iter()
                .filter(|(k, _)| *k >= i)
                .map(|(_, e)| e.type_name())
                .collect();
            let interrupted = run.trace[i..=end.min(run.trace.len() - 1)].iter().any(|f| {
                matches!(
                    f.input,
                    FedInput::Core(Input::Crashed { .. } | Input::PersistFailed { .. })
                )
            });
            if rest.is_empty() || interrupted {
                continue;
            }
            match ending {
                ProviderItem::Failed { .. } => {
                    if rest.contains(&"message_done") || *stop != StopReason::Error {
                        v.push(format!(
                            "a stream failing after reply text (input #{i}) must end error, done error with no message_done; got {rest:?}"
                        ));
                    }
                }
                _ => {
                    if *stop != StopReason::Truncated {
                        v.push(format!(
                            "a stream ending without completion after reply text (input #{i}) must end truncated; got {rest:?}"
                        ));
                    }
                }
            }
        }
    }
    // A crash of a running turn ends it error.
    for turn in &turns.turns {
        let Some((end, stop)) = &turn.done else {
            continue;
        };
        if let FedInput::Core(Input::Crashed { .. }) = run.trace[*end].input {
            if *stop != StopReason::Error {
                v.push(format!(
                    "a crash (input #{end}) ended the turn with done {stop}, not error"
                ));
            }
        }
    }
    v
}

/// No tool call of a stream that never delivered its completion signal is planned, run or
/// started.
pub fn no_dispatch_from_truncated_stream(_sc: &Scenario, run: &Run) -> Vec<String> {
    let mut v = Vec::new();
    let mut check = |what: &str, call_id: &str, i: usize| {
        if run.streamed_calls.contains(call_id) && !run.completed_calls.contains(call_id) {
            v.push(format!(
                "{what} for call {call_id} (input #{i}) whose stream never completed"
            ));
        }
    };
    for (i, e) in run.effects() {
        match e {
            Effect::PlanTool { call_id, .. } => check("PlanTool", call_id, i),
            Effect::RunTool { call_id, .. } => check("RunTool", call_id, i),
            _ => {}
        }
    }
    for (i, e) in run.events() {
        if let Event::ToolStart { call_id, .. } = e {
            check("tool_start", call_id, i);
        }
    }
    v
}
