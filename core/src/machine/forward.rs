//! A subagent's approvals, carried up: the child of a running `task` call asks its client (this
//! session's shell) for an approval ([`Input::TaskApproval`]); this core decides what it
//! becomes ([`approval::forward`]) and, when it asks its own client, owns the approval like one
//! of its own: the id, the pending set, how it settles. The answer goes down as
//! [`Effect::AnswerTask`].
//!
//! Invariants:
//! - A forwarded request is an `approval_request` of this session: its summary is the task's
//!   description, `: `, the child's summary; `name`, `detail`, `reason`, `source_path`,
//!   `source_sha` and `env` are the child's, unchanged. Its id is this session's (`a<n>`),
//!   never the child's, so an `approve` naming a settled or unknown id is a `protocol_error` as
//!   for any id.
//! - It settles exactly once: by the client's `approve` (answered down), by the child settling
//!   it first (its own approval timeout: the same outcome here), by a `cancel` or a failed turn
//!   (`cancelled`; the child is cancelled too, which settles its side), by `quit` or end of
//!   input (`declined`, answered down, as the contract says of pending approvals), or by the
//!   run ending first (`cancelled`: the child is gone).
//! - A request that reaches a session that cannot ask (`-p`, or after `quit`) is emitted and
//!   declined at once, as its own requests are. One from a run being cancelled is dropped: the
//!   child's cancel settles it there.
//! - Nothing here waits: the runs beside go on, and so does the call being started (its own
//!   approval may be pending at the same time).

use crate::wire::{ApprovalOutcome, Event};

use super::approval::{self, Forward};
use super::turn::Forwarded;
use super::{ChildApproval, Core, Effect};

impl Core {
    /// A child asked for an approval.
    pub(super) fn on_task_approval(&mut self, call_id: &str, request: ChildApproval) {
        let Some((call, false)) = self.running_call(call_id) else {
            // No such run, or it is being cancelled: the child's cancel settles it there.
            return;
        };
        let answer = |approved| Effect::AnswerTask {
            call_id: call_id.to_string(),
            approval_id: request.approval_id.clone(),
            approved,
        };
        match approval::forward(self.config.mode, request.reason) {
            Forward::Approve => return self.eff(answer(true)),
            Forward::Decline => return self.eff(answer(false)),
            Forward::Ask => {}
        }
        let approval_id = format!("a{}", self.next_approval);
        self.next_approval += 1;
        self.approvals.insert(approval_id.clone(), false);
        self.ev(Event::ApprovalRequest {
            approval_id: approval_id.clone(),
            name: request.name.clone(),
            summary: format!("{}: {}", request.description, request.summary),
            detail: request.detail.clone(),
            reason: request.reason,
            source_path: request.source_path.clone(),
            source_sha: request.source_sha.clone(),
            env: request.env.clone(),
        });
        if self.config.non_interactive || self.lifecycle.quitting() {
            self.settle(&approval_id, ApprovalOutcome::Declined);
            return self.eff(answer(false));
        }
        self.turn.forwarded.insert(
            approval_id,
            Forwarded {
                call,
                child_id: request.approval_id,
            },
        );
    }

    /// The child settled one of its approvals before this session answered it.
    pub(super) fn on_task_approval_settled(
        &mut self,
        call_id: &str,
        child_id: &str,
        outcome: ApprovalOutcome,
    ) {
        let call = self.running_call(call_id).map(|(c, _)| c);
        let ours = self
            .turn
            .forwarded
            .iter()
            .find(|(_, f)| Some(f.call) == call && f.child_id == child_id)
            .map(|(id, _)| id.clone());
        if let Some(id) = ours {
            self.turn.forwarded.remove(&id);
            self.settle(&id, outcome);
        }
    }

    /// The client's `approve` of a forwarded approval: settled, and answered down. Returns
    /// whether `approval_id` was one.
    pub(super) fn approve_forwarded(&mut self, approval_id: &str, approved: bool) -> bool {
        let Some(f) = self.turn.forwarded.remove(approval_id) else {
            return false;
        };
        let outcome = if approved {
            ApprovalOutcome::Approved
        } else {
            ApprovalOutcome::Declined
        };
        self.settle(approval_id, outcome);
        self.eff(Effect::AnswerTask {
            call_id: self.call_id(f.call),
            approval_id: f.child_id,
            approved,
        });
        true
    }

    /// Settle the forwarded approvals still pending (those of call `only`, or all) with
    /// `outcome`; with `answer`, the children are answered `approved: false`.
    pub(super) fn settle_forwarded(
        &mut self,
        only: Option<usize>,
        outcome: ApprovalOutcome,
        answer: bool,
    ) {
        let ids: Vec<String> = self
            .turn
            .forwarded
            .iter()
            .filter(|(_, f)| only.is_none_or(|c| f.call == c))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let Some(f) = self.turn.forwarded.remove(&id) else {
                continue;
            };
            self.settle(&id, outcome);
            if answer {
                self.eff(Effect::AnswerTask {
                    call_id: self.call_id(f.call),
                    approval_id: f.child_id,
                    approved: false,
                });
            }
        }
    }
}
