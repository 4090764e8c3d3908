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

// ----- a child's approvals, carried up to the parent's client -------------------------------

/// A trusted project in `ask` mode whose mock serves `replies`.
fn setup_ask(replies: Vec<Reply>) -> (TestEnv, MockServer) {
    let (env, mock) = setup(replies);
    env.set_mode("ask");
    (env, mock)
}

/// A child's `write_file` call of `path`.
fn child_writes(id: &str, path: &str, content: &str) -> Reply {
    tool_reply(id, "write_file", json!({"path": path, "content": content}))
}

/// Read until the next `approval_request`; it.
fn next_request(s: &mut Session) -> Value {
    s.until_type("approval_request").pop().unwrap()
}

/// Approve the parent's own gate of the `task` call (its summary is `task: <description>`).
fn approve_the_task(s: &mut Session, description: &str) {
    let req = next_request(s);
    assert_eq!(req["summary"], format!("task: {description}"), "{req}");
    s.approve(&req["approval_id"], true);
}

/// The `approval_settled` of `id` among `evs`.
fn settled_of<'a>(evs: &'a [Value], id: &Value) -> &'a Value {
    evs.iter()
        .find(|e| e["type"] == "approval_settled" && e["approval_id"] == *id)
        .unwrap_or_else(|| panic!("no approval_settled for {id}: {:?}", types(evs)))
}

#[test]
fn a_childs_write_file_approval_reaches_the_client_with_the_description_and_both_answers_reach_the_child(
) {
    let (env, mock) = setup_ask(vec![
        tasks_reply(&[task("t1", "write the notes", "Write two files.")]),
        child_writes("w1", "notes.txt", "kept\n"),
        child_writes("w2", "other.txt", "refused\n"),
        text_reply("wrote notes.txt; other.txt was declined"),
        text_reply("the subagent is done"),
    ]);
    let mut s = env.stdio(&[]);
    s.user("delegate the writing");
    approve_the_task(&mut s, "write the notes");
    // The child's first write: a request of the parent, its summary behind the description.
    let first = next_request(&mut s);
    assert_eq!(first["name"], "write_file", "{first}");
    assert_eq!(first["reason"], "gate", "{first}");
    assert_eq!(
        (&first["source_path"], &first["source_sha"]),
        (&json!(""), &json!(""))
    );
    assert!(first.get("env").is_none(), "{first}");
    let summary = first["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("write the notes: ") && summary.contains("notes.txt"),
        "{summary}"
    );
    assert_eq!(
        env.read("notes.txt"),
        None,
        "nothing is written before the answer"
    );
    s.approve(&first["approval_id"], true);
    // Approved: the child wrote it before it asked for the second.
    let second = next_request(&mut s);
    assert_ne!(second["approval_id"], first["approval_id"]);
    assert_eq!(env.read("notes.txt").as_deref(), Some("kept\n"));
    assert!(
        second["summary"]
            .as_str()
            .unwrap()
            .starts_with("write the notes: "),
        "{second}"
    );
    s.approve(&second["approval_id"], false);
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    assert_eq!(
        settled_of(&evs, &second["approval_id"])["outcome"],
        "declined"
    );
    let end = end_of(&evs, "t1");
    assert_eq!(end["ok"], true, "{end}");
    let out = end["output"].as_str().unwrap();
    assert!(
        out.contains("\ndeclined: ") && out.contains("other.txt"),
        "{out}"
    );
    assert!(out.ends_with("other.txt was declined"), "{out}");
    assert_eq!(env.read("other.txt"), None, "the declined write never ran");
    // The decline reached the child: its next request carries the declined result.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 5);
    let child_third = reqs[3].body.to_string();
    assert!(child_third.contains("declined"), "{child_third}");
    // A settled forwarded id is answered like any settled id.
    s.approve(&first["approval_id"], true);
    let e = s.event();
    assert_eq!(e["type"], "protocol_error", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("already settled"),
        "{e}"
    );
    assert_eq!(s.finish().0, Some(0));
}

/// The `deploy` tool: a manifest naming a project script (external code no human approved).
fn deploy_tool(env: &TestEnv) {
    env.write(
        ".openmax/tools/deploy.json",
        r#"{"name":"deploy","description":"Deploy","parameters":{"type":"object"},"command":["sh","tools/deploy.sh"],"env":["DEPLOY_TOKEN"]}"#,
    );
    env.write("tools/deploy.sh", "cat >/dev/null; echo deployed\n");
}

