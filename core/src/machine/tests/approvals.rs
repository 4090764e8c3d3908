//! Tool rounds and the approval gate: approve, decline, timeout, cancel, non-interactive sessions, deny/ask rules, modes, unapproved sources, bad arguments and plans.

use super::*;

#[test]
fn tool_round_approved_then_next_request() {
    let mut h = H::new();
    to_planning(&mut h);
    h.planned("c1", plan(true));
    assert_eq!(h.take(), s(&["approval_request a1 Gate"]));
    h.approve("a1", true);
    assert_eq!(h.take(), s(&["approval_settled a1 Approved"]));
    assert!(h.has_effect(|e| matches!(e, Effect::RunTool { call_id, .. } if call_id == "c1")));
    h.input(Input::ToolDone {
        call_id: "c1".into(),
        outcome: ToolOutcome {
            ok: true,
            output: "wrote a.rs".into(),
            diffs: vec![FileDiff {
                path: "a.rs".into(),
                diff: "+x".into(),
                added: 1,
                removed: 0,
            }],
            images: Vec::new(),
        },
    });
    assert_eq!(h.take(), s(&["diff c1 a.rs", "tool_end c1 true"]));
    assert_eq!(h.sends(), 2);
    let body = h.last_body();
    let last = body.messages.last().unwrap();
    assert_eq!(
        last.content,
        vec![Block::ToolResult {
            id: "c1".into(),
            ok: true,
            output: "wrote a.rs".into()
        }]
    );
    h.reply("done");
    assert_eq!(
        h.take(),
        s(&["token done", "message_done done", "budget", "done stop"])
    );
}

#[test]
fn approval_declined_tells_the_model() {
    let mut h = H::new();
    to_planning(&mut h);
    h.planned("c1", plan(true));
    h.approve("a1", false);
    assert_eq!(
        h.take(),
        s(&[
            "approval_request a1 Gate",
            "approval_settled a1 Declined",
            "tool_end c1 false"
        ])
    );
    assert!(h.messages("tool_end")[0].contains("declined"));
    assert!(!h.has_effect(|e| matches!(e, Effect::RunTool { .. })));
    assert_eq!(h.sends(), 2);
    h.reply("ok");
}

#[test]
fn approval_times_out() {
    let mut c = config();
    c.limits.approval_timeout_ms = 5_000;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.advance(10);
    h.planned("c1", plan(true));
    assert_eq!(
        h.core.poll_timeout(),
        Some((Millis(5_010), TimerReason::ApprovalTimeout))
    );
    h.advance(100);
    h.input(Input::Timeout); // early: nothing
    assert_eq!(h.take(), s(&["approval_request a1 Gate"]));
    assert_eq!(h.fire_timer(), TimerReason::ApprovalTimeout);
    assert_eq!(
        h.take(),
        s(&["approval_settled a1 TimedOut", "tool_end c1 false"])
    );
    h.approve("a1", true);
    assert_eq!(h.take(), s(&["protocol_error"]));
    h.reply("ok");
}

#[test]
fn cancel_during_approval() {
    let mut h = H::new();
    to_planning(&mut h);
    h.planned("c1", plan(true));
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(
        h.take(),
        s(&[
            "approval_request a1 Gate",
            "approval_settled a1 Cancelled",
            "tool_end c1 false",
            "done cancelled"
        ])
    );
    // The conversation stays well formed: the tool_use has its result.
    let last = h.core.conversation().last().unwrap();
    assert!(matches!(
        last.content[0],
        Block::ToolResult { ok: false, .. }
    ));
}

#[test]
fn non_interactive_declines_at_once() {
    let mut c = config();
    c.non_interactive = true;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(true));
    assert_eq!(
        h.take(),
        s(&[
            "approval_request a1 Gate",
            "approval_settled a1 Declined",
            "tool_end c1 false"
        ])
    );
    h.reply("ok");
}

#[test]
fn deny_rule_refuses_with_a_note() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.permissions = Permissions {
        deny: vec![Rule::parse("write_file(*.rs)").unwrap()],
        ask: vec![],
    };
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(true));
    assert_eq!(h.take(), s(&["tool_end c1 false", "harness_note c1"]));
    assert_eq!(h.messages("tool_end")[0], "denied by rule write_file(*.rs)");
    // The note rides the tool result in the model's transcript, after it.
    let body = h.last_body();
    let last = body.messages.last().unwrap();
    assert!(matches!(last.content[0], Block::ToolResult { .. }));
    assert!(last.plain_text().contains("deny rule"));
    h.reply("ok");
}

#[test]
fn readonly_refuses_mutating_calls_without_asking() {
    let mut c = config();
    c.mode = Mode::Readonly;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(true));
    assert_eq!(h.take(), s(&["tool_end c1 false", "harness_note c1"]));
    assert!(h.messages("tool_end")[0].contains("readonly"));
    h.reply("ok");
}

