//! The real `openmax --stdio` against the loopback mock, for each of the three providers: the
//! same scenarios served in Anthropic Messages, OpenAI Responses and Chat Completions format.
//! Every stream is checked by the validator when the session finishes.

use std::time::{Duration, Instant};

use openmax_tests::*;
use serde_json::json;

fn setup(flavor: Flavor, replies: Vec<Reply>, extra: &str) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(flavor, &mock.base_url(), extra);
    env.trust();
    (env, mock)
}

fn plain_reply(flavor: Flavor) {
    let (env, mock) = setup(flavor, vec![text_reply("Hello there")], "");
    let mut s = env.stdio(&[]);
    s.user("hi");
    let (evs, reason) = s.turn();
    assert_eq!(tokens(&evs), "Hello there");
    assert!(types(&evs).contains(&"message_done".to_string()));
    assert_eq!(reason, flavor.default_finish(false));
    let (code, _, _) = s.finish();
    assert_eq!(code, Some(0));
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].has_api_key, "the key from {KEY_VAR} is sent");
}

fn thinking(flavor: Flavor) {
    let reply = Reply::Stream {
        items: vec![
            StreamItem::Thinking {
                text: "let me think".into(),
            },
            StreamItem::Text {
                text: "answer".into(),
            },
        ],
        end: StreamEnd::Complete { finish: None },
        delay_ms: 0,
    };
    let (env, _mock) = setup(flavor, vec![reply], "");
    let mut s = env.stdio(&[]);
    s.user("think");
    let (evs, _) = s.turn();
    let thought: String = evs
        .iter()
        .filter(|e| e["type"] == "thinking")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(thought, "let me think");
    assert_eq!(tokens(&evs), "answer");
    assert_eq!(s.finish().0, Some(0));
}

fn tool_round_trip(flavor: Flavor) {
    let (env, mock) = setup(
        flavor,
        vec![
            tool_reply("call_1", "read_file", json!({"path":"a.txt"})),
            text_reply("it says hi"),
        ],
        "",
    );
    std::fs::write(env.project.join("a.txt"), "hi\n").unwrap();
    let mut s = env.stdio(&[]);
    s.user("read a.txt");
    let (evs, reason) = s.turn();
    let start = evs.iter().find(|e| e["type"] == "tool_start").unwrap();
    assert_eq!(start["name"], "read_file");
    assert_eq!(start["args"], json!({"path":"a.txt"}));
    let end = evs.iter().find(|e| e["type"] == "tool_end").unwrap();
    assert_eq!(end["ok"], true);
    assert!(end["output"].as_str().unwrap().contains("hi"));
    assert_eq!(tokens(&evs), "it says hi");
    assert_eq!(reason, flavor.default_finish(false));
    assert_eq!(s.finish().0, Some(0));
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    // The second request carries the tool result back to the model.
    assert!(reqs[1].body.to_string().contains("hi\\n") || reqs[1].body.to_string().contains("hi"));
}

fn retry_after_503(flavor: Flavor) {
    let (env, mock) = setup(
        flavor,
        vec![status(503, None, None), text_reply("recovered")],
        "",
    );
    let mut s = env.stdio(&[]);
    s.user("go");
    let (evs, reason) = s.turn();
    let retry = evs
        .iter()
        .find(|e| e["type"] == "retry")
        .expect("a retry line");
    assert_eq!(retry["attempt"], 2);
    assert_eq!(retry["max_attempts"], 5);
    assert_eq!(tokens(&evs), "recovered");
    assert_eq!(reason, flavor.default_finish(false));
    assert_eq!(s.finish().0, Some(0));
    assert_eq!(mock.requests().len(), 2);
}

fn retry_after_honored(flavor: Flavor) {
    let (env, mock) = setup(
        flavor,
        vec![status(429, Some("1"), None), text_reply("after the wait")],
        "",
    );
    let mut s = env.stdio(&[]);
    s.user("go");
    s.until_type("retry");
    let seen_retry = Instant::now();
    let reqs = mock
        .wait_requests(2, DEADLINE)
        .expect("the second attempt arrives");
    // The retry line is written before the wait, so the second attempt comes at least the
    // server's 1 s after it (a lower bound only: never flaky on a slow machine).
    assert!(seen_retry.elapsed() >= Duration::from_millis(900));
    assert_eq!(reqs.len(), 2);
    let (evs, _) = s.turn();
    assert_eq!(tokens(&evs), "after the wait");
    assert_eq!(s.finish().0, Some(0));
}

