//! The conversation the model sees: messages made of blocks, provider-neutral, and the one
//! place a request is shaped from it ([`ModelRequest::shaped`]).
//!
//! Provider adapters in the shell only translate a [`ModelRequest`] into each API's body; the
//! session record stores the same [`Message`] values, so `--continue` replays what was sent.
//!
//! Invariants of a shaped request, which every API needs:
//! - no message is empty, and roles alternate (Anthropic requires it; strict chat templates of
//!   local servers do too): consecutive messages of one role are merged, keeping block order;
//! - every tool call of an assistant message has exactly one result in the next user message
//!   (all three APIs reject a call without a result, or a result for no call): a missing result
//!   (a call cut off by a crash, a trimmed history) is filled in as a failed result saying so
//!   ([`MISSING_RESULT`]), and a result that answers no call of the message before it, or
//!   answers one twice, is dropped;
//! - in a user message the tool results come first (Anthropic requires them right after the
//!   `tool_use` turn).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The output of a tool call whose result is missing from the history.
pub const MISSING_RESULT: &str = "(no result was recorded for this call)";

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
    /// An image the model sees (user messages only): attached to a prompt, or read by a tool
    /// (it then follows the tool's result).
    Image(Image),
}

/// An image in the conversation. Every provider adapter sends it as its API's image block,
/// base64-encoded; the session record keeps [`Image::sha256`] and [`Image::path`] and the
/// shell stores the bytes once per session beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// The type sniffed from the bytes: `image/png`, `image/jpeg`, `image/gif` or
    /// `image/webp`.
    pub media_type: String,
    /// The bytes, base64 (standard alphabet, padded). Empty in a session record line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data: String,
    /// sha256 of the bytes, lowercase hex.
    pub sha256: String,
    /// Where it came from: the file's path as given, or a label (`acp:image`).
    pub path: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its width in pixels, when its header says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Its height in pixels, when its header says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
}

impl Image {
    /// How the image is named where a text stands for it (`image src/a.png, image/png, 1234
    /// bytes, 64×48`).
    pub fn describe(&self) -> String {
        let dims = match (self.width, self.height) {
            (Some(w), Some(h)) => format!(", {w}×{h}"),
            _ => String::new(),
        };
        format!(
            "image {}, {}, {} bytes{dims}",
            self.path, self.media_type, self.bytes
        )
    }
}

/// What starts the text of a harness note in the model's transcript: a note rides in a user
/// message as a text block of its own, and is never the person's words.
pub const NOTE_PREFIX: &str = "[openmax note] ";

impl Block {
    /// A text block.
    pub fn text(s: impl Into<String>) -> Block {
        Block::Text { text: s.into() }
    }

    /// A harness note's text block ([`NOTE_PREFIX`] and the note).
    pub fn note(note: &str) -> Block {
        Block::Text {
            text: format!("{NOTE_PREFIX}{note}"),
        }
    }

    /// Whether this is a harness note's text block.
    pub fn is_note(&self) -> bool {
        matches!(self, Block::Text { text } if is_note_text(text))
    }
}

/// Whether a text block's text is a harness note's.
pub fn is_note_text(text: &str) -> bool {
    text.starts_with(NOTE_PREFIX)
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

    /// Its text blocks joined, harness notes left out: what the person (or the model) said.
    pub fn said_text(&self) -> String {
        let mut out = String::new();
        for b in &self.content {
            match b {
                Block::Text { text } if !is_note_text(text) => out.push_str(text),
                _ => {}
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

/// Everything one model request carries, provider-neutral. The shell's adapter translates it
/// into the HTTP body, message for message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The system prompt.
    pub system: String,
    /// The tool schemas offered.
    pub tools: Vec<ToolSchema>,
    /// The conversation, as sent.
    pub messages: Vec<Message>,
}

impl ModelRequest {
    /// The request for `conversation`, shaped for every provider (see the module docs).
    pub fn shaped(system: &str, tools: &[ToolSchema], conversation: &[Message]) -> ModelRequest {
        ModelRequest {
            system: system.to_string(),
            tools: tools.to_vec(),
            messages: shape(conversation),
        }
    }
}

/// The messages of a request: merged by role, every call paired with one result, results
/// first in each user message.
fn shape(conversation: &[Message]) -> Vec<Message> {
    let mut messages = merge(conversation.iter().cloned());
    pair_results(&mut messages);
    // A user message left with nothing (it held only results of no call) goes, and its
    // neighbours of one role are merged again.
    let mut messages = merge(messages);
    for m in &mut messages {
        if m.role == Role::User {
            let (mut results, rest): (Vec<Block>, Vec<Block>) = std::mem::take(&mut m.content)
                .into_iter()
                .partition(|b| matches!(b, Block::ToolResult { .. }));
            results.extend(rest);
            m.content = results;
        }
    }
    messages
}

/// Consecutive messages of one role merged into one; empty messages dropped.
fn merge(messages: impl IntoIterator<Item = Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    for m in messages {
        if m.content.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.role == m.role => last.content.extend(m.content),
            Some(_) | None => out.push(m),
        }
    }
    out
}

fn call_ids(m: &Message) -> Vec<String> {
    m.content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, .. } => Some(id.clone()),
            Block::Text { .. }
            | Block::Thinking { .. }
            | Block::ToolResult { .. }
            | Block::Image(_) => None,
        })
        .collect()
}

