//! The Anthropic Messages API (`POST {base}/v1/messages`, `stream: true`): the request body
//! builder and the stream mapping.
//!
//! Body: `system` (the frozen prompt, marked for prompt caching), `messages` with consecutive
//! same-role messages merged, assistant blocks in order as `thinking` (only with a signature:
//! the API rejects an unsigned one), `text` and `tool_use`; user messages with `tool_result`
//! blocks first (the API requires them before any text), then text. Tools as
//! `{name, description, input_schema}`. Extended thinking is switched on for models that have
//! it when `max_tokens` leaves room for a budget, and off when the replayed tool loop's last
//! assistant message has no signed thinking block (the API would reject the request).
//!
//! Mapping: `text_delta` → text, `thinking_delta` → thinking, `signature_delta` → signature,
//! `tool_use` blocks → tool calls numbered 0, 1, … in order, `input_json_delta` → their
//! arguments; `message_start` and `message_delta` usage are combined into one `Usage` at
//! `message_stop` (prompt = input + cache read + cache creation, cached = cache read), then
//! `Completed` with the `stop_reason` verbatim. `message_stop` is the only completion signal.
//! An `error` event → `Failed`, classified by `error.type`. `ping` and unknown events are
//! ignored, as the API's versioning policy asks.

use std::collections::BTreeMap;

use openmax_core::conversation::{Block, ModelRequest, Role};
use openmax_core::provider::ProviderItem;
use serde_json::{json, Map, Value};

use super::mapping::{event_json, failed_from_error, str_at, u64_at, StreamMapper};
use super::sse::SseEvent;

/// The `anthropic-version` header value.
pub const API_VERSION: &str = "2023-06-01";

/// Build the JSON body of one Messages request.
pub fn build_body(req: &ModelRequest, model: &str, max_output_tokens: u32) -> Value {
    let mut messages = Vec::new();
    for m in &req.messages {
        let mut content = Vec::new();
        match m.role {
            Role::User => {
                for b in &m.content {
                    if let Block::ToolResult { id, ok, output } = b {
                        let text = if output.is_empty() {
                            "(no output)"
                        } else {
                            output
                        };
                        let mut r = json!({"type":"tool_result","tool_use_id":id,"content":text});
                        if !ok {
                            r["is_error"] = Value::Bool(true);
                        }
                        content.push(r);
                    }
                }
                for b in &m.content {
                    match b {
                        Block::Text { text } if !text.is_empty() => {
                            content.push(json!({"type":"text","text":text}));
                        }
                        Block::Image(img) if img.data.is_empty() => content
                            .push(json!({"type":"text","text":super::mapping::image_gone(img)})),
                        Block::Image(img) => content.push(json!({"type":"image","source":{
                            "type":"base64","media_type":img.media_type,"data":img.data}})),
                        Block::Text { .. }
                        | Block::Thinking { .. }
                        | Block::ToolUse { .. }
                        | Block::ToolResult { .. } => {}
                    }
                }
            }
            Role::Assistant => {
                for b in &m.content {
                    match b {
                        Block::Thinking {
                            text,
                            signature: Some(sig),
                        } => {
                            content.push(json!({"type":"thinking","thinking":text,"signature":sig}))
                        }
                        Block::Thinking {
                            signature: None, ..
                        } => {}
                        Block::Text { text } if !text.is_empty() => {
                            content.push(json!({"type":"text","text":text}))
                        }
                        Block::Text { .. } => {}
                        Block::ToolUse { id, name, input } => {
                            let input = if input.is_object() {
                                input.clone()
                            } else {
                                Value::Object(Map::new())
                            };
                            content
                                .push(json!({"type":"tool_use","id":id,"name":name,"input":input}));
                        }
                        Block::ToolResult { .. } | Block::Image(_) => {}
                    }
                }
            }
        }
        if !content.is_empty() {
            messages.push(json!({"role": role_str(m.role), "content": content}));
        }
    }
    // Cache the conversation prefix up to the newest user message.
    if let Some(last) = messages.last_mut() {
        if last["role"] == "user" {
            if let Some(block) = last["content"].as_array_mut().and_then(|c| c.last_mut()) {
                block["cache_control"] = json!({"type":"ephemeral"});
            }
        }
    }
    let mut body = json!({
        "model": model,
        "max_tokens": max_output_tokens,
        "stream": true,
    });
    if !req.system.is_empty() {
        body["system"] = json!([{
            "type": "text",
            "text": req.system,
            "cache_control": {"type": "ephemeral"},
        }]);
    }
    if let Some(budget) = thinking_budget(model, max_output_tokens) {
        if thinking_replay_ok(&messages) {
            body["thinking"] = json!({"type":"enabled","budget_tokens":budget});
        }
    }
    body["messages"] = Value::Array(messages);
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name":t.name,"description":t.description,"input_schema":t.parameters}))
            .collect();
    }
    body
}

