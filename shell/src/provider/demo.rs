//! The built-in `demo` provider: a scripted model with no key and no network, so a newcomer
//! sees a whole session (streamed text, thinking, a read-only tool, a change that needs
//! approval, a summary).
//!
//! It writes Anthropic Messages SSE bytes in-process and runs them through the same
//! [`super::sse::SseDecoder`] (fed in small, odd-sized chunks) and [`super::anthropic`]
//! mapping as a real stream, so the adapter code under test is the real one.
//!
//! The script is a pure function of the request's conversation (invariant: the same request
//! gives the same bytes, apart from the call ids that embed the request id):
//! - the last user message carries no tool result → a greeting, a short thinking block, and
//!   `read_file {"path":"demo.txt"}`;
//! - after a `read_file` result: ok → `edit_file` replacing `Hello` with `Hello, openmax`;
//!   failed (no demo.txt yet) → `write_file` creating it;
//! - after an `edit_file` / `write_file` result (or any other) → a closing summary that says
//!   whether the change went through, was declined, or failed.

use openmax_core::conversation::{Block, ModelRequest, Role};
use openmax_core::provider::{ProviderItem, RequestId};
use serde_json::{json, Value};

use super::anthropic::AnthropicMapper;
use super::mapping::StreamMapper;
use super::sse::SseDecoder;

/// The demo's model name.
pub const MODEL: &str = "openmax-demo";

/// One scripted reply.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoReply {
    pub thinking: Option<String>,
    pub text: String,
    /// (tool name, arguments)
    pub call: Option<(String, Value)>,
}

/// What the demo model says next, given the conversation.
pub fn script(req: &ModelRequest) -> DemoReply {
    let last_user = req.messages.iter().rev().find(|m| m.role == Role::User);
    let result = last_user.and_then(|m| {
        m.content.iter().rev().find_map(|b| match b {
            Block::ToolResult { id, ok, output } => Some((id.clone(), *ok, output.clone())),
            _ => None,
        })
    });
    let Some((id, ok, output)) = result else {
        return DemoReply {
            thinking: Some(
                "The user is trying openmax without a provider. I'll show the loop: read \
                 demo.txt with a read-only tool, then propose an edit that needs approval."
                    .into(),
            ),
            text: "Hi! I'm the openmax demo: a scripted model that needs no API key and no \
                   network. I'll show you a whole session. First I'll read `demo.txt` (reading \
                   is safe, so it runs right away)."
                .into(),
            call: Some(("read_file".into(), json!({"path":"demo.txt"}))),
        };
    };
    let tool = tool_name(req, &id).unwrap_or_default();
    match (tool.as_str(), ok) {
        ("read_file", true) => DemoReply {
            thinking: None,
            text: "Got it. Now I'll change \"Hello\" to \"Hello, openmax\" in demo.txt. This \
                   edit changes a file, so openmax shows you the diff (and, in `ask` mode, asks you first)."
                .into(),
            call: Some((
                "edit_file".into(),
                json!({"path":"demo.txt","old_string":"Hello","new_string":"Hello, openmax"}),
            )),
        },
        ("read_file", false) => DemoReply {
            thinking: None,
            text: "There's no demo.txt here yet, so I'll create one. Writing a file changes \
                   the project, so openmax shows you the diff (and, in `ask` mode, asks you first)."
                .into(),
            call: Some((
                "write_file".into(),
                json!({"path":"demo.txt","content":"Hello from the openmax demo!\n"}),
            )),
        },
        (_, true) => DemoReply {
            thinking: None,
            text: "Done: demo.txt is updated. That was the whole loop: a streamed reply, a \
                   read-only tool that ran at once, and a change shown as a diff (gated by your \
                   approval in `ask` mode). To use a real model, set a provider (see \
                   docs/providers.md)."
                .into(),
            call: None,
        },
        (_, false) => {
            let low = output.to_lowercase();
            let declined = ["declin", "denied", "not approved", "refused", "rejected"]
                .iter()
                .any(|w| low.contains(w));
            let text = if declined {
                "You declined the change, so demo.txt is untouched. That's the point of \
                 approvals: nothing that changes your project runs without your say-so. To \
                 use a real model, set a provider (see docs/providers.md)."
                    .to_string()
            } else {
                format!(
                    "The change did not go through ({}), so demo.txt is as it was. To use a \
                     real model, set a provider (see docs/providers.md).",
                    output.lines().next().unwrap_or("no details").trim()
                )
            };
            DemoReply {
                thinking: None,
                text,
                call: None,
            }
        }
    }
}

/// The name of the tool call with this id in the conversation.
fn tool_name(req: &ModelRequest, id: &str) -> Option<String> {
    req.messages.iter().rev().find_map(|m| {
        m.content.iter().find_map(|b| match b {
            Block::ToolUse { id: i, name, .. } if i == id => Some(name.clone()),
            _ => None,
        })
    })
}

