//! `cancel` in every phase: idle, requesting, backoff, tools, planning, persisting.

use super::*;

#[test]
fn cancel_when_idle_is_a_protocol_error() {
    let mut h = H::new();
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(h.take(), s(&["protocol_error"]));
    assert!(h.messages("protocol_error")[0].contains("no turn is running"));
}

#[test]
fn cancel_during_a_request() {
    let mut h = H::new();
    h.user("hi");
    h.item(text_d("x"));
    h.cmd(json!({"cmd":"cancel"}));
    assert!(h.has_effect(|e| matches!(e, Effect::CancelRequest { request: 1 })));
    // The token run ends with message_done (the partial is kept), then done.
    assert_eq!(
        h.take(),
        s(&["token x", "message_done x", "done cancelled"])
    );
    assert_eq!(
        h.core.conversation().last().unwrap(),
        &Message::assistant_text("x")
    );
    // Late items are ignored, and the next turn runs.
    h.input(Input::Provider {
        request: 1,
        attempt: 1,
        item: text_d("late"),
    });
    assert_eq!(h.take(), Vec::<String>::new());
    h.user("again");
    h.reply("ok");
}

#[test]
fn cancel_during_backoff_never_sends_the_attempt() {
    let mut h = H::new();
    h.user("hi");
    h.fail(http(503, None, FailureKind::Server));
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(h.take(), s(&["retry 2/5 HTTP 503: busy", "done cancelled"]));
    assert_eq!(h.core.poll_timeout(), None);
    h.advance(100_000);
    h.input(Input::Timeout);
    assert_eq!(h.sends(), 1);
}

/// An auto-mode turn whose call `c1` runs.
fn running_c1() -> H {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(true));
    h
}

#[test]
fn cancel_during_a_tool_waits_for_it() {
    let mut h = running_c1();
    h.cmd(json!({"cmd":"cancel"}));
    assert!(h.has_effect(|e| matches!(e, Effect::CancelTool { call_id } if call_id == "c1")));
    assert_eq!(h.take(), Vec::<String>::new());
    h.cmd(json!({"cmd":"cancel"})); // already cancelling: nothing
    h.tool_done("c1", false, "killed");
    assert_eq!(h.take(), s(&["tool_end c1 false", "done cancelled"]));
    let output = &h.messages("tool_end")[0];
    assert!(output.starts_with("cancelled"), "{output}");
    assert!(output.ends_with("; output so far:\nkilled"), "{output}");
}

#[test]
fn a_cancelled_tool_with_no_output_says_only_that_it_was_cancelled() {
    let mut h = running_c1();
    h.cmd(json!({"cmd":"cancel"}));
    h.tool_done("c1", false, "");
    assert_eq!(h.take(), s(&["tool_end c1 false", "done cancelled"]));
    let output = &h.messages("tool_end")[0];
    assert!(!output.contains("output so far"), "{output}");
}

/// A plan or an outcome naming a call other than the one in flight changes nothing.
#[test]
fn answers_for_another_call_are_ignored() {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("other", plan(true));
    assert!(!h.has_effect(|e| matches!(e, Effect::RunTool { .. })));
    h.planned("c1", plan(true));
    assert!(h.has_effect(|e| matches!(e, Effect::RunTool { call_id, .. } if call_id == "c1")));
    h.tool_done("other", true, "not this one");
    assert_eq!(h.take(), Vec::<String>::new());
    h.tool_done("c1", true, "done");
    assert_eq!(h.take(), s(&["tool_end c1 true"]));
    h.reply("ok");
}

#[test]
fn cancel_during_planning() {
    let mut h = H::new();
    to_planning(&mut h);
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(h.take(), s(&["tool_end c1 false", "done cancelled"]));
    h.planned("c1", plan(true)); // late: ignored
    assert_eq!(h.take(), Vec::<String>::new());
}

#[test]
fn cancel_while_the_reply_is_persisting() {
    let mut h = H::new();
    h.auto_ack = false;
    h.user("hi");
    h.ack_next();
    h.tool_reply("c1", "write_file", "{}");
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(h.take(), Vec::<String>::new());
    h.ack_next();
    assert_eq!(h.take(), s(&["budget", "done cancelled"]));
    assert!(!h.has_effect(|e| matches!(e, Effect::PlanTool { .. })));
}

/// A call the turn never reached gets a result saying so, in the record and the next request.
#[test]
fn calls_a_cancelled_turn_never_reached_get_a_result_saying_so() {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    h.user("go");
    h.read_calls(&["c1", "c2"]);
    h.planned("c1", plan(false));
    h.cmd(json!({"cmd":"cancel"}));
    h.tool_done("c1", false, "");
    assert_eq!(h.take().last().unwrap(), "done cancelled");
    let results: Vec<(String, bool, String)> = h
        .core
        .conversation()
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::ToolResult { id, ok, output } => Some((id.clone(), *ok, output.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(
        results[1],
        (
            "c2".to_string(),
            false,
            "not run: the turn ended (cancelled)".to_string()
        )
    );
}
