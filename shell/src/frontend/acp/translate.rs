//! The mapping from one session's core events to ACP: session updates, permission requests,
//! and the answer to `session/prompt` (see the table in docs/acp.md).
//!
//! Pure: [`Translator::event`] takes a wire [`Event`] and pushes [`Out`]s; the connection
//! writes them. It decides no policy: every ending, gate and refusal is the core's, and this
//! only says how it looks in ACP.
//!
//! Invariants:
//! - One `done` answers the prompt in flight exactly once ([`Out::PromptEnded`]); after a
//!   `session/cancel` that answer is `cancelled` whatever the turn's own ending (ACP requires
//!   it, also when the cancel raced an error).
//! - `error` and `truncated` endings answer with a JSON-RPC error carrying the turn's `error`
//!   line; the partial reply already went out as chunks.
//! - A tool call's content accumulates (its diffs, then its output), because an ACP
//!   `tool_call_update` replaces the content it names.
//! - A `protocol_error` is held until the next event: directly followed by `done` `refused` it
//!   explains a refused prompt; otherwise it answers the oldest pending `session/set_mode`, or
//!   is only logged.

use std::collections::BTreeMap;
use std::path::PathBuf;

use agent_client_protocol_schema::v1::{
    ContentBlock, ContentChunk, PermissionOption, PermissionOptionKind, RequestPermissionRequest,
    SessionId, SessionNotification, SessionUpdate, StopReason, TextContent, ToolCall,
    ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use openmax_core::tool::UNSANDBOXED_SUMMARY_PREFIX;
use openmax_core::wire::{ApprovalReason, Event, Mode, StopReason as Stop};
use serde_json::Value;

use super::toolcall;

/// The permission option that approves.
pub const ALLOW: &str = "allow";
/// The permission option that declines.
pub const REJECT: &str = "reject";

/// How a prompt ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptEnd {
    /// A `PromptResponse` with this stop reason.
    Stop(StopReason),
    /// A JSON-RPC error response with this message.
    Error(String),
}

/// What the connection must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// Send a `session/update` notification.
    Update(SessionNotification),
    /// Send `session/request_permission`; the answer goes to `approval_id`.
    AskPermission {
        approval_id: String,
        request: RequestPermissionRequest,
    },
    /// The approval settled in the core: a late answer to its request must not reach it.
    PermissionSettled { approval_id: String },
    /// Answer the prompt in flight.
    PromptEnded(PromptEnd),
    /// Answer the oldest pending `session/set_mode`: saved.
    ModeSaved(Mode),
    /// Answer the oldest pending `session/set_mode`: refused, with the core's message.
    ModeRefused(String),
    /// Something for the log (stderr) only.
    Log(String),
}

/// A tool call as the client has been shown it.
#[derive(Debug, Clone, Default)]
struct Call {
    content: Vec<ToolCallContent>,
}

/// One session's translator.
#[derive(Debug)]
pub struct Translator {
    session_id: SessionId,
    project: PathBuf,
    prompt_open: bool,
    cancel_requested: bool,
    error: Option<String>,
    calls: BTreeMap<String, Call>,
    /// The call that started last and has not ended (calls of a round run one at a time).
    current_call: Option<String>,
    held_protocol_error: Option<String>,
    modes_pending: usize,
}

/// The ACP stop reason (or error) for a `done`.
pub fn prompt_end(stop_reason: &Stop, cancel_requested: bool, error: Option<&str>) -> PromptEnd {
    if cancel_requested {
        return PromptEnd::Stop(StopReason::Cancelled);
    }
    match stop_reason {
        Stop::Cancelled => PromptEnd::Stop(StopReason::Cancelled),
        Stop::Error | Stop::Truncated => PromptEnd::Error(
            error
                .map(str::to_string)
                .unwrap_or_else(|| format!("the turn ended with {stop_reason}")),
        ),
        Stop::MaxIterations | Stop::BudgetExhausted => PromptEnd::Stop(StopReason::MaxTurnRequests),
        Stop::Blocked | Stop::Refused => PromptEnd::Stop(StopReason::Refusal),
        Stop::Provider(r) if CUT_BY_A_CAP.contains(&r.as_str()) => {
            PromptEnd::Stop(StopReason::MaxTokens)
        }
        Stop::Provider(r) if REFUSED.contains(&r.as_str()) => PromptEnd::Stop(StopReason::Refusal),
        Stop::Unverified | Stop::Provider(_) => PromptEnd::Stop(StopReason::EndTurn),
    }
}

