//! The tool round: for each call of a completed reply, in order: the blocking `tool_start`
//! hooks (`tool_hooks`), `tool_start`, plan, policy, approval, run, `diff`s, persist the
//! result, then `tool_end`; after the last call the next model request (or `max_iterations`).
//! A call's run need not end before the next call starts when both are `task` calls
//! (`tasks.rs`: such runs go side by side, up to `[tasks] max_parallel`); every other call
//! waits for the runs before it and holds up the calls after it.
//!
//! Invariants: every `tool_start` is followed by exactly one `tool_end` of the same call before
//! the turn's `done`; every approval issued settles exactly once; `tool_end` of a call that ran
//! goes out only after its result is on disk; a cancel cancels every run that is out, and the
//! turn ends only once each of them ended.

use crate::conversation::{Block, Message, Role};
use crate::record::Record;
use crate::tool::{PlanSandbox, RunSandbox, SourceGate, ToolOutcome, ToolPlan};
use crate::wire::{ApprovalOutcome, ApprovalReason, Event, StopReason};

use super::approval::{self, Verdict};
use super::gate::SourceRecord;
use super::phase::{AfterPersist, Phase};
use super::turn::{Run, RunState};
use super::{Core, Effect, HookEvent, TaskLimits};

impl Core {
    pub(super) fn call_id(&self, call: usize) -> String {
        self.turn
            .round
            .get(call)
            .map(|c| c.id.clone())
            .unwrap_or_default()
    }

    pub(super) fn call_name(&self, call: usize) -> String {
        self.turn
            .round
            .get(call)
            .map(|c| c.name.clone())
            .unwrap_or_default()
    }

    /// The round's next step, once the call being started is settled: start the next call
    /// when the runs out allow it (after its blocking `tool_start` hooks), else wait for them;
    /// when none is left and no run is out, finish the round, or end the turn when it is
    /// ending.
    pub(super) fn next_call(&mut self) {
        if let Some(stop) = self.turn.ending.clone() {
            if self.turn.runs.is_empty() {
                return self.end_turn(stop);
            }
            self.phase = Phase::RunningTools;
            return;
        }
        let i = self.turn.next_call;
        let Some(call) = self.turn.round.get(i).cloned() else {
            if self.turn.runs.is_empty() {
                return self.round_complete();
            }
            self.phase = Phase::RunningTools;
            return;
        };
        let all_beside = self.turn.runs.values().all(|r| r.beside);
        if !self
            .config
            .tasks
            .may_start(&call.name, self.turn.runs.len(), all_beside)
        {
            self.phase = Phase::RunningTools;
            return;
        }
        self.turn.next_call = i + 1;
        match call.args {
            Err(message) => {
                self.announce_call(i, &serde_json::Map::new());
                self.finish_call(i, false, message, None);
            }
            Ok(args) => self.gate_call(i, args),
        }
    }

    /// `tool_start` for call `call` with the arguments it runs with, and the observing
    /// `tool_start` hooks.
    pub(super) fn announce_call(
        &mut self,
        call: usize,
        args: &serde_json::Map<String, serde_json::Value>,
    ) {
        let (id, name) = (self.call_id(call), self.call_name(call));
        self.ev(Event::ToolStart {
            call_id: id.clone(),
            name: name.clone(),
            args: args.clone(),
        });
        let args = serde_json::Value::Object(args.clone());
        self.fire_observe(
            HookEvent::ToolStart,
            Some(&name),
            serde_json::json!({"call_id": id, "name": name, "args": args}),
        );
    }

    /// The call passed its hooks: `tool_start`, then the shell inspects it.
    pub(super) fn start_call(
        &mut self,
        call: usize,
        args: serde_json::Map<String, serde_json::Value>,
    ) {
        self.announce_call(call, &args);
        self.eff(Effect::PlanTool {
            call_id: self.call_id(call),
            name: self.call_name(call),
            args: serde_json::Value::Object(args),
        });
        self.phase = Phase::Planning { call };
    }

    fn round_complete(&mut self) {
        self.turn.rounds += 1;
        self.turn.round.clear();
        self.turn.next_call = 0;
        if self.turn.rounds >= self.config.limits.max_iterations {
            self.end_turn(StopReason::MaxIterations);
        } else {
            self.start_request();
        }
    }

    /// The phase's call index when it is `phase_call` naming `call_id`.
    fn current_call_is(&self, call: usize, call_id: &str) -> bool {
        self.turn.round.get(call).is_some_and(|c| c.id == call_id)
    }

