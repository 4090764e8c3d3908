//! Every stop reason of the three provider APIs, through the real path to ACP: the API's own
//! stream (as the provider sends it) decoded by its adapter into the core's completion, the
//! turn's `done` as the core ends it (`StopReason::Provider`, verbatim), and the translator's
//! answer to `session/prompt`.
//!
//! The rule (docs/acp.md): a reply cut by the output cap or the context window answers
//! `max_tokens`; a reply the model or the provider's filter refused answers `refusal`; any other
//! finish answers `end_turn`.

use openmax_core::provider::ProviderItem;
use openmax_core::wire::{Event, StopReason as Stop};
use serde_json::{json, Value};

use super::translate::{Out, PromptEnd, Translator};
use crate::provider::anthropic::AnthropicMapper;
use crate::provider::chat::ChatMapper;
use crate::provider::mapping::StreamMapper;
use crate::provider::openai::OpenaiMapper;
use crate::provider::sse::decode_all;

fn sse(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| {
            if name.is_empty() {
                format!("data: {data}\n\n")
            } else {
                format!("event: {name}\ndata: {data}\n\n")
            }
        })
        .collect()
}

fn anthropic(stop: &str) -> String {
    sse(&[
        (
            "message_start",
            json!({"type":"message_start","message":{"id":"m","type":"message",
            "role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,
            "usage":{"input_tokens":3,"output_tokens":1}}}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,
            "content_block":{"type":"text","text":""}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,
            "delta":{"type":"text_delta","text":"hi"}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":stop,
            "stop_sequence":null},"usage":{"output_tokens":2}}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ])
}

/// A Responses stream: `completed` (with a function call when `call`), or `incomplete` with
/// `reason`.
fn responses(incomplete: Option<&str>, call: bool) -> String {
    let mut events = vec![
        (
            "response.created",
            json!({"type":"response.created","response":{"id":"r",
            "status":"in_progress"}}),
        ),
        (
            "response.output_text.delta",
            json!({"type":"response.output_text.delta",
            "output_index":0,"delta":"hi"}),
        ),
    ];
    if call {
        events.push((
            "response.output_item.added",
            json!({"type":"response.output_item.added",
            "output_index":1,"item":{"type":"function_call","id":"fc","call_id":"c1",
            "name":"glob","arguments":""}}),
        ));
        events.push((
            "response.output_item.done",
            json!({"type":"response.output_item.done",
            "output_index":1,"item":{"type":"function_call","id":"fc","call_id":"c1",
            "name":"glob","arguments":"{}"}}),
        ));
    }
    let usage = json!({"input_tokens":3,"output_tokens":2});
    match incomplete {
        Some(reason) => events.push((
            "response.incomplete",
            json!({"type":"response.incomplete",
            "response":{"id":"r","status":"incomplete","incomplete_details":{"reason":reason},
            "usage":usage}}),
        )),
        None => events.push((
            "response.completed",
            json!({"type":"response.completed",
            "response":{"id":"r","status":"completed","usage":usage}}),
        )),
    }
    sse(&events)
}

fn chat(finish: &str) -> String {
    let mut s = sse(&[
        (
            "",
            json!({"choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},
            "finish_reason":null}]}),
        ),
        (
            "",
            json!({"choices":[{"index":0,"delta":{},"finish_reason":finish}]}),
        ),
        (
            "",
            json!({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}),
        ),
    ]);
    s.push_str("data: [DONE]\n\n");
    s
}

/// The finish reason the adapter completes the stream with.
fn completed(mut mapper: impl StreamMapper, stream: &str) -> String {
    let mut items = Vec::new();
    for ev in decode_all(stream.as_bytes()) {
        items.extend(mapper.on_event(&ev));
    }
    items.extend(mapper.on_eof());
    match items.last() {
        Some(ProviderItem::Completed { finish_reason }) => finish_reason.clone(),
        other => panic!("the stream did not complete: {other:?} ({items:?})"),
    }
}

