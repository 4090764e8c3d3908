//! The handshake lines: `hello` (always first) and `transcript` (second, only when continued).

use serde::{Deserialize, Serialize};

use super::{PROTO, PROTOCOL_VERSION};

/// The first stdout line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Always `hello`.
    #[serde(rename = "type")]
    pub kind: HelloTag,
    /// The readable protocol id ([`super::PROTO`]).
    pub proto: String,
    /// The integer protocol version ([`super::PROTOCOL_VERSION`]).
    pub protocol_version: u32,
    /// The session's id.
    pub session_id: String,
    /// openmax's version.
    pub version: String,
    /// The project root.
    pub project: String,
    /// Whether the session continues an earlier one.
    pub continued: bool,
}

/// The literal `"hello"` type tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HelloTag {
    /// The `hello` tag.
    Hello,
}

impl Hello {
    /// A hello for this build.
    pub fn new(session_id: &str, version: &str, project: &str, continued: bool) -> Hello {
        Hello {
            kind: HelloTag::Hello,
            proto: PROTO.to_string(),
            protocol_version: PROTOCOL_VERSION,
            session_id: session_id.to_string(),
            version: version.to_string(),
            project: project.to_string(),
            continued,
        }
    }

    /// Serialize as one JSON line (no trailing newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("hello serializes")
    }
}

/// One message of a `transcript` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// The message's text.
    pub content: String,
}

/// The second stdout line of a continued session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transcript {
    /// Always `transcript`.
    #[serde(rename = "type")]
    pub kind: TranscriptTag,
    /// The session's id.
    pub session_id: String,
    /// The messages, oldest first.
    pub messages: Vec<TranscriptMessage>,
    /// Whether older messages were left out by the caps.
    pub truncated: bool,
}

/// The literal `"transcript"` type tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TranscriptTag {
    /// The `transcript` tag.
    Transcript,
}

/// Per-message cap of a transcript line, in characters.
pub const TRANSCRIPT_MESSAGE_CHARS: usize = 4096;
/// Cap of a transcript line's content, in bytes (256 KiB).
pub const TRANSCRIPT_CONTENT_BYTES: usize = 256 * 1024;

impl Transcript {
    /// Build a transcript line from the full history, applying the contract's caps: each
    /// message cut to 4096 characters on a character boundary, then the oldest messages dropped
    /// until the content fits 256 KiB. `truncated` is set when anything was cut.
    pub fn capped(session_id: &str, history: &[TranscriptMessage]) -> Transcript {
        let mut truncated = false;
        let mut kept: Vec<TranscriptMessage> = Vec::new();
        let mut total = 0usize;
        for m in history.iter().rev() {
            let content = match m.content.char_indices().nth(TRANSCRIPT_MESSAGE_CHARS) {
                Some((cut, _)) => {
                    truncated = true;
                    m.content[..cut].to_string()
                }
                None => m.content.clone(),
            };
            if total + content.len() > TRANSCRIPT_CONTENT_BYTES {
                truncated = true;
                break;
            }
            total += content.len();
            kept.push(TranscriptMessage {
                role: m.role.clone(),
                content,
            });
        }
        kept.reverse();
        Transcript {
            kind: TranscriptTag::Transcript,
            session_id: session_id.to_string(),
            messages: kept,
            truncated,
        }
    }

    /// Serialize as one JSON line (no trailing newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("transcript serializes")
    }
}
