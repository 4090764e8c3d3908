//! End to end: the `task` tool through the real binary. A subagent is a child
//! `openmax --stdio` the parent starts and drives; parent and children all reach the same
//! loopback mock, which serves its replies in arrival order and records when each request
//! arrived and when its reply ended (the children of one reply run side by side). Every stream of the parent is
//! validated when the session finishes (the children's are read by the parent itself).

use std::time::Duration;

use openmax_sim::mock::LoggedRequest;
use openmax_tests::*;
use serde_json::{json, Value};

/// A trusted project in `auto` mode whose mock serves `replies` (then short texts).
fn setup(replies: Vec<Reply>) -> (TestEnv, MockServer) {
    setup_with("", replies)
}

/// [`setup`] with `extra` lines in the user's config.
fn setup_with(extra: &str, replies: Vec<Reply>) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), extra);
    env.trust();
    env.set_mode("auto");
    (env, mock)
}

fn task(id: &str, description: &str, prompt: &str) -> (String, String, Value) {
    (
        id.to_string(),
        "task".to_string(),
        json!({"description": description, "prompt": prompt}),
    )
}

fn tasks_reply(calls: &[(String, String, Value)]) -> Reply {
    let calls: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(i, n, a)| (i.as_str(), n.as_str(), a.clone()))
        .collect();
    tool_calls_reply(&calls)
}

/// A stream that sends some text, then goes silent and stays open.
fn stalled(text: &str) -> Reply {
    Reply::Stream {
        items: vec![StreamItem::Text { text: text.into() }],
        end: StreamEnd::Stall,
        delay_ms: 0,
    }
}

/// The `tool_end` of call `id`.
fn end_of<'a>(evs: &'a [Value], id: &str) -> &'a Value {
    evs.iter()
        .find(|e| e["type"] == "tool_end" && e["call_id"] == id)
        .unwrap_or_else(|| panic!("no tool_end for {id}: {:?}", types(evs)))
}