    /// The run out for `call_id` that is still running, and whether it is being cancelled.
    pub(super) fn running_call(&self, call_id: &str) -> Option<(usize, bool)> {
        self.turn
            .runs
            .iter()
            .find_map(|(call, run)| match run.state {
                RunState::Running { cancelling } if self.current_call_is(*call, call_id) => {
                    Some((*call, cancelling))
                }
                RunState::Running { .. } | RunState::Persisting { .. } => None,
            })
    }

    /// Cancel every run still running (each once): a `CancelTool` for each; their answers
    /// end them.
    pub(super) fn cancel_runs(&mut self) {
        // Their children are cancelled: what they asked for settles `cancelled` here (and
        // there, by their own cancel).
        self.settle_forwarded(None, ApprovalOutcome::Cancelled, false);
        let mut ids = Vec::new();
        for (call, run) in self.turn.runs.iter_mut() {
            if let RunState::Running { cancelling } = &mut run.state {
                if !*cancelling {
                    *cancelling = true;
                    ids.push(*call);
                }
            }
        }
        for call in ids {
            let call_id = self.call_id(call);
            self.eff(Effect::CancelTool { call_id });
        }
    }

    /// Whether a run's result is being persisted (its `tool_end` waits on the ack).
    pub(super) fn run_persisting(&self) -> bool {
        self.turn
            .runs
            .values()
            .any(|r| matches!(r.state, RunState::Persisting { .. }))
    }

    pub(super) fn on_tool_planned(&mut self, call_id: &str, plan: Box<ToolPlan>) {
        let Some(call) = self
            .phase
            .planning()
            .filter(|c| self.current_call_is(*c, call_id))
        else {
            return;
        };
        let name = self.call_name(call);
        if let Some(c) = self.turn.round.get_mut(call) {
            c.writes = super::checkpoint::plan_writes(&plan);
        }
        if plan.invalid.is_none() {
            if let Some((output, note)) =
                super::tasks::outside_agent(&self.config.only_tools, &name)
                    .or_else(|| self.config.tasks.refusal(&name))
            {
                return self.finish_call(call, false, output, Some(note));
            }
        }
        let human = !self.config.non_interactive && !self.config.agent_spawned;
        match approval::decide(
            self.config.mode,
            &self.config.permissions,
            human,
            &self.confirmed,
            &name,
            &plan,
        ) {
            Verdict::Refuse { output, note } => self.finish_call(call, false, output, note),
            Verdict::Run(sandbox) => self.run_tool(call, sandbox),
            Verdict::Ask {
                reason,
                source,
                sandbox,
            } => self.request_approval(call, &name, *plan, reason, source, sandbox),
        }
    }

    fn request_approval(
        &mut self,
        call: usize,
        name: &str,
        plan: ToolPlan,
        reason: ApprovalReason,
        source: Option<SourceGate>,
        sandbox: RunSandbox,
    ) {
        let (summary, mut detail) = match &plan.sandbox {
            PlanSandbox::Escalate { justification } => {
                approval::escalation_card(&plan, justification)
            }
            PlanSandbox::Session | PlanSandbox::ReadOnlyCapable => (plan.summary, plan.detail),
        };
        if let Some(rewrite) = self.turn.round.get(call).and_then(|c| c.rewrite.clone()) {
            detail = format!("{rewrite}\n\n{detail}");
        }
        let confirm = plan.confirm.clone();
        let approval_id = format!("a{}", self.next_approval);
        self.next_approval += 1;
        self.approvals.insert(approval_id.clone(), false);
        let (source_path, source_sha, env) = match &source {
            Some(g) => (g.source_path.clone(), g.source_sha.clone(), g.env.clone()),
            None => (String::new(), String::new(), Vec::new()),
        };
        self.ev(Event::ApprovalRequest {
            approval_id: approval_id.clone(),
            name: name.to_string(),
            summary,
            detail,
            reason,
            source_path,
            source_sha,
            env,
        });
        let quitting = self.lifecycle.quitting();
        if self.config.non_interactive || quitting {
            self.settle(&approval_id, ApprovalOutcome::Declined);
            let why = if quitting {
                "declined: the session is shutting down, so the call was not run"
            } else {
                "declined: no human can answer approvals in this non-interactive run, so the call was not run"
            };
            self.finish_call(call, false, why.to_string(), None);
            return;
        }
        let deadline = match self.config.limits.approval_timeout_ms {
            0 => None,
            ms => Some(self.deadline(ms)),
        };
        self.phase = Phase::Approving {
            call,
            approval_id,
            deadline,
            source,
            sandbox,
            recording: false,
            confirm,
        };
    }

    /// Mark an approval settled and say so on the wire.
    pub(super) fn settle(&mut self, approval_id: &str, outcome: ApprovalOutcome) {
        self.approvals.insert(approval_id.to_string(), true);
        self.ev(Event::ApprovalSettled {
            approval_id: approval_id.to_string(),
            outcome,
        });
    }