/// Provider finishes of a reply cut by the output cap or the context window: Chat Completions'
/// `length`, Anthropic's `max_tokens` and `model_context_window_exceeded`, the Responses API's
/// `incomplete` reason `max_output_tokens`.
const CUT_BY_A_CAP: [&str; 4] = [
    "length",
    "max_tokens",
    "model_context_window_exceeded",
    "max_output_tokens",
];

/// Provider finishes of a reply the model or the provider's filter refused: Anthropic's
/// `refusal`, the `content_filter` of Chat Completions and of the Responses API.
const REFUSED: [&str; 2] = ["refusal", "content_filter"];

/// Whether the client's answer to a permission request approves: only the `allow` option
/// does; `reject`, `cancelled`, an unknown option and an error answer all decline.
pub fn permission_approved(answer: &Result<Value, String>) -> bool {
    let Ok(v) = answer else { return false };
    v.get("outcome")
        .filter(|o| o.get("outcome").and_then(Value::as_str) == Some("selected"))
        .and_then(|o| o.get("optionId"))
        .and_then(Value::as_str)
        == Some(ALLOW)
}

fn text(t: impl Into<String>) -> ContentBlock {
    ContentBlock::Text(TextContent::new(t))
}

impl Translator {
    pub fn new(session_id: &str, project: PathBuf) -> Translator {
        Translator {
            session_id: SessionId::new(session_id),
            project,
            prompt_open: false,
            cancel_requested: false,
            error: None,
            calls: BTreeMap::new(),
            current_call: None,
            held_protocol_error: None,
            modes_pending: 0,
        }
    }

    /// Whether a `session/prompt` awaits its answer.
    pub fn prompt_open(&self) -> bool {
        self.prompt_open
    }

    /// A `session/prompt` was sent to the core as a `user` command.
    pub fn prompt_started(&mut self) {
        self.prompt_open = true;
        self.cancel_requested = false;
        self.error = None;
    }

    /// `session/cancel` arrived; returns whether a prompt was in flight to cancel.
    pub fn cancel(&mut self) -> bool {
        if self.prompt_open {
            self.cancel_requested = true;
        }
        self.prompt_open
    }

    /// A `session/set_mode` was sent to the core as an `approval_mode` command.
    pub fn mode_requested(&mut self) {
        self.modes_pending += 1;
    }

    fn update(&self, u: SessionUpdate, out: &mut Vec<Out>) {
        out.push(Out::Update(SessionNotification::new(
            self.session_id.clone(),
            u,
        )));
    }

    fn message(&self, t: impl Into<String>, out: &mut Vec<Out>) {
        self.update(
            SessionUpdate::AgentMessageChunk(ContentChunk::new(text(t))),
            out,
        );
    }

    fn thought(&self, t: impl Into<String>, out: &mut Vec<Out>) {
        self.update(
            SessionUpdate::AgentThoughtChunk(ContentChunk::new(text(t))),
            out,
        );
    }

