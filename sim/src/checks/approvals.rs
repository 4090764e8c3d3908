//! Approvals: every `approval_request` settles exactly once, as answered; bogus answers are
//! protocol errors; after quit or end of input everything pending is declined.

use std::collections::BTreeSet;

use openmax_core::machine::{Input, Output};
use openmax_core::wire::{ApprovalOutcome, Command, Event};

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
                    if got != Some(want) && !quitting {
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
