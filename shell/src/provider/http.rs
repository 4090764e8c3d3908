//! The HTTP side of a model request: the shared hyper-util client over hyper-rustls (ring,
//! webpki roots, http and https, HTTP/1.1), one POST per attempt, and the classification of
//! what happened into the core's inputs.
//!
//! Classification (the core decides retries from it, we only report):
//! - the client could not connect (refused, DNS, TLS handshake, connect timeout) →
//!   `RequestFailed::Unreachable`; any other error before a status → `Transport`; both name
//!   the provider and the URL;
//! - a non-2xx status → `Http { status, retry_after_s, kind, message }`, with `kind` from the
//!   body's `error.code` / `error.type` (else from the status class) and `message` from
//!   `error.message` (else a snippet of the body);
//! - a 2xx → `Opened`, then the body through the SSE decoder and the API's mapping; a body that
//!   is not `text/event-stream` (a JSON reply) → `Failed` with a snippet; a body error
//!   mid-stream → the mapping's `EndedWithoutCompletion`. There is no idle timeout here: the
//!   core owns it and aborts the task.
//!
//! Invariant: one attempt sends exactly one `RequestFailed`, or `Opened` … one terminal item.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Request, StatusCode};
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use openmax_core::provider::{ProviderItem, RequestFailure};
use serde_json::Value;

use super::mapping::{classify_error_object, is_terminal, snippet, StreamMapper};
use super::retry_after::parse_retry_after;
use super::sse::SseDecoder;

/// The client every request shares (connection pool included).
pub type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// How much of an error body is read for classification.
const ERROR_BODY_CAP: usize = 64 * 1024;

/// Build the shared client: webpki roots with ring, http and https, HTTP/1.1, and a TCP connect
/// timeout (0 = none).
pub fn build_client(connect_timeout_ms: u64) -> HttpsClient {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    if connect_timeout_ms > 0 {
        http.set_connect_timeout(Some(Duration::from_millis(connect_timeout_ms)));
    }
    let https = HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Client::builder(TokioExecutor::new()).build(https)
}

/// Where one attempt's results go.
pub trait Sink: Send {
    fn item(&mut self, item: ProviderItem);
    fn failed(&mut self, failure: RequestFailure);
    /// The backpressure window the items count against, if any (see [`super::flow`]).
    fn flow(&self) -> Option<std::sync::Arc<super::flow::StreamFlow>>;
}

/// Whether the error's cause is the peer resetting the connection. A reset during connect means
/// the endpoint answered the handshake (it was reached), so it is a transport failure, not an
/// unreachable endpoint; on loopback the reset can land before the connect future is polled.
fn reset_by_peer(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
            ) {
                return true;
            }
        }
        cur = err.source();
    }
    false
}

/// Run one attempt: send `req`, report through `sink` (see the module docs). `endpoint` names
/// the provider and the URL (`anthropic at https://…/v1/messages`) in a failure that has no
/// HTTP status, so a newcomer sees where openmax tried to go.
pub async fn run_attempt(
    client: &HttpsClient,
    req: Request<Full<Bytes>>,
    endpoint: &str,
    mut mapper: Box<dyn StreamMapper>,
    sink: &mut dyn Sink,
) {
    let resp = match client.request(req).await {
        Ok(r) => r,
        Err(e) => {
            let detail = error_chain(&e);
            sink.failed(if e.is_connect() && !reset_by_peer(&e) {
                RequestFailure::Unreachable {
                    detail: format!("could not connect to {endpoint}: {detail}"),
                }
            } else {
                RequestFailure::Transport {
                    detail: format!("{endpoint}: {detail}"),
                }
            });
            return;
        }
    };
    let status = resp.status();
    if !status.is_success() {
        let retry_after_s = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, now_unix_s()));
        let body = read_capped(resp.into_body()).await;
        sink.failed(http_failure(status, retry_after_s, &body));
        return;
    }
    sink.item(ProviderItem::Opened);
    let content_type = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if !content_type.is_empty() && !content_type.starts_with("text/event-stream") {
        let body = read_capped(resp.into_body()).await;
        sink.item(not_a_stream(&content_type, &body));
        return;
    }
    let mut body = resp.into_body();
    let mut sse = SseDecoder::new();
    let flow = sink.flow();
    loop {
        match body.frame().await {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue; // trailers carry nothing for us
                };
                for ev in sse.feed(&data) {
                    if emit_all(sink, mapper.on_event(&ev)) {
                        return;
                    }
                }
                if let Some(flow) = &flow {
                    flow.wait_room().await;
                }
            }
            Some(Err(e)) => {
                emit_all(sink, mapper.on_body_error(&error_chain(&e)));
                return;
            }
            None => {
                for ev in sse.finish() {
                    if emit_all(sink, mapper.on_event(&ev)) {
                        return;
                    }
                }
                emit_all(sink, mapper.on_eof());
                return;
            }
        }
    }
}

