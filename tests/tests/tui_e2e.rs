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
    // The live region left nothing behind: no copy of the prompt or the status line.
    let h = pane.history();
    for stale in ["type a prompt", "Esc to cancel", "working", "test-model ·"] {
        assert!(
            !h.contains(stale),
            "a stale {stale:?} in the scrollback:\n{h}"
        );
    }
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
    assert!(h.contains("resumed a session of 1 prompt"), "{h}");
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
    // Not approved at start-up: the call's own card is the one this test reads.
    pane.wait_text("external tool greet");
    pane.keys(&["n"]);
    pane.wait_for("the start-up card answered", |s| s.contains("declined"));
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

#[test]
fn sigterm_on_an_idle_prompt_exits_0_with_the_terminal_restored() {
    let (env, _mock) = setup(vec![]);
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    let pid = pane.openmax_pid();
    unsafe { libc::kill(pid, libc::SIGTERM) };
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
fn ctrl_c_twice_on_an_idle_prompt_quits() {
    let (env, _mock) = setup(vec![]);
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    pane.keys(&["C-c"]);
    pane.wait_text("again");
    pane.keys(&["C-c"]);
    let (code, restored) = pane.wait_exit();
    assert_eq!(code, 0, "{}", pane.history());
    assert!(restored, "{}", pane.history());
}

/// Whether `styled` (a `capture-pane -e` text) sets a foreground or background colour.
fn has_colour(styled: &str) -> bool {
    styled.split("\x1b[").skip(1).any(|seq| {
        let Some(end) = seq.find('m') else {
            return false;
        };
        seq[..end].split(';').any(|p| {
            matches!(
                p.parse::<u32>(),
                Ok(30..=38 | 40..=48 | 90..=97 | 100..=107)
            )
        })
    })
}

const MARKDOWN: &str = "# Big Title\n\nSome **bold words** and `inline code`.\n\n- first item\n- second item\n\n```\nlet x = 1;\n```\n";

#[test]
fn markdown_is_rendered_and_no_color_draws_no_colour() {
    let (env, mock) = setup(vec![text_reply(MARKDOWN)]);
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    pane.type_text("show markdown");
    pane.keys(&["Enter"]);
    let s = pane.wait_text("second item");
    for gone in ["**", "```", "`inline"] {
        assert!(!s.contains(gone), "{gone:?} is markup, not drawn:\n{s}");
    }
    for shown in [
        "Big Title",
        "bold words",
        "inline code",
        "first item",
        "let x = 1;",
    ] {
        assert!(s.contains(shown), "{shown:?} missing:\n{s}");
    }
    assert!(
        has_colour(&pane.history_styled()),
        "colour is used by default"
    );
    quit(&pane);
    drop(pane);

    mock.push(text_reply(MARKDOWN));
    let pane = Pane::start_with(&env, &[], 80, 30, &[("NO_COLOR", "1")]);
    pane.wait_text("test-model");
    pane.type_text("show markdown");
    pane.keys(&["Enter"]);
    pane.wait_text("second item");
    let styled = pane.history_styled();
    assert!(
        !has_colour(&styled),
        "NO_COLOR set, yet colour drawn:\n{styled:?}"
    );
    quit(&pane);
}

#[test]
fn up_recalls_a_prompt_of_an_earlier_session_of_the_project() {
    let (env, _mock) = setup(vec![]);
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    pane.type_text("the first prompt ever");
    pane.keys(&["Enter"]);
    pane.wait_for("the turn done", |s| {
        s.contains("the first prompt ever") && !s.contains("working")
    });
    quit(&pane);
    drop(pane);

    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    pane.keys(&["Up"]);
    pane.wait_for("the prompt recalled", |_| {
        pane.screen().contains("› the first prompt ever")
    });
    pane.keys(&["C-u"]);
    quit(&pane);
}

#[test]
fn a_large_bracketed_paste_is_one_prompt_sent_whole() {
    let (env, mock) = setup(vec![text_reply("got the paste")]);
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    let text: String = (0..400)
        .map(|i| format!("pasted line {i:03} with some words\n"))
        .collect();
    pane.paste(&text);
    // A newline inside the paste never submits: nothing reaches the model yet.
    pane.wait_text("pasted line 399");
    assert!(mock.requests().is_empty(), "the paste was submitted");
    pane.keys(&["Enter"]);
    pane.wait_text("got the paste");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    let body = reqs[0].body.to_string();
    let want = serde_json::to_string(text.trim_end()).unwrap();
    assert!(
        body.contains(want.trim_matches('"')),
        "the model got the whole paste as one message"
    );
    quit(&pane);
}

#[test]
fn escape_sequences_from_the_model_are_drawn_inert() {
    // A reply, a code fence's language and a tool's output carrying terminal controls: a
    // title change (OSC 2), a screen clear and a colour.
    let hostile = "before \x1b]2;pwned\x07 middle \x1b[2J\x1b[H after\n\n```\x1b[31mrust\ncode \x1b[5m here\n```\n";
    let (env, _mock) = setup(vec![
        tool_reply("c1", "read_file", json!({"path":"evil.txt"})),
        text_reply(hostile),
    ]);
    env.write(
        "evil.txt",
        "file \x1b]2;pwned-by-file\x07 text \x1b[?1049h\n",
    );
    env.set_mode("auto");
    let pane = Pane::start(&env, &[], 80, 40);
    pane.wait_text("test-model");
    let title = pane.format("#{pane_title}");
    pane.type_text("read the evil file");
    pane.keys(&["Enter"]);
    let s = pane.wait_text("after");
    assert!(
        s.contains("read the evil file") && s.contains("before"),
        "nothing was cleared:\n{s}"
    );
    assert!(s.contains("code") && s.contains("here"), "{s}");
    assert_eq!(
        pane.format("#{pane_title}"),
        title,
        "the title was not changed"
    );
    assert_eq!(
        pane.format("#{alternate_on}"),
        "0",
        "no switch to the alternate screen"
    );
    let styled = pane.history_styled();
    assert!(!styled.contains("\x1b[5m"), "no blinking text drawn");
    quit(&pane);
}

#[test]
fn model_project_provider_and_base_url_flags_work_as_everywhere() {
    let (env, mock) = setup(vec![text_reply("from the other model")]);
    // Started outside the project, pointed at it by --project.
    let elsewhere = env.root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let project = env.project.display().to_string();
    let pane = Pane::start_in(
        &env,
        &elsewhere,
        &["--project", &project, "--model", "other-model"],
        80,
        30,
    );
    pane.wait_text("other-model");
    pane.type_text("hi");
    pane.keys(&["Enter"]);
    pane.wait_text("from the other model");
    let reqs = mock.requests();
    assert_eq!(reqs[0].body["model"], "other-model");
    quit(&pane);
    drop(pane);

    // --provider and --base-url: another API at another server.
    let other = MockServer::start(vec![text_reply("from the other provider")]);
    let base = format!("{}/v1", other.base_url());
    let pane = Pane::start(
        &env,
        &["--provider", "openai-chat", "--base-url", &base],
        80,
        30,
    );
    pane.wait_text("test-model");
    pane.type_text("hi");
    pane.keys(&["Enter"]);
    pane.wait_text("from the other provider");
    let reqs = other.requests();
    assert_eq!(reqs[0].flavor, Some(Flavor::OpenaiChat), "{}", reqs[0].path);
    assert_eq!(
        mock.requests().len(),
        1,
        "the configured server is not asked"
    );
    quit(&pane);
}

#[test]
fn an_untrusted_project_with_nobody_to_ask_refuses_the_prompt_naming_openmax_trust() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    // Started by an agent: the trust question is for a human only, so it is not asked.
    let pane = Pane::start_with(&env, &[], 80, 30, &[("OPENMAX_AGENT_SESSION", "parent-1")]);
    pane.wait_text("test-model");
    let screen = pane.wait_text("is not trusted: prompts are refused");
    assert!(!screen.contains("trust this folder?"), "{screen}");
    pane.type_text("do something");
    pane.keys(&["Enter"]);
    pane.wait_text("openmax --trust");
    assert!(mock.requests().is_empty(), "no model request");
    quit(&pane);
}

