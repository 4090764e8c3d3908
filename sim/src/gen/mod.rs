//! quickcheck generators of scenarios: client commands interleaved with faults (every reply
//! shape, tool outcomes, hooks that run a while, approvals answered, unanswered and bogus,
//! cancels at random times, quit and end of input, persistence and mode-save failures,
//! crashes, `task` calls whose runs overlap and end in a shuffled order), and real shrinking (drop steps and queue entries, simplify replies, hooks and
//! configuration, pull times together).
//!
//! - [`GenScenario`]: any scenario (it usually ends with end of input).
//! - [`LiveScenario`]: a fault prefix with no quit or end of input, then the faults stop
//!   (`heal`), the client cancels, and one more `user` must complete normally.
//!
//! Invariant: generation is a pure function of the [`Gen`]; a seeded `Gen` always gives the
//! same scenarios, which is what makes `openmax-sim explore --seed` reproducible.

use quickcheck::{Arbitrary, Gen};

use openmax_core::machine::{FramingFault, HookEvent, HookOutcome, HookSpec};
use openmax_core::tool::{FileDiff, PlanSandbox};
use openmax_core::wire::Mode;

use crate::scenario::{Action, HookScript, Scenario, Step, ToolScript};
use crate::script::{Reply, StreamEnd, StreamItem};

mod session;
mod tasks;
pub use session::EXTERNAL_TOOL;

/// A generated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct GenScenario(pub Scenario);

/// A generated liveness scenario: the fault prefix; see [`LiveScenario::full`].
#[derive(Debug, Clone, PartialEq)]
pub struct LiveScenario(pub Scenario);

/// The text of the `user` that must complete after the faults stop.
pub const LIVENESS_PROMPT: &str = "after the faults";

impl LiveScenario {
    /// The prefix, then `heal`, `cancel` and the final `user`, each a little later; the `user`
    /// late enough for the cancelled turn's appends to be answered when persistence is slow
    /// (`persist_delay_ms`), as a client waits for `done` before its next `user`.
    pub fn full(&self) -> Scenario {
        let mut sc = self.0.clone();
        let end = sc.steps.iter().map(|s| s.at).max().unwrap_or(0);
        let settle = 20 * sc.persist_delay_ms;
        sc.steps.push(Step {
            at: end + 1,
            action: Action::Heal,
        });
        sc.steps.push(Step {
            at: end + 2,
            action: Action::Cancel,
        });
        sc.steps.push(Step {
            at: end + 3 + settle,
            action: Action::User {
                text: LIVENESS_PROMPT.into(),
            },
        });
        sc
    }
}

impl Arbitrary for GenScenario {
    fn arbitrary(g: &mut Gen) -> Self {
        GenScenario(generate(g, true))
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        Box::new(shrink(&self.0).into_iter().map(GenScenario))
    }
}

impl Arbitrary for LiveScenario {
    fn arbitrary(g: &mut Gen) -> Self {
        LiveScenario(generate(g, false))
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        Box::new(shrink(&self.0).into_iter().map(LiveScenario))
    }
}

/// A number in `lo..=hi`.
pub fn range(g: &mut Gen, lo: u64, hi: u64) -> u64 {
    lo + u64::arbitrary(g) % (hi - lo + 1)
}

/// True with probability `num/den`.
pub(crate) fn chance(g: &mut Gen, num: u64, den: u64) -> bool {
    range(g, 1, den) <= num
}

pub(crate) fn pick<T: Clone>(g: &mut Gen, xs: &[T]) -> T {
    // Every call site passes a non-empty literal slice.
    g.choose(xs).expect("non-empty choice").clone()
}

/// A hook outcome with a duration: mostly answered at once, sometimes running long enough
/// for a client line (a `cancel`, `quit`, end of input, another `user`) to arrive first.
pub(crate) fn hook_script(g: &mut Gen, outcome: HookOutcome) -> HookScript {
    HookScript {
        outcome,
        delay_ms: pick(g, &[0, 0, 0, 0, 5, 50, 2000]),
    }
}

