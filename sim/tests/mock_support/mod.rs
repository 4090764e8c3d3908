//! Test support for the mock server tests: a minimal hyper HTTP/1 client (plain http, one
//! connection per request) that exposes the raw body bytes and how the body ended, and SSE
//! helpers to list event names and data payloads.
//!
//! Reads are bounded by deadlines; nothing sleeps.

#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::{HeaderMap, Request};
use hyper_util::rt::TokioIo;
use openmax_sim::mock::MockServer;
use openmax_sim::script::{Reply, StreamEnd, StreamItem};
use serde_json::Value;
use tokio::net::TcpStream;

/// Generous upper bound for anything that should happen promptly on loopback.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// How long a stalled stream must stay silent in the stall tests.
pub const SILENCE: Duration = Duration::from_millis(250);

/// A response whose body is read by the test.
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    body: Incoming,
    /// Every body byte read so far.
    pub bytes: Vec<u8>,
}

/// How a body read ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// The body ended properly (terminating chunk).
    Clean,
    /// The body failed (connection cut mid-body).
    Error(String),
    /// Nothing more arrived within the window; the body is still open.
    Silent,
}

/// POST `body` to `path` on the mock with an API key header.
pub async fn post(server: &MockServer, path: &str, body: &Value) -> Result<Resp, String> {
    post_with(server, path, body, &[("x-api-key", "sk-test-secret")]).await
}

/// POST with chosen extra headers.
pub async fn post_with(
    server: &MockServer,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> Result<Resp, String> {
    let stream = TcpStream::connect(server.addr())
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    // The connection task ends with the connection; its errors surface through the body.
    tokio::spawn(conn);
    let mut req = Request::post(path)
        .header("host", server.addr().to_string())
        .header("content-type", "application/json");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let req = req
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| format!("request: {e}"))?;
    let resp = tokio::time::timeout(DEADLINE, sender.send_request(req))
        .await
        .map_err(|_| "no response head before the deadline".to_string())?
        .map_err(|e| format!("send: {e}"))?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    Ok(Resp {
        status,
        headers,
        body: resp.into_body(),
        bytes: Vec::new(),
    })
}

impl Resp {
    /// Read until the body ends (or fails) or `DEADLINE` passes (`Silent`).
    pub async fn read_to_end(&mut self) -> End {
        self.read_for(DEADLINE).await
    }

    /// Read until the body ends or fails, or `window` passes with the body still open.
    pub async fn read_for(&mut self, window: Duration) -> End {
        let deadline = tokio::time::Instant::now() + window;
        loop {
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Err(_) => return End::Silent,
                Ok(None) => return End::Clean,
                Ok(Some(Err(e))) => return End::Error(e.to_string()),
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.bytes.extend_from_slice(&data);
                    }
                }
            }
        }
    }

    /// Read until the bytes contain `needle` (true) or the body ends or `DEADLINE` passes.
    pub async fn read_until(&mut self, needle: &str) -> bool {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            if self.text().contains(needle) {
                return true;
            }
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.bytes.extend_from_slice(&data);
                    }
                }
                Err(_) | Ok(None) | Ok(Some(Err(_))) => return self.text().contains(needle),
            }
        }
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).expect("a JSON body")
    }
}

/// The `event:` names of an SSE byte stream, in order.
pub fn event_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("event: "))
        .map(str::to_string)
        .collect()
}

/// The `data:` payloads of an SSE byte stream parsed as JSON (`[DONE]` as the string).
pub fn data_values(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.into())))
        .collect()
}

/// Every SSE event is terminated by a blank line, and the stream is nothing but events.
pub fn assert_well_formed_sse(text: &str) {
    assert!(
        text.is_empty() || text.ends_with("\n\n"),
        "unterminated: {text:?}"
    );
    for block in text.split_terminator("\n\n") {
        for line in block.lines() {
            assert!(
                line.starts_with("event: ") || line.starts_with("data: "),
                "stray line {line:?}"
            );
        }
    }
}

pub fn text(t: &str) -> StreamItem {
    StreamItem::Text { text: t.into() }
}

pub fn thinking(t: &str) -> StreamItem {
    StreamItem::Thinking { text: t.into() }
}

pub fn tool(id: &str, name: &str, args: Value) -> StreamItem {
    StreamItem::ToolCall {
        id: id.into(),
        name: name.into(),
        args,
    }
}

pub fn usage(prompt: u64, completion: u64, cached: Option<u64>) -> StreamItem {
    StreamItem::Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        cached_tokens: cached,
    }
}

pub fn stream(items: Vec<StreamItem>, end: StreamEnd) -> Reply {
    Reply::Stream {
        items,
        end,
        delay_ms: 0,
    }
}

pub fn complete(items: Vec<StreamItem>) -> Reply {
    stream(items, StreamEnd::Complete { finish: None })
}

pub fn status(code: u16, retry_after: Option<&str>, error: Option<&str>) -> Reply {
    Reply::Status {
        status: code,
        retry_after: retry_after.map(str::to_string),
        error: error.map(str::to_string),
        message: None,
    }
}

/// Serve one reply to one request on `path` and return the response, read to its end.
pub async fn serve_one(path: &str, body: &Value, reply: Reply) -> (Resp, End) {
    let server = MockServer::start(vec![reply]);
    let mut resp = post(&server, path, body).await.expect("a response");
    let end = resp.read_to_end().await;
    (resp, end)
}
