//! A subagent's approvals, carried up: each request a `task` call's child asked for and the core
//! forwarded settles exactly once and is answered down at most once; a cancel of the runs
//! settles every one of theirs still pending; a quit declines them and answers `false`; and
//! external bytes (`unapproved_source`) are approved down only by the client's own `approve`.

use std::collections::BTreeMap;

use openmax_core::machine::{Effect, Input, Output};
use openmax_core::wire::{ApprovalOutcome, ApprovalReason, Command, Event};

use super::segment::Turns;
use crate::scenario::Scenario;
use crate::trace::{FedInput, Run};

/// One request a child asked for.
struct Asked {
    call_id: String,
    reason: ApprovalReason,
    /// This session's approval id, when it was forwarded to the client.
    forwarded: Option<String>,
    /// How it settled here, each time.
    settled: Vec<ApprovalOutcome>,
    /// The answers that went down.
    answers: Vec<bool>,
}

/// Every child request (`TaskApproval`) the core forwarded as an `approval_request` settles
/// exactly once before its turn's `done`; every child request is answered down (`AnswerTask`)
/// at most once, and never after its forwarded approval settled `cancelled` or `timed_out`;
/// a `CancelTool` of a run settles every forwarded approval of that run still pending,
/// `cancelled`, in the same drain; one that quit or end of input settles is `declined` and
/// answered down `false`; and an `unapproved_source` request is answered
/// down `true` only in the drain of the client's `approve … true` of its forwarded id.
pub fn forwarded_approvals_settle_once_and_a_cancel_settles_them(
    _sc: &Scenario,
    run: &Run,
) -> Vec<String> {
    let turns = Turns::of(run);
    let mut v = Vec::new();
    // (call, child id) → what became of it.
    let mut asked: BTreeMap<(String, String), Asked> = BTreeMap::new();
    for (i, fed) in run.trace.iter().enumerate() {
        let approve_true = match &fed.input {
            FedInput::Core(Input::Line(l)) => match Command::parse_line(l) {
                Ok(Some(Command::Approve {
                    approval_id,
                    approved: true,
                })) => Some(approval_id),
                _ => None,
            },
            _ => None,
        };
        let new_key = match &fed.input {
            FedInput::Core(Input::TaskApproval { call_id, request }) => {
                let key = (call_id.clone(), request.approval_id.clone());
                asked.entry(key.clone()).or_insert(Asked {
                    call_id: call_id.clone(),
                    reason: request.reason,
                    forwarded: None,
                    settled: Vec::new(),
                    answers: Vec::new(),
                });
                Some(key)
            }
            _ => None,
        };
        for o in &fed.outputs {
            match o {
                Output::Event(Event::ApprovalRequest { approval_id, .. }) => {
                    if let Some(a) = new_key.as_ref().and_then(|k| asked.get_mut(k)) {
                        a.forwarded = Some(approval_id.clone());
                    }
                }
                Output::Event(Event::ApprovalSettled {
                    approval_id,
                    outcome,
                }) => {
                    if let Some(a) = asked
                        .values_mut()
                        .find(|a| a.forwarded.as_ref() == Some(approval_id))
                    {
                        a.settled.push(*outcome);
                        if a.settled.len() > 1 {
                            v.push(format!(
                                "step {i}: forwarded approval {approval_id} settled again \
                                 ({:?})",
                                a.settled
                            ));
                        }
                    }
                }
                Output::Effect(Effect::AnswerTask {
                    call_id,
                    approval_id,
                    approved,
                }) => {
                    let Some(a) = asked.get_mut(&(call_id.clone(), approval_id.clone())) else {
                        v.push(format!(
                            "step {i}: an answer went down to {call_id}'s child for {approval_id}, \
                             which it never asked for"
                        ));
                        continue;
                    };
                    a.answers.push(*approved);
                    if a.answers.len() > 1 {
                        v.push(format!(
                            "step {i}: {call_id}'s child's {approval_id} was answered twice"
                        ));
                    }
                    if a.settled.iter().any(|o| {
                        matches!(o, ApprovalOutcome::Cancelled | ApprovalOutcome::TimedOut)
                    }) {
                        v.push(format!(
                            "step {i}: {call_id}'s child's {approval_id} was answered after it \
                             settled {:?}",
                            a.settled
                        ));
                    }
                    let by_client = a.forwarded.is_some() && a.forwarded == approve_true;
                    if *approved && a.reason == ApprovalReason::UnapprovedSource && !by_client {
                        v.push(format!(
                            "step {i}: {call_id}'s child's unapproved_source {approval_id} was \
                             approved with no approve … true of the client behind it"
                        ));
                    }
                }
                Output::Event(_) | Output::Effect(_) => {}
            }
        }
        // A run cancelled in this drain leaves none of its forwarded approvals pending.
        for o in &fed.outputs {
            let Output::Effect(Effect::CancelTool { call_id }) = o else {
                continue;
            };
            for a in asked.values() {
                let pending = a.forwarded.is_some() && a.settled.is_empty();
                if a.call_id == *call_id && pending {
                    v.push(format!(
                        "step {i}: {call_id}'s run was cancelled with its forwarded approval \
                         {:?} still pending",
                        a.forwarded
                    ));
                }
            }
        }
        if turns.quit_at == Some(i) {
            for a in asked.values() {
                let Some(id) = &a.forwarded else { continue };
                let settled_here = fed.outputs.iter().any(|o| {
                    matches!(o, Output::Event(Event::ApprovalSettled { approval_id, .. })
                        if approval_id == id)
                });
                if settled_here
                    && (a.settled.last() != Some(&ApprovalOutcome::Declined)
                        || a.answers.last() != Some(&false))
                {
                    v.push(format!(
                        "step {i}: at quit, forwarded approval {id} settled {:?} and was \
                         answered {:?}, not declined and answered false",
                        a.settled, a.answers
                    ));
                }
            }
        }
        for o in &fed.outputs {
            if let Output::Event(Event::Done { stop_reason }) = o {
                for a in asked.values() {
                    if a.forwarded.is_some() && a.settled.is_empty() {
                        v.push(format!(
                            "step {i}: the turn ended {stop_reason} with forwarded approval \
                             {:?} pending",
                            a.forwarded
                        ));
                    }
                }
                asked.clear();
            }
        }
    }
    v
}
