//! Pure tests of the context budget in the turn machine: forced compaction and its receipt,
//! the compaction point on disk, `schemas_over_budget`, the scale-up, the context-length
//! recovery, `max_agent_tokens`, resuming from a compaction point, and a 300-turn session
//! against a small window. Like every machine test, each one ends with the pairing checker.

use super::*;
use crate::compaction::{self, Scale, STUB_PREFIX};
use crate::conversation::Role;

/// The small window most tests use: budget 6000, trigger 5400.
const WINDOW: u64 = 8000;

/// One finished turn of an older session: prompt, a tool call, its output, an answer.
fn old_turn(i: usize, out_len: usize) -> Vec<Message> {
    vec![
        Message::user_text(format!("old prompt {i}")),
        Message {
            role: Role::Assistant,
            content: vec![Block::ToolUse {
                id: format!("old{i}"),
                name: "read_file".into(),
                input: json!({"path": format!("f{i}.rs")}),
            }],
        },
        Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                id: format!("old{i}"),
                ok: true,
                output: format!("{i}:").repeat(out_len / 2),
            }],
        },
        Message::assistant_text(format!("answer {i}")),
    ]
}

fn history(turns: usize, out_len: usize) -> Vec<Message> {
    (0..turns).flat_map(|i| old_turn(i, out_len)).collect()
}

fn small(history: Vec<Message>) -> CoreConfig {
    let mut c = config();
    c.mode = Mode::Auto;
    c.context_tokens = WINDOW;
    c.history = history;
    c
}

fn fixed() -> u64 {
    compaction::estimate_fixed(&freeze().system, &freeze().tools)
}

fn receipts(h: &H) -> Vec<(u64, u64, u64)> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::Compacted {
                tokens_before,
                tokens_after,
                compacted_messages,
            } => Some((*tokens_before, *tokens_after, *compacted_messages)),
            _ => None,
        })
        .collect()
}

fn compaction_records(h: &H) -> Vec<Record> {
    h.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Persist { records, .. } => Some(records.clone()),
            _ => None,
        })
        .flatten()
        .filter(|r| matches!(r, Record::Compaction { .. }))
        .collect()
}

fn budgets(h: &H) -> Vec<u64> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::Budget { used_tokens, .. } => Some(*used_tokens),
            _ => None,
        })
        .collect()
}

fn usage(prompt_tokens: u64) -> ProviderItem {
    ProviderItem::Usage {
        prompt_tokens,
        completion_tokens: 10,
        cached_tokens: None,
    }
}

fn stop() -> ProviderItem {
    ProviderItem::Completed {
        finish_reason: "stop".into(),
    }
}

fn has_stub(m: &Message) -> bool {
    m.content
        .iter()
        .any(|b| matches!(b, Block::ToolResult { output, .. } if output.starts_with(STUB_PREFIX)))
}

// ----- forced compaction before a request -----------------------------------------------------

#[test]
fn over_the_trigger_compacts_persists_then_sends_what_the_receipt_says() {
    let hist = history(12, 2400);
    let mut h = H::with(small(hist.clone()));
    h.auto_ack = false;
    h.user("next");
    // The prompt (background) and the compaction point are being written; nothing is sent and
    // no receipt is out before the compaction point is on disk.
    assert_eq!(h.unacked.len(), 2);
    assert_eq!(h.sends(), 0);
    h.ack_next();
    assert_eq!(h.sends(), 0);
    assert!(h.take().is_empty());
    h.ack_next();
    assert_eq!(h.take(), s(&["compacted"]));
    assert_eq!(h.sends(), 1);

    let mut all = hist.clone();
    all.push(Message::user_text("next"));
    let before = compaction::estimate_request(&freeze().system, &freeze().tools, &all);
    let body = h.last_body();
    let [(tokens_before, tokens_after, n)] = receipts(&h)[..] else {
        panic!("one receipt")
    };
    assert_eq!(tokens_before, before);
    assert!(before * 100 > compaction::budget(WINDOW) * compaction::TRIGGER_PERCENT);
    // The receipt's figure is exactly the estimate of the body that went out.
    assert_eq!(tokens_after, compaction::estimate_body(&body));
    assert!(tokens_after <= compaction::prune_target(WINDOW, fixed()));
    assert!(n > 0);
    // The record holds the whole compacted conversation and the same figures.
    let [Record::Compaction {
        messages,
        tokens_before: rb,
        tokens_after: ra,
        compacted_messages: rn,
    }] = &compaction_records(&h)[..]
    else {
        panic!("one compaction record")
    };
    assert_eq!((*rb, *ra, *rn), (tokens_before, tokens_after, n));
    assert_eq!(messages.as_slice(), h.core.conversation());
    assert_eq!(body.messages, shaped(messages));
    // Oldest outputs stubbed first; the current turn intact; still starts with a user prompt.
    assert!(has_stub(&body.messages[2]));
    assert_eq!(body.messages.last(), Some(&Message::user_text("next")));
    assert!(compaction::is_prompt(&body.messages[0]));
    h.auto_ack = true;
    h.reply("ok");
    assert_eq!(
        h.take(),
        s(&["token ok", "message_done ok", "budget", "done stop"])
    );
}

