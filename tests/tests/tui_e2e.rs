//! End to end: the terminal UI, the real binary in a real terminal (a tmux pane), against the
//! loopback mock. Keys are typed with tmux `send-keys` and the screen read with `capture-pane`:
//! a reply streams visibly, an approval card answered `y` shows the diff and `n` declines, Esc
//! cancels a slow stream, Shift-Tab saves the mode for the next `--stdio` session, Ctrl-D exits
//! 0 with the terminal restored, `--continue` shows the history, and a resize to 24 columns
//! keeps every env name of a pending card whole. Without a terminal, no mode flag exits 1.

use openmax_tests::tmux::Pane;
use openmax_tests::*;
use serde_json::json;

/// A trusted project whose mock serves `replies`.
fn setup(replies: Vec<Reply>) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    (env, mock)
}

/// `text` streamed in `parts` pieces, `delay_ms` apart.
fn slow_text(pieces: &[&str], delay_ms: u64) -> Reply {
    Reply::Stream {
        items: pieces
            .iter()
            .map(|p| StreamItem::Text {
                text: p.to_string(),
            })
            .collect(),
        end: StreamEnd::Complete { finish: None },
        delay_ms,
    }
}

/// Quit with Ctrl-D on the empty prompt and check the exit: code 0, the terminal restored
/// (canonical mode and echo on, the cursor shown).
fn quit(pane: &Pane) {
    pane.keys(&["C-d"]);
    let (code, restored) = pane.wait_exit();
    assert_eq!(code, 0, "{}", pane.history());
    assert!(
        restored,
        "the terminal is not restored:\n{}",
        pane.history()
    );
    assert_eq!(pane.format("#{cursor_flag}"), "1", "the cursor is shown");
}

