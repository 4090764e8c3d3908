//! The OpenAI Responses API (`POST {base}/responses`, `stream: true`, `store: false`): the
//! request body builder and the stream mapping.
//!
//! Body: `instructions` (the frozen prompt), `input` items replaying history: `message` items
//! (user `input_text`, assistant `output_text`), `function_call {call_id, name, arguments}`,
//! `function_call_output {call_id, output}`, and `reasoning` items only for thinking that holds
//! encrypted content (kept in the thinking block's `signature`); other thinking is dropped
//! (with `store: false` the API cannot resolve reasoning by id). Tools as
//! `{type: "function", name, description, parameters}`. For reasoning models (`o1`/`o3`/`o4…`,
//! `gpt-5…`, `codex…`) the body asks for reasoning summaries (`reasoning.summary: "auto"`) and
//! the encrypted reasoning content (`include`), so thinking streams and can be replayed.
//!
//! Mapping: `response.output_text.delta` → text; `response.reasoning_summary_text.delta` (and
//! `response.reasoning_text.delta`) → thinking, a finished reasoning item's
//! `encrypted_content` → signature; `function_call` output items → tool calls numbered 0, 1, …
//! in order, `response.function_call_arguments.delta` → their arguments (the `done` item's
//! arguments when no delta came). Terminal: `response.completed` → `Usage` (cached from
//! `input_tokens_details.cached_tokens`) + `Completed { "tool_calls" | "stop" }`;
//! `response.incomplete` → `Usage` + `Completed { incomplete_details.reason }` (e.g.
//! `max_output_tokens`); `response.failed` → `Failed` classified by `error.code`; an `error`
//! event → `Failed` classified by its `code`.

use std::collections::BTreeMap;

use openmax_core::conversation::{Block, ModelRequest, Role};
use openmax_core::provider::ProviderItem;
use serde_json::{json, Value};

use super::mapping::result_text;
use super::mapping::{event_json, failed_from_error, str_at, u64_at, StreamMapper};
use super::sse::SseEvent;

/// Build the JSON body of one Responses request.
pub fn build_body(req: &ModelRequest, model: &str, max_output_tokens: u32) -> Value {
    let mut input = Vec::new();
    for m in &req.messages {
        match m.role {
            Role::User => {
                for b in &m.content {
                    if let Block::ToolResult { id, ok, output } = b {
                        input.push(json!({"type":"function_call_output","call_id":id,
                            "output":result_text(*ok, output)}));
                    }
                }
                let parts: Vec<Value> = m
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::Text { text } if !text.is_empty() => {
                            Some(json!({"type":"input_text","text":text}))
                        }
                        Block::Image(img) if img.data.is_empty() => Some(
                            json!({"type":"input_text","text":super::mapping::image_gone(img)}),
                        ),
                        Block::Image(img) => Some(json!({"type":"input_image",
                            "image_url":super::mapping::data_url(img)})),
                        _ => None,
                    })
                    .collect();
                if !parts.is_empty() {
                    input.push(json!({"type":"message","role":"user","content":parts}));
                }
            }
            Role::Assistant => {
                let mut parts: Vec<Value> = Vec::new();
                for b in &m.content {
                    match b {
                        Block::Text { text } => {
                            if !text.is_empty() {
                                parts.push(json!({"type":"output_text","text":text}));
                            }
                        }
                        Block::Thinking {
                            text,
                            signature: Some(enc),
                        } => {
                            flush_assistant(&mut input, &mut parts);
                            let summary: Vec<Value> = if text.is_empty() {
                                Vec::new()
                            } else {
                                vec![json!({"type":"summary_text","text":text})]
                            };
                            input.push(json!({"type":"reasoning","summary":summary,
                                "encrypted_content":enc}));
                        }
                        Block::Thinking {
                            signature: None, ..
                        } => {}
                        Block::ToolUse {
                            id,
                            name,
                            input: args,
                        } => {
                            flush_assistant(&mut input, &mut parts);
                            input.push(json!({"type":"function_call","call_id":id,"name":name,
                                "arguments":args.to_string()}));
                        }
                        Block::ToolResult { .. } | Block::Image(_) => {}
                    }
                }
                flush_assistant(&mut input, &mut parts);
            }
        }
    }
    let mut body = json!({
        "model": model,
        "instructions": req.system,
        "input": input,
        "max_output_tokens": max_output_tokens,
        "stream": true,
        "store": false,
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({"type":"function","name":t.name,"description":t.description,
                    "parameters":t.parameters})
            })
            .collect();
    }
    if is_reasoning_model(model) {
        body["reasoning"] = json!({"summary":"auto"});
        body["include"] = json!(["reasoning.encrypted_content"]);
    }
    body
}

