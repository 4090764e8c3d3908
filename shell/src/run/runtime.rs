//! The runtime loop: one tokio current-thread runtime, one channel of core [`Input`]s fed by the
//! stdin reader thread, provider tasks, tool tasks and the effects performed inline; one loop
//! that takes the next input, calls `core.handle(now, input)`, and drains `core.poll()`.
//!
//! Invariants:
//! - Single mutation then full drain: every `handle` is followed by polling the core to empty;
//!   events go to the [`Sink`] in emission order, effects are started in emission order.
//! - Session appends go to the writer thread ([`super::persist`]) in emission order; each
//!   `Persisted`/`PersistFailed` comes on the channel once its records are durable, so the loop
//!   goes on emitting events that wait on nothing while an `fdatasync` runs. Other quick
//!   effects (save mode, record a source's approval) are performed inline and their answer is
//!   queued locally, ahead of anything else. At exit the loop waits for the writer to finish.
//!   Hooks run as tasks (their processes are killed at shutdown) and answer with `HookDone`. A refreeze runs as a task too (MCP servers start and list
//!   asynchronously); the core holds client input until its `Frozen` answer.
//! - Signals ([`SignalPolicy`]) become inputs, never a silent death that orphans a tool's
//!   process group; only a second signal exits at once (130), killing the tracked process
//!   groups (MCP servers, running tools) on the way out.
//! - The sink is flushed when the core goes quiet: no queued input and nothing ready on the
//!   channel, or when [`FLUSH_AT_BYTES`] are buffered. A burst of inputs therefore costs one
//!   stdout write per 64 KiB, and memory stays bounded while input floods in; provider tasks
//!   wait when [`crate::provider::flow::WINDOW_ITEMS`] of their items are still queued
//!   (backpressure). When a flush finds the client
//!   gone (EPIPE on stdout), end of input is queued once, exactly as if stdin had ended.
//! - Time: `now` is milliseconds since the runtime started (monotonic `Instant`). The next
//!   deadline comes from `core.poll_timeout()`; when it is due the core gets `Input::Timeout`.
//! - Every spawned request is aborted on `CancelRequest`, on a newer attempt of the same request,
//!   and at exit; a task that panics is reported to the core as `Input::Crashed`, never a stall.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use openmax_core::conversation::ModelRequest;
use openmax_core::machine::{Effect, HookEvent, HookOutcome, Input, Output};
use openmax_core::provider::RequestId;
use openmax_core::tool::{RunSandbox, ToolOutcome};
use openmax_core::{Core, Millis};

use super::backend::Backend;
use super::input::InputTx;
use super::sink::Sink;

/// Events buffered past this are flushed even while inputs keep coming, so a provider faster
/// than the client never piles events up in memory: the blocking write to stdout paces the loop
/// (and, through the backpressure window, the provider).
pub const FLUSH_AT_BYTES: usize = 64 * 1024;

/// The most a session's end waits for its MCP servers' HTTP sessions to be deleted.
const MCP_CLOSE: Duration = Duration::from_secs(2);

/// A core with its effect backends and its event sink.
pub struct Runtime<S: Sink> {
    core: Core,
    backend: Backend,
    sink: S,
    tx: InputTx,
    rx: mpsc::UnboundedReceiver<Input>,
    ready: VecDeque<Input>,
    requests: BTreeMap<RequestId, AbortHandle>,
    tool_cancels: BTreeMap<String, oneshot::Sender<()>>,
    /// The running `task` calls' channels down to their children: the core's answers to the
    /// approvals they asked for.
    task_answers: BTreeMap<String, mpsc::UnboundedSender<(String, bool)>>,
    hook_cancels: BTreeMap<u64, oneshot::Sender<()>>,
    start: Instant,
    signals: Option<SignalPolicy>,
    /// Run before a second signal exits the process at once ([`Runtime::before_forced_exit`]).
    forced_exit_hook: Option<fn()>,
    /// End of input was queued because the sink found the client gone.
    client_gone: bool,
    /// Notices from tool sources (MCP `tools/list_changed`), forwarded as `Input::Notice`.
    notices: Option<mpsc::UnboundedReceiver<String>>,
}

/// What SIGINT / SIGTERM do (see [`Runtime::handle_signals`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalPolicy {
    /// `-p`: the first signal cancels the turn (its tools' process groups are killed; the
    /// core ends the session after its `done`); a second one exits at once with 130.
    CancelTurn,
    /// `--stdio`: the first signal is end of input (like `quit`: the turn in flight drains,
    /// pending approvals are declined); a second one exits at once with 130.
    EndInput,
}

