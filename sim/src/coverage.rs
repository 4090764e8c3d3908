//! Generator coverage: which features, faults and endings one run exercised, and the tally of
//! them over many generated cases (`openmax-sim explore --coverage`). A property that never
//! sees a compaction or a ninth refusal proves nothing about it, so every name in [`WANTED`]
//! must occur in generated scenarios (the coverage test fails on a zero over 10,000 cases).
//!
//! Invariant: observing is a pure function of the scenario and its run.

use std::collections::{BTreeMap, BTreeSet};

use openmax_core::machine::{Effect, HookEvent, HookOutcome, Input, Output, TimerReason};
use openmax_core::provider::{FailureKind, ProviderItem, RequestFailure};
use openmax_core::tool::RunSandbox;
use openmax_core::wire::StopReason;
use openmax_core::wire::{ApprovalOutcome, ApprovalReason, Command, Event};

use crate::checks::{blocking, live_inputs};
use crate::scenario::Scenario;
use crate::trace::{Fed, FedInput, Run};

/// Every feature, fault and ending the generator must reach, grouped by kind.
pub const WANTED: &[&str] = &[
    // Endings.
    "done:end_turn",
    "done:length",
    "done:truncated",
    "done:error",
    "done:cancelled",
    "done:refused",
    "done:max_iterations",
    "done:budget_exhausted",
    "done:blocked",
    "done:unverified",
    "exit:1",
    // Approvals.
    "settled:approved",
    "settled:declined",
    "settled:timed_out",
    "settled:cancelled",
    "approval:unapproved_source",
    "approval:env_grant",
    // Events.
    "event:retry",
    "event:turn_refused",
    "event:hook_failed",
    "event:thinking",
    "event:diff",
    "event:usage",
    "event:protocol_error",
    "event:refrozen",
    "event:approval_mode",
    "event:schemas_over_budget",
    // Faults.
    "fault:unreachable",
    "fault:three_unreachable",
    "fault:transport",
    "fault:http_status",
    "fault:retry_after_60",
    "fault:retry_after_61",
    "fault:context_length",
    "fault:stream_error",
    "fault:failure_after_reply_text",
    "fault:ended_without_completion",
    "fault:stall",
    "fault:crash",
    "fault:framing",
    "fault:persist_failure",
    "fault:mode_save_failure",
    "fault:approval_record_failure",
    "fault:malformed_tool_args",
    "fault:cancel_in_backoff",
    "fault:retry_after_thinking",
    "fault:cancel_in_prompt_hooks",
    "fault:cancel_in_turn_end_hooks",
    "fault:quit_in_hooks",
    "fault:cancel_in_tool_hooks",
    "fault:input_during_hook",
    // Session features.
    "feature:compaction",
    "feature:hook_refusals_over_3",
    "feature:unverified_by_count",
    "feature:several_hooks",
    "feature:hook_session_start",
    "feature:hook_compacted",
    "feature:agent_spawned",
    "feature:non_interactive",
    "feature:continue_history",
    "feature:refreeze_changed",
    "feature:token_cap_reached_exactly",
    "feature:unsandboxed_run",
    "feature:read_only_run",
    "feature:tool_hook_refused",
    "feature:tool_hook_rewrite",
    "feature:runs_side_by_side",
    "feature:runs_end_out_of_order",
    "fault:cancel_with_runs_out",
    "feature:child_approval_forwarded",
    "feature:child_approval_answered",
    "fault:cancel_with_child_approvals_pending",
];

