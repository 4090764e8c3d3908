//! The server side: the shared reply queue and request log, the accept loop, and the handler
//! that turns one request plus one reply into a response.
//!
//! Invariants:
//! - one reply is consumed per model request (a POST to a known path with a JSON body), in
//!   queue order, the default reply when the queue is empty; other requests get a 404/400 in
//!   the flavor's error shape and consume nothing;
//! - keep-alive is off, so every request arrives on a fresh connection; an `Unreachable` reply
//!   at the front of the queue when a connection is accepted is consumed by resetting that
//!   connection before any byte is read (counted in `unreachable`, not logged as a request);
//! - every task the server starts ends when the server stops: connection tasks live in a
//!   `JoinSet` dropped with the accept loop, producers end when their body is dropped.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinSet;

use super::body::{Chunk, MockBody};
use super::encode::RequestFacts;
use super::errors::{error_body, request_id_header};
use super::render::{render_stream, Tail};
use super::LoggedRequest;
use crate::script::{Flavor, Reply};

/// Header names whose values are credentials: logged as `[redacted]`.
const SECRET_HEADERS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
];

/// State shared by the handle and the server tasks.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Signalled on every logged request (sync waiters).
    changed: Condvar,
    /// Notified on every logged request (async waiters).
    notify: Notify,
}

pub(crate) struct State {
    pub(crate) queue: VecDeque<Reply>,
    pub(crate) default: Reply,
    pub(crate) log: Vec<LoggedRequest>,
    /// Whether requests are logged (off for long benchmark runs).
    pub(crate) keep_log: bool,
    pub(crate) unreachable: usize,
    /// Replies served so far (sequence numbers for ids).
    pub(crate) served: u64,
}

impl Shared {
    pub(crate) fn new(replies: Vec<Reply>, default: Reply, keep_log: bool) -> Shared {
        Shared {
            state: Mutex::new(State {
                queue: replies.into(),
                default,
                log: Vec::new(),
                keep_log,
                unreachable: 0,
                served: 0,
            }),
            changed: Condvar::new(),
            notify: Notify::new(),
        }
    }

    /// Lock the state, recovering from a poisoned lock (the state stays consistent: every
    /// critical section is a few field updates that cannot panic halfway).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wait on the condvar for a change (sync waiters).
    pub(crate) fn wait_change<'a>(
        &self,
        guard: MutexGuard<'a, State>,
        timeout: Duration,
    ) -> MutexGuard<'a, State> {
        match self.changed.wait_timeout(guard, timeout) {
            Ok((guard, _)) => guard,
            Err(poisoned) => poisoned.into_inner().0,
        }
    }

    pub(crate) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }

    /// Pop the front reply if it is `Unreachable`.
    fn take_unreachable(&self) -> bool {
        let mut state = self.lock();
        if matches!(state.queue.front(), Some(Reply::Unreachable)) {
            state.queue.pop_front();
            state.unreachable += 1;
            state.served += 1;
            drop(state);
            self.changed.notify_all();
            self.notify.notify_waiters();
            true
        } else {
            false
        }
    }

    /// Consume the next reply (if `consume`), log the request, and return the reply with its
    /// sequence number, and the entry's index in the log (when requests are logged).
    fn log(
        &self,
        mut entry: LoggedRequest,
        consume: bool,
    ) -> (Option<(Reply, u64)>, Option<usize>) {
        let mut state = self.lock();
        let taken = if consume {
            let reply = state
                .queue
                .pop_front()
                .unwrap_or_else(|| state.default.clone());
            state.served += 1;
            Some((reply, state.served))
        } else {
            None
        };
        entry.reply = taken.as_ref().map(|(reply, _)| reply.clone());
        let index = state.keep_log.then(|| {
            state.log.push(entry);
            state.log.len() - 1
        });
        drop(state);
        self.changed.notify_all();
        self.notify.notify_waiters();
        (taken, index)
    }

    /// The request logged at `index` was answered in full now.
    fn answered(&self, index: Option<usize>) {
        let Some(i) = index else {
            return;
        };
        if let Some(entry) = self.lock().log.get_mut(i) {
            entry.answered = Some(Instant::now());
        }
    }
}