#[test]
fn under_the_trigger_nothing_is_compacted() {
    let mut h = H::with(small(history(3, 2400)));
    h.user("next");
    h.reply("ok");
    assert!(receipts(&h).is_empty());
    assert!(compaction_records(&h).is_empty());
    assert_eq!(h.last_body().messages.len(), 13);
}

#[test]
fn a_current_turn_too_big_to_cut_goes_out_without_a_receipt() {
    let mut h = H::with(small(vec![]));
    h.user(&"x".repeat(24_000));
    assert_eq!(h.sends(), 1);
    h.reply("ok");
    assert!(receipts(&h).is_empty());
}

#[test]
fn whole_turns_go_once_outputs_are_stubs() {
    // Many small turns: stubbing cannot help (outputs are shorter than a stub).
    let mut h = H::with(small(history(300, 20)));
    h.user("next");
    let body = h.last_body();
    let [(_, after, n)] = receipts(&h)[..] else {
        panic!("one receipt")
    };
    assert_eq!(after, compaction::estimate_body(&body));
    assert!(n > 4 && n % 4 == 0, "whole turns dropped: {n}");
    assert!(compaction::is_prompt(&body.messages[0]));
    assert!(!body.messages.iter().any(has_stub));
    // The newest old turns survive.
    assert!(body
        .messages
        .contains(&Message::user_text("old prompt 299")));
    h.reply("ok");
}

#[test]
fn compacted_hooks_observe_the_receipt() {
    let mut c = small(history(12, 2400));
    c.freeze.hooks = vec![
        hook("log", "compacted", false),
        HookSpec {
            blocking: false,
            ..project_hook("gone", "compacted", false, None)
        },
    ];
    let mut h = H::with(c);
    h.user("next");
    let (_, after, n) = receipts(&h)[0];
    let run = h
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::RunHook {
                hook_run,
                event,
                payload,
                ..
            } if *event == HookEvent::Compacted => Some((*hook_run, payload.clone())),
            _ => None,
        })
        .expect("the compacted hook ran");
    assert_eq!(run.1["tokens_after"], after);
    assert_eq!(run.1["compacted_messages"], n);
    assert_eq!(run.1["event"], "compacted");
    assert_eq!(
        h.take(),
        s(&["compacted", "hook_failed gone compacted"]),
        "the receipt, then the hooks, then the request"
    );
    h.input(Input::HookDone {
        hook_run: run.0,
        outcome: HookOutcome::Failed {
            detail: "exit 1".into(),
        },
    });
    assert_eq!(h.take(), s(&["hook_failed log compacted"]));
    h.reply("ok");
}

#[test]
fn cancel_while_the_compaction_point_is_written_still_reports_it() {
    let mut h = H::with(small(history(12, 2400)));
    h.auto_ack = false;
    h.user("next");
    h.ack_next();
    h.cmd(json!({"cmd":"cancel"}));
    assert!(h.take().is_empty());
    h.ack_next();
    assert_eq!(h.take(), s(&["compacted", "done cancelled"]));
    assert_eq!(h.sends(), 0);
}

