//! The per-turn ceilings: the `max_agent_tokens` cap at admission, the eight `turn_end`
//! refusals honored before `unverified`, and the `max_iterations` tool rounds.

use std::collections::{BTreeMap, BTreeSet};

use openmax_core::machine::{Effect, HookEvent, HookOutcome, Input, Output};
use openmax_core::provider::{ProviderItem, RequestId};
use openmax_core::wire::Event;
use openmax_core::wire::StopReason;

use super::segment::{live_inputs, Turn, Turns};
use crate::scenario::Scenario;
use crate::trace::{FedInput, Run};

/// `turn_end` refusals the harness honors per turn (the contract's 8).
pub const HONORED_REFUSALS: u32 = 8;

/// The trace indices of a turn, its `done` included.
fn span(run: &Run, turn: &Turn) -> std::ops::Range<usize> {
    turn.start..turn.done.as_ref().map_or(run.trace.len(), |(d, _)| d + 1)
}

fn dones(outputs: &[Output]) -> impl Iterator<Item = &str> {
    outputs.iter().filter_map(|o| match o {
        Output::Event(Event::Done { stop_reason }) => Some(stop_reason.as_str()),
        _ => None,
    })
}

/// A new request is admitted only while the turn's counted tokens (each completed attempt's
/// reported prompt plus completion tokens) are under `max_agent_tokens`, and the turn ends
/// `budget_exhausted` only once they reached it. A turn with a completed attempt that reported
/// no usage is counted by the core's estimate, which this check does not redo: it stops
/// judging that turn there.
pub fn token_cap_refuses_at_admission(sc: &Scenario, run: &Run) -> Vec<String> {
    let cap = sc.config.limits.max_agent_tokens;
    let mut v = Vec::new();
    if cap == 0 {
        return v;
    }
    let live = live_inputs(run);
    for turn in Turns::of(run).turns {
        let mut usage: BTreeMap<(RequestId, u32), u64> = BTreeMap::new();
        let mut counted = 0u64;
        let mut known = true;
        for i in span(run, &turn) {
            let fed = &run.trace[i];
            if let FedInput::Core(Input::Provider {
                request,
                attempt,
                item,
            }) = &fed.input
            {
                if live.contains(&i) {
                    match item {
                        ProviderItem::Usage {
                            prompt_tokens,
                            completion_tokens,
                            ..
                        } => {
                            usage.insert(
                                (*request, *attempt),
                                prompt_tokens.saturating_add(*completion_tokens),
                            );
                        }
                        ProviderItem::Completed { .. } => match usage.get(&(*request, *attempt)) {
                            Some(n) => counted = counted.saturating_add(*n),
                            None => known = false,
                        },
                        _ => {}
                    }
                }
            }
            if !known {
                break;
            }
            for o in &fed.outputs {
                match o {
                    Output::Effect(Effect::SendRequest {
                        request,
                        attempt: 1,
                        ..
                    }) if counted >= cap => v.push(format!(
                        "request {request} admitted at input #{i} with {counted} tokens counted in the turn, at or over max_agent_tokens {cap}"
                    )),
                    Output::Event(Event::Done { stop_reason })
                        if *stop_reason == StopReason::BudgetExhausted && counted < cap =>
                    {
                        v.push(format!(
                            "the turn ended budget_exhausted at input #{i} with {counted} tokens counted, under max_agent_tokens {cap}"
                        ))
                    }
                    _ => {}
                }
            }
        }
    }
    v
}

/// Whether hook `name` of `event` is blocking in any freeze the scenario offers.
fn blocking(sc: &Scenario, name: &str, event: HookEvent) -> bool {
    sc.config
        .hooks
        .iter()
        .chain(sc.refreezes.iter().flat_map(|f| f.hooks.iter()))
        .any(|h| h.name == name && h.event == event && h.blocking)
}

