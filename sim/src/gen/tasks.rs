//! Task calls side by side: a generated scenario that installs the `task` tool and opens with
//! a reply of consecutive `task` calls, so the runs overlap and their answers come back in a
//! shuffled order.
//!
//! Invariant: a pure function of the [`Gen`], like the rest of the generator.

use quickcheck::Gen;

use openmax_core::tool::TASK_TOOL;
use openmax_core::wire::Mode;

use super::{chance, pick, range};
use crate::scenario::{Action, ChildAsk, Scenario, SimTool, Step, ToolScript};
use crate::script::{Reply, StreamEnd, StreamItem};
use openmax_core::wire::ApprovalReason;

/// How long a run takes, in ms: drawn without repeats, so the answers of the runs out come
/// back in a shuffled order, not in the order the runs started.
const DURATIONS: [u64; 7] = [0, 5, 20, 100, 400, 1500, 3000];

/// Add the `task` tool (mutating, as the shell plans it), `[tasks] max_parallel` from 1 to 4,
/// and in front of the client's timeline a `user` whose first reply calls two to four `task`s
/// in a row (now and then with a `read_file` among or after them, which runs alone). Each
/// call's script has its own duration and answer, and now and then its child asks for
/// approvals while it runs; in `ask` the client approves the calls one by one, it answers
/// pending approvals (the children's too) now and then, and now and then it cancels while the
/// runs are out.
pub(super) fn add(g: &mut Gen, sc: &mut Scenario) {
    if !sc.config.tools.iter().any(|t| t.name == TASK_TOOL) {
        sc.config.tools.push(SimTool {
            name: TASK_TOOL.into(),
            description: "hand a piece of work to a subagent".into(),
            parameters: serde_json::json!({"type": "object"}),
            mutating: true,
            targets: None,
            source: None,
        });
    }
    sc.config.max_parallel = pick(g, &[1, 2, 2, 3, 4, 4]);
    if chance(g, 2, 3) {
        sc.config.mode = Mode::Auto;
    }
    let n = range(g, 2, 4) as usize;
    let mut calls: Vec<(String, String)> = (1..=n)
        .map(|k| (format!("task-{k}"), TASK_TOOL.to_string()))
        .collect();
    if chance(g, 1, 3) {
        let at = range(g, 1, n as u64) as usize;
        calls.insert(at, ("read-1".into(), "read_file".into()));
    }
    let mut durations = DURATIONS.to_vec();
    let mut scripts = Vec::new();
    let mut items = Vec::new();
    if chance(g, 1, 2) {
        items.push(StreamItem::Text {
            text: "Splitting the work.".into(),
        });
    }
    for (id, name) in &calls {
        let args = if name == TASK_TOOL {
            serde_json::json!({"description": format!("look into {id}"), "prompt": "report back"})
        } else {
            serde_json::json!({"path": "src/a.rs"})
        };
        items.push(StreamItem::ToolCall {
            id: id.clone(),
            name: name.clone(),
            args,
        });
        let k = range(g, 0, durations.len() as u64 - 1) as usize;
        let delay_ms = durations.remove(k);
        // Its child asks for approvals while it runs (now and then at the very end).
        let mut asks = Vec::new();
        if name == TASK_TOOL && chance(g, 1, 2) {
            for _ in 0..range(g, 1, 2) {
                asks.push(ChildAsk {
                    after_ms: pick(g, &[0, 1, delay_ms / 2, delay_ms]),
                    reason: if chance(g, 1, 2) {
                        ApprovalReason::UnapprovedSource
                    } else {
                        ApprovalReason::Gate
                    },
                });
            }
        }
        scripts.push(ToolScript {
            ok: !chance(g, 1, 5),
            output: format!("the answer of {id}"),
            delay_ms,
            asks,
            ..ToolScript::default()
        });
    }
    sc.replies.insert(
        0,
        Reply::Stream {
            items,
            end: StreamEnd::Complete { finish: None },
            delay_ms: pick(g, &[0, 0, 5]),
        },
    );
    sc.tools.splice(0..0, scripts);
    sc.steps.insert(
        0,
        Step {
            at: 0,
            action: Action::User {
                text: "split it up".into(),
            },
        },
    );
    if sc.config.mode == Mode::Ask {
        for k in 1..=calls.len() as u64 {
            sc.steps.push(Step {
                at: k,
                action: Action::ApprovePending {
                    approved: !chance(g, 1, 6),
                },
            });
        }
    }
    // The children's requests (asked in every mode when they are external bytes) are
    // answered now and then, while the runs are out.
    for _ in 0..range(g, 0, 3) {
        sc.steps.push(Step {
            at: pick(g, &[2, 8, 30, 250, 1000, 2500]),
            action: Action::ApprovePending {
                approved: !chance(g, 1, 3),
            },
        });
    }
    if chance(g, 1, 3) {
        sc.steps.push(Step {
            at: pick(g, &[1, 3, 10, 60, 300, 2000]),
            action: Action::Cancel,
        });
    }
}