/// Models that reason (and accept `reasoning` and the encrypted-content `include`).
pub fn is_reasoning_model(model: &str) -> bool {
    let m = model.rsplit('/').next().unwrap_or(model);
    ["o1", "o3", "o4", "gpt-5", "codex"]
        .iter()
        .any(|p| m.starts_with(p))
}

fn flush_assistant(input: &mut Vec<Value>, parts: &mut Vec<Value>) {
    if !parts.is_empty() {
        input.push(json!({"type":"message","role":"assistant",
            "content":std::mem::take(parts)}));
    }
}

/// The stream mapping state for one response.
#[derive(Debug, Default)]
pub struct OpenaiMapper {
    done: bool,
    /// Output index → (tool call index, whether argument deltas arrived).
    tools: BTreeMap<u64, (u32, bool)>,
    /// Item id → output index, for events that name only the item.
    item_index: BTreeMap<String, u64>,
    next_tool: u32,
}

impl OpenaiMapper {
    pub fn new() -> OpenaiMapper {
        OpenaiMapper::default()
    }

    fn output_index(&self, v: &Value) -> Option<u64> {
        u64_at(v, "/output_index").or_else(|| {
            v.get("item_id")
                .and_then(Value::as_str)
                .and_then(|id| self.item_index.get(id).copied())
        })
    }

    fn usage(resp: &Value) -> Option<ProviderItem> {
        let u = resp.get("usage").filter(|u| u.is_object())?;
        Some(ProviderItem::Usage {
            prompt_tokens: u64_at(u, "/input_tokens").unwrap_or(0),
            completion_tokens: u64_at(u, "/output_tokens").unwrap_or(0),
            cached_tokens: u64_at(u, "/input_tokens_details/cached_tokens"),
        })
    }
}

impl StreamMapper for OpenaiMapper {
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
            "response.output_text.delta" => out.push(ProviderItem::TextDelta {
                text: str_at(&v, "/delta").into(),
            }),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                out.push(ProviderItem::ThinkingDelta {
                    text: str_at(&v, "/delta").into(),
                })
            }
            "response.output_item.added" => {
                let item = &v["item"];
                let oi = u64_at(&v, "/output_index").unwrap_or(0);
                if let Some(id) = item.get("id").and_then(Value::as_str) {
                    self.item_index.insert(id.to_string(), oi);
                }
                if str_at(item, "/type") == "function_call" && !self.tools.contains_key(&oi) {
                    let tool = self.next_tool;
                    self.next_tool += 1;
                    self.tools.insert(oi, (tool, false));
                    out.push(ProviderItem::ToolCallStart {
                        index: tool,
                        id: str_at(item, "/call_id").into(),
                        name: str_at(item, "/name").into(),
                    });
                    let args = str_at(item, "/arguments");
                    if !args.is_empty() {
                        self.tools.insert(oi, (tool, true));
                        out.push(ProviderItem::ToolCallArgs {
                            index: tool,
                            json: args.into(),
                        });
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                let delta = str_at(&v, "/delta");
                if let Some(oi) = self.output_index(&v) {
                    if let Some((tool, seen)) = self.tools.get_mut(&oi) {
                        if !delta.is_empty() {
                            *seen = true;
                            out.push(ProviderItem::ToolCallArgs {
                                index: *tool,
                                json: delta.into(),
                            });
                        }
                    }
                }
            }
            "response.output_item.done" => {
                let item = &v["item"];
                let oi = u64_at(&v, "/output_index").unwrap_or(0);
                match str_at(item, "/type") {
                    "function_call" => {
                        if let Some((tool, seen)) = self.tools.get_mut(&oi) {
                            if !*seen {
                                *seen = true;
                                let args = str_at(item, "/arguments");
                                out.push(ProviderItem::ToolCallArgs {
                                    index: *tool,
                                    json: if args.is_empty() { "{}" } else { args }.into(),
                                });
                            }
                        }
                    }
                    "reasoning" => {
                        let enc = str_at(item, "/encrypted_content");
                        if !enc.is_empty() {
                            out.push(ProviderItem::ThinkingSignature {
                                signature: enc.into(),
                            });
                        }
                    }
                    _ => {}
                }
            }
            "response.completed" => {
                let resp = &v["response"];
                out.extend(Self::usage(resp));
                let finish = if self.tools.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                };
                out.push(ProviderItem::Completed {
                    finish_reason: finish.into(),
                });
                self.done = true;
            }
            "response.incomplete" => {
                let resp = &v["response"];
                out.extend(Self::usage(resp));
                let reason = str_at(resp, "/incomplete_details/reason");
                out.push(ProviderItem::Completed {
                    finish_reason: if reason.is_empty() {
                        "incomplete"
                    } else {
                        reason
                    }
                    .into(),
                });
                self.done = true;
            }
            "response.failed" => {
                let err = &v["response"]["error"];
                out.push(failed_from_error(err, "the response failed"));
                self.done = true;
            }
            "error" => {
                // `{type:"error", code, message, param}`; some servers nest it in `error`.
                let err = v.get("error").filter(|e| e.is_object()).unwrap_or(&v);
                out.push(failed_from_error(err, "the provider reported an error"));
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
            detail: "the stream ended without response.completed".into(),
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

    fn run(stream: &str) -> Vec<ProviderItem> {
        let mut m = OpenaiMapper::new();
        let mut out = Vec::new();
        for ev in decode_all(stream.as_bytes()) {
            out.extend(m.on_event(&ev));
        }
        out.extend(m.on_eof());
        out
    }

    /// Text stream in the documented format (trimmed `response` objects).
    const TEXT: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","status":"in_progress","output":[],"usage":null}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_67c9","status":"in_progress"}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_67c9","type":"message","status":"in_progress","role":"assistant","content":[]}}

event: response.content_part.added
data: {"type":"response.content_part.added","sequence_number":3,"item_id":"msg_67c9","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_67c9","output_index":0,"content_index":0,"delta":"Hi"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_67c9","output_index":0,"content_index":0,"delta":" there"}

event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":6,"item_id":"msg_67c9","output_index":0,"content_index":0,"text":"Hi there"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":"msg_67c9","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi there","annotations":[]}]}}

