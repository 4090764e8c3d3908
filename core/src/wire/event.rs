//! Events: what openmax writes on stdout, one JSON object per line.
//!
//! [`Event`] is internally tagged by `type`; [`Line`] pairs an event with its session id and
//! serializes `session_id` first, then `type`, then the fields in the contract's order. The two
//! session-less lines (`protocol_error` and the `approval_mode` acknowledgement) serialize with
//! no `session_id`, whatever the `Line` holds.
//!
//! [`EVENT_FIELDS`] is the field table of every event type. The validator and the JSON Schema
//! are generated from it; a unit test proves it matches what serde writes.

use serde::{Deserialize, Serialize};

pub use super::field::{FieldSpec, FieldType};
use super::mode::Mode;
use super::stop::StopReason;

/// Why an `approval_request` was raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalReason {
    /// A mutating call or an `ask` rule match in `ask` mode.
    Gate,
    /// The first call of external code whose exact bytes no human approved.
    UnapprovedSource,
}

/// How an approval ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalOutcome {
    /// An `approve … true` answered it.
    Approved,
    /// An `approve … false` answered it.
    Declined,
    /// Nobody answered within the approval timeout.
    TimedOut,
    /// The turn was cancelled (or the session quit) first.
    Cancelled,
}

/// One entry of a `refrozen` receipt: what changed and who changed it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FreezeChange {
    /// `tool`, `skill`, `prompt` or `hook`.
    pub kind: String,
    /// The tool or skill name, or the prompt/hook file's label.
    pub name: String,
    /// `added`, `removed` or `changed`.
    pub change: String,
    /// The file behind it, project-relative where possible.
    pub path: String,
    /// `agent` when this session's own write or edit tool last wrote the file, else `outside`.
    pub by: String,
}

/// One stdout event. Field order is wire order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A piece of reply text, streamed as it arrives.
    Token {
        /// The delta.
        text: String,
    },
    /// A piece of the model's thinking, streamed as it arrives.
    Thinking {
        /// The delta.
        text: String,
    },
    /// The whole text of one assistant reply, once persisted.
    MessageDone {
        /// The reply's text (possibly empty).
        text: String,
    },
    /// The context figure after a completed model request.
    Budget {
        /// The scaled estimate of what the next request would send.
        used_tokens: u64,
        /// The model's context window.
        context_tokens: u64,
    },
    /// The token counts the provider reported for one request.
    Usage {
        /// Prompt tokens, cached ones included.
        prompt_tokens: u64,
        /// Generated tokens.
        completion_tokens: u64,
        /// Prompt tokens served from the provider's cache, when it says.
        cached_tokens: Option<u64>,
    },
    /// A tool call is about to run.
    ToolStart {
        /// The provider's call id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The arguments the call runs with: the model's, or as a blocking `tool_start` hook
        /// rewrote them.
        args: serde_json::Map<String, serde_json::Value>,
    },
    /// A tool call ended; its result is persisted.
    ToolEnd {
        /// The call this ends.
        call_id: String,
        /// Whether the tool succeeded.
        ok: bool,
        /// What the model is told (capped).
        output: String,
    },
    /// A note from openmax to the model and the client (empty `call_id` when not about a call).
    HarnessNote {
        /// The call the note is about, or empty.
        call_id: String,
        /// The note.
        text: String,
    },
    /// A failed request attempt is retried after a wait.
    Retry {
        /// The attempt about to be made (2 for the first retry).
        attempt: u32,
        /// The attempt budget.
        max_attempts: u32,
        /// Why the previous attempt failed.
        reason: String,
    },
    /// The change a write or edit tool made, as a unified diff.
    Diff {
        /// The call that made the change.
        call_id: String,
        /// The file, project-relative.
        path: String,
        /// The unified diff.
        diff: String,
        /// Lines added.
        added: u64,
        /// Lines removed.
        removed: u64,
    },
    /// A call waits for a human's `approve`.
    ApprovalRequest {
        /// The id an `approve` names.
        approval_id: String,
        /// The tool's name.
        name: String,
        /// One line saying what the call does.
        summary: String,
        /// The full arguments or command.
        detail: String,
        /// Why it is asked.
        reason: ApprovalReason,
        /// For `unapproved_source`: the file whose bytes are approved; else empty.
        source_path: String,
        /// For `unapproved_source`: the sha256 of those bytes; else empty.
        source_sha: String,
        /// Names of the environment variables the approved code will receive (omitted when none).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        env: Vec<String>,
    },
    /// An approval request ended.
    ApprovalSettled {
        /// The request this settles.
        approval_id: String,
        /// How it ended.
        outcome: ApprovalOutcome,
    },
    /// A `reload` took a new freeze snapshot.
    Refrozen {
        /// The tool names now frozen.
        tools: Vec<String>,
        /// The skill names now frozen.
        skills: Vec<String>,
        /// What changed since the last freeze, and by whom.
        changes: Vec<FreezeChange>,
    },
    /// The frozen tool schemas take more than their share of the context window.
    SchemasOverBudget {
        /// The estimated tokens of the tool schemas.
        schema_tokens: u64,
        /// Their share of the window.
        budget_tokens: u64,
    },
    /// The conversation was compacted before a request.
    Compacted {
        /// The estimate before compaction.
        tokens_before: u64,
        /// The estimate of the request now sent.
        tokens_after: u64,
        /// How many messages were cut or stubbed.
        compacted_messages: u64,
    },
    /// A hook could not run or failed.
    HookFailed {
        /// The hook's label.
        hook: String,
        /// The hook event it ran for.
        event: String,
        /// What went wrong.
        detail: String,
    },
    /// A `turn_end` hook refused to end the turn; the turn continues.
    TurnRefused {
        /// The refusing hook's label.
        hook: String,
        /// The hook's reason, shown to the model.
        reason: String,
        /// Which continuation this is (1-based).
        continuation: u32,
        /// How many more the bound allows.
        continuations_left: u32,
    },
    /// The turn ended: exactly one per user command.
    Done {
        /// Why the turn ended: a reason the contract names, or the provider's own verbatim.
        stop_reason: StopReason,
    },
    /// The turn failed; a `done` follows.
    Error {
        /// What failed.
        message: String,
    },
    /// Session-less: a command or input line the core could not accept.
    ProtocolError {
        /// What was wrong with the line.
        message: String,
    },
    /// Session-less: acknowledgement of a persisted `approval_mode` command.
    ApprovalMode {
        /// The mode now saved for the project.
        mode: Mode,
    },
}

