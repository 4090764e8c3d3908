//! OpenAI Chat Completions (`POST {base}/chat/completions`, `stream: true`,
//! `stream_options.include_usage`), the lingua franca of local and routed servers (Ollama,
//! vLLM, llama.cpp's server, LM Studio, OpenRouter): the request body builder and the mapping.
//!
//! Body: a `system` message (the frozen prompt), consecutive same-role messages merged, user
//! text as one string, tool results as `role: "tool"` messages with `tool_call_id` (placed
//! right after the assistant message that made the calls, before any user text), assistant
//! messages with `content` (null when only calls) and `tool_calls` (`arguments` a JSON string).
//! Thinking is not replayed (the API has no field for it). Tools as
//! `{type: "function", function: {name, description, parameters}}`. The output cap is
//! `max_tokens`, or `max_completion_tokens` for OpenAI reasoning models that reject the former.
//!
//! Mapping (first choice only): `delta.content` → text; `delta.reasoning_content` (DeepSeek,
//! vLLM, llama.cpp) and `delta.reasoning` (OpenRouter, Ollama) → thinking; `delta.tool_calls`
//! by `index` → tool calls numbered 0, 1, … in order of first appearance (a missing `id` gets
//! `{id_prefix}{n}`; an object `arguments` is serialized). A `usage` object → `Usage` (cached
//! from `prompt_tokens_details.cached_tokens`). Completion: once `finish_reason` arrived, at
//! the usage chunk (include_usage sends it last), else at `[DONE]` or a clean end of body;
//! `Completed` carries `finish_reason` verbatim. `[DONE]` without a `finish_reason` ends
//! without completion. A chunk with an `error` object (OpenRouter's mid-stream errors) →
//! `Failed`, classified by its `code` or `type` (numeric codes by status class).

use std::collections::BTreeMap;

use openmax_core::conversation::{Block, ModelRequest, Role};
use openmax_core::provider::ProviderItem;
use serde_json::{json, Value};

use super::mapping::result_text;
use super::mapping::{event_json, failed_from_error, u64_at, StreamMapper};
use super::openai::is_reasoning_model;
use super::sse::SseEvent;

/// Build the JSON body of one Chat Completions request.
pub fn build_body(req: &ModelRequest, model: &str, max_output_tokens: u32) -> Value {
    let mut messages = Vec::new();
    if !req.system.is_empty() {
        messages.push(json!({"role":"system","content":req.system}));
    }
    for m in &req.messages {
        let text = m.plain_text();
        match m.role {
            Role::User => {
                for b in &m.content {
                    if let Block::ToolResult { id, ok, output } = b {
                        messages.push(json!({"role":"tool","tool_call_id":id,
                            "content":result_text(*ok, output)}));
                    }
                }
                if m.content.iter().any(|b| matches!(b, Block::Image(_))) {
                    // With images, the content is an array of parts in the message's order.
                    let parts: Vec<Value> = m
                        .content
                        .iter()
                        .filter_map(|b| match b {
                            Block::Text { text } if !text.is_empty() => {
                                Some(json!({"type":"text","text":text}))
                            }
                            Block::Image(img) if img.data.is_empty() => {
                                Some(json!({"type":"text","text":super::mapping::image_gone(img)}))
                            }
                            Block::Image(img) => Some(json!({"type":"image_url",
                                "image_url":{"url":super::mapping::data_url(img)}})),
                            _ => None,
                        })
                        .collect();
                    messages.push(json!({"role":"user","content":parts}));
                } else if !text.is_empty() {
                    messages.push(json!({"role":"user","content":text}));
                }
            }
            Role::Assistant => {
                let calls: Vec<Value> = m
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::ToolUse { id, name, input } => Some(json!({"id":id,
                            "type":"function",
                            "function":{"name":name,"arguments":input.to_string()}})),
                        _ => None,
                    })
                    .collect();
                if text.is_empty() && calls.is_empty() {
                    continue;
                }
                let mut msg = json!({"role":"assistant",
                    "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(calls);
                }
                messages.push(msg);
            }
        }
    }
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let cap_field = if is_reasoning_model(model) {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body[cap_field] = json!(max_output_tokens);
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({"type":"function","function":{"name":t.name,
                    "description":t.description,"parameters":t.parameters}})
            })
            .collect();
    }
    body
}

