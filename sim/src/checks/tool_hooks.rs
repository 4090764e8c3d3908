//! Blocking `tool_start` hooks: no call a blocking hook refused, failed on or has not answered
//! ever runs, and a call a hook rewrote runs with the rewritten arguments.

use std::collections::BTreeMap;

use openmax_core::machine::{Effect, HookEvent, HookOutcome, HookSpec, Input, Output};
use openmax_core::wire::Event;

use crate::scenario::Scenario;
use crate::trace::{FedInput, Run};

/// The blocking `tool_start` hooks of a frozen hook list.
fn guards_of(hooks: &[HookSpec]) -> Vec<HookSpec> {
    hooks
        .iter()
        .filter(|h| h.event == HookEvent::ToolStart && h.blocking)
        .cloned()
        .collect()
}

/// Whether the frozen guard `h` may run at all (the hook gate: a project hook no human
/// approved, or whose file could not be read, is never run).
fn runnable(h: &HookSpec) -> bool {
    h.source
        .as_ref()
        .is_none_or(|s| s.approved && s.unreadable.is_none())
}

/// Every `RunTool` of a call goes out only when each blocking `tool_start` hook whose `match`
/// covers the call's tool was run for that call and answered pass or rewrite before it (a hook
/// that refused, failed, timed out, cannot run, or has not answered yet keeps the call from
/// running), and, when any of them rewrote the arguments, with the last rewrite's arguments.
/// The hooks of a call are those run for its id since that id's last `tool_end` (or the last
/// `done`); the hooks in force are the config's until a `refrozen` applies the snapshot the
/// last `Frozen` answer carried.
pub fn no_call_runs_unless_its_blocking_hooks_passed(sc: &Scenario, run: &Run) -> Vec<String> {
    let mut guards = guards_of(&sc.config.hooks);
    let mut snapshot: Option<Vec<HookSpec>> = None;
    let mut v = Vec::new();
    // call id -> the blocking runs started for it: (hook name, run id).
    let mut started: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
    // run id -> its answer, once fed.
    let mut answers: BTreeMap<u64, HookOutcome> = BTreeMap::new();
    for (i, fed) in run.trace.iter().enumerate() {
        match &fed.input {
            FedInput::Core(Input::HookDone { hook_run, outcome }) => {
                answers.insert(*hook_run, outcome.clone());
            }
            FedInput::Core(Input::Frozen { snapshot: s }) => snapshot = Some(guards_of(&s.hooks)),
            FedInput::Core(_) | FedInput::Timer { .. } => {}
        }
        for o in &fed.outputs {
            match o {
                Output::Effect(Effect::RunHook {
                    hook_run,
                    hook,
                    event: HookEvent::ToolStart,
                    payload,
                }) if guards.iter().any(|g| g.name == *hook) => {
                    let call = payload["call_id"].as_str().unwrap_or_default().to_string();
                    started
                        .entry(call)
                        .or_default()
                        .push((hook.clone(), *hook_run));
                }
                Output::Effect(Effect::RunTool {
                    call_id,
                    name,
                    args,
                    ..
                }) => {
                    let runs = started.get(call_id).cloned().unwrap_or_default();
                    let mut rewritten = None;
                    for (hook, run_id) in &runs {
                        match answers.get(run_id) {
                            Some(HookOutcome::Pass) => {}
                            Some(HookOutcome::Rewrite { args }) => rewritten = Some(args.clone()),
                            Some(other) => v.push(format!(
                                "step {i}: call {call_id} ({name}) ran although the blocking \
                                 tool_start hook {hook} answered {other:?}"
                            )),
                            None => v.push(format!(
                                "step {i}: call {call_id} ({name}) ran before the blocking \
                                 tool_start hook {hook} (run {run_id}) answered"
                            )),
                        }
                    }
                    for g in guards.iter().filter(|g| g.applies_to(Some(name))) {
                        if !runs.iter().any(|(h, _)| *h == g.name) {
                            let why = if runnable(g) {
                                "without it having run for the call"
                            } else {
                                "although that hook cannot run (no human approved it)"
                            };
                            v.push(format!(
                                "step {i}: call {call_id} ({name}) ran under the blocking \
                                 tool_start hook {} {why}",
                                g.name
                            ));
                        }
                    }
                    if let Some(want) = rewritten {
                        if *args != want {
                            v.push(format!(
                                "step {i}: call {call_id} ({name}) ran with {args}, not with \
                                 the arguments its hook rewrote it to ({want})"
                            ));
                        }
                    }
                }
                Output::Event(Event::ToolEnd { call_id, .. }) => {
                    started.remove(call_id);
                }
                Output::Event(Event::Done { .. }) => started.clear(),
                Output::Event(Event::Refrozen { .. }) => {
                    if let Some(g) = snapshot.take() {
                        guards = g;
                    }
                }
                Output::Event(_) | Output::Effect(_) => {}
            }
        }
    }
    v
}
