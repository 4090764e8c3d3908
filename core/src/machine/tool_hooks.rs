//! Blocking `tool_start` hooks: the gate a tool call passes before it is started.
//!
//! - Which hooks: every blocking `tool_start` hook whose `match` covers the call's tool name,
//!   in config order, one at a time; each reads the arguments as the hooks before it left them.
//!   They run before the call is inspected (`PlanTool`), so the deny rules, the approval card
//!   and the run all see the arguments that will really be used.
//! - Each answers pass, refuse (with a reason) or rewrite (new arguments). A rewrite is checked
//!   against the tool's frozen schema ([`crate::arguments`]); arguments the schema refuses
//!   refuse the call.
//! - Fail closed: a hook that failed (crashed, timed out, could not start) or that is not run
//!   (a project hook no human approved as defined, or whose file could not be read) refuses the
//!   call, and `hook_failed` says why. No call a blocking hook refused, or has not answered,
//!   is ever run.
//! - A refused call gets `tool_start` (with the arguments as they stood) and a failed
//!   `tool_end` whose output is the refusal; nothing is planned or run and the turn goes on. A
//!   call that passed gets `tool_start` with the arguments that will run; a rewrite is said on
//!   its approval card and in a harness note riding its result.
//! - A call whose arguments did not parse as a JSON object fails before any hook runs.

use std::collections::VecDeque;

use serde_json::{Map, Value};

use crate::wire::Event;

use super::hooks::not_run;
use super::phase::{HookRun, HookStage, Phase};
use super::{Core, Effect, HookEvent, HookOutcome, HookSpec};

/// Longest rendering of arguments in a refusal, a note or a card line, in characters.
const MAX_ARGS_SHOWN: usize = 2000;

/// `args` as compact JSON, cut at [`MAX_ARGS_SHOWN`] characters.
fn shown(args: &Map<String, Value>) -> String {
    let s = Value::Object(args.clone()).to_string();
    if s.chars().count() <= MAX_ARGS_SHOWN {
        return s;
    }
    let mut cut: String = s.chars().take(MAX_ARGS_SHOWN).collect();
    cut.push('…');
    cut
}

impl Core {
    /// Start call `call` of the round with `args`, after the blocking `tool_start` hooks that
    /// match it (at once when none does).
    pub(super) fn gate_call(&mut self, call: usize, args: Map<String, Value>) {
        let name = self.call_name(call);
        let hooks: VecDeque<HookSpec> = self
            .config
            .freeze
            .hooks
            .iter()
            .filter(|h| h.event == HookEvent::ToolStart && h.blocking)
            .filter(|h| h.applies_to(Some(&name)))
            .cloned()
            .collect();
        self.continue_tool_hooks(call, args, Vec::new(), hooks);
    }

    /// Run the next of `rest`, or start the call once none is left.
    pub(super) fn continue_tool_hooks(
        &mut self,
        call: usize,
        args: Map<String, Value>,
        rewritten_by: Vec<String>,
        mut rest: VecDeque<HookSpec>,
    ) {
        let Some(h) = rest.pop_front() else {
            return self.hooks_passed(call, args, rewritten_by);
        };
        if let Some(why) = not_run(&h) {
            self.ev(Event::HookFailed {
                hook: h.name.clone(),
                event: HookEvent::ToolStart.as_str().to_string(),
                detail: why.clone(),
            });
            return self.refuse_call(
                call,
                args,
                format!(
                    "refused: the blocking tool_start hook {} is not run ({why}); a call such a \
                     hook has not passed is not run",
                    h.name
                ),
            );
        }
        let run = self.next_hook_run;
        self.next_hook_run += 1;
        let fields = serde_json::json!({
            "call_id": self.call_id(call),
            "name": self.call_name(call),
            "args": Value::Object(args.clone()),
        });
        let payload = self.payload(HookEvent::ToolStart, fields);
        // A hook's process may write the project: the turn's checkpoint comes first.
        self.before_write();
        self.eff(Effect::RunHook {
            hook_run: run,
            hook: h.name.clone(),
            event: HookEvent::ToolStart,
            payload,
        });
        self.phase = Phase::Hooks {
            stage: HookStage::ToolStart {
                call,
                args,
                rewritten_by,
            },
            current: HookRun {
                run,
                hook: h.name,
                event: HookEvent::ToolStart,
            },
            rest,
        };
    }

