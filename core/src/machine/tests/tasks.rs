//! The `task` tool's policy: a subagent at `[tasks] max_depth` may not start tasks of its own
//! (a failed `tool_end` with a note, nothing asked or run); below it a `task` call is gated in
//! `ask` like any call that can write, and runs once approved.

use super::*;

fn task_plan() -> ToolPlan {
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
