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

#[test]
fn end_of_input_during_an_endless_stream_cancels_at_the_drain_deadline() {
    let mut c = config();
    c.limits.drain_timeout_ms = 10_000;
    let mut h = H::with(c);
    h.user("hi");
    h.item(ProviderItem::Opened);
    h.item(text_d("part"));
    h.advance(1_000);
    h.input(Input::EndOfInput);
    // The stream keeps coming: each item resets the idle timer, never the drain deadline.
    for _ in 0..5 {
        h.advance(1_000);
        h.item(text_d("."));
    }
    assert_eq!(
        h.core.poll_timeout(),
        Some((Millis(11_000), TimerReason::ShutdownDrain))
    );
    assert_eq!(h.fire_timer(), TimerReason::ShutdownDrain);
    assert!(h.has_effect(|e| matches!(e, Effect::CancelRequest { request: 1 })));
    let evs = h.take();
    assert_eq!(
        evs[evs.len() - 2..],
        s(&["message_done part.....", "done cancelled"])
    );
    assert_eq!(evs.iter().filter(|e| e.starts_with("done")).count(), 1);
    assert_eq!(h.effects.last(), Some(&Effect::Exit { code: 0 }));
}

#[test]
fn a_turn_that_ends_before_the_drain_deadline_is_not_cancelled() {
    let mut h = H::new();
    h.user("hi");
    h.cmd(json!({"cmd":"quit"}));
    assert!(matches!(
        h.core.poll_timeout(),
        Some((_, TimerReason::ShutdownDrain))
    ));
    h.reply("bye");
    assert_eq!(h.take().last().unwrap(), "done stop");
    assert_eq!(h.effects.last(), Some(&Effect::Exit { code: 0 }));
    assert_eq!(h.core.poll_timeout(), None);
}

#[test]
fn a_zero_drain_deadline_cancels_at_once() {
    let mut c = config();
    c.limits.drain_timeout_ms = 0;
    let mut h = H::with(c);
    h.user("hi");
    h.item(ProviderItem::Opened);
    h.input(Input::EndOfInput);
    assert_eq!(h.take().last().unwrap(), "done cancelled");
    assert_eq!(h.effects.last(), Some(&Effect::Exit { code: 0 }));
}

#[test]
fn a_tool_ended_by_the_drain_deadline_says_the_session_shut_down() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.limits.drain_timeout_ms = 5_000;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(true));
    h.cmd(json!({"cmd":"quit"}));
    assert_eq!(h.fire_timer(), TimerReason::ShutdownDrain);
    assert!(h.has_effect(|e| matches!(e, Effect::CancelTool { call_id } if call_id == "c1")));
    h.tool_done("c1", false, "killed");
    assert_eq!(h.take(), s(&["tool_end c1 false", "done cancelled"]));
    let msg = &h.messages("tool_end")[0];
    assert!(msg.starts_with("cancelled: the session shut down"), "{msg}");
    assert!(!msg.contains("user"), "{msg}");
}

#[test]
fn a_call_being_planned_at_the_drain_deadline_says_the_session_shut_down() {
    let mut c = config();
    c.limits.drain_timeout_ms = 5_000;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.input(Input::EndOfInput);
    assert_eq!(h.fire_timer(), TimerReason::ShutdownDrain);
    assert_eq!(h.take(), s(&["tool_end c1 false", "done cancelled"]));
    let msg = &h.messages("tool_end")[0];
    assert!(msg.starts_with("cancelled: the session shut down"), "{msg}");
}

#[test]
fn a_user_cancel_still_names_the_user() {
    let mut h = H::new();
    to_planning(&mut h);
    h.cmd(json!({"cmd":"cancel"}));
    assert!(h.messages("tool_end")[0].starts_with("cancelled: the user cancelled"));
}

fn one_shot() -> H {
    let mut c = config();
    c.non_interactive = true;
    H::with(c)
}