    /// The answer of the blocking `tool_start` hook `current` about call `call`.
    pub(super) fn on_tool_hook_done(
        &mut self,
        call: usize,
        args: Map<String, Value>,
        mut rewritten_by: Vec<String>,
        current: HookRun,
        rest: VecDeque<HookSpec>,
        outcome: HookOutcome,
    ) {
        match outcome {
            HookOutcome::Pass => self.continue_tool_hooks(call, args, rewritten_by, rest),
            HookOutcome::Refuse { reason } => self.refuse_call(
                call,
                args,
                format!(
                    "refused by the tool_start hook {}: {reason}; the call was not run",
                    current.hook
                ),
            ),
            HookOutcome::Failed { detail } => {
                self.ev(Event::HookFailed {
                    hook: current.hook.clone(),
                    event: current.event.as_str().to_string(),
                    detail: detail.clone(),
                });
                self.refuse_call(
                    call,
                    args,
                    format!(
                        "refused: the blocking tool_start hook {} did not answer ({detail}); a \
                         call such a hook has not passed is not run",
                        current.hook
                    ),
                );
            }
            HookOutcome::Rewrite { args: new } => match self.check_rewrite(call, &new) {
                Ok(new) => {
                    rewritten_by.push(current.hook);
                    self.continue_tool_hooks(call, new, rewritten_by, rest);
                }
                Err(why) => self.refuse_call(
                    call,
                    args,
                    format!(
                        "refused: the tool_start hook {} rewrote the arguments into ones the \
                         tool's schema refuses ({why}); the call was not run",
                        current.hook
                    ),
                ),
            },
        }
    }

    /// The rewritten arguments, when they are an object the tool's frozen schema accepts (a
    /// tool the freeze does not know is left to its inspection, which refuses it).
    fn check_rewrite(&self, call: usize, new: &Value) -> Result<Map<String, Value>, String> {
        let name = self.call_name(call);
        if let Some(tool) = self.config.freeze.tools.iter().find(|t| t.name == name) {
            crate::arguments::check(&tool.parameters, new)?;
        }
        match new {
            Value::Object(m) => Ok(m.clone()),
            _ => Err("$: the arguments must be a JSON object".to_string()),
        }
    }

    /// Every matching hook passed: the call starts with `args`.
    fn hooks_passed(&mut self, call: usize, args: Map<String, Value>, rewritten_by: Vec<String>) {
        if !rewritten_by.is_empty() {
            let original = match self.turn.round.get(call).map(|c| &c.args) {
                Some(Ok(a)) => shown(a),
                Some(Err(_)) | None => String::new(),
            };
            let hooks = rewritten_by.join(", then ");
            if let Some(c) = self.turn.round.get_mut(call) {
                c.rewrite = Some(format!(
                    "Arguments rewritten by the tool_start hook {hooks}; the model asked for \
                     {original}"
                ));
                c.args = Ok(args.clone());
            }
        }
        self.start_call(call, args);
    }

    /// A call a blocking hook refused: `tool_start` with the arguments as they stood, then its
    /// failed result. Nothing is planned or run; the round goes on.
    fn refuse_call(&mut self, call: usize, args: Map<String, Value>, output: String) {
        self.announce_call(call, &args);
        self.finish_call(call, false, output, None);
    }

    /// The harness note riding the result of a call whose arguments a hook rewrote.
    pub(super) fn rewrite_note(&self, call: usize) -> Option<String> {
        let c = self.turn.round.get(call)?;
        let rewrite = c.rewrite.as_ref()?;
        let ran = match &c.args {
            Ok(a) => shown(a),
            Err(_) => String::new(),
        };
        Some(format!("{rewrite}; the call was made with {ran}."))
    }
}