/// The names of [`WANTED`] (and only those) that this run exercised.
pub fn observe(sc: &Scenario, run: &Run) -> BTreeSet<&'static str> {
    let mut seen: BTreeSet<&'static str> = BTreeSet::new();
    let live = live_inputs(run);
    let c = &sc.config;
    if c.hooks.len() >= 2 {
        seen.insert("feature:several_hooks");
    }
    if c.agent_spawned {
        seen.insert("feature:agent_spawned");
    }
    if c.non_interactive {
        seen.insert("feature:non_interactive");
    }
    if !c.history.is_empty() {
        seen.insert("feature:continue_history");
    }
    if run.exit_code == Some(1) {
        seen.insert("exit:1");
    }
    let mut refusals = 0;
    let mut retry_pending = false;
    // The live attempt streamed thinking and no reply text yet.
    let mut thought = false;
    let mut texted = BTreeSet::new();
    let mut hooks = HookRuns::default();
    for (i, fed) in run.trace.iter().enumerate() {
        let is_live = live.contains(&i);
        hooks.observe(sc, fed, &mut seen);
        match &fed.input {
            FedInput::Core(Input::RequestFailed { failure, .. }) if is_live => match failure {
                RequestFailure::Unreachable { .. } => {
                    seen.insert("fault:unreachable");
                }
                RequestFailure::Transport { .. } => {
                    seen.insert("fault:transport");
                }
                RequestFailure::Http {
                    retry_after_s,
                    kind,
                    ..
                } => {
                    seen.insert("fault:http_status");
                    if *kind == FailureKind::ContextLength {
                        seen.insert("fault:context_length");
                    }
                    match retry_after_s {
                        Some(60) => {
                            seen.insert("fault:retry_after_60");
                        }
                        Some(61) => {
                            seen.insert("fault:retry_after_61");
                        }
                        _ => {}
                    }
                }
            },
            FedInput::Core(Input::Provider {
                request,
                attempt,
                item,
            }) if is_live => match item {
                ProviderItem::TextDelta { .. } => {
                    texted.insert((*request, *attempt));
                    thought = false;
                }
                ProviderItem::ThinkingDelta { .. } => thought = true,
                ProviderItem::Failed { .. } => {
                    seen.insert("fault:stream_error");
                    if texted.contains(&(*request, *attempt)) {
                        seen.insert("fault:failure_after_reply_text");
                    }
                }
                ProviderItem::EndedWithoutCompletion { .. } => {
                    seen.insert("fault:ended_without_completion");
                }
                _ => {}
            },
            FedInput::Timer {
                reason: TimerReason::StreamIdle,
                ..
            } => {
                seen.insert("fault:stall");
            }
            FedInput::Core(Input::Crashed { .. }) => {
                seen.insert("fault:crash");
            }
            FedInput::Core(Input::Framing(_)) => {
                seen.insert("fault:framing");
            }
            FedInput::Core(Input::PersistFailed { .. }) => {
                seen.insert("fault:persist_failure");
            }
            FedInput::Core(Input::ModeSaveFailed { .. }) => {
                seen.insert("fault:mode_save_failure");
            }
            FedInput::Core(Input::SourceApprovalFailed { .. }) => {
                seen.insert("fault:approval_record_failure");
            }
            FedInput::Core(Input::HookDone {
                outcome: HookOutcome::Refuse { .. },
                ..
            }) if !fed.outputs.is_empty() => {
                refusals += 1;
                if refusals > 3 {
                    seen.insert("feature:hook_refusals_over_3");
                }
                if fed.outputs.iter().any(|o| {
                    matches!(o, Output::Event(Event::Done { stop_reason }) if *stop_reason == StopReason::Unverified)
                }) {
                    seen.insert("feature:unverified_by_count");
                }
            }
            FedInput::Core(Input::Line(l))
                if retry_pending
                    && matches!(Command::parse_line(l), Ok(Some(Command::Cancel)))
                    && fed.outputs.iter().any(|o| {
                        matches!(o, Output::Event(Event::Done { stop_reason }) if *stop_reason == StopReason::Cancelled)
                    }) =>
            {
                seen.insert("fault:cancel_in_backoff");
            }
            _ => {}
        }
        for o in &fed.outputs {
            match o {
                Output::Event(e) => {
                    observe_event(e, &mut seen);
                    match e {
                        Event::Retry { .. } => {
                            retry_pending = true;
                            if thought {
                                seen.insert("fault:retry_after_thinking");
                            }
                        }
                        Event::Done { .. } => {
                            retry_pending = false;
                            refusals = 0;
                        }
                        Event::Error { message } if message.contains("unreachable 3 times") => {
                            seen.insert("fault:three_unreachable");
                        }
                        Event::ToolEnd { output, .. }
                            if output.starts_with("arguments are not a JSON object") =>
                        {
                            seen.insert("fault:malformed_tool_args");
                        }
                        Event::ToolEnd {
                            ok: false, output, ..
                        } if output.contains("tool_start hook") => {
                            seen.insert("feature:tool_hook_refused");
                        }
                        Event::HarnessNote { text, .. }
                            if text.starts_with("Arguments rewritten by the tool_start hook") =>
                        {
                            seen.insert("feature:tool_hook_rewrite");
                        }
                        _ => {}
                    }
                }
                Output::Effect(Effect::SendRequest { .. }) => {
                    retry_pending = false;
                    thought = false;
                }
                Output::Effect(Effect::RunHook { event, .. }) => match event {
                    HookEvent::SessionStart => {
                        seen.insert("feature:hook_session_start");
                    }
                    HookEvent::Compacted => {
                        seen.insert("feature:hook_compacted");
                    }
                    _ => {}
                },
                Output::Effect(Effect::RunTool { sandbox, .. }) => match sandbox {
                    RunSandbox::Unsandboxed => {
                        seen.insert("feature:unsandboxed_run");
                    }
                    RunSandbox::ReadOnly => {
                        seen.insert("feature:read_only_run");
                    }
                    RunSandbox::Session => {}
                },
                Output::Effect(_) => {}
            }
        }
    }
    if token_cap_reached_exactly(sc, run) {
        seen.insert("feature:token_cap_reached_exactly");
    }
    runs_side_by_side(run, &mut seen);
    child_approvals(run, &mut seen);
    seen
}

