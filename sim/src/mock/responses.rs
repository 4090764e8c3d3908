//! The OpenAI Responses streaming format (`POST /v1/responses`, `stream: true`).
//!
//! Every event is `event: <type>` + `data: {"type": <type>, "sequence_number": n, …}` with `n`
//! counting from 0. Emits `response.created` and `response.in_progress`, then one output item
//! per run of same-kind items:
//! - text: `response.output_item.added` (a `message`), `response.content_part.added`
//!   (`output_text`), `response.output_text.delta`s; closing: `response.output_text.done`,
//!   `response.content_part.done`, `response.output_item.done`;
//! - thinking: a `reasoning` item with `response.reasoning_summary_part.added`,
//!   `response.reasoning_summary_text.delta`s; closing: `response.reasoning_summary_text.done`,
//!   `response.reasoning_summary_part.done`, `response.output_item.done` (with
//!   `encrypted_content` when the request's `include` asked for `reasoning.encrypted_content`);
//! - tool call: a `function_call` item (`call_id` = the script's id, `id` = `fc_…`),
//!   `response.function_call_arguments.delta` in ≥2 pieces; closing:
//!   `response.function_call_arguments.done`, `response.output_item.done`.
//!
//! Completion is `response.completed` (status `completed`, the whole `output`, usage
//! `{input_tokens, input_tokens_details.cached_tokens, output_tokens, …}`); the Responses API
//! has no finish reason, except that a scripted finish of `length`/`max_output_tokens` or
//! `content_filter` becomes `response.incomplete` with `incomplete_details.reason`. An error is
//! an `error` event (`code`, `message`) followed by `response.failed` (`response.error`).

use serde_json::{json, Value};

use super::encode::{
    push_event, split_args, thinking_signature, RequestFacts, TokenUsage, CREATED,
};
use crate::script::StreamItem;

enum Kind {
    Text,
    Reasoning,
    Function { call_id: String, name: String },
}

/// The open output item, closed lazily.
struct OpenItem {
    kind: Kind,
    id: String,
    output_index: u32,
    /// Text, summary text or arguments so far.
    text: String,
}

pub(crate) struct Encoder {
    seq: u64,
    model: String,
    usage: TokenUsage,
    encrypted_reasoning: bool,
    sequence_number: u64,
    next_output: u32,
    open: Option<OpenItem>,
    done: Vec<Value>,
}

impl Encoder {
    pub(crate) fn new(facts: &RequestFacts, usage: TokenUsage) -> Encoder {
        Encoder {
            seq: facts.seq,
            model: facts.model.clone(),
            usage,
            encrypted_reasoning: facts.encrypted_reasoning,
            sequence_number: 0,
            next_output: 0,
            open: None,
            done: Vec::new(),
        }
    }

    /// Append event `name` with `fields` plus `type` and `sequence_number`.
    fn event(&mut self, out: &mut Vec<u8>, name: &str, fields: Value) {
        let mut data = json!({"type": name, "sequence_number": self.sequence_number});
        self.sequence_number += 1;
        if let (Some(data), Value::Object(fields)) = (data.as_object_mut(), fields) {
            data.extend(fields);
        }
        push_event(out, name, &data);
    }

    fn response(&self, status: &str, usage: Value) -> Value {
        json!({
            "id": format!("resp_mock_{:04}", self.seq),
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "error": null,
            "incomplete_details": null,
            "model": self.model,
            "output": self.done,
            "usage": usage,
        })
    }

    fn usage_json(&self) -> Value {
        json!({
            "input_tokens": self.usage.input,
            "input_tokens_details": {"cached_tokens": self.usage.cached},
            "output_tokens": self.usage.output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.usage.input + self.usage.output,
        })
    }

