//! The conversation the model sees: messages made of blocks, provider-neutral.
//!
//! Provider adapters in the shell turn a [`ModelRequest`] into each API's body; the session
//! record stores the same [`Message`] values, so `--continue` replays exactly what was sent.

use serde::{Deserialize, Serialize};

/// Who said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Block {
    /// Plain text (user prompt, assistant reply, a harness note, a hook's refusal reason).
    Text { text: String },
    /// Model reasoning kept for replay. `signature` is Anthropic's opaque signature (or the
    /// Responses API's encrypted reasoning item), round-tripped verbatim.
    Thinking {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A tool call the model made (assistant messages only).
    ToolUse {
        id: String,
        name: String,
        input: serde_json::Value,
    },
    /// A tool call's result (user messages only).
    ToolResult {
        id: String,
        ok: bool,
        output: String,
    },
}

impl Block {
    pub fn text(s: impl Into<String>) -> Block {
        Block::Text { text: s.into() }
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Block>,
}

impl Message {
    pub fn user_text(s: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: vec![Block::text(s)],
        }
    }

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
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// Everything one model request carries, provider-neutral. The shell's adapter builds the
/// HTTP body from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub system: String,
    pub tools: Vec<ToolSchema>,
    pub messages: Vec<Message>,
}