#[test]
fn an_unapproved_source_in_a_child_is_forwarded_in_auto_while_its_gate_is_approved() {
    let (env, mock) = setup_ask(vec![
        tasks_reply(&[task("t1", "ship it", "Write the notes, then deploy.")]),
        // The child's first reply comes slowly: the client switches to auto meanwhile.
        Reply::Stream {
            items: vec![
                StreamItem::Text {
                    text: "On it.".into(),
                },
                StreamItem::ToolCall {
                    id: "w1".into(),
                    name: "write_file".into(),
                    args: json!({"path": "notes.txt", "content": "shipped\n"}),
                },
            ],
            end: StreamEnd::Complete { finish: None },
            delay_ms: 1500,
        },
        tool_reply("d1", "deploy", json!({})),
        text_reply("deployed it"),
        text_reply("all shipped"),
    ]);
    deploy_tool(&env);
    let mut s = env.stdio(&[]);
    s.user("ship");
    approve_the_task(&mut s, "ship it");
    // The child started in ask (the saved mode); now the parent goes auto.
    mock.wait_requests(2, DEADLINE)
        .expect("the child's request");
    s.send(json!({"cmd": "approval_mode", "mode": "auto"}));
    s.until_type("approval_mode");
    // The child's write is a gate: in auto the parent answers it as it would its own (no
    // request on its wire); the external bytes are the client's alone to approve.
    let req = next_request(&mut s);
    assert_eq!(req["reason"], "unapproved_source", "{req}");
    assert_eq!(req["name"], "deploy");
    assert_eq!(req["source_path"], ".openmax/tools/deploy.json");
    assert_eq!(req["source_sha"].as_str().unwrap().len(), 12, "{req}");
    assert_eq!(req["env"], json!(["DEPLOY_TOKEN"]));
    assert!(
        req["summary"].as_str().unwrap().starts_with("ship it: "),
        "{req}"
    );
    assert_eq!(env.read("notes.txt").as_deref(), Some("shipped\n"));
    // Not answered by anything but the client: nothing settles it while the client waits.
    let quiet = s.try_event(Duration::from_millis(700));
    assert!(
        quiet.is_none(),
        "the forwarded request was answered for the client: {quiet:?}"
    );
    assert_eq!(mock.requests().len(), 3, "the child waits for the answer");
    s.approve(&req["approval_id"], true);
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    assert_eq!(settled_of(&evs, &req["approval_id"])["outcome"], "approved");
    assert_eq!(
        evs.iter()
            .filter(|e| e["type"] == "approval_request")
            .count(),
        0,
        "one request only: {:?}",
        types(&evs)
    );
    let end = end_of(&evs, "t1");
    assert!(
        end["output"].as_str().unwrap().ends_with("deployed it"),
        "{end}"
    );
    // The deploy ran in the child: its next request carries the tool's output.
    let reqs = mock.requests();
    assert!(
        reqs[3].body.to_string().contains("deployed"),
        "{}",
        reqs[3].body
    );
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn cancel_with_a_forwarded_approval_pending_settles_it_cancelled_and_ends_the_child() {
    let (env, mock) = setup_ask(vec![
        tasks_reply(&[task("t1", "write the notes", "Write a file.")]),
        child_writes("w1", "notes.txt", "never\n"),
    ]);
    let mut s = env.stdio(&[]);
    s.user("delegate");
    approve_the_task(&mut s, "write the notes");
    let req = next_request(&mut s);
    let child = wait_children(s.pid(), 1)[0];
    s.send(json!({"cmd": "cancel"}));
    let (evs, reason) = s.turn();
    assert_eq!(reason, "cancelled", "{:?}", types(&evs));
    assert_eq!(
        settled_of(&evs, &req["approval_id"])["outcome"],
        "cancelled"
    );
    assert_eq!(end_of(&evs, "t1")["ok"], false);
    assert!(
        wait_gone(child),
        "the child session {child} outlived the cancel"
    );
    assert_eq!(env.read("notes.txt"), None);
    // Control: the same id answered now is a settled id.
    s.approve(&req["approval_id"], true);
    assert_eq!(s.event()["type"], "protocol_error");
    assert_eq!(s.finish().0, Some(0));
    assert_eq!(mock.requests().len(), 2, "nothing asked after the cancel");
}

#[test]
fn at_end_of_input_a_pending_forwarded_approval_is_declined_and_the_child_finishes() {
    let (env, mock) = setup_ask(vec![
        tasks_reply(&[task("t1", "write the notes", "Write a file.")]),
        child_writes("w1", "notes.txt", "never\n"),
        text_reply("the write was declined"),
        text_reply("parent done"),
    ]);
    let mut s = env.stdio(&[]);
    s.user("delegate");
    approve_the_task(&mut s, "write the notes");
    let req = next_request(&mut s);
    let (code, rest, _) = s.finish();
    assert_eq!(code, Some(0));
    assert_eq!(
        settled_of(&rest, &req["approval_id"])["outcome"],
        "declined"
    );
    let end = end_of(&rest, "t1");
    assert_eq!(end["ok"], true, "{end}");
    assert!(
        end["output"]
            .as_str()
            .unwrap()
            .ends_with("the write was declined"),
        "{end}"
    );
    assert_eq!(env.read("notes.txt"), None);
    assert_eq!(
        mock.requests().len(),
        4,
        "the child went on after the decline"
    );
}

#[test]
fn print_mode_answers_a_childs_requests_as_it_does_its_own() {
    let (env, mock) = setup_ask(vec![
        tasks_reply(&[task("t1", "ship it", "Write the notes, then deploy.")]),
        child_writes("w1", "notes.txt", "shipped\n"),
        tool_reply("d1", "deploy", json!({})),
        text_reply("could not deploy"),
        text_reply("half shipped"),
    ]);
    deploy_tool(&env);
    // This run chose auto: the child (in the saved ask) asks, and the gate is approved as
    // this run would approve its own; the external bytes are declined, as -p declines its
    // own, and said on stderr with the command that approves them.
    let out = env.run(&["-p", "ship", "--mode", "auto"]);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(out.stdout.contains("half shipped"), "{}", out.stdout);
    assert_eq!(env.read("notes.txt").as_deref(), Some("shipped\n"));
    assert!(
        out.stderr.contains("declined: ship it: ")
            && out
                .stderr
                .contains("openmax --approve .openmax/tools/deploy.json"),
        "{}",
        out.stderr
    );
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 5);
    assert!(
        reqs[3].body.to_string().contains("declined"),
        "{}",
        reqs[3].body
    );
}
