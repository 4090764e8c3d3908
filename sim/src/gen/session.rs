//! Session-level features of a generated scenario, each drawn with its own weight so that
//! every one appears in at least 1% of scenarios: a small context window (forced compaction),
//! `--continue` history, tool schemas over the budget, several hooks of every event, runs of
//! `turn_end` refusals past the eight honored, external tools behind `unapproved_source` with
//! env grants, agent-spawned and non-interactive sessions, and refreezes that change something.
//!
//! Invariant: a pure function of the [`Gen`], like the rest of the generator.

use quickcheck::Gen;

use openmax_core::conversation::{Block, Message, Role};
use openmax_core::machine::{Freeze, HookEvent, HookOutcome, HookSource, HookSpec};
use openmax_core::tool::SourceGate;
use openmax_core::wire::event::FreezeChange;

use super::{chance, hook_script, pick, range};
use crate::scenario::{Scenario, SimTool};

/// The external tool a generated reply may call (present only when the scenario installs it).
pub const EXTERNAL_TOOL: &str = "ext_tool";

/// Add the session-level features to a scenario whose client timeline and replies exist.
pub(super) fn add_features(g: &mut Gen, sc: &mut Scenario, may_quit: bool) {
    if chance(g, 1, 8) {
        sc.config.history = history(g);
    }
    if chance(g, 1, 10) {
        // A window small enough that a few turns cross the trigger (budget 1500-4500).
        sc.config.context_tokens = pick(g, &[2000, 3000, 6000]);
    }
    if chance(g, 1, 40) {
        // Schemas over half the budget: the advisory, and compaction against what is left.
        sc.config.context_tokens = pick(g, &[2000, 3000]);
        sc.config.tools.push(SimTool {
            name: "huge_schema".into(),
            description: "a tool whose schema is most of the window. ".repeat(pick(g, &[60, 400])),
            parameters: serde_json::json!({"type": "object"}),
            mutating: false,
            targets: None,
            source: None,
        });
    }
    if chance(g, 1, 5) {
        hooks(g, sc);
    }
    if chance(g, 1, 10) {
        sc.config.tools.push(SimTool {
            name: EXTERNAL_TOOL.into(),
            description: "an external tool from the project's manifest".into(),
            parameters: serde_json::json!({"type": "object"}),
            mutating: chance(g, 1, 2),
            targets: None,
            source: Some(SourceGate {
                source_path: ".openmax/tools/ext.toml".into(),
                source_sha: "0123456789ab".into(),
                env: if chance(g, 1, 2) {
                    vec!["API_TOKEN".into()]
                } else {
                    Vec::new()
                },
                approved: chance(g, 1, 4),
            }),
        });
    }
    if chance(g, 1, 20) {
        sc.config.agent_spawned = true;
    }
    if may_quit && chance(g, 1, 20) {
        sc.config.non_interactive = true;
    }
    if chance(g, 1, 6) {
        sc.refreezes.push(changed_freeze(g, sc));
    }
}

/// A `--continue` history: past turns with tool calls and long outputs (something for a
/// compaction to cut).
fn history(g: &mut Gen) -> Vec<Message> {
    let mut out = Vec::new();
    for k in 0..range(g, 1, 4) {
        let id = format!("past-{k}");
        out.push(Message::user_text(format!("earlier request {k}")));
        out.push(Message {
            role: Role::Assistant,
            content: vec![
                Block::text(format!("looking at part {k}")),
                Block::ToolUse {
                    id: id.clone(),
                    name: "read_file".into(),
                    input: serde_json::json!({"path": "src/big.rs"}),
                },
            ],
        });
        out.push(Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                id,
                ok: true,
                output: "fn big() {}\n".repeat(pick(g, &[10, 200])),
            }],
        });
        out.push(Message::assistant_text(format!("part {k} is fine")));
    }
    out
}