/// Forward items; true once a terminal item went out.
pub fn emit_all(sink: &mut dyn Sink, items: Vec<ProviderItem>) -> bool {
    for item in items {
        let terminal = is_terminal(&item);
        sink.item(item);
        if terminal {
            return true;
        }
    }
    false
}

/// Classify a non-2xx response from its status, Retry-After and body.
pub fn http_failure(status: StatusCode, retry_after_s: Option<u64>, body: &[u8]) -> RequestFailure {
    let (kind, message) = openmax_core::provider::errors::http_error(
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body,
    );
    RequestFailure::Http {
        status: status.as_u16(),
        retry_after_s,
        kind,
        message,
    }
}

/// A 2xx that is not an event stream: `Failed`, classified if it is a JSON error body.
pub fn not_a_stream(content_type: &str, body: &[u8]) -> ProviderItem {
    let text = String::from_utf8_lossy(body);
    let err = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.get("error").cloned())
        .filter(Value::is_object);
    let message = format!(
        "expected an event stream, got {content_type}: {}",
        snippet(text.trim(), 300)
    );
    let kind = match err {
        Some(e) => classify_error_object(&e, &message),
        None => openmax_core::provider::FailureKind::Other,
    };
    ProviderItem::Failed { kind, message }
}

async fn read_capped(mut body: hyper::body::Incoming) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < ERROR_BODY_CAP {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(d) = frame.into_data() {
                    out.extend_from_slice(&d);
                }
            }
            Some(Err(_)) | None => break,
        }
    }
    out.truncate(ERROR_BODY_CAP);
    out
}

/// The error and its sources, joined with ": " (hyper's top-level messages are terse).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(src) = cur {
        let m = src.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = src.source();
    }
    s
}

/// The system clock as Unix seconds (for HTTP-date Retry-After).
pub fn now_unix_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A header value, or an error naming the header.
pub fn header_value(name: &str, value: &str) -> Result<HeaderValue, String> {
    HeaderValue::from_str(value).map_err(|_| format!("the {name} header value is not valid"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use openmax_core::provider::FailureKind;

    #[test]
    fn error_bodies_classified() {
        let f = http_failure(
            StatusCode::TOO_MANY_REQUESTS,
            Some(3),
            br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
        );
        assert_eq!(
            f,
            RequestFailure::Http {
                status: 429,
                retry_after_s: Some(3),
                kind: FailureKind::InsufficientQuota,
                message: "You exceeded your current quota".into()
            }
        );
        let f = http_failure(
            StatusCode::from_u16(529).unwrap(),
            None,
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert!(
            matches!(f, RequestFailure::Http { kind: FailureKind::Overloaded, ref message, .. } if message == "Overloaded")
        );
        let f = http_failure(
            StatusCode::TOO_MANY_REQUESTS,
            None,
            br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
        );
        assert!(matches!(
            f,
            RequestFailure::Http {
                kind: FailureKind::RateLimit,
                ..
            }
        ));
    }

    #[test]
    fn status_class_when_body_says_nothing() {
        let f = http_failure(StatusCode::SERVICE_UNAVAILABLE, None, b"<html>busy</html>");
        assert_eq!(
            f,
            RequestFailure::Http {
                status: 503,
                retry_after_s: None,
                kind: FailureKind::Server,
                message: "busy".into()
            }
        );
        let f = http_failure(
            StatusCode::NOT_FOUND,
            None,
            br#"{"error":"model 'x' not found"}"#,
        );
        assert!(
            matches!(f, RequestFailure::Http { kind: FailureKind::Other, ref message, .. } if message == "model 'x' not found")
        );
        let f = http_failure(StatusCode::BAD_GATEWAY, None, b"");
        assert!(
            matches!(f, RequestFailure::Http { kind: FailureKind::Server, ref message, .. } if message == "HTTP 502 Bad Gateway")
        );
    }

    #[test]
    fn json_reply_instead_of_stream_fails() {
        let item = not_a_stream(
            "application/json",
            br#"{"error":{"type":"rate_limit_error","message":"slow down"}}"#,
        );
        assert!(
            matches!(item, ProviderItem::Failed { kind: FailureKind::RateLimit, ref message } if message.contains("application/json"))
        );
    }

    #[test]
    fn an_errors_chain_is_each_message_once_joined() {
        /// An error that says `.0` and has the I/O error as its source.
        #[derive(Debug)]
        struct Outer(String, std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.1)
            }
        }
        let refused = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let words = refused().to_string();
        let terse = Outer("client error (Connect)".into(), refused());
        assert_eq!(
            error_chain(&terse),
            format!("client error (Connect): {words}")
        );
        // A source whose words the message already holds is not said twice.
        let full = Outer(format!("connect: {words}"), refused());
        assert_eq!(error_chain(&full), format!("connect: {words}"));
    }
}
