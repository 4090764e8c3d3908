//! A subagent's approvals, carried up: a child's request becomes an `approval_request` of this
//! session (the task's description in front of the child's summary, the other fields
//! unchanged) or is answered by the mode's rule; the client's `approve` goes down as
//! `AnswerTask`; a cancel, a quit, the child's own settling or the run's end settle a pending
//! one exactly once.

use super::tasks::{calls, task_plan};
use super::*;
use crate::wire::{ApprovalOutcome, ApprovalReason};

/// A child's request: a `write_file` gate, or unapproved external code with its source and
/// env.
fn child_request(child_id: &str, reason: ApprovalReason) -> ChildApproval {
    let (name, summary, source_path, source_sha, env) = match reason {
        ApprovalReason::Gate => ("write_file", "write notes.txt", "", "", vec![]),
        ApprovalReason::UnapprovedSource => (
            "deploy",
            "deploy: run .openmax/tools/deploy.json",
            ".openmax/tools/deploy.json",
            "0123456789ab",
            vec!["DEPLOY_TOKEN".to_string()],
        ),
    };
    ChildApproval {
        approval_id: child_id.into(),
        description: "look around".into(),
        name: name.into(),
        summary: summary.into(),
        detail: "+hello".into(),
        reason,
        source_path: source_path.into(),
        source_sha: source_sha.into(),
        env,
    }
}

fn child_asks(h: &mut H, call: &str, child_id: &str, reason: ApprovalReason) {
    h.input(Input::TaskApproval {
        call_id: call.into(),
        request: Box::new(child_request(child_id, reason)),
    });
}

/// The `AnswerTask` effects so far: (call, child's id, approved).
fn answers(h: &H) -> Vec<(String, String, bool)> {
    h.effects
        .iter()
        .filter_map(|e| match e {
            Effect::AnswerTask {
                call_id,
                approval_id,
                approved,
            } => Some((call_id.clone(), approval_id.clone(), *approved)),
            _ => None,
        })
        .collect()
}

fn answer(call: &str, child_id: &str, approved: bool) -> (String, String, bool) {
    (call.to_string(), child_id.to_string(), approved)
}

/// One `task` call c1, approved in `ask` (approval a1) and running.
fn one_running_in_ask() -> H {
    let mut h = H::new();
    h.user("delegate it");
    h.tool_reply(
        "c1",
        "task",
        r#"{"description":"look around","prompt":"list the files"}"#,
    );
    h.planned("c1", task_plan());
    h.approve("a1", true);
    assert_eq!(
        h.take(),
        s(&[
            "budget",
            "tool_start c1 task",
            "approval_request a1 Gate",
            "approval_settled a1 Approved"
        ])
    );
    h
}

#[test]
fn a_childs_request_is_asked_with_the_tasks_description_and_the_answer_goes_down() {
    let mut h = one_running_in_ask();
    child_asks(&mut h, "c1", "a1", ApprovalReason::Gate);
    assert_eq!(h.take(), s(&["approval_request a2 Gate"]));
    let Some(Event::ApprovalRequest {
        name,
        summary,
        detail,
        source_path,
        source_sha,
        env,
        ..
    }) = h.events.last().cloned()
    else {
        panic!("no approval_request")
    };
    assert_eq!(
        (name.as_str(), summary.as_str(), detail.as_str()),
        ("write_file", "look around: write notes.txt", "+hello")
    );
    assert!(source_path.is_empty() && source_sha.is_empty() && env.is_empty());
    h.approve("a2", true);
    assert_eq!(h.take(), s(&["approval_settled a2 Approved"]));
    assert_eq!(answers(&h), [answer("c1", "a1", true)]);
    // The child's next request is declined by the client: the decline goes down too.
    child_asks(&mut h, "c1", "a2", ApprovalReason::Gate);
    h.approve("a3", false);
    assert_eq!(
        h.take(),
        s(&["approval_request a3 Gate", "approval_settled a3 Declined"])
    );
    assert_eq!(
        answers(&h),
        [answer("c1", "a1", true), answer("c1", "a2", false)]
    );
    // A settled forwarded id is answered like any settled id; nothing goes down.
    h.approve("a3", true);
    assert_eq!(h.take(), s(&["protocol_error"]));
    assert!(h.messages("protocol_error")[0].contains("already settled"));
    assert_eq!(answers(&h).len(), 2);
    h.tool_done("c1", true, "the child's answer");
    assert_eq!(h.take(), s(&["tool_end c1 true"]));
    h.reply("ok");
}