/// Two to four hooks of every event (blocking and not, one possibly not loaded), and their
/// outcomes: sometimes a run of nine or more refusals so a `turn_end` gate goes `unverified`.
fn hooks(g: &mut Gen, sc: &mut Scenario) {
    let palette = [
        ("gate.sh", HookEvent::UserPromptSubmit, true),
        ("verify.sh", HookEvent::TurnEnd, true),
        ("log.sh", HookEvent::ToolEnd, false),
        ("hello.sh", HookEvent::SessionStart, false),
        ("shrunk.sh", HookEvent::Compacted, false),
        ("watch.sh", HookEvent::ToolStart, false),
        ("notify.sh", HookEvent::TurnEnd, false),
        ("guard.sh", HookEvent::ToolStart, true),
    ];
    let n = range(g, 2, 4);
    for _ in 0..n {
        let (name, event, blocking) = pick(g, &palette);
        if sc.config.hooks.iter().any(|h| h.name == name) {
            continue;
        }
        sc.config.hooks.push(HookSpec {
            name: name.into(),
            event,
            blocking,
            // Now and then a project hook whose changed bytes no human approved: not run.
            source: chance(g, 1, 12).then(|| HookSource {
                command: vec!["sh".into(), name.into()],
                approve_path: name.into(),
                approved: false,
                unreadable: None,
            }),
            matcher: tool_matcher(g, event),
        });
    }
    let refusals = if chance(g, 1, 2) { range(g, 9, 11) } else { 0 };
    for _ in 0..refusals {
        sc.hooks.push(
            HookOutcome::Refuse {
                reason: "the tests do not pass yet".into(),
            }
            .into(),
        );
    }
    for _ in 0..range(g, 0, 4) {
        let outcome = match range(g, 0, 3) {
            0 => HookOutcome::Pass,
            1 => HookOutcome::Refuse {
                reason: "not today".into(),
            },
            2 => HookOutcome::Failed {
                detail: "exit 1".into(),
            },
            _ => rewrite(g),
        };
        sc.hooks.push(hook_script(g, outcome));
    }
}

/// The `match` of a tool hook: every tool, one, two, or a glob (`None` for other events).
fn tool_matcher(g: &mut Gen, event: HookEvent) -> Option<String> {
    if !event.is_tool_event() {
        return None;
    }
    pick(
        g,
        &[
            None,
            None,
            Some("shell"),
            Some("write_file|shell"),
            Some("read_*"),
        ],
    )
    .map(str::to_string)
}

/// A hook's rewrite of a call's arguments: usually arguments the tool's schema takes, now and
/// then ones it refuses (not an object).
fn rewrite(g: &mut Gen) -> HookOutcome {
    let args = if chance(g, 1, 4) {
        serde_json::json!(["src/b.rs"])
    } else {
        serde_json::json!({"path": pick(g, &["src/b.rs", "safe/a.rs"])})
    };
    HookOutcome::Rewrite { args }
}

/// A refreeze answer that changes something: a tool added or removed, the prompt changed, a
/// hook added, with the receipt naming who changed it.
fn changed_freeze(g: &mut Gen, sc: &Scenario) -> Freeze {
    let mut f = sc.freeze();
    let by = pick(g, &["agent", "outside"]).to_string();
    match range(g, 0, 2) {
        0 => {
            f.tools.pop();
            f.changes.push(FreezeChange {
                kind: "tool".into(),
                name: "shell".into(),
                change: "removed".into(),
                path: ".openmax/tools/shell.toml".into(),
                by,
            });
        }
        1 => {
            f.system.push_str(" Be brief.");
            f.changes.push(FreezeChange {
                kind: "prompt".into(),
                name: "AGENTS.md".into(),
                change: "changed".into(),
                path: "AGENTS.md".into(),
                by,
            });
        }
        _ => {
            f.hooks.push(HookSpec {
                name: "verify.sh".into(),
                event: HookEvent::TurnEnd,
                blocking: true,
                source: None,
                matcher: None,
            });
            f.changes.push(FreezeChange {
                kind: "hook".into(),
                name: "verify.sh".into(),
                change: "added".into(),
                path: ".openmax/hooks/verify.sh".into(),
                by,
            });
        }
    }
    f.notes.push("1 tool manifest could not be read".into());
    f
}