/// Generate one scenario. `may_quit`: whether quit / end of input / untrusted projects and
/// token caps may appear (off for the liveness prefix).
pub fn generate(g: &mut Gen, may_quit: bool) -> Scenario {
    let mut sc = Scenario::default();
    let c = &mut sc.config;
    c.seed = u64::arbitrary(g) % 1000;
    c.trusted = !may_quit || !chance(g, 1, 12);
    c.mode = pick(g, &[Mode::Ask, Mode::Ask, Mode::Auto, Mode::Readonly]);
    c.retry.max_attempts = range(g, 1, 5) as u32;
    c.retry.retry_base_ms = pick(g, &[10, 100, 1000]);
    c.retry.stream_idle_timeout_ms = pick(g, &[500, 5000, 300_000]);
    c.limits.max_iterations = range(g, 1, 4) as u32;
    // Caps equal to sums of the generated usage figures (prompt 10/100/250 plus completion
    // 10/50), so a turn often reaches its cap exactly.
    c.limits.max_agent_tokens = if may_quit && chance(g, 1, 6) {
        pick(g, &[20, 110, 260, 300, 500])
    } else {
        0
    };
    c.limits.approval_timeout_ms = pick(g, &[0, 0, 0, 2000]);
    c.deliver_after_cancel = chance(g, 1, 5);
    if chance(g, 1, 6) {
        c.deny = vec!["shell(rm *)".into()];
    }
    if chance(g, 1, 6) {
        c.ask = vec!["read_file(secret*)".into()];
    }
    if chance(g, 1, 6) {
        let (name, event, blocking) = pick(
            g,
            &[
                ("gate.sh", HookEvent::UserPromptSubmit, true),
                ("verify.sh", HookEvent::TurnEnd, true),
                ("log.sh", HookEvent::ToolEnd, false),
            ],
        );
        c.hooks = vec![HookSpec {
            name: name.into(),
            event,
            blocking,
            source: None,
            matcher: None,
        }];
        let n = range(g, 0, 3);
        for _ in 0..n {
            let outcome = match range(g, 0, 2) {
                0 => HookOutcome::Pass,
                1 => HookOutcome::Refuse {
                    reason: "not today".into(),
                },
                _ => HookOutcome::Failed {
                    detail: "exit 1".into(),
                },
            };
            sc.hooks.push(hook_script(g, outcome));
        }
    }

    // The client's timeline.
    let n_steps = range(g, 1, 10);
    let mut t = 0u64;
    for _ in 0..n_steps {
        t += pick(g, &[0, 0, 1, 5, 50, 500, 3000]);
        let action = gen_action(g, may_quit);
        let is_user = matches!(action, Action::User { .. });
        sc.steps.push(Step { at: t, action });
        // A client that answers the approval the turn is likely to raise.
        if is_user && chance(g, 1, 3) {
            sc.steps.push(Step {
                at: t + pick(g, &[0, 0, 1, 20, 500, 1500]),
                action: Action::ApprovePending {
                    approved: bool::arbitrary(g),
                },
            });
        }
    }
    if may_quit && chance(g, 6, 7) {
        t += pick(g, &[0, 1, 100, 10_000]);
        sc.steps.push(Step {
            at: t,
            action: Action::Eof,
        });
    }

    // The provider's replies.
    let n_replies = range(g, 1, 8);
    let mut call = 0u32;
    for _ in 0..n_replies {
        let r = gen_reply(g, &mut call);
        sc.replies.push(r);
    }

    // A run of connection failures (the three-unreachable rule needs three in a row).
    if chance(g, 1, 8) {
        let at = range(g, 0, sc.replies.len() as u64) as usize;
        for _ in 0..3 {
            sc.replies.insert(at, Reply::Unreachable);
        }
    }

    // Tool outcomes.
    for _ in 0..range(g, 0, 4) {
        let mut ts = ToolScript {
            ok: !chance(g, 1, 4),
            output: pick(g, &["done".to_string(), "permission denied".to_string()]),
            delay_ms: pick(g, &[0, 0, 10, 1000]),
            ..ToolScript::default()
        };
        if chance(g, 1, 4) {
            ts.diffs.push(FileDiff {
                path: "src/a.rs".into(),
                diff: "@@ -1 +1 @@\n-a\n+b\n".into(),
                added: 1,
                removed: 1,
            });
        }
        if chance(g, 1, 8) {
            ts.invalid = Some("path escapes the project".into());
        }
        if chance(g, 1, 8) {
            ts.mutating = Some(bool::arbitrary(g));
        }
        sc.tools.push(ts);
    }

    if chance(g, 1, 6) {
        sc.persist_failures.push(range(g, 0, 6));
    }
    if chance(g, 1, 6) {
        sc.mode_save_failures.push(0);
    }
    session::add_features(g, &mut sc, may_quit);
    let focused = chance(g, 1, 3);
    if focused {
        session::recipe(g, &mut sc, may_quit);
    }
    // The sandbox a call's plan asks for (an escalation) or allows (read-only), mostly on the
    // first call, which the approval recipe asks about. Drawn last, so the draws above (and
    // the rest of a seed's cases) stay as they were.
    let sandboxed = chance(g, 1, 3);
    if sandboxed {
        if sc.tools.is_empty() {
            sc.tools.push(ToolScript::default());
        }
        // Only `shell` plans these: the first call is made a shell call where it writes a
        // file, and it is mutating (what `readonly` would otherwise refuse).
        let first = sc.replies.iter_mut().find_map(|r| match r {
            Reply::Stream { items, .. } => items.iter_mut().find_map(|i| match i {
                StreamItem::ToolCall { name, .. } => Some(name),
                _ => None,
            }),
            _ => None,
        });
        if let Some(name) = first.filter(|n| n.as_str() == "write_file") {
            *name = "shell".into();
        }
        let sandbox = plan_sandbox(g);
        if sandbox == PlanSandbox::ReadOnlyCapable && chance(g, 1, 2) {
            sc.config.mode = Mode::Readonly;
        }
        sc.tools[0].sandbox = Some(sandbox);
        sc.tools[0].mutating = Some(true);
    }
    for ts in sc.tools.iter_mut().skip(1) {
        if chance(g, 1, 6) {
            ts.sandbox = Some(plan_sandbox(g));
        }
    }
    // Task calls side by side, drawn last like the sandbox above, and only where neither a
    // focused recipe nor the sandbox draw shaped the first call (its reply and script would
    // be pushed back).
    if !focused && !sandboxed && chance(g, 1, 3) {
        tasks::add(g, &mut sc);
    }
    sc
}

