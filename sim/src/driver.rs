//! The deterministic driver: runs one [`Scenario`] through the pure core on a virtual clock.
//!
//! The loop: feed one input, drain `poll` to empty (events go to the wire, effects are answered
//! from the scenario's queues and their answers scheduled at `now + delay`), then pick the next
//! thing to happen: the earliest of the next timeline step, the next scheduled answer and the
//! core's `poll_timeout`, jumping the clock there. Ties at one instant go, in this order, to
//! local answers (persistence, mode saves, approval records, refreezes, hooks, tool plans: work on this machine
//! that completes before the client's next line), then the timeline step, then remote answers
//! (provider items, tool results, late persistence answers, hooks scripted with a duration, in
//! scheduling order), then the timer. The run ends when nothing is due (the core is quiet),
//! after the `Exit` effect, or when the step cap is hit (a violation).
//!
//! Defaults when a queue is dry: a model request gets one `Text "ok"` reply that completes; a
//! planned tool call gets [`ToolScript::default`]; a hook passes; persistence and mode saves
//! succeed; a refreeze answers with the initial freeze.
//!
//! Effects answered: `SendRequest` (stream items, or `RequestFailed`), `CancelRequest` (drops
//! the request's pending answers, as a shell that aborted the socket would), `PlanTool`,
//! `RunTool` (a `task` call's scripted child requests come as `TaskApproval`s first),
//! `CancelTool` (the pending `ToolDone` comes at once as a killed outcome), `AnswerTask`
//! (taken by the child; no answer), `RunHook`,
//! `Persist`, `SaveMode`, `ApproveSource`, `Refreeze`, `Exit` (ends the run).
//!
//! Client steps after an `eof` step are dropped: stdin is closed, no line can arrive.
//!
//! Invariant: nothing here reads a clock, a random source or the environment; maps are BTree
//! maps. The same scenario gives the same [`Run`], byte for byte.

use std::collections::{BTreeMap, BTreeSet};

use openmax_core::conversation::Role;
use openmax_core::machine::{Effect, HookEvent, Input, Output, TimerReason};
use openmax_core::provider::{ProviderItem, RequestId};
use openmax_core::record::Record;
use openmax_core::tool::ToolOutcome;
use openmax_core::wire::{Event, Hello};
use openmax_core::{Core, Millis};

pub use crate::replies::reply_inputs;
use crate::scenario::{Action, Scenario, ToolScript};
use crate::script::{Reply, StreamEnd, StreamItem};
pub use crate::trace::{describe_effect, describe_input, Fed, FedInput, RecordLine, Run, Sent};

/// The version the simulated `hello` reports.
pub const SIM_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Run a scenario to quiet, exit, or the step cap.
pub fn run(sc: &Scenario) -> Run {
    Driver::new(sc).run()
}

/// What a scheduled answer belongs to, so a cancel can drop it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    Request(RequestId),
    Tool(String),
    /// Local work (disk, hooks, plans): answered before the client's next line.
    Local,
    /// A session append answered late (`persist_delay_ms`), among the remote answers.
    Disk,
    /// A hook process that runs a while (`HookScript::delay_ms`), among the remote answers.
    /// Nothing cancels it: the shell kills hook processes only at exit, so its answer comes
    /// even after the turn that started it has ended.
    Hook,
}

#[derive(Debug)]
struct Pending {
    owner: Owner,
    input: Input,
}

