//! What the three flavor encoders share (the [`Encoder`] trait they implement, SSE framing,
//! the request facts, usage, argument splitting and thinking signatures), so the encoders and
//! [`super::render`], which drives them, depend on this module and not on each other.

use serde_json::Value;

use crate::script::StreamItem;

/// Token counts a stream reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenUsage {
    /// All prompt tokens, cached ones included (OpenAI's `prompt_tokens`/`input_tokens`).
    pub input: u64,
    pub output: u64,
    pub cached: u64,
}

/// What the rendering needs to know about the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestFacts {
    /// 1-based number of the reply being served (for deterministic ids).
    pub seq: u64,
    /// The request's `model`, or `mock-model`.
    pub model: String,
    /// The request body's length in bytes (for estimated usage).
    pub body_len: usize,
    /// Chat Completions: `stream_options.include_usage` was true.
    pub include_usage: bool,
    /// Responses: `include` named `reasoning.encrypted_content`.
    pub encrypted_reasoning: bool,
}

impl RequestFacts {
    /// Read the facts from a request body (any JSON; missing fields take defaults).
    pub fn from_body(seq: u64, body: &Value, body_len: usize) -> RequestFacts {
        let model = body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("mock-model")
            .to_string();
        let include_usage = body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let encrypted_reasoning =
            body.get("include")
                .and_then(Value::as_array)
                .is_some_and(|list| {
                    list.iter()
                        .any(|v| v.as_str() == Some("reasoning.encrypted_content"))
                });
        RequestFacts {
            seq,
            model,
            body_len,
            include_usage,
            encrypted_reasoning,
        }
    }
}

/// The usage a stream reports: the last `Usage` item's counts, or an estimate (input ≈ request
/// bytes / 4, output ≈ generated characters / 4, at least 1 each, nothing cached).
pub fn usage_for(items: &[StreamItem], body_len: usize) -> TokenUsage {
    let scripted = items.iter().rev().find_map(|item| match item {
        StreamItem::Usage {
            prompt_tokens,
            completion_tokens,
            cached_tokens,
        } => Some(TokenUsage {
            input: *prompt_tokens,
            output: *completion_tokens,
            cached: cached_tokens.unwrap_or(0),
        }),
        StreamItem::Text { .. }
        | StreamItem::Thinking { .. }
        | StreamItem::ToolCall { .. }
        | StreamItem::Corrupt { .. } => None,
    });
    fn generated(item: &StreamItem) -> usize {
        match item {
            StreamItem::Text { text } | StreamItem::Thinking { text } => text.len(),
            StreamItem::ToolCall { name, args, .. } => name.len() + args.to_string().len(),
            StreamItem::Usage { .. } => 0,
            StreamItem::Corrupt { of, .. } => generated(of),
        }
    }
    scripted.unwrap_or_else(|| {
        let generated: usize = items.iter().map(generated).sum();
        TokenUsage {
            input: (body_len as u64 / 4).max(1),
            output: (generated as u64 / 4).max(1),
            cached: 0,
        }
    })
}

/// Split a tool call's compact JSON arguments into the pieces streamed as deltas: three pieces
/// (two for two characters) on char boundaries, one piece only for a one-character value.
pub fn split_args(json: &str) -> Vec<String> {
    let chars: Vec<char> = json.chars().collect();
    let pieces = match chars.len() {
        0 | 1 => 1,
        2 => 2,
        _ => 3,
    };
    let per = chars.len().div_ceil(pieces).max(1);
    let mut out: Vec<String> = chars.chunks(per).map(|c| c.iter().collect()).collect();
    if out.is_empty() {
        out.push(String::new());
    }
    out
}

/// The deterministic signature the mock attaches to a thinking block (Anthropic
/// `signature_delta`, Responses `encrypted_content`), so tests can check it is sent back.
pub fn thinking_signature(text: &str) -> String {
    // FNV-1a, 64-bit: stable across runs and platforms.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("mocksig{hash:016x}")
}

/// The fixed `created` timestamp every mock response reports.
pub(crate) const CREATED: u64 = 1_700_000_000;

/// One flavor's event writer. Each call returns the bytes of zero or more SSE events.
pub(crate) trait Encoder {
    fn prelude(&mut self) -> Vec<u8>;
    fn item(&mut self, item: &StreamItem) -> Vec<u8>;
    /// Close any open block and send the completion signal with `finish` (already resolved).
    fn complete(&mut self, finish: &str) -> Vec<u8>;
    /// The flavor's in-stream error event(s) with this type/code and message.
    fn error(&mut self, error: &str, message: &str) -> Vec<u8>;
}

/// Append one named SSE event (`event:` + one `data:` line) to `out`.
pub(crate) fn push_event(out: &mut Vec<u8>, name: &str, data: &Value) {
    out.extend_from_slice(format!("event: {name}\ndata: {data}\n\n").as_bytes());
}

/// Append one unnamed SSE event (a `data:` line only) to `out`.
pub(crate) fn push_data(out: &mut Vec<u8>, data: &str) {
    out.extend_from_slice(format!("data: {data}\n\n").as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_args_gives_at_least_two_pieces_that_rejoin() {
        for json in ["{}", "{\"a\":1}", "{\"path\":\"src/ünï.rs\",\"n\":[1,2,3]}"] {
            let pieces = split_args(json);
            assert!(pieces.len() >= 2, "{json}: {pieces:?}");
            assert_eq!(pieces.concat(), json);
        }
        assert_eq!(split_args("1"), vec!["1".to_string()]);
    }

    #[test]
    fn usage_prefers_the_last_scripted_item_and_estimates_otherwise() {
        let items = vec![
            StreamItem::Text {
                text: "hello world!".into(),
            },
            StreamItem::Usage {
                prompt_tokens: 10,
                completion_tokens: 3,
                cached_tokens: Some(4),
            },
        ];
        assert_eq!(
            usage_for(&items, 400),
            TokenUsage {
                input: 10,
                output: 3,
                cached: 4
            }
        );
        assert_eq!(
            usage_for(&items[..1], 400),
            TokenUsage {
                input: 100,
                output: 3,
                cached: 0
            }
        );
    }

    #[test]
    fn signature_is_stable_and_text_dependent() {
        assert_eq!(thinking_signature("a"), thinking_signature("a"));
        assert_ne!(thinking_signature("a"), thinking_signature("b"));
    }
}