fn plan_sandbox(g: &mut Gen) -> PlanSandbox {
    if chance(g, 2, 3) {
        PlanSandbox::Escalate {
            justification: "it writes outside the project".into(),
        }
    } else {
        PlanSandbox::ReadOnlyCapable
    }
}

fn gen_action(g: &mut Gen, may_quit: bool) -> Action {
    loop {
        let a = match range(g, 0, 99) {
            0..=34 => Action::User {
                text: pick(
                    g,
                    &[
                        "hi".to_string(),
                        "fix the bug".to_string(),
                        "".to_string(),
                        "édite ça".to_string(),
                    ],
                ),
            },
            35..=44 => Action::Cancel,
            45..=56 => Action::ApprovePending {
                approved: bool::arbitrary(g),
            },
            57..=59 => Action::ApproveSettled,
            60..=61 => Action::Approve {
                approval_id: "bogus-7".into(),
                approved: true,
            },
            62..=66 => Action::ApprovalMode {
                mode: pick(
                    g,
                    &[
                        "auto".to_string(),
                        "ask".to_string(),
                        "readonly".to_string(),
                        "yolo".to_string(),
                    ],
                ),
            },
            67..=70 => Action::Reload,
            71..=73 => Action::Quit,
            74..=75 => Action::Eof,
            76..=81 => Action::Line {
                line: pick(
                    g,
                    &[
                        "not json".to_string(),
                        "".to_string(),
                        "   ".to_string(),
                        "[1,2]".to_string(),
                        "{\"cmd\":\"dance\"}".to_string(),
                        "{\"cmd\":\"user\"}".to_string(),
                        "{\"cmd\":\"approve\",\"approval_id\":5}".to_string(),
                        "{\"text\":\"no cmd\"}".to_string(),
                    ],
                ),
            },
            82..=84 => Action::Cmd {
                cmd: serde_json::json!({"cmd": "user", "text": "extra", "colour": "blue"}),
            },
            85..=89 => Action::Framing {
                fault: if bool::arbitrary(g) {
                    FramingFault::NotUtf8
                } else {
                    FramingFault::TooLong { len: 9_000_000 }
                },
            },
            90..=93 => Action::Compact,
            _ => Action::Crash {
                message: "effect runner panicked (scripted)".into(),
            },
        };
        if !may_quit && matches!(a, Action::Quit | Action::Eof) {
            continue;
        }
        return a;
    }
}