#[test]
fn unapproved_source_carries_its_fields_and_is_asked_even_in_auto_while_a_gate_is_approved() {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    h.user("delegate it");
    calls(&mut h, &[("t1", "task")]);
    h.planned("t1", task_plan());
    assert_eq!(h.take(), s(&["budget", "tool_start t1 task"]));
    // In auto this session would run a gated call without asking: the child's is approved.
    child_asks(&mut h, "t1", "a1", ApprovalReason::Gate);
    assert_eq!(h.take(), Vec::<String>::new());
    assert_eq!(answers(&h), [answer("t1", "a1", true)]);
    // External bytes no human approved: only the client answers, in every mode.
    child_asks(&mut h, "t1", "a2", ApprovalReason::UnapprovedSource);
    assert_eq!(h.take(), s(&["approval_request a1 UnapprovedSource"]));
    let Some(Event::ApprovalRequest {
        summary,
        source_path,
        source_sha,
        env,
        ..
    }) = h.events.last().cloned()
    else {
        panic!("no approval_request")
    };
    assert_eq!(
        summary,
        "look around: deploy: run .openmax/tools/deploy.json"
    );
    assert_eq!(
        (source_path.as_str(), source_sha.as_str(), env),
        (
            ".openmax/tools/deploy.json",
            "0123456789ab",
            vec!["DEPLOY_TOKEN".to_string()]
        )
    );
    assert_eq!(answers(&h).len(), 1, "not answered by the core");
    h.approve("a1", true);
    assert_eq!(h.take(), s(&["approval_settled a1 Approved"]));
    assert_eq!(answers(&h)[1], answer("t1", "a2", true));
    // The approval of the bytes is the child's to record, not this session's.
    assert!(!h.has_effect(|e| matches!(e, Effect::ApproveSource { .. })));
    h.tool_done("t1", true, "deployed");
    h.reply("ok");
}

#[test]
fn in_readonly_after_a_mode_change_a_childs_gate_is_declined_without_asking() {
    let mut h = one_running_in_ask();
    h.cmd(json!({"cmd":"approval_mode","mode":"readonly"}));
    h.input(Input::ModeSaved {
        mode: Mode::Readonly,
    });
    h.take();
    child_asks(&mut h, "c1", "a1", ApprovalReason::Gate);
    assert_eq!(h.take(), Vec::<String>::new());
    assert_eq!(answers(&h), [answer("c1", "a1", false)]);
    child_asks(&mut h, "c1", "a2", ApprovalReason::UnapprovedSource);
    assert_eq!(h.take(), s(&["approval_request a2 UnapprovedSource"]));
    h.approve("a2", false);
    assert_eq!(answers(&h)[1], answer("c1", "a2", false));
    h.tool_done("c1", true, "done");
    h.reply("ok");
}

#[test]
fn a_cancel_settles_every_forwarded_approval_once_and_ends_the_runs() {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    h.user("delegate two things");
    calls(&mut h, &[("t1", "task"), ("t2", "task")]);
    h.planned("t1", task_plan());
    h.planned("t2", task_plan());
    child_asks(&mut h, "t1", "a1", ApprovalReason::UnapprovedSource);
    child_asks(&mut h, "t2", "a1", ApprovalReason::UnapprovedSource);
    assert_eq!(
        h.take(),
        s(&[
            "budget",
            "tool_start t1 task",
            "tool_start t2 task",
            "approval_request a1 UnapprovedSource",
            "approval_request a2 UnapprovedSource"
        ])
    );
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(
        h.take(),
        s(&[
            "approval_settled a1 Cancelled",
            "approval_settled a2 Cancelled"
        ])
    );
    // The children are cancelled (which settles their side); nothing is answered down.
    assert!(answers(&h).is_empty());
    // A request a child raised before its cancel arrived is not asked any more.
    child_asks(&mut h, "t1", "a2", ApprovalReason::UnapprovedSource);
    assert_eq!(h.take(), Vec::<String>::new());
    // Late answers name settled ids.
    h.approve("a1", true);
    assert_eq!(h.take(), s(&["protocol_error"]));
    h.tool_done("t2", false, "cancelled");
    h.tool_done("t1", false, "cancelled");
    assert_eq!(
        h.take(),
        s(&["tool_end t2 false", "tool_end t1 false", "done cancelled"])
    );
    assert!(answers(&h).is_empty());
}