impl<S: Sink> Runtime<S> {
    /// A runtime whose clock starts now.
    pub fn new(core: Core, backend: Backend, sink: S) -> Runtime<S> {
        let (tx, rx) = mpsc::unbounded_channel();
        Runtime {
            core,
            backend,
            sink,
            tx,
            rx,
            ready: VecDeque::new(),
            requests: BTreeMap::new(),
            tool_cancels: BTreeMap::new(),
            task_answers: BTreeMap::new(),
            hook_cancels: BTreeMap::new(),
            start: Instant::now(),
            signals: None,
            forced_exit_hook: None,
            client_gone: false,
            notices: None,
        }
    }

    /// Forward these notices to the core as harness notes while the loop runs.
    pub fn forward_notices(&mut self, rx: mpsc::UnboundedReceiver<String>) {
        self.notices = Some(rx);
    }

    /// Turn SIGINT and SIGTERM into inputs (unix) instead of killing the process outright, so
    /// a tool's process group is not orphaned by Ctrl-C.
    pub fn handle_signals(&mut self, policy: SignalPolicy) {
        self.signals = Some(policy);
    }

    /// `hook` runs before a second signal exits the process at once: the terminal UI passes
    /// the function that gives the terminal back, so its raw mode never outlives the process.
    pub fn before_forced_exit(&mut self, hook: fn()) {
        self.forced_exit_hook = Some(hook);
    }

    #[cfg(unix)]
    fn spawn_signal_task(&self, policy: SignalPolicy) {
        use tokio::signal::unix::{signal, SignalKind};
        let tx = self.tx.clone();
        let hook = self.forced_exit_hook;
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        tokio::spawn(async move {
            let mut seen = 0u32;
            loop {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
                seen += 1;
                if seen > 1 {
                    if let Some(hook) = hook {
                        hook();
                    }
                    crate::sandbox::reaper::exit_now(130);
                }
                if policy == SignalPolicy::CancelTurn {
                    let cancel = openmax_core::wire::Command::Cancel.to_line();
                    let _ = tx.send(Input::Line(cancel));
                } else {
                    let _ = tx.send(Input::EndOfInput);
                }
            }
        });
    }

    #[cfg(not(unix))]
    fn spawn_signal_task(&self, _policy: SignalPolicy) {}

    /// The sink (a `-p` run hands its sink the [`Runtime::sender`]).
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// A sender for inputs from outside (the stdin reader).
    pub fn sender(&self) -> InputTx {
        self.tx.clone()
    }

    /// Queue an input ahead of the channel (`-p` feeds its command this way).
    pub fn push_input(&mut self, input: Input) {
        self.ready.push_back(input);
    }

    fn now(&self) -> Millis {
        Millis(self.start.elapsed().as_millis() as u64)
    }

    /// What runs beside the loop: the signal task, the persistence thread, the forwarder of
    /// the MCP servers' notices.
    fn start_tasks(&mut self) {
        if let Some(policy) = self.signals {
            self.spawn_signal_task(policy);
        }
        if let Err(e) = self.backend.start_persistence(self.tx.clone()) {
            // Appends stay inline: slower, never lost.
            eprintln!("openmax: {e}");
        }
        if let Some(mut rx) = self.notices.take() {
            let tx = self.tx.clone();
            tokio::spawn(async move {
                while let Some(text) = rx.recv().await {
                    if tx.send(Input::Notice { text }).is_err() {
                        break;
                    }
                }
            });
        }
    }

    /// What the runtime itself keeps of an input before the core takes it: a finished call's
    /// or hook's cancel handle dropped, the backend told what was planned, done or installed.
    fn note_input(&mut self, input: &Input) {
        match input {
            Input::ToolDone { call_id, outcome } => {
                self.tool_cancels.remove(call_id);
                self.task_answers.remove(call_id);
                self.backend.note_tool_done(outcome);
            }
            Input::ToolPlanned { call_id, plan } => self.backend.note_planned(call_id, plan),
            Input::HookDone { hook_run, .. } => {
                self.hook_cancels.remove(hook_run);
            }
            Input::Frozen { .. } => self.backend.install_refreeze(),
            Input::Provider { .. } => self.backend.provider_item_taken(),
            _ => {}
        }
    }

