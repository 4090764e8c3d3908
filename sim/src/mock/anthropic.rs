//! The Anthropic Messages streaming format (`POST /v1/messages`, `stream: true`).
//!
//! Emits `message_start` (usage with `input_tokens`, `cache_creation_input_tokens`,
//! `cache_read_input_tokens`, `output_tokens`) and a `ping`, then one content block per run of
//! same-kind items: `text` (`text_delta`), `thinking` (`thinking_delta`s, then a
//! `signature_delta` when the block closes), `tool_use` (`input_json_delta` in ≥2
//! `partial_json` pieces); completion is `message_delta` (`stop_reason`, `usage.output_tokens`)
//! then `message_stop`; an error is `event: error` with `{"type":"error","error":{…}}`.
//!
//! Usage: Anthropic's `input_tokens` excludes cache reads, so it carries the script's
//! `prompt_tokens - cached_tokens` and `cache_read_input_tokens` the cached count; a mapping
//! that adds `input_tokens + cache_read_input_tokens + cache_creation_input_tokens` gets the
//! script's `prompt_tokens` back. `cache_creation_input_tokens` is always 0.

use serde_json::{json, Value};

use super::encode::{push_event, split_args, thinking_signature, RequestFacts, TokenUsage};
use crate::script::StreamItem;

/// The open content block, closed lazily.
enum Open {
    Text,
    Thinking { text: String },
    Tool,
}

pub(crate) struct Encoder {
    seq: u64,
    model: String,
    usage: TokenUsage,
    next_index: u32,
    open: Option<(u32, Open)>,
}

impl Encoder {
    pub(crate) fn new(facts: &RequestFacts, usage: TokenUsage) -> Encoder {
        Encoder {
            seq: facts.seq,
            model: facts.model.clone(),
            usage,
            next_index: 0,
            open: None,
        }
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        let Some((index, open)) = self.open.take() else {
            return;
        };
        match open {
            Open::Thinking { text } => push_event(
                out,
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "signature_delta", "signature": thinking_signature(&text)}}),
            ),
            Open::Text | Open::Tool => {}
        }
        push_event(
            out,
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        );
    }

    /// Start a new block (closing the open one) and return its index.
    fn start(&mut self, out: &mut Vec<u8>, block: Value, open: Open) -> u32 {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        push_event(
            out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
        self.open = Some((index, open));
        index
    }

    fn delta(out: &mut Vec<u8>, index: u32, delta: Value) {
        push_event(
            out,
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
    }
}

impl super::encode::Encoder for Encoder {
    fn prelude(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        push_event(
            &mut out,
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": format!("msg_mock_{:04}", self.seq),
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": self.usage.input.saturating_sub(self.usage.cached),
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": self.usage.cached,
                    "output_tokens": 1
                }
            }}),
        );
        push_event(&mut out, "ping", &json!({"type": "ping"}));
        out
    }

    fn item(&mut self, item: &StreamItem) -> Vec<u8> {
        let mut out = Vec::new();
        match item {
            StreamItem::Text { text } => {
                let index = match &self.open {
                    Some((index, Open::Text)) => *index,
                    Some((_, Open::Thinking { .. } | Open::Tool)) | None => {
                        self.start(&mut out, json!({"type": "text", "text": ""}), Open::Text)
                    }
                };
                Self::delta(&mut out, index, json!({"type": "text_delta", "text": text}));
            }
            StreamItem::Thinking { text } => {
                let index = match &mut self.open {
                    Some((index, Open::Thinking { text: whole })) => {
                        whole.push_str(text);
                        *index
                    }
                    Some((_, Open::Text | Open::Tool)) | None => self.start(
                        &mut out,
                        json!({"type": "thinking", "thinking": "", "signature": ""}),
                        Open::Thinking { text: text.clone() },
                    ),
                };
                Self::delta(
                    &mut out,
                    index,
                    json!({"type": "thinking_delta", "thinking": text}),
                );
            }
            StreamItem::ToolCall { id, name, args } => {
                let index = self.start(
                    &mut out,
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    Open::Tool,
                );
                for piece in split_args(&args.to_string()) {
                    Self::delta(
                        &mut out,
                        index,
                        json!({"type": "input_json_delta", "partial_json": piece}),
                    );
                }
            }
            StreamItem::Usage { .. } => {}
            // Damaged by `damage::step` after rendering `of`.
            StreamItem::Corrupt { of, .. } => return self.item(of),
        }
        out
    }

    fn complete(&mut self, finish: &str) -> Vec<u8> {
        let mut out = Vec::new();
        self.close(&mut out);
        push_event(
            &mut out,
            "message_delta",
            &json!({"type": "message_delta",
                    "delta": {"stop_reason": finish, "stop_sequence": null},
                    "usage": {"output_tokens": self.usage.output}}),
        );
        push_event(&mut out, "message_stop", &json!({"type": "message_stop"}));
        out
    }

    fn error(&mut self, error: &str, message: &str) -> Vec<u8> {
        let mut out = Vec::new();
        push_event(
            &mut out,
            "error",
            &json!({"type": "error", "error": {"type": error, "message": message}}),
        );
        out
    }
}
