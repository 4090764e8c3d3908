//! Admission and framing: refused prompts, a second `user` in flight, bad lines and framing faults, freeze notes.

use super::*;

#[test]
fn empty_and_untrusted_users_are_refused_with_done() {
    let mut h = H::new();
    h.user("   ");
    assert_eq!(h.take(), s(&["protocol_error", "done refused"]));
    let mut c = config();
    c.trusted = false;
    let mut h2 = H::with(c);
    h2.user("hi");
    assert_eq!(h2.take(), s(&["protocol_error", "done refused"]));
    assert!(h2.messages("protocol_error")[0].contains("openmax --trust"));
    assert_eq!(h2.sends(), 0);
}

#[test]
fn user_in_flight_gets_protocol_error_alone() {
    let mut h = H::new();
    h.user("one");
    h.user("two");
    assert_eq!(h.take(), s(&["protocol_error"]));
    assert_eq!(h.sends(), 1);
    h.reply("ok");
    assert_eq!(
        h.take(),
        s(&["token ok", "message_done ok", "budget", "done stop"])
    );
}

#[test]
fn bad_lines_and_framing_faults_are_protocol_errors() {
    let mut h = H::new();
    h.line("");
    h.line("   ");
    assert_eq!(h.take(), Vec::<String>::new());
    h.line("{nope");
    h.line(r#"{"cmd":"dance"}"#);
    h.input(Input::Framing(FramingFault::TooLong { len: 9_000_000 }));
    h.input(Input::Framing(FramingFault::NotUtf8));
    assert_eq!(h.take(), s(&["protocol_error"; 4]));
    let m = h.messages("protocol_error");
    assert!(m[1].contains("dance") && m[1].contains("approval_mode"));
    assert_eq!(m[2], "line longer than 8 MiB (9000000 bytes) skipped");
    assert!(m[3].contains("UTF-8"));
    // The session continues.
    h.user("hi");
    h.reply("ok");
    assert_eq!(h.take().last().unwrap(), "done stop");
}

#[test]
fn freeze_notes_become_harness_notes_and_reach_the_model() {
    let mut c = config();
    c.freeze.notes = vec!["tool x.json is broken".into()];
    let mut h = H::with(c);
    h.user("hi");
    assert_eq!(h.take(), s(&["harness_note"]));
    let body = h.last_body();
    assert_eq!(body.messages.len(), 1);
    assert!(body.messages[0]
        .plain_text()
        .contains("tool x.json is broken"));
    assert!(body.messages[0].plain_text().ends_with("hi"));
    h.reply("ok");
}
