//! The mock server's API: reply order and the default reply, `push`, the request log (with
//! credentials redacted), `wait_requests`, `Unreachable` and true refusal, shutdown of a
//! stalled stream, the async constructor, routing, and `serve_forever`'s loopback guard.

mod mock_support;

use std::time::Duration;

use mock_support::*;
use openmax_sim::mock::{default_reply, serve_forever, unused_loopback_url, MockServer};
use openmax_sim::script::{Flavor, Reply, StreamEnd};
use serde_json::json;

const CHAT: &str = "/v1/chat/completions";

fn body() -> serde_json::Value {
    json!({"model": "m", "stream": true, "messages": []})
}

async fn content_of(server: &MockServer) -> String {
    let mut resp = post(server, CHAT, &body()).await.expect("a response");
    assert_eq!(resp.read_to_end().await, End::Clean);
    data_values(&resp.text())
        .iter()
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

#[tokio::test]
async fn replies_are_served_in_order_then_pushed_ones_then_the_default() {
    let server = MockServer::start(vec![
        complete(vec![text("one")]),
        complete(vec![text("two")]),
    ]);
    server.push(complete(vec![text("three")]));
    assert_eq!(server.pending(), 3);
    assert_eq!(content_of(&server).await, "one");
    assert_eq!(content_of(&server).await, "two");
    assert_eq!(content_of(&server).await, "three");
    assert_eq!(content_of(&server).await, "ok");
    server.set_default(complete(vec![text("fallback")]));
    assert_eq!(content_of(&server).await, "fallback");
    assert_eq!(server.pending(), 0);
    let log = server.requests();
    assert_eq!(log.len(), 5);
    assert_eq!(log[3].reply, Some(default_reply()));
}

#[tokio::test]
async fn requests_are_logged_with_credentials_redacted() {
    let server = MockServer::start(vec![]);
    let sent = json!({"model": "claude-x", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let mut resp = post_with(
        &server,
        "/v1/messages",
        &sent,
        &[
            ("x-api-key", "sk-secret"),
            ("anthropic-version", "2023-06-01"),
        ],
    )
    .await
    .expect("a response");
    resp.read_to_end().await;
    let mut resp = post_with(&server, CHAT, &body(), &[("authorization", "Bearer ")])
        .await
        .expect("a response");
    resp.read_to_end().await;
    let log = server.wait_requests(2, DEADLINE).expect("two requests");
    let first = &log[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/v1/messages");
    assert_eq!(first.flavor, Some(Flavor::Anthropic));
    assert_eq!(first.body, sent);
    assert!(first.has_api_key);
    assert_eq!(first.header("x-api-key"), Some("[redacted]"));
    assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
    assert!(!format!("{log:?}").contains("sk-secret"));
    // An empty bearer token is no key.
    assert_eq!(log[1].flavor, Some(Flavor::OpenaiChat));
    assert!(!log[1].has_api_key);
    assert_eq!(log[1].header("authorization"), Some("[redacted]"));
}

#[test]
fn wait_requests_times_out_with_none() {
    let server = MockServer::start(vec![]);
    assert_eq!(server.wait_requests(1, Duration::from_millis(20)), None);
    assert_eq!(server.wait_requests(0, Duration::ZERO), Some(vec![]));
}

#[tokio::test]
async fn unreachable_resets_the_connection_without_a_response_then_serves_the_next() {
    let server = MockServer::start(vec![Reply::Unreachable, complete(vec![text("back")])]);
    let failed = post(&server, CHAT, &body()).await;
    assert!(failed.is_err(), "expected a transport error");
    assert_eq!(server.unreachable_count(), 1);
    assert!(server.requests().is_empty());
    assert_eq!(content_of(&server).await, "back");
}

#[tokio::test]
async fn unused_loopback_url_refuses_connections() {
    let url = unused_loopback_url().expect("a free port");
    let addr = url.strip_prefix("http://").expect("an http URL");
    let err = tokio::net::TcpStream::connect(addr)
        .await
        .expect_err("nothing listens");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
}

#[tokio::test]
async fn shutdown_ends_a_stalled_stream_and_stops_listening() {
    let server = MockServer::start(vec![stream(vec![text("waiting")], StreamEnd::Stall)]);
    let addr = server.addr();
    let mut resp = post(&server, CHAT, &body()).await.expect("a response");
    assert!(resp.read_until("waiting").await);
    server.shutdown();
    assert!(matches!(resp.read_to_end().await, End::Error(_)));
    let err = tokio::net::TcpStream::connect(addr)
        .await
        .expect_err("the listener is closed");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
}

#[tokio::test]
async fn async_constructor_serves_and_waits() {
    let server = MockServer::start_async(vec![complete(vec![text("async")])])
        .await
        .expect("a server");
    assert!(server.base_url().starts_with("http://127.0.0.1:"));
    assert_eq!(content_of(&server).await, "async");
    let log = server
        .wait_requests_async(1, DEADLINE)
        .await
        .expect("one request");
    assert_eq!(log.len(), 1);
    assert_eq!(
        server
            .wait_requests_async(2, Duration::from_millis(20))
            .await,
        None
    );
}

#[tokio::test]
async fn unknown_paths_and_bad_bodies_consume_no_reply() {
    let server = MockServer::start(vec![complete(vec![text("kept")])]);
    let resp = post(&server, "/v1/embeddings", &body())
        .await
        .expect("a response");
    assert_eq!(resp.status, 404);
    let mut resp = post_with(&server, "/messages", &json!("x"), &[])
        .await
        .expect("a response");
    // A JSON string is JSON: this one is a model request on a path without /v1.
    assert_eq!(resp.status, 200);
    resp.read_to_end().await;
    assert!(resp.text().contains("kept"));
    let log = server.requests();
    assert_eq!(log[0].flavor, None);
    assert_eq!(log[0].reply, None);
    assert_eq!(log[1].flavor, Some(Flavor::Anthropic));
}

#[tokio::test]
async fn delayed_items_still_arrive_in_order() {
    let reply = Reply::Stream {
        items: vec![text("a"), text("b"), text("c")],
        end: StreamEnd::Complete { finish: None },
        delay_ms: 5,
    };
    let server = MockServer::start(vec![reply]);
    assert_eq!(content_of(&server).await, "abc");
}

#[test]
fn serve_forever_refuses_a_non_loopback_address() {
    let err = serve_forever(
        "0.0.0.0:0".parse().expect("an address"),
        vec![],
        default_reply(),
    )
    .expect_err("loopback only");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}
