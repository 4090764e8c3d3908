//! Rendering one scripted stream ([`crate::script::Reply::Stream`]) into the bytes a provider
//! sends, split the way the server paces them: a prelude sent with the headers, one chunk per
//! script item (sent `delay_ms` apart), and how the body ends.
//!
//! Pure and deterministic: the same script and request give the same bytes (fixed ids and
//! timestamps derived from the request's sequence number). Invariants:
//! - every script item yields exactly one step (possibly empty, e.g. a `Usage` item, whose
//!   counts are reported where the flavor reports usage);
//! - a block of the block-structured flavors (Anthropic content blocks, Responses output items)
//!   is closed lazily, when the next item of another kind arrives or at completion, so a run of
//!   `Text` items is one block with one delta per item;
//! - a tool call's JSON arguments are split into at least two pieces whenever the compact JSON
//!   has two or more characters.

use bytes::Bytes;
use serde_json::Value;

use super::{anthropic, chat, responses};
use crate::script::{Fault, Flavor, StreamEnd, StreamItem};

/// The bytes of one scripted stream, in sending order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// Sent at once with the 200 headers (Anthropic `message_start` + `ping`; Responses
    /// `response.created` + `response.in_progress`; Chat the first chunk with the role).
    pub prelude: Bytes,
    /// One entry per script item, in order (empty for items that emit nothing in place).
    pub steps: Vec<Bytes>,
    /// How the body ends after the steps.
    pub tail: Tail,
}

/// How a rendered body ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// Send these bytes (the completion or error events; empty for a clean EOF), then end the
    /// body properly (the terminating chunk).
    End(Bytes),
    /// Cut the connection: no terminating chunk.
    Abort,
    /// Keep the body open and silent until the client goes away or the server stops.
    Stall,
}

impl Rendered {
    /// Every byte a client sees for a stream that ends (`End`), for checks on captured streams.
    pub fn concat(&self) -> Vec<u8> {
        let mut out = self.prelude.to_vec();
        for step in &self.steps {
            out.extend_from_slice(step);
        }
        if let Tail::End(bytes) = &self.tail {
            out.extend_from_slice(bytes);
        }
        out
    }
}

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