/// The extended-thinking budget for a model, if it has extended thinking and `max_tokens`
/// leaves room (the budget must be at least 1024 and below `max_tokens`).
pub fn thinking_budget(model: &str, max_output_tokens: u32) -> Option<u32> {
    let old = model.starts_with("claude-2")
        || model.starts_with("claude-instant")
        || (model.starts_with("claude-3-") && !model.starts_with("claude-3-7"));
    if !model.starts_with("claude-") || old || max_output_tokens < 4096 {
        return None;
    }
    Some((max_output_tokens / 2).clamp(1024, 32_000))
}

/// With thinking on, the last assistant message of a tool loop (the request ends in tool
/// results) must start with a signed thinking block.
fn thinking_replay_ok(messages: &[Value]) -> bool {
    let ends_in_results = messages.last().is_some_and(|m| {
        m["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
    });
    if !ends_in_results {
        return true;
    }
    messages
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .is_some_and(|m| m["content"][0]["type"] == "thinking")
}

fn role_str(r: Role) -> &'static str {
    match r {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

/// The stream mapping state for one response.
#[derive(Debug, Default)]
pub struct AnthropicMapper {
    done: bool,
    /// Content block index → (tool call index, whether argument deltas arrived, start input).
    tools: BTreeMap<u64, (u32, bool, Value)>,
    next_tool: u32,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read: Option<u64>,
    cache_creation: Option<u64>,
    stop_reason: Option<String>,
}

impl AnthropicMapper {
    pub fn new() -> AnthropicMapper {
        AnthropicMapper::default()
    }

    fn take_usage(&mut self, usage: &Value) {
        if let Some(n) = u64_at(usage, "/input_tokens") {
            self.input_tokens = Some(n);
        }
        if let Some(n) = u64_at(usage, "/output_tokens") {
            self.output_tokens = Some(n);
        }
        if let Some(n) = u64_at(usage, "/cache_read_input_tokens") {
            self.cache_read = Some(n);
        }
        if let Some(n) = u64_at(usage, "/cache_creation_input_tokens") {
            self.cache_creation = Some(n);
        }
    }

    fn usage_item(&self) -> Option<ProviderItem> {
        if self.input_tokens.is_none() && self.output_tokens.is_none() {
            return None;
        }
        Some(ProviderItem::Usage {
            prompt_tokens: self.input_tokens.unwrap_or(0)
                + self.cache_read.unwrap_or(0)
                + self.cache_creation.unwrap_or(0),
            completion_tokens: self.output_tokens.unwrap_or(0),
            cached_tokens: self.cache_read,
        })
    }
}

impl StreamMapper for AnthropicMapper {
    fn on_event(&mut self, ev: &SseEvent) -> Vec<ProviderItem> {
        if self.done {
            return Vec::new();
        }
        let v = match event_json(ev) {
            Ok(Some(v)) => v,
            Ok(None) => return Vec::new(),
            Err(failed) => {
                self.done = true;
                return vec![failed];
            }
        };
        let kind = match v.get("type").and_then(Value::as_str) {
            Some(t) => t.to_string(),
            None => ev.event.clone(),
        };
        let mut out = Vec::new();
        match kind.as_str() {
            "message_start" => {
                if let Some(u) = v.pointer("/message/usage") {
                    self.take_usage(u);
                }
            }
            "content_block_start" => {
                let block = &v["content_block"];
                let index = u64_at(&v, "/index").unwrap_or(0);
                match str_at(block, "/type") {
                    "text" => {
                        let t = str_at(block, "/text");
                        if !t.is_empty() {
                            out.push(ProviderItem::TextDelta { text: t.into() });
                        }
                    }
                    "thinking" => {
                        let t = str_at(block, "/thinking");
                        if !t.is_empty() {
                            out.push(ProviderItem::ThinkingDelta { text: t.into() });
                        }
                    }
                    "tool_use" => {
                        let tool = self.next_tool;
                        self.next_tool += 1;
                        let input = block.get("input").cloned().unwrap_or(Value::Null);
                        self.tools.insert(index, (tool, false, input));
                        out.push(ProviderItem::ToolCallStart {
                            index: tool,
                            id: str_at(block, "/id").into(),
                            name: str_at(block, "/name").into(),
                        });
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let d = &v["delta"];
                let index = u64_at(&v, "/index").unwrap_or(0);
                match str_at(d, "/type") {
                    "text_delta" => out.push(ProviderItem::TextDelta {
                        text: str_at(d, "/text").into(),
                    }),
                    "thinking_delta" => out.push(ProviderItem::ThinkingDelta {
                        text: str_at(d, "/thinking").into(),
                    }),
                    "signature_delta" => out.push(ProviderItem::ThinkingSignature {
                        signature: str_at(d, "/signature").into(),
                    }),
                    "input_json_delta" => {
                        let json = str_at(d, "/partial_json");
                        if let Some((tool, seen, _)) = self.tools.get_mut(&index) {
                            if !json.is_empty() {
                                *seen = true;
                                out.push(ProviderItem::ToolCallArgs {
                                    index: *tool,
                                    json: json.into(),
                                });
                            }
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = u64_at(&v, "/index").unwrap_or(0);
                if let Some((tool, seen, input)) = self.tools.get_mut(&index) {
                    // No argument deltas: the start block's input is the whole argument object.
                    if !*seen {
                        *seen = true;
                        let json = if input.is_object() {
                            input.to_string()
                        } else {
                            "{}".to_string()
                        };
                        out.push(ProviderItem::ToolCallArgs { index: *tool, json });
                    }
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_string());
                }
                if let Some(u) = v.get("usage") {
                    self.take_usage(u);
                }
            }
            "message_stop" => {
                out.extend(self.usage_item());
                out.push(ProviderItem::Completed {
                    finish_reason: self
                        .stop_reason
                        .clone()
                        .unwrap_or_else(|| "end_turn".into()),
                });
                self.done = true;
            }
            "error" => {
                out.push(failed_from_error(
                    &v["error"],
                    "the provider reported an error",
                ));
                self.done = true;
            }
            _ => {}
        }
        out
    }

    fn on_eof(&mut self) -> Vec<ProviderItem> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        vec![ProviderItem::EndedWithoutCompletion {
            detail: "the stream ended without message_stop".into(),
        }]
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn mark_done(&mut self) {
        self.done = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::sse::decode_all;
    use openmax_core::conversation::{Message, ToolSchema};
    use openmax_core::provider::FailureKind;

    #[test]
    fn thinking_has_a_budget_on_claude_models_that_think_with_room_for_it() {
        let room = 16_000;
        for (model, thinks) in [
            ("claude-2.1", false),
            ("claude-instant-1.2", false),
            ("claude-3-opus-20240229", false),
            ("claude-3-5-sonnet-20241022", false),
            ("claude-3-7-sonnet-20250219", true),
            ("claude-sonnet-4-5", true),
            ("claude-opus-4-1", true),
            ("gpt-4o", false),
            ("my-claude-2", false),
        ] {
            let want = thinks.then_some(8_000);
            assert_eq!(thinking_budget(model, room), want, "{model}");
        }
        for (max, want) in [
            (0, None),
            (4_095, None),
            (4_096, Some(2_048)),
            (64_000, Some(32_000)),
            (128_000, Some(32_000)),
        ] {
            assert_eq!(thinking_budget("claude-sonnet-4-5", max), want, "{max}");
        }
    }

    fn run(stream: &str) -> Vec<ProviderItem> {
        let mut m = AnthropicMapper::new();
        let mut out = Vec::new();
        for ev in decode_all(stream.as_bytes()) {
            out.extend(m.on_event(&ev));
        }
        out.extend(m.on_eof());
        out
    }

    /// The documented basic text stream, with cache usage.
    const TEXT: &str = r#"event: message_start
data: {"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 1}}}

event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: message_delta
data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence":null}, "usage": {"output_tokens": 15}}

event: message_stop
data: {"type": "message_stop"}

"#;

    #[test]
    fn text_stream_with_combined_usage() {
        assert_eq!(
            run(TEXT),
            vec![
                ProviderItem::TextDelta {
                    text: "Hello".into()
                },
                ProviderItem::TextDelta { text: "!".into() },
                ProviderItem::Usage {
                    prompt_tokens: 130,
                    completion_tokens: 15,
                    cached_tokens: Some(100)
                },
                ProviderItem::Completed {
                    finish_reason: "end_turn".into()
                },
            ]
        );
    }

    /// The documented extended-thinking stream (thinking, signature, text).
    const THINKING: &str = r#"event: message_start
data: {"type": "message_start", "message": {"id": "msg_01", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}

event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me solve this step by step:\n\n1. First break down 27 * 453"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: content_block_start
data: {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "27 * 453 = 12,231"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 1}

event: message_delta
data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 40}}

event: message_stop
data: {"type": "message_stop"}
"#;

    #[test]
    fn text_and_thinking_a_block_starts_with_are_not_lost() {
        let stream = r#"event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"first"}}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Hi"}}

event: message_stop
data: {"type":"message_stop"}

"#;
        let items = run(stream);
        assert_eq!(
            items[..2],
            [
                ProviderItem::ThinkingDelta {
                    text: "first".into()
                },
                ProviderItem::TextDelta { text: "Hi".into() }
            ]
        );
    }

    #[test]
    fn thinking_and_signature() {
        let items = run(THINKING);
        assert_eq!(
            items[0],
            ProviderItem::ThinkingDelta {
                text: "Let me solve this step by step:\n\n1. First break down 27 * 453".into()
            }
        );
        assert_eq!(
            items[1],
            ProviderItem::ThinkingSignature {
                signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds...".into()
            }
        );
        assert_eq!(
            items[2],
            ProviderItem::TextDelta {
                text: "27 * 453 = 12,231".into()
            }
        );
        assert_eq!(
            items[3],
            ProviderItem::Usage {
                prompt_tokens: 10,
                completion_tokens: 40,
                cached_tokens: None
            }
        );
        assert_eq!(items.len(), 5);
    }

    /// The documented tool-use stream: text, then a tool_use block with input_json_delta.
    const TOOL: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay, let's check the weather:"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisco, CA\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"list_dir","input":{}}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;

    #[test]
    fn tool_use_with_streamed_input() {
        let items = run(TOOL);
        assert_eq!(
            items,
            vec![
                ProviderItem::TextDelta {
                    text: "Okay, let's check the weather:".into()
                },
                ProviderItem::ToolCallStart {
                    index: 0,
                    id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                    name: "get_weather".into()
                },
                ProviderItem::ToolCallArgs {
                    index: 0,
                    json: "{\"location\":".into()
                },
                ProviderItem::ToolCallArgs {
                    index: 0,
                    json: " \"San Francisco, CA\"}".into()
                },
                ProviderItem::ToolCallStart {
                    index: 1,
                    id: "toolu_02".into(),
                    name: "list_dir".into()
                },
                ProviderItem::ToolCallArgs {
                    index: 1,
                    json: "{}".into()
                },
                ProviderItem::Usage {
                    prompt_tokens: 472,
                    completion_tokens: 89,
                    cached_tokens: None
                },
                ProviderItem::Completed {
                    finish_reason: "tool_use".into()
                },
            ]
        );
    }

    #[test]
    fn error_event_after_text_fails_once() {
        let stream = r#"event: message_start
data: {"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}

event: error
data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}

event: message_stop
data: {"type":"message_stop"}

"#;
        assert_eq!(
            run(stream),
            vec![
                ProviderItem::TextDelta { text: "Hi".into() },
                ProviderItem::Failed {
                    kind: FailureKind::Overloaded,
                    message: "Overloaded".into()
                },
            ]
        );
    }

    #[test]
    fn eof_without_message_stop_ends_without_completion() {
        let cut = &TEXT[..TEXT.find("event: message_stop").unwrap()];
        let items = run(cut);
        assert!(matches!(
            items.last(),
            Some(ProviderItem::EndedWithoutCompletion { .. })
        ));
        assert!(!items
            .iter()
            .any(|i| matches!(i, ProviderItem::Completed { .. })));
    }

    #[test]
    fn body_error_after_completion_adds_nothing() {
        let mut m = AnthropicMapper::new();
        for ev in decode_all(TEXT.as_bytes()) {
            m.on_event(&ev);
        }
        assert!(m.on_body_error("reset").is_empty());
        let mut m = AnthropicMapper::new();
        assert!(matches!(
            m.on_body_error("reset").as_slice(),
            [ProviderItem::EndedWithoutCompletion { detail }] if detail.contains("reset")
        ));
    }

    /// A request as the core shapes it (the two prompts merged, the result first).
    fn sample_request() -> ModelRequest {
        let tools = vec![ToolSchema {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type":"object","properties":{"path":{"type":"string"}}}),
        }];
        ModelRequest::shaped(
            "You are openmax.",
            &tools,
            &[
                Message::user_text("hi"),
                Message::user_text("read a.txt"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        Block::Thinking {
                            text: "unsigned".into(),
                            signature: None,
                        },
                        Block::Thinking {
                            text: "signed".into(),
                            signature: Some("sig".into()),
                        },
                        Block::text("Reading."),
                        // An empty text block is left out: the API refuses one.
                        Block::text(""),
                        Block::ToolUse {
                            id: "toolu_1".into(),
                            name: "read_file".into(),
                            input: json!({"path":"a.txt"}),
                        },
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![
                        Block::text(""),
                        Block::text("also note"),
                        Block::ToolResult {
                            id: "toolu_1".into(),
                            ok: false,
                            output: "not found".into(),
                        },
                    ],
                },
            ],
        )
    }

    #[test]
    fn body_replays_history_in_messages_form() {
        let body = build_body(&sample_request(), "claude-sonnet-4-5", 8192);
        assert_eq!(body["stream"], true);
        assert_eq!(body["model"], "claude-sonnet-4-5");
        assert_eq!(body["max_tokens"], 8192);
        assert_eq!(body["system"][0]["text"], "You are openmax.");
        assert_eq!(
            body["tools"],
            json!([{"name":"read_file","description":"Read a file",
                "input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}])
        );
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[0]["content"][0]["text"], "hi");
        assert_eq!(msgs[0]["content"][1]["text"], "read a.txt");
        assert_eq!(
            msgs[1]["content"],
            json!([
                {"type":"thinking","thinking":"signed","signature":"sig"},
                {"type":"text","text":"Reading."},
                {"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a.txt"}}
            ])
        );
        assert_eq!(
            msgs[2]["content"][0],
            json!({"type":"tool_result","tool_use_id":"toolu_1","content":"not found","is_error":true})
        );
        assert_eq!(msgs[2]["content"][1]["text"], "also note");
        assert_eq!(msgs[2]["content"][1]["cache_control"]["type"], "ephemeral");
        // The tool loop's assistant message starts with signed thinking: thinking stays on.
        assert_eq!(body["thinking"]["budget_tokens"], 4096);
    }

    /// Only a request ending in tool results needs the tool loop's assistant message to start
    /// with signed thinking, whether the results come alone or with text.
    #[test]
    fn only_a_request_ending_in_tool_results_needs_signed_thinking() {
        let thinks = |last: Vec<Block>| {
            let mut assistant = vec![Block::text("Reading.")];
            if last.iter().any(|b| matches!(b, Block::ToolResult { .. })) {
                assistant.push(Block::ToolUse {
                    id: "toolu_1".into(),
                    name: "read_file".into(),
                    input: json!({"path":"a.txt"}),
                });
            }
            let conversation = [
                Message::user_text("read a.txt"),
                Message {
                    role: Role::Assistant,
                    content: assistant,
                },
                Message {
                    role: Role::User,
                    content: last,
                },
            ];
            let req = ModelRequest::shaped("s", &[], &conversation);
            build_body(&req, "claude-sonnet-4-5", 8192)
                .get("thinking")
                .is_some()
        };
        let result = || Block::ToolResult {
            id: "toolu_1".into(),
            ok: true,
            output: "a".into(),
        };
        assert!(!thinks(vec![result()]));
        assert!(!thinks(vec![result(), Block::text("also note")]));
        // The control: the same unsigned assistant message, then a plain prompt.
        assert!(thinks(vec![Block::text("go on")]));
    }

    #[test]
    fn thinking_off_when_tool_loop_lacks_signed_thinking_or_model_is_old() {
        let mut req = sample_request();
        req.messages[1].content.remove(1);
        let body = build_body(&req, "claude-sonnet-4-5", 8192);
        assert!(body.get("thinking").is_none());
        let body = build_body(&sample_request(), "claude-3-5-haiku-latest", 8192);
        assert!(body.get("thinking").is_none());
        let body = build_body(&sample_request(), "claude-opus-4-1", 2048);
        assert!(body.get("thinking").is_none());
    }
}
