//! The older MCP HTTP+SSE transport (protocol version 2024-11-05), which Claude Code's
//! `"type": "sse"` servers speak: a GET opens an event stream whose first `endpoint` event
//! names the URL every client message is POSTed to; the server's messages arrive on the
//! stream as `message` events. `rmcp` no longer ships a client for it, so this file is one,
//! over the same hyper + rustls client as everything else ([`crate::provider::http`]), with
//! `sse-stream` (the parser `rmcp` uses) reading the events.
//!
//! Invariants: the stream must open and name its endpoint within the startup budget; the
//! endpoint must be on the same scheme and host as the stream (a server cannot send the
//! client's messages, and the headers that go with them, elsewhere); when the stream ends or
//! breaks, [`SseTransport::receive`] answers `None` and the connection counts as closed.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Uri};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use sse_stream::SseStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::provider::http::{build_client, HttpsClient};

/// A failure of the transport, worded for a note.
#[derive(Debug)]
pub struct SseError(pub String);

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SseError {}

/// A connected HTTP+SSE transport.
pub struct SseTransport {
    client: HttpsClient,
    endpoint: Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    rx: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: JoinHandle<()>,
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Open the event stream at `url` and wait (within `budget`) for its endpoint.
pub async fn connect(
    url: &str,
    headers: &[(String, String)],
    budget: Duration,
) -> Result<SseTransport, String> {
    let base: Uri = url.parse().map_err(|e| format!("bad URL {url:?}: {e}"))?;
    let mut parsed = Vec::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| format!("header {k:?} is not a valid name: {e}"))?;
        let value =
            HeaderValue::from_str(v).map_err(|e| format!("header {k:?} has a bad value: {e}"))?;
        parsed.push((name, value));
    }
    let client = build_client(10_000);
    let mut req = Request::builder()
        .method(Method::GET)
        .uri(base.clone())
        .header("accept", "text/event-stream");
    for (k, v) in &parsed {
        req = req.header(k, v);
    }
    let req = req
        .body(Full::new(Bytes::new()))
        .map_err(|e| format!("building the request: {e}"))?;
    let opened = async {
        let resp = client
            .request(req)
            .await
            .map_err(|e| format!("GET {url}: {}", crate::provider::http::error_chain(&e)))?;
        let status = resp.status();
        if !status.is_success() {
            let body = Limited::new(resp.into_body(), 4096)
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            return Err(format!(
                "GET {url}: HTTP {status}: {}",
                openmax_core::provider::errors::body_text(
                    &String::from_utf8_lossy(&body),
                    openmax_core::provider::errors::BODY_TEXT_CHARS
                )
            ));
        }
        let mut events = SseStream::new(resp.into_body()).boxed();
        while let Some(ev) = events.next().await {
            let ev = ev.map_err(|e| format!("reading the event stream: {e}"))?;
            if ev.event.as_deref() == Some("endpoint") {
                let endpoint = resolve(&base, ev.data.as_deref().unwrap_or("").trim())?;
                return Ok((endpoint, events));
            }
        }
        Err("the event stream ended before naming its endpoint".to_string())
    };
    let (endpoint, mut events) = tokio::time::timeout(budget, opened)
        .await
        .map_err(|_| format!("no endpoint event within {} ms", budget.as_millis()))??;
    let (tx, rx) = mpsc::channel(64);
    let reader = tokio::spawn(async move {
        while let Some(Ok(ev)) = events.next().await {
            if !matches!(ev.event.as_deref(), None | Some("message")) {
                continue;
            }
            let Some(data) = ev.data else { continue };
            // A message that is not JSON-RPC is skipped, as rmcp's own transports do.
            if let Ok(m) = serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                if tx.send(m).await.is_err() {
                    return;
                }
            }
        }
    });
    Ok(SseTransport {
        client,
        endpoint,
        headers: parsed,
        rx,
        reader,
    })
}

