//! The `task` tool's policy: a subagent at `[tasks] max_depth` may not start tasks of its own
//! (a failed `tool_end` with a note, nothing asked or run); below it a `task` call is gated in
//! `ask` like any call that can write, and runs once approved. Consecutive `task` calls of one
//! reply run side by side (up to `max_parallel`), each ending once in the order its result
//! comes; a call of another tool waits for them and holds up the calls after it; a cancel, a
//! crash or a failed write ends every run out.

use super::*;

pub(super) fn task_plan() -> ToolPlan {
    ToolPlan {
        mutating: true,
        targets: vec!["look around".into()],
        summary: "task: look around".into(),
        detail: "list the files".into(),
        source: None,
        invalid: None,
        sandbox: Default::default(),
        confirm: None,
    }
}

fn to_task_planning(h: &mut H) {
    h.user("delegate it");
    h.tool_reply(
        "c1",
        "task",
        r#"{"description":"look around","prompt":"list the files"}"#,
    );
    assert_eq!(h.take(), s(&["budget", "tool_start c1 task"]));
    h.planned("c1", task_plan());
}

fn runs(h: &H) -> usize {
    h.effects
        .iter()
        .filter(|e| matches!(e, Effect::RunTool { name, .. } if name == "task"))
        .count()
}

#[test]
fn a_subagent_at_max_depth_may_not_start_a_task() {
    let mut c = config();
    c.agent_spawned = true;
    c.mode = Mode::Auto;
    c.tasks.depth = 1;
    let mut h = H::with(c);
    to_task_planning(&mut h);
    assert_eq!(h.take(), s(&["tool_end c1 false", "harness_note c1"]));
    let out = &h.messages("tool_end")[0];
    assert!(
        out.contains("depth 1") && out.contains("max_depth is 1"),
        "{out}"
    );
    assert_eq!(runs(&h), 0);
    h.reply("ok");
}

#[test]
fn a_deeper_max_depth_lets_a_subagent_start_one() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.tasks.depth = 1;
    c.tasks.max_depth = 2;
    let mut h = H::with(c);
    to_task_planning(&mut h);
    assert_eq!(runs(&h), 1);
    h.tool_done("c1", true, "the grandchild's answer");
    h.reply("ok");
}

#[test]
fn a_task_is_asked_about_in_ask_mode_and_runs_once_approved() {
    let mut h = H::new();
    to_task_planning(&mut h);
    assert_eq!(h.take(), s(&["approval_request a1 Gate"]));
    assert_eq!(runs(&h), 0);
    h.approve("a1", true);
    assert_eq!(runs(&h), 1);
    h.tool_done("c1", true, "the child's answer");
    assert_eq!(
        h.take(),
        s(&["approval_settled a1 Approved", "tool_end c1 true"])
    );
    h.reply("ok");
}

// ----- task calls side by side --------------------------------------------------------------

/// A completed reply calling these tools in order: (call id, tool name); a `task` call gets a
/// task's arguments, any other call none.
pub(super) fn calls(h: &mut H, calls: &[(&str, &str)]) {
    h.item(ProviderItem::Opened);
    for (index, (id, name)) in (0u32..).zip(calls) {
        h.item(ProviderItem::ToolCallStart {
            index,
            id: (*id).into(),
            name: (*name).into(),
        });
        let args = if *name == "task" {
            r#"{"description":"look around","prompt":"list the files"}"#
        } else {
            "{}"
        };
        h.item(ProviderItem::ToolCallArgs {
            index,
            json: args.into(),
        });
    }
    h.item(ProviderItem::Completed {
        finish_reason: "tool_use".into(),
    });
}

fn auto(max_parallel: u32) -> H {
    let mut c = config();
    c.mode = Mode::Auto;
    c.tasks.max_parallel = max_parallel;
    H::with(c)
}