#[test]
fn no_terminal_and_no_mode_flag_exits_1_naming_stdio_and_p() {
    let env = TestEnv::new();
    let out = env.run(&[]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("--stdio") && out.stderr.contains("-p"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}

#[test]
fn a_prompt_streams_visibly_then_ctrl_d_exits_0_restored() {
    let pieces: Vec<String> = (0..16).map(|i| format!("piece{i:02} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let (env, _mock) = setup(vec![slow_text(&refs, 150)]);
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    pane.type_text("stream something");
    pane.keys(&["Enter"]);
    // Part of the reply is on screen while the rest is still to come.
    let partial = pane.wait_text("piece01");
    assert!(!partial.contains("piece15"), "{partial}");
    assert!(partial.contains("working"), "{partial}");
    let done = pane.wait_for("the whole reply and an idle prompt", |s| {
        s.contains("piece15") && !s.contains("working")
    });
    assert!(done.contains("stream something"), "{done}");
    quit(&pane);
}

#[test]
fn write_file_approved_with_y_shows_its_diff() {
    let (env, _mock) = setup(vec![
        tool_reply(
            "w1",
            "write_file",
            json!({"path":"notes.txt","content":"first line\nsecond line\n"}),
        ),
        text_reply("wrote it"),
    ]);
    env.set_mode("ask");
    let pane = Pane::start(&env, &[], 80, 40);
    pane.wait_text("test-model");
    pane.type_text("write the notes");
    pane.keys(&["Enter"]);
    pane.wait_text("y approve");
    assert_eq!(
        env.read("notes.txt"),
        None,
        "nothing written before the answer"
    );
    pane.type_text("y");
    let s = pane.wait_text("wrote it");
    assert!(s.contains("approved"), "{s}");
    assert!(
        s.contains("+second line") && s.contains("+2 -0"),
        "the diff and its counts:\n{s}"
    );
    assert_eq!(
        env.read("notes.txt").as_deref(),
        Some("first line\nsecond line\n")
    );
    quit(&pane);
}

#[test]
fn n_declines_and_nothing_is_written() {
    let (env, _mock) = setup(vec![
        tool_reply(
            "w1",
            "write_file",
            json!({"path":"notes.txt","content":"never\n"}),
        ),
        text_reply("understood"),
    ]);
    env.set_mode("ask");
    let pane = Pane::start(&env, &[], 80, 40);
    pane.wait_text("test-model");
    pane.type_text("write the notes");
    pane.keys(&["Enter"]);
    pane.wait_text("y approve");
    pane.type_text("n");
    let s = pane.wait_text("understood");
    assert!(s.contains("declined"), "{s}");
    assert_eq!(env.read("notes.txt"), None);
    quit(&pane);
}

#[test]
fn esc_cancels_a_slow_stream() {
    let pieces: Vec<String> = (0..100).map(|i| format!("slow{i:03} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let (env, _mock) = setup(vec![slow_text(&refs, 200)]);
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    pane.type_text("talk slowly");
    pane.keys(&["Enter"]);
    pane.wait_text("slow001");
    pane.keys(&["Escape"]);
    let s = pane.wait_for("the turn cancelled and an idle prompt", |s| {
        s.contains("cancelled") && !s.contains("working")
    });
    assert!(!s.contains("slow099"), "{s}");
    quit(&pane);
}

#[test]
fn shift_tab_to_readonly_is_in_force_for_the_next_stdio_session() {
    let (env, mock) = setup(vec![]);
    env.set_mode("ask");
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("· ask");
    pane.keys(&["BTab"]);
    pane.wait_text("mode: readonly");
    quit(&pane);
    drop(pane);

    mock.push(tool_reply(
        "w1",
        "write_file",
        json!({"path":"x.txt","content":"x\n"}),
    ));
    mock.push(text_reply("ok"));
    let mut s = env.stdio(&[]);
    s.user("write x");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    assert!(
        !types(&evs).contains(&"approval_request".to_string()),
        "readonly refuses without asking: {evs:?}"
    );
    let end = find(&evs, "tool_end");
    assert_eq!(end["ok"], false, "{end}");
    assert!(
        end["output"]
            .as_str()
            .unwrap_or_default()
            .contains("readonly"),
        "{end}"
    );
    assert_eq!(env.read("x.txt"), None);
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn continue_shows_the_previous_messages() {
    let (env, _mock) = setup(vec![text_reply("noted the walrus")]);
    let mut s = env.stdio(&[]);
    s.user("remember the walrus");
    let (_, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    assert_eq!(s.finish().0, Some(0));

    let pane = Pane::start(&env, &["--continue"], 80, 30);
    let h = pane.wait_text("noted the walrus");
    assert!(h.contains("remember the walrus"), "{h}");
    assert!(h.contains("continued a session"), "{h}");
    quit(&pane);
}

/// Five env names, the longest 22 characters (it fits a 24-column row after the 2-column
/// indent).
const ENV_NAMES: [&str; 5] = [
    "GREET_TOKEN",
    "HOME_DIR",
    "AWS_SECRET_ACCESS_KEY",
    "DATABASE_URL_PASSWORD",
    "OPENMAX_DEPLOY_API_KEY",
];

#[test]
fn resize_to_24_columns_keeps_every_env_name_of_a_pending_card_whole() {
    let env = TestEnv::new();
    let manifest = json!({
        "name": "greet",
        "description": "Greet someone",
        "parameters": {"type":"object","properties":{"who":{"type":"string"}},"required":["who"]},
        "command": ["sh", "tools/greet.sh"],
        "env": ENV_NAMES,
    });
    env.write(".openmax/tools/greet.json", &manifest.to_string());
    env.write("tools/greet.sh", "cat\n");
    let mock = MockServer::start(vec![
        tool_reply("c1", "greet", json!({"who":"w"})),
        text_reply("greeted"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let pane = Pane::start(&env, &[], 100, 60);
    pane.wait_text("test-model");
    pane.type_text("greet w");
    pane.keys(&["Enter"]);
    pane.wait_text("y approve");
    pane.resize(24, 60);
    // Redrawn at 24 columns: the card's prose is word-wrapped again (a stale 100-column row
    // cut by the terminal would split a word).
    let words = ["reason:", "human", "approved", "source's", "exact", "bytes"];
    pane.wait_for("the card redrawn at 24 columns", |_| {
        let screen = pane.screen();
        screen.contains("y approve")
            && words.iter().all(|w| {
                screen
                    .lines()
                    .any(|l| l.split_whitespace().any(|x| x == *w))
            })
    });
    let screen = pane.screen();
    for name in ENV_NAMES {
        assert!(
            screen.lines().any(|l| l.trim() == name),
            "{name} is not whole on a row at 24 columns:\n{screen}"
        );
    }
    // The command is broken at the width, never cut: its rows joined give it back whole.
    let joined: String = screen.lines().map(str::trim).collect();
    assert!(
        joined.contains("openmax --approve .openmax/tools/greet.json"),
        "{screen}"
    );
    pane.type_text("n");
    pane.wait_text("greeted");
    quit(&pane);
}