/// One focused recipe in place of the random timeline and replies: a short, fault-light run
/// aimed at a feature random interleavings rarely reach (an approval answered or timed out,
/// an external tool's source and env grant, nine refusals, a compaction with its hook, a
/// token cap reached exactly, diffs, thinking voided by a retry, a shell call asking to leave
/// the sandbox or able to run read-only, a client line while a hook runs).
pub(super) fn recipe(g: &mut Gen, sc: &mut Scenario, may_quit: bool) {
    use crate::scenario::{Action, Step, ToolScript};
    use crate::script::{Reply, StreamEnd, StreamItem};
    let call = |id: &str, name: &str| StreamItem::ToolCall {
        id: id.into(),
        name: name.into(),
        args: serde_json::json!({"path": "src/a.rs"}),
    };
    let stream = |items: Vec<StreamItem>| Reply::Stream {
        items,
        end: StreamEnd::Complete { finish: None },
        delay_ms: 0,
    };
    let usage = |p: u64, c: u64| StreamItem::Usage {
        prompt_tokens: p,
        completion_tokens: c,
        cached_tokens: None,
    };
    sc.steps = vec![Step {
        at: 0,
        action: Action::User {
            text: "fix the bug".into(),
        },
    }];
    sc.replies.clear();
    sc.persist_failures.clear();
    match range(g, 0, 11) {
        10.. => tool_guard(g, sc),
        9 => during_hook(g, sc, may_quit),
        8 => {
            // A shell call that asks to run outside the sandbox (answered by the human) or
            // can run read-only (in readonly mode, half the time).
            let sandbox = if chance(g, 2, 3) {
                openmax_core::tool::PlanSandbox::Escalate {
                    justification: "it writes outside the project".into(),
                }
            } else {
                openmax_core::tool::PlanSandbox::ReadOnlyCapable
            };
            sc.config.mode =
                if sandbox == openmax_core::tool::PlanSandbox::ReadOnlyCapable && chance(g, 1, 2) {
                    openmax_core::wire::Mode::Readonly
                } else {
                    openmax_core::wire::Mode::Ask
                };
            sc.config.non_interactive = false;
            sc.config.agent_spawned = false;
            sc.replies.push(stream(vec![call("c1", "shell")]));
            sc.tools = vec![ToolScript {
                sandbox: Some(sandbox),
                mutating: Some(true),
                ..ToolScript::default()
            }];
            sc.steps.push(Step {
                at: pick(g, &[10, 100]),
                action: Action::ApprovePending {
                    approved: chance(g, 3, 4),
                },
            });
        }
        0 | 1 => {
            // An approval answered (or left to time out / be cancelled), maybe of an external
            // tool with an env grant.
            sc.config.mode = openmax_core::wire::Mode::Ask;
            sc.config.non_interactive = false;
            let name = if chance(g, 2, 3) {
                sc.config.tools.retain(|t| t.name != EXTERNAL_TOOL);
                sc.config.tools.push(SimTool {
                    name: EXTERNAL_TOOL.into(),
                    description: "an external tool".into(),
                    parameters: serde_json::json!({"type": "object"}),
                    mutating: false,
                    targets: None,
                    source: Some(SourceGate {
                        source_path: ".openmax/tools/ext.toml".into(),
                        source_sha: "0123456789ab".into(),
                        env: if chance(g, 1, 2) {
                            vec!["API_TOKEN".into()]
                        } else {
                            Vec::new()
                        },
                        approved: false,
                    }),
                });
                // The human's approval cannot be recorded (recorded approvals come from the
                // random timelines).
                sc.approval_record_failures.push(0);
                EXTERNAL_TOOL
            } else {
                "write_file"
            };
            sc.replies.push(stream(vec![call("c1", name)]));
            sc.config.limits.approval_timeout_ms = pick(g, &[0, 2000, 2000]);
            let at = pick(g, &[10, 100, 5000]);
            let action = match range(g, 0, 3) {
                0 => Action::Cancel,
                _ => Action::ApprovePending {
                    approved: chance(g, 3, 4),
                },
            };
            sc.steps.push(Step { at, action });
        }
        2 => {
            // A turn_end gate refusing past the eight honored.
            sc.config.hooks.retain(|h| h.event != HookEvent::TurnEnd);
            sc.config.hooks.push(HookSpec {
                name: "verify.sh".into(),
                event: HookEvent::TurnEnd,
                blocking: true,
                source: None,
                matcher: None,
            });
            sc.config.limits.max_agent_tokens = 0;
            sc.hooks = (0..range(g, 8, 10))
                .map(|_| {
                    HookOutcome::Refuse {
                        reason: "the tests do not pass yet".into(),
                    }
                    .into()
                })
                .collect();
        }
        3 | 4 => {
            // A compaction: a small window, long history, a compacted hook.
            sc.config.context_tokens = 2000;
            sc.config.history = history(g);
            sc.config.hooks.retain(|h| h.name != "shrunk.sh");
            sc.config.hooks.push(HookSpec {
                name: "shrunk.sh".into(),
                event: HookEvent::Compacted,
                blocking: false,
                source: None,
                matcher: None,
            });
            for k in 1..range(g, 2, 4) {
                sc.steps.push(Step {
                    at: k * 1000,
                    action: Action::User {
                        text: format!("step {k}"),
                    },
                });
            }
        }
        5 => {
            // A token cap reached exactly by reported usage, then a tool round.
            sc.config.mode = openmax_core::wire::Mode::Auto;
            sc.config.limits.max_agent_tokens = pick(g, &[110, 200]);
            sc.config.limits.max_iterations = 5;
            sc.replies
                .push(stream(vec![usage(100, 10), call("c1", "read_file")]));
            sc.replies
                .push(stream(vec![usage(80, 10), call("c2", "read_file")]));
        }
        6 => {
            // Diffs from file tools.
            sc.config.mode = openmax_core::wire::Mode::Auto;
            sc.replies.push(stream(vec![call("c1", "write_file")]));
            sc.tools = vec![ToolScript {
                diffs: vec![openmax_core::tool::FileDiff {
                    path: "src/a.rs".into(),
                    diff: "@@ -1 +1 @@\n-a\n+b\n".into(),
                    added: 1,
                    removed: 1,
                }],
                ..ToolScript::default()
            }];
        }
        7 => {
            // Thinking voided by a retry: the first attempt thinks, then fails before any
            // reply text (overloaded, cut off, silent); the retry thinks again and completes.
            sc.config.retry.max_attempts = range(g, 2, 5) as u32;
            let thinking = |text: &str| StreamItem::Thinking { text: text.into() };
            let end = match range(g, 0, 3) {
                0 => StreamEnd::Stall,
                1 => StreamEnd::Abort,
                _ => StreamEnd::Error {
                    error: "overloaded_error".into(),
                    message: "Overloaded".into(),
                },
            };
            sc.replies.push(Reply::Stream {
                items: vec![thinking("first thoughts")],
                end,
                delay_ms: 0,
            });
            sc.replies.push(stream(vec![
                thinking("second thoughts"),
                StreamItem::Text {
                    text: "Hello".into(),
                },
            ]));
        }
    }
    if may_quit {
        sc.steps.push(Step {
            at: 20_000,
            action: Action::Eof,
        });
    }
}