    fn item_json(&self, item: &OpenItem, status: &str) -> Value {
        match &item.kind {
            Kind::Text => {
                let content = if status == "in_progress" {
                    json!([])
                } else {
                    json!([{"type": "output_text", "text": item.text, "annotations": []}])
                };
                json!({"id": item.id, "type": "message", "status": status,
                       "role": "assistant", "content": content})
            }
            Kind::Reasoning => {
                let summary = if status == "in_progress" {
                    json!([])
                } else {
                    json!([{"type": "summary_text", "text": item.text}])
                };
                let mut value = json!({"id": item.id, "type": "reasoning", "summary": summary});
                if status != "in_progress" && self.encrypted_reasoning {
                    value["encrypted_content"] = json!(thinking_signature(&item.text));
                }
                value
            }
            Kind::Function { call_id, name } => {
                json!({"id": item.id, "type": "function_call", "status": status,
                       "call_id": call_id, "name": name, "arguments": item.text})
            }
        }
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        let Some(item) = self.open.take() else {
            return;
        };
        let (id, oi) = (item.id.clone(), item.output_index);
        match &item.kind {
            Kind::Text => {
                self.event(
                    out,
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": oi, "content_index": 0,
                           "text": item.text, "logprobs": []}),
                );
                self.event(
                    out,
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": oi, "content_index": 0,
                           "part": {"type": "output_text", "text": item.text, "annotations": []}}),
                );
            }
            Kind::Reasoning => {
                self.event(
                    out,
                    "response.reasoning_summary_text.done",
                    json!({"item_id": id, "output_index": oi, "summary_index": 0,
                           "text": item.text}),
                );
                self.event(
                    out,
                    "response.reasoning_summary_part.done",
                    json!({"item_id": id, "output_index": oi, "summary_index": 0,
                           "part": {"type": "summary_text", "text": item.text}}),
                );
            }
            Kind::Function { name, .. } => {
                self.event(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": oi, "name": name,
                           "arguments": item.text}),
                );
            }
        }
        let done = self.item_json(&item, "completed");
        self.event(
            out,
            "response.output_item.done",
            json!({"output_index": oi, "item": done}),
        );
        self.done.push(done);
    }

    /// Open a new output item (closing the open one).
    fn start(&mut self, out: &mut Vec<u8>, kind: Kind) {
        self.close(out);
        let oi = self.next_output;
        self.next_output += 1;
        let prefix = match kind {
            Kind::Text => "msg",
            Kind::Reasoning => "rs",
            Kind::Function { .. } => "fc",
        };
        let item = OpenItem {
            kind,
            id: format!("{prefix}_mock_{:04}_{oi}", self.seq),
            output_index: oi,
            text: String::new(),
        };
        let added = self.item_json(&item, "in_progress");
        self.event(
            out,
            "response.output_item.added",
            json!({"output_index": oi, "item": added}),
        );
        match &item.kind {
            Kind::Text => self.event(
                out,
                "response.content_part.added",
                json!({"item_id": item.id, "output_index": oi, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": []}}),
            ),
            Kind::Reasoning => self.event(
                out,
                "response.reasoning_summary_part.added",
                json!({"item_id": item.id, "output_index": oi, "summary_index": 0,
                       "part": {"type": "summary_text", "text": ""}}),
            ),
            Kind::Function { .. } => {}
        }
        self.open = Some(item);
    }

    /// The open item's id and output index, after appending `text` to it.
    fn extend_open(&mut self, text: &str) -> (String, u32) {
        match &mut self.open {
            Some(item) => {
                item.text.push_str(text);
                (item.id.clone(), item.output_index)
            }
            // Callers open an item first; an empty id would only mislabel a delta.
            None => (String::new(), 0),
        }
    }
}

impl super::encode::Encoder for Encoder {
    fn prelude(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let created = self.response("in_progress", Value::Null);
        self.event(&mut out, "response.created", json!({"response": created}));
        let progress = self.response("in_progress", Value::Null);
        self.event(
            &mut out,
            "response.in_progress",
            json!({"response": progress}),
        );
        out
    }

    fn item(&mut self, item: &StreamItem) -> Vec<u8> {
        let mut out = Vec::new();
        match item {
            StreamItem::Text { text } => {
                if !matches!(
                    self.open,
                    Some(OpenItem {
                        kind: Kind::Text,
                        ..
                    })
                ) {
                    self.start(&mut out, Kind::Text);
                }
                let (id, oi) = self.extend_open(text);
                self.event(
                    &mut out,
                    "response.output_text.delta",
                    json!({"item_id": id, "output_index": oi, "content_index": 0,
                           "delta": text, "logprobs": []}),
                );
            }
            StreamItem::Thinking { text } => {
                if !matches!(
                    self.open,
                    Some(OpenItem {
                        kind: Kind::Reasoning,
                        ..
                    })
                ) {
                    self.start(&mut out, Kind::Reasoning);
                }
                let (id, oi) = self.extend_open(text);
                self.event(
                    &mut out,
                    "response.reasoning_summary_text.delta",
                    json!({"item_id": id, "output_index": oi, "summary_index": 0,
                           "delta": text}),
                );
            }
            StreamItem::ToolCall { id, name, args } => {
                self.start(
                    &mut out,
                    Kind::Function {
                        call_id: id.clone(),
                        name: name.clone(),
                    },
                );
                for piece in split_args(&args.to_string()) {
                    let (item_id, oi) = self.extend_open(&piece);
                    self.event(
                        &mut out,
                        "response.function_call_arguments.delta",
                        json!({"item_id": item_id, "output_index": oi, "delta": piece}),
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
        let incomplete = match finish {
            "length" | "max_output_tokens" | "max_tokens" => Some("max_output_tokens"),
            "content_filter" => Some("content_filter"),
            _ => None,
        };
        let usage = self.usage_json();
        match incomplete {
            Some(reason) => {
                let mut response = self.response("incomplete", usage);
                response["incomplete_details"] = json!({"reason": reason});
                self.event(
                    &mut out,
                    "response.incomplete",
                    json!({"response": response}),
                );
            }
            None => {
                let response = self.response("completed", usage);
                self.event(
                    &mut out,
                    "response.completed",
                    json!({"response": response}),
                );
            }
        }
        out
    }

    fn error(&mut self, error: &str, message: &str) -> Vec<u8> {
        let mut out = Vec::new();
        self.event(
            &mut out,
            "error",
            json!({"code": error, "message": message, "param": null}),
        );
        let mut response = self.response("failed", Value::Null);
        response["error"] = json!({"code": error, "message": message});
        self.event(&mut out, "response.failed", json!({"response": response}));
        out
    }
}
