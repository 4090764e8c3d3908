//! End to end: finding a session again. An empty session never shadows a real one for
//! `--continue`; `openmax sessions` lists sessions newest use first (JSON too, live ones
//! marked); `--resume` takes an id or a unique prefix (an unknown or ambiguous one exits 2
//! naming `openmax sessions`); `--fork` copies a session and leaves its record byte for byte;
//! mode-change notes reach the model once and never show as the person's words; a resumed TUI
//! shows tool lines, an edit's counts and a cancelled turn; `/resume` switches sessions; and
//! leaving the TUI prints how to come back.

use openmax_tests::tmux::Pane;
use openmax_tests::*;
use serde_json::{json, Value};

fn setup() -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    (env, mock)
}

/// `openmax sessions --json`, parsed.
fn listed(env: &TestEnv) -> Vec<Value> {
    let out = env.run(&["sessions", "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    serde_json::from_str::<Vec<Value>>(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// The last request's body as text.
fn last_body(mock: &MockServer) -> String {
    mock.requests()
        .last()
        .map(|r| r.body.to_string())
        .unwrap_or_default()
}

/// The transcript messages' `(role, content)`.
fn pairs(t: &Value) -> Vec<(String, String)> {
    t["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn an_empty_session_never_shadows_the_one_with_the_banana() {
    let (env, mock) = setup();
    mock.push(text_reply("I will remember it."));
    let out = env.run(&["-p", "remember the word banana"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // A TUI opened and left without typing anything.
    let pane = Pane::start(&env, &[], 80, 24);
    pane.wait_text("test-model");
    pane.keys(&["C-d"]);
    let (code, _) = pane.wait_exit();
    assert_eq!(code, 0);
    assert!(
        !pane.history().contains("--resume"),
        "an empty session offers nothing to come back to:\n{}",
        pane.history()
    );
    drop(pane);
    let sessions = listed(&env);
    assert_eq!(sessions.len(), 1, "only the banana session: {sessions:?}");
    assert_eq!(sessions[0]["first_prompt"], "remember the word banana");
    assert_eq!(sessions[0]["turns"], 1);
    assert_eq!(sessions[0]["live"], false);
    let id = sessions[0]["id"].as_str().unwrap().to_string();

    // --continue lands on it.
    let mut s = env.stdio(&["--continue"]);
    assert_eq!(s.hello["continued"], true);
    assert_eq!(s.hello["session_id"], id.as_str());
    let t = s.event();
    assert_eq!(
        pairs(&t)[0],
        ("user".into(), "remember the word banana".into())
    );
    assert!(s.finish().0 == Some(0));

    // --resume with a unique start of its id: the next request carries the banana turn.
    mock.push(text_reply("banana"));
    let mut s = env.stdio(&["--resume", &id[..6]]);
    assert_eq!(s.hello["session_id"], id.as_str());
    assert_eq!(s.event()["type"], "transcript");
    s.user("which word was it?");
    let (_, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    assert_eq!(s.finish().0, Some(0));
    let body = last_body(&mock);
    assert!(
        body.contains("remember the word banana") && body.contains("which word was it?"),
        "{body}"
    );
    // -p --resume too.
    mock.push(text_reply("still banana"));
    let out = env.run(&["-p", "and now?", "--resume", &id]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(last_body(&mock).contains("banana"));
    assert_eq!(listed(&env)[0]["turns"], 3);
}

#[test]
fn an_unknown_or_ambiguous_id_exits_2_naming_the_list() {
    let (env, mock) = setup();
    mock.push(text_reply("ok"));
    assert_eq!(env.run(&["-p", "one"]).code, Some(0));
    for args in [
        &["--stdio", "--resume", "zzzz"][..],
        &["-p", "x", "--resume", "zzzz"],
        &["--stdio", "--fork", "zzzz"],
    ] {
        let out = env.run(args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert_eq!(out.stdout, "");
        assert!(out.stderr.contains("openmax sessions"), "{}", out.stderr);
    }
    // Two ids sharing a start: the prefix names both.
    let index = env
        .home
        .join("projects")
        .read_dir()
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("sessions/index.json");
    std::fs::write(
        &index,
        r#"{"v":1,"sessions":[{"id":"aa11","created_ms":1,"updated_ms":1,"record":"aa11.jsonl","turns":1,"first_prompt":"a"},{"id":"aa22","created_ms":2,"updated_ms":2,"record":"aa22.jsonl","turns":1,"first_prompt":"b"}]}"#,
    )
    .unwrap();
    let out = env.run(&["--stdio", "--resume", "aa"]);
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.contains("aa11") && out.stderr.contains("aa22"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_fork_copies_the_history_and_leaves_the_original_byte_for_byte() {
    let (env, mock) = setup();
    mock.push(text_reply("first answer"));
    mock.push(text_reply("second answer"));
    let mut s = env.stdio(&[]);
    let original = s.hello["session_id"].as_str().unwrap().to_string();
    for q in ["first question", "second question"] {
        s.user(q);
        s.turn();
    }
    assert_eq!(s.finish().0, Some(0));
    let record = env.record_path(&original);
    let before = std::fs::read(&record).unwrap();

    mock.push(text_reply("forked answer"));
    let mut f = env.stdio(&["--fork", &original[..8]]);
    assert_eq!(f.hello["continued"], true);
    let fork = f.hello["session_id"].as_str().unwrap().to_string();
    assert_ne!(fork, original);
    let t = f.event();
    assert_eq!(t["type"], "transcript");
    assert_eq!(t["session_id"], fork.as_str());
    assert_eq!(
        pairs(&t),
        [
            ("user".to_string(), "first question".to_string()),
            ("assistant".into(), "first answer".into()),
            ("user".into(), "second question".into()),
            ("assistant".into(), "second answer".into()),
        ]
    );
    f.user("a question in the fork");
    f.turn();
    assert_eq!(f.finish().0, Some(0));
    let body = last_body(&mock);
    assert!(
        body.contains("second answer") && body.contains("a question in the fork"),
        "{body}"
    );
    assert_eq!(
        std::fs::read(&record).unwrap(),
        before,
        "the original is unchanged"
    );
    let ids: Vec<String> = listed(&env)
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, [fork, original], "newest use first");
}

#[test]
fn sessions_json_lists_a_running_session_as_live() {
    let (env, mock) = setup();
    mock.push(text_reply("done one"));
    assert_eq!(env.run(&["-p", "an old one"]).code, Some(0));
    mock.push(text_reply("done two"));
    let mut live = env.stdio(&[]);
    live.user("a live one");
    live.turn();
    let rows = listed(&env);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["first_prompt"], "a live one");
    assert_eq!(rows[0]["live"], true);
    assert_eq!(rows[1]["live"], false);
    assert!(rows[0]["last_used_ms"].as_u64() >= rows[1]["last_used_ms"].as_u64());
    let table = env.run(&["sessions"]);
    assert!(
        table.stdout.contains("live") && table.stdout.contains("an old one"),
        "{}",
        table.stdout
    );
    assert_eq!(live.finish().0, Some(0));
    assert_eq!(listed(&env)[0]["live"], false);
    let all = env.run(&["sessions", "--all", "--json"]);
    let all: Vec<Value> = serde_json::from_str(&all.stdout).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["project"], env.project.display().to_string());
}

#[test]
fn five_mode_changes_reach_the_model_as_one_note_and_never_as_the_prompt() {
    let (env, mock) = setup();
    mock.push(text_reply("noted"));
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("test-model");
    for _ in 0..5 {
        pane.keys(&["BTab"]);
    }
    // ask → readonly → auto → ask → readonly → auto.
    pane.wait_for("the fifth mode", |s| s.matches("mode: ").count() >= 5);
    pane.type_text("the prompt itself");
    pane.keys(&["Enter"]);
    pane.wait_text("noted");
    pane.keys(&["C-d"]);
    pane.wait_exit();
    let body = last_body(&mock);
    assert_eq!(body.matches("approval mode is now").count(), 1, "{body}");
    assert!(body.contains("approval mode is now auto"), "{body}");
    let mut s = env.stdio(&["--continue"]);
    let t = s.event();
    assert_eq!(pairs(&t)[0], ("user".into(), "the prompt itself".into()));
    assert!(!t.to_string().contains("openmax note"), "{t}");
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn a_resumed_tui_shows_tool_lines_an_edits_counts_and_a_cancelled_turn() {
    let (env, mock) = setup();
    env.set_mode("auto");
    env.write("notes.txt", "one\n");
    mock.push(tool_reply(
        "w1",
        "write_file",
        json!({"path": "notes.txt", "content": "one\ntwo\nthree\n"}),
    ));
    mock.push(text_reply("written"));
    mock.push(tool_reply("s1", "shell", json!({"command": "sleep 3201"})));
    let mut s = env.stdio(&[]);
    let sid = s.hello["session_id"].as_str().unwrap().to_string();
    s.user("edit the notes");
    s.turn();
    s.user("wait a while");
    s.until_type("tool_start");
    s.send(json!({"cmd": "cancel"}));
    let (_, reason) = s.turn();
    assert_eq!(reason, "cancelled");
    assert_eq!(s.finish().0, Some(0));

    let pane = Pane::start(&env, &["--continue"], 100, 40);
    let screen = pane.wait_text("resumed a session of 2 prompts");
    for want in [
        "edit the notes",
        "write_file notes.txt +2 -0",
        "written",
        "wait a while",
        "shell sleep 3201",
        "cancelled",
    ] {
        assert!(screen.contains(want), "no {want:?} in\n{screen}");
    }
    pane.keys(&["C-d"]);
    pane.wait_exit();
    // Leaving says how to come back.
    let h = pane.history();
    assert!(h.contains(&format!("openmax --resume {sid}")), "{h}");
}

#[test]
fn resume_in_the_tui_picks_another_session() {
    let (env, mock) = setup();
    mock.push(text_reply("about apples"));
    assert_eq!(env.run(&["-p", "tell me about apples"]).code, Some(0));
    mock.push(text_reply("pears are pomes"));
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("test-model");
    pane.type_text("tell me about pears");
    pane.keys(&["Enter"]);
    // The reply, not the prompt (which contains "about pears"), then the idle prompt.
    pane.wait_text("pears are pomes");
    pane.wait_for("the turn's end", |s| {
        !s.contains("Esc to cancel") && s.contains("type a prompt")
    });
    pane.type_text("/resume");
    pane.keys(&["Enter"]);
    pane.wait_text("resume which session?");
    assert!(pane.screen().contains("tell me about apples"));
    pane.keys(&["Enter"]);
    let screen = pane.wait_text("resumed a session of 1 prompt");
    assert!(screen.contains("about apples"), "{screen}");
    mock.push(text_reply("more apples"));
    pane.type_text("more please");
    pane.keys(&["Enter"]);
    pane.wait_text("more apples");
    pane.keys(&["C-d"]);
    assert_eq!(pane.wait_exit().0, 0);
    let body = last_body(&mock);
    assert!(
        body.contains("tell me about apples") && !body.contains("pears"),
        "{body}"
    );
}
