//! The view model fed events and keys with no terminal: every event type and every key.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use openmax_core::wire::event::FreezeChange;
use openmax_core::wire::{
    ApprovalOutcome, ApprovalReason, Command, Event, Mode, TranscriptMessage,
};

use super::blocks::{Block, Level};
use super::card::ApprovalCard;
use super::slash::COMMANDS;
use super::view::{Next, Question, Request, View};

fn view() -> View {
    View::new("m1", Mode::Ask, vec!["old prompt".into()])
}

fn key(v: &mut View, now: u64, code: KeyCode, m: KeyModifiers) {
    v.key(now, KeyEvent::new(code, m));
}

fn typed(v: &mut View, s: &str) {
    for c in s.chars() {
        key(v, 0, KeyCode::Char(c), KeyModifiers::NONE);
    }
}

fn notices(blocks: &[Block]) -> Vec<String> {
    blocks
        .iter()
        .filter_map(|b| match b {
            Block::Notice(_, t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

fn request(id: &str) -> Event {
    Event::ApprovalRequest {
        approval_id: id.into(),
        name: "write_file".into(),
        summary: "write a.txt".into(),
        detail: String::new(),
        reason: ApprovalReason::Gate,
        source_path: String::new(),
        source_sha: String::new(),
        env: vec![],
    }
}

#[test]
fn enter_submits_a_user_command_and_shows_it() {
    let mut v = view();
    typed(&mut v, "hello");
    key(&mut v, 5, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        v.take_commands(),
        [Command::User {
            text: "hello".into()
        }]
    );
    assert_eq!(v.take_finished(), [Block::User("hello".into())]);
    assert_eq!(v.running, Some(5));
    // An empty prompt sends nothing.
    key(&mut v, 6, KeyCode::Enter, KeyModifiers::NONE);
    assert!(v.take_commands().is_empty());
}

#[test]
fn newline_keys_and_paste_insert_without_submitting() {
    let mut v = view();
    typed(&mut v, "a");
    key(&mut v, 0, KeyCode::Char('j'), KeyModifiers::CONTROL);
    typed(&mut v, "b");
    key(&mut v, 0, KeyCode::Enter, KeyModifiers::ALT);
    typed(&mut v, "c");
    let big = "line\n".repeat(2000);
    v.paste(&big);
    assert!(v.take_commands().is_empty());
    assert_eq!(v.editor.text(), format!("a\nb\nc{big}"));
    key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        v.take_commands(),
        [Command::User {
            text: format!("a\nb\nc{big}")
        }]
    );
}

#[test]
fn editing_keys_move_and_change_the_prompt() {
    let none = KeyModifiers::NONE;
    let ctrl = KeyModifiers::CONTROL;
    let mut v = view();
    typed(&mut v, "abc");
    key(&mut v, 0, KeyCode::Left, none);
    key(&mut v, 0, KeyCode::Backspace, none); // the b
    assert_eq!((v.editor.text(), v.editor.cursor()), ("ac", 1));
    key(&mut v, 0, KeyCode::Home, none);
    key(&mut v, 0, KeyCode::Delete, none); // the a
    assert_eq!((v.editor.text(), v.editor.cursor()), ("c", 0));
    key(&mut v, 0, KeyCode::End, none);
    typed(&mut v, "d");
    key(&mut v, 0, KeyCode::Char('a'), ctrl);
    typed(&mut v, "<");
    assert_eq!(v.editor.text(), "<cd");
    key(&mut v, 0, KeyCode::Char('e'), ctrl);
    typed(&mut v, ">");
    assert_eq!(v.editor.text(), "<cd>");
    key(&mut v, 0, KeyCode::Home, none);
    key(&mut v, 0, KeyCode::Right, none);
    typed(&mut v, "|");
    assert_eq!(v.editor.text(), "<|cd>");
    // Ctrl-D with text deletes under the cursor rather than quitting.
    key(&mut v, 0, KeyCode::Char('d'), ctrl);
    assert_eq!(v.editor.text(), "<|d>");
    // Shift-Enter is a newline too.
    key(&mut v, 0, KeyCode::Enter, KeyModifiers::SHIFT);
    assert_eq!(v.editor.text(), "<|\nd>");
    key(&mut v, 0, KeyCode::Char('u'), ctrl);
    assert_eq!(v.editor.text(), "");
    assert!(v.take_commands().is_empty(), "editing sends nothing");
}

#[test]
fn up_and_down_walk_the_prompt_history() {
    let mut v = view();
    typed(&mut v, "draft");
    key(&mut v, 0, KeyCode::Up, KeyModifiers::NONE);
    assert_eq!(v.editor.text(), "old prompt");
    key(&mut v, 0, KeyCode::Down, KeyModifiers::NONE);
    assert_eq!(v.editor.text(), "draft");
}

#[test]
fn streaming_reply_and_thinking_collapse() {
    let mut v = view();
    v.event(
        0,
        Event::Thinking {
            text: "first thought\nsecond".into(),
        },
    );
    assert_eq!(v.thinking, "first thought\nsecond");
    v.event(
        0,
        Event::Token {
            text: "# Hi".into(),
        },
    );
    assert_eq!(
        v.take_finished(),
        [Block::Thinking("first thought …".into())]
    );
    assert_eq!(v.reply, "# Hi");
    v.event(
        0,
        Event::Token {
            text: " there".into(),
        },
    );
    v.event(
        0,
        Event::MessageDone {
            text: "# Hi there".into(),
        },
    );
    assert_eq!(v.take_finished(), [Block::Reply("# Hi there".into())]);
    assert!(v.reply.is_empty());
}

#[test]
fn tool_cards_carry_their_diff_and_output() {
    let mut v = view();
    let mut args = serde_json::Map::new();
    args.insert("path".into(), "a.txt".into());
    v.event(
        0,
        Event::ToolStart {
            call_id: "c1".into(),
            name: "write_file".into(),
            args,
        },
    );
    assert_eq!(v.tools["c1"].summary, "a.txt");
    v.event(
        0,
        Event::Diff {
            call_id: "c1".into(),
            path: "a.txt".into(),
            diff: "+x\n".into(),
            added: 1,
            removed: 0,
        },
    );
    v.event(
        0,
        Event::ToolEnd {
            call_id: "c1".into(),
            ok: true,
            output: "wrote".into(),
        },
    );
    let f = v.take_finished();
    let Block::Tool(card) = &f[0] else {
        panic!("{f:?}")
    };
    assert_eq!(card.ok, Some(true));
    assert_eq!(card.diffs.len(), 1);
    assert_eq!(card.output, "wrote");
    assert!(v.tools.is_empty());
    // A diff with no running card stands alone.
    v.event(
        0,
        Event::Diff {
            call_id: "zz".into(),
            path: "b".into(),
            diff: String::new(),
            added: 0,
            removed: 2,
        },
    );
    assert!(matches!(v.take_finished()[0], Block::Diff(_)));
}

#[test]
fn approval_y_approves_n_declines_card_stays_until_settled() {
    let mut v = view();
    v.event(0, request("a1"));
    v.event(0, request("a2"));
    key(&mut v, 0, KeyCode::Char('y'), KeyModifiers::NONE);
    assert_eq!(
        v.take_commands(),
        [Command::Approve {
            approval_id: "a1".into(),
            approved: true
        }]
    );
    assert_eq!(v.approvals.len(), 2, "cards stay until settled");
    key(&mut v, 0, KeyCode::Char('n'), KeyModifiers::NONE);
    assert_eq!(
        v.take_commands(),
        [Command::Approve {
            approval_id: "a2".into(),
            approved: false
        }]
    );
    // No third answer: nothing is pending unanswered.
    key(&mut v, 0, KeyCode::Char('y'), KeyModifiers::NONE);
    assert!(v.take_commands().is_empty());
    assert_eq!(v.editor.text(), "y", "with no card to answer, y is typed");
    v.editor.clear();
    v.event(
        0,
        Event::ApprovalSettled {
            approval_id: "a1".into(),
            outcome: ApprovalOutcome::Approved,
        },
    );
    v.event(
        0,
        Event::ApprovalSettled {
            approval_id: "a2".into(),
            outcome: ApprovalOutcome::Declined,
        },
    );
    let f = v.take_finished();
    let outcomes: Vec<_> = f
        .iter()
        .filter_map(|b| match b {
            Block::Approval(c) => c.outcome,
            _ => None,
        })
        .collect();
    assert_eq!(
        outcomes,
        [ApprovalOutcome::Approved, ApprovalOutcome::Declined]
    );
    assert!(v.approvals.is_empty());
}

#[test]
fn esc_and_ctrl_c_cancel_a_running_turn() {
    let mut v = view();
    typed(&mut v, "go");
    key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
    v.take_commands();
    key(&mut v, 1, KeyCode::Esc, KeyModifiers::NONE);
    key(&mut v, 2, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(v.take_commands(), [Command::Cancel, Command::Cancel]);
    v.event(
        3,
        Event::Done {
            stop_reason: "cancelled".into(),
        },
    );
    assert_eq!(v.running, None);
    assert_eq!(notices(&v.take_finished()), ["cancelled"]);
    // Idle: Esc sends nothing.
    key(&mut v, 4, KeyCode::Esc, KeyModifiers::NONE);
    assert!(v.take_commands().is_empty());
}

#[test]
fn idle_ctrl_c_twice_within_two_seconds_quits() {
    let mut v = view();
    key(&mut v, 1000, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(v.take_commands().is_empty());
    assert!(v.hint.is_some());
    // Too late: arms again instead.
    key(&mut v, 3500, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(v.take_commands().is_empty());
    key(&mut v, 5000, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(v.take_commands(), [Command::Quit]);
}

#[test]
fn ctrl_d_quits_on_an_empty_prompt_only() {
    let mut v = view();
    typed(&mut v, "ab");
    key(&mut v, 0, KeyCode::Left, KeyModifiers::NONE);
    key(&mut v, 0, KeyCode::Char('d'), KeyModifiers::CONTROL);
    assert_eq!(v.editor.text(), "a");
    assert!(v.take_commands().is_empty());
    key(&mut v, 0, KeyCode::Char('u'), KeyModifiers::CONTROL);
    key(&mut v, 0, KeyCode::Char('d'), KeyModifiers::CONTROL);
    assert_eq!(v.take_commands(), [Command::Quit]);
    key(&mut v, 0, KeyCode::Char('d'), KeyModifiers::CONTROL);
    assert!(v.take_commands().is_empty(), "quit is sent once");
}

#[test]
fn shift_tab_cycles_the_mode_through_the_core() {
    let mut v = view();
    key(&mut v, 0, KeyCode::BackTab, KeyModifiers::SHIFT);
    assert_eq!(
        v.take_commands(),
        [Command::ApprovalMode {
            mode: "readonly".into()
        }]
    );
    // The mode changes only when the core acknowledges it.
    assert_eq!(v.status.mode, Some(Mode::Ask));
    v.event(
        0,
        Event::ApprovalMode {
            mode: Mode::Readonly,
        },
    );
    assert_eq!(v.status.mode, Some(Mode::Readonly));
    key(&mut v, 0, KeyCode::BackTab, KeyModifiers::SHIFT);
    assert_eq!(
        v.take_commands(),
        [Command::ApprovalMode {
            mode: "auto".into()
        }]
    );
    v.event(0, Event::ApprovalMode { mode: Mode::Auto });
    key(&mut v, 0, KeyCode::BackTab, KeyModifiers::SHIFT);
    assert_eq!(
        v.take_commands(),
        [Command::ApprovalMode { mode: "ask".into() }]
    );
    // A terminal that reports Shift-Tab as Tab with Shift held does the same.
    v.event(0, Event::ApprovalMode { mode: Mode::Ask });
    key(&mut v, 0, KeyCode::Tab, KeyModifiers::SHIFT);
    assert_eq!(
        v.take_commands(),
        [Command::ApprovalMode {
            mode: "readonly".into()
        }]
    );
}

#[test]
fn slash_commands() {
    let mut v = view();
    for (line, cmd) in [
        (
            "/mode auto",
            Some(Command::ApprovalMode {
                mode: "auto".into(),
            }),
        ),
        ("/reload", Some(Command::Reload)),
        ("/quit", Some(Command::Quit)),
        ("/help", None),
        ("/bogus", None),
    ] {
        typed(&mut v, line);
        key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
        assert_eq!(
            v.take_commands(),
            cmd.into_iter().collect::<Vec<_>>(),
            "{line}"
        );
    }
    let n = notices(&v.take_finished());
    assert!(n[0].contains("Shift-Tab"), "{n:?}");
    assert!(n[1].starts_with("unknown command /bogus"), "{n:?}");
}

#[test]
fn notices_for_every_other_event() {
    let mut v = view();
    v.event(
        100,
        Event::Retry {
            attempt: 2,
            max_attempts: 5,
            reason: "HTTP 503".into(),
        },
    );
    assert_eq!(v.retry.as_ref().map(|r| r.since), Some(100));
    v.event(
        0,
        Event::Error {
            message: "boom".into(),
        },
    );
    assert!(
        v.retry.is_none(),
        "the wait is over once anything else happens"
    );
    v.event(
        0,
        Event::HarnessNote {
            call_id: "c".into(),
            text: "trimmed".into(),
        },
    );
    v.event(
        0,
        Event::Compacted {
            tokens_before: 900,
            tokens_after: 100,
            compacted_messages: 4,
        },
    );
    v.event(
        0,
        Event::Refrozen {
            tools: vec!["lint".into()],
            skills: vec![],
            changes: vec![FreezeChange {
                kind: "tool".into(),
                name: "lint".into(),
                change: "added".into(),
                path: ".openmax/tools/lint.json".into(),
                by: "outside".into(),
            }],
        },
    );
    v.event(
        0,
        Event::HookFailed {
            hook: "h".into(),
            event: "pre_tool".into(),
            detail: "exit 3".into(),
        },
    );
    v.event(
        0,
        Event::SchemasOverBudget {
            schema_tokens: 9000,
            budget_tokens: 8000,
        },
    );
    v.event(
        0,
        Event::ProtocolError {
            message: "bad mode".into(),
        },
    );
    v.event(
        0,
        Event::Done {
            stop_reason: "max_iterations".into(),
        },
    );
    let n = notices(&v.take_finished());
    assert_eq!(n.len(), 9, "{n:?}");
    assert!(n[0].contains("attempt 2/5") && n[0].contains("HTTP 503"));
    assert_eq!(n[1], "error: boom");
    assert_eq!(n[2], "note: trimmed");
    assert!(n[3].contains("900 → 100"));
    assert!(n[4].starts_with("reloaded: 1 tool, 0 skills; tool lint added"));
    assert!(n[5].contains("hook h (pre_tool) failed: exit 3"));
    assert!(n[6].contains("9000 of 8000"));
    assert_eq!(n[7], "refused: bad mode");
    assert_eq!(n[8], "turn ended: max_iterations");
}

#[test]
fn turn_refused_shows_the_reason_as_a_user_message() {
    let mut v = view();
    v.event(
        0,
        Event::TurnRefused {
            hook: "gate".into(),
            reason: "run the tests".into(),
            continuation: 1,
            continuations_left: 2,
        },
    );
    let f = v.take_finished();
    assert_eq!(f[0], Block::User("run the tests".into()));
    assert!(matches!(&f[1], Block::Notice(Level::Info, t) if t.contains("gate")));
}

#[test]
fn status_line_facts_and_transcript() {
    let mut v = view();
    v.event(
        0,
        Event::Budget {
            used_tokens: 10,
            context_tokens: 200,
        },
    );
    v.event(
        0,
        Event::Usage {
            prompt_tokens: 7,
            completion_tokens: 3,
            cached_tokens: Some(2),
        },
    );
    assert_eq!(v.status.budget, Some((10, 200)));
    v.event(
        0,
        Event::Usage {
            prompt_tokens: 5,
            completion_tokens: 1,
            cached_tokens: None,
        },
    );
    // The status line shows the session's totals, not the last request's.
    let t = v.status.totals;
    assert_eq!(
        (
            t.prompt_tokens,
            t.completion_tokens,
            t.cached_tokens,
            t.requests
        ),
        (12, 4, Some(2), 2)
    );
    v.transcript(
        &[
            TranscriptMessage {
                role: "user".into(),
                content: "q".into(),
            },
            TranscriptMessage {
                role: "assistant".into(),
                content: "a".into(),
            },
        ],
        true,
    );
    let f = v.take_finished();
    assert!(matches!(&f[0], Block::Notice(..)));
    assert_eq!(f[1], Block::User("q".into()));
    assert_eq!(f[2], Block::Reply("a".into()));
}

#[test]
fn enter_during_a_running_turn_keeps_the_prompt_instead_of_sending_it() {
    let mut v = view();
    typed(&mut v, "first");
    key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
    v.take_commands();
    v.take_finished();
    // The core refuses a user while a turn is in flight: nothing is sent, nothing shown as
    // sent, and the text waits in the prompt with a hint.
    typed(&mut v, "second");
    key(&mut v, 1, KeyCode::Enter, KeyModifiers::NONE);
    assert!(v.take_commands().is_empty());
    assert!(v.take_finished().is_empty());
    assert_eq!(v.editor.text(), "second");
    assert!(
        v.hint.as_deref().unwrap_or("").contains("running"),
        "{:?}",
        v.hint
    );
    // Slash commands still go through (the core answers them).
    v.editor.clear();
    typed(&mut v, "/mode auto");
    key(&mut v, 2, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        v.take_commands(),
        [Command::ApprovalMode {
            mode: "auto".into()
        }]
    );
    // Once the turn is done, Enter sends.
    v.event(
        3,
        Event::Done {
            stop_reason: "end_turn".into(),
        },
    );
    typed(&mut v, "second");
    key(&mut v, 4, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        v.take_commands(),
        [Command::User {
            text: "second".into()
        }]
    );
}

#[test]
fn a_stderr_line_is_a_warning_notice_shown_as_written() {
    let mut v = view();
    v.stderr_line("openmax: hooks and MCP servers not re-read: bad toml");
    let f = v.take_finished();
    assert!(matches!(&f[..], [Block::Notice(Level::Warn, t)] if t.starts_with("openmax: hooks")));
    assert!(v.take_commands().is_empty());
}

#[test]
fn a_signal_cancels_a_running_turn_then_quits_once() {
    let mut v = view();
    typed(&mut v, "go");
    key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
    v.take_commands();
    v.signal("SIGTERM");
    assert_eq!(v.take_commands(), vec![Command::Cancel, Command::Quit]);
    assert!(notices(&v.take_finished())
        .iter()
        .any(|n| n.starts_with("SIGTERM: stopping")));
    // Quit goes out once; idle, a signal only quits.
    v.signal("SIGHUP");
    assert!(v.take_commands().is_empty());
    let mut idle = view();
    idle.signal("SIGHUP");
    assert_eq!(idle.take_commands(), vec![Command::Quit]);
}

#[test]
fn quick_shift_tabs_each_move_the_mode_on_from_the_last_one_asked() {
    let mut v = view();
    key(&mut v, 0, KeyCode::BackTab, KeyModifiers::SHIFT);
    key(&mut v, 1, KeyCode::BackTab, KeyModifiers::SHIFT);
    let asked: Vec<Command> = v.take_commands();
    assert_eq!(
        asked,
        [
            Command::ApprovalMode {
                mode: "readonly".into()
            },
            Command::ApprovalMode {
                mode: "auto".into()
            },
        ]
    );
    v.event(
        2,
        Event::ApprovalMode {
            mode: Mode::Readonly,
        },
    );
    key(&mut v, 3, KeyCode::BackTab, KeyModifiers::SHIFT);
    assert_eq!(
        v.take_commands(),
        [Command::ApprovalMode { mode: "ask".into() }],
        "counts on from auto, still unacknowledged"
    );
    v.event(4, Event::ApprovalMode { mode: Mode::Auto });
    v.event(5, Event::ApprovalMode { mode: Mode::Ask });
    key(&mut v, 6, KeyCode::BackTab, KeyModifiers::SHIFT);
    assert_eq!(
        v.take_commands(),
        [Command::ApprovalMode {
            mode: "readonly".into()
        }]
    );
}

#[test]
fn the_resume_picker_moves_picks_and_closes() {
    let mut v = view();
    typed(&mut v, "/resume");
    key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
    assert!(v.wants_sessions);
    v.open_picker(vec![
        ("a1".into(), "a1 first".into()),
        ("b2".into(), "b2 second".into()),
    ]);
    assert!(!v.wants_sessions);
    key(&mut v, 1, KeyCode::Down, KeyModifiers::NONE);
    key(&mut v, 2, KeyCode::Down, KeyModifiers::NONE);
    assert_eq!(v.picker.as_ref().unwrap().at, 1, "stops at the last");
    key(&mut v, 3, KeyCode::Up, KeyModifiers::NONE);
    key(&mut v, 4, KeyCode::Esc, KeyModifiers::NONE);
    assert!(v.picker.is_none() && v.next.is_none());
    v.open_picker(vec![("b2".into(), "b2 second".into())]);
    key(&mut v, 5, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(v.next, Some(Next::Resume("b2".into())));
    assert_eq!(v.take_commands(), [Command::Quit]);
    let mut empty = view();
    empty.open_picker(Vec::new());
    assert!(empty.picker.is_none());
    assert!(notices(&empty.take_finished())[0].contains("no other session"));
}

/// An argument each command taking one accepts.
fn sample_arg(name: &str) -> &'static str {
    match name {
        "mode" => "auto",
        "model" => "m2",
        "approve" => ".mcp.json",
        "undo" => "list",
        other => panic!("/{other} takes an argument this test does not know"),
    }
}

#[test]
fn every_command_of_the_table_does_what_it_says_and_refuses_a_wrong_argument() {
    for c in COMMANDS {
        let line = if c.args.is_empty() {
            format!("/{}", c.name)
        } else {
            format!("/{} {}", c.name, sample_arg(c.name))
        };
        let mut v = view();
        typed(&mut v, &line);
        key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
        let (cmds, reqs) = (v.take_commands(), v.take_requests());
        let n = notices(&v.take_finished());
        let asks = v.take_undo_asks();
        let effect = !cmds.is_empty()
            || !reqs.is_empty()
            || !asks.is_empty()
            || v.wants_sessions
            || !n.is_empty();
        assert!(effect, "{line} did nothing");
        assert!(
            n.iter()
                .all(|t| !t.contains("unknown command") && !t.contains("usage:")),
            "{line}: {n:?}"
        );
        match c.name {
            "model" => assert_eq!(reqs, [Request::Model("m2".into())]),
            "compact" => assert_eq!(reqs, [Request::Compact]),
            "status" => assert_eq!(reqs, [Request::Status]),
            "cost" => assert_eq!(reqs, [Request::Cost]),
            "trust" => assert_eq!(reqs, [Request::Trust]),
            "approve" => assert_eq!(reqs, [Request::Approve(".mcp.json".into())]),
            "new" => {
                assert_eq!(v.next, Some(Next::New));
                assert_eq!(cmds, [Command::Quit]);
            }
            "resume" => assert!(v.wants_sessions),
            "undo" => assert_eq!(asks, [crate::frontend::tui::undo::UndoAsk::List]),
            "reload" => assert_eq!(cmds, [Command::Reload]),
            "quit" => assert_eq!(cmds, [Command::Quit]),
            "mode" => assert_eq!(
                cmds,
                [Command::ApprovalMode {
                    mode: "auto".into()
                }]
            ),
            "help" => assert!(COMMANDS
                .iter()
                .all(|k| n[0].contains(&format!("/{}", k.name)))),
            other => panic!("/{other} is in the table but not in this test"),
        }
        // A wrong number of arguments is said, never run.
        let wrong = if c.args.is_empty() {
            format!("/{} extra", c.name)
        } else {
            format!("/{} a b", c.name)
        };
        let mut v = view();
        typed(&mut v, &wrong);
        key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
        assert!(
            v.take_commands().is_empty()
                && v.take_requests().is_empty()
                && v.take_undo_asks().is_empty(),
            "{wrong}"
        );
        let n = notices(&v.take_finished());
        assert!(
            n[0].contains("takes no argument") || n[0].starts_with("usage: /"),
            "{wrong}: {n:?}"
        );
    }
}

#[test]
fn commands_that_change_the_session_wait_for_the_turn_to_end() {
    for line in [
        "/new",
        "/resume",
        "/compact",
        "/model m2",
        "/trust",
        "/approve x",
    ] {
        let mut v = view();
        typed(&mut v, "go");
        key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
        v.take_commands();
        typed(&mut v, line);
        key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
        assert!(
            v.take_commands().is_empty() && v.take_requests().is_empty(),
            "{line}"
        );
        assert!(v.next.is_none() && !v.wants_sessions, "{line}");
        assert!(
            v.hint
                .as_deref()
                .unwrap_or("")
                .contains("a turn is running"),
            "{line}"
        );
    }
}

#[test]
fn the_slash_menu_lists_filters_moves_completes_and_runs() {
    let mut v = view();
    typed(&mut v, "/");
    assert_eq!(v.menu().len(), COMMANDS.len());
    typed(&mut v, "co");
    let names: Vec<&str> = v.menu().iter().map(|c| c.name).collect();
    assert_eq!(names, ["compact", "cost"]);
    // Up and Down move in the menu, not through the prompt history.
    key(&mut v, 0, KeyCode::Down, KeyModifiers::NONE);
    key(&mut v, 0, KeyCode::Down, KeyModifiers::NONE);
    assert_eq!(v.menu_at, 1, "stops at the last");
    key(&mut v, 0, KeyCode::Tab, KeyModifiers::NONE);
    assert_eq!(v.editor.text(), "/cost");
    key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(v.take_requests(), [Request::Cost]);
    // Enter on a word that names no command runs the highlighted one.
    typed(&mut v, "/co");
    key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(v.take_requests(), [Request::Compact]);
    // One that takes an argument is completed instead, for the argument.
    typed(&mut v, "/mo");
    assert_eq!(v.menu()[0].name, "model");
    key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(v.editor.text(), "/model ");
    assert!(v.take_requests().is_empty() && v.take_commands().is_empty());
    assert!(
        v.menu().is_empty(),
        "the menu closes once an argument is being typed"
    );
    // Esc clears a slash word; a prompt that is not one opens no menu.
    key(&mut v, 0, KeyCode::Char('u'), KeyModifiers::CONTROL);
    typed(&mut v, "/he");
    key(&mut v, 0, KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(v.editor.text(), "");
    typed(&mut v, "hello /x");
    assert!(v.menu().is_empty());
}

fn source_question() -> Question {
    Question::Source {
        card: ApprovalCard {
            approval_id: "startup-0".into(),
            name: "MCP server proj".into(),
            summary: "sh srv.sh".into(),
            detail: "covers: .mcp.json#proj, srv.sh".into(),
            reason: ApprovalReason::UnapprovedSource,
            source_path: ".mcp.json".into(),
            source_sha: "0123456789ab".into(),
            env: vec!["PROJ_TOKEN".into()],
            answered: None,
            outcome: None,
        },
        key: ".mcp.json".into(),
        sha256: "0123456789ab".repeat(5),
    }
}

#[test]
fn the_uis_questions_are_answered_first_in_order_and_hold_the_prompt_back() {
    let mut v = view();
    let trust = Question::Trust {
        project: "/p".into(),
    };
    v.ask(vec![trust.clone(), source_question()]);
    v.event(0, request("a1"));
    typed(&mut v, "hello");
    key(&mut v, 0, KeyCode::Enter, KeyModifiers::NONE);
    assert!(
        v.take_commands().is_empty(),
        "no prompt before the questions"
    );
    assert!(v.hint.as_deref().unwrap().contains("answer the question"));
    key(&mut v, 0, KeyCode::Char('u'), KeyModifiers::CONTROL);
    key(&mut v, 0, KeyCode::Char('y'), KeyModifiers::NONE);
    assert_eq!(
        v.take_requests(),
        [Request::Answer {
            question: Box::new(trust),
            yes: true
        }]
    );
    key(&mut v, 0, KeyCode::Char('n'), KeyModifiers::NONE);
    assert_eq!(
        v.take_requests(),
        [Request::Answer {
            question: Box::new(source_question()),
            yes: false
        }]
    );
    let declined = v
        .take_finished()
        .into_iter()
        .any(|b| matches!(b, Block::Approval(c) if c.outcome == Some(ApprovalOutcome::Declined)));
    assert!(declined, "the answered card is kept with its outcome");
    assert!(
        v.take_commands().is_empty(),
        "the core's card is still pending"
    );
    // Then y goes to the core's approval card.
    key(&mut v, 0, KeyCode::Char('y'), KeyModifiers::NONE);
    assert_eq!(
        v.take_commands(),
        [Command::Approve {
            approval_id: "a1".into(),
            approved: true
        }]
    );
}

#[test]
fn a_mode_change_is_one_line() {
    let mut v = view();
    v.event(0, Event::ApprovalMode { mode: Mode::Auto });
    v.event(
        0,
        Event::HarnessNote {
            call_id: String::new(),
            text: format!("{}auto", openmax_core::machine::MODE_NOTE),
        },
    );
    v.event(
        0,
        Event::HarnessNote {
            call_id: String::new(),
            text: "tools were re-read".into(),
        },
    );
    let n = notices(&v.take_finished());
    assert_eq!(n, ["mode: auto", "note: tools were re-read"]);
}
