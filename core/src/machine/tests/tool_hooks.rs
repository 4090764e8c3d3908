//! Blocking `tool_start` hooks: refusals, rewrites checked against the schema, fail-closed
//! failures and unapproved project hooks, `match`, chains, and a cancel while one runs.

use super::*;

fn guarded(hooks: Vec<HookSpec>, mode: Mode) -> H {
    let mut c = config();
    c.mode = mode;
    c.freeze.tools[0].parameters = json!({
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": false
    });
    c.freeze.hooks = hooks;
    H::with(c)
}

fn matching(name: &str, pattern: &str) -> HookSpec {
    HookSpec {
        matcher: Some(pattern.into()),
        ..hook(name, "tool_start", true)
    }
}

fn answer(h: &mut H, outcome: HookOutcome) {
    let run = last_hook_run(h);
    h.input(Input::HookDone {
        hook_run: run,
        outcome,
    });
}

fn plans(h: &H) -> usize {
    h.effects
        .iter()
        .filter(|e| matches!(e, Effect::PlanTool { .. }))
        .count()
}

fn runs(h: &H) -> Vec<serde_json::Value> {
    h.effects
        .iter()
        .filter_map(|e| match e {
            Effect::RunTool { args, .. } => Some(args.clone()),
            _ => None,
        })
        .collect()
}