/// At most 8 `turn_refused` per turn, the k-th (from 0) with `continuation` k and
/// `continuations_left` 8−k, the same numbers the `turn_end` hook's payload carried; the 9th
/// refusal ends the turn `unverified` in its own drain, and `unverified` has no other cause
/// than that or a refusal whose record could not be written.
pub fn turn_end_refusals_bounded(sc: &Scenario, run: &Run) -> Vec<String> {
    let mut v = Vec::new();
    let mut runs: BTreeSet<u64> = BTreeSet::new();
    for turn in Turns::of(run).turns {
        let mut refusals = 0u32;
        let mut refused_lines = 0u32;
        for i in span(run, &turn) {
            let fed = &run.trace[i];
            let refusal = matches!(&fed.input,
                FedInput::Core(Input::HookDone { hook_run, outcome: HookOutcome::Refuse { .. } })
                    if runs.contains(hook_run) && !fed.outputs.is_empty());
            if refusal {
                refusals += 1;
                let unverified = dones(&fed.outputs).any(|s| s == "unverified");
                if refusals == HONORED_REFUSALS + 1 && !unverified {
                    v.push(format!(
                        "the 9th turn_end refusal of the turn (input #{i}) did not end it unverified"
                    ));
                }
                if refusals <= HONORED_REFUSALS && unverified {
                    v.push(format!(
                        "turn_end refusal {refusals} (input #{i}) ended the turn unverified; 8 are honored"
                    ));
                }
            } else if dones(&fed.outputs).any(|s| s == "unverified")
                && !matches!(fed.input, FedInput::Core(Input::PersistFailed { .. }))
            {
                v.push(format!(
                    "the turn ended unverified at input #{i}, neither on a 9th refusal nor on a refusal that could not be written"
                ));
            }
            for o in &fed.outputs {
                match o {
                    Output::Effect(Effect::RunHook {
                        hook_run,
                        hook,
                        event: HookEvent::TurnEnd,
                        payload,
                    }) => {
                        if blocking(sc, hook, HookEvent::TurnEnd) {
                            runs.insert(*hook_run);
                        }
                        let k = u64::from(refused_lines);
                        let want = (k, u64::from(HONORED_REFUSALS).saturating_sub(k));
                        let got = (
                            payload["continuation"].as_u64(),
                            payload["continuations_left"].as_u64(),
                        );
                        if got != (Some(want.0), Some(want.1)) {
                            v.push(format!(
                                "turn_end hook {hook} at input #{i} got continuation/left {got:?} after {k} refusals, expected {want:?}"
                            ));
                        }
                    }
                    Output::Event(Event::TurnRefused {
                        continuation,
                        continuations_left,
                        ..
                    }) => {
                        let k = refused_lines;
                        if (*continuation, *continuations_left)
                            != (k, HONORED_REFUSALS.saturating_sub(k))
                        {
                            v.push(format!(
                                "turn_refused #{k} of the turn (input #{i}) says continuation {continuation}, continuations_left {continuations_left}; expected {k} and {}",
                                HONORED_REFUSALS.saturating_sub(k)
                            ));
                        }
                        refused_lines += 1;
                        if refused_lines > HONORED_REFUSALS {
                            v.push(format!(
                                "{refused_lines} turn_refused lines in one turn (input #{i}); at most 8 are honored"
                            ));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    v
}

/// A turn runs at most `max_iterations` tool rounds (replies whose calls were started), and
/// ends `max_iterations` only after exactly that many.
pub fn tool_rounds_bounded(sc: &Scenario, run: &Run) -> Vec<String> {
    let max = u64::from(sc.config.limits.max_iterations);
    let mut v = Vec::new();
    for turn in Turns::of(run).turns {
        let mut latest: Option<RequestId> = None;
        let mut rounds: BTreeSet<RequestId> = BTreeSet::new();
        for i in span(run, &turn) {
            for o in &run.trace[i].outputs {
                match o {
                    Output::Effect(Effect::SendRequest { request, .. }) => latest = Some(*request),
                    Output::Event(Event::ToolStart { call_id, .. }) => {
                        if let Some(r) = latest {
                            if rounds.insert(r) && rounds.len() as u64 > max {
                                v.push(format!(
                                    "tool round {} of the turn starts at input #{i} ({call_id}); max_iterations is {max}",
                                    rounds.len()
                                ));
                            }
                        }
                    }
                    Output::Event(Event::Done { stop_reason })
                        if *stop_reason == StopReason::MaxIterations && rounds.len() as u64 != max =>
                    {
                        v.push(format!(
                            "the turn ended max_iterations at input #{i} after {} tool rounds; max_iterations is {max}",
                            rounds.len()
                        ))
                    }
                    _ => {}
                }
            }
        }
    }
    v
}