/// The text of the first user message of a logged Anthropic request.
fn first_user_text(body: &Value) -> String {
    let msg = &body["messages"][0]["content"];
    match msg {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The pids of `openmax --stdio` processes whose parent is `parent`.
fn stdio_children(parent: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let ppid: u32 = rest
            .split(' ')
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let has_stdio = cmd.split(|b| *b == 0).any(|a| a == b"--stdio");
        if ppid == parent && has_stdio {
            out.push(pid);
        }
    }
    out
}

/// Wait until `parent` has `n` child sessions running; their pids.
fn wait_children(parent: u32, n: usize) -> Vec<i32> {
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        let c = stdio_children(parent);
        if c.len() >= n {
            return c;
        }
        assert!(
            std::time::Instant::now() < end,
            "{parent} has {} child sessions, not {n}",
            c.len()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A reply whose text comes in three pieces `delay_ms` apart (and ends `delay_ms` after the
/// last): a child's request that stays open a while at the mock.
fn slow_text(text: &str, delay_ms: u64) -> Reply {
    let third = text.len() / 3;
    Reply::Stream {
        items: vec![
            StreamItem::Text {
                text: text[..third].into(),
            },
            StreamItem::Text {
                text: text[third..2 * third].into(),
            },
            StreamItem::Text {
                text: text[2 * third..].into(),
            },
        ],
        end: StreamEnd::Complete { finish: None },
        delay_ms,
    }
}

/// The index of the first event of `type` for call `id`.
fn position(evs: &[Value], ty: &str, id: &str) -> usize {
    evs.iter()
        .position(|e| e["type"] == ty && e["call_id"] == id)
        .unwrap_or_else(|| panic!("no {ty} for {id}: {:?}", types(evs)))
}

/// One reply with two `task` calls whose children's replies each stream for about 1.5 s (one
/// after the other, the second child's request would reach the mock only after the first
/// child's reply ended), then the parent's last reply; with `extra` in the user's config. The
/// parent's turn (ended `end_turn`, both calls ok with their child's answer) and the mock's
/// four requests.
fn two_slow_children(extra: &str) -> (Vec<Value>, Vec<LoggedRequest>) {
    let (env, mock) = setup_with(
        extra,
        vec![
            tasks_reply(&[
                task("t1", "count files", "How many files? Answer ALPHA."),
                task(
                    "t2",
                    "read the readme",
                    "What does the readme say? Answer BETA.",
                ),
            ]),
            slow_text("child answer one", 500),
            slow_text("child answer two", 500),
            text_reply("both done"),
        ],
    );
    let mut s = env.stdio(&[]);
    s.user("split the work");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    let (e1, e2) = (end_of(&evs, "t1"), end_of(&evs, "t2"));
    assert_eq!(
        (e1["ok"].clone(), e2["ok"].clone()),
        (json!(true), json!(true))
    );
    let outs = [
        e1["output"].as_str().unwrap().to_string(),
        e2["output"].as_str().unwrap().to_string(),
    ];
    for (o, d) in outs.iter().zip(["count files", "read the readme"]) {
        assert!(
            o.starts_with(&format!("task \"{d}\" ended end_turn (session ")),
            "{o}"
        );
        assert!(o.contains("0 tool calls"), "{o}");
    }
    let mut answers: Vec<&str> = outs
        .iter()
        .map(|o| o.rsplit("\n\n").next().unwrap())
        .collect();
    answers.sort();
    assert_eq!(answers, ["child answer one", "child answer two"]);
    assert_eq!(s.finish().0, Some(0));

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4, "parent, two children, parent");
    let mut prompts: Vec<String> = reqs[1..3]
        .iter()
        .map(|r| first_user_text(&r.body))
        .collect();
    prompts.sort();
    assert_eq!(
        prompts,
        [
            "How many files? Answer ALPHA.",
            "What does the readme say? Answer BETA."
        ]
    );
    assert!(
        reqs.iter().all(|r| r.has_api_key),
        "every request carries the key"
    );
    // The parent asked again only once both had answered, and its request carries both results.
    let (a_done, b_done) = (answered(&reqs[1]), answered(&reqs[2]));
    assert!(reqs[3].arrived > a_done.max(b_done));
    let last = reqs[3].body.to_string();
    assert!(
        last.contains("child answer one") && last.contains("child answer two"),
        "{last}"
    );
    (evs, reqs)
}

/// When the mock's reply to a request ended.
fn answered(r: &LoggedRequest) -> std::time::Instant {
    r.answered.expect("the reply ended")
}

#[test]
fn two_task_calls_run_two_children_side_by_side_and_the_next_request_carries_both_results() {
    let (evs, reqs) = two_slow_children("");
    // Both calls started before either ended.
    assert!(
        position(&evs, "tool_start", "t2") < position(&evs, "tool_end", "t1"),
        "{:?}",
        types(&evs)
    );
    // The children's requests overlap at the mock: the second arrived while the first's reply
    // was still streaming.
    let (a, b) = (&reqs[1], &reqs[2]);
    eprintln!(
        "children at the mock, from the first's arrival: first until {:?}, second from {:?} \
         until {:?}",
        answered(a) - a.arrived,
        b.arrived - a.arrived,
        answered(b) - a.arrived
    );
    assert!(
        b.arrived < answered(a),
        "the second child's request came {:?} after the first child's reply ended",
        b.arrived - answered(a)
    );
}

#[test]
fn max_parallel_one_runs_the_children_one_after_another() {
    let (evs, reqs) = two_slow_children("\n[tasks]\nmax_parallel = 1\n");
    assert!(
        position(&evs, "tool_end", "t1") < position(&evs, "tool_start", "t2"),
        "{:?}",
        types(&evs)
    );
    let (a, b) = (&reqs[1], &reqs[2]);
    assert!(
        b.arrived > answered(a),
        "the second child's request came while the first child's reply streamed"
    );
}

#[test]
fn a_child_killed_mid_turn_fails_its_call() {
    let (env, mock) = setup(vec![
        tasks_reply(&[task("t1", "slow work", "Work slowly.")]),
        stalled("thinking about it"),
        text_reply("the subagent died"),
    ]);
    let mut s = env.stdio(&[]);
    s.user("delegate");
    s.until(|e| e["type"] == "tool_start" && e["call_id"] == "t1");
    mock.wait_requests(2, DEADLINE)
        .expect("the child's request");
    let child = wait_children(s.pid(), 1)[0];
    // SAFETY: a plain kill(2) of the test's own grandchild.
    unsafe { libc::kill(child, libc::SIGKILL) };
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    let end = end_of(&evs, "t1");
    assert_eq!(end["ok"], false, "{end}");
    let out = end["output"].as_str().unwrap();
    assert!(
        out.contains("task \"slow work\" failed: it exited before its done"),
        "{out}"
    );
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn depth_one_refuses_a_grandchild_with_a_clear_tool_error() {
    let (env, mock) = setup(vec![
        tasks_reply(&[task("t1", "delegate further", "Start a task of your own.")]),
        tasks_reply(&[task("g1", "grandchild", "You should never run.")]),
        text_reply("I could not delegate"),
        text_reply("parent done"),
    ]);
    let mut s = env.stdio(&[]);
    s.user("go deep");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    let end = end_of(&evs, "t1");
    assert_eq!(end["ok"], true, "{end}");
    let out = end["output"].as_str().unwrap();
    assert!(
        out.contains("1 tool call,") && out.ends_with("I could not delegate"),
        "{out}"
    );
    assert_eq!(s.finish().0, Some(0));
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4, "no grandchild request");
    let child_second = reqs[2].body.to_string();
    assert!(
        child_second.contains("depth 1") && child_second.contains("max_depth is 1"),
        "{child_second}"
    );
}

#[test]
fn cancel_during_a_childs_stream_ends_it_and_leaves_no_child_process() {
    let (env, mock) = setup(vec![
        tasks_reply(&[task("t1", "long stream", "Stream forever.")]),
        stalled("still going"),
    ]);
    let mut s = env.stdio(&[]);
    s.user("delegate");
    s.until(|e| e["type"] == "tool_start" && e["call_id"] == "t1");
    mock.wait_requests(2, DEADLINE)
        .expect("the child's request");
    let child = wait_children(s.pid(), 1)[0];
    s.send(json!({"cmd": "cancel"}));
    let (evs, reason) = s.turn();
    assert_eq!(reason, "cancelled", "{:?}", types(&evs));
    let end = end_of(&evs, "t1");
    assert_eq!(end["ok"], false, "{end}");
    assert!(
        wait_gone(child),
        "the child session {child} outlived the cancel"
    );
    assert!(stdio_children(s.pid()).is_empty());
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn cancel_during_two_childrens_streams_ends_both_and_leaves_no_child_process() {
    let (env, mock) = setup(vec![
        tasks_reply(&[
            task("t1", "first long stream", "Stream forever."),
            task("t2", "second long stream", "Stream forever too."),
        ]),
        stalled("still going"),
        stalled("also going"),
    ]);
    let mut s = env.stdio(&[]);
    s.user("delegate twice");
    mock.wait_requests(3, DEADLINE)
        .expect("both children's requests");
    let children = wait_children(s.pid(), 2);
    s.send(json!({"cmd": "cancel"}));
    let (evs, reason) = s.turn();
    assert_eq!(reason, "cancelled", "{:?}", types(&evs));
    for id in ["t1", "t2"] {
        let end = end_of(&evs, id);
        assert_eq!(end["ok"], false, "{end}");
        assert_eq!(
            evs.iter()
                .filter(|e| e["type"] == "tool_end" && e["call_id"] == id)
                .count(),
            1,
            "{id} ends once"
        );
    }
    for child in children {
        assert!(
            wait_gone(child),
            "the child session {child} outlived the cancel"
        );
    }
    assert!(stdio_children(s.pid()).is_empty());
    assert_eq!(s.finish().0, Some(0));
    assert_eq!(mock.requests().len(), 3, "no request after the cancel");
}