/// The ids of the `RunTool` effects so far, in order.
fn run_ids(h: &H) -> Vec<String> {
    h.effects
        .iter()
        .filter_map(|e| match e {
            Effect::RunTool { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .collect()
}

/// The ids of the `CancelTool` effects so far, in order.
fn cancel_ids(h: &H) -> Vec<String> {
    h.effects
        .iter()
        .filter_map(|e| match e {
            Effect::CancelTool { call_id } => Some(call_id.clone()),
            _ => None,
        })
        .collect()
}

/// The ids in the tool results of the last request's body, in order.
fn results_sent(h: &H) -> Vec<(String, bool, String)> {
    h.last_body()
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::ToolResult { id, ok, output } => Some((id.clone(), *ok, output.clone())),
            _ => None,
        })
        .collect()
}

/// Three task calls in auto mode, each planned as it is started: all three run at once.
fn three_running(max_parallel: u32) -> H {
    let mut h = auto(max_parallel);
    h.user("delegate three things");
    calls(&mut h, &[("t1", "task"), ("t2", "task"), ("t3", "task")]);
    assert_eq!(h.take(), s(&["budget", "tool_start t1 task"]));
    h.planned("t1", task_plan());
    // t1 runs and t2 starts in the same drain: the next task does not wait for it.
    assert_eq!(run_ids(&h), ["t1"]);
    assert_eq!(h.take(), s(&["tool_start t2 task"]));
    h.planned("t2", task_plan());
    assert_eq!(run_ids(&h), ["t1", "t2"]);
    h
}

#[test]
fn consecutive_task_calls_run_side_by_side_and_end_in_the_order_they_finish() {
    let mut h = three_running(4);
    assert_eq!(h.take(), s(&["tool_start t3 task"]));
    h.planned("t3", task_plan());
    assert_eq!(run_ids(&h), ["t1", "t2", "t3"]);
    assert_eq!(h.take(), Vec::<String>::new());
    let sends = h.sends();
    // The last to start ends first; each result is its own, and each call ends once.
    h.tool_done("t3", true, "third answer");
    assert_eq!(h.take(), s(&["tool_end t3 true"]));
    h.tool_done("t1", false, "first failed");
    assert_eq!(h.take(), s(&["tool_end t1 false"]));
    assert_eq!(h.sends(), sends, "no request while a run is out");
    h.tool_done("t2", true, "second answer");
    assert_eq!(h.take(), s(&["tool_end t2 true"]));
    assert_eq!(
        h.sends(),
        sends + 1,
        "the next request once every run ended"
    );
    assert_eq!(
        h.messages("tool_end"),
        ["third answer", "first failed", "second answer"]
    );
    let mut sent = results_sent(&h);
    sent.sort();
    assert_eq!(
        sent,
        [
            ("t1".to_string(), false, "first failed".to_string()),
            ("t2".to_string(), true, "second answer".to_string()),
            ("t3".to_string(), true, "third answer".to_string()),
        ]
    );
    // A second answer for an ended call changes nothing.
    h.tool_done("t1", true, "late");
    assert_eq!(h.take(), Vec::<String>::new());
    h.reply("all three done");
    assert_eq!(
        h.take(),
        s(&[
            "token all three done",
            "message_done all three done",
            "budget",
            "done stop"
        ])
    );
}

#[test]
fn max_parallel_caps_the_runs_out_and_the_next_task_starts_when_one_ends() {
    let mut h = three_running(2);
    // Two run: t3 waits (no tool_start yet).
    assert_eq!(h.take(), Vec::<String>::new());
    h.tool_done("t2", true, "second answer");
    assert_eq!(h.take(), s(&["tool_end t2 true", "tool_start t3 task"]));
    h.planned("t3", task_plan());
    assert_eq!(run_ids(&h), ["t1", "t2", "t3"]);
    h.tool_done("t1", true, "first answer");
    h.tool_done("t3", true, "third answer");
    assert_eq!(h.take(), s(&["tool_end t1 true", "tool_end t3 true"]));
    assert_eq!(results_sent(&h).len(), 3);
    h.reply("ok");
}

#[test]
fn max_parallel_one_runs_task_calls_one_after_another() {
    let mut h = auto(1);
    h.user("delegate two things");
    calls(&mut h, &[("t1", "task"), ("t2", "task")]);
    h.planned("t1", task_plan());
    assert_eq!(h.take(), s(&["budget", "tool_start t1 task"]));
    h.tool_done("t1", true, "first answer");
    assert_eq!(h.take(), s(&["tool_end t1 true", "tool_start t2 task"]));
    h.planned("t2", task_plan());
    h.tool_done("t2", true, "second answer");
    assert_eq!(h.take(), s(&["tool_end t2 true"]));
    h.reply("ok");
}

#[test]
fn a_call_that_is_not_a_task_waits_for_the_runs_before_it_and_holds_up_the_rest() {
    let mut h = auto(4);
    h.user("mixed");
    calls(
        &mut h,
        &[
            ("t1", "task"),
            ("t2", "task"),
            ("r1", "read_file"),
            ("t3", "task"),
        ],
    );
    h.planned("t1", task_plan());
    h.planned("t2", task_plan());
    assert_eq!(
        h.take(),
        s(&["budget", "tool_start t1 task", "tool_start t2 task"])
    );
    h.tool_done("t2", true, "second answer");
    assert_eq!(h.take(), s(&["tool_end t2 true"]), "r1 waits for t1 too");
    h.tool_done("t1", true, "first answer");
    assert_eq!(
        h.take(),
        s(&["tool_end t1 true", "tool_start r1 read_file"])
    );
    h.planned("r1", plan(false));
    assert_eq!(run_ids(&h), ["t1", "t2", "r1"]);
    assert_eq!(h.take(), Vec::<String>::new(), "t3 waits while r1 runs");
    h.tool_done("r1", true, "contents");
    assert_eq!(h.take(), s(&["tool_end r1 true", "tool_start t3 task"]));
    h.planned("t3", task_plan());
    h.tool_done("t3", true, "third answer");
    assert_eq!(h.take(), s(&["tool_end t3 true"]));
    assert_eq!(results_sent(&h).len(), 4);
    h.reply("ok");
}

#[test]
fn a_task_after_a_call_that_runs_alone_waits_for_it() {
    let mut h = auto(4);
    h.user("read then delegate");
    calls(&mut h, &[("r1", "read_file"), ("t1", "task")]);
    h.planned("r1", plan(false));
    assert_eq!(h.take(), s(&["budget", "tool_start r1 read_file"]));
    h.tool_done("r1", true, "contents");
    assert_eq!(h.take(), s(&["tool_end r1 true", "tool_start t1 task"]));
    h.planned("t1", task_plan());
    h.tool_done("t1", true, "answer");
    assert_eq!(h.take(), s(&["tool_end t1 true"]));
    h.reply("ok");
}

#[test]
fn cancel_cancels_every_run_out_and_the_turn_ends_once_each_ended() {
    let mut h = three_running(4);
    h.planned("t3", task_plan());
    h.take();
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(cancel_ids(&h), ["t1", "t2", "t3"]);
    assert_eq!(
        h.take(),
        Vec::<String>::new(),
        "the turn waits for its runs"
    );
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(
        cancel_ids(&h).len(),
        3,
        "a second cancel cancels nothing again"
    );
    h.tool_done("t2", false, "killed");
    h.tool_done("t3", false, "");
    assert_eq!(h.take(), s(&["tool_end t2 false", "tool_end t3 false"]));
    h.tool_done("t1", false, "killed");
    assert_eq!(h.take(), s(&["tool_end t1 false", "done cancelled"]));
    for out in h.messages("tool_end") {
        assert!(
            out.starts_with("cancelled: the user cancelled the turn while this call ran"),
            "{out}"
        );
    }
    assert_eq!(h.sends(), 1, "no request after the cancel");
    // A late answer after the done changes nothing.
    h.tool_done("t1", true, "late");
    assert_eq!(h.take(), Vec::<String>::new());
    assert!(!h.core.in_turn());
}

#[test]
fn cancel_while_the_next_task_starts_ends_it_and_waits_for_the_runs() {
    let mut h = three_running(4);
    // t3 is being planned while t1 and t2 run.
    h.take();
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(cancel_ids(&h), ["t1", "t2"]);
    assert_eq!(h.take(), s(&["tool_end t3 false"]));
    // Its plan's late answer starts nothing.
    h.planned("t3", task_plan());
    assert_eq!(run_ids(&h), ["t1", "t2"]);
    h.tool_done("t1", false, "killed");
    h.tool_done("t2", false, "killed");
    assert_eq!(
        h.take(),
        s(&["tool_end t1 false", "tool_end t2 false", "done cancelled"])
    );
}

#[test]
fn cancel_while_the_next_tasks_hook_runs_leaves_it_unstarted() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.freeze.hooks = vec![hook("guard.sh", "tool_start", true)];
    let mut h = H::with(c);
    h.user("delegate two things");
    calls(&mut h, &[("t1", "task"), ("t2", "task")]);
    let hook_run = |h: &H| {
        h.effects
            .iter()
            .rev()
            .find_map(|e| match e {
                Effect::RunHook { hook_run, .. } => Some(*hook_run),
                _ => None,
            })
            .expect("a hook ran")
    };
    let first = hook_run(&h);
    h.input(Input::HookDone {
        hook_run: first,
        outcome: HookOutcome::Pass,
    });
    h.planned("t1", task_plan());
    assert_eq!(run_ids(&h), ["t1"]);
    let second = hook_run(&h);
    assert_ne!(first, second, "t2's hook runs while t1 runs");
    assert_eq!(h.take(), s(&["budget", "tool_start t1 task"]));
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(cancel_ids(&h), ["t1"]);
    assert_eq!(h.take(), Vec::<String>::new());
    h.input(Input::HookDone {
        hook_run: second,
        outcome: HookOutcome::Pass,
    });
    assert_eq!(h.take(), Vec::<String>::new(), "t2 never starts");
    h.tool_done("t1", false, "killed");
    assert_eq!(h.take(), s(&["tool_end t1 false", "done cancelled"]));
}

