//! Pure tests of the turn machine: feed inputs, drain outputs, assert exact event sequences.
//! This file is the harness ([`H`] and its helpers); each topic has its own file below.
//! No sleeps, no clock: time is a number the test advances. Every test ends by running the
//! whole recorded command/event sequence through the validator's pairing checker (which also
//! runs the stream validator), so each scenario here is checked against the contract too.

use std::collections::VecDeque;

use serde_json::json;

use super::*;
use crate::compaction;
use crate::conversation::{Block, ModelRequest, ToolSchema};
use crate::permissions::{Permissions, Rule};
use crate::provider::{FailureKind, ProviderItem, RequestFailure};
use crate::tool::{FileDiff, SourceGate, ToolOutcome, ToolPlan};
use crate::validate::{PairingChecker, Step};
use crate::wire::{Hello, Line};

// ----- harness ------------------------------------------------------------------------------

struct H {
    core: Core,
    now: Millis,
    /// Every event, in order.
    events: Vec<Event>,
    /// Events since the last `take()`.
    fresh: Vec<Event>,
    effects: Vec<Effect>,
    /// Persist tickets not yet answered (when `auto_ack` is off).
    unacked: VecDeque<u64>,
    auto_ack: bool,
    steps: Vec<Step>,
    checked: bool,
    /// Every output, events and effects interleaved in order.
    log: Vec<Output>,
}

fn freeze() -> Freeze {
    Freeze {
        system: "You are a careful coding agent.".into(),
        tools: vec![ToolSchema {
            name: "write_file".into(),
            description: "Write a file".into(),
            parameters: json!({"type":"object"}),
        }],
        skills: vec![],
        hooks: vec![],
        changes: vec![],
        notes: vec![],
        trusted: None,
    }
}

fn config() -> CoreConfig {
    let mut c = CoreConfig::new("s1", freeze());
    c.seed = 42;
    c
}

impl H {
    fn new() -> H {
        H::with(config())
    }

    fn with(config: CoreConfig) -> H {
        let hello = Hello::new(&config.session_id, "0.2.0", "/p", false).to_json();
        H {
            core: Core::new(config),
            now: Millis(0),
            events: Vec::new(),
            fresh: Vec::new(),
            effects: Vec::new(),
            unacked: VecDeque::new(),
            auto_ack: true,
            steps: vec![Step::Event(hello)],
            checked: false,
            log: Vec::new(),
        }
    }

    fn input(&mut self, input: Input) {
        match &input {
            Input::Line(l) => self.steps.push(Step::Command(l.clone())),
            // The pairing checker reads commands: a prompt with images is a `user` to it.
            Input::Prompt { text, .. } => self
                .steps
                .push(Step::Command(json!({"cmd":"user","text":text}).to_string())),
            Input::EndOfInput => self.steps.push(Step::EndOfInput),
            _ => {}
        }
        self.core.handle(self.now, input);
        self.drain();
    }

    fn drain(&mut self) {
        let mut acks = Vec::new();
        while let Some(out) = self.core.poll() {
            self.log.push(out.clone());
            match out {
                Output::Event(e) => {
                    let line = Line {
                        session_id: "s1".into(),
                        event: e.clone(),
                    };
                    self.steps.push(Step::Event(line.to_json()));
                    self.events.push(e.clone());
                    self.fresh.push(e);
                }
                Output::Effect(e) => {
                    if let Effect::Persist { ticket, .. } = &e {
                        if self.auto_ack {
                            acks.push(*ticket);
                        } else {
                            self.unacked.push_back(*ticket);
                        }
                    }
                    self.effects.push(e);
                }
            }
        }
        for ticket in acks {
            self.core.handle(self.now, Input::Persisted { ticket });
            self.drain();
        }
    }

    fn line(&mut self, raw: &str) {
        self.input(Input::Line(raw.to_string()));
    }

    fn user(&mut self, text: &str) {
        self.line(&json!({"cmd":"user","text":text}).to_string());
    }

    fn cmd(&mut self, c: serde_json::Value) {
        self.line(&c.to_string());
    }

    fn approve(&mut self, id: &str, approved: bool) {
        self.cmd(json!({"cmd":"approve","approval_id":id,"approved":approved}));
    }

    fn advance(&mut self, ms: u64) {
        self.now = self.now.plus(ms);
    }