struct Driver<'a> {
    sc: &'a Scenario,
    core: Option<Core>,
    now: Millis,
    steps: Vec<crate::scenario::Step>,
    next_step: usize,
    /// Remote answers due, keyed by (time, sequence).
    scheduled: BTreeMap<(u64, u64), Pending>,
    /// Local answers due, keyed by (time, sequence).
    local: BTreeMap<(u64, u64), Pending>,
    seq: u64,
    replies: std::collections::VecDeque<(Option<usize>, Reply)>,
    tools: std::collections::VecDeque<ToolScript>,
    hooks: std::collections::VecDeque<crate::scenario::HookScript>,
    refreezes: std::collections::VecDeque<openmax_core::machine::Freeze>,
    persist_failures: BTreeSet<u64>,
    mode_failures: BTreeSet<u64>,
    record_failures: BTreeSet<u64>,
    record_count: u64,
    persist_count: u64,
    mode_count: u64,
    /// Scripts bound to planned calls.
    bound: BTreeMap<String, ToolScript>,
    /// Call ids each (request, attempt) delivered so far.
    calls_of: BTreeMap<(RequestId, u32), Vec<String>>,
    /// Approvals requested and not yet settled, oldest first; and those settled.
    open_approvals: Vec<String>,
    settled_approvals: Vec<String>,
    last_timer_fired: Option<(Millis, TimerReason)>,
    /// stdin reached end of input: later client steps are dropped.
    eof_fed: bool,
    /// The latest attempt sent of each request, and the requests cancelled.
    latest: BTreeMap<RequestId, u32>,
    cancelled: BTreeSet<RequestId>,
    run: Run,
}