/// The answer to the prompt whose turn ends with the provider's `finish`.
fn answer(finish: &str) -> Value {
    let mut t = Translator::new("s1", std::path::PathBuf::from("/p"));
    t.prompt_started();
    let mut out = Vec::new();
    t.event(
        Event::Done {
            stop_reason: Stop::Provider(finish.to_string()),
        },
        &mut out,
    );
    match out.as_slice() {
        [Out::PromptEnded(PromptEnd::Stop(r))] => serde_json::to_value(r).unwrap(),
        other => panic!("{finish}: {other:?}"),
    }
}

#[test]
fn every_provider_stop_reason_maps_to_its_acp_stop_reason() {
    let table: Vec<(&str, String, &str)> = vec![
        // Anthropic Messages: every documented stop_reason.
        (
            "anthropic end_turn",
            completed(AnthropicMapper::new(), &anthropic("end_turn")),
            "end_turn",
        ),
        (
            "anthropic max_tokens",
            completed(AnthropicMapper::new(), &anthropic("max_tokens")),
            "max_tokens",
        ),
        (
            "anthropic stop_sequence",
            completed(AnthropicMapper::new(), &anthropic("stop_sequence")),
            "end_turn",
        ),
        (
            "anthropic tool_use",
            completed(AnthropicMapper::new(), &anthropic("tool_use")),
            "end_turn",
        ),
        (
            "anthropic pause_turn",
            completed(AnthropicMapper::new(), &anthropic("pause_turn")),
            "end_turn",
        ),
        (
            "anthropic refusal",
            completed(AnthropicMapper::new(), &anthropic("refusal")),
            "refusal",
        ),
        (
            "anthropic model_context_window_exceeded",
            completed(
                AnthropicMapper::new(),
                &anthropic("model_context_window_exceeded"),
            ),
            "max_tokens",
        ),
        // OpenAI Responses: completed, with and without calls, and each incomplete reason.
        (
            "responses completed",
            completed(OpenaiMapper::new(), &responses(None, false)),
            "end_turn",
        ),
        (
            "responses completed with a call",
            completed(OpenaiMapper::new(), &responses(None, true)),
            "end_turn",
        ),
        (
            "responses incomplete max_output_tokens",
            completed(
                OpenaiMapper::new(),
                &responses(Some("max_output_tokens"), false),
            ),
            "max_tokens",
        ),
        (
            "responses incomplete content_filter",
            completed(
                OpenaiMapper::new(),
                &responses(Some("content_filter"), false),
            ),
            "refusal",
        ),
        // Chat Completions: every finish_reason.
        (
            "chat stop",
            completed(ChatMapper::new(), &chat("stop")),
            "end_turn",
        ),
        (
            "chat length",
            completed(ChatMapper::new(), &chat("length")),
            "max_tokens",
        ),
        (
            "chat tool_calls",
            completed(ChatMapper::new(), &chat("tool_calls")),
            "end_turn",
        ),
        (
            "chat content_filter",
            completed(ChatMapper::new(), &chat("content_filter")),
            "refusal",
        ),
        (
            "chat function_call",
            completed(ChatMapper::new(), &chat("function_call")),
            "end_turn",
        ),
    ];
    let wrong: Vec<String> = table
        .iter()
        .filter_map(|(what, finish, want)| {
            let got = answer(finish);
            (got != json!(want)).then(|| format!("{what} (finish {finish:?}): {got}, not {want}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The harness's own endings keep their answers beside the providers' (a provider finish never
/// shadows one: `done` carries the harness reason itself).
#[test]
fn harness_endings_keep_their_answers() {
    for (stop, want) in [
        (Stop::MaxIterations, "max_turn_requests"),
        (Stop::BudgetExhausted, "max_turn_requests"),
        (Stop::Blocked, "refusal"),
        (Stop::Refused, "refusal"),
        (Stop::Cancelled, "cancelled"),
        (Stop::Unverified, "end_turn"),
    ] {
        let mut t = Translator::new("s1", std::path::PathBuf::from("/p"));
        t.prompt_started();
        let mut out = Vec::new();
        t.event(
            Event::Done {
                stop_reason: stop.clone(),
            },
            &mut out,
        );
        match out.as_slice() {
            [Out::PromptEnded(PromptEnd::Stop(r))] => {
                assert_eq!(serde_json::to_value(r).unwrap(), json!(want), "{stop:?}")
            }
            other => panic!("{stop:?}: {other:?}"),
        }
    }
}
