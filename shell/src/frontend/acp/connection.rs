//! The ACP connection: one loop over stdin messages and the sessions' events, writing JSON-RPC
//! lines to stdout.
//!
//! Invariants:
//! - Every request gets exactly one answer; a malformed line gets its JSON-RPC error and the
//!   connection goes on.
//! - A `session/prompt` is answered by its turn's `done` (through the translator), or with an
//!   error when it cannot start (bad params, a prompt already running in that session) or when
//!   the session's runtime ends first. A second prompt never starts a second turn.
//! - A permission answer reaches the core only while its approval is pending; a late answer
//!   (the approval already settled, e.g. by a cancel) is dropped.
//! - End of stdin ends every session as `quit` does on the wire (the turn in flight drains and
//!   is answered, pending approvals are declined); the process exits when all have ended.
//!   SIGINT or SIGTERM first cancels every prompt in flight (answered `cancelled`), then ends
//!   the sessions the same way; a second signal exits at once (130).
//! - A file tool's request to the client (`fs`) is answered from the client's response; at
//!   EOF the pending ones fail at once.
//! - Output is buffered and written when the loop goes quiet; a failed write marks the client
//!   gone, which the sessions treat as end of input.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;

use agent_client_protocol_schema::v1::{
    AgentCapabilities, ContentBlock, ContentChunk, Implementation, InitializeRequest,
    InitializeResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    SessionNotification, SessionUpdate, SetSessionModeRequest, SetSessionModeResponse, TextContent,
};
use agent_client_protocol_schema::ProtocolVersion;
use openmax_core::machine::{FramingFault, Input};
use openmax_core::wire::{Command, Mode};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::mcp_servers;
use super::msg::Msg;
use super::open::{self, OpenArgs, Opening};
use super::prompt;
use super::rpc::{self, Incoming, RpcError};
use super::session;
use super::translate::{self, Out, PromptEnd, Translator};
use crate::run::InputTx;
use crate::start::Flags;
use crate::start::{Opened, Resume};

/// A live session of this connection.
struct Live {
    input: InputTx,
    tr: Translator,
    /// The JSON-RPC id of the prompt in flight.
    prompt: Option<Value>,
    /// `session/set_mode` requests awaiting the core's answer, oldest first.
    modes: VecDeque<Value>,
    /// Pending approvals and the id of the permission request that asks for each.
    approvals: BTreeMap<String, u64>,
    /// The project's checkpoints, for `/undo` (`None`: checkpoints are off).
    undo: Option<crate::checkpoint::Project>,
}

impl Live {
    fn send(&self, cmd: Command) {
        let _ = self.input.send(Input::Line(cmd.to_line()));
    }
}

/// A request openmax sent to the client.
enum Pending {
    Permission {
        session_id: String,
        approval_id: String,
    },
    /// A file tool waits for this answer.
    Fs(std::sync::mpsc::Sender<Result<Value, String>>),
}

/// The connection state.
pub struct Connection {
    flags: Flags,
    tx: UnboundedSender<Msg>,
    rx: UnboundedReceiver<Msg>,
    out: Vec<u8>,
    gone: Rc<Cell<bool>>,
    sessions: BTreeMap<String, Live>,
    pending: BTreeMap<u64, Pending>,
    next_request: u64,
    eof: bool,
    /// The client's `fs` capability: `readTextFile`, `writeTextFile`.
    client_fs: (bool, bool),
    /// SIGINT and SIGTERM seen.
    signals: u32,
    /// Opens in flight report here.
    opened_tx: UnboundedSender<Opening>,
    opened_rx: UnboundedReceiver<Opening>,
    /// Opens in flight.
    opening: usize,
    /// Session ids a `session/load` in flight is opening.
    loading: BTreeSet<String>,
}

/// What the loop handles next.
enum Next {
    Msg(Option<Msg>),
    Opened(Box<Opening>),
}

fn decode<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params)
        .map_err(|e| RpcError::new(rpc::INVALID_PARAMS, format!("invalid params: {e}")))
}

fn internal(message: impl Into<String>) -> RpcError {
    RpcError::new(rpc::INTERNAL_ERROR, message)
}

