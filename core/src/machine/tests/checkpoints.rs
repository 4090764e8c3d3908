//! When a turn is checkpointed for undo: one `Checkpoint` `Before` right ahead of the first
//! effect of the turn that may write the project (a writing call in a sandbox that can write,
//! or a hook's process), one `After` as the turn ends, none for a turn that writes nothing;
//! the answer is recorded with the turn's number and a note is told.

use super::*;
use crate::record::Record;
use crate::tool::{PlanSandbox, RunSandbox};

fn with(mode: Mode) -> H {
    let mut c = config();
    c.mode = mode;
    c.checkpoints = true;
    H::with(c)
}

/// Every `Checkpoint` effect: (turn, moment, prompt).
fn checkpoints(h: &H) -> Vec<(u64, CheckpointMoment, String)> {
    h.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Checkpoint {
                turn,
                moment,
                prompt,
            } => Some((*turn, *moment, prompt.clone())),
            _ => None,
        })
        .collect()
}

/// The effect right after the first `Checkpoint` `Before`.
fn after_before(h: &H) -> Option<&Effect> {
    let i = h.effects.iter().position(|e| {
        matches!(
            e,
            Effect::Checkpoint {
                moment: CheckpointMoment::Before,
                ..
            }
        )
    })?;
    h.effects.get(i + 1)
}

