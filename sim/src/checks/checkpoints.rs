//! Undo's guarantee on the turn: a turn that may write the project is checkpointed right
//! before its first such effect, and only such a turn is.

use std::collections::BTreeMap;

use openmax_core::machine::{CheckpointMoment, Effect, HookEvent, Input, Output};
use openmax_core::tool::RunSandbox;

use super::segment::Turns;
use crate::scenario::Scenario;
use crate::trace::{FedInput, Run};

/// In every admitted turn: the first effect that may write the project (a `RunTool` of a plan
/// that writes, outside the read-only sandbox, or a `RunHook` of the turn) is immediately
/// preceded by the turn's one `Checkpoint` `Before`; a turn with no such effect has none; a
/// turn that ended with a `Before` has exactly one `After`, and never one without a `Before`.
pub fn checkpoint_before_first_write(_sc: &Scenario, run: &Run) -> Vec<String> {
    let mut v = Vec::new();
    let mut writes: BTreeMap<&str, bool> = BTreeMap::new();
    for fed in &run.trace {
        if let FedInput::Core(Input::ToolPlanned { call_id, plan }) = &fed.input {
            writes.insert(call_id, plan.mutating || plan.source.is_some());
        }
    }
    for turn in Turns::of(run).turns {
        let end = turn
            .done
            .as_ref()
            .map(|(i, _)| *i)
            .unwrap_or(run.trace.len().saturating_sub(1));
        let (mut befores, mut afters, mut wrote) = (0u32, 0u32, false);
        let mut prev: Option<&Effect> = None;
        for fed in run.trace.iter().take(end + 1).skip(turn.start) {
            for o in &fed.outputs {
                let Output::Effect(e) = o else { continue };
                let writing = match e {
                    Effect::RunTool {
                        call_id, sandbox, ..
                    } => {
                        *sandbox != RunSandbox::ReadOnly
                            && writes.get(call_id.as_str()).copied().unwrap_or(true)
                    }
                    Effect::RunHook { event, .. } => *event != HookEvent::SessionStart,
                    Effect::Checkpoint {
                        moment: CheckpointMoment::Before,
                        ..
                    } => {
                        befores += 1;
                        false
                    }
                    Effect::Checkpoint {
                        moment: CheckpointMoment::After,
                        ..
                    } => {
                        afters += 1;
                        if befores == 0 {
                            v.push(format!(
                                "turn at step {}: an After checkpoint with no Before",
                                turn.start
                            ));
                        }
                        false
                    }
                    _ => false,
                };
                if writing && !wrote {
                    wrote = true;
                    if !matches!(
                        prev,
                        Some(Effect::Checkpoint {
                            moment: CheckpointMoment::Before,
                            ..
                        })
                    ) {
                        v.push(format!(
                            "turn at step {}: its first write ({e:?}) was not right after its \
                             Before checkpoint",
                            turn.start
                        ));
                    }
                }
                prev = Some(e);
            }
        }
        if befores > 1 {
            v.push(format!(
                "turn at step {}: {befores} Before checkpoints",
                turn.start
            ));
        }
        if befores > 0 && !wrote {
            v.push(format!(
                "turn at step {}: a Before checkpoint but nothing that writes",
                turn.start
            ));
        }
        if turn.done.is_some() && afters != befores.min(1) {
            v.push(format!(
                "turn at step {}: {afters} After checkpoints for {befores} Before",
                turn.start
            ));
        }
    }
    v
}