/// A child's request forwarded as an approval of this session; one answered down after the
/// client's `approve`; a drain settling two or more forwarded ones `cancelled` with the runs.
fn child_approvals(run: &Run, seen: &mut BTreeSet<&'static str>) {
    for fed in &run.trace {
        let asked = matches!(fed.input, FedInput::Core(Input::TaskApproval { .. }));
        let approve = matches!(&fed.input, FedInput::Core(Input::Line(l))
            if matches!(Command::parse_line(l), Ok(Some(Command::Approve { .. }))));
        let mut cancelled = 0;
        let mut cancels = false;
        for o in &fed.outputs {
            match o {
                Output::Event(Event::ApprovalRequest { .. }) if asked => {
                    seen.insert("feature:child_approval_forwarded");
                }
                Output::Effect(Effect::AnswerTask { .. }) if approve => {
                    seen.insert("feature:child_approval_answered");
                }
                Output::Event(Event::ApprovalSettled {
                    outcome: ApprovalOutcome::Cancelled,
                    ..
                }) => cancelled += 1,
                Output::Effect(Effect::CancelTool { .. }) => cancels = true,
                _ => {}
            }
        }
        if cancels && cancelled >= 2 {
            seen.insert("fault:cancel_with_child_approvals_pending");
        }
    }
}

/// Runs out together: a `RunTool` while another run is out; a run ending before one that
/// started earlier; a drain cancelling two runs or more.
fn runs_side_by_side(run: &Run, seen: &mut BTreeSet<&'static str>) {
    // Call ids whose run is out, in the order they started.
    let mut out: Vec<String> = Vec::new();
    for fed in &run.trace {
        let mut cancels = 0;
        for o in &fed.outputs {
            match o {
                Output::Effect(Effect::RunTool { call_id, .. }) => {
                    if !out.is_empty() {
                        seen.insert("feature:runs_side_by_side");
                    }
                    out.push(call_id.clone());
                }
                Output::Effect(Effect::CancelTool { .. }) => cancels += 1,
                Output::Event(Event::ToolEnd { call_id, .. }) => {
                    if let Some(k) = out.iter().position(|id| id == call_id) {
                        if k > 0 {
                            seen.insert("feature:runs_end_out_of_order");
                        }
                        out.remove(k);
                    }
                }
                Output::Event(Event::Done { .. }) => out.clear(),
                _ => {}
            }
        }
        if cancels >= 2 {
            seen.insert("fault:cancel_with_runs_out");
        }
    }
}

fn observe_event(e: &Event, seen: &mut BTreeSet<&'static str>) {
    let name: &'static str = match e {
        Event::Done { stop_reason } => match stop_reason.as_str() {
            "end_turn" => "done:end_turn",
            "length" => "done:length",
            "truncated" => "done:truncated",
            "error" => "done:error",
            "cancelled" => "done:cancelled",
            "refused" => "done:refused",
            "max_iterations" => "done:max_iterations",
            "budget_exhausted" => "done:budget_exhausted",
            "blocked" => "done:blocked",
            "unverified" => "done:unverified",
            _ => return,
        },
        Event::ApprovalSettled { outcome, .. } => match outcome {
            ApprovalOutcome::Approved => "settled:approved",
            ApprovalOutcome::Declined => "settled:declined",
            ApprovalOutcome::TimedOut => "settled:timed_out",
            ApprovalOutcome::Cancelled => "settled:cancelled",
        },
        Event::ApprovalRequest { reason, env, .. } => {
            if !env.is_empty() {
                seen.insert("approval:env_grant");
            }
            match reason {
                ApprovalReason::UnapprovedSource => "approval:unapproved_source",
                ApprovalReason::Gate => return,
            }
        }
        Event::Retry { .. } => "event:retry",
        Event::TurnRefused { .. } => "event:turn_refused",
        Event::HookFailed { .. } => "event:hook_failed",
        Event::Thinking { .. } => "event:thinking",
        Event::Diff { .. } => "event:diff",
        Event::Usage { .. } => "event:usage",
        Event::ProtocolError { .. } => "event:protocol_error",
        Event::Refrozen { changes, .. } => {
            if !changes.is_empty() {
                seen.insert("feature:refreeze_changed");
            }
            "event:refrozen"
        }
        Event::ApprovalMode { .. } => "event:approval_mode",
        Event::SchemasOverBudget { .. } => "event:schemas_over_budget",
        Event::Compacted {
            compacted_messages, ..
        } if *compacted_messages > 0 => "feature:compaction",
        _ => return,
    };
    seen.insert(name);
}