#[test]
fn a_run_that_ends_while_the_next_task_awaits_approval_ends_at_once() {
    let mut h = H::new();
    h.user("delegate two things");
    calls(&mut h, &[("t1", "task"), ("t2", "task")]);
    h.planned("t1", task_plan());
    h.approve("a1", true);
    assert_eq!(run_ids(&h), ["t1"]);
    h.planned("t2", task_plan());
    assert_eq!(
        h.take(),
        s(&[
            "budget",
            "tool_start t1 task",
            "approval_request a1 Gate",
            "approval_settled a1 Approved",
            "tool_start t2 task",
            "approval_request a2 Gate",
        ])
    );
    h.tool_done("t1", true, "first answer");
    assert_eq!(h.take(), s(&["tool_end t1 true"]));
    h.approve("a2", true);
    assert_eq!(run_ids(&h), ["t1", "t2"]);
    h.tool_done("t2", true, "second answer");
    assert_eq!(
        h.take(),
        s(&["approval_settled a2 Approved", "tool_end t2 true"])
    );
    assert_eq!(results_sent(&h).len(), 2);
    h.reply("ok");
}

#[test]
fn cancel_while_the_next_task_awaits_approval_settles_it_and_cancels_the_run() {
    let mut h = H::new();
    h.user("delegate two things");
    calls(&mut h, &[("t1", "task"), ("t2", "task")]);
    h.planned("t1", task_plan());
    h.approve("a1", true);
    h.planned("t2", task_plan());
    h.take();
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(cancel_ids(&h), ["t1"]);
    assert_eq!(
        h.take(),
        s(&["approval_settled a2 Cancelled", "tool_end t2 false"])
    );
    h.tool_done("t1", false, "killed");
    assert_eq!(h.take(), s(&["tool_end t1 false", "done cancelled"]));
}

