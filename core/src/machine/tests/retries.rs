//! Retries: backoff growth, Retry-After (honoured up to a minute), non-retryable statuses, unreachable streaks, the attempt budget, stream failures before text.

use super::*;

#[test]
fn retry_with_backoff_then_success() {
    let mut h = H::new();
    h.user("hi");
    h.advance(100);
    h.fail(http(503, None, FailureKind::Server));
    assert_eq!(h.take(), s(&["retry 2/5 HTTP 503: busy"]));
    let (at, reason) = h.core.poll_timeout().unwrap();
    assert_eq!(reason, TimerReason::RetryBackoff);
    // backoff = 200 ms less jitter of up to 25%.
    assert!((250..=300).contains(&at.0), "deadline {at:?}");
    h.now = Millis(at.0 - 1);
    h.input(Input::Timeout);
    assert_eq!(h.sends(), 1, "an early timeout sends nothing");
    h.fire_timer();
    assert_eq!(h.sent(), (1, 2));
    // Items of the old attempt are ignored.
    h.input(Input::Provider {
        request: 1,
        attempt: 1,
        item: text_d("stale"),
    });
    assert_eq!(h.take(), Vec::<String>::new());
    h.reply("ok");
    assert_eq!(
        h.take(),
        s(&["token ok", "message_done ok", "budget", "done stop"])
    );
}

#[test]
fn retry_after_longer_than_backoff_is_honored() {
    let mut h = H::new();
    h.user("hi");
    h.advance(50);
    h.fail(http(429, Some(10), FailureKind::RateLimit));
    assert_eq!(h.take(), s(&["retry 2/5 HTTP 429: busy"]));
    assert_eq!(
        h.core.poll_timeout(),
        Some((Millis(10_050), TimerReason::RetryBackoff))
    );
    h.fire_timer();
    h.reply("ok");
}

#[test]
fn backoff_grows_per_attempt() {
    let mut h = H::new();
    h.user("hi");
    h.fail(http(500, None, FailureKind::Server));
    let (d1, _) = h.core.poll_timeout().unwrap();
    h.fire_timer();
    let t = h.now;
    h.fail(http(502, None, FailureKind::Server));
    let (d2, _) = h.core.poll_timeout().unwrap();
    assert!((150..=200).contains(&d1.0));
    assert!((300..=400).contains(&d2.since(t)));
    h.fire_timer();
    h.reply("ok");
    assert_eq!(
        h.take(),
        s(&[
            "retry 2/5 HTTP 500: busy",
            "retry 3/5 HTTP 502: busy",
            "token ok",
            "message_done ok",
            "budget",
            "done stop"
        ])
    );
}

#[test]
fn retry_after_over_a_minute_fails_at_once() {
    let mut h = H::new();
    h.user("hi");
    h.fail(http(503, Some(120), FailureKind::Server));
    assert_eq!(h.take(), s(&["error", "done error"]));
    assert!(h.messages("error")[0].contains("the server asked to wait 120 s; not retrying"));
    assert_eq!(h.core.poll_timeout(), None);
    h.input(Input::EndOfInput);
    assert_eq!(h.core.exit_code(), Some(1));
}

#[test]
fn insufficient_quota_is_not_retried() {
    let mut h = H::new();
    h.user("hi");
    h.fail(http(429, None, FailureKind::InsufficientQuota));
    assert_eq!(h.take(), s(&["error", "done error"]));
    assert!(h.messages("error")[0].contains("insufficient_quota"));
    assert_eq!(h.sends(), 1);
}

#[test]
fn other_4xx_is_not_retried() {
    let mut h = H::new();
    h.user("hi");
    h.fail(http(401, None, FailureKind::Other));
    assert_eq!(h.take(), s(&["error", "done error"]));
    assert!(h.messages("error")[0].contains("HTTP 401"));
}

#[test]
fn three_unreachable_attempts_give_up_early() {
    let mut h = H::new();
    h.user("hi");
    for _ in 0..2 {
        h.fail(RequestFailure::Unreachable {
            detail: "connection refused".into(),
        });
        h.fire_timer();
    }
    h.fail(RequestFailure::Unreachable {
        detail: "connection refused".into(),
    });
    assert_eq!(
        h.take(),
        s(&[
            "retry 2/5 connection refused",
            "retry 3/5 connection refused",
            "error",
            "done error"
        ])
    );
    assert!(h.messages("error")[0].contains("unreachable 3 times"));
    assert_eq!(h.sends(), 3);
}