/// Hook runs started and not yet answered, and which of them hold the current turn (a
/// blocking hook started since the last `done`).
#[derive(Default)]
struct HookRuns {
    running: BTreeSet<u64>,
    /// Blocking runs of the turn in flight: run id to event.
    holding: BTreeMap<u64, HookEvent>,
}

impl HookRuns {
    /// A client input fed while a hook runs; a `cancel` ending the turn while a blocking hook
    /// holds it; a `quit` or end of input while one does.
    fn observe(&mut self, sc: &Scenario, fed: &Fed, seen: &mut BTreeSet<&'static str>) {
        let done = |reason: &str| {
            fed.outputs.iter().any(
                |o| matches!(o, Output::Event(Event::Done { stop_reason }) if stop_reason.as_str() == reason),
            )
        };
        match &fed.input {
            FedInput::Core(Input::HookDone { hook_run, .. }) => {
                self.running.remove(hook_run);
                self.holding.remove(hook_run);
            }
            FedInput::Core(Input::Line(_) | Input::EndOfInput | Input::Framing(_))
                if !self.running.is_empty() =>
            {
                seen.insert("fault:input_during_hook");
                let cmd = match &fed.input {
                    FedInput::Core(Input::Line(l)) => Command::parse_line(l).ok().flatten(),
                    _ => None,
                };
                let held_by = |e: HookEvent| self.holding.values().any(|h| *h == e);
                match cmd {
                    Some(Command::Cancel) if done("cancelled") => {
                        if held_by(HookEvent::UserPromptSubmit) {
                            seen.insert("fault:cancel_in_prompt_hooks");
                        }
                        if held_by(HookEvent::TurnEnd) {
                            seen.insert("fault:cancel_in_turn_end_hooks");
                        }
                        if held_by(HookEvent::ToolStart) {
                            seen.insert("fault:cancel_in_tool_hooks");
                        }
                    }
                    Some(Command::Quit) if !self.holding.is_empty() => {
                        seen.insert("fault:quit_in_hooks");
                    }
                    None if matches!(fed.input, FedInput::Core(Input::EndOfInput))
                        && !self.holding.is_empty() =>
                    {
                        seen.insert("fault:quit_in_hooks");
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        for o in &fed.outputs {
            match o {
                Output::Effect(Effect::RunHook {
                    hook_run,
                    hook,
                    event,
                    ..
                }) => {
                    self.running.insert(*hook_run);
                    if event.can_block() && blocking(sc, hook, *event) {
                        self.holding.insert(*hook_run, *event);
                    }
                }
                Output::Event(Event::Done { .. }) => self.holding.clear(),
                _ => {}
            }
        }
    }
}

/// A turn ended `budget_exhausted` with its reported usage summing exactly to the cap.
fn token_cap_reached_exactly(sc: &Scenario, run: &Run) -> bool {
    let cap = sc.config.limits.max_agent_tokens;
    if cap == 0 {
        return false;
    }
    let mut sum = 0u64;
    for fed in &run.trace {
        if let FedInput::Core(Input::Provider {
            item:
                ProviderItem::Usage {
                    prompt_tokens,
                    completion_tokens,
                    ..
                },
            ..
        }) = &fed.input
        {
            sum = sum.saturating_add(prompt_tokens + completion_tokens);
        }
        for o in &fed.outputs {
            if let Output::Event(Event::Done { stop_reason }) = o {
                if *stop_reason == StopReason::BudgetExhausted && sum == cap {
                    return true;
                }
                sum = 0;
            }
        }
    }
    false
}

/// A tally of [`observe`] over many cases: how many cases exercised each wanted name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    pub cases: u64,
    pub counts: BTreeMap<&'static str, u64>,
}

impl Tally {
    /// Count one case.
    pub fn add(&mut self, seen: &BTreeSet<&'static str>) {
        self.cases += 1;
        for s in seen {
            *self.counts.entry(s).or_default() += 1;
        }
    }

    /// Fold another tally in.
    pub fn merge(&mut self, other: &Tally) {
        self.cases += other.cases;
        for (k, n) in &other.counts {
            *self.counts.entry(k).or_default() += n;
        }
    }

    /// The wanted names no case exercised.
    pub fn missing(&self) -> Vec<&'static str> {
        WANTED
            .iter()
            .copied()
            .filter(|w| !self.counts.contains_key(w))
            .collect()
    }

    /// One line per wanted name: count and share of cases.
    pub fn report(&self) -> String {
        let mut s = format!("coverage over {} cases:\n", self.cases);
        for w in WANTED {
            let n = self.counts.get(w).copied().unwrap_or(0);
            s.push_str(&format!(
                "  {w:<36} {n:>8}  {:>6.2}%\n",
                n as f64 * 100.0 / (self.cases.max(1) as f64)
            ));
        }
        s
    }
}