#[test]
fn a_crash_while_tasks_run_cancels_and_ends_them_all() {
    let mut h = three_running(4);
    h.planned("t3", task_plan());
    h.take();
    h.input(Input::Crashed {
        message: "boom".into(),
    });
    assert_eq!(cancel_ids(&h), ["t1", "t2", "t3"]);
    assert_eq!(
        h.take(),
        s(&[
            "tool_end t1 false",
            "tool_end t2 false",
            "tool_end t3 false",
            "error",
            "done error"
        ])
    );
    h.tool_done("t2", true, "late");
    assert_eq!(h.take(), Vec::<String>::new());
}

#[test]
fn a_failed_write_of_one_runs_result_fails_the_turn_and_ends_the_others() {
    let mut h = three_running(4);
    h.planned("t3", task_plan());
    h.take();
    h.auto_ack = false;
    h.tool_done("t2", true, "second answer");
    assert_eq!(h.take(), Vec::<String>::new(), "tool_end waits for the ack");
    let ticket = h.unacked.pop_front().expect("the result is being written");
    h.input(Input::PersistFailed {
        ticket,
        message: "disk full".into(),
    });
    assert_eq!(cancel_ids(&h), ["t1", "t3"]);
    assert_eq!(
        h.take(),
        s(&[
            "tool_end t1 false",
            "tool_end t2 false",
            "tool_end t3 false",
            "error",
            "done error"
        ])
    );
}

