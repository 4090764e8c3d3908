//! Stream endings after reply text: failures and truncation (the partial text not kept or kept as the contract says), idle timeouts, crashes.

use super::*;

#[test]
fn failure_after_text_is_an_error_and_the_text_is_not_kept() {
    let mut h = H::new();
    h.user("hi");
    h.items(vec![
        text_d("par"),
        ProviderItem::Failed {
            kind: FailureKind::Overloaded,
            message: "overloaded".into(),
        },
    ]);
    assert_eq!(h.take(), s(&["token par", "error", "done error"]));
    assert_eq!(h.core.conversation().len(), 1);
    assert_eq!(h.sends(), 1);
}

#[test]
fn truncated_after_text_keeps_the_partial_and_dispatches_nothing() {
    let mut h = H::new();
    h.auto_ack = false;
    h.user("hi");
    h.ack_next();
    h.items(vec![
        text_d("part"),
        ProviderItem::ToolCallStart {
            index: 0,
            id: "c1".into(),
            name: "write_file".into(),
        },
        ProviderItem::ToolCallArgs {
            index: 0,
            json: r#"{"path":"a.rs"}"#.into(),
        },
        ProviderItem::EndedWithoutCompletion {
            detail: "connection reset".into(),
        },
    ]);
    assert_eq!(h.take(), s(&["token part"]));
    h.ack_next();
    assert_eq!(
        h.take(),
        s(&["message_done part", "error", "done truncated"])
    );
    assert!(!h.has_effect(|e| matches!(e, Effect::PlanTool { .. } | Effect::RunTool { .. })));
    assert_eq!(
        h.core.conversation().last().unwrap(),
        &Message::assistant_text("part")
    );
    assert_eq!(h.sends(), 1);
}

#[test]
fn idle_timeout_after_text_truncates() {
    let mut c = config();
    c.retry.stream_idle_timeout_ms = 30_000;
    let mut h = H::with(c);
    h.user("hi");
    assert_eq!(
        h.core.poll_timeout(),
        Some((Millis(30_000), TimerReason::StreamIdle))
    );
    h.advance(1_000);
    h.item(text_d("so"));
    assert_eq!(
        h.core.poll_timeout(),
        Some((Millis(31_000), TimerReason::StreamIdle))
    );
    assert_eq!(h.fire_timer(), TimerReason::StreamIdle);
    assert!(h.has_effect(|e| matches!(e, Effect::CancelRequest { request: 1 })));
    assert_eq!(
        h.take(),
        s(&["token so", "message_done so", "error", "done truncated"])
    );
    assert!(h.messages("error")[0].contains("silent for 30 s"));
}

#[test]
fn idle_timeout_before_text_retries() {
    let mut c = config();
    c.retry.stream_idle_timeout_ms = 30_000;
    let mut h = H::with(c);
    h.user("hi");
    h.fire_timer();
    assert_eq!(
        h.take(),
        s(&["retry 2/5 the stream was silent for 30 s before any reply text"])
    );
    h.fire_timer();
    assert_eq!(h.sent(), (1, 2));
    h.reply("ok");
}

#[test]
fn crash_during_a_request_and_during_a_tool() {
    let mut h = H::new();
    h.user("hi");
    h.item(text_d("x"));
    h.input(Input::Crashed {
        message: "boom".into(),
    });
    assert!(h.has_effect(|e| matches!(e, Effect::CancelRequest { .. })));
    assert_eq!(h.take(), s(&["token x", "error", "done error"]));

    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(true));
    h.input(Input::Crashed {
        message: "boom".into(),
    });
    assert!(h.has_effect(|e| matches!(e, Effect::CancelTool { .. })));
    assert_eq!(h.take(), s(&["tool_end c1 false", "error", "done error"]));
    // A late ToolDone is ignored; an idle crash is ignored.
    h.tool_done("c1", true, "late");
    h.input(Input::Crashed {
        message: "again".into(),
    });
    assert_eq!(h.take(), Vec::<String>::new());
    h.user("next");
    h.reply("ok");
    assert_eq!(h.take().last().unwrap(), "done stop");
}

/// A wake-up before the stream's idle deadline (a driver may wake early) changes nothing.
#[test]
fn an_early_timeout_during_a_live_stream_changes_nothing() {
    let mut c = config();
    c.retry.stream_idle_timeout_ms = 30_000;
    let mut h = H::with(c);
    h.user("hi");
    h.item(ProviderItem::Opened);
    h.item(text_d("part"));
    h.advance(1_000);
    h.input(Input::Timeout);
    assert!(!h.has_effect(|e| matches!(e, Effect::CancelRequest { .. })));
    assert_eq!(h.take(), s(&["token part"]));
    h.items(vec![
        text_d(" more"),
        ProviderItem::Completed {
            finish_reason: "stop".into(),
        },
    ]);
    assert_eq!(h.take().last().unwrap(), "done stop");
}
