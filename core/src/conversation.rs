//! The conversation the model sees: messages made of blocks, provider-neutral.
//!
//! Provider adapters in the shell turn a [`ModelRequest`] into each API's body; the session
//! record stores the same [`Message`] values, so `--continue` replays exactly what was sent.

use serde::{Deserialize, Serialize};

/// Who said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user (prompts, tool results, harness notes).
    User,
    /// The model.
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Block {
    /// Plain text (user prompt, assistant reply, a harness note, a hook's refusal reason).
    Text {
        /// The text.
        text: String,
    },
    /// Model reasoning kept for replay. `signature` is Anthropic's opaque signature (or the
    /// Responses API's encrypted reasoning item), round-tripped verbatim.
    Thinking {
        /// The thinking text.
        text: String,
        /// The provider's signature, sent back verbatim.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A tool call the model made (assistant messages only).
    ToolUse {
        /// The provider's call id.
        id: String,
        /// The tool's name.
        name: String,
        /// The model's arguments.
        input: serde_json::Value,
    },
    /// A tool call's result (user messages only).
    ToolResult {
        /// The call this answers.
        id: String,
        /// Whether the tool succeeded.
        ok: bool,
        /// What the model is told.
        output: String,
    },
}

impl Block {
    /// A text block.
    pub fn text(s: impl Into<String>) -> Block {
        Block::Text { text: s.into() }
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said, in order.
    pub content: Vec<Block>,
}

impl Message {
    /// A user message of one text block.
    pub fn user_text(s: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: vec![Block::text(s)],
        }
    }

    /// An assistant message of one text block.
    pub fn assistant_text(s: impl Into<String>) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![Block::text(s)],
        }
    }

    /// The text blocks joined (what a transcript line shows).
    pub fn plain_text(&self) -> String {
        let mut out = String::new();
        for b in &self.content {
            if let Block::Text { text } = b {
                out.push_str(text);
            }
        }
        out
    }
}

/// A tool's schema as frozen for the session and sent with every request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// The tool's name as the model calls it.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// Everything one model request carries, provider-neutral. The shell's adapter builds the
/// HTTP body from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The system prompt.
    pub system: String,
    /// The tool schemas offered.
    pub tools: Vec<ToolSchema>,
    /// The conversation, as sent.
    pub messages: Vec<Message>,
}
