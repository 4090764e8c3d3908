//! End to end, in a real terminal (a tmux pane) against the loopback mock: what a person meets on
//! a first day with the UI. A finished reply stays where it streamed; the UI asks at start-up what
//! only a human can answer (trust, a project's MCP server); the slash menu and its commands;
//! quick Shift-Tabs land every mode.

use openmax_tests::deps::everything_js;
use openmax_tests::tmux::Pane;
use openmax_tests::*;
use serde_json::{json, Value};

/// A trusted project whose mock serves `replies`.
fn setup(replies: Vec<Reply>) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    (env, mock)
}

/// The screen's rows above the rule that opens the live region's fixed part.
fn above_rule(screen: &str) -> Vec<String> {
    screen
        .lines()
        .take_while(|l| !l.starts_with("────"))
        .map(|l| l.trim_end().to_string())
        .collect()
}

#[test]
fn a_tall_reply_stays_where_it_streamed_when_it_finishes() {
    // Twenty rows of Markdown in a 30-row pane: more than half of it.
    let md: String = (1..=20)
        .map(|i| format!("- item {i} of the list\n"))
        .collect();
    let reply = Reply::Stream {
        items: vec![
            StreamItem::Text { text: md.clone() },
            StreamItem::Usage {
                prompt_tokens: 10,
                completion_tokens: 20,
                cached_tokens: None,
            },
        ],
        end: StreamEnd::Complete { finish: None },
        // The whole text is on screen well before the stream completes.
        delay_ms: 1500,
    };
    // A first exchange fills the screen, so the live region sits at its bottom.
    let first: String = (1..=30).map(|i| format!("earlier line {i}\n\n")).collect();
    let (env, _mock) = setup(vec![text_reply(&first), reply]);
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("test-model");
    pane.type_text("fill the screen");
    pane.keys(&["Enter"]);
    pane.wait_for("the first turn's end", |s| {
        s.contains("earlier line 30") && s.contains("type a prompt")
    });
    pane.type_text("list twenty things");
    pane.keys(&["Enter"]);
    let before = pane.wait_screen("the whole reply streaming", |s| {
        s.contains("item 20 of the list") && s.contains("Esc to cancel")
    });
    let after = pane.wait_screen("the turn's end", |s| s.contains("type a prompt"));
    let (b, a) = (above_rule(&before), above_rule(&after));
    let row = |rows: &[String], text: &str| rows.iter().position(|r| r.contains(text));
    assert!(row(&b, "item 1 of").is_some(), "{before}");
    // Every row of the reply is on the same screen row before and after `message_done`, and the
    // prompt above it did not leave the screen.
    for text in [
        "list twenty things",
        "item 1 of",
        "item 10 of",
        "item 20 of",
    ] {
        assert_eq!(
            row(&b, text),
            row(&a, text),
            "{text:?} moved\nbefore:\n{before}\nafter:\n{after}"
        );
    }
    assert_eq!(b, a[..b.len()], "before:\n{before}\nafter:\n{after}");
    // No blank lower screen: the live region follows the reply at once.
    let rule = after.lines().position(|l| l.starts_with("────")).unwrap();
    let last = row(&a, "item 20 of").unwrap();
    assert!(rule <= last + 2, "a gap under the reply:\n{after}");
    pane.keys(&["C-d"]);
    assert_eq!(pane.wait_exit().0, 0);
    // The whole exchange is in the terminal's scrollback after the exit, in order, once.
    let h = pane.history();
    let at = |t: &str| h.find(t).unwrap_or_else(|| panic!("no {t:?} in\n{h}"));
    assert!(at("list twenty things") < at("item 1 of") && at("item 1 of") < at("item 20 of"));
    assert_eq!(h.matches("item 7 of the list").count(), 1, "{h}");
}

/// The body of the mock's last request.
fn last_body(mock: &MockServer) -> Value {
    let reqs = mock.requests();
    reqs.last()
        .expect("a request reached the mock")
        .body
        .clone()
}

/// A project nobody trusted yet, its mock serving `replies`.
fn untrusted(replies: Vec<Reply>) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    (env, mock)
}

