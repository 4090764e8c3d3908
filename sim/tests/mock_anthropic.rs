//! The mock's Anthropic Messages streams over loopback: event sequences for text, thinking and
//! tool calls, usage, and each fault.

mod mock_support;

use mock_support::*;
use openmax_sim::mock::{thinking_signature, MockServer};
use openmax_sim::script::StreamEnd;
use serde_json::{json, Value};

const PATH: &str = "/v1/messages";

fn body() -> Value {
    json!({"model": "claude-test", "stream": true, "max_tokens": 100,
           "messages": [{"role": "user", "content": "hi"}]})
}

fn events_of(resp: &Resp) -> Vec<String> {
    assert_well_formed_sse(&resp.text());
    event_names(&resp.text())
}

/// Every data payload's `type` equals its `event:` name.
fn assert_types_match(resp: &Resp) {
    let names = event_names(&resp.text());
    let data = data_values(&resp.text());
    assert_eq!(names.len(), data.len());
    for (name, value) in names.iter().zip(&data) {
        assert_eq!(value["type"], json!(name), "{value}");
    }
}

#[tokio::test]
async fn text_reply_streams_blocks_usage_and_stop() {
    let reply = complete(vec![text("Hel"), text("lo"), usage(10, 2, Some(4))]);
    let (resp, end) = serve_one(PATH, &body(), reply).await;
    assert_eq!(end, End::Clean);
    assert_eq!(resp.status, 200);
    assert!(resp
        .header("content-type")
        .is_some_and(|v| v.starts_with("text/event-stream")));
    assert_eq!(
        events_of(&resp),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_types_match(&resp);
    let data = data_values(&resp.text());
    let start = &data[0]["message"];
    assert_eq!(start["model"], "claude-test");
    assert_eq!(start["role"], "assistant");
    assert_eq!(start["usage"]["input_tokens"], 6);
    assert_eq!(start["usage"]["cache_read_input_tokens"], 4);
    assert_eq!(start["usage"]["cache_creation_input_tokens"], 0);
    assert_eq!(
        data[2]["content_block"],
        json!({"type": "text", "text": ""})
    );
    assert_eq!(
        data[3]["delta"],
        json!({"type": "text_delta", "text": "Hel"})
    );
    assert_eq!(data[4]["delta"]["text"], "lo");
    assert_eq!(data[6]["delta"]["stop_reason"], "end_turn");
    assert_eq!(data[6]["usage"]["output_tokens"], 2);
}

#[tokio::test]
async fn thinking_then_text_has_thinking_deltas_and_a_signature() {
    let reply = complete(vec![thinking("let me "), thinking("see"), text("ok")]);
    let (resp, end) = serve_one(PATH, &body(), reply).await;
    assert_eq!(end, End::Clean);
    assert_eq!(
        events_of(&resp),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let data = data_values(&resp.text());
    assert_eq!(data[2]["content_block"]["type"], "thinking");
    assert_eq!(data[2]["index"], 0);
    assert_eq!(
        data[3]["delta"],
        json!({"type": "thinking_delta", "thinking": "let me "})
    );
    assert_eq!(
        data[5]["delta"],
        json!({"type": "signature_delta", "signature": thinking_signature("let me see")})
    );
    assert_eq!(data[7]["index"], 1);
    assert_eq!(data[7]["content_block"]["type"], "text");
}

#[tokio::test]
async fn tool_call_streams_input_json_in_pieces_and_stops_for_tool_use() {
    let args = json!({"path": "src/main.rs", "limit": 20});
    let reply = complete(vec![
        text("Reading."),
        tool("toolu_01", "read_file", args.clone()),
    ]);
    let (resp, end) = serve_one(PATH, &body(), reply).await;
    assert_eq!(end, End::Clean);
    assert_types_match(&resp);
    let data = data_values(&resp.text());
    let start = data
        .iter()
        .find(|d| d["content_block"]["type"] == "tool_use")
        .expect("a tool_use block");
    assert_eq!(start["index"], 1);
    assert_eq!(start["content_block"]["id"], "toolu_01");
    assert_eq!(start["content_block"]["name"], "read_file");
    assert_eq!(start["content_block"]["input"], json!({}));
    let pieces: Vec<&str> = data
        .iter()
        .filter(|d| d["delta"]["type"] == "input_json_delta")
        .map(|d| d["delta"]["partial_json"].as_str().expect("a string"))
        .collect();
    assert!(pieces.len() >= 2, "{pieces:?}");
    let joined: Value = serde_json::from_str(&pieces.concat()).expect("JSON arguments");
    assert_eq!(joined, args);
    let delta = data
        .iter()
        .find(|d| d["type"] == "message_delta")
        .expect("message_delta");
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(data.last().expect("events")["type"], "message_stop");
}

#[tokio::test]
async fn scripted_finish_reason_is_the_stop_reason() {
    let reply = stream(
        vec![text("cut")],
        StreamEnd::Complete {
            finish: Some("max_tokens".into()),
        },
    );
    let (resp, _) = serve_one(PATH, &body(), reply).await;
    let data = data_values(&resp.text());
    let delta = data
        .iter()
        .find(|d| d["type"] == "message_delta")
        .expect("message_delta");
    assert_eq!(delta["delta"]["stop_reason"], "max_tokens");
}

#[tokio::test]
async fn status_529_has_retry_after_and_an_overloaded_error_body() {
    let (resp, end) = serve_one(PATH, &body(), status(529, Some("7"), None)).await;
    assert_eq!(end, End::Clean);
    assert_eq!(resp.status, 529);
    assert_eq!(resp.header("retry-after").as_deref(), Some("7"));
    assert!(resp.header("request-id").is_some());
    let body = resp.json();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "overloaded_error");
    assert!(body["error"]["message"].is_string());
}

#[tokio::test]
async fn status_429_keeps_an_http_date_retry_after_verbatim() {
    let date = "Wed, 21 Oct 2015 07:28:00 GMT";
    let (resp, _) = serve_one(PATH, &body(), status(429, Some(date), None)).await;
    assert_eq!(resp.status, 429);
    assert_eq!(resp.header("retry-after").as_deref(), Some(date));
    assert_eq!(resp.json()["error"]["type"], "rate_limit_error");
}

#[tokio::test]
async fn error_event_after_tokens_ends_the_stream_without_message_stop() {
    let reply = stream(
        vec![text("partial")],
        StreamEnd::Error {
            error: "overloaded_error".into(),
            message: "Overloaded".into(),
        },
    );
    let (resp, end) = serve_one(PATH, &body(), reply).await;
    assert_eq!(end, End::Clean);
    let names = events_of(&resp);
    assert_eq!(names.last().map(String::as_str), Some("error"));
    assert!(!names.iter().any(|n| n == "message_stop"));
    let data = data_values(&resp.text());
    assert_eq!(
        data.last().expect("events"),
        &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
}

#[tokio::test]
async fn abort_cuts_the_body_after_the_items() {
    let reply = stream(vec![text("half a rep")], StreamEnd::Abort);
    let (resp, end) = serve_one(PATH, &body(), reply).await;
    assert!(matches!(end, End::Error(_)), "{end:?}");
    assert!(resp.text().contains("half a rep"));
    assert!(!resp.text().contains("message_stop"));
    assert!(!resp.text().contains("message_delta"));
}

#[tokio::test]
async fn clean_eof_ends_the_body_without_completion() {
    let reply = stream(vec![text("no end")], StreamEnd::CleanEof);
    let (resp, end) = serve_one(PATH, &body(), reply).await;
    assert_eq!(end, End::Clean);
    let names = events_of(&resp);
    assert_eq!(
        names.last().map(String::as_str),
        Some("content_block_delta")
    );
    assert!(!names
        .iter()
        .any(|n| n == "message_delta" || n == "message_stop"));
}

#[tokio::test]
async fn stall_sends_the_items_then_stays_open_and_silent() {
    let server = MockServer::start(vec![stream(vec![text("waiting")], StreamEnd::Stall)]);
    let mut resp = post(&server, PATH, &body()).await.expect("a response");
    assert!(resp.read_until("waiting").await);
    let before = resp.bytes.len();
    assert_eq!(resp.read_for(SILENCE).await, End::Silent);
    assert_eq!(resp.bytes.len(), before);
}