/// The endpoint event's URI against the stream's URL: absolute, absolute path, or relative;
/// refused when it leaves the stream's scheme and host.
pub fn resolve(base: &Uri, endpoint: &str) -> Result<Uri, String> {
    if endpoint.is_empty() {
        return Err("the endpoint event named no URL".into());
    }
    let joined = if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
        endpoint.to_string()
    } else {
        let scheme = base.scheme_str().unwrap_or("http");
        let authority = base.authority().map(|a| a.as_str()).unwrap_or("");
        let path = if endpoint.starts_with('/') {
            endpoint.to_string()
        } else {
            let dir = base.path().rsplit_once('/').map(|(d, _)| d).unwrap_or("");
            format!("{dir}/{endpoint}")
        };
        format!("{scheme}://{authority}{path}")
    };
    let uri: Uri = joined
        .parse()
        .map_err(|e| format!("the endpoint {endpoint:?} is not a URL: {e}"))?;
    if uri.scheme() != base.scheme() || uri.authority() != base.authority() {
        return Err(format!(
            "the endpoint {uri} is not on the event stream's host ({base}); refused"
        ));
    }
    Ok(uri)
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), SseError>> + Send + 'static {
        let client = self.client.clone();
        let endpoint = self.endpoint.clone();
        let headers = self.headers.clone();
        async move {
            let body = serde_json::to_vec(&item).map_err(|e| SseError(e.to_string()))?;
            let mut req = Request::builder()
                .method(Method::POST)
                .uri(endpoint.clone())
                .header("content-type", "application/json");
            for (k, v) in &headers {
                req = req.header(k, v);
            }
            let req = req
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| SseError(e.to_string()))?;
            let resp = client.request(req).await.map_err(|e| {
                SseError(format!(
                    "POST {endpoint}: {}",
                    crate::provider::http::error_chain(&e)
                ))
            })?;
            let status = resp.status();
            if status.is_success() {
                return Ok(());
            }
            let body = Limited::new(resp.into_body(), 4096)
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            Err(SseError(format!(
                "POST {endpoint}: HTTP {status}: {}",
                openmax_core::provider::errors::body_text(
                    &String::from_utf8_lossy(&body),
                    openmax_core::provider::errors::BODY_TEXT_CHARS
                )
            )))
        }
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.rx.recv()
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.reader.abort();
        self.rx.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_resolve_on_the_streams_host_only() {
        let base: Uri = "http://127.0.0.1:3001/sse".parse().unwrap();
        let r = |e: &str| resolve(&base, e).map(|u| u.to_string());
        assert_eq!(
            r("/message?sessionId=abc").unwrap(),
            "http://127.0.0.1:3001/message?sessionId=abc"
        );
        assert_eq!(
            r("messages?s=1").unwrap(),
            "http://127.0.0.1:3001/messages?s=1"
        );
        assert_eq!(
            r("http://127.0.0.1:3001/m").unwrap(),
            "http://127.0.0.1:3001/m"
        );
        assert!(r("http://evil.example/m").unwrap_err().contains("refused"));
        assert!(r("").is_err());
    }

    #[test]
    fn a_transport_failure_shows_its_words() {
        let words = "POST http://127.0.0.1:3001/m: HTTP 500 Internal Server Error: boom";
        assert_eq!(SseError(words.into()).to_string(), words);
    }

    /// A loopback server of one event stream: it sends the endpoint `/m`, then holds the
    /// stream until the client lets go (the end of the connection, or its reset), when the
    /// returned task ends. Nothing is ever sent after the endpoint, so a reader left running
    /// would hold it open.
    async fn one_event_stream() -> (String, tokio::task::JoinHandle<()>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/sse", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).await.unwrap();
                assert!(n > 0, "the request ended early");
                head.extend_from_slice(&buf[..n]);
            }
            let event = "event: endpoint\ndata: /m\n\n";
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                 transfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
                event.len()
            );
            conn.write_all(reply.as_bytes()).await.unwrap();
            loop {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        });
        (url, server)
    }

    /// A guard against hanging only: the server task ends as soon as the client lets go.
    async fn ended(server: tokio::task::JoinHandle<()>, what: &str) {
        tokio::time::timeout(Duration::from_secs(30), server)
            .await
            .unwrap_or_else(|_| panic!("the event stream stayed open after {what}"))
            .unwrap();
    }

    /// A transport dropped without `close` (a failed handshake drops it so) lets go of its
    /// event stream: the server sees the connection end.
    #[tokio::test]
    async fn a_dropped_transport_closes_its_event_stream() {
        let (url, server) = one_event_stream().await;
        let transport = connect(&url, &[], Duration::from_secs(10)).await.unwrap();
        assert_eq!(transport.endpoint.path(), "/m");
        drop(transport);
        ended(server, "its transport was dropped").await;
    }

    /// `close` (what the client does when it is done with a server) lets go of the event
    /// stream at once, while the transport itself is still held, and nothing more is received.
    #[tokio::test]
    async fn a_closed_transport_lets_go_of_its_event_stream_and_receives_nothing() {
        let (url, server) = one_event_stream().await;
        let mut transport = connect(&url, &[], Duration::from_secs(10)).await.unwrap();
        Transport::<RoleClient>::close(&mut transport)
            .await
            .unwrap();
        ended(server, "its transport was closed").await;
        assert!(Transport::<RoleClient>::receive(&mut transport)
            .await
            .is_none());
    }
}