#[test]
fn the_trust_question_answered_y_trusts_the_folder_and_a_turn_runs() {
    let (env, mock) = untrusted(vec![text_reply("hello there")]);
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("trust this folder?");
    assert!(pane.screen().contains(&env.project.display().to_string()));
    pane.keys(&["y"]);
    pane.wait_text("trusted ");
    pane.type_text("say hello");
    pane.keys(&["Enter"]);
    pane.wait_text("hello there");
    pane.keys(&["C-d"]);
    assert_eq!(pane.wait_exit().0, 0);
    assert_eq!(mock.requests().len(), 1);
    // The same store as `openmax --trust`: a `--stdio` session runs turns now.
    mock.push(text_reply("again"));
    let mut s = env.stdio(&[]);
    s.user("again");
    let (_, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    s.finish();
}

#[test]
fn the_trust_question_answered_n_leaves_the_ui_read_only_with_a_notice() {
    let (env, mock) = untrusted(vec![text_reply("never")]);
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("trust this folder?");
    pane.keys(&["n"]);
    pane.wait_text("is not trusted: prompts are refused");
    pane.type_text("do something");
    pane.keys(&["Enter"]);
    pane.wait_text("refused: this project is not trusted");
    pane.keys(&["C-d"]);
    assert_eq!(pane.wait_exit().0, 0);
    assert!(mock.requests().is_empty(), "nothing reached the model");
    // Control: the same prompt in a trusted folder reaches the model.
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("do something");
    let (_, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    s.finish();
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn a_project_mcp_server_approved_at_start_up_is_offered_and_called() {
    let (env, mock) = setup(vec![
        tool_reply(
            "c1",
            "mcp__proj__echo",
            json!({"message": "from the project server"}),
        ),
        text_reply("echoed"),
    ]);
    env.write(
        "srv.sh",
        &format!("exec node '{}' stdio\n", everything_js().display()),
    );
    env.write(
        ".mcp.json",
        &json!({"mcpServers": {"proj": {"command": "sh", "args": ["srv.sh"]}}}).to_string(),
    );
    let pane = Pane::start(&env, &[], 120, 40);
    let card = pane.wait_text("run unapproved code?");
    for want in [
        "MCP server proj",
        "sh srv.sh",
        ".mcp.json",
        "sha256:",
        "openmax --approve .mcp.json",
    ] {
        assert!(card.contains(want), "no {want:?} in\n{card}");
    }
    pane.keys(&["y"]);
    pane.wait_text("approved MCP server proj");
    // The approval is taken up at once: the server starts and its tools are offered.
    pane.wait_text("reloaded:");
    pane.type_text("echo something");
    pane.keys(&["Enter"]);
    // The call itself may still ask (the project's mode is ask).
    let screen = pane.wait_for("the call or its card", |s| {
        s.contains("approve this call?") || s.contains("echoed")
    });
    if !screen.contains("echoed") {
        pane.keys(&["y"]);
        pane.wait_text("echoed");
    }
    pane.keys(&["C-d"]);
    assert_eq!(pane.wait_exit().0, 0);
    let reqs = mock.requests();
    let first = &reqs[0].body;
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(offered.contains(&"mcp__proj__echo"), "{offered:?}");
    let last = last_body(&mock).to_string();
    assert!(last.contains("from the project server"), "{last}");
    // The same store as `openmax --approve .mcp.json`: the next session starts the server.
    let out = env.run(&["mcp", "list"]);
    assert!(
        out.stdout.contains("proj (stdio, .mcp.json): started"),
        "{}",
        out.stdout
    );
}

#[test]
fn model_switches_the_model_of_the_next_request_and_says_so() {
    let (env, mock) = setup(vec![text_reply("first"), text_reply("second")]);
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("test-model");
    pane.type_text("one");
    pane.keys(&["Enter"]);
    pane.wait_text("first");
    pane.wait_for("the turn's end", |s| s.contains("type a prompt"));
    assert_eq!(last_body(&mock)["model"], "test-model");
    pane.type_text("/model other-model");
    pane.keys(&["Enter"]);
    pane.wait_text("the model is now other-model");
    pane.wait_text("other-model ·");
    pane.type_text("two");
    pane.keys(&["Enter"]);
    pane.wait_text("second");
    pane.keys(&["C-d"]);
    assert_eq!(pane.wait_exit().0, 0);
    let body = last_body(&mock);
    assert_eq!(body["model"], "other-model");
    assert!(
        body.to_string().contains("the model is now other-model"),
        "{body}"
    );
}

#[test]
fn two_quick_shift_tabs_land_two_modes_one_line_each() {
    let (env, _mock) = setup(vec![]);
    env.set_mode("ask");
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("· ask");
    pane.keys(&["BTab", "BTab"]);
    let screen = pane.wait_text("· auto");
    assert_eq!(screen.matches("mode: ").count(), 2, "{screen}");
    assert!(screen.contains("mode: readonly") && screen.contains("mode: auto"));
    assert!(
        !screen.contains("approval mode is now"),
        "one line per change:\n{screen}"
    );
    pane.keys(&["C-d"]);
    assert_eq!(pane.wait_exit().0, 0);
    // Saved: the next session starts in auto.
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("· auto");
    pane.keys(&["C-d"]);
    pane.wait_exit();
}

#[test]
fn the_slash_menu_lists_the_commands_and_runs_the_highlighted_one() {
    let (env, _mock) = setup(vec![]);
    let pane = Pane::start(&env, &[], 100, 40);
    pane.wait_text("test-model");
    pane.type_text("/");
    let menu = pane.wait_text("/compact");
    for want in [
        "/model <name>",
        "/new",
        "/status",
        "/cost",
        "/trust",
        "/approve <file>",
    ] {
        assert!(menu.contains(want), "no {want:?} in\n{menu}");
    }
    pane.type_text("sta");
    pane.wait_for("the filtered menu", |s| !s.contains("/compact"));
    pane.keys(&["Enter"]);
    let status = pane.wait_text("sandbox: ");
    for want in [
        "model: test-model",
        "mode: ask",
        "session: ",
        "tokens this session",
        // The layers in force, as `openmax sandbox check` finds them here (every one).
        "sandbox: on: ",
    ] {
        assert!(status.contains(want), "no {want:?} in\n{status}");
    }
    pane.keys(&["C-d"]);
    assert_eq!(pane.wait_exit().0, 0);
}

#[test]
fn compact_prunes_the_old_output_and_the_next_request_carries_the_stub() {
    let big = "line of a big file\n".repeat(2000);
    let (env, mock) = setup(vec![
        tool_reply("r1", "read_file", json!({"path": "big.txt"})),
        text_reply("read it"),
        text_reply("after"),
    ]);
    env.write("big.txt", &big);
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("test-model");
    pane.type_text("read the big file");
    pane.keys(&["Enter"]);
    pane.wait_text("read it");
    pane.wait_for("the turn's end", |s| s.contains("type a prompt"));
    assert!(last_body(&mock).to_string().contains("line of a big file"));
    pane.type_text("/compact");
    pane.keys(&["Enter"]);
    pane.wait_text("compacted ");
    pane.type_text("and now");
    pane.keys(&["Enter"]);
    pane.wait_text("after");
    pane.keys(&["C-d"]);
    assert_eq!(pane.wait_exit().0, 0);
    let body = last_body(&mock).to_string();
    assert!(!body.contains("line of a big file"), "the output is pruned");
    assert!(body.contains("[compacted:"), "{body}");
}

#[test]
fn new_starts_a_fresh_session_and_the_old_one_is_kept() {
    let (env, mock) = setup(vec![
        text_reply("about apples"),
        text_reply("a fresh reply"),
    ]);
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("test-model");
    pane.type_text("tell me about apples");
    pane.keys(&["Enter"]);
    pane.wait_text("about apples");
    pane.wait_for("the turn's end", |s| s.contains("type a prompt"));
    pane.type_text("/new");
    pane.keys(&["Enter"]);
    pane.wait_text("starting a fresh session");
    // The new session's UI is up once its status line has no session totals yet (keys typed
    // while the old session is still closing go to the old one).
    pane.wait_screen("the new session's status line", |s| {
        s.lines().any(|l| l.trim_end() == "test-model · ask")
    });
    pane.type_text("hello again");
    pane.keys(&["Enter"]);
    pane.wait_text("a fresh reply");
    pane.keys(&["C-d"]);
    assert_eq!(pane.wait_exit().0, 0);
    let body = last_body(&mock).to_string();
    assert!(
        !body.contains("apples"),
        "the new session starts empty: {body}"
    );
    let out = env.run(&["sessions", "--json"]);
    let list: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(list.as_array().map(Vec::len), Some(2), "{list}");
}