/// The stream mapping state for one response.
#[derive(Debug, Default)]
pub struct ChatMapper {
    done: bool,
    id_prefix: String,
    /// The provider's tool-call index → our tool call index.
    tools: BTreeMap<u64, u32>,
    next_tool: u32,
    finish: Option<String>,
    usage: Option<ProviderItem>,
}

impl ChatMapper {
    pub fn new() -> ChatMapper {
        ChatMapper::with_id_prefix("call_")
    }

    /// A mapper that names calls lacking an `id` `{prefix}{n}` (make the prefix unique per
    /// request attempt, so ids never repeat within a session).
    pub fn with_id_prefix(prefix: &str) -> ChatMapper {
        ChatMapper {
            id_prefix: prefix.to_string(),
            ..ChatMapper::default()
        }
    }

    fn complete(&mut self, out: &mut Vec<ProviderItem>) {
        if let Some(reason) = self.finish.take() {
            out.extend(self.usage.take());
            out.push(ProviderItem::Completed {
                finish_reason: reason,
            });
            self.done = true;
        }
    }

    fn tool_calls(&mut self, calls: &[Value], out: &mut Vec<ProviderItem>) {
        for (pos, tc) in calls.iter().enumerate() {
            let pidx = u64_at(tc, "/index").unwrap_or(pos as u64);
            let tool = match self.tools.get(&pidx) {
                Some(t) => *t,
                None => {
                    let t = self.next_tool;
                    self.next_tool += 1;
                    self.tools.insert(pidx, t);
                    let id = match tc.get("id").and_then(Value::as_str) {
                        Some(id) if !id.is_empty() => id.to_string(),
                        _ => format!("{}{t}", self.id_prefix),
                    };
                    let name = tc
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    out.push(ProviderItem::ToolCallStart { index: t, id, name });
                    t
                }
            };
            let json = match tc.pointer("/function/arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(v @ Value::Object(_)) => v.to_string(),
                _ => String::new(),
            };
            if !json.is_empty() {
                out.push(ProviderItem::ToolCallArgs { index: tool, json });
            }
        }
    }
}