/// Accept connections until `stop` changes or its sender is dropped.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => {
                    if shared.take_unreachable() {
                        // RST, not FIN: the client sees a reset, the same every time.
                        let _ = socket.set_zero_linger();
                        drop(socket);
                        continue;
                    }
                    conns.spawn(serve_connection(socket, shared.clone()));
                }
                // Out of descriptors and the like: back off briefly instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    // Dropping `conns` aborts every connection task; their bodies drop, so producers end.
}

async fn serve_connection(socket: TcpStream, shared: Arc<Shared>) {
    let _ = socket.set_nodelay(true);
    let service = service_fn(move |req| handle(req, shared.clone()));
    // Errors here are client disconnects, aborted bodies and `Unreachable` closes: expected.
    let _ = http1::Builder::new()
        .keep_alive(false)
        .serve_connection(TokioIo::new(socket), service)
        .await;
}

/// Which flavor a request path selects (matched on its end, so a base URL with or without a
/// `/v1` prefix works).
pub(crate) fn route(path: &str) -> Option<Flavor> {
    let path = path.split('?').next().unwrap_or(path).trim_end_matches('/');
    if path.ends_with("/chat/completions") {
        Some(Flavor::OpenaiChat)
    } else if path.ends_with("/responses") {
        Some(Flavor::Openai)
    } else if path.ends_with("/messages") {
        Some(Flavor::Anthropic)
    } else {
        None
    }
}

/// The error a handler returns to make hyper close the connection without a response.
#[derive(Debug)]
struct CloseWithoutResponse;

impl std::fmt::Display for CloseWithoutResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("mock: unreachable, closing without a response")
    }
}

impl std::error::Error for CloseWithoutResponse {}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<MockBody>, CloseWithoutResponse> {
    let arrived = Instant::now();
    let method = req.method().to_string();
    let path = req.uri().path_and_query().map_or_else(
        || req.uri().path().to_string(),
        |pq| pq.as_str().to_string(),
    );
    let mut headers = Vec::new();
    let mut has_api_key = false;
    for (name, value) in req.headers() {
        let name = name.as_str().to_ascii_lowercase();
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        if SECRET_HEADERS.contains(&name.as_str()) {
            has_api_key |= name != "proxy-authorization" && !credential(&value).is_empty();
            headers.push((name, "[redacted]".to_string()));
        } else {
            headers.push((name, value));
        }
    }
    let bytes = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let body: Option<Value> = serde_json::from_slice(&bytes).ok();
    let flavor = if method == "POST" { route(&path) } else { None };
    let entry = LoggedRequest {
        method,
        path,
        flavor,
        headers,
        has_api_key,
        body: body.clone().unwrap_or(Value::Null),
        body_len: bytes.len(),
        reply: None,
        arrived,
        answered: None,
    };
    let Some(flavor) = flavor else {
        let (_, index) = shared.log(entry, false);
        shared.answered(index);
        return Ok(json_response(
            Flavor::Openai,
            0,
            404,
            None,
            Some("not_found"),
            Some("mock: no such endpoint"),
        ));
    };
    let Some(body) = body else {
        let (_, index) = shared.log(entry, false);
        shared.answered(index);
        return Ok(json_response(
            flavor,
            0,
            400,
            None,
            Some("invalid_request_error"),
            Some("mock: the request body is not JSON"),
        ));
    };
    let (Some((reply, seq)), index) = shared.log(entry, true) else {
        // `log` with `consume` always returns a reply.
        return Err(CloseWithoutResponse);
    };
    match reply {
        // Transport: the request was read, then the connection closes with no response.
        Reply::Unreachable | Reply::Transport => {
            shared.answered(index);
            Err(CloseWithoutResponse)
        }
        Reply::Status {
            status,
            retry_after,
            error,
            message,
        } => Ok(answered_now(
            &shared,
            index,
            json_response(
                flavor,
                seq,
                status,
                retry_after.as_deref(),
                error.as_deref(),
                message.as_deref(),
            ),
        )),
        Reply::RawStatus { status, body } => {
            let mut response = Response::new(MockBody::full(body));
            *response.status_mut() =
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let h = response.headers_mut();
            h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            insert_request_id(h, flavor, seq);
            Ok(answered_now(&shared, index, response))
        }
        Reply::Stream {
            items,
            end,
            delay_ms,
        } => {
            let facts = RequestFacts::from_body(seq, &body, bytes.len());
            let rendered = render_stream(flavor, &facts, &items, &end);
            let (tx, rx) = mpsc::channel(4);
            let ended = shared.clone();
            tokio::spawn(produce(
                tx,
                rendered,
                Duration::from_millis(delay_ms),
                move || ended.answered(index),
            ));
            let mut response = Response::new(MockBody::channel(rx));
            let h = response.headers_mut();
            h.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream; charset=utf-8"),
            );
            h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            insert_request_id(h, flavor, seq);
            Ok(response)
        }
    }
}

