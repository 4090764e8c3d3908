//! The loopback mock provider: a hyper server on 127.0.0.1 serving [`crate::script::Reply`]
//! scripts as Anthropic Messages, OpenAI Responses and Chat Completions streams, with faults.
//!
//! The flavor is chosen by the request path (its end, so base URLs with or without `/v1`
//! work): `…/messages` → Anthropic, `…/responses` → OpenAI Responses, `…/chat/completions` →
//! Chat Completions; only POSTs with a JSON body are model requests. Each model request
//! consumes one reply, in order; when the queue is empty the default reply (a short text
//! completion, [`default_reply`], or one set with [`MockServer::set_default`]) is served.
//!
//! How each reply is realized:
//! - `Status`: that status, `Retry-After` verbatim, the flavor's JSON error body with the
//!   script's type/code (or the status's usual one, see [`errors`]).
//! - `RawStatus`: that status with the script's body verbatim (`application/json`).
//! - `Stream`: 200 with `text/event-stream`; the prelude at once, then one script item every
//!   `delay_ms`, then the end (see [`render`] and the flavor modules for the exact events):
//!   `Complete` sends the flavor's completion (finish reason = script's or
//!   [`Flavor::default_finish`]) and ends the body; `Error` sends the flavor's in-stream error
//!   event(s) and ends the body; `CleanEof` ends the body properly with no completion event;
//!   `Abort` fails the body so hyper cuts the connection with no terminating chunk (the client
//!   sees a body error after every item); `Stall` keeps the connection open and silent until
//!   the client goes away or the server stops.
//! - `Unreachable`: a listening port cannot refuse a connection, so the mock accepts the next
//!   connection and resets it at once (RST, before reading anything, no response). Keep-alive
//!   is off, so every request opens a fresh connection and meets this check. A client sees a
//!   transport error after connecting, not `ECONNREFUSED`; for a true refusal use
//!   [`unused_loopback_url`] (nothing listens there).
//!
//! Every request is logged with when it arrived and when the mock had answered it in full
//! ([`LoggedRequest::arrived`], [`LoggedRequest::answered`]), so a test can show that requests
//! overlapped in time (the children of one reply's `task` calls).
//!
//! Invariants: binds loopback only; every task it starts stops when the server stops
//! ([`MockServer::shutdown`] or drop); the bytes of a stream depend only on the script and the
//! request (fixed ids and timestamps).

mod anthropic;
mod body;
mod chat;
mod damage;
pub mod encode;
pub mod errors;
pub mod render;
mod responses;
mod server;

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdTcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::watch;

pub use encode::{thinking_signature, RequestFacts};
pub use render::{render_stream, Rendered, Tail};

use crate::script::{Flavor, Reply, StreamEnd, StreamItem};
use server::Shared;

/// One request the mock received.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedRequest {
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    /// The flavor the path selected (`None`: not a model request, no reply consumed).
    pub flavor: Option<Flavor>,
    /// Headers in arrival order, names lowercase; credential headers (`authorization`,
    /// `x-api-key`, `api-key`, …) have the value `[redacted]`.
    pub headers: Vec<(String, String)>,
    /// Whether a non-empty API key header (`authorization: Bearer …`, `x-api-key`, `api-key`,
    /// `x-goog-api-key`) was present.
    pub has_api_key: bool,
    /// The JSON body (`Null` when the body was not JSON).
    pub body: Value,
    pub body_len: usize,
    /// The reply served (`None` when none was consumed).
    pub reply: Option<Reply>,
    /// When the request reached the mock (its head was read).
    pub arrived: Instant,
    /// When the mock had answered it in full: a stream's last event handed to the connection,
    /// an error response made, a transport fault's connection closed. `None` while a stream
    /// is still going, and for a stream that stalls or was cut short by the client.
    pub answered: Option<Instant>,
}

impl LoggedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The reply served when the queue is empty, unless configured: a short text completion.
pub fn default_reply() -> Reply {
    Reply::Stream {
        items: vec![StreamItem::Text {
            text: "ok".to_string(),
        }],
        end: StreamEnd::Complete { finish: None },
        delay_ms: 0,
    }
}