impl<'a> Driver<'a> {
    fn new(sc: &'a Scenario) -> Driver<'a> {
        let hello = Hello::new(
            &sc.config.session_id,
            SIM_VERSION,
            &sc.config.project,
            false,
        )
        .to_json();
        let mut run = Run {
            session_id: sc.config.session_id.clone(),
            hello,
            trace: Vec::new(),
            exit_code: None,
            violations: Vec::new(),
            sends: Vec::new(),
            completed_calls: BTreeSet::new(),
            streamed_calls: BTreeSet::new(),
            final_timeout: None,
            went_quiet: false,
            in_turn_after_done: Vec::new(),
            non_interactive: sc.config.non_interactive,
        };
        let core = match sc.core_config() {
            Ok(cfg) => Some(Core::new(cfg)),
            Err(e) => {
                run.violations.push(format!("bad scenario config: {e}"));
                None
            }
        };
        Driver {
            sc,
            core,
            now: Millis::ZERO,
            steps: sc.timeline(),
            next_step: 0,
            scheduled: BTreeMap::new(),
            local: BTreeMap::new(),
            seq: 0,
            replies: sc
                .replies
                .iter()
                .cloned()
                .enumerate()
                .map(|(i, r)| (Some(i), r))
                .collect(),
            tools: sc.tools.iter().cloned().collect(),
            hooks: sc.hooks.iter().cloned().collect(),
            refreezes: sc.refreezes.iter().cloned().collect(),
            persist_failures: sc.persist_failures.iter().copied().collect(),
            mode_failures: sc.mode_save_failures.iter().copied().collect(),
            record_failures: sc.approval_record_failures.iter().copied().collect(),
            record_count: 0,
            persist_count: 0,
            mode_count: 0,
            bound: BTreeMap::new(),
            calls_of: BTreeMap::new(),
            open_approvals: Vec::new(),
            settled_approvals: Vec::new(),
            last_timer_fired: None,
            eof_fed: false,
            latest: BTreeMap::new(),
            cancelled: BTreeSet::new(),
            run,
        }
    }

    fn run(mut self) -> Run {
        if self.core.is_none() {
            return self.run;
        }
        loop {
            if self.run.exit_code.is_some() {
                break;
            }
            if self.run.trace.len() as u64 >= self.sc.config.step_cap {
                self.run.violations.push(format!(
                    "step cap: {} inputs fed and the scenario never went quiet",
                    self.sc.config.step_cap
                ));
                break;
            }
            let step_t = self.steps.get(self.next_step).map(|s| s.at.max(self.now.0));
            let sched_t = self
                .scheduled
                .keys()
                .next()
                .map(|(t, _)| (*t).max(self.now.0));
            let local_t = self.local.keys().next().map(|(t, _)| (*t).max(self.now.0));
            let timer = self.core().poll_timeout();
            let timer_t = timer.map(|(t, _)| t.0.max(self.now.0));
            // Earliest wins; ties: local answer, step, remote answer, timer.
            let mut best: Option<(u64, u8)> = None;
            for (t, rank) in [(local_t, 3u8), (step_t, 0), (sched_t, 1), (timer_t, 2)] {
                if let Some(t) = t {
                    if best.is_none_or(|(bt, _)| t < bt) {
                        best = Some((t, rank));
                    }
                }
            }
            let Some((t, rank)) = best else {
                self.run.went_quiet = true;
                break;
            };
            self.now = Millis(t);
            match rank {
                0 => {
                    let step = self.steps[self.next_step].clone();
                    self.next_step += 1;
                    self.do_step(&step.action);
                }
                3 => {
                    // The key exists: it was just read from the same map.
                    let key = *self.local.keys().next().expect("local answer exists");
                    let p = self.local.remove(&key).expect("local answer exists");
                    self.feed(FedInput::Core(p.input));
                }
                1 => {
                    // The key exists: it was just read from the same map.
                    let key = *self
                        .scheduled
                        .keys()
                        .next()
                        .expect("scheduled answer exists");
                    let p = self
                        .scheduled
                        .remove(&key)
                        .expect("scheduled answer exists");
                    self.feed(FedInput::Core(p.input));
                }
                _ => {
                    // rank 2 is only chosen when poll_timeout returned Some.
                    let (deadline, reason) = timer.expect("timer exists");
                    if self.last_timer_fired == Some((deadline, reason)) {
                        self.run.violations.push(format!(
                            "busy loop: timer {reason:?} due at {} fired again without moving",
                            deadline.0
                        ));
                        break;
                    }
                    match timer_input(reason) {
                        Some(input) => {
                            self.last_timer_fired = Some((deadline, reason));
                            self.feed_as(FedInput::Timer { deadline, reason }, input);
                            // A Timeout at `now` consumes every deadline at or before it.
                            let now = self.now;
                            if let Some((next, why)) = self.core().poll_timeout() {
                                if next <= now {
                                    self.run.violations.push(format!(
                                        "after a Timeout at {}, poll_timeout still says {why:?} at {} (it must move forward)",
                                        now.0, next.0
                                    ));
                                    break;
                                }
                            }
                        }
                        None => {
                            self.run.went_quiet = true;
                            break;
                        }
                    }
                }
            }
        }
        self.run.final_timeout = self.core.as_ref().and_then(|c| c.poll_timeout());
        self.run
    }

    fn core(&mut self) -> &mut Core {
        // `run` returns before the loop when the config did not build a core.
        self.core.as_mut().expect("core was built")
    }

    fn do_step(&mut self, action: &Action) {
        // After end of input no client line can arrive (stdin is closed).
        let client = !matches!(action, Action::Crash { .. } | Action::Heal);
        if self.eof_fed && client {
            return;
        }
        if matches!(action, Action::Eof) {
            self.eof_fed = true;
        }
        let line = match action {
            Action::ApprovePending { approved } => {
                let id = self
                    .open_approvals
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "ap-none".to_string());
                Some(
                    serde_json::json!({"cmd": "approve", "approval_id": id, "approved": approved})
                        .to_string(),
                )
            }
            Action::ApproveSettled => {
                let id = self
                    .settled_approvals
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "ap-never-issued".to_string());
                Some(
                    serde_json::json!({"cmd": "approve", "approval_id": id, "approved": true})
                        .to_string(),
                )
            }
            other => other.fixed_line(),
        };
        if let Some(line) = line {
            self.feed(FedInput::Core(Input::Line(line)));
            return;
        }
        match action {
            Action::Framing { fault } => self.feed(FedInput::Core(Input::Framing(fault.clone()))),
            Action::Eof => self.feed(FedInput::Core(Input::EndOfInput)),
            Action::Compact => self.feed(FedInput::Core(Input::Compact)),
            Action::Crash { message } => self.feed(FedInput::Core(Input::Crashed {
                message: message.clone(),
            })),
            Action::Heal => {
                self.replies.clear();
                self.tools.clear();
                self.hooks.clear();
                self.persist_failures.clear();
                self.mode_failures.clear();
                self.record_failures.clear();
            }
            Action::User { .. }
            | Action::Approve { .. }
            | Action::ApprovePending { .. }
            | Action::ApproveSettled
            | Action::ApprovalMode { .. }
            | Action::Reload
            | Action::Cancel
            | Action::Quit
            | Action::Cmd { .. }
            | Action::Line { .. } => {}
        }
    }

    fn feed(&mut self, fed: FedInput) {
        match fed {
            FedInput::Core(input) => self.feed_as(FedInput::Core(input.clone()), input),
            FedInput::Timer { .. } => {}
        }
    }

    fn feed_as(&mut self, fed: FedInput, input: Input) {
        if !matches!(fed, FedInput::Timer { .. }) {
            self.last_timer_fired = None;
        }
        if let Input::Provider {
            request,
            attempt,
            item,
        } = &input
        {
            match item {
                ProviderItem::ToolCallStart { id, .. } => {
                    self.calls_of
                        .entry((*request, *attempt))
                        .or_default()
                        .push(id.clone());
                    self.run.streamed_calls.insert(id.clone());
                }
                ProviderItem::Completed { .. } if self.is_live(*request, *attempt) => {
                    if let Some(ids) = self.calls_of.get(&(*request, *attempt)) {
                        self.run.completed_calls.extend(ids.iter().cloned());
                    }
                }
                ProviderItem::Completed { .. }
                | ProviderItem::Opened
                | ProviderItem::TextDelta { .. }
                | ProviderItem::ThinkingDelta { .. }
                | ProviderItem::ThinkingSignature { .. }
                | ProviderItem::ToolCallArgs { .. }
                | ProviderItem::Usage { .. }
                | ProviderItem::EndedWithoutCompletion { .. }
                | ProviderItem::Failed { .. } => {}
            }
        }
        let now = self.now;
        self.core().handle(now, input);
        let mut outputs = Vec::new();
        while let Some(out) = self.core().poll() {
            outputs.push(out.clone());
            match out {
                Output::Event(e) => self.note_event(&e),
                Output::Effect(e) => self.answer(e),
            }
        }
        if self.turn_left_running(&outputs) {
            self.run.in_turn_after_done.push(self.run.trace.len());
        }
        self.run.trace.push(Fed {
            at: now,
            input: fed,
            outputs,
        });
    }

    /// After a drain that emitted a `done`, the core must report no turn in flight, unless a
    /// `user` held behind a `SaveMode` or `Refreeze` answer started a new turn after that
    /// `done` (its prompt record, prompt hook or first request went out in the same drain).
    fn turn_left_running(&mut self, outputs: &[Output]) -> bool {
        let Some(last_done) = outputs
            .iter()
            .rposition(|o| matches!(o, Output::Event(Event::Done { .. })))
        else {
            return false;
        };
        let new_turn = outputs[last_done..].iter().any(|o| {
            matches!(
                o,
                Output::Effect(Effect::SendRequest { attempt: 1, .. })
                    | Output::Effect(Effect::RunHook {
                        event: HookEvent::UserPromptSubmit,
                        ..
                    })
            ) || matches!(o, Output::Effect(Effect::Persist { records, .. })
                if records.iter().any(|r| matches!(r,
                    Record::Message { message } if message.role == Role::User)))
        });
        self.core().in_turn() && !new_turn
    }

    /// Whether an attempt is the latest of its request and the request was not cancelled.
    fn is_live(&self, request: RequestId, attempt: u32) -> bool {
        !self.cancelled.contains(&request) && self.latest.get(&request) == Some(&attempt)
    }

    fn note_event(&mut self, e: &Event) {
        match e {
            Event::ApprovalRequest { approval_id, .. } => {
                self.open_approvals.push(approval_id.clone())
            }
            Event::ApprovalSettled { approval_id, .. } => {
                self.open_approvals.retain(|a| a != approval_id);
                self.settled_approvals.push(approval_id.clone());
            }
            _ => {}
        }
    }

    fn schedule(&mut self, delay: u64, owner: Owner, input: Input) {
        let at = self.now.plus(delay).0;
        self.seq += 1;
        let map = if owner == Owner::Local {
            &mut self.local
        } else {
            &mut self.scheduled
        };
        map.insert((at, self.seq), Pending { owner, input });
    }

    fn answer(&mut self, effect: Effect) {
        match effect {
            Effect::SendRequest {
                request, attempt, ..
            } => {
                self.latest.insert(request, attempt);
                self.cancelled.remove(&request);
                let (index, script) = self.replies.pop_front().unwrap_or_else(|| {
                    (
                        None,
                        Reply::Stream {
                            items: vec![StreamItem::Text { text: "ok".into() }],
                            end: StreamEnd::Complete { finish: None },
                            delay_ms: 0,
                        },
                    )
                });
                self.run.sends.push(Sent {
                    at: self.now,
                    request,
                    attempt,
                    reply: index,
                    script: script.clone(),
                });
                for (delay, input) in reply_inputs(&script, self.sc.config.flavor, request, attempt)
                {
                    self.schedule(delay, Owner::Request(request), input);
                }
            }
            // The child takes the answer; nothing comes back.
            Effect::AnswerTask { .. } => {}
            Effect::CancelRequest { request } if !self.sc.config.deliver_after_cancel => {
                self.cancelled.insert(request);
                self.scheduled
                    .retain(|_, p| p.owner != Owner::Request(request));
            }
            Effect::PlanTool {
                call_id,
                name,
                args,
            } => {
                let script = self.tools.pop_front().unwrap_or_default();
                let plan = Box::new(self.sc.plan_for(&name, &args, &script));
                self.bound.insert(call_id.clone(), script);
                self.schedule(0, Owner::Local, Input::ToolPlanned { call_id, plan });
            }
            Effect::RunTool { call_id, .. } => {
                let script = self.bound.get(&call_id).cloned().unwrap_or_default();
                // The child's requests come before its answer (at the same instant too).
                for (k, ask) in script.asks.iter().enumerate() {
                    let request = Box::new(ask.request(&call_id, k));
                    self.schedule(
                        ask.after_ms,
                        Owner::Tool(call_id.clone()),
                        Input::TaskApproval {
                            call_id: call_id.clone(),
                            request,
                        },
                    );
                }
                let outcome = ToolOutcome {
                    ok: script.ok,
                    output: script.output.clone(),
                    diffs: script.diffs.clone(),
                    images: Vec::new(),
                };
                self.schedule(
                    script.delay_ms,
                    Owner::Tool(call_id.clone()),
                    Input::ToolDone { call_id, outcome },
                );
            }
            Effect::CancelTool { call_id } => {
                let before = self.scheduled.len();
                self.scheduled.retain(|_, p| {
                    !(p.owner == Owner::Tool(call_id.clone())
                        && matches!(p.input, Input::ToolDone { .. }))
                });
                if self.scheduled.len() != before {
                    let outcome = ToolOutcome {
                        ok: false,
                        output: "killed".into(),
                        diffs: Vec::new(),
                        images: Vec::new(),
                    };
                    self.schedule(
                        0,
                        Owner::Tool(call_id.clone()),
                        Input::ToolDone { call_id, outcome },
                    );
                }
            }
            Effect::RunHook { hook_run, .. } => {
                let script = self
                    .hooks
                    .pop_front()
                    .unwrap_or_else(|| openmax_core::machine::HookOutcome::Pass.into());
                let input = Input::HookDone {
                    hook_run,
                    outcome: script.outcome,
                };
                match script.delay_ms {
                    0 => self.schedule(0, Owner::Local, input),
                    ms => self.schedule(ms, Owner::Hook, input),
                }
            }
            Effect::Persist { ticket, .. } => {
                let n = self.persist_count;
                self.persist_count += 1;
                let input = if self.persist_failures.contains(&n) {
                    Input::PersistFailed {
                        ticket,
                        message: "disk full (scripted)".into(),
                    }
                } else {
                    Input::Persisted { ticket }
                };
                match self.sc.persist_delay_ms {
                    0 => self.schedule(0, Owner::Local, input),
                    ms => self.schedule(ms, Owner::Disk, input),
                }
            }
            Effect::SaveMode { mode } => {
                let n = self.mode_count;
                self.mode_count += 1;
                let input = if self.mode_failures.contains(&n) {
                    Input::ModeSaveFailed {
                        mode,
                        message: "read-only file system (scripted)".into(),
                    }
                } else {
                    Input::ModeSaved { mode }
                };
                self.schedule(0, Owner::Local, input);
            }
            Effect::Refreeze => {
                let snapshot = self
                    .refreezes
                    .pop_front()
                    .unwrap_or_else(|| self.sc.freeze());
                self.schedule(
                    0,
                    Owner::Local,
                    Input::Frozen {
                        snapshot: Box::new(snapshot),
                    },
                );
            }
            Effect::CancelRequest { request } => {
                self.cancelled.insert(request);
            }
            Effect::ApproveSource { approval_id, .. } => {
                let n = self.record_count;
                self.record_count += 1;
                let input = if self.record_failures.contains(&n) {
                    Input::SourceApprovalFailed {
                        approval_id,
                        message: "permission denied (scripted)".into(),
                    }
                } else {
                    Input::SourceApproved { approval_id }
                };
                self.schedule(0, Owner::Local, input);
            }
            Effect::Checkpoint { turn, moment, .. } => {
                self.schedule(
                    0,
                    Owner::Local,
                    Input::Checkpointed {
                        turn,
                        moment,
                        id: Some(format!("cp-{turn}-{moment:?}")),
                        note: None,
                    },
                );
            }
            Effect::Exit { code } => {
                self.run.exit_code = Some(code);
            }
        }
    }
}

