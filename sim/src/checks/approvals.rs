//! Approvals: every `approval_request` settles exactly once, as answered; bogus answers are
//! protocol errors; after quit or end of input everything pending is declined; a call runs
//! outside the sandbox only after a human approved a request saying so.

use std::collections::{BTreeMap, BTreeSet};

use openmax_core::machine::{Effect, Input, Output};
use openmax_core::tool::{RunSandbox, UNSANDBOXED_SUMMARY_PREFIX};
use openmax_core::wire::{ApprovalOutcome, ApprovalReason, Command, Event};

use super::segment::Turns;
use crate::scenario::Scenario;
use crate::trace::{FedInput, Run};

/// Every `approval_request` settles exactly once, after it was requested; an `approve` for an
/// open id settles it as answered; one for an unknown or settled id is a `protocol_error`;
/// after quit or end of input, pending and later approvals are declined.
pub fn every_approval_settles_once(_sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let mut v = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut settled: BTreeSet<String> = BTreeSet::new();
    let mut must_decline: BTreeSet<String> = BTreeSet::new();
    // Approvals of external code whose record was asked for: they settle at its answer.
    let mut recording: BTreeSet<String> = BTreeSet::new();
    for (i, fed) in run.trace.iter().enumerate() {
        let quitting = turns.quit_at.is_some_and(|q| i >= q);
        if turns.quit_at == Some(i) {
            must_decline.extend(open.iter().cloned());
        }
        let after_quit = turns.quit_at.is_some_and(|q| i > q);
        if let (FedInput::Core(Input::Line(l)), false) = (&fed.input, after_quit) {
            if let Ok(Some(Command::Approve {
                approval_id,
                approved,
            })) = Command::parse_line(l)
            {
                let events: Vec<&Event> = fed
                    .outputs
                    .iter()
                    .filter_map(|o| match o {
                        Output::Event(e) => Some(e),
                        Output::Effect(_) => None,
                    })
                    .collect();
                if open.contains(&approval_id) {
                    let want = if approved {
                        ApprovalOutcome::Approved
                    } else {
                        ApprovalOutcome::Declined
                    };
                    let got = events.iter().find_map(|e| match e {
                        Event::ApprovalSettled {
                            approval_id: id,
                            outcome,
                        } if *id == approval_id => Some(*outcome),
                        _ => None,
                    });
                    let recorded = fed.outputs.iter().any(|o| {
                        matches!(o, Output::Effect(Effect::ApproveSource { approval_id: id, .. })
                            if *id == approval_id)
                    });
                    if recorded && approved && got.is_none() {
                        recording.insert(approval_id.clone());
                    } else if got != Some(want) && !quitting {
                        v.push(format!(
                            "approve {approval_id} approved={approved} at input #{i} settled as {got:?}"
                        ));
                    }
                } else if !events
                    .iter()
                    .any(|e| matches!(e, Event::ProtocolError { .. }))
                {
                    v.push(format!(
                        "approve for an unknown or settled id {approval_id:?} at input #{i} got no protocol_error"
                    ));
                }
            }
        }
        if let FedInput::Core(
            Input::SourceApproved { approval_id } | Input::SourceApprovalFailed { approval_id, .. },
        ) = &fed.input
        {
            let settles = fed.outputs.iter().any(|o| {
                matches!(o, Output::Event(Event::ApprovalSettled { approval_id: id, outcome })
                    if id == approval_id && *outcome == ApprovalOutcome::Approved)
            });
            if recording.remove(approval_id) && open.contains(approval_id) && !settles {
                v.push(format!(
                    "approval {approval_id} was approved and its record answered at input #{i}, but it did not settle approved there"
                ));
            }
        }
        for o in &fed.outputs {
            match o {
                Output::Event(Event::ApprovalRequest { approval_id, .. }) => {
                    if open.contains(approval_id) || settled.contains(approval_id) {
                        v.push(format!("approval id {approval_id} requested twice"));
                    }
                    open.push(approval_id.clone());
                    if quitting {
                        must_decline.insert(approval_id.clone());
                    }
                }
                Output::Event(Event::ApprovalSettled {
                    approval_id,
                    outcome,
                }) => {
                    if !open.contains(approval_id) {
                        v.push(format!(
                            "approval {approval_id} settled ({outcome:?}) at input #{i} but it is not open"
                        ));
                    }
                    open.retain(|a| a != approval_id);
                    settled.insert(approval_id.clone());
                    if must_decline.contains(approval_id) && *outcome != ApprovalOutcome::Declined {
                        v.push(format!(
                            "approval {approval_id} pending at or raised after quit/EOF settled {outcome:?}, not declined"
                        ));
                    }
                }
                Output::Event(_) | Output::Effect(_) => {}
            }
        }
    }
    let live_wait = turns.quit_at.is_none() && run.went_quiet;
    if !open.is_empty() && !live_wait {
        v.push(format!("approvals never settled: {open:?}"));
    }
    v
}

