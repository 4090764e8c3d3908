//! Session record lines: the append-only, self-describing, versioned JSONL a session is kept as.
//!
//! The core asks for records to be persisted with [`crate::machine::Effect::Persist`] and, where
//! the contract says an event follows persistence, emits that event only after the ack. The shell
//! appends each record as one line `{"v":1,"rec":"<kind>",…}`.

use serde::{Deserialize, Serialize};

use crate::conversation::{Message, ToolSchema};
use crate::machine::CheckpointMoment;
use crate::wire::{Mode, StopReason};

/// The record format version written in every line's `v`.
pub const RECORD_VERSION: u32 = 1;

/// One record line's payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rec", rename_all = "snake_case")]
pub enum Record {
    /// The session's first line: what the model was given.
    Session {
        /// The session's id.
        session_id: String,
        /// The project root.
        project: String,
        /// The system prompt.
        system: String,
        /// The tool schemas.
        tools: Vec<ToolSchema>,
    },
    /// A message added to the conversation (user prompt, assistant reply, tool results,
    /// a harness note, a hook's refusal reason).
    Message {
        /// The message.
        message: Message,
    },
    /// A forced compaction: the conversation from here on is `messages` (replacing all earlier
    /// ones), with the receipt's figures.
    Compaction {
        /// The conversation from here on.
        messages: Vec<Message>,
        /// The receipt's estimate before.
        tokens_before: u64,
        /// The receipt's estimate after.
        tokens_after: u64,
        /// The receipt's count of messages cut or stubbed.
        compacted_messages: u64,
    },
    /// The approval mode changed.
    ModeChanged {
        /// The new mode.
        mode: Mode,
    },
    /// A refreeze: the new prompt and schemas in force from here on.
    Refrozen {
        /// The new system prompt.
        system: String,
        /// The new tool schemas.
        tools: Vec<ToolSchema>,
    },
    /// A turn ended (stop reason), so a resume knows turn boundaries.
    TurnEnd {
        /// The `done` line's stop reason.
        stop_reason: StopReason,
        /// The turn's number in the session (absent in records of older versions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<u64>,
    },
    /// The project's files were recorded for undo before the turn's first write.
    Checkpoint {
        /// The turn's number in the session.
        turn: u64,
        /// Which checkpoint of the turn (`before`).
        moment: CheckpointMoment,
        /// The checkpoint's id in the store under `$OPENMAX_HOME`.
        id: String,
    },
}

/// A record with its version, as one line is written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordLine {
    /// The record format's version.
    pub v: u32,
    /// The payload.
    #[serde(flatten)]
    pub record: Record,
}

impl RecordLine {
    /// The line for `record` at the current version.
    pub fn new(record: Record) -> RecordLine {
        RecordLine {
            v: RECORD_VERSION,
            record,
        }
    }

    /// One JSON line, no newline.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("record serializes")
    }
}