#[test]
fn a_non_interactive_session_exits_after_its_first_done_with_the_one_shot_code() {
    // A normal end: 0.
    let mut h = one_shot();
    h.user("hi");
    h.reply("ok");
    assert_eq!(h.effects.last(), Some(&Effect::Exit { code: 0 }));
    assert_eq!(h.core.exit_code(), Some(0));

    // An error: 1.
    let mut h = one_shot();
    h.user("hi");
    h.fail(http(400, None, FailureKind::Other));
    assert_eq!(h.core.exit_code(), Some(1));

    // The tool-round ceiling: 4 (over --stdio it would exit 0).
    let mut c = config();
    c.non_interactive = true;
    c.limits.max_iterations = 1;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(false));
    h.tool_done("c1", true, "ok");
    assert_eq!(h.take(), s(&["tool_end c1 true", "done max_iterations"]));
    assert_eq!(h.core.exit_code(), Some(4));
}

/// `-p --output-schema`: the driver asks once more after the first `done` and ends the input
/// itself; the session exits then, with the last turn's one-shot code.
#[test]
fn a_driver_that_ends_the_input_itself_may_send_a_follow_up_first() {
    let mut c = config();
    c.non_interactive = true;
    c.driver_ends_input = true;
    let mut h = H::with(c);
    h.user("answer in JSON");
    h.reply("not json");
    assert_eq!(h.core.exit_code(), None, "still open after the first done");
    assert!(!h.effects.iter().any(|e| matches!(e, Effect::Exit { .. })));
    h.user("that was not valid; again");
    h.reply("{}");
    assert_eq!(h.core.exit_code(), None);
    h.input(Input::EndOfInput);
    assert_eq!(h.effects.last(), Some(&Effect::Exit { code: 0 }));

    // The last turn decides the code.
    let mut c = config();
    c.non_interactive = true;
    c.driver_ends_input = true;
    let mut h = H::with(c);
    h.user("one");
    h.reply("x");
    h.user("two");
    h.fail(http(400, None, FailureKind::Other));
    h.input(Input::EndOfInput);
    assert_eq!(h.core.exit_code(), Some(1));
}

#[test]
fn a_non_interactive_cancel_ends_the_run_with_1() {
    let mut h = one_shot();
    h.user("hi");
    h.item(text_d("par"));
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(
        h.take(),
        s(&["token par", "message_done par", "done cancelled"])
    );
    assert_eq!(h.core.exit_code(), Some(1));
}

#[test]
fn a_refused_non_interactive_prompt_exits_1() {
    let mut h = one_shot();
    h.user("   ");
    assert_eq!(h.take(), s(&["protocol_error", "done refused"]));
    assert_eq!(h.effects.last(), Some(&Effect::Exit { code: 1 }));

    let mut c = config();
    c.non_interactive = true;
    c.trusted = false;
    let mut h = H::with(c);
    h.user("hi");
    assert_eq!(h.core.exit_code(), Some(1));
}

/// While draining, a phase timer due before the drain deadline still fires first: a retry's
/// backoff ends and the attempt is sent, and the turn can still finish.
#[test]
fn a_backoff_ending_before_the_drain_deadline_still_sends_the_retry() {
    let mut c = config();
    c.limits.drain_timeout_ms = 10_000;
    let mut h = H::with(c);
    h.user("hi");
    h.fail(http(503, None, FailureKind::Server));
    h.input(Input::EndOfInput);
    let (at, reason) = h.core.poll_timeout().expect("a timer");
    assert_eq!(reason, TimerReason::RetryBackoff);
    assert!(at < Millis(10_000), "{at:?}");
    assert_eq!(h.fire_timer(), TimerReason::RetryBackoff);
    assert_eq!(h.sent(), (1, 2));
    h.reply("ok");
    assert_eq!(h.take().last().unwrap(), "done stop");
    assert_eq!(h.effects.last(), Some(&Effect::Exit { code: 0 }));
}