impl Event {
    /// The `type` discriminator as written on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::Token { .. } => "token",
            Event::Thinking { .. } => "thinking",
            Event::MessageDone { .. } => "message_done",
            Event::Budget { .. } => "budget",
            Event::Usage { .. } => "usage",
            Event::ToolStart { .. } => "tool_start",
            Event::ToolEnd { .. } => "tool_end",
            Event::HarnessNote { .. } => "harness_note",
            Event::Retry { .. } => "retry",
            Event::Diff { .. } => "diff",
            Event::ApprovalRequest { .. } => "approval_request",
            Event::ApprovalSettled { .. } => "approval_settled",
            Event::Refrozen { .. } => "refrozen",
            Event::SchemasOverBudget { .. } => "schemas_over_budget",
            Event::Compacted { .. } => "compacted",
            Event::HookFailed { .. } => "hook_failed",
            Event::TurnRefused { .. } => "turn_refused",
            Event::Done { .. } => "done",
            Event::Error { .. } => "error",
            Event::ProtocolError { .. } => "protocol_error",
            Event::ApprovalMode { .. } => "approval_mode",
        }
    }

    /// Whether the line carries `session_id` (all but `protocol_error` and `approval_mode`).
    pub fn has_session_id(&self) -> bool {
        !matches!(
            self,
            Event::ProtocolError { .. } | Event::ApprovalMode { .. }
        )
    }
}

/// An event with the session it belongs to: the unit written to stdout.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// The session the event belongs to (not written for session-less events).
    pub session_id: String,
    /// The event.
    pub event: Event,
}

impl Line {
    /// Serialize as one JSON line (no trailing newline).
    pub fn to_json(&self) -> String {
        let mut out = Vec::with_capacity(64);
        self.write_json(&mut out);
        // serde_json writes UTF-8 only.
        String::from_utf8(out).expect("serde_json writes UTF-8")
    }

    /// Append the JSON form (no trailing newline) to `out`. The hot path: no intermediate
    /// `String` per event.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        // Serializing these types into a Vec cannot fail (no maps with non-string keys, no I/O).
        if self.event.has_session_id() {
            out.extend_from_slice(b"{\"session_id\":");
            serde_json::to_writer(&mut *out, &self.session_id).expect("string serializes");
            out.push(b',');
            let start = out.len();
            serde_json::to_writer(&mut *out, &self.event).expect("event serializes");
            // Drop the event object's own opening brace: its fields follow session_id.
            out.remove(start);
        } else {
            serde_json::to_writer(&mut *out, &self.event).expect("event serializes");
        }
    }

    /// Parse one stdout line back into a `Line` (tests, the sim, clients written in Rust).
    /// A session-less line gets an empty `session_id`.
    pub fn parse(line: &str) -> Result<Line, String> {
        let mut value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        let obj = value.as_object_mut().ok_or("not a JSON object")?;
        let session_id = match obj.remove("session_id") {
            Some(serde_json::Value::String(s)) => s,
            Some(_) => return Err("session_id is not a string".into()),
            None => String::new(),
        };
        let event: Event = serde_json::from_value(value).map_err(|e| e.to_string())?;
        Ok(Line { session_id, event })
    }
}

const fn f(name: &'static str, ty: FieldType) -> FieldSpec {
    FieldSpec {
        name,
        ty,
        required: true,
        values: &[],
    }
}

