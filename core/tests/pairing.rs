//! The pairing checker: what only commands and events together show.

use openmax_core::validate::{PairingChecker, Step, Violation, Where};

const HELLO: &str = r#"{"type":"hello","proto":"openmax-stdio/6","protocol_version":6,"session_id":"s1","version":"0.2.0","project":"/p","continued":false}"#;

fn c(s: &str) -> Step {
    Step::Command(s.to_string())
}
fn e(s: &str) -> Step {
    Step::Event(s.to_string())
}
fn ev(ty: &str, fields: &str) -> Step {
    if fields.is_empty() {
        e(&format!(r#"{{"session_id":"s1","type":"{ty}"}}"#))
    } else {
        e(&format!(r#"{{"session_id":"s1","type":"{ty}",{fields}}}"#))
    }
}
fn done(r: &str) -> Step {
    ev("done", &format!(r#""stop_reason":"{r}""#))
}
fn pe() -> Step {
    e(r#"{"type":"protocol_error","message":"x"}"#)
}
fn user(t: &str) -> Step {
    c(&format!(r#"{{"cmd":"user","text":"{t}"}}"#))
}
fn areq(id: &str) -> Step {
    ev(
        "approval_request",
        &format!(
            r#""approval_id":"{id}","name":"w","summary":"s","detail":"d","reason":"gate","source_path":"","source_sha":"""#
        ),
    )
}
fn aset(id: &str, outcome: &str) -> Step {
    ev(
        "approval_settled",
        &format!(r#""approval_id":"{id}","outcome":"{outcome}""#),
    )
}
fn tool_start(id: &str) -> Step {
    ev(
        "tool_start",
        &format!(r#""call_id":"{id}","name":"write_file","args":{{}}"#),
    )
}
fn tool_end(id: &str) -> Step {
    ev(
        "tool_end",
        &format!(r#""call_id":"{id}","ok":true,"output":"""#),
    )
}

fn run(steps: &[Step]) -> Vec<Violation> {
    PairingChecker::check(steps)
}

fn assert_clean(steps: &[Step]) {
    let v = run(steps);
    assert!(
        v.is_empty(),
        "{}",
        v.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn assert_violation(steps: &[Step], at: Where, needle: &str) {
    let v = run(steps);
    assert!(
        v.iter().any(|v| v.at == at && v.message.contains(needle)),
        "wanted {at:?} {needle:?}, found:\n{}",
        v.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_full_session_pairs_cleanly() {
    assert_clean(&[
        e(HELLO),
        user("hi"),
        ev("token", r#""text":"he""#),
        ev("message_done", r#""text":"he""#),
        done("stop"),
        user("write"),
        ev("message_done", r#""text":"""#),
        tool_start("c1"),
        areq("a1"),
        c(r#"{"cmd":"approve","approval_id":"a1","approved":true}"#),
        aset("a1", "approved"),
        tool_end("c1"),
        ev("message_done", r#""text":"ok""#),
        done("stop"),
        c(r#"{"cmd":"approval_mode","mode":"auto"}"#),
        e(r#"{"type":"approval_mode","mode":"auto"}"#),
        c(r#"{"cmd":"reload"}"#),
        ev("refrozen", r#""tools":[],"skills":[],"changes":[]"#),
        c("   "),
        c(r#"{"cmd":"cancel"}"#),
        c(r#"{"cmd":"quit"}"#),
        Step::EndOfInput,
    ]);
}

#[test]
fn every_admitted_user_is_answered_by_exactly_one_done() {
    assert_violation(
        &[e(HELLO), user("hi"), ev("message_done", r#""text":"""#)],
        Where::End,
        "the user command at step 2 was never answered by done",
    );
    assert_violation(
        &[e(HELLO), user("hi"), done("stop"), done("stop")],
        Where::Step(4),
        "done answers no admitted user command",
    );
}

#[test]
fn a_user_while_a_turn_is_in_flight_gets_a_protocol_error_and_no_done() {
    let good = [
        e(HELLO),
        user("one"),
        ev("token", r#""text":"a""#),
        user("two"),
        pe(),
        ev("message_done", r#""text":"a""#),
        done("stop"),
    ];
    assert_clean(&good);
    let mut answered = good.to_vec();
    answered.push(done("stop"));
    assert_violation(
        &answered,
        Where::Step(8),
        "done answers no admitted user command",
    );
    let mut silent = good.to_vec();
    silent.remove(4);
    assert_violation(&silent, Where::End, "user while a turn is in flight");
}

#[test]
fn empty_text_gets_protocol_error_then_done_refused() {
    assert_clean(&[e(HELLO), user(""), pe(), done("refused")]);
    assert_violation(
        &[e(HELLO), user(""), pe(), done("stop")],
        Where::Step(4),
        "had empty text, so its done must be refused",
    );
    assert_violation(
        &[e(HELLO), user(""), done("refused")],
        Where::End,
        "user with empty text",
    );
    // An untrusted project refuses any user the same way.
    assert_clean(&[e(HELLO), user("hi"), pe(), done("refused")]);
}

#[test]
fn an_approve_for_an_unknown_or_settled_id_gets_a_protocol_error() {
    let approve = c(r#"{"cmd":"approve","approval_id":"a9","approved":true}"#);
    assert_clean(&[e(HELLO), approve.clone(), pe()]);
    assert_violation(
        &[e(HELLO), approve],
        Where::End,
        "never issued or already settled",
    );
    let settled = [
        e(HELLO),
        user("go"),
        areq("a1"),
        aset("a1", "timed_out"),
        done("stop"),
        c(r#"{"cmd":"approve","approval_id":"a1","approved":false}"#),
    ];
    assert_violation(&settled, Where::End, "owed a protocol_error");
    let twice = [
        e(HELLO),
        user("go"),
        areq("a1"),
        c(r#"{"cmd":"approve","approval_id":"a1","approved":true}"#),
        c(r#"{"cmd":"approve","approval_id":"a1","approved":true}"#),
        aset("a1", "approved"),
        done("stop"),
    ];
    assert_violation(&twice, Where::End, "already answered");
}

#[test]
fn an_approval_settles_as_the_client_answered() {
    assert_violation(
        &[
            e(HELLO),
            user("go"),
            areq("a1"),
            c(r#"{"cmd":"approve","approval_id":"a1","approved":true}"#),
            aset("a1", "declined"),
            done("stop"),
        ],
        Where::Step(5),
        "the client's approve said approved: true",
    );
}

#[test]
fn after_quit_or_eof_pending_approvals_settle_declined() {
    for end in [c(r#"{"cmd":"quit"}"#), Step::EndOfInput] {
        assert_clean(&[
            e(HELLO),
            user("go"),
            areq("a1"),
            end.clone(),
            aset("a1", "declined"),
            done("cancelled"),
        ]);
        assert_violation(
            &[
                e(HELLO),
                user("go"),
                areq("a1"),
                end.clone(),
                aset("a1", "approved"),
                done("stop"),
            ],
            Where::Step(5),
            "pending approvals are declined",
        );
        assert_violation(
            &[e(HELLO), user("go"), areq("a1"), end.clone()],
            Where::End,
            "never settled declined",
        );
        // An approval issued after quit is declined too.
        assert_violation(
            &[
                e(HELLO),
                user("go"),
                end.clone(),
                areq("a2"),
                aset("a2", "approved"),
                done("stop"),
            ],
            Where::Step(5),
            "pending approvals are declined",
        );
    }
}

#[test]
fn unknown_or_malformed_commands_get_a_protocol_error() {
    for bad in [
        r#"{"cmd":"launch"}"#,
        "{not json",
        r#"{"cmd":"approve"}"#,
        "[1]",
    ] {
        assert_clean(&[e(HELLO), c(bad), pe()]);
        assert_violation(&[e(HELLO), c(bad)], Where::End, "owed a protocol_error");
    }
}

#[test]
fn approval_mode_and_reload_get_their_answers() {
    assert_violation(
        &[
            e(HELLO),
            c(r#"{"cmd":"approval_mode","mode":"ask"}"#),
            e(r#"{"type":"approval_mode","mode":"auto"}"#),
        ],
        Where::Step(3),
        "asked for \"ask\"",
    );
    assert_clean(&[
        e(HELLO),
        c(r#"{"cmd":"approval_mode","mode":"yolo"}"#),
        pe(),
    ]);
    assert_violation(
        &[e(HELLO), e(r#"{"type":"approval_mode","mode":"auto"}"#)],
        Where::Step(2),
        "no approval_mode command",
    );
    assert_violation(
        &[
            e(HELLO),
            ev("refrozen", r#""tools":[],"skills":[],"changes":[]"#),
        ],
        Where::Step(2),
        "no reload command",
    );
    assert_violation(
        &[e(HELLO), c(r#"{"cmd":"reload"}"#)],
        Where::End,
        "owed a refrozen or a protocol_error",
    );
    assert_clean(&[
        e(HELLO),
        user("go"),
        c(r#"{"cmd":"reload"}"#),
        pe(),
        done("stop"),
    ]);
}

#[test]
fn stream_violations_are_reported_with_their_step() {
    assert_violation(
        &[e(HELLO), user("go"), tool_end("c9"), done("stop")],
        Where::Step(3),
        "tool_end names call_id \"c9\"",
    );
}