fn tool_start_args(h: &H) -> Vec<serde_json::Value> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::ToolStart { args, .. } => Some(serde_json::Value::Object(args.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_refused_call_is_never_planned_or_run_and_the_turn_goes_on() {
    let mut h = guarded(vec![hook("guard", "tool_start", true)], Mode::Auto);
    h.user("push it");
    h.tool_reply("c1", "write_file", r#"{"path":"a.rs"}"#);
    assert_eq!(
        h.take(),
        s(&["budget"]),
        "no tool_start before the hook answers"
    );
    assert!(h.has_effect(|e| matches!(
        e,
        Effect::RunHook { event: HookEvent::ToolStart, payload, .. }
            if payload["call_id"] == "c1" && payload["name"] == "write_file"
                && payload["args"] == json!({"path": "a.rs"})
    )));
    answer(
        &mut h,
        HookOutcome::Refuse {
            reason: "not on main".into(),
        },
    );
    assert_eq!(
        h.take(),
        s(&["tool_start c1 write_file", "tool_end c1 false"])
    );
    assert_eq!(plans(&h), 0);
    assert!(runs(&h).is_empty());
    assert_eq!(
        h.messages("tool_end"),
        ["refused by the tool_start hook guard: not on main; the call was not run"]
    );
    assert_eq!(h.sends(), 2, "the model is asked again");
    assert!(serde_json::to_string(&h.last_body())
        .unwrap()
        .contains("not on main"));
    h.reply("understood");
}

#[test]
fn a_rewrite_is_what_starts_is_shown_on_the_card_and_runs() {
    let mut h = guarded(vec![hook("guard", "tool_start", true)], Mode::Ask);
    h.user("write it");
    h.tool_reply("c1", "write_file", r#"{"path":"a.rs"}"#);
    h.take();
    answer(
        &mut h,
        HookOutcome::Rewrite {
            args: json!({"path": "safe/a.rs"}),
        },
    );
    assert_eq!(h.take(), s(&["tool_start c1 write_file"]));
    assert_eq!(tool_start_args(&h), [json!({"path": "safe/a.rs"})]);
    assert!(h.has_effect(|e| matches!(
        e,
        Effect::PlanTool { args, .. } if *args == json!({"path": "safe/a.rs"})
    )));
    h.planned("c1", plan(true));
    let detail = h
        .events
        .iter()
        .find_map(|e| match e {
            Event::ApprovalRequest { detail, .. } => Some(detail.clone()),
            _ => None,
        })
        .expect("an approval request");
    assert!(
        detail.starts_with(
            "Arguments rewritten by the tool_start hook guard; the model asked for {\"path\":\"a.rs\"}"
        ),
        "{detail}"
    );
    h.approve("a1", true);
    assert_eq!(runs(&h), [json!({"path": "safe/a.rs"})]);
    h.take();
    h.tool_done("c1", true, "wrote");
    assert_eq!(h.take(), s(&["tool_end c1 true", "harness_note c1"]));
    assert!(
        h.messages("harness_note")[0].contains("the call was made with {\"path\":\"safe/a.rs\"}")
    );
    h.reply("done");
}

#[test]
fn a_rewrite_the_schema_refuses_refuses_the_call() {
    for bad in [json!({"path": 5}), json!({"file": "a.rs"}), json!(["a.rs"])] {
        let mut h = guarded(vec![hook("guard", "tool_start", true)], Mode::Auto);
        h.user("write it");
        h.tool_reply("c1", "write_file", r#"{"path":"a.rs"}"#);
        answer(&mut h, HookOutcome::Rewrite { args: bad.clone() });
        assert_eq!(
            tool_start_args(&h),
            [json!({"path": "a.rs"})],
            "the arguments as they stood"
        );
        let out = &h.messages("tool_end")[0];
        assert!(
            out.starts_with("refused: the tool_start hook guard rewrote the arguments into ones the tool's schema refuses ($"),
            "{bad}: {out}"
        );
        assert_eq!(plans(&h), 0);
        assert!(runs(&h).is_empty());
        h.reply("ok");
    }
}

#[test]
fn a_hook_that_fails_or_times_out_refuses_the_call() {
    let mut h = guarded(vec![hook("guard", "tool_start", true)], Mode::Auto);
    h.user("write it");
    h.tool_reply("c1", "write_file", r#"{"path":"a.rs"}"#);
    h.take();
    answer(
        &mut h,
        HookOutcome::Failed {
            detail: "timed out after 1 s".into(),
        },
    );
    assert_eq!(
        h.take(),
        s(&[
            "hook_failed guard tool_start",
            "tool_start c1 write_file",
            "tool_end c1 false"
        ])
    );
    assert!(h.messages("tool_end")[0].contains("did not answer (timed out after 1 s)"));
    assert!(runs(&h).is_empty());
    h.reply("ok");
}

#[test]
fn an_unapproved_project_hook_refuses_without_running() {
    let mut h = guarded(
        vec![project_hook("guard", "tool_start", false, None)],
        Mode::Auto,
    );
    h.user("write it");
    h.tool_reply("c1", "write_file", r#"{"path":"a.rs"}"#);
    assert_eq!(
        h.take(),
        s(&[
            "budget",
            "hook_failed guard tool_start",
            "tool_start c1 write_file",
            "tool_end c1 false"
        ])
    );
    assert!(!h.has_effect(|e| matches!(e, Effect::RunHook { .. })));
    assert!(h.messages("tool_end")[0].contains("openmax --approve check.sh"));
    assert!(runs(&h).is_empty());
    h.reply("ok");
}

#[test]
fn match_picks_the_tools_a_hook_runs_for() {
    let hooks = vec![
        matching("git", "shell"),
        matching("gh", "mcp__github__*"),
        matching("files", "edit_file|write_file"),
    ];
    assert!(!hooks[0].applies_to(Some("write_file")));
    assert!(hooks[1].applies_to(Some("mcp__github__create_issue")));
    assert!(!hooks[1].applies_to(Some("mcp__gitlab__create_issue")));
    assert!(hooks[2].applies_to(Some("write_file")));
    assert!(hooks[2].applies_to(Some("edit_file")));
    let mut h = guarded(hooks, Mode::Auto);
    h.user("write it");
    h.tool_reply("c1", "write_file", r#"{"path":"a.rs"}"#);
    let ran: Vec<String> = h
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::RunHook { hook, .. } => Some(hook.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ran, ["files"]);
    answer(&mut h, HookOutcome::Pass);
    assert_eq!(plans(&h), 1);
    h.planned("c1", plan(true));
    h.tool_done("c1", true, "ok");
    h.reply("ok");
}

#[test]
fn chained_hooks_each_read_the_arguments_the_one_before_left() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.freeze.hooks = vec![
        hook("first", "tool_start", true),
        hook("second", "tool_start", true),
        hook("watch", "tool_start", false),
    ];
    let mut h = H::with(c);
    h.user("write it");
    h.tool_reply("c1", "write_file", r#"{"path":"a.rs"}"#);
    answer(
        &mut h,
        HookOutcome::Rewrite {
            args: json!({"path": "b.rs"}),
        },
    );
    let payload = |h: &H, name: &str| {
        h.effects.iter().rev().find_map(|e| match e {
            Effect::RunHook { hook, payload, .. } if hook == name => Some(payload.clone()),
            _ => None,
        })
    };
    assert_eq!(
        payload(&h, "second").unwrap()["args"],
        json!({"path": "b.rs"})
    );
    assert!(
        payload(&h, "watch").is_none(),
        "observers see the call once it starts"
    );
    answer(&mut h, HookOutcome::Pass);
    assert_eq!(
        payload(&h, "watch").unwrap()["args"],
        json!({"path": "b.rs"})
    );
    h.planned("c1", plan(true));
    assert_eq!(runs(&h), [json!({"path": "b.rs"})]);
    h.tool_done("c1", true, "ok");
    assert!(h.messages("harness_note")[0].contains("first"));
    h.reply("ok");
}

#[test]
fn a_cancel_while_the_hook_runs_starts_nothing_and_its_late_answer_is_ignored() {
    let mut h = guarded(vec![hook("guard", "tool_start", true)], Mode::Auto);
    h.user("write it");
    h.tool_reply("c1", "write_file", r#"{"path":"a.rs"}"#);
    let run = last_hook_run(&h);
    h.take();
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(h.take(), s(&["done cancelled"]));
    h.input(Input::HookDone {
        hook_run: run,
        outcome: HookOutcome::Pass,
    });
    assert!(h.take().is_empty());
    assert_eq!(plans(&h), 0);
    assert!(runs(&h).is_empty());
    h.user("again");
    let last = h.last_body();
    assert!(serde_json::to_string(&last)
        .unwrap()
        .contains("not run: the turn ended"));
    h.reply("ok");
}

#[test]
fn a_rewrite_answer_from_another_hook_is_reported_and_passed() {
    let mut c = config();
    c.freeze.hooks = vec![hook("gate", "user_prompt_submit", true)];
    let mut h = H::with(c);
    h.user("hi");
    answer(
        &mut h,
        HookOutcome::Rewrite {
            args: json!({"x": 1}),
        },
    );
    assert_eq!(h.take(), s(&["hook_failed gate user_prompt_submit"]));
    assert_eq!(h.sends(), 1);
    h.reply("ok");
}