/// A rough token estimate (4 bytes a token), for plausible usage numbers.
fn estimate_tokens(req: &ModelRequest) -> u64 {
    let mut bytes = req.system.len();
    for t in &req.tools {
        bytes += t.name.len() + t.description.len() + t.parameters.to_string().len();
    }
    for m in &req.messages {
        for b in &m.content {
            bytes += match b {
                Block::Text { text } => text.len(),
                Block::Thinking { text, .. } => text.len(),
                Block::ToolUse { input, .. } => input.to_string().len() + 20,
                Block::ToolResult { output, .. } => output.len() + 10,
                Block::Image(img) => img.data.len(),
            };
        }
    }
    (bytes as u64).div_ceil(4).max(1)
}

/// The reply as Anthropic Messages SSE bytes. Call ids are `toolu_demo_{request}_{attempt}`.
pub fn sse_bytes(req: &ModelRequest, request: RequestId, attempt: u32) -> Vec<u8> {
    let reply = script(req);
    let mut out = String::new();
    let mut push = |event: &str, data: Value| {
        out.push_str(&format!("event: {event}\ndata: {data}\n\n"));
    };
    let input_tokens = estimate_tokens(req);
    push(
        "message_start",
        json!({"type":"message_start","message":{"id":format!("msg_demo_{request}_{attempt}"),
            "type":"message","role":"assistant","content":[],"model":MODEL,"stop_reason":null,
            "stop_sequence":null,"usage":{"input_tokens":input_tokens,
            "cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}),
    );
    let mut index = 0;
    let mut out_chars = 0;
    if let Some(thinking) = &reply.thinking {
        push(
            "content_block_start",
            json!({"type":"content_block_start","index":index,
                "content_block":{"type":"thinking","thinking":""}}),
        );
        for piece in pieces(thinking) {
            push(
                "content_block_delta",
                json!({"type":"content_block_delta","index":index,
                    "delta":{"type":"thinking_delta","thinking":piece}}),
            );
        }
        push(
            "content_block_delta",
            json!({"type":"content_block_delta","index":index,
                "delta":{"type":"signature_delta","signature":"openmax-demo-signature"}}),
        );
        push(
            "content_block_stop",
            json!({"type":"content_block_stop","index":index}),
        );
        out_chars += thinking.len();
        index += 1;
    }
    push(
        "content_block_start",
        json!({"type":"content_block_start","index":index,
            "content_block":{"type":"text","text":""}}),
    );
    push("ping", json!({"type":"ping"}));
    for piece in pieces(&reply.text) {
        push(
            "content_block_delta",
            json!({"type":"content_block_delta","index":index,
                "delta":{"type":"text_delta","text":piece}}),
        );
    }
    push(
        "content_block_stop",
        json!({"type":"content_block_stop","index":index}),
    );
    out_chars += reply.text.len();
    index += 1;
    if let Some((name, args)) = &reply.call {
        push(
            "content_block_start",
            json!({"type":"content_block_start","index":index,"content_block":{"type":"tool_use",
                "id":format!("toolu_demo_{request}_{attempt}"),"name":name,"input":{}}}),
        );
        let args = args.to_string();
        let (a, b) = args.split_at(args.len() / 2);
        for part in [a, b] {
            push(
                "content_block_delta",
                json!({"type":"content_block_delta","index":index,
                    "delta":{"type":"input_json_delta","partial_json":part}}),
            );
        }
        push(
            "content_block_stop",
            json!({"type":"content_block_stop","index":index}),
        );
        out_chars += args.len();
    }
    let stop = if reply.call.is_some() {
        "tool_use"
    } else {
        "end_turn"
    };
    push(
        "message_delta",
        json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},
            "usage":{"output_tokens":(out_chars as u64).div_ceil(4)}}),
    );
    push("message_stop", json!({"type":"message_stop"}));
    out.into_bytes()
}

/// Split text into word-sized deltas (a space stays with the word before it).
fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for ch in text.chars() {
        cur.push(ch);
        if ch == ' ' && cur.len() > 12 {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The items of one demo attempt, in order: `Opened`, then the mapping's items for the
/// scripted stream fed through the SSE decoder in 7-byte chunks (one terminal item last).
pub fn items(req: &ModelRequest, request: RequestId, attempt: u32) -> Vec<ProviderItem> {
    let bytes = sse_bytes(req, request, attempt);
    let mut decoder = SseDecoder::new();
    let mut mapper = AnthropicMapper::new();
    let mut out = vec![ProviderItem::Opened];
    for chunk in bytes.chunks(7) {
        for ev in decoder.feed(chunk) {
            out.extend(mapper.on_event(&ev));
        }
    }
    for ev in decoder.finish() {
        out.extend(mapper.on_event(&ev));
    }
    out.extend(mapper.on_eof());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use openmax_core::conversation::Message;

    /// The demo streams its text as a model does, a few words a delta: each delta but the
    /// last ends after a space (with the word before it), none is split inside a word, and
    /// together they are the text.
    #[test]
    fn text_is_streamed_in_pieces_of_whole_words() {
        let text = "openmax streams this reply in pieces of whole words, as a model would";
        let p = pieces(text);
        assert_eq!(p.concat(), text);
        assert!(p.len() > 3, "{p:?}");
        for piece in &p[..p.len() - 1] {
            assert!(piece.ends_with(' ') && piece.len() > 12, "{p:?}");
        }
        assert_eq!(pieces("short"), ["short"]);
        assert!(pieces("").is_empty());
    }

    fn args_of(items: &[ProviderItem]) -> (String, Value) {
        let name = items
            .iter()
            .find_map(|i| match i {
                ProviderItem::ToolCallStart { name, .. } => Some(name.clone()),
                _ => None,
            })
            .expect("a tool call");
        let json: String = items
            .iter()
            .filter_map(|i| match i {
                ProviderItem::ToolCallArgs { json, .. } => Some(json.as_str()),
                _ => None,
            })
            .collect();
        (name, serde_json::from_str(&json).expect("valid args"))
    }

    fn text_of(items: &[ProviderItem]) -> String {
        items
            .iter()
            .filter_map(|i| match i {
                ProviderItem::TextDelta { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    fn after(req: &mut ModelRequest, items: &[ProviderItem], ok: bool, output: &str) {
        let (name, input) = args_of(items);
        let id = items
            .iter()
            .find_map(|i| match i {
                ProviderItem::ToolCallStart { id, .. } => Some(id.clone()),
                _ => None,
            })
            .expect("a tool call");
        req.messages.push(Message {
            role: Role::Assistant,
            content: vec![
                Block::text(text_of(items)),
                Block::ToolUse {
                    id: id.clone(),
                    name,
                    input,
                },
            ],
        });
        req.messages.push(Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                id,
                ok,
                output: output.into(),
            }],
        });
    }

    /// The events of the first request's stream, each `data:` line parsed.
    fn first_events() -> Vec<Value> {
        let text = String::from_utf8(sse_bytes(&start(), 1, 1)).unwrap();
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    fn start() -> ModelRequest {
        ModelRequest {
            system: "sys".into(),
            tools: vec![],
            messages: vec![Message::user_text("hello")],
        }
    }

    /// The usage estimate counts every byte the request carries (system, tool schemas, each
    /// kind of block) at four bytes a token, rounded up, and is never zero.
    #[test]
    fn the_input_estimate_is_a_quarter_of_every_byte_sent() {
        let empty = ModelRequest {
            system: String::new(),
            tools: vec![],
            messages: vec![],
        };
        assert_eq!(estimate_tokens(&empty), 1);
        let tool = openmax_core::conversation::ToolSchema {
            name: "abcd".into(),
            description: "efgh".into(),
            parameters: json!({}),
        };
        let req = ModelRequest {
            system: "s".repeat(8),
            tools: vec![tool.clone(), tool],
            messages: vec![Message {
                role: Role::User,
                content: vec![
                    Block::text("t".repeat(5)),
                    Block::ToolUse {
                        id: "i".into(),
                        name: "n".into(),
                        input: json!({}),
                    },
                    Block::ToolResult {
                        id: "i".into(),
                        ok: true,
                        output: "o".repeat(3),
                    },
                ],
            }],
        };
        // 8 + 2 × (4 + 4 + 2) + 5 + (2 + 20) + (3 + 10) = 68 bytes: 17 tokens.
        assert_eq!(estimate_tokens(&req), 17);
    }

    /// The usage counts what the reply carried: thinking, text and a call's arguments, four
    /// bytes a token, rounded up.
    #[test]
    fn the_output_tokens_count_every_streamed_byte() {
        let events = first_events();
        let streamed: usize = events
            .iter()
            .filter(|ev| ev["type"] == "content_block_delta")
            .map(|ev| {
                let d = &ev["delta"];
                ["thinking", "text", "partial_json"]
                    .iter()
                    .filter_map(|k| d[*k].as_str())
                    .map(str::len)
                    .sum::<usize>()
            })
            .sum();
        let kinds: Vec<&str> = events
            .iter()
            .filter_map(|ev| ev["delta"]["type"].as_str())
            .collect();
        for kind in ["thinking_delta", "text_delta", "input_json_delta"] {
            assert!(
                kinds.contains(&kind),
                "the first reply streams a {kind}: {kinds:?}"
            );
        }
        let usage = events
            .iter()
            .find(|ev| ev["type"] == "message_delta")
            .unwrap();
        assert_eq!(
            usage["usage"]["output_tokens"],
            json!(streamed.div_ceil(4)),
            "{streamed} bytes streamed"
        );
    }

    /// A call's arguments arrive in two deltas of about half each, as a real stream splits them.
    #[test]
    fn the_arguments_stream_in_two_halves() {
        let parts: Vec<String> = first_events()
            .into_iter()
            .filter(|ev| ev["delta"]["type"] == "input_json_delta")
            .map(|ev| ev["delta"]["partial_json"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(parts.len(), 2, "{parts:?}");
        assert_eq!(parts.concat(), json!({"path": "demo.txt"}).to_string());
        assert!(parts[0].len().abs_diff(parts[1].len()) <= 1, "{parts:?}");
    }

    /// The first request's stream (thinking, text, a call) numbers its content blocks 0, 1, 2
    /// as the Messages API does, and every delta and stop names the block that is open.
    #[test]
    fn the_stream_numbers_its_blocks_in_order_and_each_event_names_the_open_one() {
        let mut open: Option<u64> = None;
        let mut started = Vec::new();
        for ev in first_events() {
            let data = ev.to_string();
            let index = ev["index"].as_u64();
            match ev["type"].as_str().unwrap() {
                "content_block_start" => {
                    assert_eq!(open, None, "{data}");
                    assert_eq!(index, Some(started.len() as u64), "{data}");
                    started.push(ev["content_block"]["type"].as_str().unwrap().to_string());
                    open = index;
                }
                "content_block_delta" => assert_eq!(index, open, "{data}"),
                "content_block_stop" => {
                    assert_eq!(index, open, "{data}");
                    open = None;
                }
                _ => {}
            }
        }
        assert_eq!(started, ["thinking", "text", "tool_use"]);
        assert_eq!(open, None);
    }

    #[test]
    fn whole_demo_session_approved() {
        let mut req = start();
        let first = items(&req, 1, 1);
        assert_eq!(first[0], ProviderItem::Opened);
        assert!(text_of(&first).starts_with("Hi! I'm the openmax demo"));
        assert!(first
            .iter()
            .any(|i| matches!(i, ProviderItem::ThinkingSignature { .. })));
        assert_eq!(
            args_of(&first),
            ("read_file".into(), json!({"path":"demo.txt"}))
        );
        assert!(
            matches!(first.last(), Some(ProviderItem::Completed { finish_reason }) if finish_reason == "tool_use")
        );
        assert!(first
            .iter()
            .any(|i| matches!(i, ProviderItem::Usage { prompt_tokens, completion_tokens, .. } if *prompt_tokens > 0 && *completion_tokens > 0)));

        after(&mut req, &first, true, "1\tHello world\n");
        let second = items(&req, 2, 1);
        assert_eq!(
            args_of(&second),
            (
                "edit_file".into(),
                json!({"path":"demo.txt","old_string":"Hello","new_string":"Hello, openmax"})
            )
        );

        after(&mut req, &second, true, "edited demo.txt");
        let third = items(&req, 3, 1);
        assert!(text_of(&third).starts_with("Done"));
        assert!(!third
            .iter()
            .any(|i| matches!(i, ProviderItem::ToolCallStart { .. })));
        assert!(
            matches!(third.last(), Some(ProviderItem::Completed { finish_reason }) if finish_reason == "end_turn")
        );
    }

    /// A conversation another model began (a resumed session) may end with several calls in
    /// one message: the demo answers the result it reads by the call that result names.
    #[test]
    fn a_result_is_read_by_the_call_it_names() {
        let mut req = start();
        let call = |id: &str, name: &str| Block::ToolUse {
            id: id.into(),
            name: name.into(),
            input: json!({}),
        };
        let result = |id: &str| Block::ToolResult {
            id: id.into(),
            ok: true,
            output: "ok".into(),
        };
        req.messages.push(Message {
            role: Role::Assistant,
            content: vec![call("a", "write_file"), call("b", "read_file")],
        });
        req.messages.push(Message {
            role: Role::User,
            content: vec![result("a"), result("b")],
        });
        assert_eq!(script(&req).call.map(|c| c.0).as_deref(), Some("edit_file"));
        // The control: the same calls answered the other way round end the script.
        req.messages.last_mut().unwrap().content = vec![result("b"), result("a")];
        assert_eq!(script(&req).call, None);
    }

    #[test]
    fn declined_edit_and_missing_file() {
        let mut req = start();
        let first = items(&req, 1, 1);
        after(&mut req, &first, false, "no such file: demo.txt");
        let second = items(&req, 2, 1);
        assert_eq!(args_of(&second).0, "write_file");
        after(&mut req, &second, false, "The user declined this action.");
        let third = items(&req, 3, 1);
        assert!(text_of(&third).contains("declined"));
    }
}
