//! Parsing one record line, and telling a line torn by a crash from a corrupt one.
//!
//! Invariant: only bytes that are not valid JSON can count as torn. A line that is valid JSON
//! but of an unknown version or shape was written whole by someone (a newer openmax): it is
//! reported as corrupt and never cut off, so no data is ever destroyed by a resume.

use std::borrow::Cow;

use openmax_core::conversation::Role;
use openmax_core::record::{RecordLine, RECORD_VERSION};
use serde::Deserialize;

/// Why a line is not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// Not valid JSON (what a torn write leaves).
    Unparseable(String),
    /// Valid JSON but not a record this build reads (unknown `v`, unknown `rec`, bad fields).
    Invalid(String),
}

impl LineError {
    pub fn message(&self) -> &str {
        match self {
            LineError::Unparseable(m) | LineError::Invalid(m) => m,
        }
    }
}

/// Parse one line (without its newline).
pub fn parse_line(bytes: &[u8]) -> Result<RecordLine, LineError> {
    match serde_json::from_slice::<RecordLine>(bytes) {
        Ok(line) if line.v == RECORD_VERSION => Ok(line),
        Ok(line) => Err(unknown_version(line.v)),
        Err(e) if e.is_syntax() || e.is_eof() => {
            Err(LineError::Unparseable(format!("not valid JSON: {e}")))
        }
        Err(e) => {
            #[derive(Deserialize)]
            struct Version {
                v: u64,
            }
            match serde_json::from_slice::<Version>(bytes) {
                Ok(Version { v }) if v != u64::from(RECORD_VERSION) => Err(unknown_version(v)),
                _ => Err(LineError::Invalid(format!("not a record line: {e}"))),
            }
        }
    }
}

/// The `rec` values of [`openmax_core::record::Record`] (kept in step by a test).
pub const RECORD_KINDS: [&str; 6] = [
    "session",
    "message",
    "compaction",
    "mode_changed",
    "refrozen",
    "turn_end",
];

/// What a transcript needs from a `message` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextView {
    pub role: Role,
    /// The message carries a tool result (so it is tool traffic, not a user prompt).
    pub has_tool_result: bool,
    /// Its text blocks joined, harness notes left out.
    pub text: String,
}

/// A light parse for reading backwards: checks that the line is valid JSON with a known
/// version and record kind, and returns the text view of a `message` line (`None` for other
/// kinds). It does not build the full record, so it skips large tool outputs and arguments
/// without copying them.
pub fn parse_text_view(bytes: &[u8]) -> Result<Option<TextView>, LineError> {
    #[derive(Deserialize)]
    struct Lite<'a> {
        v: u64,
        #[serde(borrow)]
        rec: Cow<'a, str>,
        #[serde(default, borrow)]
        message: Option<LiteMessage<'a>>,
    }
    #[derive(Deserialize)]
    struct LiteMessage<'a> {
        role: Role,
        #[serde(borrow)]
        content: Vec<LiteBlock<'a>>,
    }
    #[derive(Deserialize)]
    struct LiteBlock<'a> {
        #[serde(borrow)]
        kind: Cow<'a, str>,
        #[serde(default, borrow)]
        text: Option<Cow<'a, str>>,
    }
    let lite: Lite = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            LineError::Unparseable(format!("not valid JSON: {e}"))
        } else {
            LineError::Invalid(format!("not a record line: {e}"))
        }
    })?;
    if lite.v != u64::from(RECORD_VERSION) {
        return Err(unknown_version(lite.v));
    }
    if !RECORD_KINDS.contains(&lite.rec.as_ref()) {
        return Err(LineError::Invalid(format!(
            "unknown record kind {:?}",
            lite.rec
        )));
    }
    if lite.rec != "message" {
        return Ok(None);
    }
    let Some(m) = lite.message else {
        return Err(LineError::Invalid(
            "a message record without a message".to_string(),
        ));
    };
    let mut text = String::new();
    let mut has_tool_result = false;
    for b in &m.content {
        match b.kind.as_ref() {
            // A harness note rides in a user message but is not the person's words.
            "text" => {
                let t = b.text.as_deref().unwrap_or("");
                if !openmax_core::conversation::is_note_text(t) {
                    text.push_str(t);
                }
            }
            "tool_result" => has_tool_result = true,
            _ => {}
        }
    }
    Ok(Some(TextView {
        role: m.role,
        has_tool_result,
        text,
    }))
}

fn unknown_version(v: impl std::fmt::Display) -> LineError {
    LineError::Invalid(format!(
        "unknown record version {v} (this openmax reads version {RECORD_VERSION})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use openmax_core::conversation::{Block, Message};
    use openmax_core::record::Record;
    use openmax_core::wire::Mode;

    fn samples() -> Vec<Record> {
        vec![
            Record::Session {
                session_id: "s".into(),
                project: "/p".into(),
                system: "sys".into(),
                tools: vec![],
            },
            Record::Message {
                message: Message {
                    role: Role::User,
                    content: vec![
                        Block::ToolResult {
                            id: "c".into(),
                            ok: true,
                            output: "out".into(),
                        },
                        Block::text("note"),
                    ],
                },
            },
            Record::Compaction {
                messages: vec![],
                tokens_before: 1,
                tokens_after: 1,
                compacted_messages: 1,
            },
            Record::ModeChanged { mode: Mode::Ask },
            Record::Refrozen {
                system: "s".into(),
                tools: vec![],
            },
            Record::TurnEnd {
                stop_reason: "stop".into(),
                turn: None,
            },
        ]
    }

    #[test]
    fn record_kinds_match_the_record_enum() {
        let kinds: Vec<String> = samples()
            .into_iter()
            .map(|r| {
                let v: serde_json::Value =
                    serde_json::from_str(&RecordLine::new(r).to_json()).expect("json");
                v["rec"].as_str().expect("rec").to_string()
            })
            .collect();
        assert_eq!(kinds, RECORD_KINDS);
    }

    #[test]
    fn text_view_agrees_with_the_full_parse() {
        for r in samples() {
            let json = RecordLine::new(r.clone()).to_json();
            let view = parse_text_view(json.as_bytes()).expect("parses");
            match r {
                Record::Message { message } => {
                    let view = view.expect("a message");
                    assert_eq!(view.text, message.plain_text());
                    assert!(view.has_tool_result);
                    assert_eq!(view.role, Role::User);
                }
                _ => assert_eq!(view, None),
            }
        }
        assert!(matches!(
            parse_text_view(b"{\"v\":2,\"rec\":\"message\"}"),
            Err(LineError::Invalid(m)) if m.contains("unknown record version 2")
        ));
        assert!(matches!(
            parse_text_view(b"{\"v\":1,\"rec\":\"nope\"}"),
            Err(LineError::Invalid(_))
        ));
        assert!(matches!(
            parse_text_view(b"{\"v\":1,\"rec"),
            Err(LineError::Unparseable(_))
        ));
    }
}