fn gen_reply(g: &mut Gen, call: &mut u32) -> Reply {
    match range(g, 0, 99) {
        0..=6 => Reply::Unreachable,
        7..=9 => Reply::Transport,
        10..=11 => Reply::Status {
            status: 400,
            retry_after: None,
            error: Some("invalid_request_error".to_string()),
            message: Some("prompt is too long: 250000 tokens > 200000 maximum".to_string()),
        },
        12..=24 => Reply::Status {
            status: pick(g, &[429, 500, 502, 503, 504, 529, 400, 401]),
            retry_after: pick(
                g,
                &[
                    None,
                    None,
                    Some("1".to_string()),
                    Some("2".to_string()),
                    Some("60".to_string()),
                    Some("61".to_string()),
                    Some("120".to_string()),
                ],
            ),
            error: pick(
                g,
                &[
                    None,
                    Some("insufficient_quota".to_string()),
                    Some("overloaded_error".to_string()),
                    Some("rate_limit_error".to_string()),
                ],
            ),
            message: None,
        },
        _ => {
            let mut items = Vec::new();
            for _ in 0..range(g, 0, 4) {
                items.push(match range(g, 0, 10) {
                    0..=3 => StreamItem::Text {
                        text: pick(
                            g,
                            &["Hello".to_string(), " world".to_string(), "ü".to_string()],
                        ),
                    },
                    4 => StreamItem::Thinking { text: "hmm".into() },
                    5..=8 => {
                        *call += 1;
                        StreamItem::ToolCall {
                            id: format!("call-{call}"),
                            name: pick(
                                g,
                                &[
                                    "read_file".to_string(),
                                    "write_file".to_string(),
                                    "write_file".to_string(),
                                    "shell".to_string(),
                                    "no_such_tool".to_string(),
                                    EXTERNAL_TOOL.to_string(),
                                ],
                            ),
                            args: pick(
                                g,
                                &[
                                    serde_json::json!({"path": "src/a.rs"}),
                                    serde_json::json!({"command": "rm -rf x"}),
                                    serde_json::json!({"path": "secret.txt"}),
                                    serde_json::json!({"path": "src/b.rs"}),
                                    serde_json::json!({"path": "src/c.rs"}),
                                    // Malformed: arguments that are not a JSON object.
                                    serde_json::json!("{\"path\": \"src/a.rs\""),
                                ],
                            ),
                        }
                    }
                    _ => {
                        let (any_prompt, any_completion) = (range(g, 1, 300), range(g, 1, 50));
                        StreamItem::Usage {
                            prompt_tokens: pick(g, &[10, 100, 250, any_prompt]),
                            completion_tokens: pick(g, &[10, 50, any_completion]),
                            cached_tokens: pick(g, &[None, Some(0), Some(10)]),
                        }
                    }
                });
            }
            let end = match range(g, 0, 19) {
                0..=8 => StreamEnd::Complete { finish: None },
                9..=10 => StreamEnd::Complete {
                    finish: Some("length".into()),
                },
                11..=12 => StreamEnd::Abort,
                13..=14 => StreamEnd::CleanEof,
                15..=16 => StreamEnd::Stall,
                _ => StreamEnd::Error {
                    error: pick(
                        g,
                        &[
                            "overloaded_error".to_string(),
                            "rate_limit_error".to_string(),
                            "api_error".to_string(),
                            "invalid_request_error".to_string(),
                        ],
                    ),
                    message: "stream failed (scripted)".into(),
                },
            };
            Reply::Stream {
                items,
                end,
                delay_ms: pick(g, &[0, 0, 5, 100]),
            }
        }
    }
}

