//! End to end, in a real terminal (a tmux pane) against the loopback mock: what a person meets on
//! a first day with the UI. A finished reply stays where it streamed; the UI asks at start-up what
//! only a human can answer (trust, a project's MCP server); the slash menu and its commands;
//! quick Shift-Tabs land every mode.

use openmax_tests::tmux::Pane;
use openmax_tests::*;

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