#[test]
fn a_failed_compaction_write_fails_the_turn() {
    let mut h = H::with(small(history(12, 2400)));
    h.auto_ack = false;
    h.user("next");
    h.ack_next();
    let ticket = h.unacked.pop_front().unwrap();
    h.input(Input::PersistFailed {
        ticket,
        message: "disk full".into(),
    });
    assert_eq!(h.take(), s(&["error", "done error"]));
    assert!(h.messages("error")[0].contains("disk full"));
    assert_eq!(h.sends(), 0);
}

// ----- schemas ----------------------------------------------------------------------------------

fn big_schema(description_chars: usize) -> ToolSchema {
    ToolSchema {
        name: "huge".into(),
        description: "d".repeat(description_chars),
        parameters: json!({"type":"object"}),
    }
}

#[test]
fn schemas_over_budget_is_advised_once_and_compaction_aims_at_what_is_left() {
    let mut c = small(history(12, 2400));
    c.freeze.tools.push(big_schema(10_000));
    let system = compaction::estimate_text(&c.freeze.system);
    let schemas = compaction::estimate_schemas(&c.freeze.tools);
    let budget_tokens = compaction::budget_tokens(WINDOW, system);
    assert!(compaction::schemas_over_budget(schemas, budget_tokens));
    assert!(schemas < budget_tokens);
    let mut h = H::with(c);
    h.user("next");
    assert_eq!(
        h.fresh[0],
        Event::SchemasOverBudget {
            schema_tokens: schemas,
            budget_tokens,
        }
    );
    let (_, after, _) = receipts(&h)[0];
    let target = compaction::prune_target(WINDOW, system + schemas);
    assert!(after <= target && after > system + schemas);
    assert_eq!(after, compaction::estimate_body(&h.last_body()));
    h.reply("ok");
    h.user("again");
    h.reply("ok");
    h.user("and again");
    h.reply("ok");
    assert_eq!(
        h.messages("schemas_over_budget").len(),
        1,
        "once per session"
    );
}

#[test]
fn schemas_filling_the_budget_stop_compaction_and_the_turn_runs() {
    let hist = history(12, 2400);
    let mut c = small(hist.clone());
    c.freeze.tools.push(big_schema(20_000));
    let mut h = H::with(c);
    h.user("next");
    assert_eq!(h.take(), s(&["schemas_over_budget"]));
    assert_eq!(h.sends(), 1);
    assert_eq!(
        h.last_body().messages.len(),
        hist.len() + 1,
        "nothing pruned"
    );
    h.reply("ok");
    assert_eq!(h.take().last().unwrap(), "done stop");
    assert!(receipts(&h).is_empty());
    // A provider refusal cannot be helped either: an error, no compaction.
    h.user("more");
    h.fail(http(400, None, FailureKind::ContextLength));
    assert_eq!(h.take(), s(&["error", "done error"]));
    assert!(h.messages("error")[0].contains("schemas"));
    assert!(compaction_records(&h).is_empty());
}

// ----- the scale-up -----------------------------------------------------------------------------

#[test]
fn reported_prompt_tokens_scale_later_estimates_and_bring_compaction_earlier() {
    // About 4000 estimated tokens: under the trigger (5400) unscaled.
    let mut h = H::with(small(history(6, 2400)));
    h.user("first");
    let est = compaction::estimate_body(&h.last_body());
    assert!(est < 5_400);
    h.items(vec![text_d("ok"), usage(est * 3 / 2), stop()]);
    assert!(receipts(&h).is_empty());
    let scale = Scale::learn(est * 3 / 2, est);
    assert!(scale.is_some());
    // The budget line is scaled by reported/estimated.
    let now =
        compaction::estimate_request(&freeze().system, &freeze().tools, h.core.conversation());
    assert_eq!(budgets(&h), vec![Scale::apply(scale, now)]);
    // The next request's scaled estimate crosses the trigger: compaction, in scaled units.
    h.user("second");
    let [(before, after, n)] = receipts(&h)[..] else {
        panic!("one receipt")
    };
    assert!(n > 0);
    let sent = compaction::estimate_body(&h.last_body());
    assert_eq!(after, Scale::apply(scale, sent));
    assert!(before > 5_400 && after <= 5_400);
    // A report no higher than the estimate drops the scale.
    h.items(vec![text_d("ok"), usage(sent), stop()]);
    let now =
        compaction::estimate_request(&freeze().system, &freeze().tools, h.core.conversation());
    assert_eq!(budgets(&h).last(), Some(&now));
}

