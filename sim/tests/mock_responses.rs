//! The mock's OpenAI Responses streams over loopback: event sequences for text, reasoning
//! summaries and function calls, usage, and each fault.

mod mock_support;

use mock_support::*;
use openmax_sim::mock::{thinking_signature, MockServer};
use openmax_sim::script::StreamEnd;
use serde_json::{json, Value};

const PATH: &str = "/v1/responses";

fn body() -> Value {
    json!({"model": "gpt-test", "stream": true, "input": "hi"})
}

fn events_of(resp: &Resp) -> Vec<String> {
    let text = resp.text();
    assert_well_formed_sse(&text);
    let names = event_names(&text);
    let data = data_values(&text);
    assert_eq!(names.len(), data.len());
    for (i, (name, value)) in names.iter().zip(&data).enumerate() {
        assert_eq!(value["type"], json!(name), "{value}");
        assert_eq!(value["sequence_number"], json!(i), "{value}");
    }
    names
}

fn find<'a>(data: &'a [Value], kind: &str) -> &'a Value {
    data.iter()
        .find(|d| d["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} event"))
}

#[tokio::test]
async fn text_reply_streams_output_text_and_completes_with_usage() {
    let reply = complete(vec![text("Hel"), text("lo"), usage(10, 2, Some(4))]);
    let (resp, end) = serve_one(PATH, &body(), reply).await;
    assert_eq!(end, End::Clean);
    assert_eq!(resp.status, 200);
    assert_eq!(
        events_of(&resp),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let data = data_values(&resp.text());
    assert_eq!(data[0]["response"]["status"], "in_progress");
    assert_eq!(data[2]["item"]["type"], "message");
    assert_eq!(data[4]["delta"], "Hel");
    assert_eq!(data[4]["item_id"], data[2]["item"]["id"]);
    assert_eq!(data[6]["text"], "Hello");
    let done = &data[9]["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["model"], "gpt-test");
    assert_eq!(done["output"][0]["content"][0]["text"], "Hello");
    assert_eq!(done["usage"]["input_tokens"], 10);
    assert_eq!(done["usage"]["input_tokens_details"]["cached_tokens"], 4);
    assert_eq!(done["usage"]["output_tokens"], 2);
}

#[tokio::test]
async fn reasoning_summary_deltas_carry_thinking() {
    let reply = complete(vec![thinking("let me "), thinking("see"), text("ok")]);
    let body = json!({"model": "o-test", "stream": true, "input": "hi",
                      "include": ["reasoning.encrypted_content"]});
    let (resp, end) = serve_one(PATH, &body, reply).await;
    assert_eq!(end, End::Clean);
    assert_eq!(
        events_of(&resp)[2..9],
        [
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done"
        ]
    );
    let data = data_values(&resp.text());
    assert_eq!(data[2]["item"]["type"], "reasoning");
    assert_eq!(data[4]["delta"], "let me ");
    assert_eq!(data[4]["summary_index"], 0);
    assert_eq!(data[6]["text"], "let me see");
    let item = &data[8]["item"];
    assert_eq!(
        item["summary"][0],
        json!({"type": "summary_text", "text": "let me see"})
    );
    assert_eq!(
        item["encrypted_content"],
        json!(thinking_signature("let me see"))
    );
    // The text item that follows is output 1.
    assert_eq!(data[9]["output_index"], 1);
}

#[tokio::test]
async fn function_call_streams_arguments_in_pieces() {
    let args = json!({"path": "src/main.rs", "limit": 20});
    let reply = complete(vec![tool("call_01", "read_file", args.clone())]);
    let (resp, end) = serve_one(PATH, &body(), reply).await;
    assert_eq!(end, End::Clean);
    let names = events_of(&resp);
    let deltas = names
        .iter()
        .filter(|n| *n == "response.function_call_arguments.delta")
        .count();
    assert!(deltas >= 2, "{names:?}");
    let data = data_values(&resp.text());
    let added = find(&data, "response.output_item.added");
    assert_eq!(added["item"]["type"], "function_call");
    assert_eq!(added["item"]["call_id"], "call_01");
    assert_eq!(added["item"]["name"], "read_file");
    assert_eq!(added["item"]["arguments"], "");
    let pieces: String = data
        .iter()
        .filter(|d| d["type"] == "response.function_call_arguments.delta")
        .map(|d| {
            assert_eq!(d["item_id"], added["item"]["id"]);
            d["delta"].as_str().expect("a string").to_string()
        })
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&pieces).expect("JSON"), args);
    let done = find(&data, "response.function_call_arguments.done");
    assert_eq!(done["arguments"], json!(pieces));
    let completed = find(&data, "response.completed");
    assert_eq!(completed["response"]["output"][0]["call_id"], "call_01");
    assert_eq!(names.last().map(String::as_str), Some("response.completed"));
}

