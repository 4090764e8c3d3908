//! `max_iterations` and `max_agent_tokens`.

use super::*;

#[test]
fn max_iterations_ends_the_turn() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.limits.max_iterations = 1;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(true));
    h.tool_done("c1", true, "ok");
    assert_eq!(h.take(), s(&["tool_end c1 true", "done max_iterations"]));
    assert_eq!(h.sends(), 1);
}

#[test]
fn budget_exhausted_then_resubmit_continues() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.limits.max_agent_tokens = 100;
    let mut h = H::with(c);
    h.user("go");
    h.items(vec![
        ProviderItem::ToolCallStart {
            index: 0,
            id: "c1".into(),
            name: "write_file".into(),
        },
        ProviderItem::Usage {
            prompt_tokens: 90,
            completion_tokens: 10,
            cached_tokens: None,
        },
        ProviderItem::Completed {
            finish_reason: "tool_use".into(),
        },
    ]);
    h.planned("c1", plan(true));
    h.tool_done("c1", true, "ok");
    assert_eq!(
        h.take(),
        s(&[
            "usage 90/10/None",
            "budget",
            "tool_start c1 write_file",
            "tool_end c1 true",
            "done budget_exhausted"
        ])
    );
    assert_eq!(h.sends(), 1);
    h.user("continue");
    assert_eq!(h.sends(), 2);
    h.reply("ok");
    assert_eq!(h.take().last().unwrap(), "done stop");
}