const fn e(name: &'static str, values: &'static [&'static str]) -> FieldSpec {
    FieldSpec {
        name,
        ty: FieldType::String,
        required: true,
        values,
    }
}

const fn opt(name: &'static str, ty: FieldType) -> FieldSpec {
    FieldSpec {
        name,
        ty,
        required: false,
        values: &[],
    }
}

/// One event type's shape.
#[derive(Debug, Clone, Copy)]
pub struct EventSpec {
    /// The `type` value.
    pub type_name: &'static str,
    /// Whether the line carries `session_id`.
    pub has_session_id: bool,
    /// Its fields in wire order.
    pub fields: &'static [FieldSpec],
}

/// Every event type, in the contract's order, with its fields in wire order.
pub const EVENT_FIELDS: &[EventSpec] = &[
    EventSpec {
        type_name: "token",
        has_session_id: true,
        fields: &[f("text", FieldType::String)],
    },
    EventSpec {
        type_name: "thinking",
        has_session_id: true,
        fields: &[f("text", FieldType::String)],
    },
    EventSpec {
        type_name: "message_done",
        has_session_id: true,
        fields: &[f("text", FieldType::String)],
    },
    EventSpec {
        type_name: "budget",
        has_session_id: true,
        fields: &[
            f("used_tokens", FieldType::UInt),
            f("context_tokens", FieldType::UInt),
        ],
    },
    EventSpec {
        type_name: "usage",
        has_session_id: true,
        fields: &[
            f("prompt_tokens", FieldType::UInt),
            f("completion_tokens", FieldType::UInt),
            f("cached_tokens", FieldType::UIntOrNull),
        ],
    },
    EventSpec {
        type_name: "tool_start",
        has_session_id: true,
        fields: &[
            f("call_id", FieldType::String),
            f("name", FieldType::String),
            f("args", FieldType::Object),
        ],
    },
    EventSpec {
        type_name: "tool_end",
        has_session_id: true,
        fields: &[
            f("call_id", FieldType::String),
            f("ok", FieldType::Bool),
            f("output", FieldType::String),
        ],
    },
    EventSpec {
        type_name: "harness_note",
        has_session_id: true,
        fields: &[
            f("call_id", FieldType::String),
            f("text", FieldType::String),
        ],
    },
    EventSpec {
        type_name: "retry",
        has_session_id: true,
        fields: &[
            f("attempt", FieldType::UInt),
            f("max_attempts", FieldType::UInt),
            f("reason", FieldType::String),
        ],
    },
    EventSpec {
        type_name: "diff",
        has_session_id: true,
        fields: &[
            f("call_id", FieldType::String),
            f("path", FieldType::String),
            f("diff", FieldType::String),
            f("added", FieldType::UInt),
            f("removed", FieldType::UInt),
        ],
    },
    EventSpec {
        type_name: "approval_request",
        has_session_id: true,
        fields: &[
            f("approval_id", FieldType::String),
            f("name", FieldType::String),
            f("summary", FieldType::String),
            f("detail", FieldType::String),
            e("reason", &["gate", "unapproved_source"]),
            f("source_path", FieldType::String),
            f("source_sha", FieldType::String),
            opt("env", FieldType::StringArray),
        ],
    },
    EventSpec {
        type_name: "approval_settled",
        has_session_id: true,
        fields: &[
            f("approval_id", FieldType::String),
            e(
                "outcome",
                &["approved", "declined", "timed_out", "cancelled"],
            ),
        ],
    },
    EventSpec {
        type_name: "refrozen",
        has_session_id: true,
        fields: &[
            f("tools", FieldType::StringArray),
            f("skills", FieldType::StringArray),
            f("changes", FieldType::ChangeArray),
        ],
    },
    EventSpec {
        type_name: "schemas_over_budget",
        has_session_id: true,
        fields: &[
            f("schema_tokens", FieldType::UInt),
            f("budget_tokens", FieldType::UInt),
        ],
    },
    EventSpec {
        type_name: "compacted",
        has_session_id: true,
        fields: &[
            f("tokens_before", FieldType::UInt),
            f("tokens_after", FieldType::UInt),
            f("compacted_messages", FieldType::UInt),
        ],
    },
    EventSpec {
        type_name: "hook_failed",
        has_session_id: true,
        fields: &[
            f("hook", FieldType::String),
            f("event", FieldType::String),
            f("detail", FieldType::String),
        ],
    },
    EventSpec {
        type_name: "turn_refused",
        has_session_id: true,
        fields: &[
            f("hook", FieldType::String),
            f("reason", FieldType::String),
            f("continuation", FieldType::UInt),
            f("continuations_left", FieldType::UInt),
        ],
    },
    EventSpec {
        type_name: "done",
        has_session_id: true,
        fields: &[f("stop_reason", FieldType::String)],
    },
    EventSpec {
        type_name: "error",
        has_session_id: true,
        fields: &[f("message", FieldType::String)],
    },
    EventSpec {
        type_name: "protocol_error",
        has_session_id: false,
        fields: &[f("message", FieldType::String)],
    },
    EventSpec {
        type_name: "approval_mode",
        has_session_id: false,
        fields: &[e("mode", &["auto", "ask", "readonly"])],
    },
];

/// Look up an event type's spec by its wire name.
pub fn event_spec(type_name: &str) -> Option<&'static EventSpec> {
    EVENT_FIELDS.iter().find(|s| s.type_name == type_name)
}