/// Render a scripted stream in `flavor`'s wire format for the request described by `facts`.
pub fn render_stream(
    flavor: Flavor,
    facts: &RequestFacts,
    items: &[StreamItem],
    end: &StreamEnd,
) -> Rendered {
    let usage = usage_for(items, facts.body_len);
    let mut enc: Box<dyn Encoder> = match flavor {
        Flavor::Anthropic => Box::new(anthropic::Encoder::new(facts, usage)),
        Flavor::Openai => Box::new(responses::Encoder::new(facts, usage)),
        Flavor::OpenaiChat => Box::new(chat::Encoder::new(facts, usage)),
    };
    let prelude = Bytes::from(enc.prelude());
    let steps = items
        .iter()
        .map(|item| Bytes::from(step(enc.as_mut(), item)))
        .collect();
    let tail = match end {
        StreamEnd::Complete { finish } => {
            let has_tools = items
                .iter()
                .any(|i| matches!(i, StreamItem::ToolCall { .. }));
            let finish = finish
                .clone()
                .unwrap_or_else(|| flavor.default_finish(has_tools).to_string());
            Tail::End(Bytes::from(enc.complete(&finish)))
        }
        StreamEnd::Error { error, message } => Tail::End(Bytes::from(enc.error(error, message))),
        StreamEnd::CleanEof => Tail::End(Bytes::new()),
        StreamEnd::Abort => Tail::Abort,
        StreamEnd::Stall => Tail::Stall,
    };
    Rendered {
        prelude,
        steps,
        tail,
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

/// The bytes of one script item; a [`StreamItem::Corrupt`] one is rendered, then damaged.
fn step(enc: &mut dyn Encoder, item: &StreamItem) -> Vec<u8> {
    let StreamItem::Corrupt { of, fault } = item else {
        return enc.item(item);
    };
    let with_text = |text: &str| -> Option<StreamItem> {
        let text = format!("{text}{DAMAGE_MARK}");
        match of.as_ref() {
            StreamItem::Text { .. } => Some(StreamItem::Text { text }),
            StreamItem::Thinking { .. } => Some(StreamItem::Thinking { text }),
            StreamItem::ToolCall { .. } | StreamItem::Usage { .. } | StreamItem::Corrupt { .. } => {
                None
            }
        }
    };
    let text = match of.as_ref() {
        StreamItem::Text { text } | StreamItem::Thinking { text } => text.as_str(),
        StreamItem::ToolCall { .. } | StreamItem::Usage { .. } | StreamItem::Corrupt { .. } => "",
    };
    let replacement: &[u8] = match fault {
        Fault::CutJson => return cut_last_event(enc.item(of)),
        Fault::LoneSurrogate => b"\\ud800",
        Fault::InvalidUtf8 => b"\xff",
    };
    match with_text(text) {
        Some(marked) => replace_all(&enc.item(&marked), DAMAGE_MARK.as_bytes(), replacement),
        None => cut_last_event(enc.item(of)),
    }
}

/// A private-use character the damage replaces (serde_json writes it unescaped).
const DAMAGE_MARK: &str = "\u{E000}";

/// Cut the JSON of the last `data:` line in half; with no data line, append an event whose
/// JSON is cut.
fn cut_last_event(mut bytes: Vec<u8>) -> Vec<u8> {
    let needle = b"data: ";
    let Some(start) = bytes
        .windows(needle.len())
        .rposition(|w| w == needle)
        .map(|i| i + needle.len())
    else {
        bytes.extend_from_slice(b"data: {\"type\":\"cont\n\n");
        return bytes;
    };
    let end = bytes[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| start + i);
    let half = start + (end - start) / 2;
    bytes.drain(half..end);
    bytes
}

fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
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
    fn corrupt_items_damage_the_last_event() {
        let facts = RequestFacts::from_body(1, &Value::Null, 10);
        for flavor in [Flavor::Anthropic, Flavor::Openai, Flavor::OpenaiChat] {
            for fault in [Fault::CutJson, Fault::LoneSurrogate, Fault::InvalidUtf8] {
                let item = StreamItem::Corrupt {
                    of: Box::new(StreamItem::Text { text: "hi".into() }),
                    fault,
                };
                let r = render_stream(flavor, &facts, &[item], &StreamEnd::CleanEof);
                let step = &r.steps[0];
                let last = step
                    .split(|&b| b == b'\n')
                    .rfind(|l| l.starts_with(b"data: "))
                    .unwrap();
                let parsed = std::str::from_utf8(&last[6..])
                    .ok()
                    .and_then(|s| serde_json::from_str::<Value>(s).ok());
                assert!(parsed.is_none(), "{flavor:?} {fault:?}: {last:?}");
            }
            let tool = StreamItem::Corrupt {
                of: Box::new(StreamItem::ToolCall {
                    id: "c".into(),
                    name: "read_file".into(),
                    args: serde_json::json!({"path": "a"}),
                }),
                fault: Fault::LoneSurrogate,
            };
            let r = render_stream(flavor, &facts, &[tool], &StreamEnd::CleanEof);
            let bytes = String::from_utf8(r.steps[0].to_vec()).unwrap();
            let last = bytes.lines().rfind(|l| l.starts_with("data: ")).unwrap();
            assert!(serde_json::from_str::<Value>(&last[6..]).is_err(), "{last}");
        }
    }

    #[test]
    fn signature_is_stable_and_text_dependent() {
        assert_eq!(thinking_signature("a"), thinking_signature("a"));
        assert_ne!(thinking_signature("a"), thinking_signature("b"));
    }
}