// ----- the provider's context-length refusal ----------------------------------------------------

#[test]
fn context_length_refusal_compacts_once_and_resends_the_same_request() {
    let mut c = small(history(6, 2400));
    c.freeze.hooks = vec![hook("log", "compacted", false)];
    let mut h = H::with(c);
    h.user("next");
    assert_eq!(h.sent(), (1, 1));
    let refused = compaction::estimate_body(&h.last_body());
    h.fail(http(400, None, FailureKind::ContextLength));
    assert_eq!(h.take(), s(&["compacted"]), "no retry line");
    assert!(h.has_effect(
        |e| matches!(e, Effect::RunHook { event, .. } if *event == HookEvent::Compacted)
    ));
    assert_eq!(h.sent(), (1, 2), "the same request, its next attempt");
    let [(before, after, n)] = receipts(&h)[..] else {
        panic!("one receipt")
    };
    assert_eq!(before, refused);
    assert!(n > 0);
    assert_eq!(after, compaction::estimate_body(&h.last_body()));
    assert!(after <= refused * compaction::TARGET_PERCENT / 100);
    // Exactly the cut the target calls for: the lower of the prune target and the share of
    // the refused request.
    let target =
        compaction::prune_target(WINDOW, fixed()).min(refused * compaction::TARGET_PERCENT / 100);
    let mut conversation = history(6, 2400);
    conversation.push(Message::user_text("next"));
    let expected = compaction::compact(&mut conversation, 24, fixed(), None, target);
    assert_eq!(
        (before, after, n),
        (
            expected.tokens_before,
            expected.tokens_after,
            expected.compacted_messages
        )
    );
    assert_eq!(compaction_records(&h).len(), 1);
    h.reply("ok");
    assert_eq!(h.take().last().unwrap(), "done stop");
    // The next request of the session may recover once again.
    h.user("more");
    h.items(vec![
        ProviderItem::Opened,
        ProviderItem::Failed {
            kind: FailureKind::ContextLength,
            message: "prompt is too long".into(),
        },
    ]);
    assert_eq!(h.take(), s(&["compacted"]));
    h.reply("ok");
    assert_eq!(h.take().last().unwrap(), "done stop");
}

#[test]
fn a_second_context_length_refusal_of_the_request_ends_the_turn() {
    let mut h = H::with(small(history(6, 2400)));
    h.user("next");
    h.fail(http(400, None, FailureKind::ContextLength));
    assert_eq!(h.take(), s(&["compacted"]));
    h.items(vec![ProviderItem::Failed {
        kind: FailureKind::ContextLength,
        message: "prompt is too long".into(),
    }]);
    assert_eq!(h.take(), s(&["error", "done error"]));
    assert!(h.messages("error")[0].contains("again after compaction"));
    assert_eq!(h.sends(), 2);
}

#[test]
fn a_context_length_refusal_after_reply_text_is_not_resent() {
    let mut h = H::with(small(history(6, 2400)));
    h.user("next");
    h.items(vec![
        text_d("partial"),
        ProviderItem::Failed {
            kind: FailureKind::ContextLength,
            message: "too long".into(),
        },
    ]);
    assert_eq!(h.take(), s(&["token partial", "error", "done error"]));
    assert_eq!(h.sends(), 1);
}