fn retry_after_120_fails_at_once(flavor: Flavor) {
    let (env, mock) = setup(flavor, vec![status(429, Some("120"), None)], "");
    let mut s = env.stdio(&[]);
    s.user("go");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "error");
    assert!(!types(&evs).contains(&"retry".to_string()));
    let err = evs.iter().find(|e| e["type"] == "error").unwrap();
    assert!(err["message"].as_str().unwrap().contains("120"), "{err}");
    assert_eq!(s.finish().0, Some(1), "the last turn ended error");
    assert_eq!(mock.requests().len(), 1);
}

fn insufficient_quota_fails_at_once(flavor: Flavor) {
    let (env, mock) = setup(
        flavor,
        vec![status(429, None, Some("insufficient_quota"))],
        "",
    );
    let mut s = env.stdio(&[]);
    s.user("go");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "error");
    assert!(!types(&evs).contains(&"retry".to_string()));
    assert_eq!(s.finish().0, Some(1));
    assert_eq!(mock.requests().len(), 1);
}

fn connection_refused_gives_up(flavor: Flavor) {
    let env = TestEnv::new();
    let url = unused_loopback_url().unwrap();
    env.mock_config(flavor, &url, "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("go");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "error");
    let retries: Vec<_> = evs.iter().filter(|e| e["type"] == "retry").collect();
    // Three attempts that never reached the endpoint: two retries, then give up (budget 5).
    assert_eq!(retries.len(), 2, "{evs:?}");
    assert_eq!(s.finish().0, Some(1));
}

fn abort_mid_stream_truncated(flavor: Flavor) {
    let reply = Reply::Stream {
        items: vec![StreamItem::Text {
            text: "partial ans".into(),
        }],
        end: StreamEnd::Abort,
        delay_ms: 0,
    };
    let (env, _mock) = setup(flavor, vec![reply], "");
    let mut s = env.stdio(&[]);
    s.user("go");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "truncated");
    let t = types(&evs);
    let md = t
        .iter()
        .position(|x| x == "message_done")
        .expect("message_done");
    let er = t.iter().position(|x| x == "error").expect("error");
    assert!(md < er);
    assert_eq!(evs[md]["text"], "partial ans");
    assert_eq!(s.finish().0, Some(0));
}

fn provider_error_after_tokens(flavor: Flavor) {
    let reply = Reply::Stream {
        items: vec![StreamItem::Text {
            text: "some text".into(),
        }],
        end: StreamEnd::Error {
            error: "overloaded_error".into(),
            message: "Overloaded".into(),
        },
        delay_ms: 0,
    };
    let (env, mock) = setup(flavor, vec![reply], "");
    let mut s = env.stdio(&[]);
    s.user("go");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "error");
    let t = types(&evs);
    assert!(t.contains(&"token".to_string()));
    assert!(!t.contains(&"message_done".to_string()));
    assert!(
        !t.contains(&"retry".to_string()),
        "reply text arrived: no retry"
    );
    assert_eq!(s.finish().0, Some(1));
    assert_eq!(mock.requests().len(), 1);
}

fn stall_hits_idle_timeout(flavor: Flavor) {
    let reply = Reply::Stream {
        items: vec![StreamItem::Text {
            text: "started".into(),
        }],
        end: StreamEnd::Stall,
        delay_ms: 0,
    };
    let (env, _mock) = setup(flavor, vec![reply], "stream_idle_timeout_s = 0.3");
    let mut s = env.stdio(&[]);
    s.user("go");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "truncated", "{evs:?}");
    assert!(types(&evs).contains(&"error".to_string()));
    assert_eq!(s.finish().0, Some(0));
}