#[test]
fn auto_runs_without_asking_even_unapproved_sources() {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    to_planning(&mut h);
    let mut p = plan(true);
    p.source = Some(SourceGate {
        source_path: ".openmax/tools/x.json".into(),
        source_sha: "0123456789ab".into(),
        env: vec!["TOKEN".into()],
        approved: false,
    });
    h.planned("c1", p);
    assert_eq!(h.take(), Vec::<String>::new());
    assert!(h.has_effect(|e| matches!(e, Effect::RunTool { .. })));
    assert!(!h.has_effect(|e| matches!(e, Effect::ApproveSource { .. })));
    h.tool_done("c1", true, "ran");
    assert_eq!(h.take(), s(&["tool_end c1 true"]));
    h.reply("ok");
}

#[test]
fn unapproved_source_asks_and_records_the_approval() {
    let mut h = H::new();
    to_planning(&mut h);
    let mut p = plan(false);
    p.source = Some(SourceGate {
        source_path: ".openmax/tools/x.json".into(),
        source_sha: "0123456789ab".into(),
        env: vec!["TOKEN".into()],
        approved: false,
    });
    h.planned("c1", p);
    let req = h.events.last().unwrap().clone();
    assert_eq!(
        req,
        Event::ApprovalRequest {
            approval_id: "a1".into(),
            name: "write_file".into(),
            summary: "write a.rs".into(),
            detail: "+hello".into(),
            reason: crate::wire::ApprovalReason::UnapprovedSource,
            source_path: ".openmax/tools/x.json".into(),
            source_sha: "0123456789ab".into(),
            env: vec!["TOKEN".into()],
        }
    );
    h.take();
    h.approve("a1", true);
    // The approval settles once its record is written.
    assert_eq!(h.take(), Vec::<String>::new());
    assert!(h.has_effect(
        |e| matches!(e, Effect::ApproveSource { approval_id, source_sha, .. }
            if approval_id == "a1" && source_sha == "0123456789ab")
    ));
    assert!(!h.has_effect(|e| matches!(e, Effect::RunTool { .. })));
    h.input(Input::SourceApproved {
        approval_id: "a1".into(),
    });
    assert_eq!(h.take(), s(&["approval_settled a1 Approved"]));
    assert!(h.has_effect(|e| matches!(e, Effect::RunTool { .. })));
    h.tool_done("c1", true, "ran");
    h.reply("ok");
}

fn unapproved_source_pending(h: &mut H) {
    to_planning(h);
    let mut p = plan(false);
    p.source = Some(SourceGate {
        source_path: ".openmax/tools/x.json".into(),
        source_sha: "0123456789ab".into(),
        env: vec![],
        approved: false,
    });
    h.planned("c1", p);
    h.take();
}

#[test]
fn a_failed_approval_record_is_a_protocol_error_and_the_approved_call_still_runs() {
    let mut h = H::new();
    unapproved_source_pending(&mut h);
    h.approve("a1", true);
    h.input(Input::SourceApprovalFailed {
        approval_id: "a1".into(),
        message: "permission denied".into(),
    });
    assert_eq!(
        h.take(),
        s(&["protocol_error", "approval_settled a1 Approved"])
    );
    let m = &h.messages("protocol_error")[0];
    assert!(
        m.contains(".openmax/tools/x.json")
            && m.contains("permission denied")
            && m.contains("will ask again"),
        "{m}"
    );
    assert!(h.has_effect(|e| matches!(e, Effect::RunTool { .. })));
    h.tool_done("c1", true, "ran");
    h.reply("ok");
}

#[test]
fn commands_sent_while_an_approval_is_recorded_are_answered_after_it() {
    let mut h = H::new();
    unapproved_source_pending(&mut h);
    h.approve("a1", true);
    // A cancel and a bad line arrive before the record's answer: held, then handled in order.
    h.line(r#"{"cmd":"cancel"}"#);
    h.line("{bad");
    assert_eq!(h.take(), Vec::<String>::new());
    h.input(Input::SourceApproved {
        approval_id: "a1".into(),
    });
    assert_eq!(
        h.take(),
        s(&["approval_settled a1 Approved", "protocol_error"])
    );
    // The cancel reached the running tool.
    assert!(h.has_effect(|e| matches!(e, Effect::CancelTool { .. })));
    h.tool_done("c1", false, "killed");
    assert_eq!(h.take(), s(&["tool_end c1 false", "done cancelled"]));
}

#[test]
fn no_approval_timeout_while_the_record_is_written() {
    let mut c = config();
    c.limits.approval_timeout_ms = 1_000;
    let mut h = H::with(c);
    unapproved_source_pending(&mut h);
    h.approve("a1", true);
    assert_eq!(h.core.poll_timeout(), None);
    h.input(Input::SourceApproved {
        approval_id: "a1".into(),
    });
    assert_eq!(h.take(), s(&["approval_settled a1 Approved"]));
    h.tool_done("c1", true, "ran");
    h.reply("ok");
}

#[test]
fn ask_rule_gates_a_read_only_call() {
    let mut c = config();
    c.permissions.ask = vec![Rule::parse("write_file(a.rs)").unwrap()];
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(false));
    assert_eq!(h.take(), s(&["approval_request a1 Gate"]));
    h.approve("a1", true);
    h.tool_done("c1", true, "ok");
    h.reply("ok");
}

