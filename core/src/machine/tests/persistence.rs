//! Persistence failures of the reply, a tool result and the prompt.

use super::*;

#[test]
fn persist_failure_of_the_reply_fails_the_turn() {
    let mut h = H::new();
    h.auto_ack = false;
    h.user("hi");
    h.ack_next();
    h.reply("hello");
    let ticket = h.unacked.pop_front().unwrap();
    h.input(Input::PersistFailed {
        ticket,
        message: "disk full".into(),
    });
    assert_eq!(h.take(), s(&["token hello", "error", "done error"]));
    assert!(h.messages("error")[0].contains("could not be written: disk full"));
}

#[test]
fn persist_failure_of_a_tool_result_ends_the_call_first() {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    h.auto_ack = false;
    h.user("go");
    h.ack_next();
    h.tool_reply("c1", "write_file", "{}");
    h.ack_next();
    h.planned("c1", plan(true));
    h.tool_done("c1", true, "ok");
    let ticket = h.unacked.pop_front().unwrap();
    h.input(Input::PersistFailed {
        ticket,
        message: "disk full".into(),
    });
    assert_eq!(
        h.take(),
        s(&[
            "budget",
            "tool_start c1 write_file",
            "tool_end c1 false",
            "error",
            "done error"
        ])
    );
}

#[test]
fn persist_failure_of_the_prompt_fails_the_turn() {
    let mut h = H::new();
    h.auto_ack = false;
    h.user("hi");
    let ticket = h.unacked.pop_front().unwrap();
    h.input(Input::PersistFailed {
        ticket,
        message: "read-only fs".into(),
    });
    assert!(h.has_effect(|e| matches!(e, Effect::CancelRequest { .. })));
    assert_eq!(h.take(), s(&["error", "done error"]));
}

#[test]
fn a_reply_whose_record_failed_is_not_sent_again() {
    let mut h = H::new();
    h.auto_ack = false;
    h.user("hi");
    h.ack_next();
    h.reply("lost");
    let ticket = h.unacked.pop_front().unwrap();
    h.input(Input::PersistFailed {
        ticket,
        message: "disk full".into(),
    });
    h.take();
    h.auto_ack = true;
    h.user("again");
    let body = h.last_body();
    let texts: Vec<String> = body.messages.iter().map(|m| m.plain_text()).collect();
    assert!(
        !texts.iter().any(|t| t.contains("lost")),
        "the unwritten reply went out again: {texts:?}"
    );
    h.reply("fresh");
}

/// The record of a turn's end is not waited on: its failure arriving during the next turn
/// does not fail that turn.
#[test]
fn a_late_failure_of_the_last_turns_end_record_leaves_the_next_turn_alone() {
    let mut h = H::new();
    h.auto_ack = false;
    h.user("one");
    h.ack_next();
    h.reply("first");
    h.ack_next();
    assert_eq!(h.take().last().unwrap(), "done stop");
    let end_record = h.unacked.pop_front().expect("the turn end's record");
    h.auto_ack = true;
    h.user("two");
    h.input(Input::PersistFailed {
        ticket: end_record,
        message: "disk full".into(),
    });
    h.reply("second");
    assert_eq!(
        h.take(),
        s(&["token second", "message_done second", "budget", "done stop"])
    );
}
