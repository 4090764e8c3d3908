//! Calls side by side: the runs of consecutive `task` calls of one reply overlap (at most
//! `[tasks] max_parallel` at once, and nothing else beside them); each run ends with exactly
//! one `tool_end` carrying its own answer, in whatever order the driver answers; a cancel
//! cancels every run out, and the turn then ends `cancelled` once each of them ended.

use std::collections::{BTreeMap, BTreeSet};

use openmax_core::conversation::{Block, Role};
use openmax_core::machine::{Effect, HookEvent, Input, Output, TimerReason};
use openmax_core::record::Record;
use openmax_core::tool::TASK_TOOL;
use openmax_core::wire::{Command, Event, StopReason};

use super::segment::Turns;
use crate::scenario::Scenario;
use crate::trace::{Fed, FedInput, Run};

/// A call of the turn whose `RunTool` went out.
struct Out {
    name: String,
    /// Its answer (`ToolDone`: ok, output), once fed.
    answer: Option<(bool, String)>,
    /// A `CancelTool` went out for it before its answer.
    cancelled: bool,
    /// Its `tool_end`s so far.
    ends: u32,
}

impl Out {
    /// Its run is out and not answered or cancelled yet.
    fn running(&self) -> bool {
        self.ends == 0 && self.answer.is_none() && !self.cancelled
    }
}

