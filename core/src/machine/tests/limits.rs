//! `max_iterations`, `max_agent_tokens`, and the per-reply bounds (text, thinking, tool calls, duplicate call ids).

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

#[test]
fn reply_text_past_the_cap_keeps_what_fitted_and_ends_truncated() {
    let mut c = config();
    c.limits.max_reply_bytes = 10;
    let mut h = H::with(c);
    h.user("hi");
    h.item(ProviderItem::Opened);
    h.item(text_d("12345678"));
    h.item(text_d("é9é"));
    assert!(h.has_effect(|e| matches!(e, Effect::CancelRequest { request: 1 })));
    // "é" is two bytes: 8 + 2 fit, the "9" does not.
    assert_eq!(
        h.take(),
        s(&[
            "token 12345678",
            "token é",
            "message_done 12345678é",
            "error",
            "done truncated"
        ])
    );
    assert!(h.messages("error")[0].contains("limits.max_reply_bytes"));
    // Later items of the cancelled stream change nothing.
    h.item(text_d("more"));
    assert_eq!(h.take(), Vec::<String>::new());
}

#[test]
fn thinking_past_the_cap_ends_truncated_with_the_text_kept() {
    let mut c = config();
    c.limits.max_thinking_bytes = 4;
    let mut h = H::with(c);
    h.user("hi");
    h.items(vec![
        ProviderItem::Opened,
        ProviderItem::ThinkingDelta { text: "abc".into() },
        ProviderItem::ThinkingDelta { text: "def".into() },
    ]);
    assert_eq!(
        h.take(),
        s(&[
            "thinking abc",
            "thinking d",
            "message_done ",
            "error",
            "done truncated"
        ])
    );
    assert!(h.messages("error")[0].contains("limits.max_thinking_bytes"));
}

#[test]
fn one_call_over_the_tool_call_cap_runs_none() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.limits.max_tool_calls = 3;
    let mut h = H::with(c);
    h.user("go");
    h.item(ProviderItem::Opened);
    for i in 0..5u32 {
        h.item(ProviderItem::ToolCallStart {
            index: i,
            id: format!("c{i}"),
            name: "read_file".into(),
        });
    }
    h.item(ProviderItem::Completed {
        finish_reason: "tool_use".into(),
    });
    assert_eq!(h.take(), s(&["message_done ", "error", "done truncated"]));
    assert!(h.messages("error")[0].contains("limits.max_tool_calls"));
    assert!(!h.has_effect(|e| matches!(e, Effect::PlanTool { .. })));
}

#[test]
fn tool_arguments_count_toward_the_reply_cap() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.limits.max_reply_bytes = 64;
    let mut h = H::with(c);
    h.user("go");
    h.item(ProviderItem::Opened);
    h.item(ProviderItem::ToolCallStart {
        index: 0,
        id: "c1".into(),
        name: "write_file".into(),
    });
    h.item(ProviderItem::ToolCallArgs {
        index: 0,
        json: format!("{{\"content\":\"{}\"}}", "x".repeat(100)),
    });
    assert_eq!(h.take(), s(&["message_done ", "error", "done truncated"]));
    assert!(!h.has_effect(|e| matches!(e, Effect::PlanTool { .. })));
}

#[test]
fn a_duplicate_call_id_is_refused_with_a_result_telling_the_model() {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    h.user("go");
    h.items(vec![
        ProviderItem::Opened,
        ProviderItem::ToolCallStart {
            index: 0,
            id: "same".into(),
            name: "read_file".into(),
        },
        ProviderItem::ToolCallArgs {
            index: 0,
            json: r#"{"path":"a"}"#.into(),
        },
        ProviderItem::ToolCallStart {
            index: 1,
            id: "same".into(),
            name: "read_file".into(),
        },
        ProviderItem::ToolCallArgs {
            index: 1,
            json: r#"{"path":"b"}"#.into(),
        },
        ProviderItem::Completed {
            finish_reason: "tool_use".into(),
        },
    ]);
    h.planned("same", plan(false));
    h.tool_done("same", true, "A");
    let evs = h.take();
    assert!(evs.contains(&"tool_end same true".to_string()), "{evs:?}");
    assert!(
        evs.contains(&"tool_end same_dup2 false".to_string()),
        "{evs:?}"
    );
    let refusal = &h.messages("tool_end")[1];
    assert!(
        refusal.contains("unique") && refusal.contains("not run"),
        "{refusal}"
    );
    let planned: Vec<_> = h
        .effects
        .iter()
        .filter(|e| matches!(e, Effect::PlanTool { .. }))
        .collect();
    assert_eq!(planned.len(), 1, "only the first call runs");
    // The next request pairs each call with one result.
    let body = serde_json::to_string(&h.last_body()).unwrap();
    assert!(body.contains("same_dup2"), "{body}");
    h.reply("done");
}