#[test]
fn the_recovery_resend_is_not_a_retry_and_goes_out_after_the_last_attempt() {
    let mut c = small(history(6, 2400));
    c.retry.max_attempts = 2;
    let mut h = H::with(c);
    h.user("next");
    h.fail(http(503, None, FailureKind::Server));
    assert_eq!(h.take(), s(&["retry 2/2 HTTP 503: busy"]));
    h.fire_timer();
    h.fail(http(400, None, FailureKind::ContextLength));
    assert_eq!(h.take(), s(&["compacted"]));
    assert_eq!(h.sent(), (1, 3));
    // Its failure is not retried: the budget was spent.
    h.fail(http(503, None, FailureKind::Server));
    assert_eq!(h.take(), s(&["error", "done error"]));
}

// ----- max_agent_tokens -------------------------------------------------------------------------

#[test]
fn budget_exhausted_counts_the_estimate_when_no_usage_is_reported() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.limits.max_agent_tokens = 20;
    let mut h = H::with(c);
    h.user("go");
    h.tool_reply("c1", "write_file", r#"{"path":"a.rs"}"#);
    h.planned("c1", plan(true));
    h.tool_done("c1", true, "ok");
    assert_eq!(h.take().last().unwrap(), "done budget_exhausted");
    assert_eq!(h.sends(), 1, "nothing sent at the refused admission");
    // Resubmitting continues the work: the tool result is in the next request.
    h.user("continue");
    assert_eq!(h.sends(), 2);
    let body = h.last_body();
    assert!(body.messages.iter().any(|m| m
        .content
        .iter()
        .any(|b| matches!(b, Block::ToolResult { id, ok: true, .. } if id == "c1"))));
    h.reply("finished");
    assert_eq!(h.take().last().unwrap(), "done stop");
}

#[test]
fn budget_exhausted_mid_turn_then_a_resubmission_completes() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.limits.max_agent_tokens = 250;
    let mut h = H::with(c);
    h.user("go");
    for i in 0..2 {
        h.items(vec![
            ProviderItem::ToolCallStart {
                index: 0,
                id: format!("c{i}"),
                name: "write_file".into(),
            },
            usage(100),
            ProviderItem::Completed {
                finish_reason: "tool_use".into(),
            },
        ]);
        h.planned(&format!("c{i}"), plan(true));
        h.tool_done(&format!("c{i}"), true, "ok");
    }
    // 110 spent, a second request admitted; 220 spent, a third admitted; ...
    assert_eq!(h.sends(), 3);
    h.items(vec![
        ProviderItem::ToolCallStart {
            index: 0,
            id: "c2".into(),
            name: "write_file".into(),
        },
        usage(100),
        ProviderItem::Completed {
            finish_reason: "tool_use".into(),
        },
    ]);
    h.planned("c2", plan(true));
    h.tool_done("c2", true, "ok");
    assert_eq!(h.take().last().unwrap(), "done budget_exhausted");
    assert_eq!(h.sends(), 3);
    h.user("continue");
    h.reply("finished");
    assert_eq!(h.take().last().unwrap(), "done stop");
    assert_eq!(h.sends(), 4);
}

// ----- resume from a compaction point -----------------------------------------------------------

/// What the shell's `--continue` loads: the last compaction point's messages, then every
/// message recorded after it.
fn resume_history(h: &H) -> Vec<Message> {
    let mut out = Vec::new();
    for e in &h.effects {
        if let Effect::Persist { records, .. } = e {
            for r in records {
                match r {
                    Record::Compaction { messages, .. } => out = messages.clone(),
                    Record::Message { message } => out.push(message.clone()),
                    Record::Session { .. }
                    | Record::ModeChanged { .. }
                    | Record::Refrozen { .. }
                    | Record::TurnEnd { .. }
                    | Record::Checkpoint { .. } => {}
                }
            }
        }
    }
    out
}