/// `approval_settled` with `approved` only ever answers an `approve … true` for that id, and a
/// mode change never settles anything: a pending request stays pending whatever the mode
/// becomes. Client input the core held while a `SaveMode`, `Refreeze` or `ApproveSource`
/// answer was in flight is handled in that answer's drain, so there it counts as the cause.
/// The approval of external code settles in the drain of its record's answer
/// (`SourceApproved` / `SourceApprovalFailed`): there the cause is the `approve … true` whose
/// drain asked for that record.
pub fn approved_only_by_its_approve(_sc: &Scenario, run: &Run) -> Vec<String> {
    let mut v = Vec::new();
    let mut awaiting = 0usize;
    let mut held: Vec<&FedInput> = Vec::new();
    // Approvals whose record an `approve … true` asked for.
    let mut vouched: BTreeSet<String> = BTreeSet::new();
    for (i, fed) in run.trace.iter().enumerate() {
        let recorded = match &fed.input {
            FedInput::Core(Input::SourceApproved { approval_id })
            | FedInput::Core(Input::SourceApprovalFailed { approval_id, .. }) => {
                Some(approval_id.as_str())
            }
            _ => None,
        };
        let answer = recorded.is_some()
            || matches!(
                fed.input,
                FedInput::Core(Input::ModeSaved { .. })
                    | FedInput::Core(Input::ModeSaveFailed { .. })
                    | FedInput::Core(Input::Frozen { .. })
            );
        let client = matches!(
            fed.input,
            FedInput::Core(Input::Line(_))
                | FedInput::Core(Input::Framing(_))
                | FedInput::Core(Input::EndOfInput)
        );
        if client && awaiting > 0 {
            held.push(&fed.input);
        }
        let causes: Vec<&FedInput> = if answer {
            awaiting = awaiting.saturating_sub(1);
            held.clone()
        } else {
            vec![&fed.input]
        };
        let approve = |approval_id: &str, want: Option<bool>| {
            causes.iter().any(|c| match c {
                FedInput::Core(Input::Line(l)) => matches!(
                    Command::parse_line(l),
                    Ok(Some(Command::Approve { approval_id: id, approved }))
                        if id == approval_id && want.is_none_or(|w| w == approved)
                ),
                _ => false,
            })
        };
        let mode_line = matches!(&fed.input, FedInput::Core(Input::Line(l))
            if matches!(Command::parse_line(l), Ok(Some(Command::ApprovalMode { .. }))));
        for o in &fed.outputs {
            match o {
                Output::Effect(Effect::SaveMode { .. }) | Output::Effect(Effect::Refreeze) => {
                    awaiting += 1
                }
                Output::Effect(Effect::ApproveSource { approval_id, .. }) => {
                    awaiting += 1;
                    if approve(approval_id, Some(true)) {
                        vouched.insert(approval_id.clone());
                    } else {
                        v.push(format!(
                            "the approval of {approval_id}'s source was recorded at input #{i} with no approve {approval_id} true behind it"
                        ));
                    }
                }
                Output::Event(Event::ApprovalSettled {
                    approval_id,
                    outcome,
                }) => {
                    let by_record =
                        recorded == Some(approval_id.as_str()) && vouched.contains(approval_id);
                    if *outcome == ApprovalOutcome::Approved
                        && !approve(approval_id, Some(true))
                        && !by_record
                    {
                        v.push(format!(
                            "approval {approval_id} settled approved at input #{i} with no approve {approval_id} true behind it"
                        ));
                    }
                    let ends_it = causes.iter().any(|c| match c {
                        FedInput::Core(Input::EndOfInput) => true,
                        FedInput::Core(Input::Line(l)) => matches!(
                            Command::parse_line(l),
                            Ok(Some(Command::Cancel)) | Ok(Some(Command::Quit))
                        ),
                        _ => false,
                    });
                    if (mode_line || answer)
                        && !approve(approval_id, None)
                        && !ends_it
                        && !by_record
                    {
                        v.push(format!(
                            "approval {approval_id} settled {outcome:?} at input #{i} by a mode change"
                        ));
                    }
                }
                Output::Event(_) | Output::Effect(_) => {}
            }
        }
        if answer && awaiting == 0 {
            held.clear();
        }
    }
    v
}