    /// The `approve` command.
    pub(super) fn on_approve(&mut self, approval_id: &str, approved: bool) {
        match self.approvals.get(approval_id) {
            None => {
                return self.protocol_error(format!(
                    "approve: no approval with id {approval_id:?} was issued"
                ))
            }
            Some(true) => {
                return self.protocol_error(format!(
                    "approve: approval {approval_id:?} has already settled"
                ))
            }
            Some(false) => {}
        }
        if self.approve_forwarded(approval_id, approved) {
            return;
        }
        let Some((call, source, sandbox, confirm)) = self.phase.take_pending_approval(approval_id)
        else {
            // An unsettled id is always the current approval; say so rather than panic.
            return self
                .protocol_error(format!("approve: approval {approval_id:?} is not pending"));
        };
        if approved {
            if let Some(key) = confirm {
                self.confirmed.insert(key);
            }
            match source {
                // External code: its bytes' approval is recorded first; `approval_settled`
                // and the run follow the answer.
                Some(g) => self.record_source_approval(call, approval_id, g, sandbox),
                None => {
                    self.settle(approval_id, ApprovalOutcome::Approved);
                    self.run_tool(call, sandbox);
                }
            }
        } else {
            self.settle(approval_id, ApprovalOutcome::Declined);
            self.finish_call(
                call,
                false,
                "declined: the human did not approve this call, so it was not run".to_string(),
                None,
            );
        }
    }

    fn record_source_approval(
        &mut self,
        call: usize,
        approval_id: &str,
        g: SourceGate,
        sandbox: RunSandbox,
    ) {
        self.eff(Effect::ApproveSource {
            approval_id: approval_id.to_string(),
            source_path: g.source_path.clone(),
            source_sha: g.source_sha.clone(),
        });
        self.gate.recording = Some(SourceRecord {
            approval_id: approval_id.to_string(),
            source_path: g.source_path.clone(),
            source_sha: g.source_sha.clone(),
        });
        self.phase = Phase::Approving {
            call,
            approval_id: approval_id.to_string(),
            deadline: None,
            source: Some(g),
            sandbox,
            recording: true,
            confirm: None,
        };
    }

    /// The answer to `ApproveSource`: a failed write is said on the wire (the approval then
    /// covers this call only); either way the approval settles `approved` and the call runs,
    /// unless the turn ended meanwhile.
    pub(super) fn on_source_recorded(&mut self, approval_id: &str, failure: Option<String>) {
        let Some(record) = self
            .gate
            .recording
            .take_if(|r| r.approval_id == approval_id)
        else {
            return;
        };
        let taken = self.phase.take_recording(approval_id);
        if let Some(message) = failure {
            let then = if taken.is_some() {
                "; the call runs, and the next call of these bytes will ask again"
            } else {
                ""
            };
            self.protocol_error(format!(
                "approve: the approval of {} (sha {}) could not be recorded: {message}{then}",
                record.source_path, record.source_sha
            ));
        }
        if let Some((call, sandbox)) = taken {
            self.settle(approval_id, ApprovalOutcome::Approved);
            self.run_tool(call, sandbox);
        }
    }

    fn run_tool(&mut self, call: usize, sandbox: RunSandbox) {
        let Some(c) = self.turn.round.get(call).cloned() else {
            return;
        };
        self.before_call(c.writes, sandbox);
        let beside = TaskLimits::runs_beside(&c.name);
        self.eff(Effect::RunTool {
            call_id: c.id,
            name: c.name,
            args: serde_json::Value::Object(c.args.unwrap_or_default()),
            sandbox,
        });
        self.turn.runs.insert(
            call,
            Run {
                beside,
                state: RunState::Running { cancelling: false },
            },
        );
        self.next_call();
    }

    /// A run's answer, in whatever order the runs out end: `diff`s, then its result is
    /// persisted; `tool_end` follows the ack ([`Core::on_run_persisted`]).
    pub(super) fn on_tool_done(&mut self, call_id: &str, outcome: ToolOutcome) {
        let Some((call, cancelling)) = self.running_call(call_id) else {
            return;
        };
        // The child is gone: what it asked for and nobody answered settles with it.
        self.settle_forwarded(Some(call), ApprovalOutcome::Cancelled, false);
        for d in outcome.diffs {
            self.ev(Event::Diff {
                call_id: call_id.to_string(),
                path: d.path,
                diff: d.diff,
                added: d.added,
                removed: d.removed,
            });
        }
        let (ok, output, images) = if cancelling {
            let mut output = format!("cancelled: {} while this call ran", self.cancel_cause());
            if !outcome.output.is_empty() {
                output.push_str("; output so far:\n");
                output.push_str(&outcome.output);
            }
            (false, output, Vec::new())
        } else {
            (outcome.ok, outcome.output, outcome.images)
        };
        let (record, note) = self.result_record(call, ok, &output, None, images);
        let ticket = self.persist(vec![record]);
        if let Some(run) = self.turn.runs.get_mut(&call) {
            run.state = RunState::Persisting {
                ticket,
                ok,
                output,
                note,
            };
        }
    }

