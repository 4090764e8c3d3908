//! Plain turns: the event and effect sequence of a reply, `message_done` after its persist ack, thinking, the budget figure.

use super::*;

#[test]
fn plain_turn_events_and_effects() {
    let mut h = H::new();
    h.user("hi");
    assert_eq!(h.sends(), 1);
    let body = h.last_body();
    assert_eq!(body.system, "You are a careful coding agent.");
    assert_eq!(body.messages, vec![Message::user_text("hi")]);
    h.items(vec![
        ProviderItem::Opened,
        text_d("hel"),
        text_d("lo"),
        ProviderItem::Usage {
            prompt_tokens: 10,
            completion_tokens: 2,
            cached_tokens: Some(4),
        },
        ProviderItem::Completed {
            finish_reason: "end_turn".into(),
        },
    ]);
    assert_eq!(
        h.take(),
        s(&[
            "token hel",
            "token lo",
            "message_done hello",
            "usage 10/2/Some(4)",
            "budget",
            "done end_turn"
        ])
    );
    // Right after done, the next user is admitted.
    h.user("again");
    assert_eq!(h.sends(), 2);
    assert_eq!(h.sent(), (2, 1));
    h.reply("ok");
    assert_eq!(
        h.take(),
        s(&["token ok", "message_done ok", "budget", "done stop"])
    );
    assert_eq!(h.core.conversation().len(), 4);
}

#[test]
fn message_done_waits_for_the_persist_ack() {
    let mut h = H::new();
    h.auto_ack = false;
    h.user("hi");
    h.ack_next(); // the prompt
    h.reply("hello");
    assert_eq!(h.take(), s(&["token hello"]));
    let Some(Effect::Persist { records, .. }) = h.effects.last().cloned() else {
        panic!("expected a persist")
    };
    assert_eq!(
        records,
        vec![Record::Message {
            message: Message::assistant_text("hello")
        }]
    );
    // A stale ack changes nothing.
    h.input(Input::Persisted { ticket: 999 });
    assert_eq!(h.take(), Vec::<String>::new());
    h.ack_next();
    assert_eq!(h.take(), s(&["message_done hello", "budget", "done stop"]));
}

#[test]
fn thinking_is_emitted_at_once_and_kept_with_its_signature() {
    let mut h = H::new();
    h.user("think");
    h.items(vec![
        ProviderItem::Opened,
        ProviderItem::ThinkingDelta { text: "hmm".into() },
        ProviderItem::ThinkingSignature {
            signature: "sig".into(),
        },
        text_d("yes"),
        ProviderItem::Completed {
            finish_reason: "end_turn".into(),
        },
    ]);
    assert_eq!(
        h.take(),
        s(&[
            "thinking hmm",
            "token yes",
            "message_done yes",
            "budget",
            "done end_turn"
        ])
    );
    let last = h.core.conversation().last().unwrap().clone();
    assert_eq!(
        last.content,
        vec![
            Block::Thinking {
                text: "hmm".into(),
                signature: Some("sig".into())
            },
            Block::text("yes")
        ]
    );
}

#[test]
fn budget_is_estimated_and_scaled_by_reported_prompt_tokens() {
    let mut h = H::new();
    h.user("hi");
    h.items(vec![
        text_d("abcd"),
        ProviderItem::Usage {
            prompt_tokens: 1000,
            completion_tokens: 1,
            cached_tokens: None,
        },
        ProviderItem::Completed {
            finish_reason: "stop".into(),
        },
    ]);
    let sent_est = compaction::estimate_body(&h.last_body());
    let now_est =
        compaction::estimate_request(&freeze().system, &freeze().tools, h.core.conversation());
    let used = h
        .events
        .iter()
        .find_map(|e| match e {
            Event::Budget {
                used_tokens,
                context_tokens,
            } => Some((*used_tokens, *context_tokens)),
            _ => None,
        })
        .unwrap();
    assert_eq!(used.1, 200_000);
    assert_eq!(used.0, (now_est * 1000).div_ceil(sent_est));
    assert!(used.0 > 1000);
}

/// Calls the provider sent without an id are numbered, each with its own id, across replies.
#[test]
fn calls_without_an_id_get_distinct_ids() {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    h.user("go");
    h.read_calls(&["", ""]);
    for id in ["call_1", "call_2"] {
        h.planned(id, plan(false));
        h.tool_done(id, true, "A");
    }
    h.read_calls(&["", ""]);
    for id in ["call_3", "call_4"] {
        h.planned(id, plan(false));
        h.tool_done(id, true, "B");
    }
    h.reply("done");
    let ends: Vec<String> = h
        .take()
        .into_iter()
        .filter(|e| e.starts_with("tool_end"))
        .collect();
    assert_eq!(
        ends,
        s(&[
            "tool_end call_1 true",
            "tool_end call_2 true",
            "tool_end call_3 true",
            "tool_end call_4 true"
        ])
    );
}

#[test]
fn the_core_reports_its_session_id() {
    let h = H::new();
    assert_eq!(h.core.session_id(), "s1");
}