#[test]
fn after_quit_pending_and_later_forwarded_approvals_are_declined_and_answered_down() {
    let mut h = one_running_in_ask();
    child_asks(&mut h, "c1", "a1", ApprovalReason::Gate);
    assert_eq!(h.take(), s(&["approval_request a2 Gate"]));
    h.input(Input::EndOfInput);
    assert_eq!(h.take(), s(&["approval_settled a2 Declined"]));
    assert_eq!(answers(&h), [answer("c1", "a1", false)]);
    child_asks(&mut h, "c1", "a2", ApprovalReason::UnapprovedSource);
    assert_eq!(
        h.take(),
        s(&[
            "approval_request a3 UnapprovedSource",
            "approval_settled a3 Declined"
        ])
    );
    assert_eq!(answers(&h)[1], answer("c1", "a2", false));
    h.tool_done("c1", true, "could not write");
    assert_eq!(h.take(), s(&["tool_end c1 true"]));
    h.reply("ok");
    assert_eq!(h.core.exit_code(), Some(0));
}

#[test]
fn a_non_interactive_run_declines_a_forwarded_request_as_it_does_its_own() {
    let mut c = config();
    c.non_interactive = true;
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    h.user("delegate it");
    calls(&mut h, &[("t1", "task")]);
    h.planned("t1", task_plan());
    child_asks(&mut h, "t1", "a1", ApprovalReason::UnapprovedSource);
    assert_eq!(
        h.take(),
        s(&[
            "budget",
            "tool_start t1 task",
            "approval_request a1 UnapprovedSource",
            "approval_settled a1 Declined"
        ])
    );
    assert_eq!(answers(&h), [answer("t1", "a1", false)]);
    h.tool_done("t1", true, "not deployed");
    h.reply("ok");
}

#[test]
fn a_child_settling_its_own_request_or_ending_settles_the_forwarded_one_once() {
    let mut h = one_running_in_ask();
    child_asks(&mut h, "c1", "a1", ApprovalReason::Gate);
    child_asks(&mut h, "c1", "a2", ApprovalReason::Gate);
    assert_eq!(
        h.take(),
        s(&["approval_request a2 Gate", "approval_request a3 Gate"])
    );
    // The child's own approval timeout settled its a1 (this session's a2).
    h.input(Input::TaskApprovalSettled {
        call_id: "c1".into(),
        approval_id: "a1".into(),
        outcome: ApprovalOutcome::TimedOut,
    });
    assert_eq!(h.take(), s(&["approval_settled a2 TimedOut"]));
    // Again, or for an id never forwarded: nothing.
    h.input(Input::TaskApprovalSettled {
        call_id: "c1".into(),
        approval_id: "a1".into(),
        outcome: ApprovalOutcome::TimedOut,
    });
    assert_eq!(h.take(), Vec::<String>::new());
    // The child ends with a3 still open: it settles with the run.
    h.tool_done("c1", false, "died");
    assert_eq!(
        h.take(),
        s(&["approval_settled a3 Cancelled", "tool_end c1 false"])
    );
    h.approve("a3", true);
    assert_eq!(h.take(), s(&["protocol_error"]));
    assert!(answers(&h).is_empty());
    h.reply("ok");
}

#[test]
fn a_failed_turn_settles_the_forwarded_approvals_before_its_done() {
    let mut h = one_running_in_ask();
    child_asks(&mut h, "c1", "a1", ApprovalReason::Gate);
    h.input(Input::Crashed {
        message: "boom".into(),
    });
    let evs = h.take();
    assert_eq!(evs[0], "approval_request a2 Gate");
    assert_eq!(evs[1], "approval_settled a2 Cancelled");
    assert_eq!(evs.last().map(String::as_str), Some("done error"));
}