/// Shrink candidates, most aggressive first: drop steps and queue entries, then simplify
/// replies, tool outcomes and configuration, then pull times together.
pub fn shrink(sc: &Scenario) -> Vec<Scenario> {
    let mut out = Vec::new();
    let with = |f: &dyn Fn(&mut Scenario)| {
        let mut s = sc.clone();
        f(&mut s);
        s
    };
    // Halve the timeline / reply queue in one go.
    if sc.steps.len() > 2 {
        out.push(with(&|s| s.steps.truncate(s.steps.len() / 2)));
    }
    for i in (0..sc.steps.len()).rev() {
        out.push(with(&|s| {
            s.steps.remove(i);
        }));
    }
    for i in (0..sc.replies.len()).rev() {
        out.push(with(&|s| {
            s.replies.remove(i);
        }));
    }
    for i in (0..sc.tools.len()).rev() {
        out.push(with(&|s| {
            s.tools.remove(i);
        }));
    }
    for i in (0..sc.hooks.len()).rev() {
        out.push(with(&|s| {
            s.hooks.remove(i);
        }));
    }
    if !sc.config.hooks.is_empty() {
        out.push(with(&|s| s.config.hooks.clear()));
    }
    for (i, h) in sc.hooks.iter().enumerate() {
        if h.delay_ms > 0 {
            out.push(with(&|s| s.hooks[i].delay_ms = 0));
        }
    }
    if !sc.persist_failures.is_empty() {
        out.push(with(&|s| s.persist_failures.clear()));
    }
    if !sc.mode_save_failures.is_empty() {
        out.push(with(&|s| s.mode_save_failures.clear()));
    }
    if !sc.approval_record_failures.is_empty() {
        out.push(with(&|s| s.approval_record_failures.clear()));
    }
    if sc.persist_delay_ms > 0 {
        out.push(with(&|s| s.persist_delay_ms = 0));
    }
    // Simplify replies.
    for (i, r) in sc.replies.iter().enumerate() {
        for smaller in shrink_reply(r) {
            out.push(with(&|s| s.replies[i] = smaller.clone()));
        }
    }
    // Simplify tool outcomes.
    for (i, t) in sc.tools.iter().enumerate() {
        if t.sandbox.is_some() {
            out.push(with(&|s| s.tools[i].sandbox = None));
        }
        if *t != ToolScript::default() {
            out.push(with(&|s| s.tools[i] = ToolScript::default()));
        }
    }
    // Simplify steps.
    for (i, st) in sc.steps.iter().enumerate() {
        if let Action::User { text } = &st.action {
            if text.len() > 1 {
                out.push(with(&|s| {
                    s.steps[i].action = Action::User { text: "x".into() }
                }));
            }
        }
        if i > 0 && st.at > sc.steps[i - 1].at {
            // Steps need not be sorted (an answer can be scheduled past the next step).
            let later = st.at - sc.steps[i - 1].at;
            out.push(with(&|s| {
                for step in s.steps.iter_mut().skip(i) {
                    step.at = step.at.saturating_sub(later);
                }
            }));
        }
    }
    if let Some(first) = sc.steps.first() {
        if first.at > 0 {
            let d = first.at;
            out.push(with(&|s| {
                s.steps
                    .iter_mut()
                    .for_each(|st| st.at = st.at.saturating_sub(d))
            }));
        }
    }
    // Simplify configuration toward the defaults.
    let d = Scenario::default().config;
    let c = &sc.config;
    if !c.trusted {
        out.push(with(&|s| s.config.trusted = true));
    }
    if c.mode != d.mode {
        out.push(with(&|s| s.config.mode = d.mode));
    }
    if !c.deny.is_empty() || !c.ask.is_empty() {
        out.push(with(&|s| {
            s.config.deny.clear();
            s.config.ask.clear();
        }));
    }
    if c.deliver_after_cancel {
        out.push(with(&|s| s.config.deliver_after_cancel = false));
    }
    if c.max_parallel != d.max_parallel {
        out.push(with(&|s| s.config.max_parallel = d.max_parallel));
    }
    if c.retry != d.retry {
        out.push(with(&|s| s.config.retry = d.retry.clone()));
    }
    if c.limits != d.limits {
        out.push(with(&|s| s.config.limits = d.limits.clone()));
    }
    if c.seed != 0 {
        out.push(with(&|s| s.config.seed = 0));
    }
    if !c.history.is_empty() {
        out.push(with(&|s| s.config.history.clear()));
    }
    if c.context_tokens != d.context_tokens {
        out.push(with(&|s| s.config.context_tokens = d.context_tokens));
    }
    if c.tools != d.tools {
        out.push(with(&|s| s.config.tools = d.tools.clone()));
    }
    if c.agent_spawned {
        out.push(with(&|s| s.config.agent_spawned = false));
    }
    if c.non_interactive {
        out.push(with(&|s| s.config.non_interactive = false));
    }
    for i in (0..sc.refreezes.len()).rev() {
        out.push(with(&|s| {
            s.refreezes.remove(i);
        }));
    }
    if c.limits.max_agent_tokens != 0 {
        out.push(with(&|s| s.config.limits.max_agent_tokens = 0));
    }
    if c.limits.approval_timeout_ms != 0 {
        out.push(with(&|s| s.config.limits.approval_timeout_ms = 0));
    }
    out
}