#[test]
fn a_reached_attempt_resets_the_unreachable_streak() {
    let mut h = H::new();
    h.user("hi");
    h.fail(RequestFailure::Unreachable { detail: "x".into() });
    h.fire_timer();
    h.fail(RequestFailure::Transport {
        detail: "reset".into(),
    });
    h.fire_timer();
    h.fail(RequestFailure::Unreachable { detail: "x".into() });
    h.fire_timer();
    h.fail(RequestFailure::Unreachable { detail: "x".into() });
    h.fire_timer();
    assert_eq!(h.sent(), (1, 5));
    h.reply("ok");
    assert_eq!(h.take().last().unwrap(), "done stop");
}

#[test]
fn attempt_budget_exhausted_is_an_error() {
    let mut c = config();
    c.retry.max_attempts = 2;
    let mut h = H::with(c);
    h.user("hi");
    h.fail(http(503, None, FailureKind::Server));
    h.fire_timer();
    h.fail(http(503, None, FailureKind::Server));
    assert_eq!(
        h.take(),
        s(&["retry 2/2 HTTP 503: busy", "error", "done error"])
    );
    assert!(h.messages("error")[0].contains("after 2 attempts"));
    assert!(
        h.messages("error")[0].ends_with("HTTP 503: busy"),
        "the final error carries the last response's status and message"
    );
}

#[test]
fn ended_without_completion_on_the_last_attempt_is_truncated() {
    let mut c = config();
    c.retry.max_attempts = 2;
    let mut h = H::with(c);
    h.user("hi");
    h.items(vec![
        ProviderItem::Opened,
        ProviderItem::EndedWithoutCompletion {
            detail: "eof".into(),
        },
    ]);
    h.fire_timer();
    h.items(vec![ProviderItem::EndedWithoutCompletion {
        detail: "eof".into(),
    }]);
    assert_eq!(
        h.take(),
        s(&[
            "retry 2/2 the stream ended before any reply text",
            "message_done ",
            "error",
            "done truncated"
        ])
    );
}

#[test]
fn retryable_stream_failure_before_text_is_retried_and_thinking_is_void() {
    let mut h = H::new();
    h.user("hi");
    h.items(vec![
        ProviderItem::Opened,
        ProviderItem::ThinkingDelta { text: "a".into() },
        ProviderItem::Failed {
            kind: FailureKind::Overloaded,
            message: "overloaded".into(),
        },
    ]);
    h.fire_timer();
    h.items(vec![
        ProviderItem::ThinkingDelta { text: "b".into() },
        text_d("hi"),
        ProviderItem::Completed {
            finish_reason: "end_turn".into(),
        },
    ]);
    assert_eq!(
        h.take(),
        s(&[
            "thinking a",
            "retry 2/5 the provider reported overloaded before any reply text: overloaded",
            "thinking b",
            "token hi",
            "message_done hi",
            "budget",
            "done end_turn"
        ])
    );
    let last = h.core.conversation().last().unwrap();
    assert_eq!(
        last.content[0],
        Block::Thinking {
            text: "b".into(),
            signature: None
        }
    );
}

#[test]
fn non_retryable_stream_failure_before_text_fails() {
    let mut h = H::new();
    h.user("hi");
    h.item(ProviderItem::Failed {
        kind: FailureKind::Other,
        message: "invalid request".into(),
    });
    assert_eq!(h.take(), s(&["error", "done error"]));
}

#[test]
fn context_length_failure_with_nothing_to_cut_gives_the_no_op_receipt() {
    let mut h = H::new();
    h.user("hi");
    h.fail(http(400, None, FailureKind::ContextLength));
    assert_eq!(h.take(), s(&["compacted", "error", "done error"]));
    assert!(h.messages("error")[0].contains("context window"));
    let Some(Event::Compacted {
        tokens_before,
        tokens_after,
        compacted_messages,
    }) = h.events.first().cloned()
    else {
        panic!("a receipt first")
    };
    assert_eq!((compacted_messages, tokens_after), (0, tokens_before));
    assert_eq!(h.sends(), 1, "an identical body is not re-sent");
}
