//! Hooks as inputs and effects of the turn machine.
//!
//! - Blocking hooks: `user_prompt_submit` (before a prompt is admitted; a refusal ends the turn
//!   `blocked` with nothing sent), `tool_start` (before a call starts; a refusal or a rewrite
//!   of its arguments, see `tool_hooks`) and `turn_end` (after a reply with no tool calls; a
//!   refusal is honored up to [`MAX_CONTINUATIONS`] times by appending its reason as a user
//!   message and asking the model again). They run one at a time, in config order. A failed
//!   `user_prompt_submit` or `turn_end` hook is reported and passed over; a failed
//!   `tool_start` hook refuses its call (fail closed).
//! - Observe-only hooks (`session_start`, `tool_end`, `compacted`, and any non-blocking hook
//!   of the three blocking events) are fire-and-forget: only a failure is reported, as
//!   `hook_failed`. A tool hook's `match` picks the tools it runs for.
//! - The hook gate: a project hook (agent-writable code) runs only when a human approved its
//!   whole definition and the exact bytes of its files ([`not_run`]); otherwise it
//!   is never run and `hook_failed` says why and how to approve it.
//!
//! Every payload carries `event` and `session_id`, plus the event's own fields.

use std::collections::VecDeque;

use crate::conversation::{Image, Message};
use crate::wire::{Event, StopReason};

use super::phase::{AfterPersist, HookRun, HookStage, Phase};
use super::{Core, Effect, HookEvent, HookOutcome, HookSpec};

/// `turn_end` refusals honored per turn before it ends `unverified`.
pub(super) const MAX_CONTINUATIONS: u32 = 8;

/// The hook gate: why `h` must not run, or `None` when it may. A project hook whose files
/// could not be read at the freeze, or whose definition and bytes no human approved, is not
/// run; the user's own hooks always run.
pub(super) fn not_run(h: &HookSpec) -> Option<String> {
    let src = h.source.as_ref()?;
    if let Some(why) = &src.unreadable {
        return Some(why.clone());
    }
    (!src.approved).then(|| {
        format!(
            "project hook {} (command {:?}) is not approved as defined; a human can run: \
             openmax --approve {}",
            h.name, src.command, src.approve_path
        )
    })
}

/// A `user_prompt_submit` payload's own fields: the prompt, and the images attached to it
/// (path, type, size and sha256; not their bytes), when there are any.
pub(super) fn prompt_fields(prompt: &str, images: &[Image]) -> serde_json::Value {
    let mut fields = serde_json::json!({ "prompt": prompt });
    if !images.is_empty() {
        fields["images"] = images
            .iter()
            .map(|i| {
                serde_json::json!({
                    "path": i.path, "media_type": i.media_type, "bytes": i.bytes,
                    "sha256": i.sha256,
                })
            })
            .collect();
    }
    fields
}

/// What `hook_failed` says of a `rewrite` answer from a hook that has no call to rewrite.
fn rewrite_misplaced() -> String {
    "the hook answered rewrite, which only a tool_start hook may; taken as a pass".to_string()
}

impl Core {
    pub(super) fn payload(
        &self,
        event: HookEvent,
        mut fields: serde_json::Value,
    ) -> serde_json::Value {
        if let serde_json::Value::Object(m) = &mut fields {
            m.insert("event".into(), event.as_str().into());
            m.insert("session_id".into(), self.config.session_id.clone().into());
        }
        fields
    }

    fn hook_failed(&mut self, hook: &str, event: HookEvent, detail: String) {
        self.ev(Event::HookFailed {
            hook: hook.to_string(),
            event: event.as_str().to_string(),
            detail,
        });
    }

    /// Fire every observe-only hook of `event` (for a call of `tool`, those whose `match`
    /// covers it).
    pub(super) fn fire_observe(
        &mut self,
        event: HookEvent,
        tool: Option<&str>,
        fields: serde_json::Value,
    ) {
        let hooks: Vec<HookSpec> = self
            .config
            .freeze
            .hooks
            .iter()
            .filter(|h| h.event == event && !(h.blocking && event.can_block()))
            .filter(|h| h.applies_to(tool))
            .cloned()
            .collect();
        if hooks.is_empty() {
            return;
        }
        let payload = self.payload(event, fields);
        for h in hooks {
            if let Some(why) = not_run(&h) {
                self.hook_failed(&h.name, event, why);
                continue;
            }
            let run = self.next_hook_run;
            self.next_hook_run += 1;
            self.observe_runs.insert(run, (h.name.clone(), event));
            self.before_write();
            self.eff(Effect::RunHook {
                hook_run: run,
                hook: h.name,
                event,
                payload: payload.clone(),
            });
        }
    }

    fn blocking_hooks(&self, event: HookEvent) -> VecDeque<HookSpec> {
        self.config
            .freeze
            .hooks
            .iter()
            .filter(|h| h.event == event && h.blocking)
            .cloned()
            .collect()
    }

    /// Start the next runnable hook of `rest` (reporting unloaded ones); `None` when none is
    /// left.
    fn next_blocking(
        &mut self,
        event: HookEvent,
        rest: &mut VecDeque<HookSpec>,
        fields: &serde_json::Value,
    ) -> Option<HookRun> {
        while let Some(h) = rest.pop_front() {
            if let Some(why) = not_run(&h) {
                self.hook_failed(&h.name, event, why);
                continue;
            }
            let run = self.next_hook_run;
            self.next_hook_run += 1;
            let payload = self.payload(event, fields.clone());
            self.before_write();
            self.eff(Effect::RunHook {
                hook_run: run,
                hook: h.name.clone(),
                event,
                payload,
            });
            return Some(HookRun {
                run,
                hook: h.name,
                event,
            });
        }
        None
    }

