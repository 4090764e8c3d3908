//! Hooks: prompt-hook refusals, failed and unloaded hooks, `turn_end` refusals and their bound, observe hooks.

use super::*;

#[test]
fn prompt_hook_refusal_blocks_the_turn() {
    let mut c = config();
    c.freeze.hooks = vec![hook("guard", "user_prompt_submit", true)];
    let mut h = H::with(c);
    h.user("rm everything");
    assert_eq!(h.sends(), 0);
    let run = last_hook_run(&h);
    h.input(Input::HookDone {
        hook_run: run,
        outcome: HookOutcome::Refuse {
            reason: "no".into(),
        },
    });
    assert_eq!(h.take(), s(&["done blocked"]));
    assert_eq!(h.sends(), 0);
}

#[test]
fn failed_and_unloaded_prompt_hooks_are_reported_and_the_turn_proceeds() {
    let mut c = config();
    let unloaded = project_hook("stale", "user_prompt_submit", false, None);
    c.freeze.hooks = vec![unloaded, hook("guard", "user_prompt_submit", true)];
    let mut h = H::with(c);
    h.user("hi");
    let run = last_hook_run(&h);
    h.input(Input::HookDone {
        hook_run: run,
        outcome: HookOutcome::Failed {
            detail: "exit 1".into(),
        },
    });
    assert_eq!(
        h.take(),
        s(&[
            "hook_failed stale user_prompt_submit",
            "hook_failed guard user_prompt_submit"
        ])
    );
    assert_eq!(h.sends(), 1);
    h.reply("ok");
}

#[test]
fn turn_end_refusal_continues_the_turn() {
    let mut c = config();
    c.freeze.hooks = vec![hook("verify", "turn_end", true)];
    let mut h = H::with(c);
    h.user("fix it");
    h.reply("done");
    let run = last_hook_run(&h);
    h.input(Input::HookDone {
        hook_run: run,
        outcome: HookOutcome::Refuse {
            reason: "tests fail".into(),
        },
    });
    assert_eq!(
        h.take(),
        s(&[
            "token done",
            "message_done done",
            "budget",
            "turn_refused verify 0/8"
        ])
    );
    assert_eq!(h.sends(), 2);
    assert_eq!(
        h.last_body().messages.last().unwrap().plain_text(),
        "tests fail"
    );
    h.reply("fixed");
    let run = last_hook_run(&h);
    h.input(Input::HookDone {
        hook_run: run,
        outcome: HookOutcome::Pass,
    });
    assert_eq!(
        h.take(),
        s(&["token fixed", "message_done fixed", "budget", "done stop"])
    );
}

#[test]
fn turn_end_refusals_past_eight_end_unverified() {
    let mut c = config();
    c.freeze.hooks = vec![hook("verify", "turn_end", true)];
    let mut h = H::with(c);
    h.user("fix it");
    for i in 0..9 {
        h.reply("done");
        let run = last_hook_run(&h);
        let Some(Effect::RunHook { payload, .. }) = h.effects.last().cloned() else {
            panic!("expected the hook")
        };
        assert_eq!(payload["continuation"], i);
        assert_eq!(payload["continuations_left"], 8 - i);
        h.input(Input::HookDone {
            hook_run: run,
            outcome: HookOutcome::Refuse {
                reason: "no".into(),
            },
        });
    }
    let ev = h.take();
    assert_eq!(
        ev.iter().filter(|e| e.starts_with("turn_refused")).count(),
        8
    );
    let last_refusal = ev
        .iter()
        .rev()
        .find(|e| e.starts_with("turn_refused"))
        .unwrap();
    assert_eq!(last_refusal, "turn_refused verify 7/1");
    assert_eq!(ev.last().unwrap(), "done unverified");
    assert_eq!(h.sends(), 9);
}

#[test]
fn refusal_that_cannot_be_persisted_is_unverified() {
    let mut c = config();
    c.freeze.hooks = vec![hook("verify", "turn_end", true)];
    let mut h = H::with(c);
    h.user("fix it");
    h.reply("done");
    h.auto_ack = false;
    let run = last_hook_run(&h);
    h.input(Input::HookDone {
        hook_run: run,
        outcome: HookOutcome::Refuse {
            reason: "no".into(),
        },
    });
    let ticket = h.unacked.pop_front().unwrap();
    h.input(Input::PersistFailed {
        ticket,
        message: "disk full".into(),
    });
    assert_eq!(
        h.take(),
        s(&[
            "token done",
            "message_done done",
            "budget",
            "done unverified"
        ])
    );
}