event: response.completed
data: {"type":"response.completed","sequence_number":8,"response":{"id":"resp_67c9","status":"completed","usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":12},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}}

"#;

    #[test]
    fn text_and_completed_usage() {
        assert_eq!(
            run(TEXT),
            vec![
                ProviderItem::TextDelta { text: "Hi".into() },
                ProviderItem::TextDelta {
                    text: " there".into()
                },
                ProviderItem::Usage {
                    prompt_tokens: 37,
                    completion_tokens: 11,
                    cached_tokens: Some(12)
                },
                ProviderItem::Completed {
                    finish_reason: "stop".into()
                },
            ]
        );
    }

    /// Reasoning summary then a function call with streamed arguments.
    const TOOL: &str = r#"event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_6806","type":"reasoning","summary":[]}}

event: response.reasoning_summary_part.added
data: {"type":"response.reasoning_summary_part.added","item_id":"rs_6806","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""},"sequence_number":3}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_6806","output_index":0,"summary_index":0,"delta":"**Checking weather**","sequence_number":4}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{"id":"rs_6806","type":"reasoning","summary":[{"type":"summary_text","text":"**Checking weather**"}],"encrypted_content":"gAAAAABo-enc"}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":6,"output_index":1,"item":{"id":"fc_1234","type":"function_call","status":"in_progress","arguments":"","call_id":"call_abc","name":"get_weather"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_1234","output_index":1,"delta":"{\"location\":"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":8,"item_id":"fc_1234","delta":"\"Paris\"}"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","sequence_number":9,"item_id":"fc_1234","output_index":1,"arguments":"{\"location\":\"Paris\"}"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":10,"output_index":1,"item":{"id":"fc_1234","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris\"}","call_id":"call_abc","name":"get_weather"}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":11,"output_index":2,"item":{"id":"fc_5678","type":"function_call","status":"in_progress","arguments":"","call_id":"call_def","name":"list_dir"}}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":12,"output_index":2,"item":{"id":"fc_5678","type":"function_call","status":"completed","arguments":"{\"path\":\".\"}","call_id":"call_def","name":"list_dir"}}

event: response.completed
data: {"type":"response.completed","sequence_number":13,"response":{"id":"resp_1","status":"completed","usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":0},"output_tokens":20,"total_tokens":120}}}