#[test]
fn a_third_call_with_the_same_id_gets_the_next_free_name() {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    h.user("go");
    h.read_calls(&["same", "same", "same"]);
    h.planned("same", plan(false));
    h.tool_done("same", true, "A");
    let evs = h.take();
    for end in [
        "tool_end same true",
        "tool_end same_dup2 false",
        "tool_end same_dup3 false",
    ] {
        assert!(evs.contains(&end.to_string()), "{end} in {evs:?}");
    }
    h.reply("done");
}

#[test]
fn a_cap_inside_a_character_keeps_only_the_whole_characters_before_it() {
    let mut c = config();
    c.limits.max_reply_bytes = 9;
    let mut h = H::with(c);
    h.user("hi");
    h.item(ProviderItem::Opened);
    h.item(text_d("12345678"));
    // One byte of room: the two-byte "é" does not fit, and nothing after it is taken.
    h.item(text_d("é9"));
    assert_eq!(
        h.take(),
        s(&[
            "token 12345678",
            "message_done 12345678",
            "error",
            "done truncated"
        ])
    );
}

/// One reply of `text` and a `read_file` call with id `c1` and `args`, under a reply cap of
/// `cap` bytes: the events it ends with.
fn reply_under_cap(cap: u64, text: &str, args: &str) -> Vec<String> {
    let mut c = config();
    c.mode = Mode::Auto;
    c.limits.max_reply_bytes = cap;
    let mut h = H::with(c);
    h.user("go");
    h.items(vec![
        ProviderItem::Opened,
        text_d(text),
        ProviderItem::ToolCallStart {
            index: 0,
            id: "c1".into(),
            name: "read_file".into(),
        },
        // The arguments in two pieces, so the cap is checked after each.
        ProviderItem::ToolCallArgs {
            index: 0,
            json: args[..args.len() / 2].into(),
        },
        ProviderItem::ToolCallArgs {
            index: 0,
            json: args[args.len() / 2..].into(),
        },
        ProviderItem::Completed {
            finish_reason: "tool_use".into(),
        },
    ]);
    let events = h.take();
    if events.last().is_some_and(|e| e.starts_with("tool_start")) {
        h.planned("c1", plan(false));
        h.tool_done("c1", true, "a");
        h.reply("ok");
    }
    events
}

/// Text, call id, tool name and arguments each count their bytes once toward the reply cap,
/// and a reply exactly at the cap is whole.
#[test]
fn a_reply_exactly_at_the_cap_is_whole_and_one_byte_more_is_not() {
    let args = r#"{"path":"a"}"#; // 12 bytes
    let exact = 4 + 2 + 9 + 12; // "abcd", "c1", "read_file", args
    let whole = reply_under_cap(exact, "abcd", args);
    assert_eq!(
        whole.last().map(String::as_str),
        Some("tool_start c1 read_file"),
        "{whole:?}"
    );
    let over = reply_under_cap(exact - 1, "abcd", args);
    assert_eq!(
        over.last().map(String::as_str),
        Some("done truncated"),
        "{over:?}"
    );
    // A call with no arguments: the call's start alone fills the cap.
    let no_args = reply_under_cap(4 + 2 + 9, "abcd", "");
    assert_eq!(
        no_args.last().map(String::as_str),
        Some("tool_start c1 read_file"),
        "{no_args:?}"
    );
}

#[test]
fn a_thinking_signature_at_the_cap_is_kept_and_one_byte_longer_is_not() {
    let run = |signature_len: usize| {
        let mut c = config();
        c.limits.max_thinking_bytes = 8;
        let mut h = H::with(c);
        h.user("hi");
        h.items(vec![
            ProviderItem::Opened,
            ProviderItem::ThinkingSignature {
                signature: "s".repeat(signature_len),
            },
        ]);
        h.reply("ok");
        h.take()
    };
    let at_cap = run(8);
    assert_eq!(
        at_cap.last().map(String::as_str),
        Some("done stop"),
        "{at_cap:?}"
    );
    let over = run(9);
    assert!(over.contains(&"done truncated".to_string()), "{over:?}");
}