/// The input that tells the core a timer fired (`Timeout`, fed with `now` at the deadline).
fn timer_input(_reason: TimerReason) -> Option<Input> {
    Some(Input::Timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_persistence_answers_come_after_what_is_due_first() {
        let mut sc = Scenario::default();
        sc.steps.push(crate::scenario::Step {
            at: 0,
            action: Action::User { text: "hi".into() },
        });
        let acks = |sc: &Scenario| -> Vec<(u64, usize)> {
            let r = run(sc);
            assert!(r.violations.is_empty(), "{:?}", r.violations);
            assert!(r.wire().iter().any(|l| l.contains("\"end_turn\"")));
            r.trace
                .iter()
                .enumerate()
                .filter(|(_, f)| matches!(f.input, FedInput::Core(Input::Persisted { .. })))
                .map(|(i, f)| (f.at.0, i))
                .collect()
        };
        let at_once = acks(&sc);
        sc.persist_delay_ms = 40;
        let late = acks(&sc);
        assert_eq!(at_once.len(), late.len());
        // At once, the user message's ack is fed right after the line; late, the provider's
        // reply is fed first and the ack comes 40 ms on.
        assert_eq!(at_once[0], (0, 1));
        assert_eq!(late[0].0, 40);
        assert!(late[0].1 > 2, "{late:?}");
    }
}