"#;

    #[test]
    fn reasoning_and_function_calls() {
        assert_eq!(
            run(TOOL),
            vec![
                ProviderItem::ThinkingDelta {
                    text: "**Checking weather**".into()
                },
                ProviderItem::ThinkingSignature {
                    signature: "gAAAAABo-enc".into()
                },
                ProviderItem::ToolCallStart {
                    index: 0,
                    id: "call_abc".into(),
                    name: "get_weather".into()
                },
                ProviderItem::ToolCallArgs {
                    index: 0,
                    json: "{\"location\":".into()
                },
                ProviderItem::ToolCallArgs {
                    index: 0,
                    json: "\"Paris\"}".into()
                },
                ProviderItem::ToolCallStart {
                    index: 1,
                    id: "call_def".into(),
                    name: "list_dir".into()
                },
                ProviderItem::ToolCallArgs {
                    index: 1,
                    json: "{\"path\":\".\"}".into()
                },
                ProviderItem::Usage {
                    prompt_tokens: 100,
                    completion_tokens: 20,
                    cached_tokens: Some(0)
                },
                ProviderItem::Completed {
                    finish_reason: "tool_calls".into()
                },
            ]
        );
    }

    #[test]
    fn failed_incomplete_and_error_events() {
        let failed = r#"event: response.failed
data: {"type":"response.failed","sequence_number":3,"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."}}}

"#;
        assert_eq!(
            run(failed),
            vec![ProviderItem::Failed {
                kind: FailureKind::Server,
                message: "The model failed to generate a response.".into()
            }]
        );
        let incomplete = r#"event: response.output_text.delta
data: {"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"Long"}

event: response.incomplete
data: {"type":"response.incomplete","response":{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":5,"output_tokens":16}}}

"#;
        assert_eq!(
            run(incomplete),
            vec![
                ProviderItem::TextDelta {
                    text: "Long".into()
                },
                ProviderItem::Usage {
                    prompt_tokens: 5,
                    completion_tokens: 16,
                    cached_tokens: None
                },
                ProviderItem::Completed {
                    finish_reason: "max_output_tokens".into()
                },
            ]
        );
        let error = r#"event: error
data: {"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached","param":null,"sequence_number":4}

"#;
        assert_eq!(
            run(error),
            vec![ProviderItem::Failed {
                kind: FailureKind::RateLimit,
                message: "Rate limit reached".into()
            }]
        );
    }

    #[test]
    fn eof_without_completed() {
        let cut = &TEXT[..TEXT.find("event: response.completed").unwrap()];
        assert!(matches!(
            run(cut).last(),
            Some(ProviderItem::EndedWithoutCompletion { .. })
        ));
    }

    #[test]
    fn body_replays_history_as_input_items() {
        let req = ModelRequest {
            system: "sys".into(),
            tools: vec![ToolSchema {
                name: "shell".into(),
                description: "Run".into(),
                parameters: json!({"type":"object"}),
            }],
            messages: vec![
                Message::user_text("go"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        Block::Thinking {
                            text: "plain".into(),
                            signature: None,
                        },
                        Block::Thinking {
                            text: "sum".into(),
                            signature: Some("enc".into()),
                        },
                        Block::text("ok"),
                        Block::ToolUse {
                            id: "call_1".into(),
                            name: "shell".into(),
                            input: json!({"command":"ls"}),
                        },
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![Block::ToolResult {
                        id: "call_1".into(),
                        ok: true,
                        output: "a\nb".into(),
                    }],
                },
            ],
        };
        let body = build_body(&req, "gpt-5", 1000);
        assert_eq!(body["instructions"], "sys");
        assert_eq!(body["stream"], true);
        assert_eq!(body["store"], false);
        assert_eq!(body["max_output_tokens"], 1000);
        assert_eq!(body["reasoning"]["summary"], "auto");
        assert_eq!(
            body["tools"],
            json!([{"type":"function","name":"shell","description":"Run","parameters":{"type":"object"}}])
        );
        assert_eq!(
            body["input"],
            json!([
                {"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},
                {"type":"reasoning","summary":[{"type":"summary_text","text":"sum"}],"encrypted_content":"enc"},
                {"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]},
                {"type":"function_call","call_id":"call_1","name":"shell","arguments":"{\"command\":\"ls\"}"},
                {"type":"function_call_output","call_id":"call_1","output":"a\nb"}
            ])
        );
        let body = build_body(&req, "gpt-4.1", 1000);
        assert!(body.get("reasoning").is_none());
        assert!(body.get("include").is_none());
    }
}