impl StreamMapper for ChatMapper {
    fn on_event(&mut self, ev: &SseEvent) -> Vec<ProviderItem> {
        let mut out = Vec::new();
        if self.done {
            return out;
        }
        if ev.damage.is_none() && ev.data.trim() == "[DONE]" {
            if self.finish.is_some() {
                self.complete(&mut out);
            } else {
                self.done = true;
                out.push(ProviderItem::EndedWithoutCompletion {
                    detail: "the stream sent [DONE] without a finish_reason".into(),
                });
            }
            return out;
        }
        let v = match event_json(ev) {
            Ok(Some(v)) => v,
            Ok(None) => return out,
            Err(failed) => {
                self.done = true;
                out.push(failed);
                return out;
            }
        };
        if let Some(err) = v.get("error").filter(|e| e.is_object()) {
            out.push(failed_from_error(err, "the provider reported an error"));
            self.done = true;
            return out;
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(ProviderItem::Usage {
                prompt_tokens: u64_at(u, "/prompt_tokens").unwrap_or(0),
                completion_tokens: u64_at(u, "/completion_tokens").unwrap_or(0),
                cached_tokens: u64_at(u, "/prompt_tokens_details/cached_tokens"),
            });
        }
        let choice = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| {
                c.iter()
                    .find(|ch| u64_at(ch, "/index").unwrap_or(0) == 0)
                    .or(c.first())
            })
            .cloned();
        if let Some(ch) = choice {
            let d = &ch["delta"];
            for key in ["reasoning_content", "reasoning"] {
                if let Some(t) = d.get(key).and_then(Value::as_str) {
                    if !t.is_empty() {
                        out.push(ProviderItem::ThinkingDelta { text: t.into() });
                    }
                }
            }
            if let Some(t) = d.get("content").and_then(Value::as_str) {
                if !t.is_empty() {
                    out.push(ProviderItem::TextDelta { text: t.into() });
                }
            }
            if let Some(calls) = d.get("tool_calls").and_then(Value::as_array) {
                self.tool_calls(calls, &mut out);
            }
            if let Some(r) = ch.get("finish_reason").and_then(Value::as_str) {
                if self.finish.is_none() {
                    self.finish = Some(r.to_string());
                }
            }
        }
        if self.finish.is_some() && self.usage.is_some() {
            self.complete(&mut out);
        }
        out
    }

    fn on_eof(&mut self) -> Vec<ProviderItem> {
        let mut out = Vec::new();
        if self.done {
            return out;
        }
        if self.finish.is_some() {
            self.complete(&mut out);
        } else {
            self.done = true;
            out.push(ProviderItem::EndedWithoutCompletion {
                detail: "the stream ended without a finish_reason".into(),
            });
        }
        out
    }

    /// A `finish_reason` already arrived: the reply is complete, only the trailing usage chunk
    /// was lost with the socket.
    fn on_body_error(&mut self, detail: &str) -> Vec<ProviderItem> {
        let mut out = Vec::new();
        if !self.done && self.finish.is_some() {
            self.complete(&mut out);
            return out;
        }
        super::mapping::broken(self, detail)
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

    fn run(stream: &str) -> Vec<ProviderItem> {
        let mut m = ChatMapper::new();
        let mut out = Vec::new();
        for ev in decode_all(stream.as_bytes()) {
            out.extend(m.on_event(&ev));
        }
        out.extend(m.on_eof());
        out
    }

    /// The documented streaming chunks with `include_usage` (usage in a last, choice-less chunk).
    const TEXT: &str = r#"data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":4}}}

data: [DONE]

"#;

    #[test]
    fn content_then_usage_then_completed() {
        assert_eq!(
            run(TEXT),
            vec![
                ProviderItem::TextDelta {
                    text: "Hello".into()
                },
                ProviderItem::Usage {
                    prompt_tokens: 9,
                    completion_tokens: 12,
                    cached_tokens: Some(4)
                },
                ProviderItem::Completed {
                    finish_reason: "stop".into()
                },
            ]
        );
    }

    /// Reasoning (DeepSeek/vLLM `reasoning_content`, OpenRouter `reasoning`) and two parallel
    /// tool calls streamed by index; no usage chunk, completion at `[DONE]`.
    const TOOLS: &str = r#": OPENROUTER PROCESSING

data: {"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Need the weather."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"reasoning":" Two cities."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\": \"Paris\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"location\""}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":": \"Rome\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"#;

    #[test]
    fn reasoning_and_parallel_tool_calls() {
        assert_eq!(
            run(TOOLS),
            vec![
                ProviderItem::ThinkingDelta {
                    text: "Need the weather.".into()
                },
                ProviderItem::ThinkingDelta {
                    text: " Two cities.".into()
                },
                ProviderItem::ToolCallStart {
                    index: 0,
                    id: "call_DdmO9pD3xa9XTPNJ32zg2hcA".into(),
                    name: "get_weather".into()
                },
                ProviderItem::ToolCallArgs {
                    index: 0,
                    json: "{\"location\": \"Paris\"}".into()
                },
                ProviderItem::ToolCallStart {
                    index: 1,
                    id: "call_2".into(),
                    name: "get_weather".into()
                },
                ProviderItem::ToolCallArgs {
                    index: 1,
                    json: "{\"location\"".into()
                },
                ProviderItem::ToolCallArgs {
                    index: 1,
                    json: ": \"Rome\"}".into()
                },
                ProviderItem::Completed {
                    finish_reason: "tool_calls".into()
                },
            ]
        );
    }

    #[test]
    fn usage_in_the_finish_chunk_completes_at_once_and_missing_ids_are_named() {
        let stream = r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"glob","arguments":{"pattern":"*.rs"}}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}