impl Connection {
    pub fn new(flags: Flags) -> Connection {
        let (tx, rx) = unbounded_channel();
        let (opened_tx, opened_rx) = unbounded_channel();
        Connection {
            flags,
            tx,
            rx,
            out: Vec::with_capacity(8 * 1024),
            gone: Rc::new(Cell::new(false)),
            sessions: BTreeMap::new(),
            pending: BTreeMap::new(),
            next_request: 0,
            eof: false,
            client_fs: (false, false),
            signals: 0,
            opened_tx,
            opened_rx,
            opening: 0,
            loading: BTreeSet::new(),
        }
    }

    /// Serve until stdin ends and every session has ended; returns the exit code.
    pub async fn serve(mut self) -> i32 {
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            crate::frontend::framing::pump(std::io::stdin().lock(), |input| {
                tx.send(Msg::Stdin(input)).is_ok()
            })
        });
        self.watch_signals();
        loop {
            if self.eof && self.sessions.is_empty() && self.opening == 0 {
                self.flush();
                return 0;
            }
            let next = tokio::select! {
                msg = self.rx.recv() => Next::Msg(msg),
                Some(o) = self.opened_rx.recv() => Next::Opened(Box::new(o)),
            };
            match next {
                Next::Msg(Some(msg)) => self.handle(msg),
                Next::Msg(None) => return 0,
                Next::Opened(o) => self.opened(*o),
            }
            if self.rx.is_empty() && self.opened_rx.is_empty() {
                self.flush();
            }
        }
    }

    /// Forward SIGINT and SIGTERM to the loop as [`Msg::Signal`].
    fn watch_signals(&self) {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            eprintln!("openmax: could not watch SIGINT and SIGTERM");
            return;
        };
        let tx = self.tx.clone();
        tokio::task::spawn_local(async move {
            loop {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
                if tx.send(Msg::Signal).is_err() {
                    return;
                }
            }
        });
    }

    /// The first signal cancels every prompt in flight (each is answered `cancelled`) and ends
    /// the sessions as at EOF; a second one exits at once with 130.
    fn signal(&mut self) {
        self.signals += 1;
        if self.signals > 1 {
            self.flush();
            crate::sandbox::reaper::exit_now(130);
        }
        eprintln!("openmax: signalled: cancelling the prompts in flight and ending the sessions");
        for live in self.sessions.values_mut() {
            if live.tr.cancel() {
                live.send(Command::Cancel);
            }
        }
        self.end_input();
    }

    fn flush(&mut self) {
        if self.out.is_empty() {
            return;
        }
        if !self.gone.get() {
            let mut stdout = std::io::stdout().lock();
            let r = stdout.write_all(&self.out).and_then(|_| stdout.flush());
            if r.is_err() {
                eprintln!("openmax: the client closed stdout; ending the sessions as at EOF");
                self.gone.set(true);
                self.end_input();
            }
        }
        self.out.clear();
    }

    fn line(&mut self, line: String) {
        self.out.extend_from_slice(line.as_bytes());
        self.out.push(b'\n');
    }

    fn answer(&mut self, id: &Value, result: Result<Value, RpcError>) {
        let line = match result {
            Ok(v) => rpc::result_line(id, v),
            Err(e) => rpc::error_line(id, &e),
        };
        self.line(line);
    }

    fn notify(&mut self, n: SessionNotification) {
        let params = serde_json::to_value(n).unwrap_or(Value::Null);
        self.line(rpc::notification_line("session/update", params));
    }

    fn end_input(&mut self) {
        self.eof = true;
        // A file tool waiting on the client fails now instead of at its timeout.
        self.pending.retain(|_, p| !matches!(p, Pending::Fs(_)));
        for live in self.sessions.values() {
            let _ = live.input.send(Input::EndOfInput);
        }
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Stdin(Input::Line(line)) => match rpc::parse(&line) {
                Ok(Incoming::Request { id, method, params }) => {
                    let r = self.request(&id, &method, params);
                    if let Some(r) = r {
                        self.answer(&id, r);
                    }
                }
                Ok(Incoming::Notification { method, params }) => self.notification(&method, params),
                Ok(Incoming::Response { id, result }) => self.response(&id, result),
                Err(rej) => self.answer(&rej.id, Err(rej.error)),
            },
            Msg::Stdin(Input::Framing(fault)) => {
                let why = match fault {
                    FramingFault::TooLong { len } => {
                        format!("parse error: a line of {len} bytes is over the 8 MiB limit")
                    }
                    FramingFault::NotUtf8 => "parse error: the line is not valid UTF-8".into(),
                };
                self.answer(&Value::Null, Err(RpcError::new(rpc::PARSE_ERROR, why)));
            }
            Msg::Stdin(Input::EndOfInput) => self.end_input(),
            Msg::Stdin(_) => {}
            Msg::Event(sid, ev) => {
                let mut outs = Vec::new();
                if let Some(live) = self.sessions.get_mut(&sid) {
                    live.tr.event(ev, &mut outs);
                }
                self.outs(&sid, outs);
            }
            Msg::Quiet(sid) => {
                let mut outs = Vec::new();
                if let Some(live) = self.sessions.get_mut(&sid) {
                    live.tr.quiet(&mut outs);
                }
                self.outs(&sid, outs);
            }
            Msg::Signal => self.signal(),
            Msg::Fs(call) => {
                if self.eof || self.gone.get() {
                    let _ = call
                        .reply
                        .send(Err("the client has ended the connection".into()));
                    return;
                }
                self.next_request += 1;
                let id = self.next_request;
                self.pending.insert(id, Pending::Fs(call.reply));
                self.line(rpc::request_line(id, call.method, call.params));
            }
            Msg::Exited(sid) => {
                if let Some(mut live) = self.sessions.remove(&sid) {
                    let mut outs = Vec::new();
                    live.tr.quiet(&mut outs);
                    let gone = internal("the session ended before answering");
                    if let Some(id) = live.prompt.take() {
                        self.answer(&id, Err(gone.clone()));
                    }
                    for id in live.modes.drain(..) {
                        self.answer(&id, Err(gone.clone()));
                    }
                }
            }
        }
    }

    fn outs(&mut self, sid: &str, outs: Vec<Out>) {
        for o in outs {
            match o {
                Out::Update(n) => self.notify(n),
                Out::AskPermission {
                    approval_id,
                    request,
                } => {
                    self.next_request += 1;
                    let id = self.next_request;
                    self.pending.insert(
                        id,
                        Pending::Permission {
                            session_id: sid.to_string(),
                            approval_id: approval_id.clone(),
                        },
                    );
                    if let Some(live) = self.sessions.get_mut(sid) {
                        live.approvals.insert(approval_id, id);
                    }
                    let params = serde_json::to_value(request).unwrap_or(Value::Null);
                    self.line(rpc::request_line(id, "session/request_permission", params));
                }
                Out::PermissionSettled { approval_id } => {
                    if let Some(live) = self.sessions.get_mut(sid) {
                        live.approvals.remove(&approval_id);
                    }
                }
                Out::PromptEnded(end) => {
                    let Some(id) = self.sessions.get_mut(sid).and_then(|l| l.prompt.take()) else {
                        continue;
                    };
                    let r = match end {
                        PromptEnd::Stop(reason) => {
                            Ok(serde_json::to_value(PromptResponse::new(reason))
                                .unwrap_or(Value::Null))
                        }
                        PromptEnd::Error(m) => Err(internal(m)),
                    };
                    self.answer(&id, r);
                }
                Out::ModeSaved(_) | Out::ModeRefused(_) => {
                    let Some(id) = self.sessions.get_mut(sid).and_then(|l| l.modes.pop_front())
                    else {
                        continue;
                    };
                    let r = match o {
                        Out::ModeRefused(m) => Err(internal(m)),
                        _ => Ok(serde_json::to_value(SetSessionModeResponse::new())
                            .unwrap_or(Value::Null)),
                    };
                    self.answer(&id, r);
                }
                Out::Log(m) => eprintln!("openmax: session {sid}: {m}"),
            }
        }
    }

    /// A request; `None` when the answer comes later (a prompt).
    fn request(
        &mut self,
        id: &Value,
        method: &str,
        params: Value,
    ) -> Option<Result<Value, RpcError>> {
        let to_value = |v: Result<Value, RpcError>| v;
        Some(to_value(match method {
            "initialize" => self.initialize(params),
            "authenticate" => Ok(serde_json::json!({})),
            "session/new" => return self.new_session(id, params),
            "session/load" => return self.load_session(id, params),
            "session/set_mode" => return self.set_mode(id, params),
            "session/prompt" => return self.prompt(id, params),
            _ => Err(RpcError::new(
                rpc::METHOD_NOT_FOUND,
                format!("method not found: {method}"),
            )),
        }))
    }

    fn notification(&mut self, method: &str, params: Value) {
        match method {
            "session/cancel" => {
                let sid = params
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if let Some(live) = self.sessions.get_mut(sid) {
                    if live.tr.cancel() {
                        live.send(Command::Cancel);
                    }
                } else {
                    eprintln!("openmax: session/cancel for an unknown session {sid:?}");
                }
            }
            _ => eprintln!("openmax: ignored the notification {method}"),
        }
    }

    fn response(&mut self, id: &Value, result: Result<Value, RpcError>) {
        let Some(key) = id.as_u64() else {
            eprintln!("openmax: a response to an unknown request {id}");
            return;
        };
        match self.pending.remove(&key) {
            Some(Pending::Permission {
                session_id,
                approval_id,
            }) => {
                let Some(live) = self.sessions.get_mut(&session_id) else {
                    return;
                };
                if live.approvals.remove(&approval_id).is_none() {
                    return; // settled meanwhile: the core no longer waits for it
                }
                let approved = translate::permission_approved(&result.map_err(|e| e.message));
                live.send(Command::Approve {
                    approval_id,
                    approved,
                });
            }
            Some(Pending::Fs(reply)) => {
                let _ = reply.send(result.map_err(|e| e.message));
            }
            None => eprintln!("openmax: a response to an unknown request {id}"),
        }
    }

    fn initialize(&mut self, params: Value) -> Result<Value, RpcError> {
        let req: InitializeRequest = decode(params)?;
        let fs = &req.client_capabilities.fs;
        self.client_fs = (fs.read_text_file, fs.write_text_file);
        let caps = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(PromptCapabilities::new().embedded_context(true).image(true))
            .mcp_capabilities(McpCapabilities::new().http(true));
        let resp = InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(caps)
            .agent_info(Implementation::new("openmax", env!("CARGO_PKG_VERSION")));
        serde_json::to_value(resp).map_err(|e| internal(e.to_string()))
    }

    fn start(&mut self, opened: Opened) -> (String, Mode) {
        let sid = opened.session_id.clone();
        let mode = opened.mode;
        let tr = Translator::new(&sid, PathBuf::from(&opened.project));
        let undo = opened.checkpoints.clone();
        let input = session::spawn(opened, self.tx.clone(), self.gone.clone());
        self.sessions.insert(
            sid.clone(),
            Live {
                input,
                tr,
                prompt: None,
                modes: VecDeque::new(),
                approvals: BTreeMap::new(),
                undo,
            },
        );
        (sid, mode)
    }

    /// Check a `session/new` or `session/load` and start opening it off the loop; `None` when
    /// the answer comes with its [`Opening`].
    fn begin_open(
        &mut self,
        id: &Value,
        cwd: &std::path::Path,
        resume: Resume,
        servers: &[McpServer],
        load: Option<String>,
    ) -> Option<Result<Value, RpcError>> {
        let client_mcp = match mcp_servers::defs(servers) {
            Ok(d) => d,
            Err(e) => return Some(Err(e)),
        };
        if !cwd.is_absolute() {
            return Some(Err(RpcError::new(
                rpc::INVALID_PARAMS,
                format!(
                    "invalid params: cwd must be an absolute path ({})",
                    cwd.display()
                ),
            )));
        }
        if let Some(sid) = &load {
            self.loading.insert(sid.clone());
        }
        let args = OpenArgs {
            flags: self.flags.clone(),
            cwd: cwd.to_path_buf(),
            resume,
            client_mcp,
            client_fs: self.client_fs,
            tx: self.tx.clone(),
        };
        let (tx, id) = (self.opened_tx.clone(), id.clone());
        self.opening += 1;
        tokio::task::spawn_local(async move {
            let result = open::open(args).await;
            let _ = tx.send(Opening { id, load, result });
        });
        None
    }

    /// An open finished: start the session and answer (a load replays the history first).
    fn opened(&mut self, o: Opening) {
        self.opening -= 1;
        if let Some(sid) = &o.load {
            self.loading.remove(sid);
        }
        let mut opened = match o.result {
            Ok(opened) => opened,
            Err(e) => return self.answer(&o.id, Err(e)),
        };
        let transcript = opened.transcript.take();
        let (sid, mode) = self.start(opened);
        let resp = if o.load.is_some() {
            for m in transcript.map(|t| t.messages).unwrap_or_default() {
                let chunk = ContentChunk::new(ContentBlock::Text(TextContent::new(m.content)));
                let update = if m.role == "user" {
                    SessionUpdate::UserMessageChunk(chunk)
                } else {
                    SessionUpdate::AgentMessageChunk(chunk)
                };
                self.notify(SessionNotification::new(sid.clone(), update));
            }
            serde_json::to_value(LoadSessionResponse::new().modes(session::modes(mode)))
        } else {
            serde_json::to_value(NewSessionResponse::new(sid.clone()).modes(session::modes(mode)))
        };
        self.answer(&o.id, resp.map_err(|e| internal(e.to_string())));
        self.notify(super::undo::commands(&sid));
        if self.eof {
            // The input ended while it opened: it ends as the others did.
            if let Some(live) = self.sessions.get(&sid) {
                let _ = live.input.send(Input::EndOfInput);
            }
        }
    }

    fn new_session(&mut self, id: &Value, params: Value) -> Option<Result<Value, RpcError>> {
        let req: NewSessionRequest = match decode(params) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        self.begin_open(id, &req.cwd, Resume::New, &req.mcp_servers, None)
    }

    fn load_session(&mut self, id: &Value, params: Value) -> Option<Result<Value, RpcError>> {
        let req: LoadSessionRequest = match decode(params) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let sid = req.session_id.0.to_string();
        if self.sessions.contains_key(&sid) || self.loading.contains(&sid) {
            return Some(Err(RpcError::new(
                rpc::INVALID_REQUEST,
                format!("session {sid} is already open on this connection"),
            )));
        }
        let resume = Resume::Id(sid.clone());
        self.begin_open(id, &req.cwd, resume, &req.mcp_servers, Some(sid))
    }

    fn live(&mut self, sid: &str) -> Result<&mut Live, RpcError> {
        self.sessions.get_mut(sid).ok_or_else(|| {
            RpcError::new(
                rpc::INVALID_PARAMS,
                format!("invalid params: no session {sid:?} on this connection"),
            )
        })
    }

    fn set_mode(&mut self, id: &Value, params: Value) -> Option<Result<Value, RpcError>> {
        let req: SetSessionModeRequest = match decode(params) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let Some(mode) = Mode::parse(&req.mode_id.0) else {
            return Some(Err(RpcError::new(
                rpc::INVALID_PARAMS,
                format!(
                    "invalid params: unknown mode {:?}; legal values: {}",
                    &*req.mode_id.0,
                    Mode::ALL.join(", ")
                ),
            )));
        };
        let live = match self.live(&req.session_id.0) {
            Ok(l) => l,
            Err(e) => return Some(Err(e)),
        };
        live.tr.mode_requested();
        live.modes.push_back(id.clone());
        live.send(Command::ApprovalMode {
            mode: mode.as_str().to_string(),
        });
        None
    }

    fn prompt(&mut self, id: &Value, params: Value) -> Option<Result<Value, RpcError>> {
        let req: PromptRequest = match decode(params) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let (text, images) = match prompt::prompt_of(&req.prompt) {
            Ok(t) => t,
            Err(m) => {
                return Some(Err(RpcError::new(
                    rpc::INVALID_PARAMS,
                    format!("invalid params: {m}"),
                )))
            }
        };
        let live = match self.live(&req.session_id.0) {
            Ok(l) => l,
            Err(e) => return Some(Err(e)),
        };
        if live.tr.prompt_open() {
            return Some(Err(RpcError::new(
                rpc::INVALID_REQUEST,
                "a prompt is already running in this session; wait for its answer or cancel it",
            )));
        }
        if let Some(args) = super::undo::args(&text) {
            let (reply, note) = super::undo::run(live.undo.as_ref(), &req.session_id.0, &args);
            if let Some(text) = note {
                let _ = live.input.send(Input::Notice { text });
            }
            let chunk = ContentChunk::new(ContentBlock::Text(TextContent::new(reply)));
            self.notify(SessionNotification::new(
                req.session_id.clone(),
                SessionUpdate::AgentMessageChunk(chunk),
            ));
            let done = PromptResponse::new(agent_client_protocol_schema::v1::StopReason::EndTurn);
            return Some(serde_json::to_value(done).map_err(|e| internal(e.to_string())));
        }
        live.tr.prompt_started();
        live.prompt = Some(id.clone());
        if images.is_empty() {
            live.send(Command::User { text });
        } else {
            let _ = live.input.send(Input::Prompt { text, images });
        }
        None
    }
}