/// A call runs outside the sandbox only after a human approved a request that said so: every
/// `RunTool` with [`RunSandbox::Unsandboxed`] is in the drain that settled, as approved, an
/// approval request of that call whose summary starts with [`UNSANDBOXED_SUMMARY_PREFIX`] (and
/// `approved_only_by_its_approve` ties that to an `approve … true`); an approved request of
/// that kind runs its call unsandboxed, never in a sandbox the human did not choose; and no
/// such request is raised where no human can answer (`-p`, an agent-spawned session).
pub fn unsandboxed_only_after_a_human_approved_it(sc: &Scenario, run: &Run) -> Vec<String> {
    let mut v = Vec::new();
    let mut call: Option<String> = None;
    // approval id → (its call, whether it asked to run unsandboxed)
    let mut asked: BTreeMap<String, (Option<String>, bool)> = BTreeMap::new();
    for (i, fed) in run.trace.iter().enumerate() {
        let mut approved_here: Vec<(Option<String>, bool)> = Vec::new();
        for o in &fed.outputs {
            match o {
                Output::Event(Event::ToolStart { call_id, .. }) => call = Some(call_id.clone()),
                Output::Event(Event::ApprovalRequest {
                    approval_id,
                    summary,
                    reason,
                    ..
                }) => {
                    let outside = *reason == ApprovalReason::Gate
                        && summary.starts_with(UNSANDBOXED_SUMMARY_PREFIX);
                    if outside && (sc.config.non_interactive || sc.config.agent_spawned) {
                        v.push(format!(
                            "approval {approval_id} asks to run unsandboxed at input #{i} in a \
                             session no human can answer"
                        ));
                    }
                    asked.insert(approval_id.clone(), (call.clone(), outside));
                }
                Output::Event(Event::ApprovalSettled {
                    approval_id,
                    outcome: ApprovalOutcome::Approved,
                }) => {
                    if let Some(a) = asked.get(approval_id) {
                        approved_here.push(a.clone());
                    }
                }
                Output::Effect(Effect::RunTool {
                    call_id, sandbox, ..
                }) => {
                    let by_approval = approved_here
                        .iter()
                        .find(|(c, _)| c.as_deref() == Some(call_id.as_str()));
                    match (sandbox, by_approval) {
                        (RunSandbox::Unsandboxed, Some((_, true))) => {}
                        (RunSandbox::Unsandboxed, _) => v.push(format!(
                            "call {call_id} runs unsandboxed at input #{i} without an approved \
                             UNSANDBOXED request"
                        )),
                        (RunSandbox::Session | RunSandbox::ReadOnly, Some((_, true))) => {
                            v.push(format!(
                                "call {call_id} approved to run unsandboxed runs {sandbox:?} at \
                                 input #{i}"
                            ))
                        }
                        (RunSandbox::Session | RunSandbox::ReadOnly, _) => {}
                    }
                }
                Output::Event(_) | Output::Effect(_) => {}
            }
        }
    }
    v
}
