//! The token estimator behind the `budget` event (and, later, the compaction threshold).
//!
//! The estimate is deliberately simple and documented so that clients and tests can reproduce
//! it:
//! - text (system prompt, text and thinking blocks, tool results): characters / 4, rounded up;
//! - JSON (tool-call inputs, the frozen tool schemas `{name, description, parameters}`):
//!   the length of its compact serialization / 4, rounded up;
//! - every message costs 4 more tokens of framing.
//!
//! The contract's scaling: when the server reported more prompt tokens for the session's last
//! request than the estimate of that request's body, every later estimate is multiplied by
//! `reported / estimated` (kept as an exact ratio, rounded up). When it reported no more, no
//! scaling applies. Compaction (issue 9) will read [`estimate_request`] and [`Scale`] from here.

use crate::conversation::{Block, Message, ModelRequest, ToolSchema};

/// Framing tokens counted per message.
pub const MESSAGE_OVERHEAD: u64 = 4;

/// Estimated tokens of a text: characters / 4, rounded up.
pub fn estimate_text(s: &str) -> u64 {
    (s.chars().count() as u64).div_ceil(4)
}

/// Estimated tokens of a JSON value: compact serialization length / 4, rounded up.
pub fn estimate_json(v: &serde_json::Value) -> u64 {
    (v.to_string().len() as u64).div_ceil(4)
}

/// Estimated tokens of one block.
pub fn estimate_block(b: &Block) -> u64 {
    match b {
        Block::Text { text } => estimate_text(text),
        Block::Thinking { text, .. } => estimate_text(text),
        Block::ToolUse { name, input, .. } => estimate_text(name) + estimate_json(input),
        Block::ToolResult { output, .. } => estimate_text(output),
    }
}

/// Estimated tokens of one message.
pub fn estimate_message(m: &Message) -> u64 {
    MESSAGE_OVERHEAD + m.content.iter().map(estimate_block).sum::<u64>()
}

/// Estimated tokens of the frozen tool schemas re-sent with every request.
pub fn estimate_schemas(tools: &[ToolSchema]) -> u64 {
    tools
        .iter()
        .map(|t| {
            estimate_json(&serde_json::json!({
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            }))
        })
        .sum()
}

/// Estimated tokens of a whole request: system prompt, schemas and messages.
pub fn estimate_request(system: &str, tools: &[ToolSchema], messages: &[Message]) -> u64 {
    estimate_text(system)
        + estimate_schemas(tools)
        + messages.iter().map(estimate_message).sum::<u64>()
}

/// Estimated tokens of a [`ModelRequest`].
pub fn estimate_body(req: &ModelRequest) -> u64 {
    estimate_request(&req.system, &req.tools, &req.messages)
}

/// The scale-up learned from the last request: the server reported `reported` prompt tokens
/// for a body estimated at `estimated` (only kept when `reported > estimated`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    pub reported: u64,
    pub estimated: u64,
}

impl Scale {
    /// The scale learned from one request, or `None` when the server reported no more than
    /// the estimate (or reported nothing useful).
    pub fn learn(reported: u64, estimated: u64) -> Option<Scale> {
        if estimated > 0 && reported > estimated {
            Some(Scale {
                reported,
                estimated,
            })
        } else {
            None
        }
    }

    /// `estimate * reported / estimated`, rounded up, saturating.
    pub fn apply(scale: Option<Scale>, estimate: u64) -> u64 {
        match scale {
            None => estimate,
            Some(s) => {
                let v = (estimate as u128 * s.reported as u128).div_ceil(s.estimated as u128);
                u64::try_from(v).unwrap_or(u64::MAX)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_scale() {
        assert_eq!(estimate_text(""), 0);
        assert_eq!(estimate_text("abcd"), 1);
        assert_eq!(estimate_text("abcde"), 2);
        assert_eq!(estimate_message(&Message::user_text("abcd")), 5);
        assert_eq!(Scale::learn(10, 20), None);
        let s = Scale::learn(30, 20);
        assert_eq!(Scale::apply(s, 10), 15);
        assert_eq!(Scale::apply(None, 10), 10);
    }
}