/// A running mock server. Stops on [`MockServer::shutdown`] or drop.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<watch::Sender<bool>>,
    /// The server's own runtime thread (sync constructors only).
    thread: Option<JoinHandle<()>>,
}

impl MockServer {
    /// Start a server on its own runtime thread serving `replies` in order.
    ///
    /// Panics if loopback cannot be bound or a runtime cannot be built (test setup only; use
    /// [`MockServer::try_start`] to handle it).
    pub fn start(replies: Vec<Reply>) -> MockServer {
        // A test harness without a loopback socket or threads cannot run any e2e test.
        MockServer::try_start(replies, default_reply()).expect("start the loopback mock server")
    }

    /// [`MockServer::start`] with a chosen default reply, returning setup errors.
    pub fn try_start(replies: Vec<Reply>, default: Reply) -> io::Result<MockServer> {
        let listener = StdTcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let shared = Arc::new(Shared::new(replies, default, true));
        let (stop, stop_rx) = watch::channel(false);
        let task_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("openmax-mock-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    // Cannot fail for a nonblocking listener inside a runtime with IO enabled.
                    if let Ok(listener) = tokio::net::TcpListener::from_std(listener) {
                        server::serve(listener, task_shared, stop_rx).await;
                    }
                });
                // Dropping the runtime here drops every task left (producers of stalls).
            })?;
        Ok(MockServer {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Start a server on the current tokio runtime (call from inside one).
    pub async fn start_async(replies: Vec<Reply>) -> io::Result<MockServer> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(replies, default_reply(), true));
        let (stop, stop_rx) = watch::channel(false);
        tokio::spawn(server::serve(listener, shared.clone(), stop_rx));
        Ok(MockServer {
            addr,
            shared,
            stop: Some(stop),
            thread: None,
        })
    }

    /// `http://127.0.0.1:PORT` (no trailing slash, no `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queue one more reply after those already queued.
    pub fn push(&self, reply: Reply) {
        self.shared.lock().queue.push_back(reply);
    }

    /// Replace the reply served when the queue is empty.
    pub fn set_default(&self, reply: Reply) {
        self.shared.lock().default = reply;
    }

    /// How many queued replies are not yet consumed.
    pub fn pending(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// How many connections were reset for an `Unreachable` reply.
    pub fn unreachable_count(&self) -> usize {
        self.shared.lock().unreachable
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.lock().log.clone()
    }

    /// Block until at least `n` requests were received (returns them all) or `timeout` passes
    /// (`None`). Do not call from a runtime driving a [`MockServer::start_async`] server.
    pub fn wait_requests(&self, n: usize, timeout: Duration) -> Option<Vec<LoggedRequest>> {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if state.log.len() >= n {
                return Some(state.log.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            state = self.shared.wait_change(state, left);
        }
    }

    /// The async form of [`MockServer::wait_requests`].
    pub async fn wait_requests_async(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Option<Vec<LoggedRequest>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.notified();
            tokio::pin!(notified);
            // Register before checking, so a request logged in between is not missed.
            notified.as_mut().enable();
            {
                let state = self.shared.lock();
                if state.log.len() >= n {
                    return Some(state.log.clone());
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    /// Stop the server: close the listener and every open connection, end every task.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Serve `replies` then `default` forever on `addr` (loopback only), for benchmarks and the
/// `openmax-sim` CLI. Requests are not logged (memory stays flat). Returns only on a setup
/// error: a non-loopback address, a bind failure, no runtime.
pub fn serve_forever(addr: SocketAddr, replies: Vec<Reply>, default: Reply) -> io::Result<()> {
    if !addr.ip().is_loopback() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the mock provider binds loopback only, not {addr}"),
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let shared = Arc::new(Shared::new(replies, default, false));
        // The sender lives as long as this future, i.e. forever.
        let (_stop, stop_rx) = watch::channel(false);
        server::serve(listener, shared, stop_rx).await;
        Ok(())
    })
}

/// A loopback URL where nothing listens (a port bound then released), for true
/// connection-refused tests. Another process could take the port in between; on a test
/// machine that is rare.
pub fn unused_loopback_url() -> io::Result<String> {
    let listener = StdTcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let addr = listener.local_addr()?;
    drop(listener);
    Ok(format!("http://{addr}"))
}
