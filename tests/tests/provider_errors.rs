//! The real `openmax --stdio` against the loopback mock, for each provider format: once the
//! retries are spent, the final error carries the last response's status and the server's own
//! message (capped), as the `retry` lines before it do.

use openmax_tests::*;

fn status_with(code: u16, error: &str, message: &str) -> Reply {
    Reply::Status {
        status: code,
        retry_after: None,
        error: Some(error.into()),
        message: Some(message.into()),
    }
}

fn final_error_says_what_the_server_said(flavor: Flavor) {
    let env = TestEnv::new();
    let said = "Rate limit reached for test-model in organization org-1 on tokens per min";
    let mut replies: Vec<Reply> = (0..4)
        .map(|_| status_with(429, "rate_limit_exceeded", "earlier refusal"))
        .collect();
    replies.push(status_with(429, "rate_limit_exceeded", said));
    let mock = MockServer::start(replies);
    env.mock_config(flavor, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("hi");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "error");
    let retries: Vec<_> = evs.iter().filter(|e| e["type"] == "retry").collect();
    assert_eq!(retries.len(), 4);
    assert_eq!(retries[0]["reason"], "HTTP 429: earlier refusal");
    let err = find(&evs, "error")["message"].as_str().unwrap().to_string();
    assert!(err.contains("after 5 attempts"), "{err}");
    assert!(err.ends_with(&format!("HTTP 429: {said}")), "{err}");
    assert_eq!(s.finish().0, Some(1));
    assert_eq!(mock.requests().len(), 5);
}

fn long_server_messages_are_capped(flavor: Flavor) {
    let env = TestEnv::new();
    let huge = "overloaded ".repeat(2000);
    let replies = (0..5)
        .map(|_| status_with(503, "server_error", &huge))
        .collect();
    let mock = MockServer::start(replies);
    env.mock_config(flavor, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("hi");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "error");
    let err = find(&evs, "error")["message"].as_str().unwrap().to_string();
    assert!(err.contains("HTTP 503: overloaded overloaded"), "{err}");
    assert!(
        err.chars().count() < 700,
        "capped: {} chars",
        err.chars().count()
    );
    assert!(err.ends_with('…'), "{err}");
    assert_eq!(s.finish().0, Some(1));
}

macro_rules! per_flavor {
    ($($name:ident),* $(,)?) => {
        mod anthropic { use super::*; $( #[test] fn $name() { super::$name(Flavor::Anthropic) } )* }
        mod openai { use super::*; $( #[test] fn $name() { super::$name(Flavor::Openai) } )* }
        mod openai_chat { use super::*; $( #[test] fn $name() { super::$name(Flavor::OpenaiChat) } )* }
    };
}

per_flavor!(
    final_error_says_what_the_server_said,
    long_server_messages_are_capped
);