/// Every call whose `RunTool` went out gets exactly one `tool_end` before its turn's `done`,
/// and that `tool_end` is its own answer's (`ok` and `output` as the driver answered, in
/// whatever order it answered the runs out), or says it was cancelled (`cancelled: …`, when
/// its `CancelTool` went out before its answer) or that the turn failed (`the turn failed:
/// …`). Runs overlap only as the core's rule says: at most `max_parallel` at once, and more
/// than one only when all of them are `task` calls; and when a `task` call's `RunTool` goes out
/// with room for another run, the next call of its reply, when it is a `task` call not started
/// yet, starts (`tool_start`, or its blocking `tool_start` hook) in the same drain, without
/// waiting for the run. A `cancel` the core handles (in its own drain, or in the drain of the
/// answer it was held behind) and the drain deadline's timeout cancel every run still running
/// (a `CancelTool` each, in that drain), and that turn's `done` is then `cancelled` (or `error`
/// when an `error` came after the cancel).
pub fn concurrent_calls_end_once_and_cancel_ends_them_all(sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let max = sc.config.max_parallel.max(1) as usize;
    let mut v = Vec::new();
    // The calls of the last reply with calls, in order: (id, tool).
    let mut round: Vec<(String, String)> = Vec::new();
    let mut started: BTreeSet<String> = BTreeSet::new();
    let mut runs: BTreeMap<String, Out> = BTreeMap::new();
    // Answers awaited that hold client input back (mode saves, refreezes, approval records),
    // and a cancel held behind them.
    let mut awaiting = 0u32;
    let mut held_cancel = false;
    // The trace index of a cancel that found runs running, and whether an `error` came since.
    let mut cancelled_at: Option<usize> = None;
    let mut error_since = false;
    for (i, fed) in run.trace.iter().enumerate() {
        let after_quit = turns.quit_at.is_some_and(|q| i > q);
        let mut cancel = false;
        match &fed.input {
            FedInput::Core(Input::ToolDone { call_id, outcome }) => {
                if let Some(o) = runs.get_mut(call_id).filter(|o| o.ends == 0) {
                    o.answer.get_or_insert((outcome.ok, outcome.output.clone()));
                }
            }
            FedInput::Core(Input::Line(l)) if !after_quit => {
                if matches!(Command::parse_line(l), Ok(Some(Command::Cancel))) {
                    if awaiting > 0 {
                        held_cancel = true;
                    } else {
                        cancel = true;
                    }
                }
            }
            FedInput::Core(
                Input::ModeSaved { .. }
                | Input::ModeSaveFailed { .. }
                | Input::Frozen { .. }
                | Input::SourceApproved { .. }
                | Input::SourceApprovalFailed { .. },
            ) => {
                awaiting = awaiting.saturating_sub(1);
                if awaiting == 0 && held_cancel {
                    held_cancel = false;
                    cancel = true;
                }
            }
            FedInput::Timer {
                reason: TimerReason::ShutdownDrain,
                ..
            } => cancel = true,
            FedInput::Core(_) | FedInput::Timer { .. } => {}
        }
        if cancel {
            let running: Vec<String> = runs
                .iter()
                .filter(|(_, o)| o.running())
                .map(|(id, _)| id.clone())
                .collect();
            let cancels = cancel_tools(fed);
            for id in &running {
                if !cancels.contains(id) {
                    v.push(format!(
                        "step {i}: a cancel left call {id}'s run running (no CancelTool for it)"
                    ));
                }
            }
            if !running.is_empty() && cancelled_at.is_none() {
                cancelled_at = Some(i);
                error_since = false;
            }
        }
        // Calls that must start in this drain: (the call that ran, the next one).
        let mut due: Vec<(String, String)> = Vec::new();
        for o in &fed.outputs {
            match o {
                Output::Effect(Effect::Persist { records, .. }) => {
                    if let Some(calls) = records.iter().rev().find_map(reply_calls) {
                        round = calls;
                    }
                }
                Output::Effect(Effect::RunHook {
                    event: HookEvent::ToolStart,
                    payload,
                    ..
                }) => {
                    if let Some(id) = payload["call_id"].as_str() {
                        started.insert(id.to_string());
                    }
                }
                Output::Effect(Effect::SaveMode { .. })
                | Output::Effect(Effect::Refreeze)
                | Output::Effect(Effect::ApproveSource { .. }) => awaiting += 1,
                Output::Effect(Effect::RunTool { call_id, name, .. }) => {
                    if runs.contains_key(call_id) {
                        v.push(format!("step {i}: call {call_id} ran twice in one turn"));
                        continue;
                    }
                    let out: Vec<&String> = runs
                        .iter()
                        .filter(|(_, o)| o.ends == 0)
                        .map(|(_, o)| &o.name)
                        .collect();
                    if out.len() + 1 > max {
                        v.push(format!(
                            "step {i}: call {call_id} ({name}) ran while {} runs were out \
                             ([tasks] max_parallel is {max})",
                            out.len()
                        ));
                    }
                    if !out.is_empty() && (name != TASK_TOOL || out.iter().any(|n| *n != TASK_TOOL))
                    {
                        v.push(format!(
                            "step {i}: call {call_id} ({name}) ran beside {out:?}: only task \
                             calls run side by side"
                        ));
                    }
                    if name == TASK_TOOL && out.len() + 1 < max {
                        let next = round
                            .iter()
                            .position(|(id, _)| id == call_id)
                            .and_then(|k| round.get(k + 1));
                        if let Some((next, tool)) = next {
                            if tool == TASK_TOOL && !started.contains(next) {
                                due.push((call_id.clone(), next.clone()));
                            }
                        }
                    }
                    runs.insert(
                        call_id.clone(),
                        Out {
                            name: name.clone(),
                            answer: None,
                            cancelled: false,
                            ends: 0,
                        },
                    );
                }
                Output::Effect(Effect::CancelTool { call_id }) => {
                    if let Some(o) = runs.get_mut(call_id).filter(|o| o.answer.is_none()) {
                        o.cancelled = true;
                    }
                }
                Output::Event(Event::ToolStart { call_id, .. }) => {
                    started.insert(call_id.clone());
                }
                Output::Event(Event::ToolEnd {
                    call_id,
                    ok,
                    output,
                }) => {
                    let Some(o) = runs.get_mut(call_id) else {
                        continue;
                    };
                    o.ends += 1;
                    if o.ends > 1 {
                        v.push(format!("step {i}: call {call_id}'s run ended twice"));
                        continue;
                    }
                    let failed = !ok && output.starts_with("the turn failed:");
                    let fits = match &o.answer {
                        _ if failed => true,
                        Some(_) if o.cancelled => !ok && output.starts_with("cancelled:"),
                        Some((a_ok, a_out)) => ok == a_ok && output == a_out,
                        None => false,
                    };
                    if !fits {
                        v.push(format!(
                            "step {i}: call {call_id}'s tool_end (ok {ok}, {output:?}) is not its \
                             own answer ({:?}{})",
                            o.answer,
                            if o.cancelled { ", cancelled" } else { "" }
                        ));
                    }
                }
                Output::Event(Event::Error { .. }) => error_since = true,
                Output::Event(Event::Done { stop_reason }) => {
                    for (id, o) in &runs {
                        if o.ends == 0 {
                            v.push(format!(
                                "step {i}: the turn ended {stop_reason} with call {id}'s run \
                                 never ended"
                            ));
                        }
                    }
                    if let Some(at) = cancelled_at {
                        let fine = *stop_reason == StopReason::Cancelled
                            || (*stop_reason == StopReason::Error && error_since);
                        if !fine {
                            v.push(format!(
                                "step {i}: the turn whose runs a cancel ended (step {at}) ended \
                                 {stop_reason}, not cancelled"
                            ));
                        }
                    }
                    runs.clear();
                    started.clear();
                    round.clear();
                    cancelled_at = None;
                }
                Output::Event(_) | Output::Effect(_) => {}
            }
        }
        for (ran, next) in due {
            if !started.contains(&next) {
                v.push(format!(
                    "step {i}: task call {ran} ran with room for another run, but the next \
                     task call {next} did not start beside it"
                ));
            }
        }
    }
    v
}

/// The calls of a reply's record, in order: (id, tool); `None` for any other record.
fn reply_calls(r: &Record) -> Option<Vec<(String, String)>> {
    let Record::Message { message } = r else {
        return None;
    };
    if message.role != Role::Assistant {
        return None;
    }
    let calls: Vec<(String, String)> = message
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, name, .. } => Some((id.clone(), name.clone())),
            _ => None,
        })
        .collect();
    (!calls.is_empty()).then_some(calls)
}

/// The ids of the `CancelTool` effects of one drain.
fn cancel_tools(fed: &Fed) -> BTreeSet<String> {
    fed.outputs
        .iter()
        .filter_map(|o| match o {
            Output::Effect(Effect::CancelTool { call_id }) => Some(call_id.clone()),
            _ => None,
        })
        .collect()
}