#[test]
fn observe_hooks_are_fire_and_forget() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.freeze.hooks = vec![
        hook("log", "tool_start", false),
        hook("start", "session_start", false),
    ];
    let mut h = H::with(c);
    to_planning(&mut h);
    let runs: Vec<(u64, HookEvent)> = h
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::RunHook {
                hook_run, event, ..
            } => Some((*hook_run, *event)),
            _ => None,
        })
        .collect();
    assert_eq!(
        runs,
        vec![(1, HookEvent::SessionStart), (2, HookEvent::ToolStart)]
    );
    h.input(Input::HookDone {
        hook_run: 2,
        outcome: HookOutcome::Failed {
            detail: "exit 3".into(),
        },
    });
    h.input(Input::HookDone {
        hook_run: 1,
        outcome: HookOutcome::Pass,
    });
    assert_eq!(h.take(), s(&["hook_failed log tool_start"]));
    h.planned("c1", plan(true));
    h.tool_done("c1", true, "ok");
    h.reply("ok");
}

#[test]
fn the_hook_gate_runs_only_approved_readable_project_hooks() {
    let mut c = config();
    c.freeze.hooks = vec![
        project_hook("unapproved", "turn_end", false, None),
        project_hook(
            "unreadable",
            "turn_end",
            true,
            Some("project hook file check.sh cannot be read: gone"),
        ),
        project_hook("approved", "turn_end", true, None),
    ];
    let mut h = H::with(c);
    h.user("hi");
    h.reply("ok");
    // Only the approved, readable project hook runs.
    let runs: Vec<String> = h
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::RunHook { hook, .. } => Some(hook.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(runs, ["approved"]);
    let failed = h.messages("hook_failed");
    assert_eq!(failed.len(), 2, "{failed:?}");
    let details: Vec<String> = h
        .events
        .iter()
        .filter_map(|e| match e {
            Event::HookFailed { detail, .. } => Some(detail.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        details[0],
        "project hook unapproved (command [\"sh\", \"check.sh\"]) is not approved as defined; \
         a human can run: openmax --approve check.sh"
    );
    assert_eq!(
        details[1],
        "project hook file check.sh cannot be read: gone"
    );
    let run = last_hook_run(&h);
    h.input(Input::HookDone {
        hook_run: run,
        outcome: HookOutcome::Pass,
    });
    assert!(h.take().ends_with(&["done stop".to_string()]));
}

/// An observe hook's answer arriving while a blocking hook runs is not taken for the blocking
/// hook's: the turn still waits for its own hook.
#[test]
fn an_observe_hooks_answer_does_not_settle_a_blocking_hook() {
    let mut c = config();
    c.freeze.hooks = vec![
        hook("start", "session_start", false),
        hook("guard", "user_prompt_submit", true),
    ];
    let mut h = H::with(c);
    h.user("hi");
    let guard = last_hook_run(&h);
    let start = guard - 1;
    h.input(Input::HookDone {
        hook_run: start,
        outcome: HookOutcome::Pass,
    });
    assert_eq!(h.sends(), 0, "the prompt hook has not answered");
    h.input(Input::HookDone {
        hook_run: guard,
        outcome: HookOutcome::Pass,
    });
    assert_eq!(h.sends(), 1);
    h.reply("ok");
}

/// A hook that may not block, on an event that can block, only observes: it runs, and the
/// turn does not wait for it.
#[test]
fn an_observing_prompt_hook_runs_without_holding_the_turn() {
    let mut c = config();
    c.freeze.hooks = vec![hook("log", "user_prompt_submit", false)];
    let mut h = H::with(c);
    h.user("hi");
    assert!(h.has_effect(|e| matches!(
        e,
        Effect::RunHook { hook, event, .. }
            if hook == "log" && *event == HookEvent::UserPromptSubmit
    )));
    assert_eq!(h.sends(), 1, "the request does not wait for the observer");
    h.reply("ok");
}

/// Every hook run has its own id, blocking ones in a chain included.
#[test]
fn chained_blocking_hooks_get_distinct_run_ids() {
    let mut c = config();
    c.freeze.hooks = vec![
        hook("first", "user_prompt_submit", true),
        hook("second", "user_prompt_submit", true),
    ];
    let mut h = H::with(c);
    h.user("hi");
    let first = last_hook_run(&h);
    h.input(Input::HookDone {
        hook_run: first,
        outcome: HookOutcome::Pass,
    });
    let second = last_hook_run(&h);
    assert_ne!(first, second);
    h.input(Input::HookDone {
        hook_run: second,
        outcome: HookOutcome::Pass,
    });
    assert_eq!(h.sends(), 1);
    h.reply("ok");
}

/// A hook marked blocking on an event that cannot block (`tool_end`) still runs, as an
/// observer.
#[test]
fn a_blocking_hook_on_an_event_that_cannot_block_still_observes() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.freeze.hooks = vec![hook("log", "tool_end", true)];
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(true));
    h.tool_done("c1", true, "ok");
    assert!(h.has_effect(|e| matches!(
        e,
        Effect::RunHook { hook, event, payload, .. }
            if hook == "log" && *event == HookEvent::ToolEnd && payload["name"] == "write_file"
    )));
    h.reply("ok");
}