fn second_write(h: &mut H) {
    h.tool_done("c1", true, "written");
    h.tool_reply("c2", "write_file", r#"{"path":"b.rs"}"#);
    h.planned("c2", plan(true));
    h.tool_done("c2", true, "written");
}

#[test]
fn a_turn_that_writes_is_checkpointed_right_before_its_first_write_and_as_it_ends() {
    let mut h = with(Mode::Auto);
    to_planning(&mut h);
    assert!(checkpoints(&h).is_empty(), "nothing before the plan");
    h.planned("c1", plan(true));
    assert_eq!(
        checkpoints(&h),
        [(1, CheckpointMoment::Before, "write it".to_string())]
    );
    assert!(matches!(after_before(&h), Some(Effect::RunTool { call_id, .. }) if call_id == "c1"));
    second_write(&mut h);
    assert_eq!(checkpoints(&h).len(), 1, "one Before per turn");
    h.reply("done");
    assert_eq!(
        checkpoints(&h),
        [
            (1, CheckpointMoment::Before, "write it".to_string()),
            (1, CheckpointMoment::After, "write it".to_string())
        ]
    );
    // The After goes out before the turn's `done`.
    let after = h
        .log
        .iter()
        .position(|o| {
            matches!(
                o,
                Output::Effect(Effect::Checkpoint {
                    moment: CheckpointMoment::After,
                    ..
                })
            )
        })
        .unwrap();
    let done = h
        .log
        .iter()
        .position(|o| matches!(o, Output::Event(Event::Done { .. })))
        .unwrap();
    assert!(after < done);
    // The next turn is turn 2, with its own checkpoints.
    h.user("again");
    h.tool_reply("c3", "write_file", r#"{"path":"a.rs"}"#);
    h.planned("c3", plan(true));
    assert_eq!(
        checkpoints(&h).last().unwrap(),
        &(2, CheckpointMoment::Before, "again".to_string())
    );
    h.tool_done("c3", true, "written");
    h.reply("done");
}

#[test]
fn a_turn_that_only_reads_has_no_checkpoint() {
    let mut h = with(Mode::Auto);
    to_planning(&mut h);
    h.planned("c1", plan(false));
    h.tool_done("c1", true, "read");
    h.reply("done");
    assert!(checkpoints(&h).is_empty(), "{:?}", checkpoints(&h));
}

#[test]
fn a_call_in_the_read_only_sandbox_has_no_checkpoint() {
    let mut h = with(Mode::Readonly);
    h.user("look");
    h.tool_reply("c1", "shell", r#"{"command":"ls"}"#);
    let mut p = plan(true);
    p.sandbox = PlanSandbox::ReadOnlyCapable;
    h.planned("c1", p);
    assert!(h.has_effect(|e| matches!(
        e,
        Effect::RunTool {
            sandbox: RunSandbox::ReadOnly,
            ..
        }
    )));
    h.tool_done("c1", true, "a.rs");
    h.reply("done");
    assert!(checkpoints(&h).is_empty(), "{:?}", checkpoints(&h));
}

#[test]
fn external_code_counts_as_a_write_whatever_it_declares() {
    let mut h = with(Mode::Auto);
    to_planning(&mut h);
    let mut p = plan(false);
    p.source = Some(SourceGate {
        source_path: ".openmax/tools/x.json".into(),
        source_sha: "abc".into(),
        env: vec![],
        approved: true,
    });
    h.planned("c1", p);
    assert_eq!(checkpoints(&h).len(), 1);
    h.tool_done("c1", true, "ran");
    h.reply("done");
}

#[test]
fn a_declined_write_is_not_checkpointed_and_an_approved_one_is_after_its_approval() {
    let mut h = with(Mode::Ask);
    to_planning(&mut h);
    h.planned("c1", plan(true));
    assert!(
        checkpoints(&h).is_empty(),
        "nothing while the human decides"
    );
    h.approve("a1", false);
    h.tool_reply("c2", "write_file", r#"{"path":"a.rs"}"#);
    h.planned("c2", plan(true));
    assert!(checkpoints(&h).is_empty());
    h.approve("a2", true);
    assert_eq!(checkpoints(&h).len(), 1);
    assert!(matches!(after_before(&h), Some(Effect::RunTool { call_id, .. }) if call_id == "c2"));
    h.tool_done("c2", true, "written");
    h.reply("done");
}

#[test]
fn hook_processes_of_a_turn_are_checkpointed_first_and_the_session_start_is_not() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.checkpoints = true;
    c.freeze.hooks = vec![
        hook("start", "session_start", false),
        hook("fmt", "user_prompt_submit", true),
    ];
    let mut h = H::with(c);
    h.user("go");
    let kinds: Vec<&str> = h
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::RunHook { event, .. } => Some(event.as_str()),
            Effect::Checkpoint { .. } => Some("checkpoint"),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["session_start", "checkpoint", "user_prompt_submit"]);
    let run = last_hook_run(&h);
    h.input(Input::HookDone {
        hook_run: run,
        outcome: HookOutcome::Pass,
    });
    h.reply("done");
}

#[test]
fn a_checkpoint_is_recorded_with_its_turn_and_a_note_is_told() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.checkpoints = true;
    c.turns_before = 4;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(true));
    assert_eq!(checkpoints(&h)[0].0, 5, "numbered on from the turns before");
    h.input(Input::Checkpointed {
        turn: 5,
        moment: CheckpointMoment::Before,
        id: Some("cp1".into()),
        note: Some("the checkpoint before turn 5 is partial: big.bin left out".into()),
    });
    let recorded = h.effects.iter().any(|e| {
        matches!(e, Effect::Persist { records, .. } if records.contains(&Record::Checkpoint {
            turn: 5,
            moment: CheckpointMoment::Before,
            id: "cp1".into(),
        }))
    });
    assert!(recorded);
    assert_eq!(h.take(), s(&["harness_note"]));
    h.tool_done("c1", true, "written");
    h.reply("done");
    let ended = h.effects.iter().any(|e| {
        matches!(e, Effect::Persist { records, .. } if records.iter().any(|r| matches!(r,
            Record::TurnEnd { turn: Some(5), .. })))
    });
    assert!(ended);
    // A failed checkpoint is not recorded; its note is told, after the turn too.
    let persists = h
        .effects
        .iter()
        .filter(|e| matches!(e, Effect::Persist { .. }))
        .count();
    h.take();
    h.input(Input::Checkpointed {
        turn: 5,
        moment: CheckpointMoment::After,
        id: None,
        note: Some("the end of turn 5 was not recorded: disk full".into()),
    });
    assert_eq!(h.take(), s(&["harness_note"]));
    assert_eq!(
        persists,
        h.effects
            .iter()
            .filter(|e| matches!(e, Effect::Persist { .. }))
            .count()
    );
    // The note reaches the model with the next prompt.
    h.user("next");
    let body = h.last_body();
    assert!(format!("{body:?}").contains("disk full"));
    h.reply("done");
}

#[test]
fn checkpoints_off_asks_for_none() {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(true));
    h.tool_done("c1", true, "written");
    h.reply("done");
    assert!(checkpoints(&h).is_empty());
}