/// Every call of an assistant message answered once in the next user message (missing ones
/// filled in first), and only those: other results are dropped. `msgs` alternate roles.
fn pair_results(msgs: &mut Vec<Message>) {
    let mut i = 0;
    while i < msgs.len() {
        match msgs[i].role {
            Role::User => {
                // Results here must answer the assistant message just before (none for the
                // first message).
                let calls: BTreeSet<String> = match i.checked_sub(1) {
                    Some(p) => call_ids(&msgs[p]).into_iter().collect(),
                    None => BTreeSet::new(),
                };
                let mut seen = BTreeSet::new();
                msgs[i].content.retain(|b| match b {
                    Block::ToolResult { id, .. } => calls.contains(id) && seen.insert(id.clone()),
                    Block::Text { .. }
                    | Block::Thinking { .. }
                    | Block::ToolUse { .. }
                    | Block::Image(_) => true,
                });
            }
            Role::Assistant => {
                let calls = call_ids(&msgs[i]);
                if !calls.is_empty() {
                    if msgs.get(i + 1).is_none() {
                        msgs.push(Message {
                            role: Role::User,
                            content: Vec::new(),
                        });
                    }
                    let answered: BTreeSet<String> = msgs[i + 1]
                        .content
                        .iter()
                        .filter_map(|b| match b {
                            Block::ToolResult { id, .. } => Some(id.clone()),
                            Block::Text { .. }
                            | Block::Thinking { .. }
                            | Block::ToolUse { .. }
                            | Block::Image(_) => None,
                        })
                        .collect();
                    let missing: Vec<Block> = calls
                        .into_iter()
                        .filter(|id| !answered.contains(id))
                        .map(|id| Block::ToolResult {
                            id,
                            ok: false,
                            output: MISSING_RESULT.to_string(),
                        })
                        .collect();
                    msgs[i + 1].content.splice(0..0, missing);
                }
            }
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaped(messages: &[Message]) -> Vec<Message> {
        ModelRequest::shaped("", &[], messages).messages
    }

    fn call(id: &str) -> Block {
        Block::ToolUse {
            id: id.into(),
            name: "shell".into(),
            input: serde_json::json!({}),
        }
    }

    fn result(id: &str) -> Block {
        Block::ToolResult {
            id: id.into(),
            ok: true,
            output: "out".into(),
        }
    }

    fn missing(id: &str) -> Block {
        Block::ToolResult {
            id: id.into(),
            ok: false,
            output: MISSING_RESULT.into(),
        }
    }

    #[test]
    fn consecutive_same_role_messages_merge_and_empty_ones_go() {
        let msgs = vec![
            Message::user_text("a"),
            Message {
                role: Role::User,
                content: vec![],
            },
            Message::user_text("b"),
            Message::assistant_text("c"),
            Message::user_text("d"),
        ];
        let m = shaped(&msgs);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].role, Role::User);
        assert_eq!(m[0].content, vec![Block::text("a"), Block::text("b")]);
        assert_eq!(m[2].plain_text(), "d");
    }

    #[test]
    fn missing_results_are_filled_and_stray_ones_dropped_results_first() {
        let msgs = vec![
            Message {
                role: Role::User,
                content: vec![Block::text("go"), result("stray")],
            },
            Message {
                role: Role::Assistant,
                content: vec![call("a"), call("b")],
            },
            Message {
                role: Role::User,
                content: vec![Block::text("next"), result("b"), result("b"), result("zzz")],
            },
            Message {
                role: Role::Assistant,
                content: vec![call("c")],
            },
        ];
        let m = shaped(&msgs);
        assert_eq!(m[0].content, vec![Block::text("go")]);
        assert_eq!(
            m[2].content,
            vec![missing("a"), result("b"), Block::text("next")]
        );
        assert_eq!(m.len(), 5);
        assert_eq!(m[4].role, Role::User);
        assert_eq!(m[4].content, vec![missing("c")]);
    }

    #[test]
    fn a_message_left_empty_goes_and_roles_still_alternate() {
        let msgs = vec![
            Message::assistant_text("hello"),
            Message {
                role: Role::User,
                content: vec![result("orphan")],
            },
            Message::assistant_text("again"),
            Message::user_text("q"),
        ];
        let m = shaped(&msgs);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].role, Role::Assistant);
        assert_eq!(
            m[0].content,
            vec![Block::text("hello"), Block::text("again")]
        );
        assert_eq!(m[1].content, vec![Block::text("q")]);
    }

    #[test]
    fn a_paired_conversation_is_only_merged() {
        let msgs = vec![
            Message::user_text("go"),
            Message {
                role: Role::Assistant,
                content: vec![Block::text("on it"), call("a")],
            },
            Message {
                role: Role::User,
                content: vec![result("a")],
            },
            Message::user_text("[openmax note] n"),
            Message::assistant_text("done"),
        ];
        let m = shaped(&msgs);
        assert_eq!(m.len(), 4);
        assert_eq!(
            m[2].content,
            vec![result("a"), Block::text("[openmax note] n")]
        );
    }
}