    /// Jump to the next deadline and fire it.
    fn fire_timer(&mut self) -> TimerReason {
        let (at, reason) = self.core.poll_timeout().expect("a timer is set");
        assert!(
            at > self.now,
            "deadline {at:?} not after now {:?}",
            self.now
        );
        self.now = at;
        self.input(Input::Timeout);
        reason
    }

    /// The last `SendRequest`'s (request, attempt).
    fn sent(&self) -> (u64, u32) {
        self.effects
            .iter()
            .rev()
            .find_map(|e| match e {
                Effect::SendRequest {
                    request, attempt, ..
                } => Some((*request, *attempt)),
                _ => None,
            })
            .expect("a request was sent")
    }

    fn sends(&self) -> usize {
        self.effects
            .iter()
            .filter(|e| matches!(e, Effect::SendRequest { .. }))
            .count()
    }

    fn last_body(&self) -> ModelRequest {
        self.effects
            .iter()
            .rev()
            .find_map(|e| match e {
                Effect::SendRequest { body, .. } => Some((**body).clone()),
                _ => None,
            })
            .expect("a request was sent")
    }

    fn item(&mut self, item: ProviderItem) {
        let (request, attempt) = self.sent();
        self.input(Input::Provider {
            request,
            attempt,
            item,
        });
    }

    fn items(&mut self, items: Vec<ProviderItem>) {
        for i in items {
            self.item(i);
        }
    }

    fn fail(&mut self, failure: RequestFailure) {
        let (request, attempt) = self.sent();
        self.input(Input::RequestFailed {
            request,
            attempt,
            failure,
        });
    }

    fn reply(&mut self, text: &str) {
        self.items(vec![
            ProviderItem::Opened,
            text_d(text),
            ProviderItem::Completed {
                finish_reason: "stop".into(),
            },
        ]);
    }

    /// A completed reply with one tool call.
    fn tool_reply(&mut self, id: &str, name: &str, args: &str) {
        self.items(vec![
            ProviderItem::Opened,
            ProviderItem::ToolCallStart {
                index: 0,
                id: id.into(),
                name: name.into(),
            },
            ProviderItem::ToolCallArgs {
                index: 0,
                json: args.into(),
            },
            ProviderItem::Completed {
                finish_reason: "tool_use".into(),
            },
        ]);
    }

    /// A completed reply of `read_file` calls with these ids (an empty id: the provider sent
    /// none) and no arguments.
    fn read_calls(&mut self, ids: &[&str]) {
        self.item(ProviderItem::Opened);
        for (index, id) in (0u32..).zip(ids) {
            self.item(ProviderItem::ToolCallStart {
                index,
                id: (*id).into(),
                name: "read_file".into(),
            });
        }
        self.item(ProviderItem::Completed {
            finish_reason: "tool_use".into(),
        });
    }

    fn planned(&mut self, call_id: &str, plan: ToolPlan) {
        self.input(Input::ToolPlanned {
            call_id: call_id.into(),
            plan: Box::new(plan),
        });
    }

    fn tool_done(&mut self, call_id: &str, ok: bool, output: &str) {
        self.input(Input::ToolDone {
            call_id: call_id.into(),
            outcome: ToolOutcome {
                ok,
                output: output.into(),
                diffs: vec![],
                images: Vec::new(),
            },
        });
    }

    fn ack_next(&mut self) {
        let ticket = self.unacked.pop_front().expect("a persist is pending");
        self.input(Input::Persisted { ticket });
    }

    /// Events since the last take, shown compactly.
    fn take(&mut self) -> Vec<String> {
        std::mem::take(&mut self.fresh).iter().map(show).collect()
    }

    fn messages(&self, ty: &str) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e.type_name() == ty)
            .map(|e| match e {
                Event::Error { message } | Event::ProtocolError { message } => message.clone(),
                Event::HarnessNote { text, .. } => text.clone(),
                Event::ToolEnd { output, .. } => output.clone(),
                other => show(other),
            })
            .collect()
    }

    fn has_effect(&self, f: impl Fn(&Effect) -> bool) -> bool {
        self.effects.iter().any(f)
    }

    /// Run the recorded sequence through the pairing checker and stream validator.
    fn check(&mut self) {
        self.checked = true;
        let v = PairingChecker::check(&self.steps);
        assert!(
            v.is_empty(),
            "validator violations:\n{}\nsteps:\n{:#?}",
            v.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
            self.steps
        );
    }
}

impl Drop for H {
    fn drop(&mut self) {
        if !self.checked && !std::thread::panicking() {
            self.check();
        }
    }
}