/// Blocking `tool_start` hooks (one, or two in a chain; now and then a project hook no human
/// approved) over a reply calling one or two tools, answering pass, refuse, rewrite (into
/// arguments the schema takes or refuses) or failing as a timeout does, each quickly or after a
/// while; a `cancel` may come while one runs, and in `ask` the human answers the approval.
fn tool_guard(g: &mut Gen, sc: &mut Scenario) {
    use crate::scenario::{Action, HookScript, Step};
    use crate::script::{Reply, StreamEnd, StreamItem};
    sc.config.mode = pick(
        g,
        &[
            openmax_core::wire::Mode::Auto,
            openmax_core::wire::Mode::Ask,
        ],
    );
    sc.config.non_interactive = false;
    sc.config.agent_spawned = false;
    sc.config.limits.max_agent_tokens = 0;
    sc.config.limits.max_iterations = 3;
    let guard = |name: &str, g: &mut Gen| HookSpec {
        name: name.into(),
        event: HookEvent::ToolStart,
        blocking: true,
        source: chance(g, 1, 8).then(|| HookSource {
            command: vec!["sh".into(), name.into()],
            approve_path: name.into(),
            approved: false,
            unreadable: None,
        }),
        matcher: tool_matcher(g, HookEvent::ToolStart),
    };
    sc.config.hooks = vec![guard("guard.sh", g)];
    if chance(g, 1, 3) {
        let second = guard("audit.sh", g);
        sc.config.hooks.push(second);
    }
    let mut items = Vec::new();
    for id in ["c1", "c2"].iter().take(range(g, 1, 2) as usize) {
        items.push(StreamItem::ToolCall {
            id: (*id).into(),
            name: pick(g, &["shell", "write_file", "read_file"]).into(),
            args: serde_json::json!({"path": "src/a.rs"}),
        });
    }
    sc.replies.push(Reply::Stream {
        items,
        end: StreamEnd::Complete { finish: None },
        delay_ms: 0,
    });
    for _ in 0..range(g, 1, 4) {
        let outcome = match range(g, 0, 4) {
            0 => HookOutcome::Pass,
            1 => HookOutcome::Refuse {
                reason: "not on main".into(),
            },
            2 => HookOutcome::Failed {
                detail: "timed out after 1 s".into(),
            },
            _ => rewrite(g),
        };
        sc.hooks.push(HookScript {
            outcome,
            delay_ms: pick(g, &[0, 0, 50, 2000]),
        });
    }
    if chance(g, 1, 4) {
        sc.steps.push(Step {
            at: pick(g, &[1, 20, 60]),
            action: Action::Cancel,
        });
    }
    for at in [100, 2100, 4100] {
        sc.steps.push(Step {
            at,
            action: Action::ApprovePending {
                approved: chance(g, 3, 4),
            },
        });
    }
}