    /// Run until the core asks to exit; returns the exit code and the sink.
    pub async fn run(mut self) -> (i32, S) {
        self.start_tasks();
        loop {
            let input = match self.ready.pop_front() {
                Some(i) => i,
                None => self.next_input().await,
            };
            if matches!(input, Input::Line(_)) && !self.core.in_turn() {
                // An undo run meanwhile by another process is told before the next command.
                let notes = self.backend.take_undo_notes();
                if !notes.is_empty() {
                    self.ready.push_front(input);
                    for text in notes.into_iter().rev() {
                        self.ready.push_front(Input::Notice { text });
                    }
                    continue;
                }
            }
            #[cfg(feature = "panic-trigger")]
            if let Input::Line(line) = &input {
                crate::panic_trigger::check_line(line);
            }
            self.note_input(&input);
            let now = self.now();
            self.core.handle(now, input);
            let mut exit = None;
            while let Some(out) = self.core.poll() {
                match out {
                    Output::Event(ev) => self.sink.event(ev),
                    Output::Effect(effect) => {
                        if let Some(code) = self.perform(effect) {
                            exit = Some(code);
                        }
                    }
                }
            }
            if let Some(code) = exit {
                self.sink.flush();
                self.shutdown();
                self.backend.close_mcp(MCP_CLOSE).await;
                self.backend.finish_persistence();
                self.backend.finish_checkpoints();
                return (code, self.sink);
            }
            if (self.ready.is_empty() && self.rx.is_empty())
                || self.sink.buffered_bytes() >= FLUSH_AT_BYTES
            {
                self.sink.flush();
            }
            if !self.client_gone && self.sink.client_gone() {
                self.client_gone = true;
                eprintln!("openmax: the client closed stdout; ending input as at EOF");
                self.ready.push_back(Input::EndOfInput);
            }
        }
    }

    async fn next_input(&mut self) -> Input {
        match self.core.poll_timeout() {
            Some((at, _reason)) => {
                let deadline = self.start + Duration::from_millis(at.0);
                tokio::select! {
                    biased;
                    _ = tokio::time::sleep_until(deadline.into()) => Input::Timeout,
                    i = self.rx.recv() => i.unwrap_or(Input::EndOfInput),
                }
            }
            // We hold a sender ourselves, so the channel never closes; the fallback is moot.
            None => self.rx.recv().await.unwrap_or(Input::EndOfInput),
        }
    }

    fn shutdown(&mut self) {
        for (_, h) in std::mem::take(&mut self.requests) {
            h.abort();
        }
        for (_, c) in std::mem::take(&mut self.tool_cancels) {
            let _ = c.send(());
        }
        for (_, c) in std::mem::take(&mut self.hook_cancels) {
            let _ = c.send(());
        }
    }

    /// A model request on a task of its own; a panic of that task is the turn's crash.
    fn send_request(&mut self, request: RequestId, attempt: u32, body: ModelRequest) {
        let handle = self
            .backend
            .spawn_request(request, attempt, body, self.tx.clone());
        if let Some(old) = self.requests.insert(request, handle.abort_handle()) {
            old.abort();
        }
        let tx = self.tx.clone();
        tokio::spawn(async move {
            if let Err(e) = handle.await {
                if e.is_panic() {
                    let _ = tx.send(Input::Crashed {
                        message: format!("the model request task crashed: {e}"),
                    });
                }
            }
        });
    }