    fn call_update(&self, call_id: &str, fields: ToolCallUpdateFields, out: &mut Vec<Out>) {
        self.update(
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call_id.to_string(), fields)),
            out,
        );
    }

    /// The core went quiet: a held `protocol_error` is not a refused prompt's.
    pub fn quiet(&mut self, out: &mut Vec<Out>) {
        if let Some(message) = self.held_protocol_error.take() {
            if self.modes_pending > 0 {
                self.modes_pending -= 1;
                out.push(Out::ModeRefused(message));
            } else {
                out.push(Out::Log(format!("protocol error: {message}")));
            }
        }
    }

    /// Translate one event.
    pub fn event(&mut self, ev: Event, out: &mut Vec<Out>) {
        if let Some(message) = self.held_protocol_error.take() {
            if matches!(
                &ev,
                Event::Done {
                    stop_reason: Stop::Refused
                }
            ) {
                // The prompt was refused before it started: say why, then answer it.
                self.message(message, out);
            } else {
                self.held_protocol_error = Some(message);
                self.quiet(out);
            }
        }
        match ev {
            Event::Token { text: t } => {
                self.update(
                    SessionUpdate::AgentMessageChunk(ContentChunk::new(text(t))),
                    out,
                );
            }
            Event::Thinking { text: t } => self.thought(t, out),
            Event::MessageDone { .. } | Event::Budget { .. } | Event::Usage { .. } => {}
            Event::ToolStart {
                call_id,
                name,
                args,
            } => {
                let call = ToolCall::new(call_id.clone(), toolcall::title(&name, &args))
                    .kind(toolcall::kind(&name))
                    .status(ToolCallStatus::InProgress)
                    .locations(toolcall::locations(&self.project, &name, &args))
                    .raw_input(Value::Object(args));
                self.calls.insert(call_id.clone(), Call::default());
                self.current_call = Some(call_id);
                self.update(SessionUpdate::ToolCall(call), out);
            }
            Event::Diff {
                call_id,
                path,
                diff,
                ..
            } => {
                let blocks = toolcall::diff_blocks(&self.project, &path, &diff);
                let call = self.calls.entry(call_id.clone()).or_default();
                call.content.extend(blocks);
                let content = call.content.clone();
                self.call_update(&call_id, ToolCallUpdateFields::new().content(content), out);
            }
            Event::ToolEnd {
                call_id,
                ok,
                output,
            } => {
                let mut content = self
                    .calls
                    .remove(&call_id)
                    .map(|c| c.content)
                    .unwrap_or_default();
                if !output.is_empty() {
                    content.push(ToolCallContent::from(text(output)));
                }
                if self.current_call.as_deref() == Some(call_id.as_str()) {
                    self.current_call = None;
                }
                let status = if ok {
                    ToolCallStatus::Completed
                } else {
                    ToolCallStatus::Failed
                };
                self.call_update(
                    &call_id,
                    ToolCallUpdateFields::new().status(status).content(content),
                    out,
                );
            }
            Event::ApprovalRequest {
                approval_id,
                name,
                summary,
                detail,
                reason,
                source_path,
                source_sha,
                env,
            } => {
                let request = self.permission(
                    &name,
                    &summary,
                    &detail,
                    reason,
                    &source_path,
                    &source_sha,
                    &env,
                );
                out.push(Out::AskPermission {
                    approval_id,
                    request,
                });
            }
            Event::ApprovalSettled { approval_id, .. } => {
                out.push(Out::PermissionSettled { approval_id });
            }
            Event::HarnessNote { text: t, .. } => self.thought(format!("openmax note: {t}"), out),
            Event::Retry {
                attempt,
                max_attempts,
                reason,
            } => self.thought(
                format!("The model request failed ({reason}); sending attempt {attempt} of {max_attempts}."),
                out,
            ),
            Event::Refrozen { tools, skills, .. } => self.thought(
                format!(
                    "Reloaded tools ({}) and skills ({}).",
                    tools.join(", "),
                    skills.join(", ")
                ),
                out,
            ),
            Event::SchemasOverBudget {
                schema_tokens,
                budget_tokens,
            } => self.thought(
                format!(
                    "The tool schemas take {schema_tokens} of the {budget_tokens} tokens the \
                     context can spend; compaction starts early."
                ),
                out,
            ),
            Event::Compacted {
                tokens_before,
                tokens_after,
                compacted_messages,
            } => self.thought(
                format!(
                    "Context compacted: {tokens_before} → {tokens_after} tokens \
                     ({compacted_messages} messages)."
                ),
                out,
            ),
            Event::HookFailed {
                hook,
                event,
                detail,
            } => self.thought(format!("The {event} hook {hook} did not run: {detail}"), out),
            Event::TurnRefused {
                hook,
                reason,
                continuations_left,
                ..
            } => self.message(
                format!(
                    "\n\n[The turn_end hook {hook} refused this answer: {reason} — the turn \
                     continues ({continuations_left} more refusals allowed).]\n\n"
                ),
                out,
            ),
            Event::Error { message } => {
                if self.prompt_open {
                    self.error = Some(message);
                } else {
                    out.push(Out::Log(format!("error: {message}")));
                }
            }
            Event::ProtocolError { message } => self.held_protocol_error = Some(message),
            Event::ApprovalMode { mode } => {
                self.modes_pending = self.modes_pending.saturating_sub(1);
                out.push(Out::ModeSaved(mode));
            }
            Event::Done { stop_reason } => self.done(&stop_reason, out),
        }
    }

    fn done(&mut self, stop_reason: &Stop, out: &mut Vec<Out>) {
        self.calls.clear();
        self.current_call = None;
        if !self.prompt_open {
            out.push(Out::Log(format!(
                "a turn ended ({stop_reason}) with no prompt in flight"
            )));
            return;
        }
        let error = self.error.take();
        let end = prompt_end(stop_reason, self.cancel_requested, error.as_deref());
        if let (Some(e), PromptEnd::Stop(_)) = (&error, &end) {
            // The error is not the answer (a cancel won the race): still show it.
            self.thought(format!("error: {e}"), out);
        }
        self.prompt_open = false;
        self.cancel_requested = false;
        out.push(Out::PromptEnded(end));
    }

    #[allow(clippy::too_many_arguments)]
    fn permission(
        &self,
        name: &str,
        summary: &str,
        detail: &str,
        reason: ApprovalReason,
        source_path: &str,
        source_sha: &str,
        env: &[String],
    ) -> RequestPermissionRequest {
        let mut lines: Vec<String> = Vec::new();
        if !detail.is_empty() {
            lines.push(detail.to_string());
        }
        let (allow_name, allow_kind) = match reason {
            // The core starts the summary of a request to run outside the sandbox so.
            ApprovalReason::Gate if summary.starts_with(UNSANDBOXED_SUMMARY_PREFIX) => (
                "Allow this command to run UNSANDBOXED",
                PermissionOptionKind::AllowOnce,
            ),
            ApprovalReason::Gate => ("Allow", PermissionOptionKind::AllowOnce),
            ApprovalReason::UnapprovedSource => {
                lines.push(format!(
                    "{name} runs external code no human has approved: {source_path} \
                     (sha256 {source_sha}). Allowing records your approval of these exact bytes; \
                     or run `openmax --approve {source_path}` in a terminal."
                ));
                (
                    "Approve these bytes and run",
                    PermissionOptionKind::AllowAlways,
                )
            }
        };
        if !env.is_empty() {
            lines.push(format!(
                "It receives these environment variables: {}",
                env.join(", ")
            ));
        }
        let title = if summary.is_empty() {
            name.to_string()
        } else {
            summary.to_string()
        };
        let call_id = self
            .current_call
            .clone()
            .unwrap_or_else(|| format!("approval-{name}"));
        let fields = ToolCallUpdateFields::new()
            .title(title)
            .content(vec![ToolCallContent::from(text(lines.join("\n")))]);
        RequestPermissionRequest::new(
            self.session_id.clone(),
            ToolCallUpdate::new(call_id, fields),
            vec![
                PermissionOption::new(ALLOW, allow_name, allow_kind),
                PermissionOption::new(REJECT, "Reject", PermissionOptionKind::RejectOnce),
            ],
        )
    }
}

#[cfg(test)]
#[path = "translate_tests.rs"]
mod tests;