/// A client line while a hook runs: a prompt gate, a `turn_end` gate or an observe-only
/// `turn_end` hook that takes 50 ms to 15 s, and during it a `cancel` (half the time), a `quit`,
/// end of input, another `user`, a mode change, a `reload`, a garbage line or a crash; then,
/// after the hook's answer, one more `user` (the session must have recovered).
fn during_hook(g: &mut Gen, sc: &mut Scenario, may_quit: bool) {
    use crate::scenario::{Action, HookScript, Step};
    let (name, event, blocking) = pick(
        g,
        &[
            ("gate.sh", HookEvent::UserPromptSubmit, true),
            ("gate.sh", HookEvent::UserPromptSubmit, true),
            ("verify.sh", HookEvent::TurnEnd, true),
            ("verify.sh", HookEvent::TurnEnd, true),
            ("notify.sh", HookEvent::TurnEnd, false),
        ],
    );
    sc.config.hooks = vec![HookSpec {
        name: name.into(),
        event,
        blocking,
        source: None,
        matcher: None,
    }];
    sc.config.limits.max_agent_tokens = 0;
    let outcome = match range(g, 0, 3) {
        0 | 1 => HookOutcome::Pass,
        2 => HookOutcome::Refuse {
            reason: "not yet".into(),
        },
        _ => HookOutcome::Failed {
            detail: "exit 1".into(),
        },
    };
    // 15 s outlasts the shutdown drain's 10 s deadline: a `quit` then cancels the turn while
    // its hook still runs.
    let delay_ms = pick(g, &[50, 2000, 2000, 15_000]);
    sc.hooks = vec![HookScript { outcome, delay_ms }];
    let action = if chance(g, 1, 2) {
        Action::Cancel
    } else {
        match range(g, 0, 9) {
            0 | 1 if may_quit => Action::Quit,
            2 | 3 if may_quit => Action::Eof,
            4 => Action::User {
                text: "and another thing".into(),
            },
            5 => Action::ApprovalMode {
                mode: "auto".into(),
            },
            6 => Action::Reload,
            7 => Action::Line {
                line: "not json".into(),
            },
            8 => Action::Crash {
                message: "effect runner panicked (scripted)".into(),
            },
            9 => Action::Compact,
            _ => Action::Cancel,
        }
    };
    sc.steps.push(Step {
        at: pick(g, &[1, 20, 40]),
        action,
    });
    sc.steps.push(Step {
        at: delay_ms + pick(g, &[0, 1, 500]),
        action: Action::User {
            text: "after the hook".into(),
        },
    });
}