/// The credential in a header value: without a leading `Bearer` scheme, trimmed.
fn credential(value: &str) -> &str {
    let value = value.trim();
    match value.split_once(char::is_whitespace) {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
        None if value.eq_ignore_ascii_case("bearer") => "",
        Some(_) | None => value,
    }
}

fn insert_request_id(h: &mut hyper::HeaderMap, flavor: Flavor, seq: u64) {
    if let Ok(value) = HeaderValue::from_str(&format!("req_mock_{seq:04}")) {
        h.insert(request_id_header(flavor), value);
    }
}

fn json_response(
    flavor: Flavor,
    seq: u64,
    status: u16,
    retry_after: Option<&str>,
    error: Option<&str>,
    message: Option<&str>,
) -> Response<MockBody> {
    let body = error_body(flavor, seq, status, error, message);
    let mut response = Response::new(MockBody::full(body.to_string()));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = response.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(value) = retry_after.and_then(|v| HeaderValue::from_str(v).ok()) {
        h.insert(RETRY_AFTER, value);
    }
    insert_request_id(h, flavor, seq);
    response
}

/// A response made whole at once: the request counts as answered now.
fn answered_now(
    shared: &Shared,
    index: Option<usize>,
    response: Response<MockBody>,
) -> Response<MockBody> {
    shared.answered(index);
    response
}

/// Feed a rendered stream into the body: the prelude at once, each step `delay` after the
/// previous one, then the tail (`delay` after the last step); `ended` once the end (or the
/// abort) was handed to the connection.
async fn produce(
    tx: mpsc::Sender<Chunk>,
    rendered: super::render::Rendered,
    delay: Duration,
    ended: impl FnOnce(),
) {
    if send(&tx, rendered.prelude).await.is_err() {
        return;
    }
    let mut first = true;
    for step in rendered.steps {
        if !first && !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        first = false;
        if send(&tx, step).await.is_err() {
            return;
        }
    }
    if !first && !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    match rendered.tail {
        Tail::End(bytes) => {
            if send(&tx, bytes).await.is_ok() {
                ended();
            }
            // Dropping `tx` ends the body properly.
        }
        Tail::Abort => {
            if tx.send(Chunk::Abort).await.is_ok() {
                ended();
            }
        }
        // Silent until the body is dropped (client gone, or the server stopped).
        Tail::Stall => tx.closed().await,
        Tail::Endless { first, repeat } => {
            if send(&tx, first).await.is_err() {
                return;
            }
            // The bounded channel paces this to the client's reading (and `delay`, if any).
            loop {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                if send(&tx, repeat.clone()).await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn send(tx: &mpsc::Sender<Chunk>, bytes: Bytes) -> Result<(), ()> {
    if bytes.is_empty() {
        // Nothing to write; still report a closed body so the producer stops.
        return if tx.is_closed() { Err(()) } else { Ok(()) };
    }
    tx.send(Chunk::Data(bytes)).await.map_err(|_| ())
}
