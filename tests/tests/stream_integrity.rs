//! The real `openmax --stdio` against a loopback mock whose stream carries a damaged event (a
//! chunk cut mid-JSON, a lone surrogate escape, a byte that is not UTF-8), in each provider's
//! format: before reply text the request is retried; after reply text the turn ends `error`
//! then `done error` with no `message_done`, and the partial text is not in the session; a
//! tool call from such a stream never runs. Every stream is checked by the validator.

use openmax_tests::*;
use serde_json::{json, Value};

fn setup(flavor: Flavor, replies: Vec<Reply>) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(flavor, &mock.base_url(), "");
    env.trust();
    (env, mock)
}

fn stream(items: Vec<StreamItem>) -> Reply {
    Reply::Stream {
        items,
        end: StreamEnd::Complete { finish: None },
        delay_ms: 0,
    }
}

fn text(t: &str) -> StreamItem {
    StreamItem::Text { text: t.into() }
}

fn corrupt(of: StreamItem, fault: Fault) -> StreamItem {
    StreamItem::Corrupt {
        of: Box::new(of),
        fault,
    }
}

/// The `--continue` transcript's message contents.
fn transcript_contents(env: &TestEnv) -> Vec<String> {
    let mut s = env.stdio(&["--continue"]);
    let t = s.event();
    assert_eq!(t["type"], "transcript", "{t}");
    let contents = t["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(s.finish().0, Some(0));
    contents
}

fn damaged_before_text_is_retried(flavor: Flavor, fault: Fault) {
    let (env, mock) = setup(
        flavor,
        vec![
            stream(vec![corrupt(text("lost words"), fault), text("never")]),
            text_reply("whole answer"),
        ],
    );
    let mut s = env.stdio(&[]);
    s.user("hi");
    let (evs, reason) = s.turn();
    let retry = find(&evs, "retry");
    assert_eq!(retry["attempt"], 2);
    assert!(
        retry["reason"].as_str().unwrap().contains("damaged"),
        "{retry}"
    );
    assert_eq!(tokens(&evs), "whole answer");
    assert_eq!(reason, flavor.default_finish(false));
    assert_eq!(s.finish().0, Some(0));
    assert_eq!(mock.requests().len(), 2);
}

fn damaged_after_text_fails_the_turn(flavor: Flavor, fault: Fault) {
    let (env, mock) = setup(
        flavor,
        vec![stream(vec![
            text("Partial-"),
            corrupt(text("words"), fault),
            text("never"),
        ])],
    );
    let mut s = env.stdio(&[]);
    s.user("hi");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "error", "{evs:?}");
    assert_eq!(tokens(&evs), "Partial-");
    let ty = types(&evs);
    assert!(!ty.contains(&"message_done".to_string()), "{ty:?}");
    assert!(!ty.contains(&"retry".to_string()), "{ty:?}");
    let err = find(&evs, "error");
    assert!(
        err["message"].as_str().unwrap().contains("damaged"),
        "{err}"
    );
    let (code, _, _) = s.finish();
    assert_eq!(code, Some(1), "the last turn ended with error");
    assert_eq!(mock.requests().len(), 1);
    let contents = transcript_contents(&env);
    assert_eq!(
        contents,
        vec!["hi".to_string()],
        "the partial text is not kept"
    );
}

fn damaged_tool_call_never_runs(flavor: Flavor) {
    let call = |id: &str| StreamItem::ToolCall {
        id: id.into(),
        name: "write_file".into(),
        args: json!({"path": "out.txt", "content": "x\n"}),
    };
    let (env, mock) = setup(
        flavor,
        vec![
            // After reply text: the turn fails and the call is dropped.
            stream(vec![
                text("Writing it."),
                corrupt(call("call_a"), Fault::CutJson),
            ]),
            // Before reply text: retried, and the retry's reply is what counts.
            stream(vec![corrupt(call("call_b"), Fault::CutJson)]),
            text_reply("not writing after all"),
        ],
    );
    env.set_mode("auto");
    let mut s = env.stdio(&[]);
    s.user("write it");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "error", "{evs:?}");
    s.user("again");
    let (evs2, reason2) = s.turn();
    assert!(find(&evs2, "retry")["reason"]
        .as_str()
        .unwrap()
        .contains("damaged"));
    assert_eq!(tokens(&evs2), "not writing after all");
    assert_eq!(reason2, flavor.default_finish(false));
    for e in evs.iter().chain(&evs2) {
        assert!(
            !["tool_start", "tool_end", "approval_request"].contains(&e["type"].as_str().unwrap()),
            "no tool runs from a damaged stream: {e}"
        );
    }
    assert_eq!(s.finish().0, Some(0));
    assert!(!env.project.join("out.txt").exists(), "nothing was written");
    assert_eq!(mock.requests().len(), 3);
    // The retried request does not carry the damaged call back to the model.
    let body: Value = mock.requests()[2].body.clone();
    assert!(!body.to_string().contains("call_a"), "{body}");
    assert!(!body.to_string().contains("call_b"), "{body}");
}

macro_rules! per_flavor {
    ($($name:ident($($arg:expr),*)),* $(,)?) => {
        mod anthropic { use super::*; $( #[test] fn $name() { super::$name(Flavor::Anthropic, $($arg),*) } )* }
        mod openai { use super::*; $( #[test] fn $name() { super::$name(Flavor::Openai, $($arg),*) } )* }
        mod openai_chat { use super::*; $( #[test] fn $name() { super::$name(Flavor::OpenaiChat, $($arg),*) } )* }
    };
}

fn cut_before_text(f: Flavor) {
    damaged_before_text_is_retried(f, Fault::CutJson)
}
fn surrogate_before_text(f: Flavor) {
    damaged_before_text_is_retried(f, Fault::LoneSurrogate)
}
fn cut_after_text(f: Flavor) {
    damaged_after_text_fails_the_turn(f, Fault::CutJson)
}
fn surrogate_after_text(f: Flavor) {
    damaged_after_text_fails_the_turn(f, Fault::LoneSurrogate)
}
fn invalid_utf8_after_text(f: Flavor) {
    damaged_after_text_fails_the_turn(f, Fault::InvalidUtf8)
}

per_flavor!(
    cut_before_text(),
    surrogate_before_text(),
    cut_after_text(),
    surrogate_after_text(),
    invalid_utf8_after_text(),
    damaged_tool_call_never_runs(),
);