#[tokio::test]
async fn length_finish_becomes_response_incomplete() {
    let reply = stream(
        vec![text("cut")],
        StreamEnd::Complete {
            finish: Some("length".into()),
        },
    );
    let (resp, _) = serve_one(PATH, &body(), reply).await;
    let data = data_values(&resp.text());
    let last = data.last().expect("events");
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(last["response"]["status"], "incomplete");
    assert_eq!(
        last["response"]["incomplete_details"]["reason"],
        "max_output_tokens"
    );
}

#[tokio::test]
async fn status_429_insufficient_quota_has_openai_error_body() {
    let (resp, end) = serve_one(PATH, &body(), status(429, None, Some("insufficient_quota"))).await;
    assert_eq!(end, End::Clean);
    assert_eq!(resp.status, 429);
    assert_eq!(resp.header("retry-after"), None);
    let body = resp.json();
    assert_eq!(body["error"]["code"], "insufficient_quota");
    assert_eq!(body["error"]["type"], "insufficient_quota");
    assert!(body["error"]["message"].is_string());
}

#[tokio::test]
async fn status_503_has_retry_after() {
    let (resp, _) = serve_one(PATH, &body(), status(503, Some("2"), None)).await;
    assert_eq!(resp.status, 503);
    assert_eq!(resp.header("retry-after").as_deref(), Some("2"));
    assert_eq!(resp.json()["error"]["code"], "server_error");
}

#[tokio::test]
async fn error_after_tokens_sends_error_then_response_failed() {
    let reply = stream(
        vec![text("partial")],
        StreamEnd::Error {
            error: "server_error".into(),
            message: "boom".into(),
        },
    );
    let (resp, end) = serve_one(PATH, &body(), reply).await;
    assert_eq!(end, End::Clean);
    let names = events_of(&resp);
    assert_eq!(names[names.len() - 2..], ["error", "response.failed"]);
    assert!(!names.iter().any(|n| n == "response.completed"));
    let data = data_values(&resp.text());
    let error = find(&data, "error");
    assert_eq!(error["code"], "server_error");
    assert_eq!(error["message"], "boom");
    let failed = find(&data, "response.failed");
    assert_eq!(failed["response"]["status"], "failed");
    assert_eq!(
        failed["response"]["error"],
        json!({"code": "server_error", "message": "boom"})
    );
}

#[tokio::test]
async fn abort_cuts_the_body_after_the_items() {
    let reply = stream(vec![text("half a rep")], StreamEnd::Abort);
    let (resp, end) = serve_one(PATH, &body(), reply).await;
    assert!(matches!(end, End::Error(_)), "{end:?}");
    assert!(resp.text().contains("half a rep"));
    assert!(!resp.text().contains("response.completed"));
}

#[tokio::test]
async fn clean_eof_ends_the_body_without_completion() {
    let reply = stream(vec![text("no end")], StreamEnd::CleanEof);
    let (resp, end) = serve_one(PATH, &body(), reply).await;
    assert_eq!(end, End::Clean);
    let names = events_of(&resp);
    assert_eq!(
        names.last().map(String::as_str),
        Some("response.output_text.delta")
    );
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