    /// The ack of `ticket`, when it holds a run's result: `tool_end` (and its note), then,
    /// when the round was waiting on its runs, its next step. Returns whether it was one.
    pub(super) fn on_run_persisted(&mut self, ticket: u64) -> bool {
        let Some(call) = self
            .turn
            .runs
            .iter()
            .find_map(|(call, run)| match run.state {
                RunState::Persisting { ticket: t, .. } if t == ticket => Some(*call),
                RunState::Persisting { .. } | RunState::Running { .. } => None,
            })
        else {
            return false;
        };
        let Some(Run {
            state: RunState::Persisting {
                ok, output, note, ..
            },
            ..
        }) = self.turn.runs.remove(&call)
        else {
            return false;
        };
        self.end_call(call, ok, output, note);
        match self.phase {
            Phase::RunningTools => self.next_call(),
            // Another call is being started: the round goes on from there.
            Phase::Idle
            | Phase::Hooks { .. }
            | Phase::Streaming(_)
            | Phase::Backoff { .. }
            | Phase::Persisting { .. }
            | Phase::Planning { .. }
            | Phase::Approving { .. } => {}
        }
        true
    }

    /// Whether `ticket` holds a run's result.
    pub(super) fn is_run_ticket(&self, ticket: u64) -> bool {
        self.turn
            .runs
            .values()
            .any(|r| matches!(r.state, RunState::Persisting { ticket: t, .. } if t == ticket))
    }

    /// Put the result of the call being started (and a harness note riding it) into the
    /// conversation and persist it; `tool_end` follows the ack.
    pub(super) fn finish_call(
        &mut self,
        call: usize,
        ok: bool,
        output: String,
        note: Option<String>,
    ) {
        let (record, note) = self.result_record(call, ok, &output, note, Vec::new());
        self.persist_then(
            vec![record],
            AfterPersist::Result {
                call,
                ok,
                output,
                note,
            },
        );
    }

    /// Mark the call resolved and put its result into the conversation (with the images it
    /// produced and the note riding it, a hook's rewrite said first); returns the record
    /// holding it and the note.
    fn result_record(
        &mut self,
        call: usize,
        ok: bool,
        output: &str,
        note: Option<String>,
        images: Vec<crate::conversation::Image>,
    ) -> (Record, Option<String>) {
        let id = self.call_id(call);
        let note = match (self.rewrite_note(call), note) {
            (Some(r), Some(n)) => Some(format!("{r} {n}")),
            (r, n) => r.or(n),
        };
        if let Some(c) = self.turn.round.get_mut(call) {
            c.resolved = true;
        }
        let mut content = vec![Block::ToolResult {
            id,
            ok,
            output: output.to_string(),
        }];
        content.extend(images.into_iter().map(Block::Image));
        if let Some(n) = &note {
            content.push(Block::note(n));
        }
        let record = self.push_message(Message {
            role: Role::User,
            content,
        });
        (record, note)
    }

    /// The result of the call being started is on disk: `tool_end` (and its note), then the
    /// round's next step.
    pub(super) fn after_result(
        &mut self,
        call: usize,
        ok: bool,
        output: String,
        note: Option<String>,
    ) {
        self.end_call(call, ok, output, note);
        self.next_call();
    }

    /// A call's result is on disk: `tool_end`, the note riding it, the `tool_end` hooks.
    fn end_call(&mut self, call: usize, ok: bool, output: String, note: Option<String>) {
        let call_id = self.call_id(call);
        self.ev(Event::ToolEnd {
            call_id: call_id.clone(),
            ok,
            output: output.clone(),
        });
        if let Some(text) = note {
            self.ev(Event::HarnessNote {
                call_id: call_id.clone(),
                text,
            });
        }
        let name = self.call_name(call);
        self.fire_observe(
            HookEvent::ToolEnd,
            Some(&name),
            serde_json::json!({"call_id": call_id, "name": name, "ok": ok, "output": output}),
        );
    }

    /// End a call's `tool_start` at once (the turn is failing; nothing waits on disk). The
    /// conversation gets the call's result when the turn ends (`end_turn` resolves the round).
    pub(super) fn force_tool_end(&mut self, call: usize, output: &str) {
        let call_id = self.call_id(call);
        self.ev(Event::ToolEnd {
            call_id,
            ok: false,
            output: output.to_string(),
        });
    }
}