fn shrink_reply(r: &Reply) -> Vec<Reply> {
    let mut out = Vec::new();
    match r {
        Reply::Unreachable | Reply::Transport | Reply::RawStatus { .. } => {}
        Reply::Status {
            status,
            retry_after,
            error,
            message,
        } => {
            if retry_after.is_some() {
                out.push(Reply::Status {
                    status: *status,
                    retry_after: None,
                    error: error.clone(),
                    message: message.clone(),
                });
            }
            if error.is_some() {
                out.push(Reply::Status {
                    status: *status,
                    retry_after: retry_after.clone(),
                    error: None,
                    message: message.clone(),
                });
            }
        }
        Reply::Stream {
            items,
            end,
            delay_ms,
        } => {
            for i in 0..items.len() {
                let mut smaller = items.clone();
                smaller.remove(i);
                out.push(Reply::Stream {
                    items: smaller,
                    end: end.clone(),
                    delay_ms: *delay_ms,
                });
            }
            if *end != (StreamEnd::Complete { finish: None }) {
                out.push(Reply::Stream {
                    items: items.clone(),
                    end: StreamEnd::Complete { finish: None },
                    delay_ms: *delay_ms,
                });
            }
            if *delay_ms != 0 {
                out.push(Reply::Stream {
                    items: items.clone(),
                    end: end.clone(),
                    delay_ms: 0,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_generation_is_deterministic() {
        let a = generate(&mut Gen::from_size_and_seed(50, 7), true);
        let b = generate(&mut Gen::from_size_and_seed(50, 7), true);
        assert_eq!(a, b);
    }

    #[test]
    fn shrinking_only_makes_smaller_scenarios() {
        let sc = generate(&mut Gen::from_size_and_seed(50, 3), true);
        for s in shrink(&sc) {
            assert_ne!(
                s, sc,
                "a shrink candidate equal to its parent loops forever"
            );
        }
    }

    #[test]
    fn generated_scenarios_round_trip_through_json() {
        for seed in 0..50 {
            let sc = generate(&mut Gen::from_size_and_seed(50, seed), true);
            let back = Scenario::from_json(&sc.to_json_pretty()).unwrap();
            assert_eq!(back, sc);
        }
    }
}