fn slow_stream(n: usize) -> Reply {
    Reply::Stream {
        items: (0..n)
            .map(|i| StreamItem::Text {
                text: format!("w{i} "),
            })
            .collect(),
        end: StreamEnd::Complete { finish: None },
        delay_ms: 100,
    }
}

fn cancel_mid_stream(flavor: Flavor) {
    let (env, _mock) = setup(flavor, vec![slow_stream(100)], "");
    let mut s = env.stdio(&[]);
    s.user("go");
    s.until_type("token");
    s.send(json!({"cmd":"cancel"}));
    let (_, reason) = s.turn();
    assert_eq!(reason, "cancelled");
    assert_eq!(s.finish().0, Some(0));
}

fn user_while_in_flight(flavor: Flavor) {
    let (env, _mock) = setup(flavor, vec![slow_stream(5), text_reply("second")], "");
    let mut s = env.stdio(&[]);
    s.user("first");
    s.until_type("token");
    s.user("second");
    let (evs, reason) = s.turn();
    assert_eq!(
        evs.iter().filter(|e| e["type"] == "protocol_error").count(),
        1,
        "{evs:?}"
    );
    assert_eq!(reason, flavor.default_finish(false));
    // The first token was read above; the rest of the first reply follows.
    assert_eq!(tokens(&evs), "w1 w2 w3 w4 ");
    s.user("again");
    let (evs, _) = s.turn();
    assert_eq!(tokens(&evs), "second");
    assert_eq!(s.finish().0, Some(0));
}

fn bad_lines_then_working_turn(flavor: Flavor) {
    let (env, _mock) = setup(flavor, vec![text_reply("still fine")], "");
    let mut s = env.stdio(&[]);
    let mut big = vec![b'x'; 9 * 1024 * 1024];
    big.push(b'\n');
    s.send_bytes(&big);
    let pe = s.event();
    assert_eq!(pe["type"], "protocol_error", "{pe}");
    s.send_bytes(b"{\"cmd\":\"user\",\"text\":\"\xff\xfe\"}\n");
    let pe = s.event();
    assert_eq!(pe["type"], "protocol_error", "{pe}");
    s.user("hello");
    let (evs, _) = s.turn();
    assert_eq!(tokens(&evs), "still fine");
    assert_eq!(s.finish().0, Some(0));
}

fn eof_with_pending_approval(flavor: Flavor) {
    let (env, _mock) = setup(
        flavor,
        vec![
            tool_reply(
                "call_w",
                "write_file",
                json!({"path":"new.txt","content":"x\n"}),
            ),
            text_reply("ok, not written"),
        ],
        "",
    );
    let mut s = env.stdio(&[]);
    s.user("write it");
    let evs = s.until_type("approval_request");
    assert_eq!(evs.last().unwrap()["reason"], "gate");
    let (code, rest, _) = s.finish();
    let settled = rest
        .iter()
        .find(|e| e["type"] == "approval_settled")
        .expect("the pending approval settles");
    assert_eq!(settled["outcome"], "declined");
    assert!(rest.iter().any(|e| e["type"] == "done"));
    assert_eq!(code, Some(0));
    assert!(!env.project.join("new.txt").exists(), "nothing was written");
}

macro_rules! per_flavor {
    ($($name:ident),* $(,)?) => {
        mod anthropic { use super::*; $( #[test] fn $name() { super::$name(Flavor::Anthropic) } )* }
        mod openai { use super::*; $( #[test] fn $name() { super::$name(Flavor::Openai) } )* }
        mod openai_chat { use super::*; $( #[test] fn $name() { super::$name(Flavor::OpenaiChat) } )* }
    };
}

per_flavor!(
    plain_reply,
    thinking,
    tool_round_trip,
    retry_after_503,
    retry_after_honored,
    retry_after_120_fails_at_once,
    insufficient_quota_fails_at_once,
    connection_refused_gives_up,
    abort_mid_stream_truncated,
    provider_error_after_tokens,
    stall_hits_idle_timeout,
    cancel_mid_stream,
    user_while_in_flight,
    bad_lines_then_working_turn,
    eof_with_pending_approval,
);
