//! `quit`, end of input and the exit code.

use super::*;

#[test]
fn quit_drains_and_declines_pending_approvals() {
    let mut h = H::new();
    to_planning(&mut h);
    h.planned("c1", plan(true));
    h.cmd(json!({"cmd":"quit"}));
    assert_eq!(
        h.take(),
        s(&[
            "approval_request a1 Gate",
            "approval_settled a1 Declined",
            "tool_end c1 false"
        ])
    );
    // Commands after quit are ignored.
    h.user("ignored");
    h.approve("a1", true);
    assert_eq!(h.take(), Vec::<String>::new());
    assert_eq!(h.core.exit_code(), None);
    // The turn goes on; a later approval is declined at once.
    h.tool_reply("c2", "write_file", "{}");
    h.planned("c2", plan(true));
    assert_eq!(
        h.take(),
        s(&[
            "budget",
            "tool_start c2 write_file",
            "approval_request a2 Gate",
            "approval_settled a2 Declined",
            "tool_end c2 false"
        ])
    );
    h.reply("bye");
    assert_eq!(
        h.take(),
        s(&["token bye", "message_done bye", "budget", "done stop"])
    );
    assert_eq!(h.effects.last(), Some(&Effect::Exit { code: 0 }));
    assert_eq!(h.core.exit_code(), Some(0));
    // Closed: everything is ignored.
    h.input(Input::Timeout);
    h.user("x");
    assert_eq!(h.take(), Vec::<String>::new());
}

#[test]
fn end_of_input_when_idle_exits_at_once() {
    let mut h = H::new();
    h.input(Input::EndOfInput);
    assert_eq!(h.effects, vec![Effect::Exit { code: 0 }]);
    assert_eq!(h.core.exit_code(), Some(0));
}

#[test]
fn exit_code_follows_the_last_turn() {
    let mut h = H::new();
    h.user("hi");
    h.fail(http(400, None, FailureKind::Other));
    h.user("again");
    h.reply("ok");
    h.input(Input::EndOfInput);
    assert_eq!(h.core.exit_code(), Some(0));

    let mut h = H::new();
    h.user("hi");
    h.cmd(json!({"cmd":"quit"}));
    h.fail(http(400, None, FailureKind::Other));
    assert_eq!(h.take(), s(&["error", "done error"]));
    assert_eq!(h.effects.last(), Some(&Effect::Exit { code: 1 }));
}
