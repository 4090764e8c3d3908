//! The mock's Chat Completions streams over loopback: chunks for text, reasoning_content and
//! tool_calls, the usage chunk, `[DONE]`, and each fault.

mod mock_support;

use mock_support::*;
use openmax_sim::mock::MockServer;
use openmax_sim::script::StreamEnd;
use serde_json::{json, Value};

const PATH: &str = "/v1/chat/completions";

fn body(include_usage: bool) -> Value {
    json!({"model": "llama-test", "stream": true,
           "stream_options": {"include_usage": include_usage},
           "messages": [{"role": "user", "content": "hi"}]})
}

/// The data payloads, checking the stream is data-only SSE.
fn chunks(resp: &Resp) -> Vec<Value> {
    let text = resp.text();
    assert_well_formed_sse(&text);
    assert!(event_names(&text).is_empty());
    data_values(&text)
}

fn delta(chunk: &Value) -> &Value {
    &chunk["choices"][0]["delta"]
}

#[tokio::test]
async fn text_reply_streams_content_finish_usage_and_done() {
    let reply = complete(vec![text("Hel"), text("lo"), usage(10, 2, Some(4))]);
    let (resp, end) = serve_one(PATH, &body(true), reply).await;
    assert_eq!(end, End::Clean);
    assert_eq!(resp.status, 200);
    let data = chunks(&resp);
    assert_eq!(data.len(), 6, "{data:?}");
    for chunk in &data[..5] {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], "llama-test");
    }
    assert_eq!(delta(&data[0])["role"], "assistant");
    assert_eq!(delta(&data[1])["content"], "Hel");
    assert_eq!(delta(&data[2])["content"], "lo");
    assert_eq!(data[1]["usage"], Value::Null);
    assert_eq!(data[3]["choices"][0]["finish_reason"], "stop");
    assert_eq!(delta(&data[3]), &json!({}));
    assert_eq!(data[4]["choices"], json!([]));
    assert_eq!(data[4]["usage"]["prompt_tokens"], 10);
    assert_eq!(data[4]["usage"]["completion_tokens"], 2);
    assert_eq!(data[4]["usage"]["total_tokens"], 12);
    assert_eq!(
        data[4]["usage"]["prompt_tokens_details"]["cached_tokens"],
        4
    );
    assert_eq!(data[5], json!("[DONE]"));
}

#[tokio::test]
async fn no_usage_chunk_unless_requested() {
    let reply = complete(vec![text("hi")]);
    let (resp, _) = serve_one(PATH, &body(false), reply).await;
    let data = chunks(&resp);
    assert!(data.iter().all(|c| c.get("usage").is_none()), "{data:?}");
    assert_eq!(data.last(), Some(&json!("[DONE]")));
}

#[tokio::test]
async fn estimated_usage_when_the_script_has_none() {
    let body = body(true);
    let len = body.to_string().len() as u64;
    let (resp, _) = serve_one(PATH, &body, complete(vec![text("hi")])).await;
    let data = chunks(&resp);
    let usage = &data[data.len() - 2]["usage"];
    assert_eq!(usage["prompt_tokens"], len / 4);
    assert_eq!(usage["completion_tokens"], 1);
}

#[tokio::test]
async fn thinking_is_reasoning_content() {
    let reply = complete(vec![thinking("hmm"), text("ok")]);
    let (resp, _) = serve_one(PATH, &body(false), reply).await;
    let data = chunks(&resp);
    assert_eq!(delta(&data[1]), &json!({"reasoning_content": "hmm"}));
    assert_eq!(delta(&data[2]), &json!({"content": "ok"}));
}

#[tokio::test]
async fn tool_calls_stream_by_index_with_arguments_in_pieces() {
    let a = json!({"path": "a.rs"});
    let b = json!({"pattern": "fn main", "path": "src"});
    let reply = complete(vec![
        tool("call_a", "read_file", a.clone()),
        tool("call_b", "grep", b.clone()),
    ]);
    let (resp, end) = serve_one(PATH, &body(false), reply).await;
    assert_eq!(end, End::Clean);
    let data = chunks(&resp);
    for (index, id, name, args) in [(0, "call_a", "read_file", &a), (1, "call_b", "grep", &b)] {
        let calls: Vec<&Value> = data
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
            .filter(|call| call["index"] == index)
            .collect();
        assert!(calls.len() >= 3, "{calls:?}");
        assert_eq!(calls[0]["id"], id);
        assert_eq!(calls[0]["type"], "function");
        assert_eq!(calls[0]["function"]["name"], name);
        assert!(calls[1..].iter().all(|c| c.get("id").is_none()));
        let joined: String = calls
            .iter()
            .map(|c| c["function"]["arguments"].as_str().expect("a string"))
            .collect();
        assert_eq!(&serde_json::from_str::<Value>(&joined).expect("JSON"), args);
    }
    let finish = data
        .iter()
        .find_map(|c| c["choices"][0]["finish_reason"].as_str())
        .expect("a finish reason");
    assert_eq!(finish, "tool_calls");
}

#[tokio::test]
async fn status_503_has_retry_after_and_an_openai_error_body() {
    let (resp, _) = serve_one(PATH, &body(false), status(503, Some("3"), None)).await;
    assert_eq!(resp.status, 503);
    assert_eq!(resp.header("retry-after").as_deref(), Some("3"));
    assert!(resp.header("x-request-id").is_some());
    let body = resp.json();
    assert_eq!(body["error"]["code"], "server_error");
    assert_eq!(body["error"]["type"], "server_error");
}

#[tokio::test]
async fn error_chunk_after_tokens_ends_without_done() {
    let reply = stream(
        vec![text("partial")],
        StreamEnd::Error {
            error: "rate_limit_exceeded".into(),
            message: "slow down".into(),
        },
    );
    let (resp, end) = serve_one(PATH, &body(true), reply).await;
    assert_eq!(end, End::Clean);
    let data = chunks(&resp);
    assert_eq!(
        data.last().expect("chunks"),
        &json!({"error": {"message": "slow down", "type": "requests", "param": null,
                          "code": "rate_limit_exceeded"}})
    );
    assert!(!data.contains(&json!("[DONE]")));
}

#[tokio::test]
async fn abort_cuts_the_body_after_the_items() {
    let reply = stream(vec![text("half a rep")], StreamEnd::Abort);
    let (resp, end) = serve_one(PATH, &body(true), reply).await;
    assert!(matches!(end, End::Error(_)), "{end:?}");
    assert!(resp.text().contains("half a rep"));
    assert!(!resp.text().contains("[DONE]"));
}

#[tokio::test]
async fn clean_eof_ends_the_body_without_finish_or_done() {
    let reply = stream(vec![text("no end")], StreamEnd::CleanEof);
    let (resp, end) = serve_one(PATH, &body(true), reply).await;
    assert_eq!(end, End::Clean);
    let data = chunks(&resp);
    assert_eq!(delta(data.last().expect("chunks"))["content"], "no end");
    assert!(data
        .iter()
        .all(|c| c["choices"][0]["finish_reason"].is_null()));
}

#[tokio::test]
async fn stall_sends_the_items_then_stays_open_and_silent() {
    let server = MockServer::start(vec![stream(vec![text("waiting")], StreamEnd::Stall)]);
    let mut resp = post(&server, PATH, &body(true)).await.expect("a response");
    assert!(resp.read_until("waiting").await);
    let before = resp.bytes.len();
    assert_eq!(resp.read_for(SILENCE).await, End::Silent);
    assert_eq!(resp.bytes.len(), before);
}