#[test]
fn non_object_args_fail_without_planning() {
    let mut h = H::new();
    h.user("go");
    h.items(vec![
        ProviderItem::ToolCallStart {
            index: 0,
            id: "".into(),
            name: "write_file".into(),
        },
        ProviderItem::ToolCallArgs {
            index: 0,
            json: "[1,2]".into(),
        },
        ProviderItem::Completed {
            finish_reason: "tool_use".into(),
        },
    ]);
    assert_eq!(
        h.take(),
        s(&[
            "budget",
            "tool_start call_1 write_file",
            "tool_end call_1 false"
        ])
    );
    assert!(h.messages("tool_end")[0].starts_with("arguments are not a JSON object"));
    assert!(!h.has_effect(|e| matches!(e, Effect::PlanTool { .. })));
    h.reply("ok");
}

#[test]
fn invalid_plan_fails_the_call() {
    let mut h = H::new();
    to_planning(&mut h);
    let mut p = plan(false);
    p.invalid = Some("path escapes the project".into());
    h.planned("c1", p);
    assert_eq!(h.take(), s(&["tool_end c1 false"]));
    assert_eq!(h.messages("tool_end")[0], "path escapes the project");
    h.reply("ok");
}

#[test]
fn two_calls_run_in_order() {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    h.user("go");
    h.items(vec![
        ProviderItem::ToolCallStart {
            index: 1,
            id: "b".into(),
            name: "read_file".into(),
        },
        ProviderItem::ToolCallStart {
            index: 0,
            id: "a".into(),
            name: "read_file".into(),
        },
        text_d("reading"),
        ProviderItem::Completed {
            finish_reason: "tool_use".into(),
        },
    ]);
    assert_eq!(
        h.take(),
        s(&[
            "token reading",
            "message_done reading",
            "budget",
            "tool_start a read_file"
        ])
    );
    h.planned("b", plan(false)); // not current: ignored
    h.planned("a", plan(false));
    h.tool_done("a", true, "A");
    assert_eq!(h.take(), s(&["tool_end a true", "tool_start b read_file"]));
    h.planned("b", plan(false));
    h.tool_done("b", true, "B");
    assert_eq!(h.take(), s(&["tool_end b true"]));
    assert_eq!(h.sends(), 2);
    h.reply("ok");
}

/// A turn that ends while an approval's record is written (a crash) does not run the call
/// when the record's answer arrives after it.
#[test]
fn an_approval_recorded_after_its_turn_ended_runs_nothing() {
    let mut h = H::new();
    unapproved_source_pending(&mut h);
    h.approve("a1", true);
    h.input(Input::Crashed {
        message: "boom".into(),
    });
    let evs = h.take();
    assert_eq!(
        evs.last().map(String::as_str),
        Some("done error"),
        "{evs:?}"
    );
    h.input(Input::SourceApproved {
        approval_id: "a1".into(),
    });
    assert_eq!(h.take(), Vec::<String>::new());
    assert!(!h.has_effect(|e| matches!(e, Effect::RunTool { .. })));
}

/// A plan asking to confirm something new (a `web_fetch` host) is a `gate` request in `ask`
/// and `readonly`, once per key and session: approved, the same key runs unasked; declined,
/// it asks again; another key asks; `auto` never asks.
#[test]
fn a_confirm_key_is_asked_once_per_session_in_ask_and_readonly() {
    let fetch = |host: &str| ToolPlan {
        confirm: Some(format!("web_fetch host {host}")),
        ..plan(false)
    };
    for mode in [Mode::Ask, Mode::Readonly, Mode::Auto] {
        let mut c = config();
        c.mode = mode;
        let mut h = H::with(c);
        let mut approvals = 0;
        for (i, (host, answer)) in [
            ("a.example", false),
            ("a.example", true),
            ("a.example", true),
            ("b.example", true),
        ]
        .into_iter()
        .enumerate()
        {
            let id = format!("c{i}");
            h.user("fetch");
            h.tool_reply(&id, "write_file", r#"{"path":"a.rs"}"#);
            h.planned(&id, fetch(host));
            let asked = h.take().iter().any(|e| e.starts_with("approval_request"));
            let want = mode != Mode::Auto && i != 2;
            assert_eq!(asked, want, "{mode:?} call {i}");
            if asked {
                approvals += 1;
                h.approve(&format!("a{approvals}"), answer);
            }
            if answer || !asked {
                h.tool_done(&id, true, "fetched");
            }
            h.reply("ok");
            h.take();
        }
    }
}
