//! The Chat Completions streaming format (`POST /v1/chat/completions`, `stream: true`), as
//! OpenAI, vLLM, Ollama, llama.cpp's server and OpenRouter send it.
//!
//! Unnamed `data:` events, each a `chat.completion.chunk` with `choices[0].delta`: first
//! `{"role":"assistant","content":""}`; then `content` per text item, `reasoning_content` per
//! thinking item; a tool call is `tool_calls[{index, id, type, function{name, arguments:""}}]`
//! then `tool_calls[{index, function{arguments}}]` in ≥2 pieces (indexes count calls from 0).
//! Completion is a chunk with an empty delta and `finish_reason`, then, when the request set
//! `stream_options.include_usage`, a chunk with `choices: []` and `usage` (`prompt_tokens`,
//! `completion_tokens`, `total_tokens`, `prompt_tokens_details.cached_tokens`), then
//! `data: [DONE]`. With `include_usage` every other chunk carries `"usage": null`, as OpenAI
//! does. An error is `data: {"error":{"message","type","code"}}` and the body ends (no `[DONE]`).

use serde_json::{json, Value};

use super::encode::{push_data, split_args, RequestFacts, TokenUsage, CREATED};
use super::errors::openai_type_for_code;
use crate::script::StreamItem;

pub(crate) struct Encoder {
    seq: u64,
    model: String,
    usage: TokenUsage,
    include_usage: bool,
    next_tool: u32,
}

impl Encoder {
    pub(crate) fn new(facts: &RequestFacts, usage: TokenUsage) -> Encoder {
        Encoder {
            seq: facts.seq,
            model: facts.model.clone(),
            usage,
            include_usage: facts.include_usage,
            next_tool: 0,
        }
    }

    fn chunk(&self, out: &mut Vec<u8>, choices: Value, usage: Option<Value>) {
        let mut chunk = json!({
            "id": format!("chatcmpl-mock-{:04}", self.seq),
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
            "system_fingerprint": null,
            "choices": choices,
        });
        if self.include_usage {
            chunk["usage"] = usage.unwrap_or(Value::Null);
        }
        push_data(out, &chunk.to_string());
    }

    fn delta(&self, out: &mut Vec<u8>, delta: Value, finish: Option<&str>) {
        self.chunk(
            out,
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]),
            None,
        );
    }
}

impl super::encode::Encoder for Encoder {
    fn prelude(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.delta(&mut out, json!({"role": "assistant", "content": ""}), None);
        out
    }

    fn item(&mut self, item: &StreamItem) -> Vec<u8> {
        let mut out = Vec::new();
        match item {
            StreamItem::Text { text } => self.delta(&mut out, json!({"content": text}), None),
            StreamItem::Thinking { text } => {
                self.delta(&mut out, json!({"reasoning_content": text}), None)
            }
            StreamItem::ToolCall { id, name, args } => {
                let index = self.next_tool;
                self.next_tool += 1;
                self.delta(
                    &mut out,
                    json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}),
                    None,
                );
                for piece in split_args(&args.to_string()) {
                    self.delta(
                        &mut out,
                        json!({"tool_calls": [{"index": index,
                                               "function": {"arguments": piece}}]}),
                        None,
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
        self.delta(&mut out, json!({}), Some(finish));
        if self.include_usage {
            let usage = json!({
                "prompt_tokens": self.usage.input,
                "completion_tokens": self.usage.output,
                "total_tokens": self.usage.input + self.usage.output,
                "prompt_tokens_details": {"cached_tokens": self.usage.cached},
                "completion_tokens_details": {"reasoning_tokens": 0},
            });
            self.chunk(&mut out, json!([]), Some(usage));
        }
        push_data(&mut out, "[DONE]");
        out
    }

    fn error(&mut self, error: &str, message: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let body = json!({"error": {"message": message, "type": openai_type_for_code(error),
                                    "param": null, "code": error}});
        push_data(&mut out, &body.to_string());
        out
    }
}
