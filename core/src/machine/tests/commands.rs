//! The `approve`, `approval_mode` and `reload` commands, and commands held while a save or refreeze is in flight.

use super::*;

#[test]
fn approve_for_unknown_or_settled_ids_is_a_protocol_error() {
    let mut h = H::new();
    h.approve("a9", true);
    assert_eq!(h.take(), s(&["protocol_error"]));
    to_planning(&mut h);
    h.planned("c1", plan(true));
    h.approve("a1", true);
    h.approve("a1", true);
    assert_eq!(
        h.take(),
        s(&[
            "approval_request a1 Gate",
            "approval_settled a1 Approved",
            "protocol_error"
        ])
    );
    let m = h.messages("protocol_error");
    assert!(m[0].contains("never") || m[0].contains("was issued"));
    assert!(m[1].contains("already settled"));
    h.line(r#"{"cmd":"approve","approval_id":"a1"}"#);
    assert_eq!(h.take(), s(&["protocol_error"]));
    h.tool_done("c1", true, "ok");
    h.reply("ok");
}

#[test]
fn approval_mode_is_saved_acknowledged_and_noted() {
    let mut h = H::new();
    h.cmd(json!({"cmd":"approval_mode","mode":"auto"}));
    assert!(h.has_effect(|e| matches!(e, Effect::SaveMode { mode: Mode::Auto })));
    assert_eq!(h.core.mode(), Mode::Ask);
    h.input(Input::ModeSaved { mode: Mode::Auto });
    assert_eq!(h.take(), s(&["approval_mode auto", "harness_note"]));
    assert_eq!(h.core.mode(), Mode::Auto);
    assert!(h.has_effect(|e| matches!(e, Effect::Persist { records, .. } if records == &vec![Record::ModeChanged { mode: Mode::Auto }])));
    h.user("hi");
    assert!(h.last_body().messages[0]
        .plain_text()
        .contains("approval mode is now auto"));
    h.reply("ok");
}

/// Five changes before a prompt: the model is told once, of the mode in force; every change
/// still has its own `harness_note` on the wire; other pending notes stay, in order.
#[test]
fn pending_mode_notes_coalesce_into_the_mode_in_force() {
    let mut h = H::new();
    for mode in [
        Mode::Readonly,
        Mode::Auto,
        Mode::Ask,
        Mode::Readonly,
        Mode::Auto,
    ] {
        h.cmd(json!({"cmd":"approval_mode","mode":mode.as_str()}));
        h.input(Input::ModeSaved { mode });
    }
    assert_eq!(h.messages("harness_note").len(), 5);
    h.user("the prompt");
    let first = &h.last_body().messages[0];
    let notes: Vec<&Block> = first.content.iter().filter(|b| b.is_note()).collect();
    assert_eq!(notes, vec![&Block::note("approval mode is now auto")]);
    assert_eq!(first.said_text(), "the prompt");
    h.reply("ok");
}

#[test]
fn approval_mode_rejections() {
    let mut h = H::new();
    h.cmd(json!({"cmd":"approval_mode","mode":"yolo"}));
    assert!(h.messages("protocol_error")[0].contains("auto, ask, readonly"));
    h.cmd(json!({"cmd":"approval_mode","mode":"readonly"}));
    h.input(Input::ModeSaveFailed {
        mode: Mode::Readonly,
        message: "disk full".into(),
    });
    let m = h.messages("protocol_error");
    assert!(m[1].contains("unchanged") && m[1].contains("disk full"));
    assert_eq!(h.core.mode(), Mode::Ask);
    assert_eq!(h.take(), s(&["protocol_error", "protocol_error"]));

    let mut c = config();
    c.agent_spawned = true;
    let mut h = H::with(c);
    h.cmd(json!({"cmd":"approval_mode","mode":"auto"}));
    assert_eq!(h.take(), s(&["protocol_error"]));
    assert!(h.messages("protocol_error")[0].contains("agent-spawned"));
    assert!(!h.has_effect(|e| matches!(e, Effect::SaveMode { .. })));
}

#[test]
fn a_pending_approval_stays_pending_when_the_mode_changes() {
    let mut h = H::new();
    to_planning(&mut h);
    h.planned("c1", plan(true));
    h.cmd(json!({"cmd":"approval_mode","mode":"auto"}));
    h.input(Input::ModeSaved { mode: Mode::Auto });
    assert_eq!(
        h.take(),
        s(&[
            "approval_request a1 Gate",
            "approval_mode auto",
            "harness_note"
        ])
    );
    h.approve("a1", true);
    h.tool_done("c1", true, "ok");
    assert!(h
        .last_body()
        .messages
        .last()
        .unwrap()
        .plain_text()
        .contains("approval mode is now auto"));
    h.reply("ok");
}

#[test]
fn reload_refreezes_between_turns_only() {
    let mut h = H::new();
    h.user("hi");
    h.cmd(json!({"cmd":"reload"}));
    assert_eq!(h.take(), s(&["protocol_error"]));
    h.reply("ok");
    h.take();
    h.cmd(json!({"cmd":"reload"}));
    assert!(h.has_effect(|e| matches!(e, Effect::Refreeze)));
    let mut f = freeze();
    f.system = "new prompt".into();
    f.skills = vec!["review".into()];
    let change = |name: &str, by: &str| crate::wire::event::FreezeChange {
        kind: "prompt".into(),
        name: name.into(),
        change: "changed".into(),
        path: name.into(),
        by: by.into(),
    };
    f.changes = vec![change("AGENTS.md", "outside"), change("NOTES.md", "agent")];
    h.input(Input::Frozen {
        snapshot: Box::new(f),
    });
    assert_eq!(h.take(), s(&["refrozen", "harness_note"]));
    assert!(h.messages("harness_note")[0].contains("AGENTS.md"));
    h.user("again");
    let body = h.last_body();
    assert_eq!(body.system, "new prompt");
    let receipt = body.messages.last().unwrap().plain_text();
    assert!(
        receipt.contains(
            "tools, skills and prompt were re-read; changes: \
             prompt AGENTS.md changed (AGENTS.md, from outside this session); \
             prompt NOTES.md changed (NOTES.md, by this session's agent)"
        ),
        "{receipt}"
    );
    h.reply("ok");
}

/// The shell writes today's date into the prompt at each freeze; the core, which reads no
/// clock, keeps the frozen prompt however much time passes, and takes the new date only from
/// a refreeze's snapshot, recording it for a resumed session.
#[test]
fn the_date_in_the_prompt_changes_only_with_a_refreeze() {
    let dated = |day: &str| {
        let mut f = freeze();
        f.system = format!("You are openmax.\n\n# Environment\n\n- Today's date: {day}");
        f
    };
    let mut h = H::with(CoreConfig {
        seed: 42,
        ..CoreConfig::new("s1", dated("2031-02-03"))
    });
    h.user("hi");
    assert!(h.last_body().system.ends_with("Today's date: 2031-02-03"));
    h.reply("ok");
    // A day later, still the frozen date.
    h.advance(86_400_000);
    h.user("again");
    assert!(h.last_body().system.ends_with("Today's date: 2031-02-03"));
    h.reply("ok");
    h.take();
    h.cmd(json!({"cmd":"reload"}));
    assert!(h.has_effect(|e| matches!(e, Effect::Refreeze)));
    h.input(Input::Frozen {
        snapshot: Box::new(dated("2031-02-04")),
    });
    assert_eq!(h.take(), s(&["refrozen", "harness_note"]));
    let recorded = h.effects.iter().rev().find_map(|e| match e {
        Effect::Persist { records, .. } => records.iter().find_map(|r| match r {
            Record::Refrozen { system, .. } => Some(system.clone()),
            _ => None,
        }),
        _ => None,
    });
    assert_eq!(
        recorded.as_deref().map(|s| s.ends_with("2031-02-04")),
        Some(true),
        "the refrozen prompt is recorded for --continue"
    );
    h.user("and now");
    let system = h.last_body().system;
    assert!(system.ends_with("Today's date: 2031-02-04"), "{system}");
    assert!(!system.contains("2031-02-03"), "{system}");
    h.reply("ok");
}

#[test]
fn commands_after_reload_wait_for_the_snapshot() {
    let mut h = H::new();
    h.cmd(json!({"cmd":"reload"}));
    h.user("hi");
    h.line("{bad");
    assert_eq!(h.take(), Vec::<String>::new());
    assert_eq!(h.sends(), 0);
    h.input(Input::Frozen {
        snapshot: Box::new(freeze()),
    });
    assert_eq!(h.take(), s(&["refrozen", "harness_note", "protocol_error"]));
    assert_eq!(h.sends(), 1);
    h.reply("ok");
}

#[test]
fn commands_after_approval_mode_wait_for_the_save() {
    let mut h = H::new();
    h.cmd(json!({"cmd":"approval_mode","mode":"readonly"}));
    h.line("{bad");
    h.input(Input::EndOfInput);
    assert_eq!(h.take(), Vec::<String>::new());
    h.input(Input::ModeSaved {
        mode: Mode::Readonly,
    });
    assert_eq!(
        h.take(),
        s(&["approval_mode readonly", "harness_note", "protocol_error"])
    );
    assert_eq!(h.effects.last(), Some(&Effect::Exit { code: 0 }));
}

#[test]
fn a_notice_is_a_note_for_the_client_and_the_next_prompt() {
    let mut h = H::new();
    h.input(Input::Notice {
        text: "MCP server x says its tools changed".into(),
    });
    assert_eq!(h.take(), s(&["harness_note"]));
    h.user("hi");
    let body = h.last_body();
    assert!(body
        .messages
        .last()
        .unwrap()
        .plain_text()
        .contains("tools changed"));
    h.reply("ok");
}

#[test]
fn a_refreeze_that_reads_the_project_trusted_lets_turns_run() {
    let mut c = config();
    c.trusted = false;
    let mut h = H::with(c);
    h.user("hi");
    assert_eq!(h.take(), s(&["protocol_error", "done refused"]));
    // A snapshot that says nothing of trust leaves it as it was.
    h.cmd(json!({"cmd":"reload"}));
    h.input(Input::Frozen {
        snapshot: Box::new(freeze()),
    });
    h.user("hi");
    assert!(h.take().ends_with(&s(&["protocol_error", "done refused"])));
    // One read after `openmax --trust` (or the UI's trust question) does.
    h.cmd(json!({"cmd":"reload"}));
    let mut f = freeze();
    f.trusted = Some(true);
    h.input(Input::Frozen {
        snapshot: Box::new(f),
    });
    h.user("hi");
    assert_eq!(h.sends(), 1);
    h.reply("ok");
    assert!(h.take().ends_with(&s(&["done stop"])));
}