#[test]
fn a_core_built_from_a_compaction_point_continues() {
    let mut h = H::with(small(history(12, 2400)));
    h.user("next");
    assert_eq!(receipts(&h).len(), 1);
    h.tool_reply("c1", "read_file", r#"{"path":"x"}"#);
    h.planned("c1", plan(false));
    h.tool_done("c1", true, &"y".repeat(3000));
    h.reply("done");
    let hist = resume_history(&h);
    assert_eq!(
        hist.as_slice(),
        h.core.conversation(),
        "the record restores memory"
    );
    h.check();

    let mut r = H::with(small(hist.clone()));
    r.user("continue");
    let body = r.last_body();
    let mut expect = hist.clone();
    expect.push(Message::user_text("continue"));
    assert_eq!(body.messages, shaped(&expect));
    assert!(has_stub(&body.messages[2]), "the stubs carried over");
    r.reply("ok");
    assert_eq!(r.take().last().unwrap(), "done stop");
    // Later compactions of the resumed core keep working from there.
    for i in 0..6 {
        r.user(&format!("turn {i}"));
        r.tool_reply(&format!("r{i}"), "read_file", r#"{"path":"x"}"#);
        r.planned(&format!("r{i}"), plan(false));
        r.tool_done(&format!("r{i}"), true, &"z".repeat(6000));
        r.reply("ok");
    }
    assert!(!receipts(&r).is_empty());
    let last = resume_history(&r);
    assert_eq!(last.as_slice(), r.core.conversation());
}

// ----- a long session -------------------------------------------------------------------------

/// Check the outputs from `from` on: every sent body's scaled estimate is inside the window
/// and equals the receipt that preceded it; every compaction record matches its receipt;
/// every `budget` line is inside the window.
fn audit(h: &H, from: usize, pending: &mut Option<u64>, scale: Option<Scale>) -> usize {
    let mut sends = 0;
    let mut record: Option<(u64, u64, u64)> = None;
    for out in &h.log[from..] {
        match out {
            Output::Event(Event::Compacted {
                tokens_before,
                tokens_after,
                compacted_messages,
            }) => {
                assert_eq!(
                    record.take(),
                    Some((*tokens_before, *tokens_after, *compacted_messages)),
                    "the receipt follows its record"
                );
                assert!(*compacted_messages > 0);
                *pending = Some(*tokens_after);
            }
            Output::Effect(Effect::Persist { records, .. }) => {
                for r in records {
                    if let Record::Compaction {
                        tokens_before,
                        tokens_after,
                        compacted_messages,
                        ..
                    } = r
                    {
                        record = Some((*tokens_before, *tokens_after, *compacted_messages));
                    }
                }
            }
            Output::Effect(Effect::SendRequest { body, .. }) => {
                sends += 1;
                let est = Scale::apply(scale, compaction::estimate_body(body));
                assert!(est <= WINDOW, "a request of {est} tokens went out");
                assert!(est <= compaction::budget(WINDOW));
                if let Some(after) = pending.take() {
                    assert_eq!(est, after, "the receipt matches the body sent");
                }
            }
            Output::Event(Event::Budget {
                used_tokens,
                context_tokens,
            }) => {
                assert_eq!(*context_tokens, WINDOW);
                assert!(*used_tokens <= WINDOW);
            }
            Output::Event(_) | Output::Effect(_) => {}
        }
    }
    sends
}

#[test]
fn three_hundred_turns_with_large_outputs_stay_inside_a_small_window() {
    let mut c = small(vec![]);
    c.freeze.hooks = vec![hook("log", "compacted", false)];
    let mut h = H::with(c);
    let mut pending = None;
    let mut sends = 0;
    for t in 0..300u64 {
        let mut mark = h.log.len();
        h.user(&format!("task {t}: read the next file"));
        sends += audit(&h, mark, &mut pending, h.core.scale);
        // The provider counts 0%, 10% or 20% more than the estimate.
        let reported = |h: &H| compaction::estimate_body(&h.last_body()) * (10 + t % 3) / 10;
        let id = format!("c{t}");
        let p = reported(&h);
        h.items(vec![
            ProviderItem::Opened,
            ProviderItem::ToolCallStart {
                index: 0,
                id: id.clone(),
                name: "read_file".into(),
            },
            ProviderItem::ToolCallArgs {
                index: 0,
                json: format!(r#"{{"path":"src/file{t}.rs"}}"#),
            },
            usage(p),
            ProviderItem::Completed {
                finish_reason: "tool_use".into(),
            },
        ]);
        // The budget line tracks the scaled estimate of the conversation.
        let now =
            compaction::estimate_request(&freeze().system, &freeze().tools, h.core.conversation());
        assert_eq!(budgets(&h).last(), Some(&Scale::apply(h.core.scale, now)));
        h.planned(&id, plan(false));
        mark = h.log.len();
        let output = format!("line {t}\n").repeat(600 + (t as usize % 5) * 100);
        h.tool_done(&id, true, &output);
        sends += audit(&h, mark, &mut pending, h.core.scale);
        mark = h.log.len();
        let p = reported(&h);
        h.items(vec![text_d("done"), usage(p), stop()]);
        let now =
            compaction::estimate_request(&freeze().system, &freeze().tools, h.core.conversation());
        assert_eq!(budgets(&h).last(), Some(&Scale::apply(h.core.scale, now)));
        audit(&h, mark, &mut pending, h.core.scale);
        assert_eq!(h.take().last().unwrap(), "done stop");
    }
    assert_eq!(sends, 600);
    assert_eq!(h.sends(), 600);
    let n = receipts(&h).len();
    assert!(n >= 50, "only {n} compactions");
    assert_eq!(compaction_records(&h).len(), n);
    assert!(pending.is_none());
    // The session still holds the latest turns in full, the oldest gone.
    let conv = h.core.conversation();
    assert!(conv.len() < 200);
    assert!(conv.contains(&Message::user_text("task 299: read the next file")));
    assert!(!conv.contains(&Message::user_text("task 0: read the next file")));
    // And a resume from the last compaction point continues.
    let hist = resume_history(&h);
    assert_eq!(hist.as_slice(), conv);
    h.check();
    let mut r = H::with(small(hist));
    r.user("continue");
    r.reply("ok");
    assert_eq!(r.take().last().unwrap(), "done stop");
}

/// The messages the core would send for `messages`.
fn shaped(messages: &[Message]) -> Vec<Message> {
    let f = freeze();
    ModelRequest::shaped(&f.system, &f.tools, messages).messages
}

/// A second compaction in the same turn still protects the turn: its prompt and its own tool
/// output survive, only older history is cut.
#[test]
fn a_second_compaction_in_one_turn_keeps_the_turn_whole() {
    // Many short turns: the first compaction must drop whole turns, which moves the index of
    // the turn's prompt.
    let mut h = H::with(small(history(100, 200)));
    h.user("next");
    assert_eq!(receipts(&h).len(), 1, "compacted before the first request");
    h.tool_reply("c1", "write_file", r#"{"path":"a.rs"}"#);
    h.planned("c1", plan(true));
    let output = "y".repeat(12_000);
    h.tool_done("c1", true, &output);
    assert_eq!(
        receipts(&h).len(),
        2,
        "compacted again before the second request"
    );
    let body = h.last_body();
    let texts: Vec<String> = body.messages.iter().map(|m| m.plain_text()).collect();
    assert!(texts.iter().any(|t| t == "next"), "{texts:?}");
    assert!(
        body.messages.iter().flat_map(|m| &m.content).any(
            |b| matches!(b, Block::ToolResult { id, output: o, .. } if id == "c1" && *o == output)
        ),
        "the turn's own output is kept whole"
    );
    h.reply("ok");
}

/// A long system prompt that, with the schemas, still leaves room: a refusal is recovered by
/// compaction, not given up on.
#[test]
fn a_long_system_prompt_that_leaves_room_still_lets_a_refusal_compact() {
    let mut c = small(history(6, 2400));
    c.freeze.system = "s".repeat(1_600); // 400 estimated tokens; the schemas add a few dozen
    let mut h = H::with(c);
    h.user("next");
    h.fail(http(400, None, FailureKind::ContextLength));
    assert_eq!(h.take(), s(&["compacted"]));
    h.reply("ok");
    assert_eq!(h.take().last().unwrap(), "done stop");
}

// ----- a compaction the person asked for --------------------------------------------------------

#[test]
fn compact_between_turns_prunes_old_output_records_it_and_the_next_request_is_built_on_it() {
    let mut h = H::with(small(history(4, 2400)));
    let before = h.core.conversation().to_vec();
    h.input(Input::Compact);
    let [(tokens_before, tokens_after, n)] = receipts(&h)[..] else {
        panic!("one receipt: {:?}", h.take())
    };
    assert!(
        n > 0 && tokens_after < tokens_before,
        "{tokens_before} {tokens_after} {n}"
    );
    assert_eq!(
        tokens_before,
        compaction::estimate_request(&freeze().system, &freeze().tools, &before)
    );
    // At most the lower of the prune target and 60% of the request now.
    assert!(tokens_after <= tokens_before * compaction::TARGET_PERCENT / 100);
    let [Record::Compaction { messages, .. }] = &compaction_records(&h)[..] else {
        panic!("one compaction record")
    };
    assert_eq!(messages.as_slice(), h.core.conversation());
    assert!(has_stub(&messages[2]), "the oldest output goes first");
    assert_eq!(h.take(), s(&["compacted"]));
    h.user("next");
    let body = h.last_body();
    assert_eq!(
        body.messages,
        shaped(&[messages.clone(), vec![Message::user_text("next")]].concat())
    );
    h.reply("ok");
}

#[test]
fn compact_with_nothing_to_cut_answers_with_the_no_op_receipt() {
    let mut h = H::with(small(vec![]));
    h.input(Input::Compact);
    let [(b, a, 0)] = receipts(&h)[..] else {
        panic!("one no-op receipt")
    };
    assert_eq!(a, b);
    assert!(compaction_records(&h).is_empty());
}

#[test]
fn compact_during_a_turn_is_refused_and_the_turn_goes_on() {
    let mut h = H::with(small(history(4, 2400)));
    h.user("next");
    h.take();
    h.input(Input::Compact);
    assert_eq!(h.take(), s(&["protocol_error"]));
    assert!(h.messages("protocol_error")[0].starts_with("compact: a turn is in flight"));
    assert!(receipts(&h).is_empty());
    h.reply("ok");
    assert_eq!(
        h.take(),
        s(&["token ok", "message_done ok", "budget", "done stop"])
    );
}

#[test]
fn compact_waits_like_a_command_behind_a_reload() {
    let mut h = H::with(small(history(4, 2400)));
    h.cmd(json!({"cmd":"reload"}));
    h.input(Input::Compact);
    assert!(receipts(&h).is_empty(), "held until the snapshot");
    h.input(Input::Frozen {
        snapshot: Box::new(freeze()),
    });
    assert_eq!(h.take(), s(&["refrozen", "harness_note", "compacted"]));
}

#[test]
fn an_asked_for_compaction_goes_out_after_its_ack_and_holds_a_prompt_meanwhile() {
    let mut h = H::with(small(history(4, 2400)));
    let before = h.core.conversation().to_vec();
    h.auto_ack = false;
    h.input(Input::Compact);
    h.user("next");
    assert!(
        h.take().is_empty(),
        "nothing before the compaction point is on disk"
    );
    assert_eq!(h.core.conversation(), &before[..], "unchanged until then");
    assert_eq!(h.sends(), 0);
    h.ack_next();
    assert_eq!(h.take()[0], "compacted");
    h.auto_ack = true;
    while !h.unacked.is_empty() {
        h.ack_next();
    }
    assert_eq!(
        h.sends(),
        1,
        "the held prompt is admitted after the receipt"
    );
    assert!(has_stub(&h.last_body().messages[2]));
    h.reply("ok");
}

#[test]
fn a_failed_write_of_an_asked_for_compaction_changes_nothing_and_says_so() {
    let mut h = H::with(small(history(4, 2400)));
    let before = h.core.conversation().to_vec();
    h.auto_ack = false;
    h.input(Input::Compact);
    let ticket = h.unacked.pop_front().unwrap();
    h.input(Input::PersistFailed {
        ticket,
        message: "disk full".into(),
    });
    assert_eq!(h.take(), s(&["protocol_error"]));
    assert!(h.messages("protocol_error")[0].contains("disk full"));
    assert!(receipts(&h).is_empty());
    assert_eq!(h.core.conversation(), &before[..]);
    h.auto_ack = true;
    h.user("next");
    assert_eq!(h.last_body().messages.len(), shaped(&before).len() + 1);
    h.reply("ok");
}