#[test]
fn a_crash_while_a_runs_result_is_written_waits_for_it_and_the_cancelled_runs() {
    let mut h = three_running(2);
    h.take();
    h.auto_ack = false;
    h.tool_done("t1", true, "first answer");
    h.input(Input::Crashed {
        message: "boom".into(),
    });
    // The result being written still gets its tool_end; the other run is cancelled first.
    assert_eq!(cancel_ids(&h), ["t2"]);
    assert_eq!(h.take(), Vec::<String>::new());
    h.ack_next();
    assert_eq!(h.take(), s(&["tool_end t1 true"]));
    assert!(
        !h.has_effect(|e| matches!(e, Effect::PlanTool { call_id, .. } if call_id == "t3")),
        "nothing starts once the turn is failing"
    );
    h.tool_done("t2", false, "killed");
    h.ack_next();
    assert_eq!(h.take(), s(&["tool_end t2 false", "error", "done error"]));
}

#[test]
fn a_named_agent_may_call_only_its_tools() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.agent_spawned = true;
    c.only_tools = Some(["read_file".to_string()].into_iter().collect());
    let mut h = H::with(c);
    h.user("write something");
    h.tool_reply("c1", "write_file", r#"{"path":"a","content":"x"}"#);
    assert_eq!(h.take(), s(&["budget", "tool_start c1 write_file"]));
    h.planned("c1", task_plan());
    assert_eq!(h.take(), s(&["tool_end c1 false", "harness_note c1"]));
    let out = &h.messages("tool_end")[0];
    assert!(
        out.contains("does not give it `write_file`") && out.contains("its tools: read_file"),
        "{out}"
    );
    assert_eq!(
        h.effects
            .iter()
            .filter(|e| matches!(e, Effect::RunTool { .. }))
            .count(),
        0
    );
    h.reply("ok");

    // The control: a tool on its list runs.
    h.user("read something");
    h.tool_reply("c2", "read_file", r#"{"path":"a"}"#);
    h.take();
    h.planned(
        "c2",
        ToolPlan {
            mutating: false,
            ..task_plan()
        },
    );
    assert!(h
        .effects
        .iter()
        .any(|e| matches!(e, Effect::RunTool { name, .. } if name == "read_file")));
    h.tool_done("c2", true, "x");
    h.reply("read");
}
