//! End to end: subagents in the frontends other than `--stdio`. The terminal UI (a real
//! terminal, a tmux pane) shows a running `task` call as a live line (its description, how long
//! it has run, its child's tool calls so far), counted by the shell as it reads the child's
//! events; and `-p --output-format json` adds the children's tokens to its totals, with their
//! part under `subagents`.

use openmax_tests::tmux::Pane;
use openmax_tests::*;
use serde_json::{json, Value};

/// A trusted project in `auto` mode whose mock serves `replies`.
fn setup(replies: Vec<Reply>) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.set_mode("auto");
    (env, mock)
}

fn with_usage(mut items: Vec<StreamItem>, p: u64, c: u64, cached: Option<u64>) -> Reply {
    items.push(StreamItem::Usage {
        prompt_tokens: p,
        completion_tokens: c,
        cached_tokens: cached,
    });
    Reply::Stream {
        items,
        end: StreamEnd::Complete { finish: None },
        delay_ms: 0,
    }
}

fn task_call(id: &str, description: &str) -> StreamItem {
    StreamItem::ToolCall {
        id: id.into(),
        name: "task".into(),
        args: json!({"description": description, "prompt": "Look around and report."}),
    }
}

#[test]
fn print_json_totals_include_the_childrens_tokens() {
    let (env, _mock) = setup(vec![
        with_usage(vec![task_call("t1", "look around")], 1_000, 100, Some(0)),
        with_usage(
            vec![StreamItem::Text {
                text: "child says hi".into(),
            }],
            500,
            50,
            Some(200),
        ),
        with_usage(
            vec![StreamItem::Text {
                text: "all done".into(),
            }],
            2_000,
            20,
            None,
        ),
    ]);
    let out = env.run(&["-p", "delegate", "--output-format", "json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let o: Value = serde_json::from_str(out.stdout.trim()).expect("one JSON object");
    assert_eq!(o["result"], "all done");
    assert_eq!(o["tool_calls"], 1, "this session's calls");
    assert_eq!(
        o["usage"],
        json!({"prompt_tokens":3500,"completion_tokens":170,"cached_tokens":200,"requests":3})
    );
    assert_eq!(
        o["subagents"],
        json!({"tasks":1,"tool_calls":0,"prompt_tokens":500,"completion_tokens":50,"cached_tokens":200,"requests":1})
    );
}

#[test]
fn print_json_without_tasks_has_empty_subagents() {
    // The control: no task, nothing added.
    let (env, _mock) = setup(vec![with_usage(
        vec![StreamItem::Text { text: "hi".into() }],
        100,
        10,
        None,
    )]);
    let out = env.run(&["-p", "hello", "--output-format", "json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let o: Value = serde_json::from_str(out.stdout.trim()).expect("one JSON object");
    let u = &o["usage"];
    assert_eq!(
        (&u["prompt_tokens"], &u["completion_tokens"], &u["requests"]),
        (&json!(100), &json!(10), &json!(1))
    );
    assert_eq!(o["subagents"]["tasks"], 0);
    assert_eq!(o["subagents"]["prompt_tokens"], 0);
}

#[test]
fn the_tui_shows_a_running_task_as_a_live_line() {
    let pieces: Vec<StreamItem> = (0..40)
        .map(|i| StreamItem::Text {
            text: format!("w{i} "),
        })
        .collect();
    let (env, _mock) = setup(vec![
        tool_calls_reply(&[(
            "t1",
            "task",
            json!({"description": "survey the tree", "prompt": "Read a.txt, then think."}),
        )]),
        tool_reply("c1", "read_file", json!({"path": "a.txt"})),
        Reply::Stream {
            items: pieces,
            end: StreamEnd::Complete { finish: None },
            delay_ms: 100,
        },
        text_reply("the subagent reported back"),
    ]);
    env.write("a.txt", "hello\n");
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("test-model");
    pane.type_text("delegate the survey");
    pane.keys(&["Enter"]);
    let live = pane.wait_screen("the task's live line with its child's tool call", |s| {
        s.contains("subagent: survey the tree · ") && s.contains("1 tool call so far")
    });
    let line = live
        .lines()
        .find(|l| l.contains("subagent: survey the tree"))
        .unwrap();
    assert!(line.contains("s · 1 tool call so far"), "{line}");
    // The line ticks while the child works: its elapsed seconds grow.
    let secs = |l: &str| -> u64 {
        l.split(" · ")
            .nth(1)
            .unwrap()
            .trim_end_matches('s')
            .parse()
            .unwrap()
    };
    let first = secs(line);
    let later = pane.wait_screen("the elapsed time to grow", |s| {
        s.lines()
            .find(|l| l.contains("subagent: survey the tree"))
            .is_some_and(|l| secs(l) > first)
    });
    assert!(later.contains("1 tool call so far"), "{later}");
    // Once the call ends the live line is gone, and the turn goes on.
    let after = pane.wait_text("the subagent reported back");
    assert!(!after.contains("subagent: survey the tree ·"), "{after}");
    pane.keys(&["C-d"]);
    let (code, _) = pane.wait_exit();
    assert_eq!(code, 0, "{}", pane.history());
}