    /// A tool call's plan, worked out on a blocking thread (it may read files).
    fn plan_tool(&mut self, call_id: String, name: String, args: serde_json::Value) {
        let job = self.backend.plan_job(name, args);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let input = match tokio::task::spawn_blocking(job).await {
                Ok(plan) => Input::ToolPlanned {
                    call_id,
                    plan: Box::new(plan),
                },
                Err(e) => Input::Crashed {
                    message: format!("inspecting tool call {call_id} crashed: {e}"),
                },
            };
            let _ = tx.send(input);
        });
    }

    /// A tool call on a task of its own, cancellable by `CancelTool`.
    fn run_tool(
        &mut self,
        call_id: String,
        name: String,
        args: serde_json::Value,
        sandbox: RunSandbox,
    ) {
        let (cancel_tx, cancel_rx) = oneshot::channel();
        self.tool_cancels.insert(call_id.clone(), cancel_tx);
        // A `task` call's child reaches the core over its link (its approval requests up,
        // the answers down).
        let link = (name == openmax_core::tool::TASK_TOOL).then(|| {
            let (answers_tx, answers) = mpsc::unbounded_channel();
            self.task_answers.insert(call_id.clone(), answers_tx);
            crate::tasks::Link {
                call_id: call_id.clone(),
                inputs: self.tx.clone(),
                answers,
                mode: self.core.mode(),
            }
        });
        let job = tokio::spawn(
            self.backend
                .run_job(&call_id, name, args, cancel_rx, sandbox, link),
        );
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let outcome = match job.await {
                Ok(o) => o,
                Err(e) => ToolOutcome {
                    ok: false,
                    output: format!("the tool crashed: {e}"),
                    diffs: Vec::new(),
                    images: Vec::new(),
                },
            };
            let _ = tx.send(Input::ToolDone { call_id, outcome });
        });
    }

    /// A hook process on a task of its own, cancellable when its turn ends.
    fn run_hook(
        &mut self,
        hook_run: u64,
        hook: String,
        event: HookEvent,
        payload: serde_json::Value,
    ) {
        let (cancel_tx, cancel_rx) = oneshot::channel();
        self.hook_cancels.insert(hook_run, cancel_tx);
        let job = tokio::spawn(self.backend.hook_job(&hook, event, payload, cancel_rx));
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let outcome = match job.await {
                Ok(o) => o,
                Err(e) => HookOutcome::Failed {
                    detail: format!("the hook task crashed: {e}"),
                },
            };
            let _ = tx.send(Input::HookDone { hook_run, outcome });
        });
    }

    /// Carry out one effect. Returns the exit code for [`Effect::Exit`]. One arm per effect,
    /// as the core's transitions are one arm each (longer than most functions for that reason:
    /// an arm that grows past a few lines becomes a method of its own).
    fn perform(&mut self, effect: Effect) -> Option<i32> {
        match effect {
            Effect::SendRequest {
                request,
                attempt,
                body,
            } => self.send_request(request, attempt, *body),
            Effect::CancelRequest { request } => {
                if let Some(h) = self.requests.remove(&request) {
                    h.abort();
                }
            }
            Effect::PlanTool {
                call_id,
                name,
                args,
            } => self.plan_tool(call_id, name, args),
            Effect::RunTool {
                call_id,
                name,
                args,
                sandbox,
            } => self.run_tool(call_id, name, args, sandbox),
            Effect::AnswerTask {
                call_id,
                approval_id,
                approved,
            } => {
                if let Some(tx) = self.task_answers.get(&call_id) {
                    let _ = tx.send((approval_id, approved));
                }
            }
            Effect::CancelTool { call_id } => {
                if let Some(c) = self.tool_cancels.remove(&call_id) {
                    let _ = c.send(());
                }
            }
            Effect::RunHook {
                hook_run,
                hook,
                event,
                payload,
            } => self.run_hook(hook_run, hook, event, payload),
            Effect::Persist { ticket, records } => {
                // On the writer thread: the answer comes on the channel once it is durable.
                if let Some(input) = self.backend.persist(ticket, records) {
                    self.ready.push_back(input);
                }
            }
            Effect::SaveMode { mode } => {
                let input = match self.backend.save_mode(mode) {
                    Ok(()) => Input::ModeSaved { mode },
                    Err(message) => Input::ModeSaveFailed { mode, message },
                };
                self.ready.push_back(input);
            }
            Effect::ApproveSource {
                approval_id,
                source_path,
                source_sha,
            } => {
                let input = match self.backend.approve_source(&source_path, &source_sha) {
                    Ok(()) => Input::SourceApproved { approval_id },
                    Err(message) => Input::SourceApprovalFailed {
                        approval_id,
                        message,
                    },
                };
                self.ready.push_back(input);
            }
            Effect::Refreeze => {
                // MCP servers start and list asynchronously; the core holds client input until
                // `Frozen` arrives, and the backend installs the new freeze just before it.
                let job = self.backend.refreeze_job();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let snapshot = Box::new(job.await);
                    let _ = tx.send(Input::Frozen { snapshot });
                });
            }
            Effect::Checkpoint {
                turn,
                moment,
                prompt,
            } => {
                // On the checkpoint thread; the calls and hooks of the turn wait for it.
                if let Some(input) = self
                    .backend
                    .checkpoint(turn, moment, prompt, self.tx.clone())
                {
                    self.ready.push_back(input);
                }
            }
            Effect::Exit { code } => return Some(code),
        }
        None
    }
}