    pub(super) fn start_prompt_hooks(&mut self, prompt: String, images: Vec<Image>) {
        let rest = self.blocking_hooks(HookEvent::UserPromptSubmit);
        self.continue_prompt_hooks(prompt, images, rest);
    }

    fn continue_prompt_hooks(
        &mut self,
        prompt: String,
        images: Vec<Image>,
        mut rest: VecDeque<HookSpec>,
    ) {
        let fields = prompt_fields(&prompt, &images);
        match self.next_blocking(HookEvent::UserPromptSubmit, &mut rest, &fields) {
            Some(current) => {
                self.phase = Phase::Hooks {
                    stage: HookStage::Prompt { prompt, images },
                    current,
                    rest,
                }
            }
            None => self.admit_prompt(prompt, images),
        }
    }

    pub(super) fn start_turn_end_hooks(&mut self, finish_reason: String) {
        let rest = self.blocking_hooks(HookEvent::TurnEnd);
        self.fire_observe(HookEvent::TurnEnd, None, self.turn_end_fields());
        self.continue_turn_end_hooks(finish_reason, rest);
    }

    fn turn_end_fields(&self) -> serde_json::Value {
        let last = self
            .conversation
            .last()
            .map(Message::plain_text)
            .unwrap_or_default();
        serde_json::json!({
            "continuation": self.turn.refusals,
            "continuations_left": MAX_CONTINUATIONS.saturating_sub(self.turn.refusals),
            "last_message": last,
        })
    }

    fn continue_turn_end_hooks(&mut self, finish_reason: String, mut rest: VecDeque<HookSpec>) {
        let fields = self.turn_end_fields();
        match self.next_blocking(HookEvent::TurnEnd, &mut rest, &fields) {
            Some(current) => {
                self.phase = Phase::Hooks {
                    stage: HookStage::TurnEnd { finish_reason },
                    current,
                    rest,
                }
            }
            None => self.end_turn(StopReason::Provider(finish_reason)),
        }
    }

    pub(super) fn on_hook_done(&mut self, run: u64, outcome: HookOutcome) {
        let Some((stage, current, rest)) = self.phase.take_hooks(run) else {
            if let Some((hook, event)) = self.observe_runs.remove(&run) {
                if let HookOutcome::Failed { detail } = outcome {
                    self.hook_failed(&hook, event, detail);
                }
            }
            return;
        };
        match (stage, outcome) {
            (HookStage::Prompt { prompt, images }, HookOutcome::Pass) => {
                self.continue_prompt_hooks(prompt, images, rest)
            }
            (HookStage::Prompt { prompt, images }, HookOutcome::Failed { detail }) => {
                self.hook_failed(&current.hook, current.event, detail);
                self.continue_prompt_hooks(prompt, images, rest);
            }
            (HookStage::Prompt { .. }, HookOutcome::Refuse { .. }) => {
                self.end_turn(StopReason::Blocked)
            }
            (HookStage::Prompt { prompt, images }, HookOutcome::Rewrite { .. }) => {
                self.hook_failed(&current.hook, current.event, rewrite_misplaced());
                self.continue_prompt_hooks(prompt, images, rest);
            }
            (
                HookStage::ToolStart {
                    call,
                    args,
                    rewritten_by,
                },
                outcome,
            ) => self.on_tool_hook_done(call, args, rewritten_by, current, rest, outcome),
            (HookStage::TurnEnd { finish_reason }, HookOutcome::Pass) => {
                self.continue_turn_end_hooks(finish_reason, rest)
            }
            (HookStage::TurnEnd { finish_reason }, HookOutcome::Failed { detail }) => {
                self.hook_failed(&current.hook, current.event, detail);
                self.continue_turn_end_hooks(finish_reason, rest);
            }
            (HookStage::TurnEnd { finish_reason }, HookOutcome::Rewrite { .. }) => {
                self.hook_failed(&current.hook, current.event, rewrite_misplaced());
                self.continue_turn_end_hooks(finish_reason, rest);
            }
            (HookStage::TurnEnd { .. }, HookOutcome::Refuse { reason }) => {
                if self.turn.refusals >= MAX_CONTINUATIONS {
                    self.end_turn(StopReason::Unverified);
                } else {
                    let record = self.push_message(Message::user_text(reason.clone()));
                    self.persist_then(
                        vec![record],
                        AfterPersist::Refusal {
                            hook: current.hook,
                            reason,
                        },
                    );
                }
            }
        }
    }

    /// A honored refusal is on disk: `turn_refused`, then the model is asked again.
    pub(super) fn after_refusal(&mut self, hook: String, reason: String) {
        let continuation = self.turn.refusals;
        self.ev(Event::TurnRefused {
            hook,
            reason,
            continuation,
            continuations_left: MAX_CONTINUATIONS.saturating_sub(continuation),
        });
        self.turn.refusals += 1;
        if let Some(stop) = self.turn.ending.clone() {
            self.end_turn(stop);
        } else {
            self.start_request();
        }
    }
}