"#;
        let mut m = ChatMapper::with_id_prefix("call_r1a1_");
        let items: Vec<_> = decode_all(stream.as_bytes())
            .iter()
            .flat_map(|e| m.on_event(e))
            .collect();
        assert_eq!(
            items,
            vec![
                ProviderItem::ToolCallStart {
                    index: 0,
                    id: "call_r1a1_0".into(),
                    name: "glob".into()
                },
                ProviderItem::ToolCallArgs {
                    index: 0,
                    json: "{\"pattern\":\"*.rs\"}".into()
                },
                ProviderItem::Usage {
                    prompt_tokens: 3,
                    completion_tokens: 2,
                    cached_tokens: None
                },
                ProviderItem::Completed {
                    finish_reason: "tool_calls".into()
                },
            ]
        );
        assert!(m.on_eof().is_empty());
    }

    #[test]
    fn error_chunk_fails_and_done_without_finish_ends_incomplete() {
        let stream = r#"data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}

data: {"id":"gen-1","object":"chat.completion.chunk","error":{"code":502,"message":"Provider returned error"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}

"#;
        assert_eq!(
            run(stream),
            vec![
                ProviderItem::TextDelta { text: "Hi".into() },
                ProviderItem::Failed {
                    kind: FailureKind::Server,
                    message: "Provider returned error".into()
                },
            ]
        );
        let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n";
        assert!(matches!(
            run(stream).last(),
            Some(ProviderItem::EndedWithoutCompletion { .. })
        ));
        let stream =
            "data: {\"error\":{\"message\":\"quota\",\"type\":\"insufficient_quota\"}}\n\n";
        assert_eq!(
            run(stream),
            vec![ProviderItem::Failed {
                kind: FailureKind::InsufficientQuota,
                message: "quota".into()
            }]
        );
    }

    #[test]
    fn body_error_after_finish_reason_still_completes() {
        let cut = &TEXT[..TEXT.find("\"choices\":[],").unwrap()];
        let mut m = ChatMapper::new();
        // An aborted body is never `finish`ed: the partial last line is not an event.
        let mut items: Vec<_> = crate::provider::sse::SseDecoder::new()
            .feed(cut.as_bytes())
            .iter()
            .flat_map(|e| m.on_event(e))
            .collect();
        items.extend(m.on_body_error("connection reset"));
        assert_eq!(
            items.last(),
            Some(&ProviderItem::Completed {
                finish_reason: "stop".into()
            })
        );
        let mut m = ChatMapper::new();
        assert!(matches!(
            m.on_body_error("reset").as_slice(),
            [ProviderItem::EndedWithoutCompletion { .. }]
        ));
    }

    #[test]
    fn clean_eof_after_finish_completes_and_without_finish_does_not() {
        let cut = &TEXT[..TEXT.find("data: {\"id\":\"chatcmpl-123\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4o-mini\",\"choices\":[]").unwrap()];
        assert_eq!(
            run(cut).last(),
            Some(&ProviderItem::Completed {
                finish_reason: "stop".into()
            })
        );
        let cut = &TEXT[..TEXT.find("data: {\"id\":\"chatcmpl-123\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"").unwrap()];
        assert!(matches!(
            run(cut).last(),
            Some(ProviderItem::EndedWithoutCompletion { .. })
        ));
        // A clean end inside a chunk leaves its JSON cut: the stream is damaged.
        let cut = &TEXT[..TEXT.find("\"finish_reason\":\"stop\"").unwrap()];
        assert!(matches!(
            run(cut).last(),
            Some(ProviderItem::Failed {
                kind: FailureKind::Corrupt,
                ..
            })
        ));
    }

    #[test]
    fn body_uses_chat_roles_and_tool_messages() {
        let req = ModelRequest {
            system: "sys".into(),
            tools: vec![ToolSchema {
                name: "read_file".into(),
                description: "Read".into(),
                parameters: json!({"type":"object"}),
            }],
            messages: vec![
                Message::user_text("go"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        Block::Thinking {
                            text: "hmm".into(),
                            signature: Some("s".into()),
                        },
                        Block::ToolUse {
                            id: "call_1".into(),
                            name: "read_file".into(),
                            input: json!({"path":"a"}),
                        },
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![
                        Block::ToolResult {
                            id: "call_1".into(),
                            ok: false,
                            output: "no such file".into(),
                        },
                        Block::text("note"),
                    ],
                },
                Message::assistant_text("done"),
            ],
        };
        let body = build_body(&req, "qwen2.5-coder:7b", 512);
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["max_tokens"], 512);
        assert_eq!(
            body["tools"],
            json!([{"type":"function","function":{"name":"read_file","description":"Read","parameters":{"type":"object"}}}])
        );
        assert_eq!(
            body["messages"],
            json!([
                {"role":"system","content":"sys"},
                {"role":"user","content":"go"},
                {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
                    "function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}]},
                {"role":"tool","tool_call_id":"call_1","content":"[tool call failed]\nno such file"},
                {"role":"user","content":"note"},
                {"role":"assistant","content":"done"}
            ])
        );
        let body = build_body(&req, "o3-mini", 512);
        assert_eq!(body["max_completion_tokens"], 512);
        assert!(body.get("max_tokens").is_none());
    }
}
