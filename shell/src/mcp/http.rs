//! The streamable HTTP transport over openmax's own HTTP stack: `rmcp`'s
//! [`StreamableHttpClient`] implemented with the hyper + rustls client the providers use
//! ([`crate::provider::http::build_client`]), so no second HTTP stack is linked in. `rmcp`
//! drives the protocol (sessions, SSE responses, the GET stream); this file only moves requests
//! and bodies.
//!
//! Invariants: a JSON response body is read up to [`MAX_JSON_BODY`]; an error body is cut at
//! [`MAX_ERROR_BODY`] and shown as one short line of text (HTML stripped); SSE is parsed by `sse-stream` (the parser `rmcp` itself uses).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse,
};
use rmcp::transport::StreamableHttpClientTransport;
use sse_stream::{Sse, SseStream};

use crate::provider::http::{build_client, HttpsClient};

/// Largest JSON response body read.
pub const MAX_JSON_BODY: usize = 16 * 1024 * 1024;
/// Largest error body kept for a message.
pub const MAX_ERROR_BODY: usize = 4096;
const SESSION_HEADER: &str = "mcp-session-id";
const LAST_EVENT_HEADER: &str = "last-event-id";

/// The HTTP client `rmcp` drives.
#[derive(Clone)]
pub struct HyperClient {
    client: HttpsClient,
}

/// A transport failure, worded for a note.
#[derive(Debug)]
pub struct HttpError(pub String);

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpError {}

type Failure = StreamableHttpError<HttpError>;

fn client_err(e: impl std::fmt::Display) -> Failure {
    StreamableHttpError::Client(HttpError(e.to_string()))
}

/// The `rmcp` transport for `url`, with an optional bearer token and extra headers.
pub fn transport(
    url: &str,
    bearer: Option<String>,
    headers: &[(String, String)],
) -> Result<StreamableHttpClientTransport<HyperClient>, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(b) = bearer {
        config = config.auth_header(b);
    }
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| format!("header {k:?} is not a valid name: {e}"))?;
        let value =
            HeaderValue::from_str(v).map_err(|e| format!("header {k:?} has a bad value: {e}"))?;
        config.custom_headers.insert(name, value);
    }
    let client = HyperClient {
        client: build_client(10_000),
    };
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

fn request(
    method: Method,
    uri: &str,
    session_id: Option<&str>,
    auth: Option<String>,
    custom: HashMap<HeaderName, HeaderValue>,
) -> hyper::http::request::Builder {
    let mut b = Request::builder()
        .method(method)
        .uri(uri)
        .header("accept", "text/event-stream, application/json");
    if let Some(sid) = session_id {
        b = b.header(SESSION_HEADER, sid);
    }
    if let Some(a) = auth {
        b = b.header("authorization", format!("Bearer {a}"));
    }
    for (k, v) in custom {
        b = b.header(k, v);
    }
    b
}

fn content_type(resp: &hyper::Response<hyper::body::Incoming>) -> String {
    resp.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

async fn read_body(body: hyper::body::Incoming, cap: usize) -> Result<Bytes, Failure> {
    Limited::new(body, cap)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                client_err(format!(
                    "the response body is over {} MiB, the most read of one answer",
                    cap >> 20
                ))
            } else {
                client_err(format!("reading the response body: {e}"))
            }
        })
}

impl StreamableHttpClient for HyperClient {
    type Error = HttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let body = serde_json::to_vec(&message).map_err(client_err)?;
        let req = request(
            Method::POST,
            &uri,
            session_id.as_deref(),
            auth_header,
            custom_headers,
        )
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(client_err)?;
        let resp = self.client.request(req).await.map_err(client_err)?;
        let status = resp.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let new_session = resp
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let ct = content_type(&resp);
        let no_answer_needed = !matches!(message, JsonRpcMessage::Request(_));
        if !status.is_success() {
            let body = read_body(resp.into_body(), MAX_JSON_BODY).await?;
            if let Ok(m @ JsonRpcMessage::Error(_)) =
                serde_json::from_slice::<ServerJsonRpcMessage>(&body)
            {
                return Ok(StreamableHttpPostResponse::Json(m, new_session));
            }
            let text = openmax_core::provider::errors::body_text(
                &String::from_utf8_lossy(&body[..body.len().min(MAX_ERROR_BODY)]),
                openmax_core::provider::errors::BODY_TEXT_CHARS,
            );
            return Err(StreamableHttpError::UnexpectedServerResponse(
                format!("HTTP {status}: {text}").into(),
            ));
        }
        if ct.starts_with("text/event-stream") {
            let stream: BoxStream<'static, Result<Sse, sse_stream::Error>> =
                SseStream::new(resp.into_body()).boxed();
            return Ok(StreamableHttpPostResponse::Sse(stream, new_session));
        }
        if ct.starts_with("application/json") {
            let body = read_body(resp.into_body(), MAX_JSON_BODY).await?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(m) => Ok(StreamableHttpPostResponse::Json(m, new_session)),
                Err(_) if no_answer_needed => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(
                    format!("not a JSON-RPC message: {e}").into(),
                )),
            };
        }
        if no_answer_needed {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(Some(ct)))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failure> {
        let req = request(
            Method::DELETE,
            &uri,
            Some(&session_id),
            auth_header,
            custom_headers,
        )
        .body(Full::new(Bytes::new()))
        .map_err(client_err)?;
        let resp = self.client.request(req).await.map_err(client_err)?;
        let status = resp.status();
        if status.is_success() || status == StatusCode::METHOD_NOT_ALLOWED {
            Ok(())
        } else {
            Err(StreamableHttpError::UnexpectedServerResponse(
                format!("deleting the session: HTTP {status}").into(),
            ))
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, sse_stream::Error>>, Failure> {
        let mut b = request(
            Method::GET,
            &uri,
            session_id.as_deref(),
            auth_header,
            custom_headers,
        );
        if let Some(id) = last_event_id {
            b = b.header(LAST_EVENT_HEADER, id);
        }
        let req = b.body(Full::new(Bytes::new())).map_err(client_err)?;
        let resp = self.client.request(req).await.map_err(client_err)?;
        let status = resp.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            return Err(StreamableHttpError::UnexpectedServerResponse(
                format!("opening the event stream: HTTP {status}").into(),
            ));
        }
        if !content_type(&resp).starts_with("text/event-stream") {
            return Err(StreamableHttpError::UnexpectedContentType(Some(
                content_type(&resp),
            )));
        }
        Ok(SseStream::new(resp.into_body()).boxed())
    }
}

#[cfg(test)]
mod tests;