fn text_d(t: &str) -> ProviderItem {
    ProviderItem::TextDelta { text: t.into() }
}

fn show(e: &Event) -> String {
    match e {
        Event::Token { text } => format!("token {text}"),
        Event::Thinking { text } => format!("thinking {text}"),
        Event::MessageDone { text } => format!("message_done {text}"),
        Event::Budget { .. } => "budget".into(),
        Event::Usage {
            prompt_tokens,
            completion_tokens,
            cached_tokens,
        } => format!("usage {prompt_tokens}/{completion_tokens}/{cached_tokens:?}"),
        Event::ToolStart { call_id, name, .. } => format!("tool_start {call_id} {name}"),
        Event::ToolEnd { call_id, ok, .. } => format!("tool_end {call_id} {ok}"),
        Event::HarnessNote { call_id, .. } => format!("harness_note {call_id}").trim().into(),
        Event::Retry {
            attempt,
            max_attempts,
            reason,
        } => format!("retry {attempt}/{max_attempts} {reason}"),
        Event::Diff { call_id, path, .. } => format!("diff {call_id} {path}"),
        Event::ApprovalRequest {
            approval_id,
            reason,
            ..
        } => format!("approval_request {approval_id} {reason:?}"),
        Event::ApprovalSettled {
            approval_id,
            outcome,
        } => format!("approval_settled {approval_id} {outcome:?}"),
        Event::Refrozen { .. } => "refrozen".into(),
        Event::SchemasOverBudget { .. } => "schemas_over_budget".into(),
        Event::Compacted { .. } => "compacted".into(),
        Event::HookFailed { hook, event, .. } => format!("hook_failed {hook} {event}"),
        Event::TurnRefused {
            hook,
            continuation,
            continuations_left,
            ..
        } => format!("turn_refused {hook} {continuation}/{continuations_left}"),
        Event::Done { stop_reason } => format!("done {stop_reason}"),
        Event::Error { .. } => "error".into(),
        Event::ProtocolError { .. } => "protocol_error".into(),
        Event::ApprovalMode { mode } => format!("approval_mode {}", mode.as_str()),
    }
}

fn plan(mutating: bool) -> ToolPlan {
    ToolPlan {
        mutating,
        targets: vec!["a.rs".into()],
        summary: "write a.rs".into(),
        detail: "+hello".into(),
        source: None,
        invalid: None,
        sandbox: Default::default(),
        confirm: None,
    }
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// Run a turn up to the first tool call's `PlanTool` (call id c1, write_file).
fn to_planning(h: &mut H) {
    h.user("write it");
    h.tool_reply("c1", "write_file", r#"{"path":"a.rs"}"#);
    assert_eq!(h.take(), s(&["budget", "tool_start c1 write_file"]));
    assert!(h.has_effect(|e| matches!(e, Effect::PlanTool { call_id, .. } if call_id == "c1")));
}

fn http(status: u16, retry_after_s: Option<u64>, kind: FailureKind) -> RequestFailure {
    RequestFailure::Http {
        status,
        retry_after_s,
        kind,
        message: "busy".into(),
    }
}

fn hook(name: &str, event: &str, blocking: bool) -> HookSpec {
    HookSpec {
        name: name.into(),
        event: HookEvent::parse(event).expect("a hook event"),
        blocking,
        source: None,
        matcher: None,
    }
}

/// A project hook as the freeze saw it: approved or not, its file readable or not.
fn project_hook(name: &str, event: &str, approved: bool, unreadable: Option<&str>) -> HookSpec {
    HookSpec {
        source: Some(HookSource {
            command: vec!["sh".into(), "check.sh".into()],
            approve_path: "check.sh".into(),
            approved,
            unreadable: unreadable.map(str::to_string),
        }),
        ..hook(name, event, true)
    }
}

fn last_hook_run(h: &H) -> u64 {
    h.effects
        .iter()
        .rev()
        .find_map(|e| match e {
            Effect::RunHook { hook_run, .. } => Some(*hook_run),
            _ => None,
        })
        .expect("a hook ran")
}

mod admission;
mod approvals;
mod cancel;
mod checkpoints;
mod commands;
mod context;
mod endings;
mod forwarded;
mod hooks;
mod images;
mod limits;
mod persistence;
mod quit;
mod request;
mod retries;
mod robustness;
mod sandbox;
mod tasks;
mod tool_hooks;
mod turns;