#[test]
fn an_agent_spawned_session_cannot_change_the_mode() {
    let (env, _mock) = setup(vec![]);
    env.set_mode("ask");
    let pane = Pane::start_with(&env, &[], 80, 30, &[("OPENMAX_AGENT_SESSION", "parent-1")]);
    pane.wait_text("· ask");
    pane.keys(&["BTab"]);
    let s = pane.wait_text("refused");
    assert!(!s.contains("mode: readonly"), "{s}");
    quit(&pane);
    drop(pane);
    // The next session starts in the mode saved before.
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("· ask");
    quit(&pane);
}

#[test]
fn continue_with_no_session_exits_2_and_leaves_the_terminal_sane() {
    let (env, _mock) = setup(vec![]);
    let pane = Pane::start(&env, &["--continue"], 80, 30);
    let (code, restored) = pane.wait_exit();
    assert_eq!(code, 2, "{}", pane.history());
    assert!(restored, "{}", pane.history());
    assert!(pane.history().contains("openmax:"), "{}", pane.history());
}

#[test]
fn a_conversation_taller_than_the_screen_lands_in_the_scrollback_whole_and_in_order() {
    let reply = |t: usize| {
        text_reply(
            &(0..12)
                .map(|l| format!("turn{t} line{l:02}"))
                .collect::<Vec<_>>()
                .join("\n\n"),
        )
    };
    let (env, _mock) = setup((0..5).map(reply).collect());
    let pane = Pane::start(&env, &[], 60, 20);
    pane.wait_text("test-model");
    for t in 0..5 {
        pane.type_text(&format!("prompt number {t}"));
        pane.keys(&["Enter"]);
        pane.wait_for("the turn done", |s| {
            s.contains(&format!("turn{t} line11")) && !s.contains("working")
        });
    }
    quit(&pane);
    let h = pane.history();
    let mut want = Vec::new();
    for t in 0..5 {
        want.push(format!("prompt number {t}"));
        want.extend((0..12).map(|l| format!("turn{t} line{l:02}")));
    }
    let got: Vec<&str> = h
        .lines()
        .map(str::trim)
        .filter(|l| want.iter().any(|w| l.contains(w.as_str())))
        .collect();
    let got: Vec<String> = got
        .iter()
        .map(|l| {
            want.iter()
                .find(|w| l.contains(w.as_str()))
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(got, want, "the scrollback:\n{h}");
}

#[test]
fn a_card_taller_than_the_screen_is_printed_whole_above_and_answered_below() {
    let content: String = (0..120).map(|i| format!("big line {i:03}\n")).collect();
    let (env, _mock) = setup(vec![
        tool_reply(
            "w1",
            "write_file",
            json!({"path":"big.txt","content":content}),
        ),
        text_reply("wrote the big file"),
    ]);
    env.set_mode("ask");
    let pane = Pane::start(&env, &[], 80, 24);
    pane.wait_text("test-model");
    pane.type_text("write a big file");
    pane.keys(&["Enter"]);
    pane.wait_text("y approve");
    // The whole diff is readable in the scrollback before the answer.
    pane.wait_for("the whole diff", |s| {
        [0, 60, 119]
            .iter()
            .all(|i| s.contains(&format!("+big line {i:03}")))
    });
    let screen = pane.screen();
    assert!(screen.contains("printed whole above"), "{screen}");
    assert!(screen.contains("approve this call?"), "{screen}");
    pane.type_text("y");
    pane.wait_text("wrote the big file");
    assert_eq!(env.read("big.txt").as_deref(), Some(content.as_str()));
    quit(&pane);
}

#[test]
fn thinking_collapses_to_its_first_line_once_the_reply_starts() {
    let (env, _mock) = setup(vec![Reply::Stream {
        items: vec![
            StreamItem::Thinking {
                text: "first thought here\nsecond thought hidden later".into(),
            },
            StreamItem::Text {
                text: "the final answer".into(),
            },
        ],
        end: StreamEnd::Complete { finish: None },
        delay_ms: 300,
    }]);
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    pane.type_text("think");
    pane.keys(&["Enter"]);
    pane.wait_text("second thought hidden later");
    let s = pane.wait_for("the answer and an idle prompt", |s| {
        s.contains("the final answer") && !s.contains("working")
    });
    assert!(s.contains("first thought here …"), "{s}");
    assert!(
        !pane.screen().contains("second thought hidden later"),
        "{s}"
    );
    quit(&pane);
}

#[test]
fn a_retry_and_an_error_are_notices_and_the_prompt_stays_usable() {
    let (env, _mock) = setup(vec![
        status(529, Some("0"), Some("overloaded_error")),
        text_reply("after the retry"),
        status(401, None, Some("authentication_error")),
    ]);
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    pane.type_text("first");
    pane.keys(&["Enter"]);
    let s = pane.wait_text("after the retry");
    assert!(s.contains("retrying (attempt 2/5)"), "{s}");
    pane.type_text("second");
    pane.keys(&["Enter"]);
    let s = pane.wait_for("an error notice and an idle prompt", |s| {
        s.contains("error:") && !s.contains("working")
    });
    assert!(s.contains("turn ended: error"), "{s}");
    // The last turn ended in error: the exit code says so, as for --stdio.
    pane.keys(&["C-d"]);
    let (code, restored) = pane.wait_exit();
    assert_eq!(code, 1, "{}", pane.history());
    assert!(restored);
}

#[test]
fn slash_commands_mode_help_reload_and_quit() {
    let (env, _mock) = setup(vec![]);
    env.set_mode("ask");
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("· ask");
    pane.type_text("/mode auto");
    pane.keys(&["Enter"]);
    pane.wait_text("mode: auto");
    pane.wait_text("· auto");
    pane.type_text("/mode sideways");
    pane.keys(&["Enter"]);
    pane.wait_text("refused:");
    pane.type_text("/help");
    pane.keys(&["Enter"]);
    pane.wait_text("Shift-Tab");
    pane.type_text("/reload");
    pane.keys(&["Enter"]);
    pane.wait_text("reloaded:");
    pane.type_text("/nonsense");
    pane.keys(&["Enter"]);
    pane.wait_text("unknown command /nonsense");
    pane.type_text("/quit");
    pane.keys(&["Enter"]);
    let (code, restored) = pane.wait_exit();
    assert_eq!(code, 0, "{}", pane.history());
    assert!(restored);
    drop(pane);
    // /mode went through the same store as --stdio's approval_mode.
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("· auto");
    quit(&pane);
}

#[test]
fn a_resize_while_streaming_reflows_the_live_region() {
    let words: Vec<String> = (0..60).map(|i| format!("w{i:02} ")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    let (env, _mock) = setup(vec![slow_text(&refs, 80)]);
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("test-model");
    pane.type_text("stream");
    pane.keys(&["Enter"]);
    pane.wait_text("w05");
    pane.resize(30, 30);
    let s = pane.wait_for("the whole reply and an idle prompt", |s| {
        s.contains("w59") && !s.contains("working")
    });
    // Drawn at 30 columns: every word whole on its rows.
    let screen = pane.screen();
    for i in 0..60 {
        let w = format!("w{i:02}");
        assert!(
            s.lines().any(|l| l.split_whitespace().any(|x| x == w)),
            "{w} not whole:\n{screen}"
        );
    }
    quit(&pane);
}

#[test]
fn esc_on_a_pending_card_cancels_the_turn_and_the_card_says_so() {
    let (env, _mock) = setup(vec![tool_reply(
        "w1",
        "write_file",
        json!({"path":"notes.txt","content":"never\n"}),
    )]);
    env.set_mode("ask");
    let pane = Pane::start(&env, &[], 80, 40);
    pane.wait_text("test-model");
    pane.type_text("write the notes");
    pane.keys(&["Enter"]);
    pane.wait_text("y approve");
    pane.keys(&["Escape"]);
    let s = pane.wait_for("the card settled and an idle prompt", |s| {
        s.contains("cancelled") && !s.contains("y approve") && !s.contains("working")
    });
    assert!(s.contains("approve this call?"), "{s}");
    assert_eq!(env.read("notes.txt"), None);
    quit(&pane);
}

#[test]
fn ctrl_c_cancels_a_running_stream_without_quitting() {
    let pieces: Vec<String> = (0..100).map(|i| format!("tick{i:03} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let (env, _mock) = setup(vec![slow_text(&refs, 200), text_reply("still here")]);
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    pane.type_text("tick");
    pane.keys(&["Enter"]);
    pane.wait_text("tick001");
    pane.keys(&["C-c"]);
    pane.wait_for("cancelled and idle", |s| {
        s.contains("cancelled") && !s.contains("working")
    });
    // The session goes on.
    pane.type_text("again");
    pane.keys(&["Enter"]);
    pane.wait_text("still here");
    quit(&pane);
}
